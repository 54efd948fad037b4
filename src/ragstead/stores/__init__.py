"""Stores: the `Store` protocol and its backends (embedded SQLite is the default; PostgreSQL + pgvector)."""

from ragstead.stores.base import ChunkRecord, DocumentRecord, Store
from ragstead.stores.factory import describe_store, open_store
from ragstead.stores.sqlite import SqliteStore

__all__ = ["ChunkRecord", "DocumentRecord", "SqliteStore", "Store", "describe_store", "open_store"]
