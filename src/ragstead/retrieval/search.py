"""The query pipeline, in stages: plan the query -> lexical and/or vector side in the store -> fusion -> query
feedback -> page (the admitted candidates, read a page at a time) -> their similarity -> rerank -> typed hits."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from itertools import islice
from typing import Any

import numpy as np

from ragstead.documents.metadata import PathRule
from ragstead.documents.sources import citation_link, client_source, tabular
from ragstead.embeddings.base import Embedder
from ragstead.errors import InvalidQueryError
from ragstead.filters import AppliedFilters, QueryFilters, clean_text
from ragstead.retrieval.fusion import convex_fusion, fused_order, min_max, reciprocal_rank_fusion
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.options import MAX_FEEDBACK_K as MAX_FEEDBACK_K  # the limits, also named here
from ragstead.retrieval.options import MAX_K as MAX_K
from ragstead.retrieval.options import MAX_QUERY_CHARS, SearchOptions
from ragstead.retrieval.options import MODES as MODES
from ragstead.retrieval.rerank import Reranker, SentenceMaxSimReranker
from ragstead.stores.base import ChunkRow, Store

SNIPPET_CHARS = 320


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


def snippet(text: str, limit: int = SNIPPET_CHARS, rows: bool = False) -> str:
    """`text` on one line, cut at `limit` characters with an ellipsis; `rows`: a spreadsheet's text, one row a line
    (rows run together read as one)."""
    if rows:
        flat = "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    else:
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
    plan = plan_query(question, store, embedder, filters, options, rules, reranker)
    vector_hits, lexical_hits = retrieve(store, plan)
    rows = RowReader(store, filters, rules)
    with timed(plan.timings, "fuse_fetch_ms"):
        first = fuse(options, vector_hits, lexical_hits)
        ranking = feedback(store, plan, rows, first)
        # The question's own similarity of each chunk: the first pass's vector scores, whatever feedback did.
        candidates = page(plan, rows, ranking, similarity=dict(first.vector_hits))
        if plan.want_vector:  # a chunk feedback found, which the first pass did not: its similarity to the question
            assert plan.query_vector is not None  # plan_query embeds the question whenever a vector side is on
            fill_similarity(candidates, store, plan.query_vector)
    if reranker is not None and candidates:
        with timed(plan.timings, "rerank_ms"):
            candidates = rerank(store, plan, candidates, reranker)
    hits = tuple(candidate.to_hit(rank) for rank, candidate in enumerate(candidates, start=1))
    return search_result(plan, hits, embedder, reranker)


# -- the stages, in the order `search` runs them ----------------------------------------------------------------


@contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    """Record the block's wall time in `timings[name]`, in milliseconds."""
    start = time.perf_counter()
    yield
    timings[name] = (time.perf_counter() - start) * 1000


@dataclass(frozen=True)
class QueryPlan:
    """What one search will do: the cleaned question, its scope and options, and the question's vector."""

    question: str
    filters: QueryFilters
    options: SearchOptions
    rules: tuple[PathRule, ...]
    reranked: bool
    query_vector: np.ndarray | None
    timings: dict[str, float]  # each stage adds its own (milliseconds); the JSON keeps their order

    @property
    def want_vector(self) -> bool:
        return self.options.mode in ("vector", "hybrid")

    @property
    def want_lexical(self) -> bool:
        return self.options.mode in ("lexical", "hybrid")

    @property
    def wanted(self) -> int:
        """Candidates the first stage hands on: k, or a reranker's `rerank_top_n` when that is more."""
        return max(self.options.k, self.options.rerank_top_n) if self.reranked else self.options.k


def plan_query(question: str, store: Store, embedder: Embedder | None, filters: QueryFilters,
               options: SearchOptions, rules: tuple[PathRule, ...], reranker: Reranker | None) -> QueryPlan:
    """Check the question and options, clean the question, and embed it when a side or the reranker needs it."""
    options.validate()
    if not isinstance(question, str):
        raise InvalidQueryError(f"the question must be text, got {type(question).__name__}")
    if not question.strip():
        raise InvalidQueryError("the question is empty")
    question = clean_text(question)  # a question of control characters only is valid and finds nothing
    if len(question) > MAX_QUERY_CHARS:
        raise InvalidQueryError(f"the question is {len(question)} chars; the limit is {MAX_QUERY_CHARS}")
    plan = QueryPlan(question, filters, options, rules, reranker is not None, None, {})
    if not plan.want_vector and reranker is None:
        return plan
    if embedder is None:
        raise InvalidQueryError(f"mode {options.mode!r} needs an embedder")
    store.check_model(embedder.name, embedder.dim)
    with timed(plan.timings, "embed_ms"):
        query_vector = embedder.embed_query(question)
    return replace(plan, query_vector=query_vector)


def lexical_side(store: Store, plan: QueryPlan) -> list[tuple[int, float]]:
    """BM25 hits of the question's terms inside the scope: (rowid, score), best first."""
    with timed(plan.timings, "lexical_ms"):
        terms = query_terms(plan.question)
        depth = plan.options.k if plan.options.mode == "lexical" else plan.options.top_k_lexical
        return store.lexical_search(terms, plan.filters, depth) if terms else []


def vector_side(store: Store, plan: QueryPlan) -> list[tuple[int, float]]:
    """Nearest chunks to the question's vector inside the scope: (rowid, cosine similarity), best first."""
    with timed(plan.timings, "vector_ms"):
        depth = plan.options.k if plan.options.mode == "vector" else plan.options.top_k_vector
        assert plan.query_vector is not None  # plan_query embeds the question whenever a vector side is on
        return store.vector_search(plan.query_vector, plan.filters, depth)


def retrieve(store: Store, plan: QueryPlan) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The hits of the sides the mode uses (vector, lexical); an unused side returns none."""
    if plan.want_vector and plan.want_lexical and getattr(store, "parallel_searches", False):
        # A server store runs each side on its own connection: a hybrid query costs its slower side, not both.
        with ThreadPoolExecutor(max_workers=1) as other:
            vector_future = other.submit(vector_side, store, plan)
            lexical_hits = lexical_side(store, plan)
            return vector_future.result(), lexical_hits
    vector_hits = vector_side(store, plan) if plan.want_vector else []
    return vector_hits, lexical_side(store, plan) if plan.want_lexical else []


@dataclass(frozen=True)
class Ranking:
    """The first stage's order of rowids, from the hits of each side (and, hybrid only, their fused scores)."""

    vector_hits: list[tuple[int, float]]
    lexical_hits: list[tuple[int, float]]
    fused: dict[int, float]
    order: list[int]


def fuse(options: SearchOptions, vector_hits: list[tuple[int, float]],
         lexical_hits: list[tuple[int, float]]) -> Ranking:
    """Hybrid: fuse both sides (convex or RRF) and order by the fused score; one side: keep its order."""
    if options.mode != "hybrid":
        return Ranking(vector_hits, lexical_hits, {},
                       [r for r, _ in (vector_hits if options.mode == "vector" else lexical_hits)])
    if options.fusion == "rrf":
        fused = reciprocal_rank_fusion([[r for r, _ in vector_hits], [r for r, _ in lexical_hits]], options.rrf_k)
    else:
        fused = convex_fusion(vector_hits, lexical_hits, options.fusion_weight)
    return Ranking(vector_hits, lexical_hits, fused, fused_order(fused, vector_hits, lexical_hits))


class RowReader:
    """Chunk rows read from the store when a stage first needs them (each rowid once), and the scope check."""

    def __init__(self, store: Store, filters: QueryFilters, rules: tuple[PathRule, ...]) -> None:
        self.store, self.filters, self.rules = store, filters, rules
        self.rows: dict[int, ChunkRow] = {}  # rows read so far (the ones the SQL filter admits), by rowid
        self._read: set[int] = set()

    def read(self, rowids: list[int]) -> None:
        unread = [r for r in rowids if r not in self._read]
        if unread:
            self._read.update(unread)
            self.rows.update(self.store.fetch_chunks(unread, self.filters))

    def admitted(self, rowid: int) -> bool:
        """The SQL filter decides scope; the path backstop only ever removes."""
        row = self.rows.get(rowid)
        return row is not None and self.filters.admits(row["file_path"], self.rules)

    def admitted_in_order(self, order: list[int], first_page: int) -> Iterator[tuple[int, ChunkRow]]:
        """(rowid, row) of the rows in `order` the scope admits, in that order. Rows are read a page at a time
        as the walk reaches them, each page twice as long as the last: a caller usually stops early, and a page
        the filter, the backstop or dedup thinned out is followed by a longer one."""
        fetched, size = 0, first_page
        for position, rowid in enumerate(order):
            if position == fetched:
                self.read(order[fetched : fetched + size])
                fetched, size = fetched + size, size * 2
            if self.admitted(rowid):
                yield rowid, self.rows[rowid]


def feedback(store: Store, plan: QueryPlan, rows: RowReader, ranking: Ranking) -> Ranking:
    """Rocchio feedback (hybrid): search the vector side again with the query moved toward the best admitted
    chunks of `ranking`, fused with the same lexical hits. Off (`feedback_k` 0) or nothing to move: `ranking`."""
    options = plan.options
    if options.mode != "hybrid" or not options.feedback_k or not ranking.vector_hits:
        return ranking
    with timed(plan.timings, "feedback_ms"):
        # A few rows at a time: the order changes after feedback, so rows read ahead now may not be needed.
        best = islice(rows.admitted_in_order(ranking.order, first_page=4 * options.feedback_k), options.feedback_k)
        seeds = [row["chunk_id"] for _, row in best]
        seed_vectors = list(store.chunk_vectors(seeds).values()) if seeds else []
        if not seed_vectors:
            return ranking
        moved = plan.query_vector + options.feedback_weight * np.mean(seed_vectors, axis=0)
        vector_hits = store.vector_search(moved / np.linalg.norm(moved), plan.filters, options.top_k_vector)
        return fuse(options, vector_hits, ranking.lexical_hits)


@dataclass(slots=True)
class Candidate:
    """One chunk on its way through the stages: its stored row (read, never changed) and the ranks and scores
    its hit reports, rounded as the JSON shows them. Each field has one stage that sets it: `page` the ranks
    and first-stage scores, `fill_similarity` the similarity of a chunk only feedback found, `rerank` its score.
    (Not frozen: a frozen dataclass and `replace` cost a few microseconds a candidate, 0.1 ms a query.)"""

    row: ChunkRow
    vector_rank: int | None = None
    vector_score: float | None = None
    dense_distance: float | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    fused_score: float | None = None
    score: float | None = None
    rerank_score: float | None = None

    @property
    def chunk_id(self) -> str:
        return self.row["chunk_id"]

    @property
    def doc_id(self) -> str:
        return self.row["doc_id"]

    @property
    def text(self) -> str:
        return self.row["text"]

    def to_hit(self, final_rank: int) -> Hit:
        """The typed hit: the row, its display fields (snippet, citation link) and the scores."""
        row = self.row
        source = client_source(row.get("source"))  # only http(s) links reach a client
        link, video_time = citation_link(source, row["section_path"], row["text"])
        fields: dict[str, Any] = {
            **row, "source": source, "snippet": snippet(row["text"], rows=tabular(row["file_path"])),
            "tags": tuple(row["tags"]),
            "source_url": (source or {}).get("url"), "link": link, "video_time": video_time,
            "vector_rank": self.vector_rank, "vector_score": self.vector_score,
            "dense_distance": self.dense_distance, "lexical_rank": self.lexical_rank,
            "lexical_score": self.lexical_score, "fused_score": self.fused_score, "score": self.score,
            "rerank_score": self.rerank_score, "final_rank": final_rank}
        return Hit(**fields)


def one_per_document(candidates: Iterable[Candidate]) -> Iterator[Candidate]:
    """The first (best) candidate of each document; the lower chunks of a document already listed are dropped."""
    seen: set[str] = set()
    for candidate in candidates:
        if candidate.doc_id not in seen:
            seen.add(candidate.doc_id)
            yield candidate


def page(plan: QueryPlan, rows: RowReader, ranking: Ranking, similarity: dict[int, float]) -> list[Candidate]:
    """The first `plan.wanted` candidates of `ranking` the scope admits (one per document with `dedup_sources`,
    unless a reranker will decide which chunk stays), each with what the sides said of it."""
    vector_rank = {rowid: rank for rank, (rowid, _) in enumerate(ranking.vector_hits, start=1)}
    lexical = {rowid: (rank, score) for rank, (rowid, score) in enumerate(ranking.lexical_hits, start=1)}

    mode = plan.options.mode

    def candidate(rowid: int, row: ChunkRow) -> Candidate:
        sim, lx = similarity.get(rowid), lexical.get(rowid)
        vector_score = round(sim, 6) if sim is not None else None
        lexical_score = round(lx[1], 6) if lx else None
        fused_score = round(ranking.fused[rowid], 8) if rowid in ranking.fused else None
        return Candidate(
            row,
            vector_rank=vector_rank.get(rowid),
            vector_score=vector_score,
            dense_distance=round(1.0 - sim, 6) if sim is not None else None,
            lexical_rank=lx[0] if lx else None,
            lexical_score=lexical_score,
            fused_score=fused_score,
            # The first-stage score. fill_similarity never changes it: only a hybrid search has chunks that only
            # feedback found, and its score is the fused one.
            score=fused_score if mode == "hybrid" else (vector_score if mode == "vector" else lexical_score),
        )

    # The fused list holds up to both depths (50 rows by default) and k of them are usually enough.
    admitted = rows.admitted_in_order(ranking.order, first_page=max(2 * plan.wanted, 32))
    candidates: Iterator[Candidate] = (candidate(rowid, row) for rowid, row in admitted)
    if plan.options.dedup_sources and not plan.reranked:
        candidates = one_per_document(candidates)
    return list(islice(candidates, plan.wanted))


def fill_similarity(candidates: list[Candidate], store: Store, query_vector: np.ndarray) -> None:
    """Set `vector_score` and `dense_distance` (to the question) on candidates only the feedback pass found."""
    missing = [c for c in candidates if c.vector_rank is not None and c.vector_score is None]
    if not missing:
        return
    vectors = store.chunk_vectors([c.chunk_id for c in missing])
    for c in missing:
        if c.chunk_id in vectors:
            value = float(vectors[c.chunk_id] @ query_vector)
            c.vector_score, c.dense_distance = round(value, 6), round(1.0 - value, 6)


def rerank(store: Store, plan: QueryPlan, candidates: list[Candidate], reranker: Reranker) -> list[Candidate]:
    """Re-order the first `rerank_top_n` candidates (the rest keep their first-stage order behind them), keep the
    best chunk of each document with `dedup_sources`, and cut to k."""
    options = plan.options
    head, tail = candidates[: options.rerank_top_n], candidates[options.rerank_top_n :]
    if isinstance(reranker, SentenceMaxSimReranker):  # sentence vectors the index holds: no model run for them
        reranker.preload(store, [(c.chunk_id, c.text) for c in head])
    order, scores = rerank_order(plan.question, plan.query_vector, [c.text for c in head],
                                 [c.score for c in head], reranker, options.rerank_weight)
    for candidate, value in zip(head, scores, strict=True):
        candidate.rerank_score = round(value, 6)
    ranked = [head[i] for i in order] + tail
    if options.dedup_sources:  # the reranked order decides which chunk of a document stays
        ranked = list(one_per_document(ranked))
    return ranked[: options.k]


def rerank_order(question: str, query_vector: np.ndarray | None, texts: list[str], first_scores: list[float | None],
                 reranker: Reranker, weight: float) -> tuple[list[int], list[float]]:
    """The re-ranked order of a head (positions into `texts`, best first) by min-max(first-stage score) +
    `weight` * min-max(rerank score), ties in first-stage order; and each position's rerank score."""
    scores = reranker.score(question, query_vector, texts)
    first = min_max([(i, s or 0.0) for i, s in enumerate(first_scores)])
    second = min_max(list(enumerate(scores)))
    return sorted(range(len(texts)), key=lambda i: (-(first[i] + weight * second[i]), i)), scores


def search_result(plan: QueryPlan, hits: tuple[Hit, ...], embedder: Embedder | None,
                  reranker: Reranker | None) -> SearchResult:
    """The typed result: the hits, and the mode, scope, model and parameters that produced them."""
    options, reranked = plan.options, reranker is not None
    return SearchResult(
        question=plan.question,
        k=options.k,
        mode=f"{options.mode}+rerank" if reranked else options.mode,
        filters=plan.filters.describe(plan.rules),
        model=getattr(embedder, "name", None) if plan.want_vector else None,
        params={
            "top_k_vector": options.top_k_vector,
            "top_k_lexical": options.top_k_lexical,
            "rrf_k": options.rrf_k,
            "fusion": options.fusion,
            "fusion_weight": options.fusion_weight,
            "reranker": reranker.name if reranker is not None else None,
            "rerank_top_n": options.rerank_top_n if reranked else None,
            "rerank_weight": options.rerank_weight if reranked else None,
            "feedback_k": options.feedback_k if options.mode == "hybrid" else None,
            "feedback_weight": options.feedback_weight if options.mode == "hybrid" and options.feedback_k else None,
        },
        hits=hits,
        timings_ms={k: round(v, 3) for k, v in plan.timings.items()},
        query_vector=plan.query_vector,
    )
