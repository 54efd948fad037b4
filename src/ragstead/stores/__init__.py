"""Stores: the store protocols (`DocumentStore`, `VectorSearch`, `LexicalSearch`, the optional `SentenceVectors`,
`DocumentCount`, `BulkLoad`, and `Store`, what the built-in stores are), the rows that cross the seam, the store
setting (`StoreSpec`) and the backends it opens."""

from ragstead.stores.base import (
    BulkLoad,
    ChunkRecord,
    ChunkRow,
    DocumentCount,
    DocumentRecord,
    DocumentRow,
    DocumentStore,
    DocumentWrite,
    LexicalSearch,
    SentenceVectors,
    Store,
    VectorSearch,
)
from ragstead.stores.factory import StoreSpec, open_store

__all__ = ["BulkLoad", "ChunkRecord", "ChunkRow", "DocumentCount", "DocumentRecord", "DocumentRow", "DocumentStore",
           "DocumentWrite", "LexicalSearch", "SentenceVectors", "Store", "StoreSpec", "VectorSearch", "open_store"]
