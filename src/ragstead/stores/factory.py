"""Pick the store a `store` setting names.

    ""  or "sqlite"          the embedded default: SQLite + tantivy at `db_path` (kb/rag/ragstead.db)
    "sqlite:PATH"            the embedded store in another file (relative to the project root)
    "postgresql://..."       PostgreSQL + pgvector (also "postgres://"); see stores/postgres.py
    "chroma:PATH"            Chroma (embedded) for vectors, with the SQLite side in PATH; see stores/chroma.py
    "chroma+http://host:port[?db=PATH]"   a Chroma server for vectors, the SQLite side at db_path (or PATH)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ragstead.errors import ConfigError, RagsteadError
from ragstead.stores.base import Store
from ragstead.stores.chroma import ChromaLocation, is_chroma_spec
from ragstead.stores.postgres import is_postgres_url, redact

if TYPE_CHECKING:
    from ragstead.config import Settings

STORE_KINDS = ("'sqlite', 'sqlite:PATH', 'postgresql://user@host:port/dbname', 'chroma:PATH' or "
               "'chroma+http://host:port'")


def describe_store(settings: Settings) -> str:
    """Where the index lives, safe to print (no password)."""
    spec = settings.store.strip()
    if is_postgres_url(spec):
        return redact(spec)
    if is_chroma_spec(spec):
        return _chroma_location(settings).describe()
    return str(sqlite_path(settings))


def sqlite_path(settings: Settings) -> Path | None:
    """The SQLite file a store setting keeps its documents in (None for PostgreSQL)."""
    spec = settings.store.strip()
    if is_postgres_url(spec):
        return None
    if is_chroma_spec(spec):
        return _chroma_location(settings).sqlite_file
    return settings.resolve(spec.removeprefix("sqlite:")) if spec.startswith("sqlite:") else settings.db_file


def _chroma_location(settings: Settings) -> ChromaLocation:
    return ChromaLocation.parse(settings.store.strip(), settings.resolve, settings.db_file)


def open_store(settings: Settings, *, must_exist: bool = False) -> Store:
    """Open the configured store. `must_exist`: an index file that is missing is an error (read-only
    commands), rather than a new empty index."""
    spec = settings.store.strip()
    if is_postgres_url(spec):
        from ragstead.stores.postgres import PostgresStore

        return PostgresStore(spec)
    if spec not in ("", "sqlite") and not spec.startswith("sqlite:") and not is_chroma_spec(spec):
        raise ConfigError(f"unknown store {redact(spec)!r}; use {STORE_KINDS}")
    path = sqlite_path(settings)
    assert path is not None
    if must_exist and not path.exists():
        raise RagsteadError(f"no index at {path}; run `ragstead index` first")
    if is_chroma_spec(spec):
        from ragstead.stores.chroma import ChromaStore

        return ChromaStore(_chroma_location(settings))
    from ragstead.stores.sqlite import SqliteStore

    return SqliteStore(path)
