"""nDCG@10 / Recall@100 per mode on a BEIR dataset (default SciFact), train and test splits, via `ragstead eval`.

The corpus index is kept in bench/results/.cache/ so the second split (and later runs) embed nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.common import RESULTS, beir_eval, write_results


def run_split(dataset: Path, split: str, index_db: Path) -> dict[str, Any]:
    return beir_eval(dataset, split, str(index_db), RESULTS / ".cache" / f"eval-{dataset.name}-{split}.json")


def main(dataset: Path) -> None:
    cache = RESULTS / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    index_db = cache / f"{dataset.name}.db"
    splits = [s for s in ("train", "test") if (dataset / "qrels" / f"{s}.tsv").exists()]
    reports = {split: run_split(dataset, split, index_db) for split in splits}
    rows = [["split", "mode", "nDCG@10", "Recall@100", "MRR@10", "Recall@10", "search p50 ms", "search p95 ms"]]
    for split, report in reports.items():
        for mode, m in report["modes"].items():
            lat = report["latency_ms"][mode]
            rows.append([split, mode, f"{m['ndcg@10']:.4f}", f"{m['recall@100']:.4f}", f"{m['mrr@10']:.4f}",
                         f"{m['recall@10']:.4f}", f"{lat['p50']:.2f}", f"{lat['p95']:.2f}"])
    summary = {split: {"modes": r["modes"], "latency_ms": r["latency_ms"], "settings": r["settings"],
                       "run": r["run"], "misses": {m: len(v) for m, v in r["misses"].items()}}
               for split, r in reports.items()}
    write_results(f"quality_{dataset.name}", {"dataset": str(dataset), "splits": summary}, rows)
