"""What is Milvus's own in the Milvus store (the shared contract runs in test_store_conformance.py, `-k milvus`):
the scope as a filter expression on every Milvus search, the user slug as partition key, repair after a failed
write, the CLI on Milvus Lite, and credentials that never reach output."""

from __future__ import annotations

import json

import pytest

from helpers.library import search
from ragstead.errors import RagsteadError
from ragstead.filters import QueryFilters
from ragstead.retrieval.search import SearchOptions
from ragstead.stores.factory import StoreSpec
from ragstead.stores.milvus import milvus_filter, tag_key
from ragstead.stores.sqlite import SqliteStore

pytest.importorskip("pymilvus")

FILES = {
    "kb/users/alice/2025-01-10-billing.md": "# Billing\nWe moved the billing database to PostgreSQL in January.",
    "kb/users/alice/2025-03-02-travel.md": "# Travel\nAlice's travel policy: economy class under six hours.",
    "kb/users/bob/2025-02-14-travel.md": "# Travel\nBob's secret travel policy allows business class on every flight.",
    "kb/team/2025-01-20-runbook.md": "Team runbook: restart the billing database with the failover script.",
    "docs/2025-02-01-public.md": "Public docs: how to reset your password and contact billing support.",
}
ALICE = {p for p in FILES if "/alice/" in p}


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


def test_every_milvus_search_carries_the_scope_as_a_filter_expression(make_project, monkeypatch):
    """exact_rows=0: each vector query is Milvus's filtered search, whose expression is the scope's."""
    from pymilvus import MilvusClient

    calls: list[str] = []
    search = MilvusClient.search
    monkeypatch.setattr(MilvusClient, "search",
                        lambda self, *a, **kw: calls.append(kw["filter"]) or search(self, *a, **kw))
    project = make_project(FILES, store="milvus:kb/rag/milvus.db?exact_rows=0")
    project.index()
    alice = QueryFilters.build(user_slug="alice")
    hits = project.store.vector_search(project.embedder.embed_query("billing"), alice, 2)
    assert calls == [milvus_filter(alice)]
    assert 'user_slug == "alice"' in calls[0] and "is_private == true" in calls[0]
    assert {r["file_path"] for r in project.store.fetch_chunks([i for i, _ in hits], alice).values()} <= ALICE
    vectors = project.store.vectors  # a quote in a value cannot widen the expression
    for odd in ('alice" or user_slug != "', 'bob\\" or true or \\"'):
        assert vectors._client.query(vectors._name, filter=milvus_filter(QueryFilters(user_slug=odd)),
                                     output_fields=["id"]) == []
    public = QueryFilters.build(public_only=True, tags=['x" or true or "'])
    assert "is_private == false" in milvus_filter(public)
    assert f"array_contains_any(tag_keys, [{tag_key(public.tags[0])}])" in milvus_filter(public)  # no tag text


def test_the_user_slug_is_the_partition_key(make_project):
    project = make_project(FILES, store="milvus:kb/rag/milvus.db")
    project.index()
    vectors = project.store.vectors
    fields = {f["name"]: f for f in vectors._client.describe_collection(vectors._name)["fields"]}
    assert fields["user_slug"].get("is_partition_key") is True


def test_a_failed_milvus_write_is_repaired_from_sqlite(make_project, monkeypatch):
    from pymilvus import MilvusClient

    project = make_project(FILES, store="milvus:kb/rag/milvus.db?exact_rows=0")
    project.index()

    def server_gone(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("connection reset by peer")

    monkeypatch.setattr(MilvusClient, "insert", server_gone)
    project.write({"kb/users/alice/2025-06-01-new.md": "Alice's new note on the zeppelin hangar lease."})
    with pytest.raises(RagsteadError, match="Milvus store"):
        project.index()
    monkeypatch.undo()
    alice, bob = QueryFilters.build(user_slug="alice"), QueryFilters.build(user_slug="bob")
    query = project.embedder.embed_query("zeppelin hangar lease")
    found = project.store.fetch_chunks([i for i, _ in project.store.vector_search(query, alice, 3)], alice)
    assert "kb/users/alice/2025-06-01-new.md" in {r["file_path"] for r in found.values()}
    assert all(r["file_path"] not in ALICE for r in project.store.fetch_chunks(
        [i for i, _ in project.store.vector_search(query, bob, 9)], bob).values())
    assert project.store.integrity_check() == "ok"


def test_server_credentials_come_from_the_environment_and_are_never_printed(tmp_path, monkeypatch):
    spec = StoreSpec.parse("milvus://root:s3cretpw@127.0.0.1:1/team?db=kb/rag/side.db", root=tmp_path,
                           default_db=tmp_path / "kb/rag/ragstead.db")
    assert spec.kind == "milvus" and spec.sqlite_file == tmp_path / "kb/rag/side.db"
    assert "s3cretpw" not in spec.describe() and "127.0.0.1:1/team" in spec.describe()
    from ragstead.stores.milvus import MilvusLocation

    location = MilvusLocation.parse(spec.raw, lambda v: tmp_path / v, tmp_path / "x.db")
    assert location.client_arguments() == {"uri": "http://127.0.0.1:1", "db_name": "team", "user": "root",
                                           "password": "s3cretpw"}
    monkeypatch.setenv("RAGSTEAD_MILVUS_TOKEN", "tok-123456")
    assert location.client_arguments()["token"] == "tok-123456" and "user" not in location.client_arguments()


def test_cli_runs_on_milvus_lite(make_project, cli):
    """index then query --user alice on Milvus Lite: alice's notes only, hybrid, never public docs by default."""
    project = make_project(FILES)
    spec = "milvus:kb/rag/milvus.db"
    out = cli(project, "index", "--store", spec, "--roots", "kb,docs", "--format", "json")
    assert json.loads(out.stdout)["index"]["store"] == "milvus"
    results = json.loads(cli(project, "query", "billing database", "--store", spec, "--user", "alice", "--k", "5",
                             "--json").stdout)["results"]
    assert results and {r["file_path"] for r in results} <= ALICE
    status = json.loads(cli(project, "status", "--store", spec, "--json").stdout)
    assert status["integrity"] == "ok" and status["vector_rows"] == status["chunks"] > 0
    assert status["permissions"] == [], status["permissions"]  # Milvus Lite's own files are kept private too
    for bad_spec in ("milvus:", "milvus:kb/rag/x", "milvus://:80", "milvus:kb/rag/m.db?exact_rows=ten",
                     "milvus://root:hunter2pw@127.0.0.1:1"):
        bad = cli(project, "query", "x", "--store", bad_spec, expect=2)
        assert "error:" in bad.stderr and "Traceback" not in bad.stderr and "hunter2pw" not in bad.stderr, bad.stderr


def test_lexical_milvus_runs_bm25_in_milvus_under_the_scope(make_project, monkeypatch):
    """`lexical=milvus`: lexical search is Milvus's BM25 function over the collection's text, with the scope's
    filter expression; the hits are the ones tantivy finds, alice's only, and follow deletes."""
    from pymilvus import MilvusClient

    calls: list[tuple[str, str]] = []
    milvus_search = MilvusClient.search
    monkeypatch.setattr(MilvusClient, "search", lambda self, *a, **kw: calls.append((kw["anns_field"], kw["filter"]))
                        or milvus_search(self, *a, **kw))
    project = make_project(FILES, store="milvus:kb/rag/milvus.db?exact_rows=0&lexical=milvus")
    project.index()
    store = project.store
    vectors = store.vectors
    fields = {f["name"] for f in vectors._client.describe_collection(vectors._name)["fields"]}
    assert {"text", "sparse"} <= fields
    alice = QueryFilters.build(user_slug="alice")
    hits = store.lexical_search(["billing", "database"], alice, 5)
    assert calls == [("sparse", milvus_filter(alice))]
    assert [p["file_path"] for p in store.fetch_chunks([i for i, _ in hits], alice).values()] == [
        "kb/users/alice/2025-01-10-billing.md"]
    assert all(score > 0 for _, score in hits)
    team = QueryFilters.build()
    by_tantivy = {i for i, _ in SqliteStore.lexical_search(store, ["billing"], team, 10)}
    assert {i for i, _ in store.lexical_search(["billing"], team, 10)} == by_tantivy and len(by_tantivy) == 2
    assert store.lexical_search(["zeppelin"], alice, 5) == []
    project.write({"kb/users/alice/2025-06-01-new.md": "Alice's new note on the zeppelin hangar lease."})
    (project.root / "kb/users/alice/2025-01-10-billing.md").unlink()
    project.index()
    assert store.lexical_search(["billing", "database"], alice, 5) == []
    found = store.lexical_search(["zeppelin"], alice, 5)
    assert [p["file_path"] for p in store.fetch_chunks([i for i, _ in found], alice).values()] == [
        "kb/users/alice/2025-06-01-new.md"]
    assert store.integrity_check() == "ok"
    results = search("zeppelin hangar", store, project.embedder, alice, SearchOptions(mode="hybrid", k=5))["results"]
    assert results[0]["file_path"] == "kb/users/alice/2025-06-01-new.md"
    assert {r["file_path"] for r in results} <= {*ALICE, "kb/users/alice/2025-06-01-new.md"}


def test_switching_the_lexical_engine_rebuilds_the_collection_from_sqlite(make_project):
    project = make_project(FILES, store="milvus:kb/rag/milvus.db?exact_rows=0")
    project.index()
    project.store.close()
    spec = StoreSpec.parse("milvus:kb/rag/milvus.db?exact_rows=0&lexical=milvus", root=project.root,
                           default_db=project.root / "kb/rag/ragstead.db")
    assert "BM25 in Milvus" in spec.describe()
    store = spec.open()
    team = QueryFilters.build()
    assert len(store.lexical_search(["billing"], team, 10)) == 2  # the text arrived with the rebuild
    assert store.integrity_check() == "ok"
    store.close()
