"""Second-stage re-ranking of the top candidates: sentence-level max-sim with the index's own embedder, or a
bring-your-own cross-encoder (`--reranker onnx:DIR`).

Opt-in (`--rerank`); docs/design.md, "Re-ranking".
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np

from ragstead.embeddings.base import Embedder
from ragstead.errors import ConfigError
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.sentences import split_sentences
from ragstead.stores.base import SentenceVectors, Store


class Reranker(Protocol):
    """Scores candidate texts for a question (higher is more relevant), in the candidates' order."""

    name: str

    def score(self, question: str, query_vector: np.ndarray | None, texts: list[str]) -> list[float]:
        """One score per text."""
        ...


class SentenceMaxSimReranker:
    """Score = the best cosine between the question and any embedded sentence of the candidate.

    Fast by three means (docs/design.md, "Re-ranking"): sentence vectors are cached across queries (LRU keyed by
    the sentence's hash: the same chunks come back for related questions); of the sentences not cached, at most
    `sentence_budget` go through the model per query (None: all), chosen by how many question terms they share,
    each candidate's best one first; and they go as one batch. A candidate none of whose sentences has a vector
    gets the median score of the others, so the first stage decides its place.
    """

    def __init__(self, embedder: Embedder, cache_size: int = 20_000, sentence_budget: int | None = None) -> None:
        self.embedder = embedder
        self.name = f"sentence-maxsim:{embedder.name}"
        self.cache_size = cache_size  # sentence vectors kept (20k x 384 floats: 30 MB)
        if sentence_budget is not None and sentence_budget < 1:
            raise ConfigError(f"the sentence budget must be 1 or more (rerank_sentences 0: all), got {sentence_budget}")
        self.sentence_budget = sentence_budget
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.embedded = 0  # sentences the model embedded, for benchmarks

    def score(self, question: str, query_vector: np.ndarray | None, texts: list[str]) -> list[float]:
        best = self.score_known(question, query_vector, texts)
        known = [b for b in best if b is not None]
        fallback = float(np.median(known)) if known else 0.0
        return [fallback if b is None else b for b in best]

    def score_known(self, question: str, query_vector: np.ndarray | None, texts: list[str]) -> list[float | None]:
        """The max-sim of each text over its sentences that have a vector; None for a text with none."""
        if not texts:
            return []
        if query_vector is None:
            query_vector = self.embedder.embed_query(question)
        groups, keys = zip(*(_keyed_sentences(t) for t in texts), strict=True)
        chosen = self._choose(question, groups, keys)
        if chosen:
            vectors = self.embedder.embed_documents([sentence for _, sentence in chosen])
            self.embedded += len(chosen)
            for (key, _), vector in zip(chosen, vectors, strict=True):
                self._cache[key] = vector
        best: list[float | None] = []
        for group_keys in keys:
            found = [self._cache[k] for k in group_keys if k in self._cache]
            for k in group_keys:
                if k in self._cache:
                    self._cache.move_to_end(k)
            best.append(float(np.max(np.vstack(found) @ query_vector)) if found else None)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return best

    def preload(self, store: Store, chunks: list[tuple[str, str]]) -> int:
        """Cache the stored sentence vectors of these (chunk id, text) pairs (`sentence_vectors`, computed at
        index time), so scoring them embeds nothing. Vectors of another model, or rows that no longer match the
        chunk's sentences (another splitter), are not used. Returns the sentences cached: none from a store
        without stored sentence vectors (a plugin's), whose sentences are embedded when scored."""
        if not chunks or not isinstance(store, SentenceVectors) or store.embed_model() != self.embedder.name:
            return 0
        stored = store.sentence_vectors([chunk_id for chunk_id, _ in chunks])
        cached = 0
        for chunk_id, text in chunks:
            matrix = stored.get(chunk_id)
            keys = _keyed_sentences(text)[1]
            if matrix is None or len(matrix) != len(keys):
                continue
            self._cache.update(zip(keys, matrix, strict=True))
            cached += len(keys)
        return cached

    def _choose(self, question: str, groups: Sequence[Sequence[str]],
                keys: Sequence[Sequence[bytes]]) -> list[tuple[bytes, str]]:
        """The uncached sentences to embed now: all of them, or the budget's worth by shared question terms."""
        missing: dict[bytes, tuple[int, int, str]] = {}  # key -> (candidate rank, position, sentence)
        for rank, (group, group_keys) in enumerate(zip(groups, keys, strict=True)):
            for position, (sentence, key) in enumerate(zip(group, group_keys, strict=True)):
                if key not in self._cache and key not in missing:
                    missing[key] = (rank, position, sentence)
        if self.sentence_budget is None or len(missing) <= self.sentence_budget:
            return [(key, sentence) for key, (_, _, sentence) in missing.items()]
        terms = set(query_terms(question))
        overlap = {key: len(terms.intersection(query_terms(sentence))) for key, (_, _, sentence) in missing.items()}
        covered = {rank for rank, group_keys in enumerate(keys) if any(k in self._cache for k in group_keys)}
        # First each uncovered candidate's best sentence (best candidates first), then the most overlapping rest.
        firsts: dict[int, bytes] = {}
        for key, (rank, _, _) in missing.items():
            if rank not in covered and (rank not in firsts or overlap[key] > overlap[firsts[rank]]):
                firsts[rank] = key
        order = sorted(firsts.values(), key=lambda k: (-overlap[k], missing[k][0]))
        picked = set(order)
        order += sorted((k for k in missing if k not in picked), key=lambda k: (-overlap[k], missing[k][0],
                                                                              missing[k][1]))
        return [(key, missing[key][2]) for key in order[: self.sentence_budget]]


def _sentence_key(sentence: str) -> bytes:
    return hashlib.blake2b(sentence.encode(), digest_size=16).digest()


def _candidate_sentences(text: str) -> list[str]:
    """What the re-ranker scores of a text: its sentences, or the text itself when it has none."""
    return split_sentences(text) or [text]


@lru_cache(maxsize=4096)
def _keyed_sentences(text: str) -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    """A candidate's sentences and their cache keys. Memoised: `preload` and scoring both need them for the same
    texts, and the same chunks come back for related questions."""
    sentences = tuple(_candidate_sentences(text))
    return sentences, tuple(_sentence_key(s) for s in sentences)


# Chunks per write while filling sentence vectors: one transaction per ~600 sentences (a few seconds of model).
FILL_BATCH = 64


def fill_sentence_vectors(store: Store, embedder: Embedder,
                          progress: Callable[[int, int], None] | None = None) -> int:
    """Embed every sentence of each chunk that has no stored sentence vectors, and store them (the sentence
    re-ranker then reads them instead of running the model at query time). Incremental and safe to interrupt:
    each batch commits on its own, and a later run resumes with what is missing. Returns the chunks filled."""
    rows = store.chunks_without_sentence_vectors(0, FILL_BATCH)
    if not rows:  # the common case after every write once filled: one cheap query, no counting
        return 0
    total = 0
    if progress:
        stats = store.stats()
        total = int(stats["chunks"]) - int(stats.get("sentence_vector_chunks") or 0)
    done = 0
    while rows:
        groups = [_candidate_sentences(text) for _, _, text in rows]
        unique = list(dict.fromkeys(s for group in groups for s in group))
        vectors = dict(zip(unique, embedder.embed_documents(unique), strict=True))
        store.put_sentence_vectors([(rowid, text_hash, np.stack([vectors[s] for s in group]))
                                    for (rowid, text_hash, _), group in zip(rows, groups, strict=True)])
        done += len(rows)
        if progress:
            progress(done, max(done, total))  # chunks, as indexing counts them
        rows = store.chunks_without_sentence_vectors(rows[-1][0], FILL_BATCH)
    return done


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
        self._cache: OrderedDict[bytes, float] = OrderedDict()  # keyed by a hash of (question, text)

    def score(self, question: str, query_vector: np.ndarray | None, texts: list[str]) -> list[float]:
        keys = {t: _sentence_key(f"{question}\x00{t}") for t in dict.fromkeys(texts)}
        todo = [t for t, key in keys.items() if key not in self._cache]
        if todo:
            for text, value in zip(todo, self.model.score(question, todo), strict=True):
                self._cache[keys[text]] = float(value)
        scores = []
        for text in texts:
            self._cache.move_to_end(keys[text])
            scores.append(self._cache[keys[text]])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return scores
