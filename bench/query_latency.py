"""Query latency per mode at scale, with and without a 2 %-selective user filter, plus peak RSS.

Synthetic data (said plainly): chunk text is 60 words drawn from a Zipf-distributed 30k-word vocabulary,
vectors are random unit vectors (384-d), 10 chunks per document, 50 users (2 % of rows each). Query
vectors are random too, so query embedding is excluded here and measured separately with the real model.
Two lexical query sets: "head terms" samples query words from the same Zipf law, so most queries carry
words found in 45 %+ of chunks (the worst case for FTS5, which scores every match); "content words"
samples 4 words from frequency ranks 50-5000, like real queries once stop words are gone.
Each size runs in its own subprocess so its peak RSS is its own.

Baseline in the same run: SQLite FTS5 (ragstead's lexical engine before tantivy, same tokenizer job,
filters as MATCH tokens plus SQL WHERE, bm25() ORDER BY LIMIT) over the same chunks and queries,
built after the ragstead numbers and peak RSS are taken.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Timer, peak_rss_mb, percentiles, write_results
from ragstead import KnowledgeBase, SearchOptions, Settings
from ragstead.filters import QueryFilters
from ragstead.stores import SqliteStore
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite

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
    out["first_query_ms"] = round(first.seconds * 1000, 1)
    scopes = {
        "no user filter": lambda i: QueryFilters(),
        "user filter (2 %), same user": lambda i: QueryFilters(user_slug="u7"),
        "user filter (2 %), a new user each query": lambda i: QueryFilters(user_slug=f"u{i % USERS}"),
    }
    runs = [(scope, mode, "head terms", head_queries) for scope in scopes for mode in ("lexical", "vector", "hybrid")]
    runs += [(scope, mode, "content words", content_queries) for scope in scopes for mode in ("lexical", "hybrid")]
    for scope, mode, label, query_set in runs:
        make = scopes[scope]
        times = []
        for i, text in enumerate(query_set):
            started = time.perf_counter()
            result = kb.search(text, filters=make(i), options=SearchOptions(mode=mode, k=10))
            times.append((time.perf_counter() - started) * 1000)
            assert len(result.hits) <= 10
        name = mode if mode == "vector" else f"{mode}, {label}"
        out[f"{scope} | {name}"] = percentiles(times)
    return out


def measure(path: Path, queries: int = 100) -> dict[str, Any]:
    store = SqliteStore(path)
    out = measure_store(store, queries)
    out["peak_rss_mb"] = peak_rss_mb()
    store.close()
    head_queries, content_queries = query_sets(queries)
    out.update(fts5_baseline(path, {"head terms": head_queries, "content words": content_queries}))
    return out


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
    result = measure(path)
    result["build_seconds"] = round(build_s, 1) if build_s else None
    result["db_mb"] = round(path.stat().st_size / 1e6, 1)
    return result


def main(sizes: list[int], workdir: Path | None) -> None:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ragstead-latency-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"data": __doc__.split("\n\n")[1].replace("\n", " "), "sizes": {}}
    for n in sizes:
        proc = subprocess.run([sys.executable, "-m", "bench", "latency-one", "--size", str(n),
                               "--workdir", str(workdir)], capture_output=True, text=True, check=True)
        results["sizes"][str(n)] = json.loads(proc.stdout.strip().splitlines()[-1])
    results["query_embedding_ms"] = query_embedding_ms()
    rows = [["chunks", "scope", "mode", "p50 ms", "p95 ms"]]
    for n, data in results["sizes"].items():
        for key, value in data.items():
            if " | " in key:
                scope, mode = key.split(" | ")
                rows.append([f"{int(n):,}", scope, mode, f"{value['p50']:.2f}", f"{value['p95']:.2f}"])
        rows.append([f"{int(n):,}", "first query (loads vectors)", "hybrid", f"{data['first_query_ms']:.0f}", ""])
        rows.append([f"{int(n):,}", f"peak RSS {data['peak_rss_mb']:.0f} MB, index file {data['db_mb']:.0f} MB",
                     "", "", ""])
    e = results["query_embedding_ms"]
    rows.append(["-", "query embedding (real model, excluded above)", "-", f"{e['p50']:.2f}", f"{e['p95']:.2f}"])
    write_results("query_latency", results, rows)
