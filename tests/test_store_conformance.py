"""One contract, every store: each test runs against the embedded store, a real PostgreSQL + pgvector (also in its
partitioned-by-user layout, `-k partitioned`), Chroma (embedded and a server) and Milvus Lite (`-k milvus`: lexical
in tantivy, and `milvus-bm25` with `lexical=milvus`); the read tests also run on a PostgreSQL streaming replica
(`-k replica`, at the end of this file).

(`store_spec` in conftest.py yields "" for SQLite and a fresh database URL on the session's server.)
The privacy property tests in test_privacy.py also run against both stores.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Iterator

import numpy as np
import pytest

from helpers.library import search
from helpers.project import PARTITIONED_KIND, STORE_KINDS, CountingEmbedder, Project, new_database, spec_for
from ragstead.errors import ModelMismatchError, RagsteadError
from ragstead.filters import QueryFilters
from ragstead.retrieval.rerank import fill_sentence_vectors
from ragstead.retrieval.search import SearchOptions
from ragstead.retrieval.sentences import split_sentences
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite
from ragstead.stores.chroma import chroma_where
from ragstead.stores.postgres_partitions import split_partition_option

FILES = {
    "kb/users/alice/2025-01-10-billing.md": "# Billing\nWe moved the billing database to PostgreSQL in January.",
    "kb/users/alice/2025-03-02-travel.md": "# Travel\nAlice's travel policy: economy class under six hours.",
    "kb/users/bob/2025-02-14-travel.md": "# Travel\nBob's secret travel policy allows business class on every flight.",
    "kb/users/bob/2025-04-01-salary.md": "# Salary\nBob negotiated a salary raise of eight percent.",
    "artifacts/dossiers/alice/2025-05-05-wallet.md": "Dossier: the wallet realised a profit of 12 ETH in May.",
    "kb/team/2025-01-20-runbook.md": "Team runbook: restart the billing database with the failover script.",
    "docs/2025-02-01-public.md": "Public docs: how to reset your password and contact billing support.",
    "docs/archive/2022-06-01-old.md": "Archived public note about the old billing database on MySQL.",
}

ALICE = {p for p in FILES if "/alice/" in p}


@pytest.fixture(params=[*STORE_KINDS, PARTITIONED_KIND])
def store_spec(request) -> str:  # type: ignore[no-untyped-def]
    """conftest.py's store kinds, and the PostgreSQL store partitioned by user."""
    return spec_for(request.param, request)


@pytest.fixture(params=[*STORE_KINDS[1:], PARTITIONED_KIND])
def server_spec(request) -> str:  # type: ignore[no-untyped-def]
    """conftest.py's server kinds, and the PostgreSQL store partitioned by user (migrate moves an index to it)."""
    return spec_for(request.param, request, side_db="kb/rag/chroma-side.db")


@pytest.fixture
def embedder(fake_embedder):
    """These tests check the stores' contract (scope, filters, writes), not the model: the deterministic fake
    embedder stands in for it (conftest.py), a fresh counter per test."""
    return fake_embedder


def ground_truth(project, filters: QueryFilters) -> set[str]:
    """Paths the filter admits, decided from the path and the stored document rows of the SQLite reference."""
    from ragstead.documents.metadata import derive_metadata

    admitted = set()
    for path in FILES:
        meta = derive_metadata(path, None, project.settings.path_rules)
        wants_archive = filters.include_archive or "archive" in filters.doc_types
        # A private-scope query that asks for the archive also sees the public archive; nothing else crosses.
        public_archive_asked_for = not meta.is_private and meta.doc_type == "archive" and wants_archive
        if meta.is_private == filters.public_only and not public_archive_asked_for:
            continue
        if filters.user_slug is not None and meta.user_slug != filters.user_slug:
            continue
        if filters.doc_types and meta.doc_type not in filters.doc_types:
            continue
        if meta.doc_type == "archive" and not wants_archive:
            continue
        day = (meta.created_at or "")[:10]
        if filters.date_from and day < filters.date_from:
            continue
        if filters.date_to and day > filters.date_to:
            continue
        if filters.tags and not set(filters.tags) & set(meta.tags):
            continue
        admitted.add(path)
    return admitted


@pytest.fixture
def project(make_project, store_spec):
    project = make_project(FILES, store=store_spec)
    project.index()
    return project


@pytest.fixture(scope="module", params=[*STORE_KINDS, PARTITIONED_KIND])
def indexed(request, tmp_path_factory, hashing_embedder):  # type: ignore[no-untyped-def]
    """FILES indexed once per store kind, for the tests that only read it (`project` is a fresh index per test, for
    the tests that write)."""
    project = Project(tmp_path_factory.mktemp("indexed"), CountingEmbedder(hashing_embedder),
                      spec_for(request.param, request))
    project.write(FILES)
    project.index()
    yield project
    project.store.close()


def _paths(project, hits: list[tuple[int, float]], filters: QueryFilters) -> set[str]:
    rows = project.store.fetch_chunks([h[0] for h in hits], filters)
    return {r["file_path"] for r in rows.values()}


FILTER_GRID = list(itertools.product(
    [None, "alice", "bob", "mallory"],
    [(), ("user_kb",), ("dossier", "kb"), ("archive",), ("docs",)],
    [False, True],
    [False, True],
    [(None, None), ("2025-02-01", None), (None, "2025-02-14"), ("2025-02-14", "2025-02-14")],
))


def test_every_filter_is_enforced_by_both_searches_fetch_and_listing(indexed):
    """Scope × doc type × privacy × archive × dates: each search returns exactly what the filter admits."""
    probe = indexed.embedder.embed_query("billing travel salary wallet password")
    checked = 0
    for user, types, public, archive, (start, end) in FILTER_GRID:
        f = QueryFilters.build(user_slug=user, doc_types=types, public_only=public, include_archive=archive,
                               date_from=start, date_to=end)
        expected = ground_truth(indexed, f)
        # k far above the corpus: the vector side must return every admitted chunk and nothing else.
        assert _paths(indexed, indexed.store.vector_search(probe, f, 100), f) == expected, f
        # Every file says one of these words, so the lexical side too must return exactly the admitted ones.
        lexical = indexed.store.lexical_search(
            ["billing", "travel", "salary", "wallet", "password", "runbook"], f, 100
        )
        assert _paths(indexed, lexical, f) == expected, f
        everything = [h[0] for h in indexed.store.vector_search(probe, QueryFilters(), 100)]
        assert {r["file_path"] for r in indexed.store.fetch_chunks(everything, f).values()} <= expected
        assert {d["file_path"] for d in indexed.store.list_documents(f)} == expected, f
        assert indexed.store.count_documents(f) == len(expected), f  # what a list answer says it examined
        checked += bool(expected)
    assert checked > 40  # the grid really selects rows, so agreement is not agreement on nothing


def test_tag_filter(make_project, store_spec):
    project = make_project({"kb/users/ann/2025-01-01-a.md": "rivers and lakes", "kb/users/ann/2025-01-02-b.md":
                            "rivers and seas"}, store=store_spec)
    project.index()
    doc = DocumentRecord("t" * 64, "kb/users/ann/tagged.md", "kb", "h", 1, 1.0, "user_kb", True, "ann", None,
                         "2025-01-03T00:00:00+00:00", None, ["home", "boat"])
    chunk = ChunkRecord("c" * 64, 0, "rivers with a tag", "x" * 64, 0, 4, 0, 17, None, None, 4)
    vector = project.embedder.embed_documents(["rivers with a tag"])
    project.store.apply([DocumentWrite(doc, [chunk], vector)], [], [])
    for tags, expected in ((("boat",), {"kb/users/ann/tagged.md"}), (("home", "none"), {"kb/users/ann/tagged.md"}),
                           (("none",), set())):
        f = QueryFilters.build(user_slug="ann", tags=tags)
        assert _paths(project, project.store.vector_search(vector[0], f, 10), f) == expected
        assert _paths(project, project.store.lexical_search(["rivers"], f, 10), f) == expected
        assert {d["file_path"] for d in project.store.list_documents(f)} == expected
        assert project.store.count_documents(f) == len(expected)


@pytest.mark.parametrize("mode", ["vector", "lexical", "hybrid"])
def test_another_users_secret_never_leaks(indexed, mode):
    """alice asks for bob's words in every way; nothing of bob's, and nothing public, comes back."""
    for question in ("Bob's secret travel policy business class", "bob salary raise eight percent",
                     "secret OR bob OR *", "bob) | (alice", "'; DROP TABLE chunks; --", "!bob & :* <-> salary"):
        out = search(question, indexed.store, indexed.embedder, QueryFilters.build(user_slug="alice"),
                     SearchOptions(mode=mode, k=50, top_k_vector=100, top_k_lexical=100), indexed.settings.path_rules)
        assert {r["file_path"] for r in out["results"]} <= ALICE, (question, out["results"])
    public = search("secret travel policy salary", indexed.store, indexed.embedder,
                    QueryFilters.build(public_only=True, include_archive=True), SearchOptions(mode=mode, k=50))
    assert {r["file_path"] for r in public["results"]} <= {"docs/2025-02-01-public.md",
                                                             "docs/archive/2022-06-01-old.md"}


@pytest.mark.parametrize("question", ["' OR 1=1 --", "a & b | !c", "foo:* <-> bar", "\\", "(", "NEAR(a b)", "\x00"])
def test_query_syntax_is_plain_text(indexed, question):
    f = QueryFilters.build(user_slug="alice")
    out = search(question, indexed.store, indexed.embedder, f, SearchOptions(mode="lexical", k=5))
    assert {r["file_path"] for r in out["results"]} <= ALICE


def test_incremental_reindex_touches_only_what_changed_and_removes_deleted(project):
    (project.root / "kb/users/alice/2025-03-02-travel.md").write_text("# Travel\nAlice now flies by train only.")
    (project.root / "kb/users/bob/2025-04-01-salary.md").unlink()
    (project.root / "kb/users/bob/2025-06-01-new.md").write_text("Bob's new note about sailing boats.")
    project.embedder.reset()
    report = project.index()
    assert (report.added, report.updated, report.removed) == (
        ["kb/users/bob/2025-06-01-new.md"], ["kb/users/alice/2025-03-02-travel.md"],
        ["kb/users/bob/2025-04-01-salary.md"],
    )
    assert report.unchanged == len(FILES) - 2
    assert all("train" in t or "sailing" in t for t in project.embedder.texts_embedded)
    assert "kb/users/bob/2025-04-01-salary.md" not in project.store.manifest()
    bob = QueryFilters.build(user_slug="bob")
    out = search("salary raise", project.store, project.embedder, bob, SearchOptions(mode="hybrid", k=10))
    assert "kb/users/bob/2025-04-01-salary.md" not in {r["file_path"] for r in out["results"]}
    assert project.store.lexical_search(["negotiated"], bob, 10) == []
    stats = project.store.stats()
    assert stats["documents"] == len(FILES) and stats["chunks"] == stats["lexical_rows"]
    assert project.store.integrity_check() == "ok"
    project.embedder.reset()
    assert project.index().unchanged == len(FILES) and project.embedder.texts_embedded == []


def test_postgres_bm25_statistics_stay_in_step_with_the_chunks(make_project, pg_url):
    """df per lexeme, chunk count and length total, after adds, updates and deletes, equal a recount."""
    import psycopg

    project = make_project(FILES, store=pg_url)
    project.index()
    (project.root / "kb/users/alice/2025-03-02-travel.md").write_text("# Travel\nAlice now flies by train only.")
    (project.root / "kb/users/bob/2025-04-01-salary.md").unlink()
    project.index()
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET search_path TO ragstead, public")
        kept = dict(conn.execute("SELECT lexeme, df FROM lexemes WHERE df != 0").fetchall())
        recount = dict(conn.execute("SELECT u.lexeme, count(*) FROM chunks c, unnest(c.tsv) u GROUP BY 1").fetchall())
        meta = dict(conn.execute("SELECT key, value::bigint FROM meta WHERE key LIKE 'lexical_%'").fetchall())
        chunks, length = conn.execute("SELECT count(*), sum(length(tsv)) FROM chunks").fetchone()
    assert kept == recount and "negotiated" not in kept and "train" in kept
    assert (meta["lexical_chunks"], meta["lexical_length_sum"]) == (chunks, length)
    # BM25 in SQL ranks the rare word's chunk first
    hits = project.store.lexical_search(["billing", "failover"], QueryFilters(), 5)
    top = project.store.fetch_chunks([hits[0][0]], QueryFilters())
    assert "failover" in next(iter(top.values()))["text"]


def test_last_indexed_at_is_the_latest_indexed_at_of_any_document(make_project, store_spec):
    """`ragstead status`'s last index time: None for an empty index, else the newest `indexed_at` of every
    document, private or public."""
    project = make_project({}, store=store_spec)
    assert project.store.last_indexed_at() is None
    project.write(FILES)
    project.index()
    stamps = {d["file_path"]: d["indexed_at"] for public in (False, True)
              for d in project.store.list_documents(QueryFilters(public_only=public, include_archive=True), 100)}
    assert set(stamps) == set(FILES)
    last = project.store.last_indexed_at()
    assert last == max(stamps.values()) and last.endswith("Z") and last[:4].isdigit()


def test_a_failed_batch_changes_nothing(project):
    """A write that fails half-way (here: one vector short) rolls back whole: no half document, no lost one."""
    before = {d["file_path"]: d["file_hash"] for d in project.store.list_documents(QueryFilters(), 100)}
    before_public = project.store.list_documents(QueryFilters(public_only=True, include_archive=True), 100)
    doc = DocumentRecord("n" * 64, "kb/users/alice/2025-01-10-billing.md", "kb", "changed", 1, 1.0, "user_kb", True,
                         "alice", None, None, None, [])
    chunks = [ChunkRecord(f"{i}" * 64, i, f"part {i}", f"{i}h" * 32, 0, 2, 0, 6, None, None, 2) for i in range(3)]
    vectors = np.zeros((2, project.embedder.dim), dtype=np.float32)  # one short: the insert fails mid-batch
    with pytest.raises((ValueError, RagsteadError)):
        project.store.apply([DocumentWrite(doc, chunks, vectors)], ["docs/2025-02-01-public.md"], [])
    after = {d["file_path"]: d["file_hash"] for d in project.store.list_documents(QueryFilters(), 100)}
    assert after == before
    assert project.store.list_documents(QueryFilters(public_only=True, include_archive=True), 100) == before_public
    assert project.store.integrity_check() == "ok"
    hits = project.store.lexical_search(["billing"], QueryFilters.build(user_slug="alice"), 10)
    assert _paths(project, hits, QueryFilters.build(user_slug="alice")) == {"kb/users/alice/2025-01-10-billing.md"}


def test_chroma_scores_small_scopes_exactly_from_sqlite_and_sends_large_ones_to_chroma(make_project, monkeypatch):
    """The default planner: a scope of at most a fifth of the index (and at most exact_rows chunks) never
    reaches Chroma and gets exactly the embedded store's answer; a larger one is Chroma's filtered search."""
    from chromadb.api.models.Collection import Collection

    calls = []
    query = Collection.query
    monkeypatch.setattr(Collection, "query", lambda self, *a, **kw: calls.append(kw["where"]) or query(self, *a, **kw))
    files = FILES | {f"kb/team/2025-02-{1 + i:02d}-ops.md": f"Ops note {i} on the deploy pipeline." for i in range(30)}
    embedded = make_project(files)
    embedded.index()
    alice, team = QueryFilters.build(user_slug="alice"), QueryFilters()
    q = embedded.embedder.embed_query("billing database")
    for spec, scope, through_chroma in (("chroma:kb/rag/c1", alice, False),  # 3 of 38 chunks: exact
                                        ("chroma:kb/rag/c1", team, True),  # most of the index: Chroma
                                        ("chroma:kb/rag/c2?exact_rows=1", alice, True)):  # over the cap
        project = make_project(files, store=spec)
        project.index()
        calls.clear()
        expected = embedded.store.vector_search(q, scope, 3)
        hits = project.store.vector_search(q, scope, 3)
        assert [s for _, s in hits] == pytest.approx([s for _, s in expected], abs=1e-5)
        assert _paths(project, hits, scope) == _paths(embedded, expected, scope)
        assert calls == ([chroma_where(scope)] if through_chroma else [])


@pytest.mark.parametrize("kind", ["chroma", "chroma-http"])
def test_chroma_missing_a_write_is_repaired_from_sqlite(make_project, request, monkeypatch, kind):
    """Chroma fails after SQLite committed (a server gone mid-index): the write reports an error, SQLite keeps
    the batch, and the next search brings Chroma back in step, so nothing is lost and nothing leaks."""
    from chromadb.api.models.Collection import Collection

    project = make_project(FILES, store=spec_for(kind, request))
    project.index()

    def server_gone(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("connection reset by peer")

    # fault injection: real collections, whose writes fail until the patch is undone
    monkeypatch.setattr(Collection, "upsert", server_gone)
    project.write({"kb/users/alice/2025-06-01-new.md": "Alice's new note on the zeppelin hangar lease."})
    with pytest.raises(RagsteadError, match="Chroma store"):
        project.index()
    monkeypatch.undo()
    assert project.store.get_document(file_path="kb/users/alice/2025-06-01-new.md") is not None  # kept in SQLite
    alice, bob = QueryFilters.build(user_slug="alice"), QueryFilters.build(user_slug="bob")
    query = project.embedder.embed_query("zeppelin hangar lease")
    assert "kb/users/alice/2025-06-01-new.md" in _paths(project, project.store.vector_search(query, alice, 3), alice)
    assert "kb/users/alice/2025-06-01-new.md" not in _paths(project, project.store.vector_search(query, bob, 9), bob)
    assert project.store.integrity_check() == "ok"
    assert project.store.stats()["vector_rows"] == project.store.stats()["chunks"]


def test_model_guard_refuses_mixing_models(project):
    stats = project.store.stats()
    with pytest.raises(ModelMismatchError):
        project.store.ensure_model("another-model", stats["embed_dim"])
    with pytest.raises(ModelMismatchError):
        project.store.check_model(stats["embed_model"], 768)
    project.store.check_model(stats["embed_model"], stats["embed_dim"])
    # The cheap read that `embedder_for` uses agrees with stats() on every store.
    assert project.store.embed_model() == stats["embed_model"] == project.embedder.name
    project.store.reset()
    assert project.store.stats()["chunks"] == 0 and project.store.manifest() == {}
    assert project.store.embed_model() is None
    project.store.ensure_model("another-model", 8)  # an emptied index takes a new model
    assert project.store.embed_model() == "another-model"
    assert project.store.stats()["embed_dim"] == 8


def test_vector_cache_and_chunk_vectors_round_trip(indexed):
    rows = indexed.store.fetch_chunks([h[0] for h in indexed.store.vector_search(
        indexed.embedder.embed_query("billing"), QueryFilters.build(user_slug="alice"), 1)],
        QueryFilters.build(user_slug="alice"))
    (row,) = rows.values()
    stored = indexed.store.chunk_vectors([row["chunk_id"]])[row["chunk_id"]]
    assert stored.dtype == np.float32 and stored.shape == (indexed.embedder.dim,)
    np.testing.assert_allclose(stored, indexed.embedder.embed_documents([row["text"]])[0], atol=1e-5)


def test_sentence_vectors_round_trip_and_go_with_their_chunks(project):
    store = project.store
    missing = store.chunks_without_sentence_vectors(0, 1000)
    assert len(missing) == store.stats()["chunks"] and store.stats()["sentence_vector_chunks"] == 0
    assert fill_sentence_vectors(store, project.embedder) == len(missing)
    assert fill_sentence_vectors(store, project.embedder) == 0  # incremental: nothing left to embed
    assert store.stats()["sentence_vector_chunks"] == len(missing)
    by_id = store.fetch_chunks([h[0] for h in store.lexical_search(["billing"], QueryFilters.build(), 10)],
                               QueryFilters.build())
    stored = store.sentence_vectors([row["chunk_id"] for row in by_id.values()] + ["no-such-chunk"])
    assert set(stored) == {row["chunk_id"] for row in by_id.values()}
    for row in by_id.values():
        expected = project.embedder.embed_documents(split_sentences(row["text"]) or [row["text"]])
        assert stored[row["chunk_id"]].dtype == np.float32
        np.testing.assert_allclose(stored[row["chunk_id"]], expected, atol=1e-5)
    # A chunk rewritten since it was read is not given the old text's vectors.
    rowid = missing[0][0]
    assert store.put_sentence_vectors([(rowid, "another-text-hash", np.ones((1, project.embedder.dim)))]) == 0
    # Edited and deleted files take their chunks' sentence vectors with them; the next fill embeds only the new.
    (project.root / "kb/users/alice/2025-03-02-travel.md").write_text("# Travel\nAlice now flies by train only.")
    (project.root / "kb/users/bob/2025-04-01-salary.md").unlink()
    project.index()
    stats = store.stats()
    assert stats["sentence_vector_chunks"] == stats["chunks"] - 1
    project.embedder.reset()
    assert fill_sentence_vectors(store, project.embedder) == 1
    assert all("train" in text for text in project.embedder.texts_embedded)
    assert store.integrity_check() == "ok"
    store.reset()
    assert store.stats()["sentence_vector_chunks"] == 0


def test_filtered_vector_search_returns_k_whenever_k_exist(make_project, store_spec):
    """A scope far smaller than the HNSW walk: still exactly k results (the exact fallback)."""
    files = {f"kb/users/u{i % 40}/2025-01-{1 + i % 28:02d}-{i}.md": f"note {i} on topic {i % 7}" for i in range(400)}
    postgres = store_spec.startswith("postgresql")
    if postgres:
        import psycopg

        # Make the graph walk give up after 20 rows, as it would on a large corpus with a small scope.
        with psycopg.connect(split_partition_option(store_spec)[0], autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f'ALTER DATABASE "{conn.info.dbname}" SET hnsw.max_scan_tuples = 20')
            conn.execute(f'ALTER DATABASE "{conn.info.dbname}" SET enable_seqscan = off')
    project = make_project(files, store=store_spec)
    project.index()
    f = QueryFilters.build(user_slug="u3")
    own = sorted(p for p in files if p.startswith("kb/users/u3/"))
    if postgres:
        # And make HNSW the planner's only way to order by distance: without the scope index, only the
        # exact fallback can find all 10 of u3's chunks.
        with psycopg.connect(split_partition_option(store_spec)[0], autocommit=True) as conn:
            conn.execute("DROP INDEX ragstead.chunks_scope")
    elif store_spec.startswith("milvus"):
        # The same for Milvus: 7 of u3's 10 vectors vanish from the collection behind the store's back.
        assert project.store.integrity_check() == "ok"
        vectors = project.store.vectors
        ids = sorted(project.store._db.execute("SELECT id FROM chunks WHERE user_slug = 'u3'").fetchall())
        vectors._client.delete(vectors._name, ids=[i for (i,) in ids[:7]])
        assert len(vectors._client.search(vectors._name, data=[project.embedder.embed_query("note").tolist()],
                                          anns_field="dense", limit=10, filter='user_slug == "u3"')[0]) <= 3
    elif store_spec:
        # Chroma answers small scopes by brute force, so make it miss rows the hard way: 7 of u3's 10
        # vectors vanish from the collection behind the store's back (after its last in-step check), as
        # in a damaged Chroma. SQLite still has them.
        assert project.store.integrity_check() == "ok"
        collection = project.store.vectors._open_collection()
        ids = sorted(project.store._db.execute("SELECT id FROM chunks WHERE user_slug = 'u3'").fetchall())
        collection.delete(ids=[str(i) for (i,) in ids[:7]])
        # Chroma's filtered HNSW walk may find fewer than the 3 that are left: either way it is short of 10.
        assert len(collection.query(query_embeddings=[project.embedder.embed_query("note")], n_results=10,
                                    where={"user_slug": "u3"})["ids"][0]) <= 3
    hits = project.store.vector_search(project.embedder.embed_query("note on topic 2"), f, 10)
    assert len(hits) == len(own) == 10
    assert _paths(project, hits, f) == set(own)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    if store_spec and not postgres:  # the next open sees the count differ and puts the 7 back

        reopened = project.settings.store_spec().open()
        assert reopened.integrity_check() == "ok" and reopened.stats()["vector_rows"] == 400
        again = reopened.vector_search(project.embedder.embed_query("note on topic 2"), f, 10)
        assert [i for i, _ in again] == [i for i, _ in hits]
        assert [s for _, s in again] == pytest.approx([s for _, s in hits], abs=1e-5)
        reopened.close()


def test_hybrid_results_agree_with_the_embedded_store(make_project, server_spec):
    """Same corpus, same queries: vector results identical, hybrid top 3 nearly so (PostgreSQL ranks words
    with its own BM25 over its own stemmer; Chroma shares the embedded lexical index)."""
    corpus = {f"kb/users/alice/2025-01-{1 + i:02d}-n{i}.md": text for i, text in enumerate([
        "The billing database moved to PostgreSQL after the January outage.",
        "Quarterly planning: hire two engineers for the search team.",
        "Travel policy: economy class for flights shorter than six hours.",
        "The failover script restarts the billing database on the standby host.",
        "Lunch menu for the offsite: vegetarian options and coffee.",
        "Search quality improved after adding BM25 fusion with vectors.",
        "Password resets go through the self-service portal only.",
        "The wallet realised a profit after the May rebalancing.",
        "On-call rotation: each engineer covers one week per quarter.",
        "Backups of the billing database run nightly at two o'clock.",
    ])}
    embedded = make_project(corpus)
    server = make_project(corpus, store=server_spec)
    embedded.index()
    server.index()
    f = QueryFilters.build(user_slug="alice")
    questions = ["billing database outage", "how do I reset my password", "flight class rules",
                 "who is on call", "search ranking fusion", "nightly backups", "engineers hiring plan"]
    top3_overlap = []
    for q in questions:
        results = {}
        for name, p in (("sqlite", embedded), ("postgresql", server)):
            for mode in ("vector", "hybrid"):
                out = search(q, p.store, p.embedder, f, SearchOptions(mode=mode, k=3), p.settings.path_rules)
                results[name, mode] = [r["file_path"] for r in out["results"]]
        assert results["sqlite", "vector"] == results["postgresql", "vector"], q
        assert results["sqlite", "hybrid"][0] == results["postgresql", "hybrid"][0], q
        top3_overlap.append(len(set(results["sqlite", "hybrid"]) & set(results["postgresql", "hybrid"])) / 3)
    assert sum(top3_overlap) / len(top3_overlap) >= 0.8, top3_overlap


def _snapshot(store) -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    """Every document with its chunks and vectors, comparable across stores."""
    return {w.document.file_path: (w.document, [c for c in w.chunks], w.vectors.round(6).tobytes())
            for w in store.export_documents(batch_size=3)}


def test_migrate_copies_everything_both_ways_without_embedding(make_project, server_spec):
    from ragstead.stores.migrate import copy_store

    source = make_project(FILES)
    source.index()
    target = source.settings.with_overrides(store=server_spec).store_spec().open()
    report = copy_store(source.store, target, batch_size=3)
    assert (report.documents, report.chunks) == (len(FILES), source.store.stats()["chunks"])
    assert _snapshot(target) == _snapshot(source.store)
    assert target.integrity_check() == "ok"
    f = QueryFilters.build(user_slug="alice")
    q = source.embedder.embed_query("billing database")
    expected = source.store.vector_search(q, f, 3)
    assert expected and [s for _, s in target.vector_search(q, f, 3)] == pytest.approx([s for _, s in expected])
    with pytest.raises(RagsteadError, match="already holds documents"):
        copy_store(source.store, target)
    # ... and back into a new embedded index
    back = source.settings.with_overrides(store=f"sqlite:{source.root}/kb/rag/back.db").store_spec().open()
    copy_store(target, back)
    assert _snapshot(back) == _snapshot(source.store)
    assert back.integrity_check() == "ok"
    for store in (target, back):
        store.close()


def test_cli_runs_on_postgresql(make_project, pg_url, cli):
    """index, query, ask, status and migrate on the server store, each in a real process."""
    import json

    project = make_project(FILES)
    out = cli(project, "index", "--store", pg_url, "--roots", "kb,artifacts,docs", "--format", "json")
    assert json.loads(out.stdout)["index"]["store"] == "postgresql"
    out = cli(project, "query", "billing database", "--store", pg_url, "--user", "alice", "--k", "2", "--json")
    results = json.loads(out.stdout)["results"]
    assert results and {r["file_path"] for r in results} <= ALICE
    out = cli(project, "ask", "what did we decide about the billing database", "--store", pg_url, "--user", "alice",
              "--extractive", "--format", "json")
    assert {c["source"] for c in json.loads(out.stdout)["citations"]} <= ALICE
    status = json.loads(cli(project, "status", "--store", pg_url, "--json").stdout)
    assert status["integrity"] == "ok" and status["documents"] == len(FILES)
    assert status["last_indexed_at"] is not None
    assert status["pgvector_version"] >= "0.8" and status["lexical_postings"] == "ready"
    # What a load that died midway leaves: status says so, and the next index run (nothing to index) rebuilds.
    import psycopg

    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE ragstead.meta SET value = '0' WHERE key = 'postings_ready'")
    assert "postings" in cli(project, "status", "--store", pg_url).stdout
    cli(project, "index", "--store", pg_url, "--roots", "kb,artifacts,docs")
    assert json.loads(cli(project, "status", "--store", pg_url, "--json").stdout)["lexical_postings"] == "ready"
    # migrate back to a new embedded file, then query it
    cli(project, "migrate", "--from", pg_url, "--to", "sqlite:kb/rag/copy.db")
    copied = json.loads(cli(project, "query", "billing database", "--store", "sqlite:kb/rag/copy.db", "--user",
                            "alice", "--k", "2", "--json").stdout)["results"]
    assert [r["file_path"] for r in copied] == [r["file_path"] for r in results]
    for url in ("postgresql://ragstead:hunter2@127.0.0.1:1/nope", "postgresql://ragstead:hunter2@[::1/nope",
                "postgresql://ragstead:hunter2@127.0.0.1:notaport/nope"):
        # libpq repeats a malformed URI in its message; neither that nor our own text may show the password
        for args in (("query", "x", "--store", url), ("migrate", "--from", url, "--to", "sqlite:kb/rag/m.db")):
            bad = cli(project, *args, expect=2)
            assert "error:" in bad.stderr and "hunter2" not in bad.stderr and "Traceback" not in bad.stderr
    cli(project, "query", "x", "--store", "mongodb://x", expect=2)


def test_cli_runs_on_chroma(make_project, chroma_server, cli):
    """index, query, status and migrate with Chroma as the vector store, embedded and as a server; clear
    errors for a server that is not there and for a migration onto the index file it would read."""
    import json

    project = make_project(FILES)
    local = "chroma:kb/rag/chroma"
    out = cli(project, "index", "--store", local, "--roots", "kb,artifacts,docs", "--format", "json")
    assert json.loads(out.stdout)["index"]["store"] == "chroma"
    results = json.loads(cli(project, "query", "billing database", "--store", local, "--user", "alice", "--k",
                             "2", "--json").stdout)["results"]
    assert results and {r["file_path"] for r in results} <= ALICE
    status = json.loads(cli(project, "status", "--store", local, "--json").stdout)
    assert status["integrity"] == "ok" and status["vector_rows"] == status["chunks"] > 0
    remote = f"{chroma_server}?db=kb/rag/remote.db"
    cli(project, "migrate", "--from", local, "--to", remote)
    copied = json.loads(cli(project, "query", "billing database", "--store", remote, "--user", "alice", "--k",
                            "2", "--json").stdout)["results"]
    assert [r["file_path"] for r in copied] == [r["file_path"] for r in results]
    assert json.loads(cli(project, "status", "--store", remote, "--json").stdout)["integrity"] == "ok"
    for spec in ("chroma+http://127.0.0.1:1", "chroma:", "chroma+http://:80", "chroma:kb/rag/chroma?exact_rows=ten"):
        bad = cli(project, "query", "x", "--store", spec, expect=2)
        assert "error:" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    # the embedded default and a Chroma server without ?db= share kb/rag/ragstead.db: nothing to copy
    bad = cli(project, "migrate", "--from", "sqlite", "--to", chroma_server, expect=2)
    assert "share" in bad.stderr


def test_postgres_migrations_are_versioned_idempotent_and_race_free(pg_url):
    """Four processes' worth of stores open a fresh database at once: the schema is made exactly once."""
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    from ragstead.stores.postgres import PostgresStore
    from ragstead.stores.postgres_migrations import LATEST

    with ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: PostgresStore(pg_url), range(4)))
    for store in stores:
        assert store.stats()["schema_version"] == LATEST
        store.close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        applied = conn.execute("SELECT version FROM ragstead.migrations ORDER BY version").fetchall()
        assert applied == [(v,) for v in range(1, LATEST + 1)]
        conn.execute("INSERT INTO ragstead.migrations (version, description) VALUES (%s, 'from the future')",
                     (LATEST + 1,))
    with pytest.raises(RagsteadError, match="newer than this ragstead knows"):
        PostgresStore(pg_url)


def test_postgres_errors_are_clear_and_never_show_the_password(pg_server):
    from ragstead.stores.postgres import PostgresStore

    url = f"postgresql://ragstead:s3cret-pw@127.0.0.1:{pg_server.port}/no_such_db"
    with pytest.raises(RagsteadError) as caught:
        PostgresStore(url, connect_timeout=3)
    assert "no_such_db" in str(caught.value) and "s3cret-pw" not in str(caught.value)


# -- a PostgreSQL streaming replica (`-k replica`): reads answer what the primary indexed once replayed -------

def on_replica(url: str, replica) -> str:  # type: ignore[no-untyped-def]
    """The same database, on the replica's port."""
    return replica.database_url(url.rpartition("/")[2])


def wait_for_replay(primary_url: str, replica_url: str, timeout: float = 30.0) -> None:
    """Until the replica has replayed everything the primary had written when called."""
    import psycopg

    with psycopg.connect(primary_url, autocommit=True) as conn:
        target = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    deadline = time.monotonic() + timeout
    with psycopg.connect(replica_url, autocommit=True) as conn:
        while not conn.execute("SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s) >= 0", (target,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the replica did not replay the primary's writes"
            time.sleep(0.05)


@pytest.fixture
def replica_project(make_project, pg_server, pg_replica):  # type: ignore[no-untyped-def]
    """The conformance corpus indexed into the primary; the project's store is then the replica's."""
    primary_url = new_database(pg_server)
    project = make_project(FILES, store=primary_url)
    project.index()
    replica_url = on_replica(primary_url, pg_replica)
    wait_for_replay(primary_url, replica_url)
    project.primary = project.store
    project.settings = project.settings.with_overrides(store=replica_url)
    project.store = project.settings.store_spec().open()
    yield project
    project.store.close()
    project.store = project.primary  # make_project closes it


def test_replica_answers_the_conformance_read_tests(replica_project):
    test_every_filter_is_enforced_by_both_searches_fetch_and_listing(replica_project)
    for mode in ("vector", "lexical", "hybrid"):
        test_another_users_secret_never_leaks(replica_project, mode)
    for question in ("' OR 1=1 --", "a & b | !c", "(", "\x00"):
        test_query_syntax_is_plain_text(replica_project, question)


def test_replica_answers_what_the_primary_indexed_once_replayed(replica_project):
    primary, replica = replica_project.primary, replica_project.store
    alice = QueryFilters.build(user_slug="alice")
    query = replica_project.embedder.embed_query("billing database")
    assert replica.vector_search(query, alice, 3) == primary.vector_search(query, alice, 3)
    assert replica.lexical_search(["billing"], alice, 3) == primary.lexical_search(["billing"], alice, 3)
    assert replica.integrity_check() == "ok"
    replica_project.write({"kb/users/alice/2025-06-01-new.md": "Alice's note on the zeppelin hangar lease."})
    replica_project.store = primary  # index into the primary ...
    replica_project.index()
    replica_project.store = replica
    assert "kb/users/alice/2025-06-01-new.md" in {d["file_path"] for d in primary.list_documents(alice)}
    wait_for_replay(primary.url, replica.url)  # ... and the replica has it once replayed
    assert "kb/users/alice/2025-06-01-new.md" in {d["file_path"] for d in replica.list_documents(alice)}


def test_a_write_aimed_at_a_replica_fails_with_one_clear_line(replica_project):
    with pytest.raises(RagsteadError) as failure:
        replica_project.store.reset()
    message = str(failure.value)
    assert "read replica" in message and "primary" in message and "\n" not in message


def test_replica_status_says_it_is_one_and_how_far_behind(replica_project, cli):
    stats = replica_project.store.stats()
    assert stats["replica"]["replay_lag_bytes"] >= 0 and stats["replica"]["replayed_lsn"]
    assert replica_project.primary.stats()["replica"] is None
    url = replica_project.settings.store
    status = cli(replica_project, "status", "--store", url)
    assert "read replica" in status.stdout and "not replayed" in status.stdout
    bad = cli(replica_project, "index", "--store", url, "--roots", "kb,docs", "--rebuild", expect=2)
    assert "read replica" in bad.stderr and "Traceback" not in bad.stderr


# -- PostgreSQL partitioned by user (`-k partitioned`): a scoped query reads its scope's partitions only ------------

def _plan_relations(plan: dict, key: str = "Relation Name") -> set[str]:  # type: ignore[type-arg]
    """Every table (or, with key="Index Name", every index) an EXPLAIN (FORMAT JSON) plan reads."""
    found = {plan[key]} if key in plan else set()
    for child in plan.get("Plans", []):
        found |= _plan_relations(child, key)
    return found


@pytest.fixture
def partitioned(make_project, pg_server):  # type: ignore[no-untyped-def]
    project = make_project(FILES, store=new_database(pg_server) + "?partition=user")
    project.index()
    return project


@pytest.mark.parametrize("generic", [False, True], ids=["custom-plan", "generic-plan"])
def test_partitioned_user_query_is_pruned_to_the_users_partition(partitioned, generic):
    """EXPLAIN of the statement vector_search runs: alice's scope reads alice's partition only; the public one
    joins only when the scope holds public documents. `generic`: as a prepared statement re-planned generically
    (psycopg prepares a statement after its fifth run), where pruning happens when the plan starts."""
    import psycopg
    from pgvector.psycopg import register_vector

    from ragstead.stores.postgres_partitions import owner_of, partition_name

    store = partitioned.store
    with psycopg.connect(store.url) as conn:
        conn.execute("SET search_path TO ragstead, public")
        register_vector(conn)
        partitions = {row[0] for row in conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'chunks'::regclass")}
        alice, bob, public = (partition_name(owner_of(True, "alice")), partition_name(owner_of(True, "bob")),
                              partition_name(owner_of(False, None)))
        assert {alice, bob, public, partition_name(owner_of(True, None))} <= partitions
        if generic:
            conn.execute("SET plan_cache_mode = force_generic_plan")
        q = partitioned.embedder.embed_query("billing database")
        cases = [(QueryFilters.build(user_slug="alice"), {alice}),
                 (QueryFilters.build(user_slug="alice", doc_types=["dossier"]), {alice}),
                 (QueryFilters.build(user_slug="alice", include_archive=True), {alice, public}),
                 (QueryFilters.build(public_only=True), {public}),
                 (QueryFilters.build(user_slug="bob", public_only=True), {public}),
                 (QueryFilters.build(), partitions - {public})]
        for filters, expected in cases:
            sql, _, params = store.vector_statement(filters)
            values = (q, *params, q, 10)
            if generic:
                numbered = iter(range(1, len(values) + 1))

                def number(_: re.Match[str], numbered: Iterator[int] = numbered) -> str:
                    return f"${next(numbered)}"
                conn.execute("DEALLOCATE ALL")
                types = ["vector" if isinstance(v, np.ndarray) else "bool" if isinstance(v, bool) else
                         "int" if isinstance(v, int) else "text" for v in values]
                # The simple query protocol (a client-side cursor): in the extended one, $n would be the
                # PREPARE statement's own parameters.
                psycopg.ClientCursor(conn).execute(f"PREPARE vector_query ({', '.join(types)}) AS "
                                                   + re.sub("%s", number, sql))
                # Typed arguments: psycopg sends Python strings untyped.
                sql = f"EXECUTE vector_query ({', '.join(f'%s::{t}' for t in types)})"
            cursor = psycopg.ClientCursor(conn) if generic else conn.cursor()  # EXECUTE's arguments as literals
            plan = cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", values).fetchone()[0]
            assert _plan_relations(plan[0]["Plan"]) == expected, (filters, plan)
            if generic and expected != partitions - {public}:
                assert '"Subplans Removed"' in json.dumps(plan), plan  # pruned as the plan started
            if not generic:  # the exact ranking (small scopes, a short walk): pruned too, and no HNSW walk
                exact, _, _ = store.vector_statement(filters, exact=True)
                with conn.transaction():
                    conn.execute("SET LOCAL enable_indexscan = off")
                    plan = conn.execute(f"EXPLAIN (FORMAT JSON) {exact}", values).fetchone()[0]
                assert _plan_relations(plan[0]["Plan"]) == expected, (filters, plan)
                assert not any("embedding" in name for name in _plan_relations(plan[0]["Plan"], "Index Name")), plan
            # ... and the statement finds what the unpruned scope finds
            assert _paths(partitioned, store.vector_search(q, filters, 50), filters) == ground_truth(partitioned,
                                                                                                  filters)
    assert store.integrity_check() == "ok"


def test_partitioned_layout_is_opt_in_and_an_index_with_chunks_moves_by_migrate(make_project, pg_server):
    """An unpartitioned index keeps its layout (opening it with ?partition=user says to migrate); `migrate` copies
    it into a partitioned database; the layout, once made, holds without the option; re-index and deletes by
    path stay idempotent."""
    from ragstead.stores.migrate import copy_store
    from ragstead.stores.postgres import PostgresStore

    plain_url = new_database(pg_server)
    plain = make_project(FILES, store=plain_url)
    plain.index()
    assert plain.store.partitioned is False
    with pytest.raises(RagsteadError, match="migrate"):
        PostgresStore(plain_url + "?partition=user")
    assert plain.store.integrity_check() == "ok"  # untouched
    target_url = new_database(pg_server)
    target = PostgresStore(target_url + "?partition=user")
    report = copy_store(plain.store, target, batch_size=3)
    assert report.chunks == plain.store.stats()["chunks"] and target.partitioned
    assert _snapshot(target) == _snapshot(plain.store)
    target.close()
    reopened = make_project(FILES, store=target_url)  # no option: the layout is the database's
    assert reopened.store.partitioned and reopened.store.integrity_check() == "ok"
    assert reopened.index().unchanged == len(FILES)
    (reopened.root / "kb/users/bob/2025-04-01-salary.md").unlink()
    (reopened.root / "kb/users/carol/2025-07-01-new.md").parent.mkdir(parents=True)
    (reopened.root / "kb/users/carol/2025-07-01-new.md").write_text("Carol's first note, on kite surfing.")
    report = reopened.index()
    assert report.added == ["kb/users/carol/2025-07-01-new.md"] and report.removed == [
        "kb/users/bob/2025-04-01-salary.md"]
    carol = QueryFilters.build(user_slug="carol")
    hits = reopened.store.vector_search(reopened.embedder.embed_query("kite surfing"), carol, 5)
    assert _paths(reopened, hits, carol) == {"kb/users/carol/2025-07-01-new.md"}
    assert reopened.store.integrity_check() == "ok"
    assert reopened.index().unchanged == len(FILES)  # idempotent


def test_partition_option_is_ragsteads_and_leaves_libpqs_parameters_as_written():
    from ragstead.errors import ConfigError

    assert split_partition_option("postgresql://me:pw@h/kb?sslmode=require&partition=user&options=-c%20x") == (
        "postgresql://me:pw@h/kb?sslmode=require&options=-c%20x", "user")
    assert split_partition_option("postgresql://me@h/kb") == ("postgresql://me@h/kb", None)
    assert split_partition_option("postgresql://me:pw@[::1/nope") == ("postgresql://me:pw@[::1/nope", None)
    with pytest.raises(ConfigError, match="partition=user"):
        split_partition_option("postgresql://me@h/kb?partition=hash")


def test_partitioned_chunk_vectors_read_the_fetched_hits_partitions_and_fall_back(partitioned):
    """chunk_vectors after fetch_chunks reads only the hits' partitions (their owners are remembered); an id
    fetched under a stale owner, or never fetched, is still found (the lookup falls back to every partition)."""
    store, alice = partitioned.store, QueryFilters.build(user_slug="alice")
    q = partitioned.embedder.embed_query("billing database")
    every = {w.document.file_path: w for w in store.export_documents()}
    expected = {c.chunk_id: v for w in every.values() for c, v in zip(w.chunks, w.vectors, strict=True)}
    hits = store.fetch_chunks([h[0] for h in store.vector_search(q, alice, 5)], alice)
    fetched = [row["chunk_id"] for row in hits.values()]
    assert fetched and {store._chunk_owners[c] for c in fetched} == {"u:alice"}
    for ids in (fetched, list(expected)):
        found = store.chunk_vectors(ids)
        assert set(found) == set(ids) and all(np.allclose(found[c], expected[c]) for c in ids)
    store._chunk_owners[fetched[0]] = "u:bob"  # stale
    assert set(store.chunk_vectors(fetched)) == set(fetched)


def test_ef_search_option_is_ragsteads_checked_and_in_effect_when_the_graph_is_walked(make_project, pg_server):
    """`?ef_search=N` (pgvector's hnsw.ef_search for graph walks, default 40) is taken off the URL like
    `partition`, refused out of pgvector's range, and is the server's setting while a walk runs."""
    from contextlib import contextmanager

    from ragstead.errors import ConfigError
    from ragstead.stores.postgres_partitions import split_store_options

    assert split_store_options("postgresql://me@h/kb?sslmode=require&ef_search=200&partition=user") == (
        "postgresql://me@h/kb?sslmode=require", {"ef_search": "200", "partition": "user"})
    for bad in ("0", "1001", "abc", "-5", ""):
        with pytest.raises(ConfigError, match="ef_search"):
            split_store_options(f"postgresql://me@h/kb?ef_search={bad}")
    project = make_project(FILES, store=new_database(pg_server) + "?partition=user&ef_search=200")
    project.index()
    store = project.store
    assert store.ef_search == 200 and "ef_search" not in store.url
    store.exact_scope_rows = 0  # every vector query walks the graph
    in_effect: list[str] = []
    real_transaction = store._transaction

    @contextmanager
    def watched():  # type: ignore[no-untyped-def]
        with real_transaction() as conn:
            class Watch:
                def execute(self, sql, *args, **kwargs):  # type: ignore[no-untyped-def]
                    if str(sql).startswith("SELECT c.id, -(c.embedding"):  # the walk itself
                        in_effect.append(conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0])
                    return conn.execute(sql, *args, **kwargs)
            yield Watch()

    store._transaction = watched
    filters = QueryFilters.build(user_slug="alice")
    q = project.embedder.embed_query("billing database")
    assert _paths(project, store.vector_search(q, filters, 10), filters) <= ground_truth(project, filters)
    assert in_effect and set(in_effect) == {"200"}
    store.vector_search(q, filters, 300)  # k above ef_search: at least k candidates
    assert in_effect[-1] == "300"
