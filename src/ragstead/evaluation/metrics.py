"""IR metrics over one ranked list and a relevance map (graded: item -> gain; gain <= 0 is not relevant).

Conventions (stated because published numbers differ on them):
- Ranks are 1-based; `ranked` is best first and holds no duplicates (the runner dedups by document).
- Recall@k = |relevant ∩ top k| / |relevant|. MRR@k = 1 / rank of the first relevant item in the top k,
  else 0. Hit rate@k = 1 if any relevant item is in the top k.
- nDCG@k uses the linear gain of trec_eval / BEIR (pytrec_eval): DCG = Σ gain / log2(rank + 1), ideal DCG
  from the gains sorted descending.
- Ties in retrieval scores are broken before a list gets here (by the search pipeline's deterministic
  order: fused score, then vector rank, then lexical rank; documents by best chunk, then doc key), so a
  metric never depends on the order Python happened to produce.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def _relevant(qrels: Mapping[str, float]) -> set[str]:
    return {item for item, gain in qrels.items() if gain > 0}


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    relevant = _relevant(qrels)
    for rank, item in enumerate(ranked[:k], start=1):
        if item in relevant:
            return 1.0 / rank
    return 0.0


def hit_rate_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    return 1.0 if _relevant(qrels).intersection(ranked[:k]) else 0.0


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    dcg = sum(max(qrels.get(item, 0.0), 0.0) / math.log2(rank + 1) for rank, item in enumerate(ranked[:k], start=1))
    ideal_gains = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 1) for rank, gain in enumerate(ideal_gains, start=1))
    return dcg / idcg if idcg > 0 else 0.0


def rank_by_score(scores: Mapping[str, float]) -> list[str]:
    """Items best first; equal scores ordered by item key so ties are deterministic."""
    return sorted(scores, key=lambda item: (-scores[item], item))


def summarize(
    runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, float]], ks: Sequence[int]
) -> dict[str, float]:
    """Mean of every metric over the queries in `qrels` (a query with no run scores 0)."""
    totals: dict[str, float] = {}
    names = [f"{m}@{k}" for k in ks for m in ("recall", "mrr", "hit_rate")] + ["ndcg@10"]
    for name in names:
        totals[name] = 0.0
    for qid, rels in qrels.items():
        ranked = runs.get(qid, [])
        for k in ks:
            totals[f"recall@{k}"] += recall_at_k(ranked, rels, k)
            totals[f"mrr@{k}"] += mrr_at_k(ranked, rels, k)
            totals[f"hit_rate@{k}"] += hit_rate_at_k(ranked, rels, k)
        totals["ndcg@10"] += ndcg_at_k(ranked, rels, 10)
    n = max(len(qrels), 1)
    return {name: round(value / n, 4) for name, value in totals.items()}
