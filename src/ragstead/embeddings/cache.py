"""A bounded cache of query vectors in front of an embedder: a repeated question skips the model."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np

from ragstead.embeddings.base import Embedder


class QueryVectorCache:
    """An `Embedder` that remembers the last `size` query vectors (LRU; 0 turns it off). Thread-safe.

    `embed_seconds` records the time of every model call for a query, for callers that report it.
    """

    def __init__(self, inner: Embedder, size: int = 1024) -> None:
        self.inner, self.size = inner, size
        self.name, self.dim = inner.name, inner.dim
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        self.embed_seconds: list[float] = []

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            if text in self._cache:
                self._cache.move_to_end(text)
                self.hits += 1
                return self._cache[text]
        started = time.perf_counter()
        vector = self.inner.embed_query(text)
        elapsed = time.perf_counter() - started
        with self._lock:
            self.misses += 1
            self.embed_seconds.append(elapsed)
            if self.size > 0:
                self._cache[text] = vector
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        return vector

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)


class PassageMemo:
    """An `Embedder` that embeds each passage text once while it lives: `ingest --targets a,b` stores one
    source in several knowledge bases with the same model, and only the first pays for the vectors."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self._vectors: dict[str, np.ndarray] = {}
        self.embedded = 0  # passages the model actually embedded

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            for text, vector in zip(missing, self.inner.embed_documents(missing), strict=True):
                self._vectors[text] = vector
            self.embedded += len(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._vectors[t] for t in texts]).astype(np.float32)
