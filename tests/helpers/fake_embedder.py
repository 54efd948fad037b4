"""A deterministic, model-free embedder for tests that exercise stores, filters and scope, not the model.

Feature hashing: each lower-cased word (regex `\\w+`) lands in one of `dim` buckets with a sign, both taken
from a keyed BLAKE2b digest (stable across processes, unlike Python's salted `hash()`); the character
3-grams of each word add the same way at a lower weight, so near-duplicates and shared word stems still
score close. Last, a faint dense fingerprint of the exact text (SHAKE-256, 2% of the norm) breaks the exact
ties that texts built alike ("note 3 on topic 2", "note 4 on topic 2") would otherwise get, as a real model's
vectors never tie: stores may order tied hits differently, and tests compare orders. Rows are L2-normalised;
a text without any word gets the fixed unit vector e_0.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np

_WORD = re.compile(r"\w+")
WORD_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.3
FINGERPRINT_WEIGHT = 0.02


@lru_cache(maxsize=65536)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """The bucket and sign of one feature: bucket from the digest's first 8 bytes, sign from bit 0 of the 9th."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=16, person=b"ragstead-test").digest()
    return int.from_bytes(digest[:8], "little") % dim, 1.0 if digest[8] & 1 else -1.0


def _fingerprint(text: str, dim: int) -> np.ndarray:
    """A unit vector that depends on every byte of the text: dim uint16 from SHAKE-256, centred."""
    raw = np.frombuffer(hashlib.shake_256(b"t:" + text.encode("utf-8")).digest(2 * dim), dtype="<u2")
    centred = raw.astype(np.float64) - 32767.5
    return centred / np.linalg.norm(centred)


class HashingEmbedder:
    """Implements `ragstead.Embedder`: same text, same vector, in any process; no model files, no threads."""

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.name = f"test-hashing-{dim}"

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            index, sign = _bucket("w:" + word, self.dim)
            vector[index] += sign * WORD_WEIGHT
            padded = f"#{word}#"
            for start in range(len(padded) - 2):
                index, sign = _bucket("c:" + padded[start:start + 3], self.dim)
                vector[index] += sign * TRIGRAM_WEIGHT
        norm = float(np.linalg.norm(vector))
        if norm < 1e-12:  # no words (or, in theory, features that cancel out): a fixed unit vector, never NaN
            vector[:] = 0.0
            vector[0] = 1.0
            return vector.astype(np.float32)
        vector /= norm
        vector += FINGERPRINT_WEIGHT * _fingerprint(text, self.dim)
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Shape (len(texts), dim), float32, rows L2-normalised."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._vector(text)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Shape (dim,), float32, L2-normalised: the same vector as the text embedded as a document."""
        return self._vector(text)
