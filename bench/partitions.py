"""The PostgreSQL store partitioned by user (`?partition=user`) beside the unpartitioned one, in one run.

Data: the synthetic index of query_latency.py (random unit vectors, 384-d, 50 users of 2 % each), copied with
`ragstead migrate`'s code into two databases of one local server (durable, the settings of store_latency.py):
the plain layout and the partitioned one. Then, per scope, the same random query vectors go to both stores
interleaved query by query (the order alternating), so both see the same machine and page cache:
- vector recall@10 against the embedded store's exact search, and p50/p95 of vector_search, with the HNSW graph
  walked for every query (exact_scope_rows=0: where filtered HNSW lost recall at 1M), and with the default
  planner (a scope of at most 50k rows is ranked exactly);
- p50/p95 of a whole hybrid search() per scope (default planner).
Scopes: no user filter (every private partition), one 2 % user (a new user each query).
Then the cost of LIST partitions: the seconds to create a new user's partition (on first write, indexes
included) and the same queries again once the table has `extra_partitions` more (empty) user partitions.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import percentiles, write_results
from bench.query_latency import USERS, QueryVectors, build, query_sets
from bench.store_latency import SERVER_SETTINGS, _random_unit, recall_at_10, warm_relations
from ragstead import KnowledgeBase, SearchOptions, Settings
from ragstead.filters import QueryFilters
from ragstead.stores.migrate import copy_store
from ragstead.stores.postgres import EXACT_SCOPE_ROWS, PostgresStore
from ragstead.stores.postgres_local import LocalPostgres
from ragstead.stores.postgres_partitions import owner_of
from ragstead.stores.sqlite import SqliteStore

LAYOUTS = ("plain", "partitioned")
SCOPES: dict[str, Callable[[int], QueryFilters]] = {
    "no user filter": lambda i: QueryFilters(),
    "user filter (2 %)": lambda i: QueryFilters(user_slug=f"u{i % USERS}"),
}
PLANNERS = {"HNSW walk (exact_scope_rows=0)": 0, "default planner": EXACT_SCOPE_ROWS}


def _interleaved(stores: dict[str, Any], count: int, run: Callable[[Any, int], Any]) -> dict[str, dict[str, float]]:
    """p50/p95 ms of `run(store, i)` for i < count on each store, alternating which goes first."""
    times: dict[str, list[float]] = {name: [] for name in stores}
    for i in range(count):
        for name in (LAYOUTS if i % 2 == 0 else LAYOUTS[::-1]):
            started = time.perf_counter()
            run(stores[name], i)
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: percentiles(values) for name, values in times.items()}


def measure(embedded: SqliteStore, stores: dict[str, PostgresStore], queries: int) -> dict[str, Any]:
    """Recall and latency of both layouts per planner and scope, and hybrid search() latency per scope."""
    rng = np.random.default_rng(9)
    vectors = [_random_unit(rng) for _ in range(queries)]
    out: dict[str, Any] = {}
    for planner, rows in PLANNERS.items():
        for store in stores.values():
            store.exact_scope_rows = rows
        for scope, make in SCOPES.items():
            probes = [(vectors[i], make(i)) for i in range(queries)]
            out[f"{planner} | {scope} | vector"] = {
                "latency_ms": _interleaved(stores, queries, lambda s, i, p=probes: s.vector_search(*p[i], 10)),
                "recall_at_10": {name: recall_at_10(embedded, store, probes) for name, store in stores.items()},
            }
    kbs = {name: KnowledgeBase(Settings(), store=store, embedder=QueryVectors(np.random.default_rng(6)))
           for name, store in stores.items()}
    head, _ = query_sets(queries)
    options = SearchOptions(mode="hybrid", k=10)
    for scope, make in SCOPES.items():
        out[f"default planner | {scope} | hybrid"] = {"latency_ms": _interleaved(
            kbs, queries, lambda kb, i, make=make: kb.search(head[i], filters=make(i), options=options))}
    return out


def ef_sweep(embedded: SqliteStore, stores: dict[str, PostgresStore], queries: int,
             values: list[int]) -> dict[str, Any]:
    """Recall@10 and p50/p95 of a 2 % user's HNSW walk (exact_scope_rows=0) per `hnsw.ef_search`: what a
    longer candidate list buys back on each layout (random vectors are HNSW's hardest case)."""
    rng = np.random.default_rng(9)
    scope = SCOPES["user filter (2 %)"]
    probes = [(_random_unit(rng), scope(i)) for i in range(queries)]
    out: dict[str, Any] = {}
    for store in stores.values():
        store.exact_scope_rows = 0
    for ef in values:
        for store in stores.values():
            store.ef_search = ef
        out[f"ef_search {ef} | user filter (2 %) | vector"] = {
            "latency_ms": _interleaved(stores, queries, lambda s, i: s.vector_search(*probes[i], 10)),
            "recall_at_10": {name: recall_at_10(embedded, store, probes) for name, store in stores.items()},
        }
    for store in stores.values():
        store.exact_scope_rows, store.ef_search = EXACT_SCOPE_ROWS, PostgresStore.ef_search
    return out


def partition_costs(store: PostgresStore, extra: int) -> dict[str, Any]:
    """Seconds to create `extra` new users' partitions (each with its indexes, HNSW included, as a first write
    makes it), one transaction each."""
    times = []
    for i in range(extra):
        started = time.perf_counter()
        store._add_partitions({owner_of(True, f"new-user-{i}")})
        times.append((time.perf_counter() - started) * 1000)
    return {"new partition ms": percentiles(times), "partitions added": extra}


def main(size: int = 100_000, queries: int = 100, workdir: Path | None = None, extra_partitions: int = 1000,
         output: str = "", ef_search: tuple[int, ...] = (), pg_data: Path | None = None) -> None:
    """`ef_search`: also sweep the HNSW candidate list for a 2 % user. `pg_data`: the server data folder of an
    earlier run of this bench (its two databases already loaded): skip the loads, measure again."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ragstead-partitions-"))
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"synthetic-{size}.db"
    started = time.perf_counter()
    if not path.exists():
        build(path, size)
    results: dict[str, Any] = {"data": __doc__.split("\n\n")[1].replace("\n", " "), "size": size, "queries": queries,
                               "postgresql_settings": SERVER_SETTINGS,
                               "build synthetic s": round(time.perf_counter() - started, 1)}
    name = output or f"postgres_partitions_{size // 1000}k"
    if pg_data is None:
        data_root = Path(tempfile.mkdtemp(prefix="ragstead-bench-partitions-"))
        data_root.chmod(0o755)
    embedded = SqliteStore(path)
    with LocalPostgres(pg_data or data_root / "data", settings=SERVER_SETTINGS) as server:
        stores: dict[str, PostgresStore] = {}
        for layout in LAYOUTS:
            suffix = "?partition=user" if layout == "partitioned" else ""
            if pg_data is not None:
                stores[layout] = PostgresStore(server.database_url(f"partitions_{layout}_{size}") + suffix)
                continue
            store = PostgresStore(server.create_database(f"partitions_{layout}_{size}") + suffix)
            started = time.perf_counter()
            report = copy_store(embedded, store, batch_size=500)
            seconds = time.perf_counter() - started
            results[f"load | {layout}"] = {"seconds": round(seconds, 1),
                                           "chunks_per_second": round(report.chunks / seconds, 1),
                                           "hnsw build s": round(store.build_seconds.get("hnsw", 0), 1)}
            print(f"{layout}: loaded in {seconds:.0f} s", flush=True)
            stores[layout] = store
        for layout, store in stores.items():
            results[f"warm files s | {layout}"] = warm_relations(store, server)
        if pg_data is not None:  # a second look at an earlier run's databases: its own results file
            name += "_again"
        else:
            results["measured"] = measure(embedded, stores, queries)
        if ef_search:
            results["ef_search sweep"] = ef_sweep(embedded, stores, queries, list(ef_search))
        write_results(name, results, _rows(results))
        if extra_partitions:
            results["partition costs"] = partition_costs(stores["partitioned"], extra_partitions)
            for store in stores.values():
                warm_relations(store, server)
            results[f"measured with {extra_partitions} more partitions"] = measure(embedded, stores, queries)
        write_results(name, results, _rows(results))
        for store in stores.values():
            store.close()
    embedded.close()


def _rows(results: dict[str, Any]) -> list[list[str]]:
    rows = [["chunks", "partitions", "planner", "scope", "mode", "recall@10 plain / partitioned",
             "p50 / p95 ms plain", "p50 / p95 ms partitioned"]]
    extra = results.get("partition costs", {}).get("partitions added", 0)
    for label, count in (("measured", USERS + 2), (f"measured with {extra} more partitions", USERS + 2 + extra),
                         ("ef_search sweep", USERS + 2)):
        for key, data in results.get(label, {}).items():
            planner, scope, mode = key.split(" | ")
            recall = data.get("recall_at_10")
            timing = data["latency_ms"]
            rows.append([f"{results['size']:,}", str(count), planner, scope, mode,
                         f"{recall['plain']} / {recall['partitioned']}" if recall else "",
                         f"{timing['plain']['p50']:.2f} / {timing['plain']['p95']:.2f}",
                         f"{timing['partitioned']['p50']:.2f} / {timing['partitioned']['p95']:.2f}"])
    for layout in LAYOUTS:
        load = results.get(f"load | {layout}")
        if load:
            loaded = f"{load['seconds']} s, {load['chunks_per_second']:.0f} chunks/s, HNSW {load['hnsw build s']} s"
            rows.append([f"{results['size']:,}", "", "", f"load (migrate), {layout}", "", loaded, "", ""])
    costs = results.get("partition costs")
    if costs:
        ms = costs["new partition ms"]
        rows.append([f"{results['size']:,}", "", "", "a new user's partition (first write)", "",
                     f"{ms['p50']:.1f} / {ms['p95']:.1f} ms p50 / p95", "", ""])
    return rows
