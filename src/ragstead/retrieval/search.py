"""The query pipeline: filters -> vector and/or lexical search in the store -> fusion -> results.

The returned dict is the JSON contract of seed 001 (documented in the README).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragstead.documents.metadata import DEFAULT_PATH_RULES, PathRule
from ragstead.embeddings.base import Embedder
from ragstead.errors import InvalidQueryError
from ragstead.retrieval.filters import QueryFilters
from ragstead.retrieval.fusion import FUSIONS, convex_fusion, min_max, reciprocal_rank_fusion
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.rerank import Reranker
from ragstead.stores.base import Store

if TYPE_CHECKING:
    from ragstead.config import Settings

MODES = ("vector", "lexical", "hybrid")
MAX_QUERY_CHARS = 4096
MAX_K = 1000
SNIPPET_CHARS = 320


@dataclass(frozen=True)
class SearchOptions:
    """How to search. Defaults follow seed 000/001."""

    mode: str = "vector"
    k: int = 8
    top_k_vector: int = 25
    top_k_lexical: int = 25
    rrf_k: int = 60
    fusion: str = "convex"  # chosen on SciFact train: convex .7369 vs RRF .7118 nDCG@10 (bench fusion)
    fusion_weight: float = 0.5  # convex: share of the vector side
    # Chosen on SciFact train (bench fusion): top 30 and top 50 tie at .7457 with weight 0.5; 30 costs less.
    rerank_top_n: int = 30  # candidates a reranker (if one is given to search) re-orders
    rerank_weight: float = 0.5  # final = min-max(first-stage score) + weight * min-max(rerank score)

    @classmethod
    def from_settings(cls, settings: Settings, mode: str | None = None, **overrides: Any) -> SearchOptions:
        """Options from the configured defaults; a None override keeps the configured value."""
        values = {"mode": mode or settings.default_mode, "top_k_vector": settings.top_k_vector,
                  "top_k_lexical": settings.top_k_lexical, "rrf_k": settings.rrf_k, "fusion": settings.fusion,
                  "fusion_weight": settings.fusion_weight, "rerank_top_n": settings.rerank_top_n,
                  "rerank_weight": settings.rerank_weight}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise InvalidQueryError(f"unknown mode {self.mode!r}; use one of {MODES}")
        for name in ("k", "top_k_vector", "top_k_lexical"):
            value = getattr(self, name)
            if not 1 <= value <= MAX_K:
                raise InvalidQueryError(f"{name} must be between 1 and {MAX_K}, got {value}")
        if self.rrf_k < 0:
            raise InvalidQueryError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if self.fusion not in FUSIONS:
            raise InvalidQueryError(f"unknown fusion {self.fusion!r}; use one of {FUSIONS}")
        if not 0.0 <= self.fusion_weight <= 1.0:
            raise InvalidQueryError(f"fusion_weight must be between 0 and 1, got {self.fusion_weight}")
        if not 1 <= self.rerank_top_n <= 200:
            raise InvalidQueryError(f"rerank_top_n must be between 1 and 200, got {self.rerank_top_n}")
        if not 0.0 <= self.rerank_weight <= 100.0:
            raise InvalidQueryError(f"rerank_weight must be between 0 and 100, got {self.rerank_weight}")


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` on one line, cut at `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def search(
    question: str,
    store: Store,
    embedder: Embedder | None,
    filters: QueryFilters | None = None,
    options: SearchOptions | None = None,
    rules: tuple[PathRule, ...] = DEFAULT_PATH_RULES,
    reranker: Reranker | None = None,
) -> dict[str, Any]:
    """Run one query and return the JSON-contract dict (`question`, `k`, `mode`, `filters`, `results`).

    With a `reranker`, the best `rerank_top_n` results of the first stage are re-ordered by
    min-max(first-stage score) + `rerank_weight` * min-max(rerank score); each carries `rerank_score`.
    """
    filters = filters or QueryFilters()
    options = options or SearchOptions()
    options.validate()
    if not isinstance(question, str) or not question.strip():
        raise InvalidQueryError("the question is empty")
    if len(question) > MAX_QUERY_CHARS:
        raise InvalidQueryError(f"the question is {len(question)} chars; the limit is {MAX_QUERY_CHARS}")
    timings: dict[str, float] = {}
    query_vector = None
    vector_hits: list[tuple[int, float]] = []
    lexical_hits: list[tuple[int, float]] = []
    want_vector = options.mode in ("vector", "hybrid")
    want_lexical = options.mode in ("lexical", "hybrid")
    if want_vector:
        if embedder is None:
            raise InvalidQueryError(f"mode {options.mode!r} needs an embedder")
        store.check_model(embedder.name, embedder.dim)
        t0 = time.perf_counter()
        query_vector = embedder.embed_query(question)
        timings["embed_ms"] = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        depth = options.k if options.mode == "vector" else options.top_k_vector
        vector_hits = store.vector_search(query_vector, filters, depth)
        timings["vector_ms"] = (time.perf_counter() - t0) * 1000
    if want_lexical:
        t0 = time.perf_counter()
        terms = query_terms(question)
        depth = options.k if options.mode == "lexical" else options.top_k_lexical
        lexical_hits = store.lexical_search(terms, filters, depth) if terms else []
        timings["lexical_ms"] = (time.perf_counter() - t0) * 1000

    t0 = time.perf_counter()
    vector_rank = {rowid: (rank, score) for rank, (rowid, score) in enumerate(vector_hits, start=1)}
    lexical_rank = {rowid: (rank, score) for rank, (rowid, score) in enumerate(lexical_hits, start=1)}
    if options.mode == "hybrid":
        if options.fusion == "rrf":
            fused = reciprocal_rank_fusion([[r for r, _ in vector_hits], [r for r, _ in lexical_hits]], options.rrf_k)
        else:
            fused = convex_fusion(vector_hits, lexical_hits, options.fusion_weight)
        # Ties broken by vector rank, then lexical rank, so output order is deterministic.
        order = sorted(
            fused,
            key=lambda r: (-fused[r], vector_rank.get(r, (MAX_K + 1,))[0], lexical_rank.get(r, (MAX_K + 1,))[0]),
        )
    else:
        hits = vector_hits if options.mode == "vector" else lexical_hits
        fused, order = {}, [r for r, _ in hits]
    rows = store.fetch_chunks(order, filters)
    wanted = max(options.k, options.rerank_top_n) if reranker is not None else options.k
    results = []
    for rowid in order:
        row = rows.get(rowid)
        if row is None or not filters.admits(row["file_path"], rules):
            continue  # the SQL filter decides scope; the path backstop only ever removes
        v, lx = vector_rank.get(rowid), lexical_rank.get(rowid)
        text = row.pop("text")
        row.update(
            snippet=snippet(text),
            text=text,
            vector_rank=v[0] if v else None,
            vector_score=round(v[1], 6) if v else None,
            dense_distance=round(1.0 - v[1], 6) if v else None,
            lexical_rank=lx[0] if lx else None,
            lexical_score=round(lx[1], 6) if lx else None,
            fused_score=round(fused[rowid], 8) if rowid in fused else None,
        )
        row["score"] = row["fused_score"] if options.mode == "hybrid" else (
            row["vector_score"] if options.mode == "vector" else row["lexical_score"]
        )
        row["rerank_score"] = None
        results.append(row)
        if len(results) == wanted:
            break
    timings["fuse_fetch_ms"] = (time.perf_counter() - t0) * 1000
    if reranker is not None and results:
        t0 = time.perf_counter()
        results = rerank_head(question, query_vector, results, reranker, options)[: options.k]
        timings["rerank_ms"] = (time.perf_counter() - t0) * 1000
    for rank, row in enumerate(results, start=1):
        row["final_rank"] = rank
    return {
        "question": question,
        "k": options.k,
        "mode": options.mode,
        "filters": filters.describe(rules),
        "model": getattr(embedder, "name", None) if want_vector else None,
        "params": {
            "top_k_vector": options.top_k_vector,
            "top_k_lexical": options.top_k_lexical,
            "rrf_k": options.rrf_k,
            "fusion": options.fusion,
            "fusion_weight": options.fusion_weight,
            "reranker": reranker.name if reranker is not None else None,
            "rerank_top_n": options.rerank_top_n if reranker is not None else None,
            "rerank_weight": options.rerank_weight if reranker is not None else None,
        },
        "results": results,
        "timings_ms": {k: round(v, 3) for k, v in timings.items()},
    }


def rerank_head(question: str, query_vector: Any, results: list[dict[str, Any]], reranker: Reranker,
            options: SearchOptions) -> list[dict[str, Any]]:
    """Re-order the first `rerank_top_n` results; the rest keep their first-stage order behind them."""
    head, tail = results[: options.rerank_top_n], results[options.rerank_top_n :]
    scores = reranker.score(question, query_vector, [row["text"] for row in head])
    first = min_max([(i, row["score"] or 0.0) for i, row in enumerate(head)])
    second = min_max(list(enumerate(scores)))
    for i, row in enumerate(head):
        row["rerank_score"] = round(scores[i], 6)
    order = sorted(range(len(head)), key=lambda i: (-(first[i] + options.rerank_weight * second[i]), i))
    return [head[i] for i in order] + tail
