"""The Milvus store (Milvus Lite) beside the embedded one on the synthetic index of query_latency.py.

`python -m bench milvus --size 100000 --queries 30`: builds (or reuses) the synthetic index, copies it into
`milvus:…db` with `ragstead migrate`'s code (timed: the load rate, Milvus's index build included), then the same
query sets go through the same search() over both: Milvus with `exact_rows=0` (every vector query is Milvus's
filtered search) and with the default planner (small scopes scored from SQLite). Also the recall@10 of Milvus's
vector search against the embedded store's exact one. Milvus Lite is an embedded engine for development and
tests, not the production engine: its numbers say what this code costs, not what a Milvus cluster does.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import write_results
from bench.query_latency import build, measure_store, store_recall
from ragstead.stores.factory import StoreSpec
from ragstead.stores.migrate import copy_store
from ragstead.stores.sqlite import SqliteStore


def main(size: int, queries: int, workdir: Path | None = None, url: str = "") -> None:
    """`url`: a Milvus server (`milvus://host:port`) instead of Milvus Lite; the results are then
    milvus_server_<size>k (and a server is measured in that column, not Lite)."""
    work = workdir or Path(tempfile.mkdtemp(prefix="ragstead-bench-milvus-"))
    work.mkdir(parents=True, exist_ok=True)
    source_path = work / f"synthetic-{size}.db"
    if not source_path.exists():
        build(source_path, size)
    embedded = SqliteStore(source_path)
    milvus_dir = work / "milvus"
    shutil.rmtree(milvus_dir, ignore_errors=True)
    base = f"{url}?db=milvus/m.sqlite" if url else "milvus:milvus/m.db"
    joiner = "&" if url else "?"
    spec = StoreSpec.parse(f"{base}{joiner}exact_rows=0", root=work, default_db=source_path)
    target = spec.open()
    started = time.perf_counter()
    report = copy_store(embedded, target, batch_size=500)
    load_seconds = time.perf_counter() - started
    results: dict[str, Any] = {
        "size": size,
        "load_chunks_per_s": round(report.chunks / load_seconds),
        "recall@10 vs exact": store_recall(target, embedded, n=50, by_chunk_id=True),
        "embedded": measure_store(embedded, queries),
        "milvus (exact_rows=0)": measure_store(target, queries),
    }
    target.close()
    planner = StoreSpec.parse(base, root=work, default_db=source_path).open()
    results["milvus (default planner)"] = measure_store(planner, queries)
    planner.close()
    embedded.close()
    names = ["embedded", "milvus (exact_rows=0)", "milvus (default planner)"]
    rows = [["scope", "mode", *[f"{n} p50 / p95 ms" for n in names]]]
    for key in results["embedded"]:
        if "|" in key:
            rows.append([*key.split(" | "), *[f"{results[n][key]['p50']:.1f} / {results[n][key]['p95']:.1f}"
                                              for n in names]])
    rows.append(["load (migrate)", "chunks/s", "", str(results["load_chunks_per_s"]), ""])
    recall = results["recall@10 vs exact"]
    rows.append(["vector recall@10 vs exact", "no user filter / 2 % user", "1.0 (exact)",
                 f"{recall['no user filter']} / {recall['user filter (2 %)']}", ""])
    write_results(f"milvus_{'server' if url else 'lite'}_{size // 1000}k", results, rows)
    if workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    import sys

    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000, int(sys.argv[2]) if len(sys.argv) > 2 else 30)
