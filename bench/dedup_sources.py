"""`python -m bench dedup`: should `ask` hand its answerer the best chunk of each document only?

The eight chunks `ask` retrieves (k=8, hybrid) for every SciFact train query, from the cached SciFact
index of `bench quality` (400/80-word chunks), with and without `dedup_sources`: how many distinct
documents the eight slots hold, and how many of the query's relevant documents they reach (hit rate and
recall at 8 slots). SciFact abstracts are mostly one chunk long, so the same run is repeated on an index
cut into 100/20-word chunks, where most abstracts span several, as long notes and pages do.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from bench.common import DEFAULT_SCIFACT, RESULTS, write_results

CACHE = RESULTS / ".cache"


def _measure(kb, cases, dedup: bool) -> dict[str, float]:  # type: ignore[no-untyped-def]
    distinct, hit, recall = [], [], []
    for case in cases:
        hits = kb.search(case.query, k=8, dedup_sources=dedup).hits
        docs = {h.file_path.removeprefix("kb/beir/") for h in hits}
        relevant = set(case.relevant)
        distinct.append(len(docs))
        hit.append(1.0 if docs & relevant else 0.0)
        recall.append(len(docs & relevant) / len(relevant))
    return {"distinct_docs": round(statistics.mean(distinct), 2), "hit_rate": round(statistics.mean(hit), 4),
            "recall": round(statistics.mean(recall), 4)}


def main(dataset: Path = DEFAULT_SCIFACT) -> None:
    import ragstead
    from ragstead.evaluation.cases import load_beir
    from ragstead.indexing.build import TextRecord

    data = load_beir(dataset, "train")
    cases = data.cases
    results, rows = {}, [["index", "dedup_sources", "distinct docs in 8", "hit rate@8", "recall@8"]]
    small = CACHE / "scifact-100-20.db"
    for label, db, size in (("400/80 words (default)", CACHE / "scifact.db", (400, 80)),
                            ("100/20 words", small, (100, 20))):
        with ragstead.open(CACHE, db_path=str(db), lock_path=f"{db}.lock", chunk_size=size[0], overlap=size[1]) as kb:
            if not db.exists():  # cut once, then reused
                kb.index_records([TextRecord(i, text, title or None) for i, (title, text) in data.corpus.items()],
                                 root="kb/beir")
            for dedup in (False, True):
                measured = _measure(kb, cases, dedup)
                results[f"{label} dedup={dedup}"] = measured
                rows.append([label, "on" if dedup else "off", f"{measured['distinct_docs']:.2f}",
                             f"{measured['hit_rate']:.4f}", f"{measured['recall']:.4f}"])
    write_results("dedup_sources", {"split": "train", "queries": len(cases), "k": 8, "results": results}, rows)
