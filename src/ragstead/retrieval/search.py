"""The query pipeline: filters -> vector and/or lexical search in the store -> fusion -> typed hits."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ragstead.documents.metadata import PathRule
from ragstead.documents.sources import citation_link
from ragstead.embeddings.base import Embedder
from ragstead.errors import InvalidQueryError
from ragstead.filters import AppliedFilters, QueryFilters, clean_text
from ragstead.retrieval.fusion import FUSIONS, convex_fusion, fused_order, min_max, reciprocal_rank_fusion
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.rerank import Reranker, SentenceMaxSimReranker
from ragstead.stores.base import Store

MODES = ("vector", "lexical", "hybrid")
MAX_QUERY_CHARS = 4096
MAX_K = 1000
MAX_FEEDBACK_K = 20
SNIPPET_CHARS = 320


@dataclass(frozen=True)
class SearchOptions:
    """How to search. The defaults are the CLI's; the measurements behind them are in docs/design.md."""

    mode: str = "hybrid"
    k: int = 8
    top_k_vector: int = 25
    top_k_lexical: int = 25
    rrf_k: int = 60
    fusion: str = "convex"  # convex beat RRF on SciFact train (docs/benchmarks.md, "Fusion")
    fusion_weight: float = 0.5  # convex: share of the vector side
    rerank_top_n: int = 30  # candidates a reranker (if one is given to search) re-orders
    rerank_weight: float = 0.5  # final = min-max(first-stage score) + weight * min-max(rerank score)
    # Hybrid only: Rocchio feedback moves the query vector toward the mean of the first pass's best
    # `feedback_k` chunks, by `feedback_weight`, and searches the vector side again (0: off). Chosen on SciFact
    # train by `python -m bench feedback` (docs/benchmarks.md, "Query feedback").
    feedback_k: int = 2
    feedback_weight: float = 0.5
    dedup_sources: bool = False  # keep only the best chunk of each document (a source)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise InvalidQueryError(f"unknown mode {self.mode!r}; use one of {MODES}")
        for name in ("k", "top_k_vector", "top_k_lexical"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= MAX_K:
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
        if not isinstance(self.feedback_k, int) or not 0 <= self.feedback_k <= MAX_FEEDBACK_K:
            raise InvalidQueryError(f"feedback_k must be between 0 and {MAX_FEEDBACK_K}, got {self.feedback_k}")
        if not 0.0 <= self.feedback_weight <= 10.0:
            raise InvalidQueryError(f"feedback_weight must be between 0 and 10, got {self.feedback_weight}")


def choose_fusion(fusion: str | None, rrf_k: int | None, fusion_weight: float | None) -> str | None:
    """The fusion a request means: `rrf_k` alone implies RRF, `fusion_weight` alone convex; a knob of the
    other fusion is an error rather than silently ignored."""
    if rrf_k is not None and fusion_weight is not None:
        raise InvalidQueryError("rrf_k belongs to RRF fusion and fusion_weight to convex fusion; give one")
    if rrf_k is not None:
        if fusion not in (None, "rrf"):
            raise InvalidQueryError(f"rrf_k only applies to RRF fusion, not {fusion!r}; drop it or use fusion rrf")
        return "rrf"
    if fusion_weight is not None:
        if fusion not in (None, "convex"):
            raise InvalidQueryError(f"fusion_weight only applies to convex fusion, not {fusion!r}")
        return "convex"
    return fusion


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """`text` on one line, cut at `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class Hit:
    """One ranked chunk with its document's metadata and how each retriever scored it."""

    chunk_id: str
    doc_id: str
    chunk_index: int
    start_word: int
    end_word: int
    char_start: int
    char_end: int
    page: int | None
    section_path: str | None
    token_estimate: int
    file_path: str
    root: str | None
    doc_type: str
    is_private: bool
    user_slug: str | None
    created_at: str | None
    proxy_wallet: str | None
    subject: str | None
    title: str | None
    tags: tuple[str, ...]
    file_hash: str
    snippet: str
    text: str = field(repr=False)
    vector_rank: int | None = None
    vector_score: float | None = None
    dense_distance: float | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    fused_score: float | None = None
    score: float | None = None
    rerank_score: float | None = None
    final_rank: int = 0
    # Ingested documents only: where it came from (url, type, fetched_at, author, published_at, ...), its URL,
    # and the link a citation opens (for a video, at the chunk's start time, `video_time` seconds).
    source: dict[str, Any] | None = None
    source_url: str | None = None
    link: str | None = None
    video_time: int | None = None

    def to_dict(self, include_text: bool = False) -> dict[str, Any]:
        """The documented JSON of one result; the full chunk `text` only when asked for."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if include_text or f.name != "text"}
        data["tags"] = list(self.tags)
        return data


@dataclass(frozen=True)
class SearchResult:
    """A ranked list of hits and how it was produced. `to_dict()` is the query JSON contract."""

    question: str
    k: int
    mode: str
    filters: AppliedFilters
    model: str | None
    params: dict[str, Any]
    hits: tuple[Hit, ...]
    timings_ms: dict[str, float]
    # The question's vector, for callers that score more chunks against it (ask); not part of the JSON.
    query_vector: np.ndarray | None = field(default=None, repr=False, compare=False)
    budget: dict[str, Any] | None = None  # set by `within_tokens`: what a token budget kept and cut

    def to_dict(self, include_text: bool = False) -> dict[str, Any]:
        data = {"question": self.question, "k": self.k, "mode": self.mode, "filters": self.filters.to_dict(),
                "model": self.model, "params": self.params,
                "results": [hit.to_dict(include_text) for hit in self.hits], "timings_ms": self.timings_ms}
        if self.budget is not None:
            data["budget"] = self.budget
        return data

    def within_tokens(self, max_tokens: int) -> SearchResult:
        """The best hits whose chunks fit in `max_tokens` (estimated tokens of their text), cut at chunk
        boundaries in rank order: a hit that does not fit ends the list, so nothing ranked lower jumps ahead.
        `budget` says what was kept and what was cut."""
        kept, used = [], 0
        for hit in self.hits:
            if used + hit.token_estimate > max_tokens:
                break
            kept.append(hit)
            used += hit.token_estimate
        cut = self.hits[len(kept):]
        return replace(self, hits=tuple(kept), budget={
            "max_tokens": max_tokens, "used_tokens": used, "returned": len(kept), "cut": len(cut),
            "cut_tokens": sum(h.token_estimate for h in cut), "cut_chunk_ids": [h.chunk_id for h in cut]})


def search(
    question: str,
    store: Store,
    embedder: Embedder | None,
    filters: QueryFilters,
    options: SearchOptions,
    rules: tuple[PathRule, ...],
    reranker: Reranker | None = None,
) -> SearchResult:
    """Run one query inside `filters`; `rules` are the project's path rules (the scope backstop).

    With a `reranker`, the best `rerank_top_n` results of the first stage are re-ordered by
    min-max(first-stage score) + `rerank_weight` * min-max(rerank score); each carries `rerank_score`.
    """
    options.validate()
    if not isinstance(question, str):
        raise InvalidQueryError(f"the question must be text, got {type(question).__name__}")
    if not question.strip():
        raise InvalidQueryError("the question is empty")
    question = clean_text(question)  # a question of control characters only is valid and finds nothing
    if len(question) > MAX_QUERY_CHARS:
        raise InvalidQueryError(f"the question is {len(question)} chars; the limit is {MAX_QUERY_CHARS}")
    timings: dict[str, float] = {}
    query_vector = None
    want_vector = options.mode in ("vector", "hybrid")
    want_lexical = options.mode in ("lexical", "hybrid")
    if want_vector or reranker is not None:
        if embedder is None:
            raise InvalidQueryError(f"mode {options.mode!r} needs an embedder")
        store.check_model(embedder.name, embedder.dim)
        t0 = time.perf_counter()
        query_vector = embedder.embed_query(question)
        timings["embed_ms"] = (time.perf_counter() - t0) * 1000

    def vector_side() -> list[tuple[int, float]]:
        t0 = time.perf_counter()
        depth = options.k if options.mode == "vector" else options.top_k_vector
        hits = store.vector_search(query_vector, filters, depth)
        timings["vector_ms"] = (time.perf_counter() - t0) * 1000
        return hits

    def lexical_side() -> list[tuple[int, float]]:
        t0 = time.perf_counter()
        terms = query_terms(question)
        depth = options.k if options.mode == "lexical" else options.top_k_lexical
        hits = store.lexical_search(terms, filters, depth) if terms else []
        timings["lexical_ms"] = (time.perf_counter() - t0) * 1000
        return hits

    if want_vector and want_lexical and getattr(store, "parallel_searches", False):
        # A server store runs each side on its own connection: a hybrid query costs its slower side, not both.
        with ThreadPoolExecutor(max_workers=1) as other:
            vector_future = other.submit(vector_side)
            lexical_hits = lexical_side()
            vector_hits = vector_future.result()
    else:
        vector_hits = vector_side() if want_vector else []
        lexical_hits = lexical_side() if want_lexical else []

    t0 = time.perf_counter()
    rows: dict[int, dict[str, Any]] = {}  # chunk rows read so far (the ones the filters admit), by rowid
    read: set[int] = set()

    def read_rows(rowids: list[int]) -> None:
        unread = [r for r in rowids if r not in read]
        if unread:
            read.update(unread)
            rows.update(store.fetch_chunks(unread, filters))

    def admitted(rowid: int) -> bool:  # the SQL filter decides scope; the path backstop only ever removes
        row = rows.get(rowid)
        return row is not None and filters.admits(row["file_path"], rules)

    def fuse(vector_hits: list[tuple[int, float]]) -> tuple[dict[int, float], list[int]]:
        if options.mode != "hybrid":
            return {}, [r for r, _ in (vector_hits if options.mode == "vector" else lexical_hits)]
        if options.fusion == "rrf":
            fused = reciprocal_rank_fusion([[r for r, _ in vector_hits], [r for r, _ in lexical_hits]], options.rrf_k)
        else:
            fused = convex_fusion(vector_hits, lexical_hits, options.fusion_weight)
        return fused, fused_order(fused, vector_hits, lexical_hits)

    wanted = max(options.k, options.rerank_top_n) if reranker is not None else options.k
    page = max(2 * wanted, 32)
    fused, order = fuse(vector_hits)
    # The question's own similarity of each chunk: the first pass's vector scores, whatever feedback does after.
    similarity = dict(vector_hits)
    if options.mode == "hybrid" and options.feedback_k and vector_hits:
        t1 = time.perf_counter()
        # A few rows at a time: the order changes after feedback, so rows read ahead now may not be needed.
        seeds: list[str] = []
        start, step = 0, 4 * options.feedback_k
        while len(seeds) < options.feedback_k and start < len(order):
            read_rows(order[start : start + step])
            seeds += [rows[r]["chunk_id"] for r in order[start : start + step] if admitted(r)]
            start, step = start + step, step * 2
        seeds = seeds[: options.feedback_k]
        seed_vectors = list(store.chunk_vectors(seeds).values()) if seeds else []
        if seed_vectors:
            moved = query_vector + options.feedback_weight * np.mean(seed_vectors, axis=0)
            vector_hits = store.vector_search(moved / np.linalg.norm(moved), filters, options.top_k_vector)
            fused, order = fuse(vector_hits)
        timings["feedback_ms"] = (time.perf_counter() - t1) * 1000
    vector_rank = {rowid: rank for rank, (rowid, _) in enumerate(vector_hits, start=1)}
    lexical_rank = {rowid: (rank, score) for rank, (rowid, score) in enumerate(lexical_hits, start=1)}
    results: list[dict[str, Any]] = []
    sources: set[str] = set()
    # Rows are read a page at a time, in rank order: the fused list holds up to both depths (600 rows by
    # default) and k of them are usually enough. A page that the filter, the backstop or dedup thinned out
    # is followed by one twice as long.
    fetched = 0
    for position, rowid in enumerate(order):
        if position == fetched:
            read_rows(order[fetched : fetched + page])
            fetched, page = fetched + page, page * 2
        if not admitted(rowid):
            continue
        row = rows[rowid]
        if options.dedup_sources and reranker is None:
            if row["doc_id"] in sources:
                continue  # a lower chunk of a document already listed
            sources.add(row["doc_id"])
        v, lx = vector_rank.get(rowid), lexical_rank.get(rowid)
        link, video_time = citation_link(row.get("source"), row["section_path"], row["text"])
        row.update(
            snippet=snippet(row["text"]),
            tags=tuple(row["tags"]),
            source_url=(row.get("source") or {}).get("url"),
            link=link,
            video_time=video_time,
            vector_rank=v,
            vector_score=round(similarity[rowid], 6) if rowid in similarity else None,
            dense_distance=round(1.0 - similarity[rowid], 6) if rowid in similarity else None,
            lexical_rank=lx[0] if lx else None,
            lexical_score=round(lx[1], 6) if lx else None,
            fused_score=round(fused[rowid], 8) if rowid in fused else None,
        )
        results.append(row)
        if len(results) == wanted:
            break
    if want_vector:  # a chunk feedback found, which the first pass did not: its similarity to the question
        fill_similarity(results, store, query_vector)
    for row in results:
        row["score"] = row["fused_score"] if options.mode == "hybrid" else (
            row["vector_score"] if options.mode == "vector" else row["lexical_score"]
        )
    timings["fuse_fetch_ms"] = (time.perf_counter() - t0) * 1000
    if reranker is not None and results:
        t0 = time.perf_counter()
        if isinstance(reranker, SentenceMaxSimReranker):  # sentence vectors the index holds: no model run for them
            reranker.preload(store, [(row["chunk_id"], row["text"]) for row in results[: options.rerank_top_n]])
        results = rerank_head(question, query_vector, results, reranker, options)
        if options.dedup_sources:  # the reranked order decides which chunk of a document stays
            results = [r for n, r in enumerate(results) if r["doc_id"] not in {x["doc_id"] for x in results[:n]}]
        results = results[: options.k]
        timings["rerank_ms"] = (time.perf_counter() - t0) * 1000
    hits = tuple(Hit(**row, final_rank=rank) for rank, row in enumerate(results, start=1))
    return SearchResult(
        question=question,
        k=options.k,
        mode=f"{options.mode}+rerank" if reranker is not None else options.mode,
        filters=filters.describe(rules),
        model=getattr(embedder, "name", None) if want_vector else None,
        params={
            "top_k_vector": options.top_k_vector,
            "top_k_lexical": options.top_k_lexical,
            "rrf_k": options.rrf_k,
            "fusion": options.fusion,
            "fusion_weight": options.fusion_weight,
            "reranker": reranker.name if reranker is not None else None,
            "rerank_top_n": options.rerank_top_n if reranker is not None else None,
            "rerank_weight": options.rerank_weight if reranker is not None else None,
            "feedback_k": options.feedback_k if options.mode == "hybrid" else None,
            "feedback_weight": options.feedback_weight if options.mode == "hybrid" and options.feedback_k else None,
        },
        hits=hits,
        timings_ms={k: round(v, 3) for k, v in timings.items()},
        query_vector=query_vector,
    )


def fill_similarity(results: list[dict[str, Any]], store: Store, query_vector: np.ndarray) -> None:
    """Set `vector_score` and `dense_distance` (to the question) on rows that came only from the feedback pass."""
    missing = [row for row in results if row["vector_rank"] is not None and row["vector_score"] is None]
    if not missing:
        return
    vectors = store.chunk_vectors([row["chunk_id"] for row in missing])
    for row in missing:
        if row["chunk_id"] in vectors:
            value = float(vectors[row["chunk_id"]] @ query_vector)
            row["vector_score"], row["dense_distance"] = round(value, 6), round(1.0 - value, 6)


def rerank_head(question: str, query_vector: Any, results: list[dict[str, Any]], reranker: Reranker,
                options: SearchOptions) -> list[dict[str, Any]]:
    """Re-order the first `rerank_top_n` result rows; the rest keep their first-stage order behind them."""
    head, tail = results[: options.rerank_top_n], results[options.rerank_top_n :]
    scores = reranker.score(question, query_vector, [row["text"] for row in head])
    first = min_max([(i, row["score"] or 0.0) for i, row in enumerate(head)])
    second = min_max(list(enumerate(scores)))
    for i, row in enumerate(head):
        row["rerank_score"] = round(scores[i], 6)
    order = sorted(range(len(head)), key=lambda i: (-(first[i] + options.rerank_weight * second[i]), i))
    return [head[i] for i in order] + tail
