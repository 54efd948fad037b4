"""Lexical analysis and title handling on a BEIR dataset: every variant tried, on train and test, in one table.

Each variant is a scratch tantivy index (in memory) over the chunks of the cached SciFact index (`bench
quality` builds it), so the chunks, their ids and the vector candidates are the same for every row: only
the analyzer (stemming, stop words), the query's stop-word handling or the title changes. Each row reports
lexical alone and hybrid (the shipped convex fusion, w = 0.5, depth 300, with the cached vector top 300).
The default is chosen on train; test is reported beside it and never used to choose.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

from bench.common import percentiles, write_results
from bench.fusion_sweep import cached_candidates, documents
from ragstead.evaluation.cases import load_beir
from ragstead.evaluation.metrics import summarize
from ragstead.filters import QueryFilters
from ragstead.retrieval.fusion import convex_fusion
from ragstead.retrieval.lexical_query import query_terms
from ragstead.stores.lexical_index import LexicalIndex, LexicalRow

DEPTH = 300
_WORD = re.compile(r"\w+", re.UNICODE)


def analyzer(stem: bool, index_stop_words: bool) -> tantivy.TextAnalyzer:
    """The shipped analyzer (`text_analyzer`: simple split, long-token cut, lowercase, ASCII folding,
    Porter2) with stemming and tantivy's English stop-word filter switched on or off."""
    builder = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.remove_long(40))
               .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.ascii_fold()))
    if index_stop_words:
        builder = builder.filter(tantivy.Filter.stopword("english"))
    if stem:
        builder = builder.filter(tantivy.Filter.stemmer("english"))
    return builder.build()


def all_words(text: str) -> list[str]:
    """Query terms without the query-side stop-word removal of `query_terms`."""
    return list(dict.fromkeys(w.strip("_") for w in _WORD.findall(text.lower()) if w.strip("_")))


@dataclass(frozen=True)
class Variant:
    name: str
    stem: bool = True
    index_stop_words: bool = False
    terms: Callable[[str], list[str]] = query_terms
    title: str = "prefix"  # prefix (shipped: "title\n\ntext", chunked together) | none | twice


VARIANTS = (
    Variant("shipped: Porter2, query stop words dropped, title + text"),
    Variant("no stemming", stem=False),
    Variant("query stop words kept", terms=all_words),
    Variant("stop words removed from the index too", index_stop_words=True),
    Variant("no stemming, stop words removed from the index", stem=False, index_stop_words=True),
    Variant("text only (no title)", title="none"),
    Variant("title twice (a 2x title boost)", title="twice"),
)


def titled_chunks(index_db: Path, dataset: Path) -> list[tuple[int, str, str | None]]:
    """Every chunk as (rowid, text, title): the title only for a first chunk that begins with it."""
    corpus = load_beir(dataset, "test").corpus
    with sqlite3.connect(index_db) as conn:
        rows = conn.execute("SELECT id, file_path, chunk_index, text FROM chunks").fetchall()
    out = []
    for rowid, path, position, text in rows:
        doc_title = corpus[path.removeprefix("kb/beir/")][0]
        out.append((rowid, text, doc_title if position == 0 and doc_title and text.startswith(doc_title) else None))
    return out


def chunk_texts(chunks: list[tuple[int, str, str | None]], title: str) -> dict[int, str]:
    """chunk id -> the text to index for a title variant (prefix: as indexed; none; twice)."""
    texts = {}
    for rowid, text, doc_title in chunks:
        if doc_title and title == "none":
            text = text[len(doc_title):].lstrip()
        elif doc_title and title == "twice":
            text = f"{doc_title}\n\n{text}"
        texts[rowid] = text
    return texts


def run_variant(variant: Variant, texts: dict[int, str], splits: dict[str, list[dict[str, Any]]],
                docs: dict[int, str]) -> dict[str, Any]:
    index = LexicalIndex(None, analyzer(variant.stem, variant.index_stop_words))
    index.acquire()
    # Private rows: QueryFilters() is private-only by default, as a user's own notes are.
    index.replace_all(1, (LexicalRow(key, text, "beir", True, None, None, ()) for key, text in texts.items()))
    index.release()
    out: dict[str, Any] = {}
    for split, queries in splits.items():
        lexical_runs, hybrid_runs, qrels, times = {}, {}, {}, []
        for q in queries:
            started = time.perf_counter()
            lexical = index.search(variant.terms(q["query"]), QueryFilters(), DEPTH)
            times.append((time.perf_counter() - started) * 1000)
            fused = convex_fusion([tuple(h) for h in q["vector"]], lexical, 0.5)
            lexical_runs[q["qid"]] = documents([r for r, _ in lexical], docs)
            hybrid_runs[q["qid"]] = documents(sorted(fused, key=lambda r: -fused[r]), docs)
            qrels[q["qid"]] = q["relevant"]
        out[split] = {"lexical": summarize(lexical_runs, qrels, (10, 100)),
                      "hybrid": summarize(hybrid_runs, qrels, (10, 100)), "lexical_ms": percentiles(times)}
    return out


def main(dataset: Path) -> None:
    index_db, docs, splits = cached_candidates(dataset)
    table: dict[str, Any] = {}
    rows = [["variant", "train lexical nDCG@10", "train hybrid nDCG@10", "test lexical nDCG@10",
             "test hybrid nDCG@10", "test hybrid R@100", "lexical search p50 / p95 ms (train, depth 300)"]]
    chunks = titled_chunks(index_db, dataset)  # read once: every variant re-analyses the same chunks
    titled = sum(1 for _, _, doc_title in chunks if doc_title)
    for variant in VARIANTS:
        result = table[variant.name] = run_variant(variant, chunk_texts(chunks, variant.title), splits, docs)
        train, test = result["train"], result["test"]
        rows.append([variant.name, f"{train['lexical']['ndcg@10']:.4f}", f"{train['hybrid']['ndcg@10']:.4f}",
                     f"{test['lexical']['ndcg@10']:.4f}", f"{test['hybrid']['ndcg@10']:.4f}",
                     f"{test['hybrid']['recall@100']:.4f}",
                     f"{train['lexical_ms']['p50']:.2f} / {train['lexical_ms']['p95']:.2f}"])
    best = max(table, key=lambda n: table[n]["train"]["hybrid"]["ndcg@10"])
    write_results(f"lexical_{dataset.name}", {"dataset": str(dataset), "first_chunks_with_title": titled,
                                              "best_on_train_hybrid": best, "variants": table}, rows)
    print(f"best on train (hybrid): {best}")
