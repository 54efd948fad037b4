"""Rank fusion: how the vector list and the lexical list become one ranking.

- RRF (Cormack et al. 2009), 1-based ranks: score(d) = sum 1 / (k + rank). Uses ranks only.
- Convex combination of min-max normalised scores (Bruch et al. 2023, "An Analysis of Fusion Functions
  for Hybrid Retrieval"): score(d) = w * norm_vector(d) + (1 - w) * norm_lexical(d), each list scaled to
  [0, 1] over its own candidates; a document missing from a list gets 0 there. Uses the scores, so a
  clear winner on one side counts for more than a near tie.
The default is chosen by the SciFact train split (`python -m bench fusion`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

FUSIONS = ("rrf", "convex")


def reciprocal_rank_fusion(ranked_lists: Sequence[Sequence[Hashable]], k: int = 60) -> dict[Hashable, float]:
    """Fuse ranked id lists (best first). Returns id -> fused score; an id missing from a list adds 0."""
    if k < 0:
        raise ValueError("rrf k must be >= 0")
    scores: dict[Hashable, float] = {}
    for ranked in ranked_lists:
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def min_max(hits: Sequence[tuple[Hashable, float]]) -> dict[Hashable, float]:
    """Scores scaled to [0, 1] over this list (best 1, worst 0); a list of equal scores maps to all 1."""
    if not hits:
        return {}
    scores = [s for _, s in hits]
    low, high = min(scores), max(scores)
    span = high - low
    return {item: (s - low) / span if span > 0 else 1.0 for item, s in hits}


def convex_fusion(
    vector_hits: Sequence[tuple[Hashable, float]],
    lexical_hits: Sequence[tuple[Hashable, float]],
    weight: float = 0.5,
) -> dict[Hashable, float]:
    """`weight` * min-max(vector) + (1 - `weight`) * min-max(lexical); ids missing from a list get 0 there."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError("the convex fusion weight must be between 0 and 1")
    vector, lexical = min_max(vector_hits), min_max(lexical_hits)
    return {item: weight * vector.get(item, 0.0) + (1.0 - weight) * lexical.get(item, 0.0)
            for item in vector.keys() | lexical.keys()}
