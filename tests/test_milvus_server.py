"""The Milvus store against a Milvus server, not Milvus Lite: Milvus 2.3 standalone (the Go/C++ engine a cluster
runs, with its etcd embedded and local storage) from PyPI's `milvus` wheel, started here on 127.0.0.1. The store
reaches it over gRPC at `milvus://127.0.0.1:PORT` like any deployment; the conformance tests imported below
(another user's secret in every search mode, the tag filter, incremental writes and deletes, a failed batch) run on
it as they run on Milvus Lite. The whole conformance suite passed on it by hand (21 tests, about 4 minutes: too
long for every run); docs/stores.md says how to repeat that.
"""

from __future__ import annotations

import pytest

from helpers.project import CountingEmbedder, Project
from ragstead.filters import QueryFilters
from test_store_conformance import (  # noqa: F401  (collected here again, against the server; with their fixtures)
    FILES,
    embedder,
    project,
    test_a_failed_batch_changes_nothing,
    test_another_users_secret_never_leaks,
    test_incremental_reindex_touches_only_what_changed_and_removes_deleted,
    test_tag_filter,
)


@pytest.fixture
def store_spec(milvus_server) -> str:  # type: ignore[no-untyped-def]
    return milvus_server + "?exact_rows=0"  # every vector query through the server's filtered search


@pytest.fixture(scope="module")
def indexed(milvus_server, tmp_path_factory, hashing_embedder):  # type: ignore[no-untyped-def]
    """The conformance suite's read-only index (one per store kind there): here one on the server, which the
    three search modes of the secret test read."""
    served = Project(tmp_path_factory.mktemp("indexed"), CountingEmbedder(hashing_embedder),
                     milvus_server + "?exact_rows=0")
    served.write(FILES)
    served.index()
    yield served
    served.store.close()


def test_the_store_talks_to_a_server_not_milvus_lite(make_project, store_spec):
    one = make_project({"kb/users/alice/a.md": "Alice's note about the billing database."}, store=store_spec)
    one.index()
    stats = one.store.stats()
    assert stats["store"] == "milvus" and stats["milvus"].startswith("milvus http://127.0.0.1:")
    assert stats["vector_rows"] == stats["chunks"] == 1


def test_every_chunk_is_in_its_users_partition_on_the_server(make_project, store_spec):
    """Milvus 2.3's upsert put rows where a partition-key filter does not look (a user's scope held 33 of the
    user's 2,000 rows); searches only stayed right because a short answer falls back to SQLite. Count what the
    server's own filter admits against SQLite, after a first index and after an edit re-sends a document."""
    from ragstead.stores.milvus import milvus_filter
    from ragstead.stores.sql import QMARK

    files = {f"kb/users/{user}/note-{i}.md": f"{user} note {i} about billing and the database, part {i}."
             for user in ("alice", "bob", "carol") for i in range(12)}
    three = make_project(files, store=store_spec)
    three.index()
    (three.root / "kb/users/bob/note-3.md").write_text("bob note 3, rewritten: the ferry timetable.")
    three.index()
    store = three.store
    for user in ("alice", "bob", "carol"):
        scope = QueryFilters.build(user_slug=user)
        where, params = QMARK.where(scope)
        expected = store._db.execute(f"SELECT COUNT(*) FROM chunks c WHERE {where}", params).fetchone()[0]
        admitted = store.vectors._client.query(store.vectors._name, filter=milvus_filter(scope),
                                               output_fields=["count(*)"])[0]["count(*)"]
        assert admitted == expected > 0, user
