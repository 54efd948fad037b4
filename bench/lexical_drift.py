"""How far incremental updates move keyword results from a clean build, and what a rebuild costs (SciFact).

Updates a share of the documents in a copy of the SciFact index (each rewrite deletes its chunks from
tantivy and adds them again), then compares the lexical top 10 of every test query with the same index
rebuilt whole. Deleted chunks still count in tantivy's BM25 statistics until their segments merge.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import RESULTS, write_results
from ragstead.evaluation.cases import load_beir
from ragstead.filters import QueryFilters
from ragstead.retrieval.lexical_query import query_terms
from ragstead.stores.sqlite import SqliteStore

SHARES = (0.005, 0.01, 0.02, 0.05, 0.10)


def main(dataset: Path) -> None:
    queries = [case.query for case in load_beir(dataset, "test").cases]
    with tempfile.TemporaryDirectory(prefix="ragstead-drift-") as scratch:
        db = Path(scratch) / "drift.db"
        shutil.copy(RESULTS / ".cache" / f"{dataset.name}.db", db)
        store = SqliteStore(db)

        def top10() -> list[list[int]]:
            return [[r for r, _ in store.lexical_search(query_terms(q), QueryFilters(), 10)] for q in queries]

        def rebuild() -> float:
            store._lexical.acquire()
            started = time.perf_counter()
            try:
                store._rebuild_lexical()
            finally:
                store._lexical.release()
            return time.perf_counter() - started

        seconds = rebuild()
        chunks = store.stats()["chunks"]
        docs = list(store.export_documents())
        rng, done = random.Random(3), 0
        rows = [["documents updated", "top-10 lists differing from a clean build", "rebuild s"]]
        runs = {}
        for share in SHARES:
            for i in rng.sample(range(len(docs)), int(len(docs) * share) - done):
                store.apply([docs[i]], [], [])
            done = int(len(docs) * share)
            drifted = top10()
            took = rebuild()
            differ = sum(a != b for a, b in zip(drifted, top10(), strict=True))
            runs[f"{share:.1%}"] = {"differ": differ, "queries": len(queries), "rebuild_s": round(took, 2)}
            rows.append([f"{share:.1%}", f"{differ} / {len(queries)}", f"{took:.2f}"])
        store.close()
    write_results(f"lexical_drift_{dataset.name}", {"chunks": chunks, "first_rebuild_s": round(seconds, 2),
                                                     "runs": runs}, rows)
