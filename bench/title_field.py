"""A lexical-only title field (issue 23, part 3), replayed on top of today's default (convex fusion + query
feedback, 300 candidates per side) before building it into the stores.

A scratch tantivy index of the cached SciFact index's chunks with the store's analyzer holds `text` and the
document's `title` as two fields. Variants:
- a separate title field: BM25 over `title` with weight w added to BM25 over `text` (tantivy sums the boosted
  clauses), w in 0.25, 0.5, 1 and 2. At w 0 this is the store's lexical scoring over a fresh index; the
  store's index statistics also count its generation-marker document and documents rewritten over time,
  so its scores differ in the third digit (test nDCG@10 0.7377 there, 0.7365 here). Compare the variants
  with this table's own default row;
- the title doubled in the text field, the variant the first lexical sweep liked (+0.005 on train before
  query feedback).
Every variant on SciFact train; test is scored once, only for a variant train chose over the default.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from bench.common import RESULTS, write_results
from bench.fusion_sweep import chunk_docs
from bench.query_feedback import convex_order, rocchio, score
from ragstead.embeddings import default_embedder
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.search import SearchOptions
from ragstead.stores.lexical_index import text_analyzer

DEPTH = 300
WEIGHTS = (0.25, 0.5, 1.0, 2.0)


class ScratchIndex:
    """The chunks in memory, `text` (optionally with the title in front) and `title` as separate fields."""

    def __init__(self, rows: list[tuple[int, str, str]], title_in_text: bool) -> None:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", tokenizer_name="en", index_option="freq")
        builder.add_text_field("title", tokenizer_name="en", index_option="freq")
        builder.add_unsigned_field("key", indexed=True, fast=True)
        self.schema, self.analyzer = builder.build(), text_analyzer()
        self.index = tantivy.Index(self.schema)
        self.index.register_tokenizer("en", self.analyzer)
        writer = self.index.writer(64_000_000, 1)
        for key, text, title in rows:
            doc = tantivy.Document()
            doc.add_unsigned("key", key)
            doc.add_text("text", f"{title}\n{text}" if title_in_text else text)
            doc.add_text("title", title)
            writer.add_document(doc)
        writer.commit()
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, question: str, title_weight: float) -> list[tuple[int, float]]:
        tokens = list(dict.fromkeys(t for term in query_terms(question) for t in self.analyzer.analyze(term)))
        if not tokens:
            return []
        clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "text", t)) for t in tokens]
        if title_weight:
            clauses += [(tantivy.Occur.Should, tantivy.Query.boost_query(
                tantivy.Query.term_query(self.schema, "title", t), title_weight)) for t in tokens]
        hits = self.searcher.search(tantivy.Query.boolean_query(clauses), DEPTH, count=False).hits
        keys = self.searcher.fast_field_values("key", [address for _, address in hits]) if hits else []
        return [(int(key), float(s)) for (s, _), key in zip(hits, keys, strict=True)]


def main(index_db: Path | None = None) -> None:
    index_db = index_db or RESULTS / ".cache" / "scifact.db"
    with sqlite3.connect(index_db) as conn:
        rows = conn.execute("SELECT c.id, c.text, coalesce(d.title, ''), c.embedding FROM chunks c "
                            "JOIN documents d USING (doc_id) ORDER BY c.id").fetchall()
    ids = np.array([r[0] for r in rows])
    row_of = {int(r): i for i, r in enumerate(ids)}
    vectors = np.vstack([np.frombuffer(r[3], dtype=np.float32) for r in rows]).astype(np.float64)
    docs = chunk_docs(index_db)
    embedder = default_embedder()
    cache = RESULTS / ".cache"
    splits = {s: json.loads((cache / f"candidates-scifact-{s}.json").read_text()) for s in ("train", "test")}
    for queries in splits.values():
        for q in queries:
            q["vector"] = [(int(r), float(s)) for r, s in q["vector"]]
            q["qvec"] = np.asarray(embedder.embed_query(q["query"]), dtype=np.float64)
    feedback = {"k": SearchOptions.feedback_k, "beta": SearchOptions.feedback_weight}
    indexes = {False: ScratchIndex([r[:3] for r in rows], False), True: ScratchIndex([r[:3] for r in rows], True)}

    def run(split: str, title_in_text: bool, weight: float) -> dict[str, float]:
        orders = {}
        for q in splits[split]:
            lexical = indexes[title_in_text].search(q["query"], weight)
            first = convex_order(q["vector"], lexical)
            vector = rocchio(q["qvec"], first, vectors, row_of, ids, feedback)
            orders[q["qid"]] = convex_order(vector, lexical)
        return score(splits[split], docs, orders)

    variants = {"none (the default)": (False, 0.0), **{f"title field, weight {w}": (False, w) for w in WEIGHTS},
                "title doubled in the text field": (True, 0.0)}
    results: dict[str, Any] = {"train": {}, "test": {}}
    rows_out = [["variant", "train nDCG@10", "train R@100", "test nDCG@10", "test R@100"]]
    for name, (title_in_text, weight) in variants.items():
        results["train"][name] = m = run("train", title_in_text, weight)
        rows_out.append([name, f"{m['ndcg@10']:.4f}", f"{m['recall@100']:.4f}", "", ""])
    best = max(results["train"], key=lambda n: results["train"][n]["ndcg@10"])
    if best != "none (the default)":  # test once, for a variant train chose, beside the default
        for name in ("none (the default)", best):
            results["test"][name] = m = run("test", *variants[name])
            rows_out.append([f"test: {name}", "", "", f"{m['ndcg@10']:.4f}", f"{m['recall@100']:.4f}"])
    results["chosen_on_train"] = best
    write_results("title_field_scifact", results, rows_out)
