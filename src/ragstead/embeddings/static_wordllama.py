"""WordLlama (l2_supercat, 256-d): static token embeddings, average-pooled. No transformer runs: far faster
than MiniLM-L6 int8, at a large cost in quality (docs/benchmarks.md, "Embedding models")."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class WordLlamaEmbedder:
    """The weights and tokenizer that the `wordllama` wheel ships, loaded with downloads disabled."""

    name = "wordllama-l2-supercat-256"
    dim = 256

    def __init__(self, batch_size: int = 256) -> None:
        import wordllama
        from wordllama import WordLlama

        # wordllama looks for its bundled tokenizer under "tokenizer/" but ships it under "tokenizers/",
        # which is where it looks in a cache folder: pointing the cache at the package finds both files.
        package = Path(wordllama.__file__).parent
        self._model = WordLlama.load(cache_dir=package, disable_download=True)
        self.batch_size = batch_size

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages; rows L2-normalised."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Normalised here (norm=False there): one pass, and unit float32 rows whatever the library returns.
        vectors = np.asarray(self._model.embed(texts, norm=False, batch_size=self.batch_size), dtype=np.float32)
        return vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a single query string."""
        return self.embed_documents([text])[0]
