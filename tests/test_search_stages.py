"""The search pipeline's stages on their own, over a fake store: how the page stage reads rows and drops
duplicates, and how the rerank stage orders, dedups and cuts (the end-to-end behaviour is in test_search.py)."""

from __future__ import annotations

from typing import Any

from ragstead.documents.metadata import DEFAULT_PATH_RULES
from ragstead.filters import QueryFilters
from ragstead.retrieval.search import (
    Candidate,
    QueryPlan,
    Ranking,
    RowReader,
    SearchOptions,
    fuse,
    one_per_document,
    page,
    rerank,
    rerank_order,
)

FILTERS = QueryFilters.build()  # the private scope: kb/ files pass the path backstop, docs/ ones do not


def row(rowid: int, doc: str, path: str = "") -> dict[str, Any]:
    return {"chunk_id": f"c{rowid}", "doc_id": doc, "text": f"chunk {rowid} of {doc}",
            "file_path": path or f"kb/users/alice/{doc}.md"}


class FakeStore:
    """Rows by rowid; records each fetch so a test can see what was read, and when."""

    def __init__(self, rows: dict[int, dict[str, Any]]) -> None:
        self.rows = rows
        self.fetches: list[list[int]] = []

    def fetch_chunks(self, rowids: list[int], filters: QueryFilters) -> dict[int, dict[str, Any]]:
        self.fetches.append(list(rowids))
        return {r: self.rows[r] for r in rowids if r in self.rows}  # a missing rowid: the SQL filter said no


def plan(options: SearchOptions, reranked: bool = False) -> QueryPlan:
    return QueryPlan("question", FILTERS, options, DEFAULT_PATH_RULES, reranked, None, {})


def test_rows_are_read_a_page_at_a_time_each_page_twice_the_last_and_only_as_far_as_needed():
    store = FakeStore({r: row(r, f"d{r}") for r in range(100)})
    reader = RowReader(store, FILTERS, DEFAULT_PATH_RULES)
    walk = reader.admitted_in_order(list(range(100)), first_page=4)
    assert [next(walk)[0] for _ in range(5)] == [0, 1, 2, 3, 4]
    assert store.fetches == [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9, 10, 11]]
    reader.read([2, 3, 12])  # a later stage reads only what no stage read before
    assert store.fetches[-1] == [12]


def test_the_walk_skips_rows_the_sql_filter_or_the_path_backstop_refuse():
    rows = {0: row(0, "a"), 2: row(2, "b", path="docs/public.md"), 3: row(3, "c")}  # 1: refused in SQL
    reader = RowReader(FakeStore(rows), FILTERS, DEFAULT_PATH_RULES)
    assert [rowid for rowid, _ in reader.admitted_in_order([0, 1, 2, 3], first_page=32)] == [0, 3]


def test_page_keeps_the_best_chunk_of_each_document_with_dedup_and_reads_past_the_duplicates():
    docs = ["a", "a", "b", "a", "c", "b", "d"]
    store = FakeStore({r: row(r, d) for r, d in enumerate(docs)})
    ranking = fuse(SearchOptions(mode="lexical"), [], [(r, 10.0 - r) for r in range(len(docs))])
    reader = RowReader(store, FILTERS, DEFAULT_PATH_RULES)
    kept = page(plan(SearchOptions(mode="lexical", k=3, dedup_sources=True)), reader, ranking, similarity={})
    assert [(c.row["chunk_id"], c.doc_id, c.lexical_rank) for c in kept] == [("c0", "a", 1), ("c2", "b", 3),
                                                                             ("c4", "c", 5)]
    # Without dedup, or when a reranker will choose a document's chunk, every chunk stays a candidate.
    options = SearchOptions(mode="lexical", k=3, dedup_sources=True, rerank_top_n=4)
    reranked = page(plan(options, reranked=True), RowReader(store, FILTERS, DEFAULT_PATH_RULES), ranking, {})
    assert [c.doc_id for c in reranked] == ["a", "a", "b", "a"]  # rerank_top_n (4) candidates, not k


def test_page_reports_the_first_pass_similarity_and_rounds_as_the_json_does():
    store = FakeStore({1: row(1, "a"), 2: row(2, "b")})
    ranking = Ranking([(2, 0.9), (1, 0.8)], [(1, 3.14159265)], {1: 0.123456789, 2: 0.5}, [2, 1])
    kept = page(plan(SearchOptions(k=2)), RowReader(store, FILTERS, DEFAULT_PATH_RULES), ranking,
                similarity={1: 0.70000049})  # 2 came only from the feedback pass: no similarity yet
    assert [(c.vector_rank, c.vector_score, c.dense_distance) for c in kept] == [(1, None, None),
                                                                                (2, 0.7, 0.3)]
    assert [(c.lexical_rank, c.lexical_score, c.fused_score) for c in kept] == [(None, None, 0.5),
                                                                                (1, 3.141593, 0.12345679)]


def test_one_per_document_keeps_the_first_of_each_in_order():
    candidates = [Candidate(row(r, d)) for r, d in enumerate("abacbd")]
    assert [c.row["chunk_id"] for c in one_per_document(candidates)] == ["c0", "c1", "c3", "c5"]


class Replay:
    """A reranker that returns fixed scores in order."""

    name = "replay"

    def __init__(self, scores: list[float]) -> None:
        self.scores = scores

    def score(self, question: str, query_vector: Any, texts: list[str]) -> list[float]:
        return self.scores[: len(texts)]


def test_rerank_order_blends_both_stages_and_breaks_ties_in_first_stage_order():
    order, scores = rerank_order("q", None, ["x", "y", "z"], [1.0, 0.5, None], Replay([0.0, 0.0, 1.0]), 1.0)
    # first-stage min-max: 1, 0.5, 0 (None counts as 0); rerank: 0, 0, 1 -> 1, 0.5, 1: a tie, first stage wins.
    assert order == [0, 2, 1] and scores == [0.0, 0.0, 1.0]
    assert rerank_order("q", None, ["x", "y"], [2.0, 1.0], Replay([0.0, 9.0]), 0.0)[0] == [0, 1]  # weight 0


def test_rerank_reorders_the_head_only_dedups_in_the_new_order_and_cuts_to_k():
    candidates = [Candidate(row(r, d), score=s) for r, (d, s) in enumerate(zip("abbc", [4.0, 3.0, 2.0, 1.0],
                                                                                strict=True))]
    options = SearchOptions(k=2, rerank_top_n=3, rerank_weight=10.0, dedup_sources=True)
    out = rerank(FakeStore({}), plan(options, reranked=True), candidates, Replay([0.0, 0.1, 0.9]))
    # Head re-ordered c2 (b), c1 (b), c0 (a): b's best chunk is now c2; the tail (c3) stays behind the head.
    assert [(c.row["chunk_id"], c.rerank_score) for c in out] == [("c2", 0.9), ("c0", 0.0)]
    everything = rerank(FakeStore({}), plan(SearchOptions(k=4, rerank_top_n=3), reranked=True), candidates,
                        Replay([0.0, 0.1, 0.9]))
    assert [c.row["chunk_id"] for c in everything][3:] == ["c3"] and everything[3].rerank_score is None
