"""The seam between ragstead and any embedding model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the protocol names numpy's array; `status` reads the model catalog without loading numpy
    import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors. `name` and `dim` are recorded in the index."""

    name: str
    dim: int

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages; returns an array of shape (len(texts), dim), rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; returns shape (dim,), L2-normalised."""
        ...
