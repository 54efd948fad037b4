"""The PostgreSQL store's lexical top-k from impact-ordered postings is exactly the top-k of scoring every
match: same chunks, same order, same scores, for every filter combination, after updates and deletions
(impacts computed with an older mean length), after a bulk load, and while postings are being rebuilt.
Also: a small filtered scope's vector search is exact."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from helpers.project import new_database
from ragstead.filters import QueryFilters
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite
from ragstead.stores.postgres import PostgresStore


@pytest.fixture
def embedder(fake_embedder):
    """Stores, filters and wiring, not ranking quality: the deterministic fake embedder stands in for the model."""
    return fake_embedder


DIM, WORDS = 8, 40
USERS = ("ana", "bo", "cy")
TYPES = ("user_kb", "dossier")


def _writes(rng: np.random.Generator, start: int, count: int, length: int = WORDS) -> list[DocumentWrite]:
    """Documents of 4 chunks whose words follow a Zipf law over 400 words (head words in most chunks, as in
    real text once stemmed), spread over users, types, privacy and dates."""
    out = []
    for n in range(start, start + count):
        user, doc_type = USERS[n % 3], TYPES[n % 2]
        private = n % 5 != 0
        doc_id = f"{n:064x}"
        chunks = []
        for i in range(4):
            words = " ".join(f"w{min(int(x), 400)}" for x in rng.zipf(1.25, length))
            chunks.append(ChunkRecord(f"{n:056x}{i:08x}", i, words, f"{n:056x}{i:08x}", 0, length, 0, 0, None,
                                      None, length))
        vectors = rng.standard_normal((4, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        path = f"kb/users/{user}/d{n}.md" if private else f"docs/d{n}.md"
        out.append(DocumentWrite(DocumentRecord(doc_id, path, "kb", doc_id, 0, 0.0, doc_type, private,
                                                user if private else None, None,
                                                f"2025-0{1 + n % 6}-01T00:00:00+00:00", None, ["t1"] if n % 4 else []),
                                 chunks, vectors))
    return out


def _filters() -> Iterator[QueryFilters]:
    """Each combination of privacy side, user, type, dates and tags."""
    for public, user, types, date_from, tags in itertools.product(
        (False, True), (None, "bo"), ((), ("dossier",)), (None, "2025-03-01"), ((), ("t1",))
    ):
        if public and user:
            continue
        yield QueryFilters(public_only=public, user_slug=user, doc_types=types, date_from=date_from, tags=tags)


QUERIES = [["w1"], ["w1", "w2"], ["w1", "w2", "w3", "w5"], ["w2", "w40"], ["w7", "w150", "w1"], ["w300"],
           ["w1", "w399", "w3"], ["w9", "w11", "w13"]]


def _every_match(store: PostgresStore, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
    """The reference: BM25 of every matching chunk, the path used before postings existed."""
    where, params = filters.to_sql("c", "%s")
    with store._transaction() as conn:
        words, avglen, _ = store._query_words(conn, terms)
        return store._score_every_match(conn, terms, words, where, params, k, avglen) if words else []


def _by_postings(store: PostgresStore, monkeypatch: pytest.MonkeyPatch, terms: list[str], filters: QueryFilters,
                 k: int) -> list[tuple[int, float]]:
    """lexical_search with the every-match path made unreachable, so the postings answer alone."""
    def refuse(*args: Any) -> None:
        raise AssertionError("the postings path gave up")

    with monkeypatch.context() as patch:
        patch.setattr(store, "_score_every_match", refuse)
        return store.lexical_search(terms, filters, k)


def _assert_same(found: list[tuple[int, float]], expected: list[tuple[int, float]]) -> None:
    assert [i for i, _ in found] == [i for i, _ in expected]
    assert np.allclose([s for _, s in found], [s for _, s in expected], rtol=1e-12, atol=0)


@pytest.fixture
def store(pg_server) -> Iterator[PostgresStore]:  # type: ignore[no-untyped-def]
    opened = PostgresStore(new_database(pg_server))
    opened.ensure_model("fake", DIM)
    yield opened
    opened.close()


def test_postings_top_k_is_every_match_top_k_for_every_filter(store: PostgresStore,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    store.apply(_writes(rng, 0, 60), [], [])
    # Later writes have longer chunks: the mean length grows, so the first postings' impacts are stale (lower
    # than today's); the bound's factor must cover it. Then deletions and a replaced document.
    store.apply(_writes(rng, 60, 60, length=70), [], [])
    store.apply(_writes(rng, 5, 1, length=90), [f"kb/users/{USERS[n % 3]}/d{n}.md" for n in (1, 2, 3)], [])
    with store._transaction() as conn:
        stored = float(store._meta(conn, "postings_avglen"))
        _, avglen, factor = store._query_words(conn, ["w1"])
    assert factor is not None and factor > 1.0 and avglen > stored  # the stale case is really exercised
    compared = nonempty = 0
    for filters in _filters():
        for terms in QUERIES:
            for k in (1, 10, 60):
                expected = _every_match(store, terms, filters, k)
                _assert_same(_by_postings(store, monkeypatch, terms, filters, k), expected)
                compared += 1
                nonempty += bool(expected)
    assert compared == 24 * len(QUERIES) * 3 and nonempty > compared * 0.8


def test_bulk_load_rebuilds_postings_and_search_stays_exact_meanwhile(store: PostgresStore,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    with store.bulk_load():
        store.apply(_writes(rng, 0, 40), [], [])
        with store._transaction() as conn:
            assert store._meta(conn, "postings_ready") == "0"
            assert conn.execute("SELECT count(*) FROM postings").fetchone()[0] == 0
        # Mid-load, search scores every match: still the exact answer.
        assert store.lexical_search(["w1", "w2"], QueryFilters(), 10) == _every_match(store, ["w1", "w2"],
                                                                                      QueryFilters(), 10)
    assert set(store.build_seconds) == {"hnsw", "postings"}
    with store._transaction() as conn:
        assert store._meta(conn, "postings_ready") == "1"
        postings, lexemes = conn.execute(
            "SELECT (SELECT count(*) FROM postings), (SELECT coalesce(sum(length(tsv)), 0) FROM chunks)").fetchone()
    assert postings == lexemes > 0  # one posting per (chunk, lexeme)
    for filters in (QueryFilters(), QueryFilters(user_slug="ana"), QueryFilters(public_only=True)):
        for terms in QUERIES:
            _assert_same(_by_postings(store, monkeypatch, terms, filters, 10), _every_match(store, terms, filters, 10))


def test_a_load_that_stopped_midway_is_rebuilt_by_the_next_settle(store: PostgresStore) -> None:
    rng = np.random.default_rng(5)
    store.apply(_writes(rng, 0, 10), [], [])
    with pytest.raises(KeyboardInterrupt), store.bulk_load():
        store.apply(_writes(rng, 10, 10), [], [])
        # What a crash leaves: the flag down, the postings gone (the `finally` rebuild never ran).
        with store._transaction() as conn:
            conn.execute("TRUNCATE postings")
        store.__class__ = _NoRebuild  # type: ignore[assignment]
        raise KeyboardInterrupt
    store.__class__ = PostgresStore
    with store._transaction() as conn:
        assert store._meta(conn, "postings_ready") == "0"
    assert store.settle_lexical() is True
    assert store.settle_lexical() is False  # ready now: nothing to do
    with store._transaction() as conn:
        assert conn.execute("SELECT count(*) FROM postings").fetchone()[0] == conn.execute(
            "SELECT sum(length(tsv)) FROM chunks").fetchone()[0]


class _NoRebuild(PostgresStore):
    def _settle_postings(self, force: bool = False) -> bool:
        return False


def test_reset_leaves_ready_empty_postings(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.apply(_writes(np.random.default_rng(6), 0, 5), [], [])
    store.reset()
    with store._transaction() as conn:
        assert conn.execute("SELECT count(*) FROM postings").fetchone()[0] == 0
        assert store._meta(conn, "postings_ready") == "1"
    store.ensure_model("fake", DIM)
    store.apply(_writes(np.random.default_rng(7), 0, 8), [], [])
    _assert_same(_by_postings(store, monkeypatch, ["w1", "w3"], QueryFilters(), 10),
                 _every_match(store, ["w1", "w3"], QueryFilters(), 10))


def test_a_small_filtered_scope_is_ranked_exactly(store: PostgresStore) -> None:
    rng = np.random.default_rng(8)
    store.apply(_writes(rng, 0, 60), [], [])
    with store._transaction() as conn:
        rows = conn.execute("SELECT id, embedding, user_slug, is_private FROM chunks", binary=True).fetchall()
    for user in USERS:
        q = rng.standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        mine = [(int(i), float(np.dot(np.asarray(v.to_numpy()), q))) for i, v, u, private in rows
                if u == user and private]
        expected = sorted(mine, key=lambda r: (-r[1], r[0]))[:10]
        found = store.vector_search(q, QueryFilters(user_slug=user), 10)
        assert [i for i, _ in found] == [i for i, _ in expected]
        assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)


def test_integrity_check_counts_postings_and_status_reports_them(store: PostgresStore) -> None:
    store.apply(_writes(np.random.default_rng(9), 0, 6), [], [])
    assert store.integrity_check() == "ok"
    assert store.stats()["lexical_postings"] == "ready"
    with store._transaction() as conn:
        conn.execute("DELETE FROM postings WHERE ctid = (SELECT min(ctid) FROM postings)")
    assert "postings for" in store.integrity_check()
    with store._transaction() as conn:
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'postings_ready'")
    assert store.stats()["lexical_postings"].startswith("rebuilding")
    assert store.settle_lexical() is True and store.integrity_check() == "ok"


def test_hybrid_sides_at_once_give_the_sequential_answer(pg_server) -> None:  # type: ignore[no-untyped-def]
    """search() runs a server store's two sides on two threads; the hits, order and scores are the same as
    one after the other, in every scope."""
    from helpers.fake_embedder import HashingEmbedder
    from ragstead.documents.metadata import DEFAULT_PATH_RULES
    from ragstead.retrieval.search import SearchOptions, search

    embedder = HashingEmbedder(DIM)
    opened = PostgresStore(new_database(pg_server))
    try:
        opened.ensure_model(embedder.name, DIM)
        writes = _writes(np.random.default_rng(10), 0, 40)
        for write in writes:
            write.vectors[:] = embedder.embed_documents([c.text for c in write.chunks])
        opened.apply(writes, [], [])
        assert opened.parallel_searches is True
        for filters in (QueryFilters(), QueryFilters(user_slug="cy"), QueryFilters(public_only=True)):
            for question in ("w1 w7", "w3 w150 w2", "w300"):
                options = SearchOptions(mode="hybrid", k=10)
                together = search(question, opened, embedder, filters, options, DEFAULT_PATH_RULES)
                opened.parallel_searches = False
                apart = search(question, opened, embedder, filters, options, DEFAULT_PATH_RULES)
                opened.parallel_searches = True
                assert together.hits and [(h.chunk_id, h.score) for h in together.hits] == [
                    (h.chunk_id, h.score) for h in apart.hits]
                assert set(together.timings_ms) >= {"vector_ms", "lexical_ms"}
    finally:
        opened.close()


def test_large_scoring_batches_may_use_parallel_workers_and_stay_exact(store: PostgresStore,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from ragstead.stores import postgres

    store.apply(_writes(np.random.default_rng(5), 0, 60), [], [])
    monkeypatch.setattr(postgres, "PARALLEL_SCORING_ROWS", 1)  # every exact-scoring batch takes the parallel path
    settings: list[str] = []
    score = PostgresStore._score

    def recording(self: PostgresStore, conn: Any, *args: Any, **kwargs: Any) -> list[tuple[int, float]]:
        settings.append(conn.execute("SELECT current_setting('parallel_setup_cost')").fetchone()[0])
        return score(self, conn, *args, **kwargs)

    monkeypatch.setattr(PostgresStore, "_score", recording)
    for filters in (QueryFilters(), QueryFilters(user_slug="bo"), QueryFilters(public_only=True)):
        for terms in QUERIES:
            _assert_same(_by_postings(store, monkeypatch, terms, filters, 10), _every_match(store, terms, filters, 10))
    assert "0" in settings  # scoring batches ran with the parallel costs lowered ...
    with store._transaction() as conn:  # ... for their own transaction only
        assert conn.execute("SELECT current_setting('parallel_setup_cost')").fetchone()[0] == "1000"


def test_chunk_terms_mirror_the_chunks_through_every_write_and_an_upgrade(pg_server) -> None:  # type: ignore[no-untyped-def]
    url = new_database(pg_server)
    store = PostgresStore(url)
    store.ensure_model("fake", DIM)
    rng = np.random.default_rng(11)
    columns = "id, doc_id, is_private, user_slug, doc_type, created_at, tsv::text"

    def mirrored() -> bool:
        with store._transaction() as conn:
            chunks = conn.execute(f"SELECT {columns} FROM chunks ORDER BY id").fetchall()
            terms = conn.execute(f"SELECT {columns} FROM chunk_terms ORDER BY id").fetchall()
        return chunks == terms and len(chunks) > 0

    store.apply(_writes(rng, 0, 20), [], [])  # COPY
    store.apply(_writes(rng, 5, 1, length=90), ["kb/users/bo/d1.md", "docs/d0.md"], [])  # replace + delete
    with store.bulk_load():
        store.apply(_writes(rng, 20, 10), [], [])
    assert mirrored() and store.integrity_check() == "ok"
    # A scoring row that disagrees with its chunk (here: a private chunk made public) is reported.
    with store._transaction() as conn:
        conn.execute("UPDATE chunk_terms SET is_private = NOT is_private WHERE id = (SELECT min(id) FROM chunks)")
    assert "lexical scoring row differs" in store.integrity_check()
    # An index from before migration 6 gets its chunk_terms built from the chunks on the next open.
    with store._transaction() as conn:
        conn.execute("DROP TABLE chunk_terms CASCADE")
        conn.execute("DROP TRIGGER chunks_inserted_terms ON chunks")
        conn.execute("DROP TRIGGER chunks_updated_terms ON chunks")
        conn.execute("DROP FUNCTION chunk_terms_copy()")
        conn.execute("DELETE FROM ragstead.migrations WHERE version = 6")
    store.close()
    store = PostgresStore(url)
    try:
        assert mirrored() and store.integrity_check() == "ok"
        terms = ["w1", "w3", "w7"]
        assert store.lexical_search(terms, QueryFilters(), 10) == _every_match(store, terms, QueryFilters(), 10)
    finally:
        store.close()
