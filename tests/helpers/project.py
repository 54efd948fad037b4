"""Plain helpers for the tests (no fixtures: those live in conftest.py): an instrumented embedder, the offline
environment for subprocesses, throwaway projects on disk, and the store specs the conformance tests run on."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import numpy as np

from ragstead import Embedder
from ragstead.config import Settings, load_settings
from ragstead.indexing.build import IndexReport, index_roots


class CountingEmbedder:
    """An embedder (the real model or the test fake), instrumented: counts calls and texts so tests can prove
    what was (not) embedded."""

    def __init__(self, inner: Embedder) -> None:
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
        root.mkdir(parents=True, exist_ok=True)
        self.settings: Settings = load_settings(root).with_overrides(store=store)
        self.store = self.settings.store_spec().open()

    def write(self, files: dict[str, str | bytes]) -> None:
        write_files(self.root, files)

    def index(self, roots: tuple[str, ...] = ("kb", "artifacts", "docs"), **kwargs) -> IndexReport:  # type: ignore[no-untyped-def]
        return index_roots(self.settings.indexing(roots), self.store, self.embedder, roots, **kwargs)


def new_database(server) -> str:  # type: ignore[no-untyped-def]
    """The URL of a new, empty database on the test server."""
    return server.create_database(f"t_{uuid.uuid4().hex[:12]}")


STORE_KINDS = ["sqlite", "postgresql", "chroma", "chroma-http", "milvus", "milvus-bm25"]
# The PostgreSQL store partitioned by user (`?partition=user`): a store kind of the conformance suite.
PARTITIONED_KIND = "postgresql-partitioned"


def spec_for(kind: str, request, side_db: str = "") -> str:  # type: ignore[no-untyped-def]
    """A new, empty store of this kind for one test (or module): "" for the embedded default, a new database
    on the session's PostgreSQL, a Chroma folder in the project, or the session's Chroma server (each index
    gets its own collection; `side_db` names the SQLite side's file when the project has another index)."""
    if kind == "postgresql":
        return new_database(request.getfixturevalue("pg_server"))
    if kind == PARTITIONED_KIND:
        return new_database(request.getfixturevalue("pg_server")) + "?partition=user"
    # exact_rows=0: every vector query goes through Chroma's own filtered search (the `where` translation
    # under test), where by default the small scopes of these corpora would be scored from SQLite.
    if kind == "chroma":
        return "chroma:kb/rag/chroma?exact_rows=0"
    if kind == "chroma-http":
        return request.getfixturevalue("chroma_server") + "?exact_rows=0" + (f"&db={side_db}" if side_db else "")
    if kind == "milvus":  # Milvus Lite, started by pymilvus in this process for the project's file ...
        server = os.environ.get("RAGSTEAD_TEST_MILVUS_URL")  # ... or a Milvus server you started (docs/stores.md)
        if server:
            return f"{server}?exact_rows=0" + (f"&db={side_db}" if side_db else "")
        return "milvus:kb/rag/milvus.db?exact_rows=0"
    if kind == "milvus-bm25":  # the same, with lexical search by Milvus's BM25 function instead of tantivy
        return "milvus:kb/rag/milvus.db?exact_rows=0&lexical=milvus"
    return ""
