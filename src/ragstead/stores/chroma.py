"""Chroma as ragstead's vector index: `--store chroma:PATH` (embedded) or `--store chroma+http://host:port`.

Chroma holds vectors and filter fields; SQLite (+ tantivy) stays the source of truth and Chroma is kept
in step with it like the lexical index: the store is the embedded one, with a Chroma collection as its vector
side (docs/design.md, "Chroma"; spec options: docs/stores.md).
"""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from ragstead.errors import ConfigError, RagsteadError, RagsteadWarning
from ragstead.filters import QueryFilters
from ragstead.stores.permissions import make_private_folder, tighten
from ragstead.stores.redaction import redact
from ragstead.stores.remote_vectors import RemoteVectors, day_number
from ragstead.stores.sqlite import SqliteStore

# A scope of at most 1/5 of the index and at most `exact_rows` rows is scored exactly from
# SQLite (SqliteStore.scope_is_small), which beats Chroma's filtered search there (docs/design.md, "Chroma").
EXACT_SCOPE_ROWS = 50_000



@dataclass(frozen=True)
class ChromaLocation:
    """Where a Chroma store's two halves live: Chroma (a folder or a server) and the SQLite file."""

    sqlite_file: Path
    persist_dir: Path | None = None
    host: str | None = None
    port: int | None = None
    ssl: bool = False
    exact_scope_rows: int = EXACT_SCOPE_ROWS

    @classmethod
    def parse(cls, spec: str, resolve: Any, default_db: Path) -> ChromaLocation:
        """From a store setting; `resolve` makes a relative path absolute against the project root.

        Options go after `?`: `db=PATH` (chroma+http only: the SQLite side), `exact_rows=N` (the most rows a
        scope scored exactly from SQLite may have; 0 sends every vector query to Chroma).
        """
        head, _, query = spec.partition("?")
        options = parse_qs(query)
        try:
            exact_rows = int(options.get("exact_rows", [EXACT_SCOPE_ROWS])[0])
        except ValueError:
            raise ConfigError(f"exact_rows in {redact(spec)!r} must be a whole number") from None
        if head.startswith("chroma:"):
            folder = head.removeprefix("chroma:").strip()
            if not folder:
                raise ConfigError("chroma:PATH needs a folder, e.g. chroma:kb/rag/chroma")
            persist_dir = Path(resolve(folder))
            return cls(sqlite_file=persist_dir / "ragstead.db", persist_dir=persist_dir, exact_scope_rows=exact_rows)
        try:
            parts = urlsplit(head)
            port = parts.port or (443 if parts.scheme == "chroma+https" else 8000)
        except ValueError as exc:
            raise ConfigError(f"bad Chroma server URL {redact(spec)!r}: {redact(str(exc), spec)}") from None
        if not parts.hostname:
            raise ConfigError(f"bad Chroma server URL {redact(spec)!r}: use chroma+http://host:port")
        db = options.get("db")
        return cls(sqlite_file=Path(resolve(db[0])) if db else default_db, host=parts.hostname, port=port,
                   ssl=parts.scheme == "chroma+https", exact_scope_rows=exact_rows)

    def describe(self) -> str:
        """Both halves, safe to print."""
        if self.persist_dir is not None:
            return f"chroma:{self.persist_dir}"
        scheme = "https" if self.ssl else "http"
        return f"chroma+{scheme}://{self.host}:{self.port} (text and BM25 in {self.sqlite_file})"


def chroma_where(filters: QueryFilters) -> dict[str, Any]:
    """The Chroma `where` clause admitting exactly the chunks `filters.to_sql` admits."""
    privacy: dict[str, Any] = {"is_private": not filters.public_only}
    if filters.archive_beside_private:
        privacy = {"$or": [privacy, {"doc_type": "archive"}]}
    clauses: list[dict[str, Any]] = [privacy]
    if filters.user_slug is not None:
        clauses.append({"user_slug": filters.user_slug})
    if filters.doc_types:
        clauses.append({"doc_type": {"$in": list(filters.doc_types)}})
    if not filters.wants_archive:
        clauses.append({"doc_type": {"$ne": "archive"}})
    # Chroma compares only numbers with $gte/$lte, so days are stored as YYYYMMDD integers. SQL compares
    # the ISO strings, which for `created_at >= day` and `< day + 1` is the same as comparing the day part.
    if filters.date_from:
        clauses.append({"created_day": {"$gte": day_number(filters.date_from)}})
    if filters.date_to:
        clauses.append({"created_day": {"$lte": day_number(filters.date_to)}})
    if filters.tags:
        tags = [{f"tag:{tag}": True} for tag in filters.tags]
        clauses.append(tags[0] if len(tags) == 1 else {"$or": tags})
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def _chunk_metadata(is_private: int, doc_type: str, user_slug: str | None, created_at: str | None,
                    tags: str) -> dict[str, Any]:
    """A chunk's filter fields as Chroma metadata (absent values are left out: Chroma has no NULL)."""
    metadata: dict[str, Any] = {"is_private": bool(is_private), "doc_type": doc_type}
    if user_slug is not None:
        metadata["user_slug"] = user_slug
    day = day_number(created_at)
    if day is not None:
        metadata["created_day"] = day
    metadata.update({f"tag:{tag}": True for tag in json.loads(tags)})
    return metadata


def open_chroma_store(location: ChromaLocation, *, project_root: Path | None = None,
                      private_folders: Sequence[Path] = ()) -> SqliteStore:
    """The `Store` whose vector search runs in Chroma: the embedded store, with a ChromaVectors vector side."""
    try:
        import chromadb
        import httpx  # a dependency of chromadb: the HTTP client's transport errors
        from chromadb.config import Settings as ChromaSettings
    except ImportError as exc:
        raise RagsteadError(
            f"the Chroma store needs chromadb ({exc.name} is missing): pip install 'ragstead[chroma]'"
        ) from exc
    errors = (chromadb.errors.ChromaError, ValueError, OSError, httpx.HTTPError)
    return SqliteStore(location.sqlite_file, project_root=project_root, private_folders=private_folders,
                       vectors=lambda store: ChromaVectors(store, location, chromadb, ChromaSettings, errors))


class ChromaVectors(RemoteVectors):
    """A SQLite store's vector side in a Chroma collection (remote_vectors.RemoteVectors): written after each
    SQLite commit, reconciled with SQLite when it lags, and searched with the scope as a Chroma `where` clause; a
    small scope is scored exactly from SQLite instead."""

    LABEL = "Chroma"
    COLLECTION_PREFIX = "ragstead-"

    def __init__(self, store: SqliteStore, location: ChromaLocation, chromadb: Any, settings_class: Any,
                 errors: tuple[type[BaseException], ...]) -> None:
        self.location = location
        self._chroma_errors = errors
        chroma_settings = settings_class(anonymized_telemetry=False)
        with self._engine("connect to"):
            if location.persist_dir is not None:
                make_private_folder(location.persist_dir)
                try:
                    self._client = self._persistent_client(chromadb, chroma_settings)
                except self._chroma_errors as exc:
                    # Chroma's files are derived from the SQLite side: set them aside and start again; the
                    # first search or write refills the collection from the stored vectors.
                    aside = self._set_aside_chroma_files()
                    warnings.warn(RagsteadWarning(
                        f"the Chroma store in {location.persist_dir} was damaged ({str(exc).splitlines()[0][:160]});"
                        f" moved its files to {aside.name} and rebuilding it from the index"), stacklevel=4)
                    chromadb.api.client.SharedSystemClient.clear_system_cache()  # it keeps the failed one
                    self._client = self._persistent_client(chromadb, chroma_settings)
            else:
                self._client = chromadb.HttpClient(host=location.host or "localhost", port=location.port or 8000,
                                                   ssl=location.ssl, settings=chroma_settings)
        super().__init__(store, location)
        self._collection: Any = None

    # -- plumbing ---------------------------------------------------------------------------------

    def _persistent_client(self, chromadb: Any, chroma_settings: Any) -> Any:
        folder = self.location.persist_dir
        assert folder is not None
        fresh = not (folder / "chroma.sqlite3").exists()
        client = chromadb.PersistentClient(path=str(folder), settings=chroma_settings)
        if fresh:  # Chroma made chroma.sqlite3 0644 whatever the umask; its -journal copies the mode
            tighten([folder])
        return client

    def _set_aside_chroma_files(self) -> Path:
        """Move Chroma's own files (not ragstead's SQLite side, which shares the folder) to a sibling folder."""
        folder = self.location.persist_dir
        assert folder is not None
        aside = folder.with_name(f"{folder.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
        make_private_folder(aside)
        ours = self.location.sqlite_file.name
        for entry in folder.iterdir():
            if not entry.name.startswith(ours) and not entry.name.startswith(
                (f"{Path(ours).stem}.tantivy", f"{Path(ours).stem}.vectors")):
                entry.rename(aside / entry.name)
        return aside

    def private_paths(self) -> list[Path]:
        """Chroma's folder (its database and one folder of HNSW files per collection, written with the umask's
        mode: tightened after each write)."""
        return [] if self.location.persist_dir is None else [self.location.persist_dir]

    def close(self) -> None:
        pass  # the client holds no handle of ours to let go of

    @contextmanager
    def _engine(self, action: str) -> Iterator[None]:
        """Turn a Chroma or connection failure into one clear error naming the store."""
        try:
            yield
        except self._chroma_errors as exc:
            raise RagsteadError(
                f"cannot {action} the Chroma store {redact(self.location.describe())}: {redact(str(exc))}"
            ) from exc

    def _open_collection(self) -> Any:
        """The index's collection, created on first use (cosine = inner product: vectors are unit length)."""
        if self._collection is None:
            self._collection = self._client.get_or_create_collection(
                self._name, embedding_function=None, configuration={"hnsw": {"space": "ip"}}
            )
        return self._collection

    def _engine_generation(self) -> int | None:
        """The SQLite generation Chroma reflects, read from the server (another process may have written)."""
        try:
            # A fresh handle each time: another process's reset may have replaced the collection.
            self._collection = self._client.get_collection(self._name, embedding_function=None)
        except self._chroma_errors[0]:  # not created yet, or dropped by another process's reset
            self._collection = None
            return None
        metadata = self._collection.metadata or {}
        if metadata.get("model") != (self._store.meta("embed_model") or ""):
            return None
        return int(metadata["generation"]) if "generation" in metadata else None

    def _set_generation(self, generation: int) -> None:
        self._open_collection().modify(
            metadata={"generation": generation, "model": self._store.meta("embed_model") or ""})

    def _drop(self) -> None:
        try:
            self._client.delete_collection(self._name)
        except self._chroma_errors[0]:  # there was none
            pass
        self._collection = None

    def _delete(self, rowids: list[int]) -> None:
        page = self._client.get_max_batch_size()
        for start in range(0, len(rowids), page):
            self._open_collection().delete(ids=[str(i) for i in rowids[start : start + page]])

    def _count(self) -> int:
        return int(self._open_collection().count())

    def _engine_ids(self) -> Iterator[int]:
        collection = self._open_collection()
        page, offset = self._client.get_max_batch_size(), 0
        while batch := collection.get(include=[], limit=page, offset=offset)["ids"]:
            offset += len(batch)
            yield from (int(i) for i in batch)

    def _send(self, rows: list[tuple[Any, ...]], vectors: np.ndarray) -> None:
        self._open_collection().upsert(ids=[str(r[0]) for r in rows], embeddings=vectors,
                                       metadatas=[_chunk_metadata(*r[2:7]) for r in rows])

    def _engine_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        result = self._open_collection().query(
            query_embeddings=[query.astype(np.float32)], n_results=k, where=chroma_where(filters),
            include=["distances"],
        )
        return [(int(i), 1.0 - float(d)) for i, d in zip(result["ids"][0], result["distances"][0], strict=True)]

    def _engine_stats(self) -> dict[str, Any]:
        return {"store": "chroma", "chroma": self.location.describe(), "collection": self._name}
