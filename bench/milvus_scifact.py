"""SciFact test split (whole corpus) on the embedded store and on Milvus Lite, and Milvus's own hybrid rankers.

`python -m bench milvus-scifact [--workdir DIR]`: `ragstead eval` indexes the corpus into an embedded store (kept
in DIR, reused), `ragstead migrate`'s code copies it into two Milvus Lite stores (nothing re-embedded), and the
same eval runs on each: `exact_rows=0` (every vector query is Milvus's search) with lexical in tantivy, and with
`lexical=milvus` too (BM25 by Milvus's own function). On the second, Milvus's `hybrid_search` with its
RRFRanker and WeightedRanker fuses the same two sides (same depth, same scope filter), scored with the eval's
metrics, beside ragstead's fusion. Milvus Lite is not the production engine: these numbers say what the Milvus
code path does to quality, not what a Milvus cluster costs.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, beir_eval, write_results
from ragstead.embeddings.catalog import embedder_for
from ragstead.evaluation.cases import load_beir
from ragstead.evaluation.metrics import summarize
from ragstead.evaluation.runner import BEIR_ROOT
from ragstead.filters import QueryFilters
from ragstead.retrieval.lexical_query import query_terms
from ragstead.stores.factory import StoreSpec
from ragstead.stores.milvus import milvus_filter

SPLIT = "test"
KS = (1, 5, 10, 100)
DEPTH = 300  # what `ragstead eval` fetches per side at k 100 (runner.run_eval): the same candidates for Milvus
STORES = {
    "Milvus Lite, lexical in tantivy": "milvus/m.db?exact_rows=0",
    "Milvus Lite, lexical=milvus": "milvus-bm25/m.db?exact_rows=0&lexical=milvus",
}


def _eval(dataset: Path, spec: str, report: Path) -> dict[str, Any]:
    """The eval's JSON report, from an earlier run when it is there."""
    return json.loads(report.read_text()) if report.exists() else beir_eval(dataset, SPLIT, spec, report, show=False)


def _copy_into_milvus(index_db: Path, work: Path, spec: str) -> str:
    """The embedded index copied into a fresh Milvus Lite store by `ragstead migrate` (in its own process:
    Milvus Lite keeps its folder locked until the process that opened it ends); returns its store setting."""
    shutil.rmtree(work / spec.partition("/")[0], ignore_errors=True)
    full = f"milvus:{work / spec}"
    subprocess.run([sys.executable, "-m", "ragstead", "migrate", "--from", f"sqlite:{index_db}", "--to", full,
                    "--quiet", "--root", str(work)], check=True)
    return full


def milvus_rankers(dataset: Path, spec: str, work: Path) -> dict[str, Any]:
    """Milvus's hybrid_search (dense + BM25 requests, DEPTH each, the eval's scope as the filter) under its
    RRFRanker(60) and WeightedRanker(0.5, 0.5), ranked by document as the eval ranks (best chunk first)."""
    from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

    store = StoreSpec.parse(spec, root=work, default_db=work / "scifact.db").open()
    embedder = embedder_for("", store)
    filters = QueryFilters.build()  # the eval's scope
    expression = milvus_filter(filters)
    vectors = store.vectors
    vectors._in_step()  # a bench reaches in: the store has no public hybrid_search
    vectors._sealed()
    cases = load_beir(dataset, SPLIT).cases
    rankers = {"Milvus RRFRanker(60)": lambda: RRFRanker(60),
               "Milvus WeightedRanker(0.5, 0.5)": lambda: WeightedRanker(0.5, 0.5)}
    runs: dict[str, dict[str, list[str]]] = {label: {} for label in rankers}
    latencies: dict[str, list[float]] = {label: [] for label in rankers}
    paths: dict[int, str] = {}
    for case in cases:
        query = embedder.embed_query(case.query).tolist()
        terms = query_terms(case.query)
        requests = [AnnSearchRequest(data=[query], anns_field="dense", param={"metric_type": "IP"}, limit=DEPTH,
                                     expr=expression)]
        if terms:
            requests.append(AnnSearchRequest(data=[" ".join(terms)], anns_field="sparse",
                                             param={"metric_type": "BM25"}, limit=DEPTH, expr=expression))
        for label, ranker in rankers.items():
            started = time.perf_counter()
            hits = vectors._client.hybrid_search(vectors._name, requests, ranker=ranker(), limit=DEPTH,
                                                 output_fields=[])[0]
            latencies[label].append((time.perf_counter() - started) * 1000)
            ids = [int(hit["id"]) for hit in hits]
            missing = [i for i in ids if i not in paths]
            paths |= {i: row["file_path"] for i, row in store.fetch_chunks(missing, filters).items()}
            runs[label][case.qid] = list(dict.fromkeys(paths[i].removeprefix(BEIR_ROOT + "/") for i in ids
                                                       if i in paths))
    store.close()
    qrels = {case.qid: case.relevant for case in cases}
    return {label: {"metrics": summarize(runs[label], qrels, KS),
                    "latency_ms": {"p50": round(statistics.median(latencies[label]), 1)}} for label in rankers}


def _pair(metrics: dict[str, float]) -> str:
    return f"{metrics['ndcg@10']:.4f} / {metrics['recall@100']:.4f}"


def main(dataset: Path, workdir: Path | None = None) -> None:
    work = workdir or RESULTS / ".cache" / "milvus-scifact"
    work.mkdir(parents=True, exist_ok=True)
    (RESULTS / ".cache").mkdir(parents=True, exist_ok=True)  # beir_eval's project root
    index_db = work / "scifact.db"
    reports = {"embedded": _eval(dataset, str(index_db), work / "embedded_test.json")}
    specs: dict[str, str] = {}
    for label, spec in STORES.items():
        report = work / f"{spec.partition('/')[0]}_test.json"
        specs[label] = f"milvus:{work / spec}" if report.exists() else _copy_into_milvus(index_db, work, spec)
        reports[label] = _eval(dataset, specs[label], report)
    rankers = milvus_rankers(dataset, specs["Milvus Lite, lexical=milvus"], work)
    names = list(reports)
    rows = [["mode", *[f"{n} nDCG@10 / Recall@100" for n in names]]]
    for mode in reports["embedded"]["modes"]:
        rows.append([mode, *[_pair(reports[n]["modes"][mode]) for n in names]])
    for label, result in rankers.items():
        rows.append([f"hybrid, {label}", "", "", _pair(result["metrics"])])
    summary = {name: {"modes": r["modes"], "latency_ms": r["latency_ms"],
                      "chunks_embedded": r["run"].get("chunks_embedded"), "corpus_docs": r["run"].get("corpus_docs"),
                      "n_queries": r.get("n_queries")} for name, r in reports.items()}
    write_results("milvus_lite_scifact", {"dataset": str(dataset), "split": SPLIT, "stores": summary,
                                          "milvus_rankers": rankers, "depth_per_side": DEPTH}, rows)
