"""The other stores beside the embedded one: the same queries over the same chunks, in one run.

Stores: PostgreSQL 18 + pgvector 0.8 (a local server, loopback, durable: fsync on, shared_buffers 2 GB) and
Chroma 1.5 as the vector index (`chroma:PATH`, its embedded client; the text and BM25 stay in SQLite).
Per size: the synthetic index of query_latency.py (built if missing) is copied into each store with
`ragstead migrate`'s code (timed: that is each store's load rate, ANN builds included), then the same
query sets go through the same search() over every store. Also measured: the recall@10 of each store's
vector side (HNSW) against the embedded store's exact search, unfiltered and with a 2 % user filter.
Random vectors are the hardest case for HNSW (no clusters to exploit); real embeddings do better.
Baseline in the same run, on the same database: "PostgreSQL, previous" is the store before impact-ordered
postings and the small-scope exact path (BM25 of every match; every vector query walks the HNSW graph), run
on the first `previous_queries` queries of each set (its unfiltered head-term queries take seconds each).
Also timed at each size: the HNSW build with the server's 1 parallel maintenance worker and the postings
build (both inside the load), and with --hnsw-serial an HNSW build with no worker (after the queries).
Before a PostgreSQL store is queried, its relations' files are read into the OS page cache (as the
embedded bench does with its files), so no store is measured with a cold cache.

Real data too: the SciFact index of bench/results/.cache (built by `python -m bench quality`, or here) is
migrated into each store and `ragstead eval` runs on all of them (train and test): nDCG@10 and
Recall@100 per mode, search p50/p95, and the HNSW recall@10 of the real test queries against exact search.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

import ragstead
from bench.common import RESULTS, beir_eval, percentiles, read_into_page_cache, write_results
from bench.query_latency import USERS, build, measure_store, query_sets
from ragstead.filters import QueryFilters
from ragstead.retrieval.lexical_query import query_terms
from ragstead.stores.migrate import copy_store
from ragstead.stores.postgres import PostgresStore
from ragstead.stores.postgres_local import LocalPostgres
from ragstead.stores.sqlite import SqliteStore

# Each store as a column; "chroma-all" is the same Chroma folder with ?exact_rows=0 (every vector query goes
# to Chroma's filtered search, no small-scope planner), so its cost is visible beside the default.
STORES = ("postgresql-previous", "postgresql", "chroma", "chroma-all")
LOADED = ("postgresql", "chroma")
LABELS = {"postgresql-previous": "PostgreSQL, previous", "postgresql": "PostgreSQL", "chroma": "Chroma",
          "chroma-all": "Chroma, exact_rows=0"}


class PreviousPostgresStore(PostgresStore):
    """The PostgreSQL store before this change: lexical top-k scores every match, a filtered vector query
    always walks the HNSW graph (exact only when the walk comes back short), and a hybrid query runs its two
    sides one after the other."""

    exact_scope_rows = 0
    parallel_searches = False

    def _top_by_impact(self, *args: Any) -> None:
        return None

SERVER_SETTINGS = {"shared_buffers": "2GB", "maintenance_work_mem": "2GB", "max_parallel_maintenance_workers": "1",
                   "work_mem": "64MB"}


def _top_chunk_ids(store: Any, q: np.ndarray, f: QueryFilters) -> set[str]:
    hits = store.vector_search(q, f, 10)
    rows = store.fetch_chunks([h[0] for h in hits], f)
    return {rows[h[0]]["chunk_id"] for h in hits}


def recall_at_10(embedded: SqliteStore, server: Any, probes: Iterable[tuple[np.ndarray, QueryFilters]]) -> float:
    """Mean overlap of another store's vector top 10 with the embedded store's exact top 10, compared by
    chunk id (row ids are each store's own)."""
    overlaps = [len(_top_chunk_ids(embedded, q, f) & _top_chunk_ids(server, q, f)) / 10 for q, f in probes]
    return round(float(np.mean(overlaps)), 4)


def _random_unit(rng: np.random.Generator) -> np.ndarray:
    q = rng.standard_normal(384).astype(np.float32)
    return q / np.linalg.norm(q)


def _specs(postgres_url: str, chroma_folder: Path) -> dict[str, str]:
    shutil.rmtree(chroma_folder, ignore_errors=True)
    return {"postgresql": postgres_url, "postgresql-previous": postgres_url, "chroma": f"chroma:{chroma_folder}",
            "chroma-all": f"chroma:{chroma_folder}?exact_rows=0"}


def _open(spec: str, name: str = "") -> Any:
    if name == "postgresql-previous":
        return PreviousPostgresStore(spec)
    return ragstead.open(RESULTS / ".cache", store=spec).settings.store_spec().open()


def hnsw_build_seconds(store: PostgresStore, workers: int) -> float:
    """Drop and rebuild the HNSW index with `workers` parallel maintenance workers; the seconds it took."""
    with store._transaction() as conn:
        conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (store._build_memory(conn),))
        conn.execute("SELECT set_config('max_parallel_maintenance_workers', %s, true)", (str(workers),))
        started = time.perf_counter()
        conn.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_ip_ops)")
        return round(time.perf_counter() - started, 1)


def warm_relations(store: PostgresStore, server: LocalPostgres) -> float:
    """Read the files of the relations queries touch into the OS page cache (this server has no pg_prewarm),
    as the embedded bench does for its files: every store is measured with its index in memory, as for the
    second and later queries of any user. Returns the seconds it took."""
    started = time.perf_counter()
    with store._transaction() as conn:
        paths = [row[0] for row in conn.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'ragstead' AND c.relkind IN ('r', 'i', 't') AND pg_relation_filepath(c.oid) IS NOT NULL"
        )]
    read_into_page_cache(segment for relative in paths
                         for segment in sorted((server.data_dir / relative).parent.glob(Path(relative).name + "*")))
    return round(time.perf_counter() - started, 1)


# Interleaved A/Bs of the exact-scoring step: (attribute of PostgresStore, the value before, the shipped value).
SCORING_AB = {"parallel scoring off / on": ("parallel_scoring", False, True),
              "scoring from chunks / chunk_terms": ("scoring_table", "chunks", "chunk_terms")}


def scoring_ab(store: PostgresStore, queries: int, attribute: str, before: Any, after: Any) -> dict[str, Any]:
    """Head-term lexical queries with `attribute` at `before` and at `after`, interleaved query by query (the
    order alternating), so both see the same page cache; the answers must be identical."""
    times: dict[Any, list[float]] = {before: [], after: []}
    for i, text in enumerate(query_sets(queries)[0]):
        answers = {}
        for value in ((before, after) if i % 2 == 0 else (after, before)):
            setattr(store, attribute, value)
            started = time.perf_counter()
            answers[value] = store.lexical_search(query_terms(text), QueryFilters(), 10)
            times[value].append((time.perf_counter() - started) * 1000)
        assert answers[before] == answers[after], text
    setattr(store, attribute, after)
    return {"off": percentiles(times[before]), "on": percentiles(times[after])}


def one_size(n: int, workdir: Path, server: LocalPostgres, queries: int = 100, stores: tuple[str, ...] = STORES,
             previous_queries: int = 20, hnsw_serial: bool = False) -> dict[str, Any]:
    path = workdir / f"synthetic-{n}.db"
    if not path.exists():
        build(path, n)
    embedded = SqliteStore(path)
    result: dict[str, Any] = {"queries_per_run": queries, "previous_queries_per_run": previous_queries,
                              "embedded": measure_store(embedded, queries)}
    rng = np.random.default_rng(9)
    probes = {
        "no user filter": [(_random_unit(rng), QueryFilters()) for _ in range(queries)],
        "user filter (2 %)": [(_random_unit(rng), QueryFilters(user_slug=f"u{i % USERS}")) for i in range(queries)],
    }
    specs = _specs(server.create_database(f"synthetic_{n}_{int(time.time())}"), workdir / f"chroma-{n}")
    # Loaded stores first, so the previous PostgreSQL runs on the database the new one loaded.
    for name in sorted(stores, key=lambda s: s not in LOADED):
        target = _open(specs[name], name)
        if name in LOADED:
            started = time.perf_counter()
            report = copy_store(embedded, target, batch_size=500)
            load_seconds = time.perf_counter() - started
            result[f"load | {name}"] = {"seconds": round(load_seconds, 1),
                                        "chunks_per_second": round(report.chunks / load_seconds, 1)}
            if name == "postgresql":
                result["build seconds | postgresql"] = {
                    "hnsw, 1 parallel worker": round(target.build_seconds["hnsw"], 1),
                    "postings (insert, index, vacuum)": round(target.build_seconds["postings"], 1),
                }
        if name.startswith("postgresql"):
            result[f"warm files, s | {name}"] = warm_relations(target, server)
        count = previous_queries if name == "postgresql-previous" else queries
        result[name] = measure_store(target, count) | {
            "hnsw_recall_at_10": {scope: recall_at_10(embedded, target, p[:count]) for scope, p in probes.items()},
        }
        if name == "postgresql":
            for label, (attribute, before, after) in SCORING_AB.items():
                result[f"lexical head terms, {label} | postgresql"] = scoring_ab(target, queries, attribute, before,
                                                                                 after)
        if name == "postgresql" and hnsw_serial:  # last: the build evicts what the queries above read
            result["build seconds | postgresql"]["hnsw, no parallel worker"] = hnsw_build_seconds(target, 0)
        target.close()
    embedded.close()
    return result


def _eval(dataset: Path, split: str, index: str, tag: str) -> dict[str, Any]:
    return beir_eval(dataset, split, index, RESULTS / ".cache" / f"eval-{dataset.name}-{split}-{tag}.json")


def scifact(dataset: Path, server: LocalPostgres, workdir: Path, stores: tuple[str, ...] = STORES) -> dict[str, Any]:
    """Every store on the real SciFact index: quality per mode and split, and HNSW recall on real queries."""
    from ragstead.embeddings import MiniLMOnnxEmbedder
    from ragstead.evaluation.cases import load_beir

    cache = RESULTS / ".cache" / f"{dataset.name}.db"
    out: dict[str, Any] = {}
    if not cache.exists():
        _eval(dataset, "test", str(cache), "embedded")
    specs = {"embedded": str(cache), **_specs(server.create_database(f"{dataset.name}_{int(time.time())}"),
                                              workdir / f"chroma-{dataset.name}")}
    # `ragstead eval` runs the store a spec names, so the previous PostgreSQL has no SciFact column: its
    # rankings are the new store's by construction (same BM25 scores; tests/test_postgres_postings.py).
    evaluated = ["embedded", *(name for name in stores if name != "postgresql-previous")]
    for name in (name for name in LOADED if name in stores):
        migrated = subprocess.run([sys.executable, "-m", "ragstead", "migrate", "--from", f"sqlite:{cache}", "--to",
                                   specs[name], "--format", "json", "--quiet"], check=True, capture_output=True,
                                  text=True)
        report = json.loads(migrated.stdout)
        out[f"migrate | {name}"] = {k: v for k, v in report.items() if k not in ("source", "target")}
    for split in ("train", "test"):
        for name in evaluated:
            report = _eval(dataset, split, specs[name], name)
            out[f"{split} | {name}"] = {"modes": report["modes"], "latency_ms": report["latency_ms"]}
    embedder = MiniLMOnnxEmbedder()
    probes = [(embedder.embed_query(case.query), QueryFilters()) for case in load_beir(dataset, "test").cases]
    embedded = SqliteStore(cache)
    for name in evaluated[1:]:
        target = _open(specs[name])
        out[f"hnsw_recall_at_10_test_queries | {name}"] = recall_at_10(embedded, target, probes)
        target.close()
    embedded.close()
    return out


def _pair(timing: dict[str, float]) -> str:
    return f"{timing['p50']:.2f} / {timing['p95']:.2f}"


def _rows(results: dict[str, Any]) -> list[list[str]]:
    stores = tuple(results["stores"])
    rows = [["data", "scope", "mode", "embedded", *(LABELS[name] for name in stores), "p95 ratio to embedded",
             "PostgreSQL p95, previous / new"]]
    real = results.get("scifact")
    if real:
        for split in ("train", "test"):
            for mode in real[f"{split} | embedded"]["modes"]:
                runs = [real.get(f"{split} | {tag}") for tag in ("embedded", *stores)]
                rows.append([f"SciFact {split}", "nDCG@10 / Recall@100", mode, *(
                    f"{r['modes'][mode]['ndcg@10']:.4f} / {r['modes'][mode]['recall@100']:.4f}" if r else ""
                    for r in runs), "", ""])
                p95 = [r["latency_ms"][mode]["p95"] if r else None for r in runs]
                rows.append([f"SciFact {split}", "search p50 / p95 ms (300 candidates)", mode,
                             *(_pair(r["latency_ms"][mode]) if r else "" for r in runs),
                             ", ".join(f"{p / p95[0]:.2f}x" for p in p95[1:] if p is not None), ""])
        rows.append(["SciFact test", "vector recall@10 vs exact (real queries)", "vector", "1.0 (exact)",
                     *(str(real.get(f"hnsw_recall_at_10_test_queries | {name}", "")) for name in stores), "", ""])
        rows.append(["SciFact", "migrate (chunks/s)", "", "", *(
            f"{real[f'migrate | {name}']['chunks_per_second']:.0f}" if name in LOADED else "" for name in stores),
            "", ""])
    for n, data in results["sizes"].items():
        for key, embedded in data["embedded"].items():
            if " | " not in key:
                continue
            scope, mode = key.split(" | ")
            speedup = ""
            if "postgresql" in data and "postgresql-previous" in data:
                speedup = f"{data['postgresql-previous'][key]['p95'] / data['postgresql'][key]['p95']:.1f}x faster"
            rows.append([f"synthetic {int(n):,}", scope, mode, _pair(embedded),
                         *(_pair(data[name][key]) for name in stores),
                         ", ".join(f"{data[name][key]['p95'] / embedded['p95']:.2f}x" for name in stores), speedup])
        for scope in ("no user filter", "user filter (2 %)"):
            rows.append([f"synthetic {int(n):,}", f"vector recall@10 vs exact (random vectors), {scope}", "vector",
                         "1.0 (exact)", *(str(data[name]["hnsw_recall_at_10"][scope]) for name in stores), "", ""])
        rows.append([f"synthetic {int(n):,}", "load (migrate): seconds, chunks/s", "", "", *(
            f"{data[f'load | {name}']['seconds']} s, {data[f'load | {name}']['chunks_per_second']:.0f}/s"
            if name in LOADED else "" for name in stores), "", ""])
        for label in SCORING_AB:
            ab = data.get(f"lexical head terms, {label} | postgresql")
            if ab:
                rows.append([f"synthetic {int(n):,}", "no user filter, interleaved", f"lexical, head terms: {label}",
                             "", *(f"{_pair(ab['off'])} / {_pair(ab['on'])}" if name == "postgresql" else ""
                                   for name in stores), "", ""])
        for step, seconds in data.get("build seconds | postgresql", {}).items():
            rows.append([f"synthetic {int(n):,}", f"PostgreSQL build: {step}, s", "", "",
                         *(str(seconds) if name == "postgresql" else "" for name in stores), "", ""])
    return rows


def main(sizes: list[int], workdir: Path | None, dataset: Path | None = None, queries: int = 100,
         output: str = "store_latency", skip_chroma: bool = False, previous_queries: int = 20,
         hnsw_serial: bool = False) -> None:
    """Run the SciFact part (when `dataset` exists) and each synthetic size; `queries` per scope and mode
    (and per recall probe set); results go to bench/results/<output>.json/.md, rewritten after each part."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ragstead-store-latency-"))
    workdir.mkdir(parents=True, exist_ok=True)
    data_root = Path(tempfile.mkdtemp(prefix="ragstead-bench-pg-"))
    data_root.chmod(0o755)
    stores = tuple(name for name in STORES if not (skip_chroma and name.startswith("chroma")))
    results: dict[str, Any] = {"data": " ".join(__doc__.split("\n\n")[1:3]).replace("\n", " "),
                               "postgresql_settings": SERVER_SETTINGS, "stores": stores, "sizes": {}}
    with LocalPostgres(data_root / "data", settings=SERVER_SETTINGS) as server:
        if dataset is not None and dataset.exists():
            results["scifact"] = scifact(dataset, server, workdir, stores)
            write_results(output, results, _rows(results))
            print("scifact: done", flush=True)
        for n in sizes:
            results["sizes"][str(n)] = one_size(n, workdir, server, queries, stores, previous_queries, hnsw_serial)
            write_results(output, results, _rows(results))  # each size as soon as it is done
            print(f"{n}: done", flush=True)
