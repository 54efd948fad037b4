"""Stores: the `Store` protocol and its backends (embedded SQLite is the default)."""

from ragstead.stores.base import ChunkRecord, DocumentRecord, Store
from ragstead.stores.sqlite import SqliteStore

__all__ = ["ChunkRecord", "DocumentRecord", "SqliteStore", "Store"]
