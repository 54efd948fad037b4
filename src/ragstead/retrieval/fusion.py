"""Rank fusion of the vector and lexical lists: RRF (sum 1 / (k + rank), ranks from 1) or the convex
combination w * scaled(vector) + (1 - w) * scaled(lexical), an id missing from a list scoring 0 there.
Why convex is the default and how lists are scaled: docs/design.md, "Fusion".
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

FUSIONS = ("rrf", "convex")
# The ids fused (rowids in search): each function gives back the type of id it was given.
K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(ranked_lists: Sequence[Sequence[K]], k: int = 60) -> dict[K, float]:
    """Fuse ranked id lists (best first). Returns id -> fused score; an id missing from a list adds 0."""
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    scores: dict[K, float] = {}
    for ranked in ranked_lists:
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def min_max(hits: Sequence[tuple[K, float]]) -> dict[K, float]:
    """Scores scaled to [0, 1] over this list (best 1, worst 0); a list of equal scores maps to all 1."""
    if not hits:
        return {}
    scores = [s for _, s in hits]
    low, high = min(scores), max(scores)
    span = high - low
    return {item: (s - low) / span if span > 0 else 1.0 for item, s in hits}


def min_max_above_zero(hits: Sequence[tuple[K, float]]) -> dict[K, float]:
    """Scores scaled into (0, 1]: min-max with the floor one mean gap below the worst score, so the last
    candidate of a list still counts for more than an id the list did not return (which scores 0)."""
    if not hits:
        return {}
    scores = [s for _, s in hits]
    low, high = min(scores), max(scores)
    span = high - low
    if span <= 0:
        return {item: 1.0 for item, _ in hits}
    floor = low - span / len(hits)
    return {item: (s - floor) / (high - floor) for item, s in hits}


def fused_order(fused: dict[K, float], vector_hits: Sequence[tuple[K, float]],
                lexical_hits: Sequence[tuple[K, float]]) -> list[K]:
    """The fused ids best first, ties broken by vector rank, then lexical rank (an id a list lacks after all of
    its own), so the order is deterministic."""
    missing = len(vector_hits) + len(lexical_hits)
    vector_rank = {item: rank for rank, (item, _) in enumerate(vector_hits)}
    lexical_rank = {item: rank for rank, (item, _) in enumerate(lexical_hits)}
    return sorted(fused, key=lambda r: (-fused[r], vector_rank.get(r, missing), lexical_rank.get(r, missing)))


def convex_fusion(
    vector_hits: Sequence[tuple[K, float]],
    lexical_hits: Sequence[tuple[K, float]],
    weight: float = 0.5,
) -> dict[K, float]:
    """`weight` * scaled(vector) + (1 - `weight`) * scaled(lexical) (`min_max_above_zero`); ids missing from a
    list get 0 there."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError("the convex fusion weight must be between 0 and 1")
    vector, lexical = min_max_above_zero(vector_hits), min_max_above_zero(lexical_hits)
    return {item: weight * vector.get(item, 0.0) + (1.0 - weight) * lexical.get(item, 0.0)
            for item in vector.keys() | lexical.keys()}
