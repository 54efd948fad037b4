"""Fusion and rerank sweep on a BEIR dataset: every configuration tried, on train and test, in one table.

Candidates (vector and lexical top 300 chunks per query, with scores) are collected once per split
from the cached SciFact index (`bench quality` builds it) and kept in bench/results/.cache/, so each
configuration is only a re-ranking of the same lists. The default is picked on train; test is reported
beside it and never used to choose.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import RESULTS, write_results
from ragstead.embeddings import default_embedder
from ragstead.evaluation.cases import load_beir
from ragstead.evaluation.metrics import summarize
from ragstead.filters import QueryFilters
from ragstead.retrieval.fusion import convex_fusion, reciprocal_rank_fusion
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.rerank import SentenceMaxSimReranker
from ragstead.retrieval.search import rerank_order
from ragstead.stores.sqlite import SqliteStore

DEPTH = 300
Hits = list[tuple[int, float]]


def collect(dataset: Path, split: str, index_db: Path) -> list[dict[str, Any]]:
    """Per query: relevant docs, vector hits and lexical hits (chunk rowid, score), depth 300 each."""
    cache = RESULTS / ".cache" / f"candidates-{dataset.name}-{split}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    store, embedder = SqliteStore(index_db), default_embedder()
    filters, out = QueryFilters(), []
    for case in load_beir(dataset, split).cases:
        vector = store.vector_search(embedder.embed_query(case.query), filters, DEPTH)
        lexical = store.lexical_search(query_terms(case.query), filters, DEPTH)
        out.append({"qid": case.qid, "query": case.query, "relevant": case.relevant,
                    "vector": [[int(r), float(s)] for r, s in vector],
                    "lexical": [[int(r), float(s)] for r, s in lexical]})
    store.close()
    cache.write_text(json.dumps(out))
    return out


def chunk_docs(index_db: Path) -> dict[int, str]:
    """chunk rowid -> BEIR corpus id (the file name under kb/beir/)."""
    with sqlite3.connect(index_db) as conn:
        rows = conn.execute("SELECT id, file_path FROM chunks")
        return {rowid: path.removeprefix("kb/beir/") for rowid, path in rows}


def documents(order: list[int], docs: dict[int, str]) -> list[str]:
    """Chunk ranking -> document ranking (a document ranks where its best chunk does)."""
    return list(dict.fromkeys(docs[r] for r in order))


def rrf(k: int, depth: int) -> Callable[[Hits, Hits], list[int]]:
    def rank(vector: Hits, lexical: Hits) -> list[int]:
        fused = reciprocal_rank_fusion([[r for r, _ in vector[:depth]], [r for r, _ in lexical[:depth]]], k)
        return sorted(fused, key=lambda r: -fused[r])
    return rank


def convex(weight: float, depth: int) -> Callable[[Hits, Hits], list[int]]:
    def rank(vector: Hits, lexical: Hits) -> list[int]:
        fused = convex_fusion(vector[:depth], lexical[:depth], weight)
        return sorted(fused, key=lambda r: -fused[r])
    return rank


def configurations() -> dict[str, Callable[[Hits, Hits], list[int]]]:
    configs: dict[str, Callable[[Hits, Hits], list[int]]] = {
        "vector only": lambda v, lx: [r for r, _ in v],
        "lexical only": lambda v, lx: [r for r, _ in lx],
    }
    for depth in (25, 100, 300):
        for k in (10, 30, 60, 100):
            configs[f"rrf k={k}, depth {depth}"] = rrf(k, depth)
        for weight in (0.3, 0.4, 0.5, 0.6, 0.7):
            configs[f"convex w={weight}, depth {depth}"] = convex(weight, depth)
    return configs


def evaluate(queries: list[dict[str, Any]], docs: dict[int, str],
             rank: Callable[[Hits, Hits], list[int]]) -> tuple[dict[str, float], float]:
    runs, qrels, started = {}, {}, time.perf_counter()
    for q in queries:
        order = rank([tuple(h) for h in q["vector"]], [tuple(h) for h in q["lexical"]])
        runs[q["qid"]], qrels[q["qid"]] = documents(order, docs), q["relevant"]
    per_query_ms = (time.perf_counter() - started) * 1000 / max(1, len(queries))
    return summarize(runs, qrels, (10, 100)), per_query_ms


RERANK_N = (30, 50)
RERANK_WEIGHTS = (0.25, 0.5, 1.0)


def rerank_rows(dataset: Path, split: str, queries: list[dict[str, Any]], index_db: Path) -> dict[str, Any]:
    """Per query: the convex top 50 as rows with the sentence re-ranker's scores (cached per split)."""
    cache = RESULTS / ".cache" / f"rerank-{dataset.name}-{split}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    embedder = default_embedder()
    reranker = SentenceMaxSimReranker(embedder, cache_size=100_000)
    with sqlite3.connect(index_db) as conn:
        texts = dict(conn.execute("SELECT id, text FROM chunks"))
    out, started = {}, time.perf_counter()
    for q in queries:
        fused = convex_fusion([tuple(h) for h in q["vector"]], [tuple(h) for h in q["lexical"]], 0.5)
        order = sorted(fused, key=lambda r: -fused[r])[: max(RERANK_N)]
        scores = reranker.score(q["query"], embedder.embed_query(q["query"]), [texts[r] for r in order])
        out[q["qid"]] = [[r, fused[r], s] for r, s in zip(order, scores, strict=True)]
    out["_seconds_per_query"] = (time.perf_counter() - started) / max(1, len(queries))
    cache.write_text(json.dumps(out))
    return out


def evaluate_rerank(queries: list[dict[str, Any]], docs: dict[int, str], scored: dict[str, Any], n: int,
                    weight: float) -> dict[str, float]:
    """The shipped re-ordering (`search.rerank_order`) over the convex top `n` with a given weight."""
    runs, qrels = {}, {}
    for q in queries:
        rows = [{"id": r, "text": str(i), "score": f} for i, (r, f, _) in enumerate(scored[q["qid"]])]
        fixed = FixedScores([s for _, _, s in scored[q["qid"]]])
        head, _ = rerank_order(q["query"], None, [row["text"] for row in rows[:n]],
                               [row["score"] for row in rows[:n]], fixed, weight)
        fused = convex_fusion([tuple(h) for h in q["vector"]], [tuple(h) for h in q["lexical"]], 0.5)
        tail = sorted(fused, key=lambda r: -fused[r])[n:]  # the first stage's order behind the re-ranked head
        runs[q["qid"]] = documents([rows[i]["id"] for i in head] + tail, docs)
        qrels[q["qid"]] = q["relevant"]
    return summarize(runs, qrels, (10, 100))


class FixedScores:
    """A reranker replaying scores computed once by SentenceMaxSimReranker (texts are list positions)."""

    name = "replay"

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores

    def score(self, question: str, query_vector: Any, texts: list[str]) -> list[float]:
        return [self.scores[int(t)] for t in texts]


def cached_candidates(dataset: Path) -> tuple[Path, dict[int, str], dict[str, list[dict[str, Any]]]]:
    """The cached index of `bench quality`, its chunk -> document map, and the candidates of both splits."""
    index_db = RESULTS / ".cache" / f"{dataset.name}.db"
    if not index_db.exists():
        raise SystemExit(f"{index_db} is missing: run `python -m bench quality` first (it builds the index)")
    return index_db, chunk_docs(index_db), {split: collect(dataset, split, index_db) for split in ("train", "test")}


def main(dataset: Path) -> None:
    index_db, docs, splits = cached_candidates(dataset)
    rows = [["configuration", "train nDCG@10", "train R@100", "test nDCG@10", "test R@100", "fusion ms/query"]]
    table: dict[str, Any] = {}
    for name, rank in configurations().items():
        train, ms = evaluate(splits["train"], docs, rank)
        test, _ = evaluate(splits["test"], docs, rank)
        table[name] = {"train": train, "test": test, "fusion_ms_per_query": round(ms, 3)}
        rows.append([name, f"{train['ndcg@10']:.4f}", f"{train['recall@100']:.4f}", f"{test['ndcg@10']:.4f}",
                     f"{test['recall@100']:.4f}", f"{ms:.2f}"])
    scored = {split: rerank_rows(dataset, split, queries, index_db) for split, queries in splits.items()}
    for n in RERANK_N:
        for weight in RERANK_WEIGHTS:
            name = f"convex w=0.5 + sentence rerank top {n}, weight {weight}"
            train = evaluate_rerank(splits["train"], docs, scored["train"], n, weight)
            test = evaluate_rerank(splits["test"], docs, scored["test"], n, weight)
            ms = scored["train"]["_seconds_per_query"] * 1000 * n / max(RERANK_N)
            table[name] = {"train": train, "test": test, "fusion_ms_per_query": round(ms, 1)}
            rows.append([name, f"{train['ndcg@10']:.4f}", f"{train['recall@100']:.4f}", f"{test['ndcg@10']:.4f}",
                         f"{test['recall@100']:.4f}", f"{ms:.0f} (rerank; mean, sentence cache shared across queries)"])
    fused = [n for n in table if n not in ("vector only", "lexical only")]
    best = max(fused, key=lambda n: table[n]["train"]["ndcg@10"])
    write_results(f"fusion_{dataset.name}", {"dataset": str(dataset), "best_on_train": best, "configs": table}, rows)
    print(f"best on train: {best}: train {table[best]['train']['ndcg@10']:.4f}, "
          f"test {table[best]['test']['ndcg@10']:.4f}")
