"""A real PostgreSQL streaming replica (`pg_basebackup -R` of the session's server, on loopback): reads on the
replica answer what the primary indexed once replayed, with the conformance suite's read tests; a write aimed at
it fails with one clear line; `status` says it is a replica and how far behind it is. Select with `-k replica`."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

import test_store_conformance as conformance
from helpers.project import new_database
from ragstead.errors import RagsteadError
from ragstead.filters import QueryFilters

pytest.importorskip("psycopg")


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


@pytest.fixture(scope="session")
def pg_replica(pg_server):  # type: ignore[no-untyped-def]
    """A hot standby of the session's PostgreSQL, streaming from it over loopback."""
    from ragstead.stores.postgres_local import LocalPostgres

    base = Path(tempfile.mkdtemp(prefix="ragstead-test-replica-"))
    base.chmod(0o755)
    replica = LocalPostgres(base / "data", durable=False)
    replica.start_standby_of(pg_server)
    yield replica
    replica.stop()
    shutil.rmtree(base, ignore_errors=True)


def on_replica(url: str, replica) -> str:  # type: ignore[no-untyped-def]
    """The same database, on the replica's port."""
    database = url.rpartition("/")[2]
    return replica.url.rsplit("/", 1)[0] + f"/{database}"


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
    project = make_project(conformance.FILES, store=primary_url)
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
    conformance.test_every_filter_is_enforced_by_both_searches_fetch_and_listing(replica_project)
    for mode in ("vector", "lexical", "hybrid"):
        conformance.test_another_users_secret_never_leaks(replica_project, mode)
    for question in ("' OR 1=1 --", "a & b | !c", "(", "\x00"):
        conformance.test_query_syntax_is_plain_text(replica_project, question)


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
