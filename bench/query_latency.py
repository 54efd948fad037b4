"""Query latency per mode at scale, with and without a 2 %-selective user filter, plus peak RSS.

Synthetic data (said plainly): chunk text is 60 words drawn from a Zipf-distributed 30k-word vocabulary,
vectors are random unit vectors (384-d), 10 chunks per document, 50 users (2 % of rows each). Query
vectors are random too, so query embedding is excluded here and measured separately with the real model.
Two lexical query sets: "head terms" samples query words from the same Zipf law, so most queries carry
words found in 45 %+ of chunks (the worst case for FTS5, which scores every match); "content words"
samples 4 words from frequency ranks 50-5000, like real queries once stop words are gone.
Each size runs in its own subprocess so its peak RSS is its own.

Baselines in the same run, on the same data and queries, measured after ragstead's numbers and peak RSS:
- the previous vector search ("previous"): every vector loaded from SQLite into one float32 matrix on the
  first query, scanned exactly (PreviousExactStore keeps that code);
- SQLite FTS5 (the lexical engine before tantivy, same tokenizer job, filters as MATCH tokens plus SQL
  WHERE, bm25() ORDER BY LIMIT).
Cold start: a fresh process opens the index and runs one hybrid query (`bench latency-cold`), for both.
Recall@10 of the vector search against exact search: on these random vectors through the store, and on
real embeddings (real_recall: SciFact's chunk vectors and test queries, among synthetic vectors drawn from
the same distribution up to the size).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, Timer, peak_rss_mb, percentiles, read_into_page_cache, write_results
from ragstead import KnowledgeBase, SearchOptions, Settings
from ragstead.filters import QueryFilters
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite
from ragstead.stores.sqlite import SqliteStore
from ragstead.stores.transaction import transaction
from ragstead.stores.vector_index import VectorIndex, best_positions

DIM, USERS, CHUNKS_PER_DOC, WORDS = 384, 50, 10, 60
MODEL = "synthetic-random-unit-384"


class QueryVectors:
    """Hands out precomputed random query vectors (embedding is excluded from these timings)."""

    name, dim = MODEL, DIM

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def embed_query(self, text: str) -> np.ndarray:
        v = self.rng.standard_normal(DIM).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_documents(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - not used
        raise NotImplementedError


def build(path: Path, n_chunks: int, seed: int = 11) -> float:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(30000)])
    store = SqliteStore(path)
    store.ensure_model(MODEL, DIM)
    with Timer() as t:
        doc_no = 0
        batch: list[DocumentWrite] = []
        # Rows are written grouped by user, as a person's files usually are.
        per_user = n_chunks // USERS
        for user in range(USERS):
            for _ in range(per_user // CHUNKS_PER_DOC):
                doc_id = f"{doc_no:064x}"
                words = vocab[np.minimum(rng.zipf(1.2, (CHUNKS_PER_DOC, WORDS)) - 1, 29999)]
                vectors = rng.standard_normal((CHUNKS_PER_DOC, DIM)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                chunks = [
                    ChunkRecord(f"{doc_no:056x}{i:08x}", i, " ".join(words[i]), f"{doc_no:056x}{i:08x}",
                                0, WORDS, 0, 0, None, None, 80)
                    for i in range(CHUNKS_PER_DOC)
                ]
                doc = DocumentRecord(doc_id, f"kb/users/u{user}/d{doc_no}.md", "kb", doc_id, 0, 0.0, "user_kb",
                                     True, f"u{user}", None, "2025-01-01T00:00:00+00:00", None)
                batch.append(DocumentWrite(doc, chunks, vectors))
                doc_no += 1
                if len(batch) == 500:
                    store.apply(batch, [], [])
                    batch = []
        store.apply(batch, [], [])
    store.close()
    return t.seconds


class PreviousExactStore(SqliteStore):
    """The vector search before the vector files (the baseline): all vectors loaded from SQLite into one
    float32 matrix on the first query after any write, scanned exactly over the scope's positions."""

    def _matrix_now(self) -> tuple[np.ndarray, np.ndarray]:
        version = self._version()
        if getattr(self, "_matrix", None) is None or self._matrix[0] != version:
            self._matrix = None
            with transaction(self._db, immediate=False):
                n = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
                dim = int(self._meta("embed_dim") or 0)
                ids, matrix = np.empty(n, dtype=np.int64), np.empty((n, dim), dtype=np.float32)
                filled = 0
                cursor = self._db.execute("SELECT id, embedding FROM chunks ORDER BY id")
                while filled < n and (rows := cursor.fetchmany(4096)):
                    rows = rows[: n - filled]
                    ids[filled : filled + len(rows)] = [r[0] for r in rows]
                    matrix[filled : filled + len(rows)] = np.frombuffer(b"".join(r[1] for r in rows),
                                                                        np.float32).reshape(len(rows), dim)
                    filled += len(rows)
            self._matrix = (version, ids[:filled], matrix[:filled])
        return self._matrix[1], self._matrix[2]

    def vector_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        ids, matrix = self._matrix_now()
        where, params = filters.to_sql("c")
        key = (filters, self._version())
        if getattr(self, "_scope", (None,))[0] != key:
            eligible = np.fromiter((r[0] for r in self._db.execute(f"SELECT c.id FROM chunks c WHERE {where}",
                                                                   params)), dtype=np.int64)
            self._scope = (key, np.searchsorted(ids, eligible))
        positions = self._scope[1]
        if positions.size == 0:
            return []
        q = query.astype(np.float32)
        scores = (matrix @ q)[positions] if positions.size * 3 > ids.size else matrix[positions] @ q
        return [(int(ids[positions[i]]), float(scores[i])) for i in best_positions(scores, k)]


def query_sets(queries: int = 100) -> tuple[list[str], list[str]]:
    """The two lexical query sets (see the module docstring), the same in every run."""
    rng = np.random.default_rng(5)
    head = [" ".join(f"w{int(x)}" for x in rng.zipf(1.3, 4) if x < 30000) or "w1" for _ in range(queries)]
    content = [" ".join(f"w{int(x)}" for x in rng.integers(50, 5000, 4)) for _ in range(queries)]
    return head, content


def measure_store(store: Any, queries: int = 100) -> dict[str, Any]:
    """p50/p95 of search() per scope and mode over one store (any backend)."""
    kb = KnowledgeBase(Settings(), store=store, embedder=QueryVectors(np.random.default_rng(6)))
    head_queries, content_queries = query_sets(queries)
    out: dict[str, Any] = {"chunks": store.stats()["chunks"]}
    with Timer() as first:  # loads the vector matrix and the default scope's eligible rows
        kb.search("w1 w2", filters=QueryFilters(), options=SearchOptions(mode="hybrid", k=10))
    out["first_query_ms"] = round(first.seconds * 1000, 1)  # in this process, after the store was opened
    scopes = {
        "no user filter": lambda i: QueryFilters(),
        "user filter (2 %), same user": lambda i: QueryFilters(user_slug="u7"),
        "user filter (2 %), a new user each query": lambda i: QueryFilters(user_slug=f"u{i % USERS}"),
    }
    runs = [(scope, mode, "head terms", head_queries) for scope in scopes for mode in ("lexical", "vector", "hybrid")]
    runs += [(scope, mode, "content words", content_queries) for scope in scopes for mode in ("lexical", "hybrid")]
    # The same-run baseline of query feedback (on by default): hybrid with its second vector search off.
    runs += [(scope, "hybrid", "head terms, no feedback", head_queries) for scope in scopes]
    for scope, mode, label, query_set in runs:
        make = scopes[scope]
        options = SearchOptions(mode=mode, k=10)
        if label.endswith("no feedback"):
            options = replace(options, feedback_k=0)
        times = []
        for i, text in enumerate(query_set):
            started = time.perf_counter()
            result = kb.search(text, filters=make(i), options=options)
            times.append((time.perf_counter() - started) * 1000)
            assert len(result.hits) <= 10
        name = mode if mode == "vector" else f"{mode}, {label}"
        out[f"{scope} | {name}"] = percentiles(times)
    return out


def store_recall(store: Any, exact: SqliteStore, n: int = 100, by_chunk_id: bool = False) -> dict[str, float]:
    """Mean overlap of the store's vector top 10 with exact search's, per scope (random query vectors). Hits
    are compared by row id, or `by_chunk_id` for a store that numbers its rows anew (a migrated copy)."""
    rng = np.random.default_rng(8)

    def top(s: Any, q: np.ndarray, filters: QueryFilters) -> set[Any]:
        ids = [i for i, _ in s.vector_search(q, filters, 10)]
        return {row["chunk_id"] for row in s.fetch_chunks(ids, filters).values()} if by_chunk_id else set(ids)

    out = {}
    for scope, filters in (("no user filter", QueryFilters()), ("user filter (2 %)", QueryFilters(user_slug="u7"))):
        overlaps = []
        for _ in range(n):
            q = rng.standard_normal(DIM).astype(np.float32)
            q /= np.linalg.norm(q)
            overlaps.append(len(top(store, q, filters) & top(exact, q, filters)) / 10)
        out[scope] = round(float(np.mean(overlaps)), 4)
    return out


def warm_os_cache(path: Path) -> float:
    """Read the index's files once, so every measurement starts from the same place: the OS page cache
    holding them, as it does for the second and later queries of any user (this machine's cache cannot be
    dropped without root, so a truly cold start is not measured). Returns the seconds it took."""
    started = time.perf_counter()
    read_into_page_cache([path, *(f for side in (".tantivy", ".vectors") for f in path.with_suffix(side).iterdir())])
    return round(time.perf_counter() - started, 1)


def measure(path: Path, queries: int = 100) -> dict[str, Any]:
    SqliteStore(path).close()  # builds the vector files of an index made before them (timed: not here)
    out: dict[str, Any] = {"read files into the OS cache, s": warm_os_cache(path)}
    out["cold start"] = cold_start(path, previous=False)
    store = SqliteStore(path)
    out.update(measure_store(store, queries))
    out["peak_rss_mb"] = peak_rss_mb()
    warm_os_cache(path)
    out["cold start previous"] = cold_start(path, previous=True)
    previous = PreviousExactStore(path)
    for key, value in measure_store(previous, queries).items():
        if " | " in key:
            scope, mode = key.split(" | ")
            out[f"{scope} | previous: {mode}"] = value
    out["recall@10 vs exact"] = store_recall(store, previous)
    previous.close()
    store.close()
    if out["chunks"] <= 1_000_000:  # beyond, FTS5's head-term queries take seconds each: not run
        head_queries, content_queries = query_sets(queries)
        out.update(fts5_baseline(path, {"head terms": head_queries, "content words": content_queries}))
    return out


def cold_start(path: Path, previous: bool, runs: int = 3) -> dict[str, float]:
    """A fresh process: open the index, run one hybrid query; the time inside the process (open + query)
    and the whole process as the shell sees it (interpreter start and imports included). Median of `runs`
    processes (one for the previous path: its load is seconds long and steady)."""
    results = []
    for _ in range(1 if previous else runs):
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "bench", "latency-cold", "--index", str(path),
                               *(["--previous"] if previous else [])], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - started
        inside = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append({"open_and_query_ms": inside["open_and_query_ms"], "process_ms": round(wall * 1000, 1),
                        "peak_rss_mb": inside["peak_rss_mb"]})
    return {key: float(np.median([r[key] for r in results])) for key in results[0]}


def cold_query(path: Path, previous: bool) -> dict[str, float]:
    """Run in the fresh process of `cold_start`."""
    with Timer() as t:
        store = (PreviousExactStore if previous else SqliteStore)(path)
        kb = KnowledgeBase(Settings(), store=store, embedder=QueryVectors(np.random.default_rng(3)))
        kb.search("w12 w40", filters=QueryFilters(), options=SearchOptions(mode="hybrid", k=10))
    return {"open_and_query_ms": round(t.seconds * 1000, 1), "peak_rss_mb": peak_rss_mb()}


def real_recall(size: int, queries: int = 300) -> dict[str, Any]:
    """Recall@10 of the int8 scan + exact re-score against exact search on real embeddings: SciFact's chunk
    vectors (the `bench quality` index) and its test queries, among synthetic vectors drawn from the same
    distribution (a normalised blend of two real chunk vectors plus noise) up to `size` rows."""
    from bench.common import DEFAULT_SCIFACT
    from ragstead.embeddings import MiniLMOnnxEmbedder

    db = sqlite3.connect(RESULTS / ".cache" / "scifact.db")
    real = np.frombuffer(b"".join(r[0] for r in db.execute("SELECT embedding FROM chunks ORDER BY id")),
                         np.float32).reshape(-1, DIM)
    db.close()
    rng = np.random.default_rng(21)
    test_ids = {line.split("\t")[0] for line in (DEFAULT_SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    texts = [json.loads(line)["text"] for line in (DEFAULT_SCIFACT / "queries.jsonl").read_text().splitlines()
             if json.loads(line)["_id"] in test_ids][:queries]
    embedder = MiniLMOnnxEmbedder()
    qs = np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)

    def batches() -> Any:
        yield np.arange(real.shape[0]), real
        for start in range(real.shape[0], size, 100_000):
            n = min(100_000, size - start)
            a, b = real[rng.integers(0, len(real), n)], real[rng.integers(0, len(real), n)]
            v = a + 0.7 * b + 0.02 * rng.standard_normal((n, DIM)).astype(np.float32)
            yield np.arange(start, start + n), (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    folder = Path(tempfile.mkdtemp(prefix="ragstead-recall-"))
    index = VectorIndex(folder / "v")
    index.replace_all(1, DIM, batches())
    everything = np.arange(index.rows)
    mask = np.ones(index.rows, dtype=bool)
    floats = index._float_rows(everything)
    overlaps, times = [], []
    for q in qs:
        exact = set(best_positions(floats @ q, 10).tolist())
        started = time.perf_counter()
        found = {i for i, _ in index.search(q, everything, mask, 10, exact_rows=0)}
        times.append((time.perf_counter() - started) * 1000)
        overlaps.append(len(found & exact) / 10)
    index.close()
    import shutil

    shutil.rmtree(folder)
    return {"rows": int(size), "queries": len(qs), "recall@10": round(float(np.mean(overlaps)), 4),
            "min recall@10": float(np.min(overlaps)), "search": percentiles(times)}


def fts5_baseline(path: Path, query_sets: dict[str, list[str]]) -> dict[str, Any]:
    """The previous lexical engine on the same data: FTS5 bm25 with scope tokens in MATCH + SQL WHERE."""
    fts_path = path.with_suffix(".fts5.db")
    db = sqlite3.connect(str(fts_path), isolation_level=None)
    db.execute("ATTACH DATABASE ? AS m", (str(path),))
    out: dict[str, Any] = {}
    if not db.execute("SELECT name FROM sqlite_master WHERE name = 'fts'").fetchone():
        with Timer() as t:
            db.execute("CREATE VIRTUAL TABLE fts USING fts5(text, scope, "
                       "tokenize = 'porter unicode61 remove_diacritics 2')")
            db.execute("BEGIN")
            db.execute("INSERT INTO fts (rowid, text, scope) SELECT id, text, 'private' || is_private || ' user' || "
                       "user_slug || ' type' || doc_type FROM m.chunks")
            db.execute("COMMIT")
        out["fts5 build_seconds"] = round(t.seconds, 1)
    scopes = {"no user filter": ("", "c.is_private = 1"), "user filter (2 %), same user":
              (' AND scope:"useru7"', "c.is_private = 1 AND c.user_slug = 'u7'")}
    for scope, (match_scope, where) in scopes.items():
        for label, queries in query_sets.items():
            times = []
            for text in queries:
                match = "(" + " OR ".join(f'"{w}"' for w in text.split()) + ')'
                match += f' AND scope:"private1"{match_scope} NOT scope:"typearchive"'
                started = time.perf_counter()
                db.execute("SELECT c.id, bm25(fts, 1.0, 0.0) AS s FROM fts JOIN m.chunks c ON c.id = fts.rowid "
                           f"WHERE fts MATCH ? AND {where} ORDER BY s LIMIT 10", (match,)).fetchall()
                times.append((time.perf_counter() - started) * 1000)
            out[f"{scope} | baseline FTS5 lexical, {label}"] = percentiles(times)
    db.close()
    return out


def query_embedding_ms(n: int = 50) -> dict[str, float]:
    from ragstead.embeddings import MiniLMOnnxEmbedder

    embedder = MiniLMOnnxEmbedder()
    embedder.embed_query("warm up")
    times = []
    for i in range(n):
        started = time.perf_counter()
        embedder.embed_query(f"does vitamin d supplementation reduce fracture risk in adults {i}")
        times.append((time.perf_counter() - started) * 1000)
    return percentiles(times)


def one_size(n_chunks: int, workdir: Path) -> dict[str, Any]:
    path = workdir / f"synthetic-{n_chunks}.db"
    build_s = build(path, n_chunks) if not path.exists() else None
    vectors = path.with_suffix(".vectors")
    result = measure(path)
    result["build_seconds"] = round(build_s, 1) if build_s else None
    result["db_mb"] = round(path.stat().st_size / 1e6, 1)
    result["vector_files_mb"] = round(sum(f.stat().st_size for f in vectors.iterdir()) / 1e6, 1)
    return result


def main(sizes: list[int], workdir: Path | None) -> None:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ragstead-latency-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"data": __doc__.split("\n\n")[1].replace("\n", " "), "sizes": {}}
    results["machine_memory_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    for n in sizes:
        proc = subprocess.run([sys.executable, "-m", "bench", "latency-one", "--size", str(n),
                               "--workdir", str(workdir)], capture_output=True, text=True, check=True)
        results["sizes"][str(n)] = json.loads(proc.stdout.strip().splitlines()[-1])
    results["query_embedding_ms"] = query_embedding_ms()
    results["real_recall"] = real_recall(min(max(sizes), 1_000_000))
    write_results("query_latency", results, table(results))


def table(results: dict[str, Any]) -> list[list[str]]:
    """Previous and current figures side by side, per size, scope and mode."""
    rows = [["chunks", "scope", "mode", "previous p50 / p95 ms", "now p50 / p95 ms", "p95 speed-up"]]
    for n, data in results["sizes"].items():
        size = f"{int(n):,}"
        for key, now in data.items():
            if " | " not in key or " | previous: " in key:
                continue
            scope, mode = key.split(" | ")
            before = data.get(f"{scope} | previous: {mode}")
            if mode.startswith("baseline FTS5"):
                rows.append([size, scope, mode, f"{now['p50']:.2f} / {now['p95']:.2f}", "", ""])
                continue
            rows.append([size, scope, mode, f"{before['p50']:.2f} / {before['p95']:.2f}" if before else "",
                         f"{now['p50']:.2f} / {now['p95']:.2f}",
                         f"{before['p95'] / now['p95']:.1f}x" if before and now["p95"] else ""])
        cold, old = data["cold start"], data["cold start previous"]
        rows.append([size, "fresh process: open + first hybrid query", "", f"{old['open_and_query_ms']:.0f}",
                     f"{cold['open_and_query_ms']:.0f}", ""])
        rows.append([size, "fresh process: the whole command (interpreter and imports too)", "",
                     f"{old['process_ms']:.0f}", f"{cold['process_ms']:.0f}", ""])
        rows.append([size, "peak RSS, MB (previous: its own fresh process)", "", f"{old['peak_rss_mb']:.0f}",
                     f"{data['peak_rss_mb']:.0f}", ""])
        recall = data["recall@10 vs exact"]
        rows.append([size, "recall@10 vs exact (random vectors)", "vector", "1 (exact)",
                     " / ".join(f"{k}: {v:.4f}" for k, v in recall.items()), ""])
        rows.append([size, f"files: SQLite {data['db_mb']:.0f} MB, vector files {data['vector_files_mb']:.0f} MB",
                     "", "", "", ""])
    real = results["real_recall"]
    rows.append([f"{real['rows']:,}", f"recall@10 vs exact, real embeddings ({real['queries']} SciFact test queries)",
                 "vector", "1 (exact)", f"{real['recall@10']:.4f} (min {real['min recall@10']:.1f})", ""])
    e = results["query_embedding_ms"]
    rows.append(["-", "query embedding (real model, excluded above)", "-", "", f"{e['p50']:.2f} / {e['p95']:.2f}", ""])
    return rows


def feedback_cost(sizes: list[int], workdir: Path) -> None:
    """Hybrid with query feedback (the default) against without, in the same run, on the synthetic indexes
    `bench latency` left in `workdir` (random vectors: this measures the cost, not the quality)."""
    results: dict[str, Any] = {}
    rows = [["chunks", "scope", "hybrid, head terms: p50 / p95 ms", "without feedback: p50 / p95 ms"]]
    for n in sizes:
        path = workdir / f"synthetic-{n}.db"
        warm_os_cache(path)
        store = SqliteStore(path)
        results[str(n)] = out = measure_store(store)
        store.close()
        for scope in ("no user filter", "user filter (2 %), same user", "user filter (2 %), a new user each query"):
            on, off = out[f"{scope} | hybrid, head terms"], out[f"{scope} | hybrid, head terms, no feedback"]
            rows.append([f"{n:,}", scope, f"{on['p50']:.1f} / {on['p95']:.1f}", f"{off['p50']:.1f} / {off['p95']:.1f}"])
    write_results("query_latency_feedback", results, rows)


def vector_interleaved(size: int, workdir: Path, queries: int = 50, blocks: int = 6) -> dict[str, Any]:
    """The unfiltered vector rows of `latency-one` alone, for a machine that is not quiet: the store and the
    previous exact path in one process, in alternating blocks of `queries` head-term queries (the order flips
    each block), so a burst of load lands on both; p50/p95 per block, their medians and spread, the p95 ratio
    per block, whether both return the same top 10 (recall@10 of the store against exact search, block 0),
    and the load average before and after. CPU ms a query counts every thread of the process."""
    path = workdir / f"synthetic-{size}.db"
    if not path.exists():
        build(path, size)
    warm_os_cache(path)
    load_before = os.getloadavg()
    paths = {}
    for name, kind in (("now", SqliteStore), ("previous", PreviousExactStore)):
        kb = KnowledgeBase(Settings(), store=kind(path), embedder=QueryVectors(np.random.default_rng(6)))
        kb.search("w1 w2", filters=QueryFilters(), options=SearchOptions(mode="hybrid", k=10))  # loads, scopes
        paths[name] = kb
    texts = query_sets(queries)[0]
    options = SearchOptions(mode="vector", k=10)
    wall: dict[str, list[dict[str, float]]] = {name: [] for name in paths}
    cpu: dict[str, list[float]] = {name: [] for name in paths}
    top: dict[str, list[list[str]]] = {name: [] for name in paths}
    for block in range(blocks):
        for name in (list(paths) if block % 2 == 0 else list(reversed(paths))):
            times = []
            for text in texts:
                started, started_cpu = time.perf_counter(), time.process_time()
                result = paths[name].search(text, filters=QueryFilters(), options=options)
                times.append((time.perf_counter() - started) * 1000)
                cpu[name].append((time.process_time() - started_cpu) * 1000)
                if block == 0:
                    top[name].append([hit.chunk_id for hit in result.hits])
            wall[name].append(percentiles(times))
    out: dict[str, Any] = {"chunks": size, "queries a block": queries, "blocks": blocks}
    for name, runs in wall.items():
        p50s, p95s = [r["p50"] for r in runs], [r["p95"] for r in runs]
        out[name] = {"p50": round(float(np.median(p50s)), 2), "p95": round(float(np.median(p95s)), 2),
                     "p95 min": min(p95s), "p95 max": max(p95s),
                     "cpu ms a query": round(float(np.median(cpu[name])), 2)}
    ratios = [old["p95"] / new["p95"] for old, new in zip(wall["previous"], wall["now"], strict=True)]
    out["p95 ratio per block"] = [round(r, 2) for r in ratios]
    out["p95 ratio"] = round(float(np.median(ratios)), 2)
    out["recall@10 vs exact"] = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top["now"], top["previous"],
                                                                                         strict=True)]))
    out["load average before / after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    for kb in paths.values():
        kb.store.close()
    return out
