"""Rank fusion. RRF (Cormack et al. 2009) with 1-based ranks: score(d) = sum 1 / (k + rank)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def reciprocal_rank_fusion(ranked_lists: Sequence[Sequence[Hashable]], k: int = 60) -> dict[Hashable, float]:
    """Fuse ranked id lists (best first). Returns id -> fused score; an id missing from a list adds 0."""
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    scores: dict[Hashable, float] = {}
    for ranked in ranked_lists:
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores
