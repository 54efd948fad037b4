"""Stores: the `Store` protocol, the store setting (`StoreSpec`) and the backends it opens."""

from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite, Store
from ragstead.stores.factory import StoreSpec, open_store

__all__ = ["ChunkRecord", "DocumentRecord", "DocumentWrite", "Store", "StoreSpec", "open_store"]
