"""The embedding models of `ragstead models` on a BEIR dataset: quality and speed, every model in one table.

Quality: each model gets its own index of the corpus (`ragstead eval --model ID`, 400/80-word chunks,
convex fusion), evaluated on train and then on test over the same index; the default is chosen on train.
Speed, measured for every model back to back in one process on a quiet machine (so the ratios compare
like with like): passages/s embedding the same 512 corpus passages in batches, and the p50/p95 of one
query embedding over 200 real queries. The search p95 of the eval adds to the query embedding.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, beir_eval, percentiles, write_results

MODES = ("vector", "lexical", "hybrid")
PASSAGES = 512
QUERIES = 200


def _index_name(dataset: Path, model: str) -> Path:
    # The default model's index is the one every other bench shares (python -m bench quality).
    suffix = "" if model == "minilm-l6-int8" else f"-model-{model}"
    return RESULTS / ".cache" / f"{dataset.name}{suffix}.db"


def _eval(dataset: Path, split: str, model: str) -> dict[str, Any]:
    report = RESULTS / ".cache" / f"eval-{dataset.name}-{split}-model-{model}.json"
    if report.exists():
        return json.loads(report.read_text())
    return beir_eval(dataset, split, str(_index_name(dataset, model)), report, "--model", model, show=False)


def speed(dataset: Path, models: list[str]) -> dict[str, Any]:
    """Passages/s and query-embedding latency of each model, in one process, one after another."""
    from ragstead.documents.chunking import ChunkingOptions, chunk_text
    from ragstead.embeddings import make_embedder
    from ragstead.evaluation.cases import load_beir

    data = load_beir(dataset, "test")
    passages: list[str] = []
    for title, text in data.corpus.values():
        passages += [c.text for c in chunk_text(f"{title}\n\n{text}", ChunkingOptions())]
        if len(passages) >= PASSAGES:
            break
    passages = passages[:PASSAGES]
    queries = [case.query for case in data.cases][:QUERIES]
    out: dict[str, Any] = {}
    for model in models:
        started = time.perf_counter()
        embedder = make_embedder(model)
        load_seconds = time.perf_counter() - started
        embedder.embed_documents(passages[:32])  # warm-up: allocations, thread pools
        started = time.perf_counter()
        embedder.embed_documents(passages)
        seconds = time.perf_counter() - started
        times = []
        for query in queries:
            started = time.perf_counter()
            embedder.embed_query(query)
            times.append((time.perf_counter() - started) * 1000)
        out[model] = {"name": embedder.name, "dim": embedder.dim, "load_seconds": round(load_seconds, 2),
                      "passages_per_second": round(len(passages) / seconds, 1),
                      "query_embedding_ms": percentiles(times)}
        print(f"{model}: {out[model]['passages_per_second']} passages/s", flush=True)
    return out


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = [["model", "dim", *(f"train nDCG@10 {m}" for m in MODES), "test nDCG@10 vector", "test nDCG@10 hybrid",
             "test Recall@100 hybrid", "passages/s (embed)", "query embedding p50 / p95 ms",
             "test hybrid search p95 ms", "index chunks/s (eval run)"]]
    for model, r in results["models"].items():
        fast = results["speed"].get(model, {})
        emb = fast.get("query_embedding_ms", {})
        rate = r["index_chunks_per_second"]
        rows.append([model, str(fast.get("dim", "")), *(f"{r['train'][m]['ndcg@10']:.4f}" for m in MODES),
                     f"{r['test']['vector']['ndcg@10']:.4f}", f"{r['test']['hybrid']['ndcg@10']:.4f}",
                     f"{r['test']['hybrid']['recall@100']:.4f}", str(fast.get("passages_per_second", "")),
                     f"{emb['p50']:.1f} / {emb['p95']:.1f}" if emb else "",
                     f"{r['test_latency_ms']['hybrid']['p95']:.1f}", f"{rate:.1f}" if rate else "(cached)"])
    return rows


def main(dataset: Path, models: list[str], quality: bool = True, measure_speed: bool = True) -> None:
    """Quality per model (cached per model and split in bench/results/.cache), then the speed probe."""
    path = RESULTS / f"models_{dataset.name}.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results = {"models": results.get("models", {}), "speed": results.get("speed", {})}
    if quality:
        for model in models:
            train = _eval(dataset, "train", model)  # builds the index: its time is the index rate
            test = _eval(dataset, "test", model)
            run = train["run"]
            results["models"][model] = {
                "embedder": run["model"], "chunks": run["index"]["chunks"],
                "index_chunks_per_second": round(run["index"]["chunks"] / run["index_seconds"], 1)
                if run["chunks_embedded"] else None,
                "train": {m: train["modes"][m] for m in MODES}, "test": {m: test["modes"][m] for m in MODES},
                "test_latency_ms": test["latency_ms"],
            }
            print(f"{model}: quality done", flush=True)
    if measure_speed:
        results["speed"] = speed(dataset, models)
    write_results(f"models_{dataset.name}", results, _rows(results))
