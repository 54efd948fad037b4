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
