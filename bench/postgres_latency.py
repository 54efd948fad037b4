"""The PostgreSQL store beside the embedded store: the same queries over the same chunks, in one run.

Per size: the synthetic index of query_latency.py (built if missing) is copied into a local PostgreSQL 18
+ pgvector 0.8 server with `ragstead migrate`'s code (timed: that is the server store's load rate, HNSW
and GIN builds included), then the same query sets go through the same search() over both stores.
Also measured: the recall@10 of the server's vector side (HNSW, ef_search 40, iterative scan) against
the embedded store's exact search, unfiltered and with a 2 % user filter. Random vectors are the
hardest case for HNSW (no clusters to exploit); real embeddings do better.

Real data too: the SciFact index of bench/results/.cache (built by `python -m bench quality`, or here) is
migrated into the server and `ragstead eval` runs on both stores (train and test): nDCG@10 and
Recall@100 per mode, search p50/p95, and the HNSW recall@10 of the real test queries against exact search.

The server runs on loopback with its data on local disk, durable (fsync on), shared_buffers 2 GB.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, write_results
from bench.query_latency import USERS, build, measure_store
from ragstead.retrieval.filters import QueryFilters
from ragstead.stores import SqliteStore
from ragstead.stores.migrate import copy_store
from ragstead.stores.postgres import PostgresStore
from ragstead.stores.postgres_local import LocalPostgres

SERVER_SETTINGS = {"shared_buffers": "2GB", "maintenance_work_mem": "2GB", "max_parallel_maintenance_workers": "1",
                   "work_mem": "64MB"}


def _top_chunk_ids(store: Any, q: np.ndarray, f: QueryFilters) -> set[str]:
    hits = store.vector_search(q, f, 10)
    rows = store.fetch_chunks([h[0] for h in hits], f)
    return {rows[h[0]]["chunk_id"] for h in hits}


def recall_at_10(embedded: SqliteStore, server: PostgresStore, probes: Iterable[tuple[np.ndarray, QueryFilters]]
                 ) -> float:
    """Mean overlap of the server's vector top 10 with the embedded store's exact top 10, compared by
    chunk id (row ids are each store's own)."""
    overlaps = [len(_top_chunk_ids(embedded, q, f) & _top_chunk_ids(server, q, f)) / 10 for q, f in probes]
    return round(float(np.mean(overlaps)), 4)


def _random_unit(rng: np.random.Generator) -> np.ndarray:
    q = rng.standard_normal(384).astype(np.float32)
    return q / np.linalg.norm(q)


def one_size(n: int, workdir: Path, server: LocalPostgres) -> dict[str, Any]:
    path = workdir / f"synthetic-{n}.db"
    if not path.exists():
        build(path, n)
    embedded = SqliteStore(path)
    url = server.create_database(f"synthetic_{n}_{int(time.time())}")
    target = PostgresStore(url)
    started = time.perf_counter()
    report = copy_store(embedded, target, batch_size=500)
    load_seconds = time.perf_counter() - started
    result: dict[str, Any] = {
        "load_seconds": round(load_seconds, 1),
        "load_chunks_per_second": round(report.chunks / load_seconds, 1),
    }
    for name, store in (("embedded", embedded), ("postgresql", target)):
        result[name] = measure_store(store)
    rng = np.random.default_rng(9)
    result["hnsw_recall_at_10"] = {
        "no user filter": recall_at_10(embedded, target, ((_random_unit(rng), QueryFilters()) for _ in range(100))),
        "user filter (2 %)": recall_at_10(
            embedded, target, ((_random_unit(rng), QueryFilters(user_slug=f"u{i % USERS}")) for i in range(100))),
    }
    embedded.close()
    target.close()
    return result


def _eval(dataset: Path, split: str, index: str, tag: str) -> dict[str, Any]:
    report = RESULTS / ".cache" / f"eval-{dataset.name}-{split}-{tag}.json"
    subprocess.run(
        [sys.executable, "-m", "ragstead", "eval", "--beir", str(dataset), "--split", split,
         "--modes", "vector,lexical,hybrid", "--k", "1,5,10,100", "--index-db", index,
         "--report-json", str(report), "--quiet", "--root", str(RESULTS / ".cache")],
        check=True,
    )
    return json.loads(report.read_text())


def scifact(dataset: Path, server: LocalPostgres) -> dict[str, Any]:
    """Both stores on the real SciFact index: quality per mode and split, and HNSW recall on real queries."""
    from ragstead.embeddings import MiniLMOnnxEmbedder
    from ragstead.evaluation.cases import load_beir

    cache = RESULTS / ".cache" / f"{dataset.name}.db"
    out: dict[str, Any] = {}
    if not cache.exists():
        _eval(dataset, "test", str(cache), "embedded")
    url = server.create_database(f"{dataset.name}_{int(time.time())}")
    migrated = subprocess.run([sys.executable, "-m", "ragstead", "migrate", "--from", f"sqlite:{cache}", "--to", url,
                               "--format", "json", "--quiet"], check=True, capture_output=True, text=True)
    out["migrate"] = {k: v for k, v in json.loads(migrated.stdout).items() if k not in ("source", "target")}
    for split in ("train", "test"):
        for tag, index in (("embedded", str(cache)), ("postgresql", url)):
            report = _eval(dataset, split, index, tag)
            out[f"{split} | {tag}"] = {"modes": report["modes"], "latency_ms": report["latency_ms"]}
    embedder = MiniLMOnnxEmbedder()
    embedded, target = SqliteStore(cache), PostgresStore(url)
    probes = ((embedder.embed_query(case.query), QueryFilters()) for case in load_beir(dataset, "test").cases)
    out["hnsw_recall_at_10_test_queries"] = recall_at_10(embedded, target, probes)
    embedded.close()
    target.close()
    return out


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = [["data", "scope", "mode", "embedded", "PostgreSQL", "ratio"]]
    real = results.get("scifact")
    if real:
        for split in ("train", "test"):
            for mode in real[f"{split} | embedded"]["modes"]:
                e, p = (real[f"{split} | {tag}"] for tag in ("embedded", "postgresql"))
                rows.append([f"SciFact {split}", "nDCG@10 / Recall@100", mode,
                             f"{e['modes'][mode]['ndcg@10']:.4f} / {e['modes'][mode]['recall@100']:.4f}",
                             f"{p['modes'][mode]['ndcg@10']:.4f} / {p['modes'][mode]['recall@100']:.4f}", ""])
                rows.append([f"SciFact {split}", "search p50 / p95 ms (300 candidates)", mode,
                             f"{e['latency_ms'][mode]['p50']:.2f} / {e['latency_ms'][mode]['p95']:.2f}",
                             f"{p['latency_ms'][mode]['p50']:.2f} / {p['latency_ms'][mode]['p95']:.2f}",
                             f"{p['latency_ms'][mode]['p95'] / e['latency_ms'][mode]['p95']:.2f}x"])
        rows.append(["SciFact test", "vector recall@10 vs exact (real queries)", "vector", "1.0 (exact)",
                     str(real["hnsw_recall_at_10_test_queries"]), ""])
        m = real["migrate"]
        rows.append(["SciFact", f"migrate {m['chunks']} chunks: {m['seconds']} s", f"{m['chunks_per_second']} chunks/s",
                     "", "", ""])
    for n, data in results["sizes"].items():
        for key, embedded in data["embedded"].items():
            if " | " not in key:
                continue
            server_t = data["postgresql"][key]
            scope, mode = key.split(" | ")
            rows.append([f"synthetic {int(n):,}", scope, mode, f"{embedded['p50']:.2f} / {embedded['p95']:.2f}",
                         f"{server_t['p50']:.2f} / {server_t['p95']:.2f}",
                         f"{server_t['p95'] / embedded['p95']:.2f}x"])
        recall = data["hnsw_recall_at_10"]
        rows.append([f"synthetic {int(n):,}", "vector recall@10 vs exact (random vectors)", "vector", "1.0 (exact)",
                     f"{recall['no user filter']} unfiltered, {recall['user filter (2 %)']} user filter", ""])
        rows.append([f"synthetic {int(n):,}", f"load into PostgreSQL (migrate): {data['load_seconds']} s",
                     f"{data['load_chunks_per_second']:.0f} chunks/s", "", "", ""])
    return rows


def main(sizes: list[int], workdir: Path | None, dataset: Path | None = None) -> None:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ragstead-pg-latency-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data_root = Path(tempfile.mkdtemp(prefix="ragstead-bench-pg-"))
    data_root.chmod(0o755)
    results: dict[str, Any] = {"data": __doc__.split("\n\n")[1].replace("\n", " "), "server_settings": SERVER_SETTINGS,
                               "sizes": {}}
    with LocalPostgres(data_root / "data", settings=SERVER_SETTINGS) as server:
        if dataset is not None and dataset.exists():
            results["scifact"] = scifact(dataset, server)
            write_results("postgres_latency", results, _rows(results))
            print("scifact: done", flush=True)
        for n in sizes:
            results["sizes"][str(n)] = one_size(n, workdir, server)
            write_results("postgres_latency", results, _rows(results))  # each size as soon as it is done
            print(f"{n}: done", flush=True)
