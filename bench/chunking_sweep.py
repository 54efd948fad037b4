"""Chunk size and overlap on a BEIR dataset: every configuration tried, train and test, in one table.

Each configuration builds its own index of the corpus (`ragstead eval --chunk-size --overlap`, timed: the
index chunks/s column) and evaluates it on train, then on test over the same index. The default is
picked on train only; test is reported beside it. The embedder truncates at 256 tokens (~190 words), so
a chunk longer than that is embedded by its beginning only: smaller chunks put every sentence under the
model's window, at the cost of more vectors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.common import RESULTS, beir_eval, write_results

MODES = ("vector", "lexical", "hybrid")


def _eval(dataset: Path, split: str, size: int, overlap: int) -> dict[str, Any]:
    index = RESULTS / ".cache" / f"{dataset.name}-words-{size}-{overlap}.db"
    report = RESULTS / ".cache" / f"eval-{dataset.name}-{split}-words-{size}-{overlap}.json"
    if report.exists():
        return json.loads(report.read_text())
    return beir_eval(dataset, split, str(index), report, "--chunker", "words", "--chunk-size", str(size),
                     "--overlap", str(overlap), show=False)


def run(dataset: Path, configs: list[tuple[int, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size, overlap in configs:
        train = _eval(dataset, "train", size, overlap)  # builds the index: its time is the index rate
        test = _eval(dataset, "test", size, overlap)
        stats = train["run"]["index"]
        seconds = train["run"]["index_seconds"]
        out[f"{size}/{overlap}"] = {
            "chunks": stats["chunks"],
            "index_seconds": seconds,
            "chunks_embedded": train["run"]["chunks_embedded"],
            "index_chunks_per_second": round(stats["chunks"] / seconds, 1) if train["run"]["chunks_embedded"] else None,
            "train": {m: train["modes"][m] for m in MODES},
            "test": {m: test["modes"][m] for m in MODES},
            "test_latency_ms": test["latency_ms"],
        }
        print(f"{size}/{overlap}: done", flush=True)
    return out


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = [["words / overlap", "chunks", *(f"train nDCG@10 {m}" for m in MODES), "test nDCG@10 hybrid",
             "test Recall@100 hybrid", "index chunks/s", "test hybrid p95 ms"]]
    for name, r in results.items():
        rate = r["index_chunks_per_second"]
        rows.append([name, str(r["chunks"]), *(f"{r['train'][m]['ndcg@10']:.4f}" for m in MODES),
                     f"{r['test']['hybrid']['ndcg@10']:.4f}", f"{r['test']['hybrid']['recall@100']:.4f}",
                     f"{rate:.1f}" if rate else "(cached)", f"{r['test_latency_ms']['hybrid']['p95']:.1f}"])
    return rows


def main(dataset: Path, configs: list[tuple[int, int]]) -> None:
    results = run(dataset, configs)
    write_results(f"chunking_{dataset.name}", {"configs": results}, _rows(results))
