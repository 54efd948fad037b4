"""Rerank speed and quality together: the sentence re-ranker's `sentence_budget` (model calls per query) against
nDCG@10 and the rerank stage's latency, on the cached SciFact candidates (`bench fusion` builds them).

Per query: the convex (w=0.5) top 30 of the cached vector and lexical candidates is re-ordered by
`search.rerank_order`, as `--rerank` does. "cold" gives every query a fresh re-ranker (nothing cached: the worst
case, a first question); "warm" keeps one re-ranker across the query stream, as a running server or
`KnowledgeBase` does. Budgets are chosen on train; `--split test` is run once, at the end, for the report.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, percentiles, write_results
from bench.fusion_sweep import cached_candidates, documents
from ragstead.embeddings import default_embedder, make_embedder
from ragstead.evaluation.metrics import summarize
from ragstead.retrieval.fusion import convex_fusion
from ragstead.retrieval.rerank import SentenceMaxSimReranker, fill_sentence_vectors
from ragstead.retrieval.search import SearchOptions, rerank_order
from ragstead.stores.sqlite import SqliteStore

TOP_N = 30
# (label, sentence budget, warm): budget None is today's re-ranker (every sentence of the 30 candidates).
CONFIGS: list[tuple[str, int | None, bool]] = [
    ("budget 4, cold", 4, False), ("budget 8, cold", 8, False), ("budget 16, cold", 16, False),
    ("budget 32, cold", 32, False), ("budget 8, warm", 8, True), ("budget 16, warm", 16, True),
    ("all sentences, warm (today)", None, True),
]
# The same budgets with `_abstaining_head` (label suffix " abstain").
ABSTAIN = [("budget 8, cold, abstain", 8, False), ("budget 16, cold, abstain", 16, False)]
# Every sentence through a static model (WordLlama, the `models` extra): no transformer at query time.
STATIC = [("all sentences, wordllama-256, cold", None, False)]
# Sentence vectors stored at index time (`sentence_vectors = true`): read from the index, not embedded; the
# default budget of 16 applies only to sentences the index lacks (none here). Timed: the store read included.
STORED = [("stored sentence vectors (sentence_vectors = true), cold", 16, False)]


def _minmax(values: list[float]) -> list[float]:
    low, high = min(values), max(values)
    return [(v - low) / (high - low) if high > low else 0.0 for v in values]


def _abstaining_head(question: str, query_vector: Any, rows: list[dict[str, Any]], reranker: Any,
                     weight: float) -> list[dict[str, Any]]:
    """A variant of `rerank_order` (not shipped): a candidate without an embedded sentence keeps its first-stage
    score as its second-stage one (the re-ranker abstains instead of guessing the median)."""
    first = _minmax([row["score"] for row in rows])
    known = reranker.score_known(question, query_vector, [row["text"] for row in rows])
    scored = [i for i, k in enumerate(known) if k is not None]
    second = list(first)
    if scored:
        for i, value in zip(scored, _minmax([known[i] for i in scored]), strict=True):
            second[i] = value
    order = sorted(range(len(rows)), key=lambda i: (-(first[i] + weight * second[i]), i))
    return [rows[i] for i in order]


def _sample(queries: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """`limit` queries spread evenly over the split (all when limit is 0)."""
    if not limit or limit >= len(queries):
        return queries
    step = len(queries) / limit
    return [queries[int(i * step)] for i in range(limit)]


def run(queries: list[dict[str, Any]], docs: dict[int, str], texts: dict[int, str], embedder: Any,
        budget: int | None, warm: bool, rerank: bool = True, abstain: bool = False,
        sentence_model: Any = None, store: Any = None) -> dict[str, Any]:
    """`sentence_model`: embed the sentences (and the question, timed) with this model instead of the index's.
    `store`: an index holding sentence vectors, which the re-ranker reads first (`SentenceMaxSimReranker.preload`)."""
    chunk_ids = dict(store._db.execute("SELECT id, chunk_id FROM chunks")) if store is not None else {}
    options = SearchOptions(rerank_top_n=TOP_N)
    scorer = sentence_model or embedder
    shared = SentenceMaxSimReranker(scorer, sentence_budget=budget)
    runs, qrels, latencies, embedded = {}, {}, [], 0
    for q in queries:
        fused = convex_fusion([tuple(h) for h in q["vector"]], [tuple(h) for h in q["lexical"]], 0.5)
        order = sorted(fused, key=lambda r: -fused[r])
        if rerank:
            reranker = shared if warm else SentenceMaxSimReranker(scorer, sentence_budget=budget)
            before = reranker.embedded
            # The search has the index model's query vector already: not timed. Another model embeds it (timed).
            query_vector = None if sentence_model else embedder.embed_query(q["query"])
            rows = [{"id": r, "text": texts[r], "score": fused[r]} for r in order[:TOP_N]]
            started = time.perf_counter()
            if store is not None:
                reranker.preload(store, [(chunk_ids[r], texts[r]) for r in order[:TOP_N]])
            if abstain:
                head = _abstaining_head(q["query"], query_vector, rows, reranker, options.rerank_weight)
            else:
                ranked, _ = rerank_order(q["query"], query_vector, [row["text"] for row in rows],
                                         [row["score"] for row in rows], reranker, options.rerank_weight)
                head = [rows[i] for i in ranked]
            latencies.append((time.perf_counter() - started) * 1000)
            embedded += reranker.embedded - before
            order = [row["id"] for row in head] + order[TOP_N:]
        runs[q["qid"]], qrels[q["qid"]] = documents(order, docs), q["relevant"]
    metrics = summarize(runs, qrels, (10, 100))
    return {"ndcg@10": metrics["ndcg@10"], "recall@100": metrics["recall@100"], "rerank_ms": percentiles(latencies),
            "sentences_embedded_per_query": round(embedded / max(1, len(queries)), 1)}


def main(dataset: Path, split: str = "train", limit: int = 120, only: str = "") -> None:
    index_db, docs, splits = cached_candidates(dataset)
    queries = _sample(splits[split], limit)
    with sqlite3.connect(index_db) as conn:
        texts = dict(conn.execute("SELECT id, text FROM chunks"))
    embedder = default_embedder()
    embedder.embed_query("warm-up")  # the session's first run allocates; it is no query's cost
    table: dict[str, Any] = {"no rerank": run(queries, docs, texts, embedder, None, False, rerank=False)}
    rows = [["configuration", f"{split} nDCG@10", "R@100", "rerank p50 ms", "rerank p95 ms",
             "sentences embedded/query"]]
    rows.append(["no rerank (hybrid, convex 0.5)", f"{table['no rerank']['ndcg@10']:.4f}",
                 f"{table['no rerank']['recall@100']:.4f}", "-", "-", "0"])
    print(rows[-1], flush=True)
    for label, budget, warm in CONFIGS + ABSTAIN + STATIC + STORED:
        if only and label not in only.split(";"):
            continue
        static = make_embedder("wordllama-256") if "wordllama" in label else None
        store, index_cost = _stored_index(index_db, embedder) if label.startswith("stored") else (None, {})
        result = run(queries, docs, texts, embedder, budget, warm, abstain=label.endswith("abstain"),
                     sentence_model=static, store=store)
        table[label] = {**result, **index_cost}
        rows.append([label, f"{result['ndcg@10']:.4f}", f"{result['recall@100']:.4f}",
                     f"{result['rerank_ms']['p50']:.0f}", f"{result['rerank_ms']['p95']:.0f}",
                     f"{result['sentences_embedded_per_query']}"])
        print(rows[-1], flush=True)
        _write(dataset, split, queries, table, rows)  # after each row: a long run keeps what it measured


def _stored_index(index_db: Path, embedder: Any) -> tuple[Any, dict[str, Any]]:
    """A copy of the cached SciFact index with every chunk's sentence vectors stored (made once, kept beside the
    cache), and what storing them cost: their time against re-embedding the same chunks, in the same run."""
    copy = index_db.with_name(f"{index_db.stem}-sentences.db")
    cost_file = copy.with_suffix(".cost.json")
    if not cost_file.exists():
        copy.unlink(missing_ok=True)
        with sqlite3.connect(index_db) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        for suffix in (".tantivy", ".vectors"):  # the lexical and vector files beside it
            shutil.rmtree(copy.with_suffix(suffix), ignore_errors=True)
            if index_db.with_suffix(suffix).is_dir():
                shutil.copytree(index_db.with_suffix(suffix), copy.with_suffix(suffix))
        store = SqliteStore(copy)
        with sqlite3.connect(copy) as conn:
            chunk_texts = [text for (text,) in conn.execute("SELECT text FROM chunks ORDER BY id")]
        started = time.perf_counter()
        embedder.embed_documents(chunk_texts)  # what indexing spends on the model for these chunks
        chunk_seconds = time.perf_counter() - started
        started = time.perf_counter()
        filled = fill_sentence_vectors(store, embedder)
        fill_seconds = time.perf_counter() - started
        sentences = sum(len(m) for m in store.sentence_vectors(
            [cid for (cid,) in store._db.execute("SELECT chunk_id FROM chunks")]).values())
        cost_file.write_text(json.dumps({
            "chunks": filled, "sentences": sentences, "chunk_embedding_seconds": round(chunk_seconds, 1),
            "sentence_vector_seconds": round(fill_seconds, 1),
            "sentence_vectors_over_chunk_embedding": round(fill_seconds / chunk_seconds, 2),
            "sentence_vector_bytes": os.path.getsize(copy) - os.path.getsize(index_db)}, indent=2))
        store.close()
    return SqliteStore(copy), {"index_cost": json.loads(cost_file.read_text())}


def _write(dataset: Path, split: str, queries: list[dict[str, Any]], table: dict[str, Any],
           rows: list[list[str]]) -> None:
    """Write the results; rows of an earlier run on the same sample that this run did not repeat are kept."""
    name = f"rerank_speed_{dataset.name}_{split}_{len(queries)}q"
    if (RESULTS / f"{name}.json").exists():
        earlier = json.loads((RESULTS / f"{name}.json").read_text())["configs"]
        for label, result in earlier.items():
            if label not in table and label != "no rerank":
                table[label] = result
                rows.append([label, f"{result['ndcg@10']:.4f}", f"{result['recall@100']:.4f}",
                             f"{result['rerank_ms']['p50']:.0f}", f"{result['rerank_ms']['p95']:.0f}",
                             f"{result['sentences_embedded_per_query']}"])
    write_results(f"rerank_speed_{dataset.name}_{split}_{len(queries)}q", {"dataset": str(dataset), "split": split,
                                                           "queries": len(queries), "top_n": TOP_N,
                                                           "configs": table}, rows)
