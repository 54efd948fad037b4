"""Second-stage re-ranking of the top candidates: sentence-level max-sim with the index's own embedder, or a
bring-your-own cross-encoder (`--reranker onnx:DIR`).

Opt-in (`--rerank`); docs/design.md, "Re-ranking".
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

import numpy as np

from ragstead.embeddings.base import Embedder
from ragstead.retrieval.sentences import split_sentences


class Reranker(Protocol):
    """Scores candidate texts for a question (higher is more relevant), in the candidates' order."""

    name: str

    def score(self, question: str, query_vector: np.ndarray | None, texts: list[str]) -> list[float]:
        """One score per text."""
        ...


class SentenceMaxSimReranker:
    """Score = the best cosine between the question and any sentence of the candidate.

    Sentence vectors are cached (LRU by text) because the same chunks come back for related questions.
    """

    def __init__(self, embedder: Embedder, cache_size: int = 4096) -> None:
        self.embedder = embedder
        self.name = f"sentence-maxsim:{embedder.name}"
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def _sentences(self, text: str) -> list[str]:
        return split_sentences(text) or [text]

    def score(self, question: str, query_vector: np.ndarray | None, texts: list[str]) -> list[float]:
        if not texts:
            return []
        if query_vector is None:
            query_vector = self.embedder.embed_query(question)
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if todo:
            # One batch over every uncached sentence: the embedder sorts it by length, so padding is small.
            pieces = [self._sentences(t) for t in todo]
            vectors = self.embedder.embed_documents([s for group in pieces for s in group])
            start = 0
            for text, group in zip(todo, pieces, strict=True):
                self._cache[text] = vectors[start:start + len(group)]
                start += len(group)
        scores = []
        for text in texts:
            self._cache.move_to_end(text)
            scores.append(float(np.max(self._cache[text] @ query_vector)))
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return scores


class PairScorer(Protocol):
    """A cross-encoder: `score(question, texts)` gives one relevance score per text (embeddings/onnx_folder.py)."""

    name: str

    def score(self, question: str, texts: list[str]) -> np.ndarray:
        ...


class CrossEncoderReranker:
    """Score = a cross-encoder's relevance score of (question, candidate), from `--reranker onnx:DIR|hf:ORG/NAME`.

    Scores are cached (LRU by question and text): `ask` re-ranks the same candidates its `query` saw."""

    def __init__(self, model: PairScorer, cache_size: int = 4096) -> None:
        self.model = model
        self.name = f"cross-encoder:{model.name}"
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()

    def score(self, question: str, query_vector: np.ndarray | None, texts: list[str]) -> list[float]:
        todo = [t for t in dict.fromkeys(texts) if (question, t) not in self._cache]
        if todo:
            for text, value in zip(todo, self.model.score(question, todo), strict=True):
                self._cache[(question, text)] = float(value)
        scores = []
        for text in texts:
            self._cache.move_to_end((question, text))
            scores.append(self._cache[(question, text)])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return scores
