"""The Milvus store against a Milvus server, not Milvus Lite: Milvus 2.3 standalone (the Go/C++ engine a cluster
runs, with its etcd embedded and local storage) from PyPI's `milvus` wheel, started here on 127.0.0.1. The store
reaches it over gRPC at `milvus://127.0.0.1:PORT` like any deployment; the conformance tests imported below
(another user's secret in every search mode, the tag filter, incremental writes and deletes, a failed batch) run on
it as they run on Milvus Lite. The whole conformance suite passed on it once by hand (21 tests, 5 minutes: too
long for every run); docs/stores.md says how to repeat that.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from test_store_conformance import (  # noqa: F401  (collected here again, against the server; with their fixtures)
    embedder,
    project,
    test_a_failed_batch_changes_nothing,
    test_another_users_secret_never_leaks,
    test_incremental_reindex_touches_only_what_changed_and_removes_deleted,
    test_tag_filter,
)


@pytest.fixture(scope="module")
def milvus_server():  # type: ignore[no-untyped-def]
    """A Milvus standalone server for this module; yields its URL. Each test's index gets its own collection."""
    try:
        import milvus
    except ImportError:
        if os.environ.get("CI"):  # CI must run it: the dev extra installs it
            pytest.fail("the milvus package is missing: pip install -e '.[milvus-server]'")
        pytest.skip("the milvus-server extra is not installed (pip install -e '.[milvus-server]')")
    base = Path(tempfile.mkdtemp(prefix="ragstead-test-milvus-server-"))
    server = milvus.MilvusServer()
    server.set_base_dir(str(base))
    server.listen_port = 19580  # its config picks the next free port from here, as for every other port
    server.start()  # waits until the server answers (its own check, up to 90 s)
    try:
        yield f"milvus://127.0.0.1:{server.listen_port}"
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def store_spec(milvus_server) -> str:  # type: ignore[no-untyped-def]
    return milvus_server + "?exact_rows=0"  # every vector query through the server's filtered search


def test_the_store_talks_to_a_server_not_milvus_lite(make_project, store_spec):
    one = make_project({"kb/users/alice/a.md": "Alice's note about the billing database."}, store=store_spec)
    one.index()
    stats = one.store.stats()
    assert stats["store"] == "milvus" and stats["milvus"].startswith("milvus http://127.0.0.1:")
    assert stats["vector_rows"] == stats["chunks"] == 1
