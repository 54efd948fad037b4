"""Pick the store a `store` setting names.

    ""  or "sqlite"          the embedded default: SQLite + tantivy at `db_path` (kb/rag/ragstead.db)
    "sqlite:PATH"            the embedded store in another file (relative to the project root)
    "postgresql://..."       PostgreSQL + pgvector (also "postgres://"); see stores/postgres.py
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ragstead.errors import ConfigError, RagsteadError
from ragstead.stores.base import Store
from ragstead.stores.postgres import is_postgres_url, redact

if TYPE_CHECKING:
    from ragstead.config import Settings

STORE_KINDS = "'sqlite', 'sqlite:PATH' or 'postgresql://user@host:port/dbname'"


def describe_store(settings: Settings) -> str:
    """Where the index lives, safe to print (no password)."""
    spec = settings.store.strip()
    if is_postgres_url(spec):
        return redact(spec)
    return str(sqlite_path(settings))


def sqlite_path(settings: Settings) -> Path:
    """The embedded index file a `sqlite` / `sqlite:PATH` / empty store setting names."""
    spec = settings.store.strip()
    return settings.resolve(spec.removeprefix("sqlite:")) if spec.startswith("sqlite:") else settings.db_file


def open_store(settings: Settings, *, must_exist: bool = False) -> Store:
    """Open the configured store. `must_exist`: an embedded index file that is missing is an error
    (read-only commands), rather than a new empty index."""
    spec = settings.store.strip()
    if is_postgres_url(spec):
        from ragstead.stores.postgres import PostgresStore

        return PostgresStore(spec)
    if spec not in ("", "sqlite") and not spec.startswith("sqlite:"):
        raise ConfigError(f"unknown store {redact(spec)!r}; use {STORE_KINDS}")
    from ragstead.stores.sqlite import SqliteStore

    path = sqlite_path(settings)
    if must_exist and not path.exists():
        raise RagsteadError(f"no index at {path}; run `ragstead index` first")
    return SqliteStore(path)
