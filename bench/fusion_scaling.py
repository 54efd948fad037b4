"""How convex fusion scales each list before it adds them, on SciFact train (chosen) and test (reported).

- minmax: [0, 1] over the list's candidates; the last candidate of a list scores 0, as a missing id does.
- floor (the default): min-max with the floor one mean gap below the worst score, so the last candidate
  keeps a score above a missing id's 0 (`retrieval.fusion.min_max_above_zero`).
- tmm: theoretical min-max (Bruch et al.): divide by the list's best score, the floor at 0.

Replays the cached candidates of `bench fusion` at depth 25 (the CLI's default per side) and 300 (eval's).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

from bench.common import write_results
from bench.fusion_sweep import chunk_docs, collect, documents
from ragstead.evaluation.metrics import summarize
from ragstead.retrieval.fusion import fused_order, min_max, min_max_above_zero

Scale = Callable[[Sequence[tuple[Hashable, float]]], dict[Hashable, float]]


def theoretical_min_max(hits: Sequence[tuple[Hashable, float]]) -> dict[Hashable, float]:
    best = max((s for _, s in hits), default=0.0)
    return {item: max(s, 0.0) / best if best > 0 else 1.0 for item, s in hits}


SCALINGS: dict[str, Scale] = {"minmax": min_max, "floor (default)": min_max_above_zero, "tmm": theoretical_min_max}


def main(dataset: Path, weight: float = 0.5) -> None:
    index_db = Path(__file__).parent / "results" / ".cache" / f"{dataset.name}.db"
    docs = chunk_docs(index_db)
    rows = [["split", "depth", "scaling", "nDCG@10", "Recall@100"]]
    data: dict[str, dict[str, float]] = {}
    for split in ("train", "test"):
        queries = collect(dataset, split, index_db)
        for depth in (25, 300):
            for name, scale in SCALINGS.items():
                runs, qrels = {}, {}
                for q in queries:
                    vector, lexical = ([tuple(h) for h in q[side][:depth]] for side in ("vector", "lexical"))
                    a, b = scale(vector), scale(lexical)
                    fused = {r: weight * a.get(r, 0.0) + (1 - weight) * b.get(r, 0.0) for r in a.keys() | b.keys()}
                    order = fused_order(fused, vector, lexical)
                    runs[q["qid"]], qrels[q["qid"]] = documents(order, docs), q["relevant"]
                m = summarize(runs, qrels, (10, 100))
                data[f"{split} depth {depth} {name}"] = {"ndcg@10": m["ndcg@10"], "recall@100": m["recall@100"]}
                rows.append([split, str(depth), name, f"{m['ndcg@10']:.4f}", f"{m['recall@100']:.4f}"])
    write_results(f"fusion_scaling_{dataset.name}", {"dataset": str(dataset), "weight": weight, "runs": data}, rows)
