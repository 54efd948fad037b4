"""`ragstead eval`: run every mode over the same index and cases, aggregate chunks to documents, score.

Chunk -> document aggregation: a document's rank is the rank of its best chunk (its first appearance
in the chunk ranking), so a document with several matching chunks counts once.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ragstead.documents.metadata import PathRule
from ragstead.embeddings.base import Embedder
from ragstead.embeddings.cache import QueryVectorCache
from ragstead.evaluation.cases import EvalCase
from ragstead.evaluation.metrics import summarize
from ragstead.filters import QueryFilters
from ragstead.retrieval.rerank import Reranker
from ragstead.retrieval.search import MAX_K, Hit, SearchOptions, search
from ragstead.stores.base import Store

BEIR_ROOT = "kb/beir"


@dataclass(frozen=True)
class EvalSettings:
    modes: tuple[str, ...] = ("vector", "lexical", "hybrid")
    ks: tuple[int, ...] = (1, 5, 10, 100)
    miss_k: int = 10
    search: SearchOptions = field(default_factory=SearchOptions)  # fusion and re-rank knobs under test


def _variants(settings: EvalSettings, reranker: Reranker | None) -> list[tuple[str, str, dict[str, Any], bool]]:
    """(label, mode, option overrides, rerank) runs: hybrid under both fusions (the configured one is `hybrid`),
    without query feedback when it is on (the same-run baseline of what feedback buys and costs), and
    `hybrid+rerank` when a reranker is given."""
    out: list[tuple[str, str, dict[str, Any], bool]] = []
    for mode in settings.modes:
        out.append((mode, mode, {}, False))
        if mode == "hybrid":
            other = "rrf" if settings.search.fusion == "convex" else "convex"
            out.append((f"hybrid ({other})", mode, {"fusion": other}, False))
            if settings.search.feedback_k:
                out.append(("hybrid (no feedback)", mode, {"feedback_k": 0}, False))
            if reranker is not None:
                out.append(("hybrid+rerank", mode, {}, True))
    return out


def _doc_key(hit: Hit, key: str) -> str:
    if key == "corpus_id":
        return hit.file_path.removeprefix(BEIR_ROOT + "/")
    if key == "source_url":  # a case may name a URL or, for a file, its path
        return hit.source_url or hit.file_path
    return str(getattr(hit, key))


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run_eval(
    cases: list[EvalCase],
    store: Store,
    embedder: Embedder | None,
    settings: EvalSettings,
    filters: QueryFilters,
    rules: tuple[PathRule, ...],
    progress: Callable[[int, int], None] | None = None,
    reranker: Reranker | None = None,
) -> dict[str, Any]:
    """Evaluate each mode (hybrid under both fusions, and re-ranked with a `reranker`); returns metrics,
    latency and misses per run."""
    depth = min(MAX_K, max(settings.ks) * 3)  # chunks fetched, so enough distinct documents remain
    # Each query is embedded once for all modes (unbounded for this run), and timed apart from search.
    cached = QueryVectorCache(embedder, size=len(cases) + 1) if embedder is not None else None
    results: dict[str, Any] = {"modes": {}, "latency_ms": {}, "misses": {}}
    qrels = {case.qid: case.relevant for case in cases}
    variants = _variants(settings, reranker)
    total, done = len(cases) * len(variants), 0
    for label, mode, overrides, rerank in variants:
        options = replace(settings.search, mode=mode, k=depth, top_k_vector=depth, top_k_lexical=depth, **overrides)
        runs: dict[str, list[str]] = {}
        latencies: list[float] = []
        misses = []
        for case in cases:
            if cached is not None:
                cached.embed_query(case.query)  # embedding is timed separately, not in search latency
            started = time.perf_counter()
            out = search(case.query, store, cached, filters, options, rules, reranker if rerank else None)
            latencies.append((time.perf_counter() - started) * 1000)
            ranked = list(dict.fromkeys(_doc_key(hit, case.key) for hit in out.hits))
            runs[case.qid] = ranked
            relevant = {k for k, gain in case.relevant.items() if gain > 0}
            if not relevant.intersection(ranked[: settings.miss_k]):
                misses.append({"qid": case.qid, "query": case.query, "relevant": sorted(relevant),
                               "top": ranked[:5], "notes": case.notes})
            done += 1
            if progress:
                progress(done, total)
        results["modes"][label] = summarize(runs, qrels, settings.ks)
        results["latency_ms"][label] = {
            "p50": round(statistics.median(latencies), 3) if latencies else 0.0,
            "p95": round(_percentile(latencies, 0.95), 3),
        }
        results["misses"][label] = misses
    if cached is not None and cached.embed_seconds:
        results["query_embedding_ms"] = {
            "p50": round(statistics.median(cached.embed_seconds) * 1000, 3),
            "p95": round(_percentile(cached.embed_seconds, 0.95) * 1000, 3),
        }
    tuned = settings.search
    results["settings"] = {"modes": list(settings.modes), "ks": list(settings.ks), "rrf_k": tuned.rrf_k,
                           "fusion": tuned.fusion, "fusion_weight": tuned.fusion_weight,
                           "feedback_k": tuned.feedback_k, "feedback_weight": tuned.feedback_weight,
                           "reranker": reranker.name if reranker is not None else None,
                           "rerank_top_n": tuned.rerank_top_n, "rerank_weight": tuned.rerank_weight,
                           "candidates_per_side": depth, "miss_k": settings.miss_k,
                           "aggregation": "document rank = rank of its best chunk"}
    results["n_queries"] = len(cases)
    return results


def format_table(report: dict[str, Any]) -> list[list[str]]:
    """Rows for a side-by-side table: metric, then one column per mode."""
    modes = list(report["modes"])
    metrics = list(next(iter(report["modes"].values())).keys()) if modes else []
    rows = [["metric", *modes]]
    for metric in ["ndcg@10", *[m for m in metrics if m != "ndcg@10"]]:
        rows.append([metric, *[f"{report['modes'][mode][metric]:.4f}" for mode in modes]])
    rows.append(["search p50 ms", *[f"{report['latency_ms'][m]['p50']:.2f}" for m in modes]])
    rows.append(["search p95 ms", *[f"{report['latency_ms'][m]['p95']:.2f}" for m in modes]])
    return rows
