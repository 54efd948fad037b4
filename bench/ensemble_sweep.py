"""Two embedders at once: does MiniLM + E5 beat either alone, fused with BM25, on a BEIR dataset?

The vector score of a chunk is `alpha` * cos(MiniLM) + (1 - alpha) * cos(E5) (one store could hold it as a
single 768-d vector, [sqrt(alpha) * minilm, sqrt(1 - alpha) * e5], so it needs no new search path); the top
300 by that score are fused with the lexical top 300 by convex fusion (weight `w`), as `search()` does.
Vectors come from the two cached indexes (`bench quality` builds the MiniLM one, `bench models --models
e5-small-q4` the E5 one, same chunking), so nothing is re-embedded but the queries. Chosen on train; test
is reported beside it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, write_results
from bench.fusion_sweep import chunk_docs, documents
from ragstead.embeddings import make_embedder
from ragstead.evaluation.cases import load_beir
from ragstead.evaluation.metrics import summarize
from ragstead.filters import QueryFilters
from ragstead.retrieval.fusion import convex_fusion
from ragstead.retrieval.lexical_query import query_terms
from ragstead.stores.sqlite import SqliteStore

DEPTH = 300
ALPHAS = (1.0, 0.7, 0.6, 0.5, 0.4, 0.3, 0.0)  # weight of MiniLM; 1.0 is the shipped default, 0.0 is E5 alone
WEIGHTS = (None, 0.4, 0.5, 0.6)  # convex fusion weight of the vector side; None: vector only


def _vectors(index_db: Path) -> tuple[list[int], list[str], np.ndarray]:
    """Chunk rowids, chunk ids and vectors, in chunk-id order (the same order in both indexes)."""
    if not index_db.exists():
        raise SystemExit(f"{index_db} is missing: run `python -m bench quality` and "
                         "`python -m bench models --models e5-small-q4 --part quality` first")
    with sqlite3.connect(index_db) as conn:
        rows = conn.execute("SELECT id, chunk_id, embedding FROM chunks ORDER BY chunk_id").fetchall()
    return [r[0] for r in rows], [r[1] for r in rows], np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])


def main(dataset: Path) -> None:
    minilm_db = RESULTS / ".cache" / f"{dataset.name}.db"
    e5_db = RESULTS / ".cache" / f"{dataset.name}-model-e5-small-q4.db"
    rowids, minilm_ids, minilm = _vectors(minilm_db)
    _, e5_ids, e5 = _vectors(e5_db)
    if minilm_ids != e5_ids:
        raise SystemExit("the two indexes hold different chunks: rebuild both with the same chunking")
    # Candidates are matrix rows below: the document of row i is that of MiniLM chunk rowids[i].
    by_rowid = chunk_docs(minilm_db)
    docs = {i: by_rowid[r] for i, r in enumerate(rowids)}
    position = {r: i for i, r in enumerate(rowids)}
    embed_minilm, embed_e5 = make_embedder("minilm-l6-int8"), make_embedder("e5-small-q4")
    store = SqliteStore(minilm_db)
    splits: dict[str, Any] = {}
    for split in ("train", "test"):
        cases = load_beir(dataset, split).cases
        scores_minilm = np.stack([embed_minilm.embed_query(c.query) for c in cases]) @ minilm.T
        scores_e5 = np.stack([embed_e5.embed_query(c.query) for c in cases]) @ e5.T
        lexical = [[(position[r], s) for r, s in store.lexical_search(query_terms(c.query), QueryFilters(), DEPTH)]
                   for c in cases]
        splits[split] = (cases, scores_minilm, scores_e5, lexical)
    store.close()

    def vector_hits(split: str, alpha: float) -> list[list[tuple[int, float]]]:
        """Per query, the top DEPTH rows by the mixed cosine (computed once per alpha, for every weight)."""
        _, scores_minilm, scores_e5, _ = splits[split]
        scores = alpha * scores_minilm + (1 - alpha) * scores_e5
        return [[(int(j), float(row[j])) for j in np.argsort(-row)[:DEPTH]] for row in scores]

    def evaluate(split: str, vector: list[list[tuple[int, float]]], weight: float | None) -> dict[str, float]:
        cases, _, _, lexical = splits[split]
        runs, qrels = {}, {}
        for i, case in enumerate(cases):
            if weight is None:
                order = [j for j, _ in vector[i]]
            else:
                fused = convex_fusion(vector[i], lexical[i], weight)
                order = sorted(fused, key=lambda j: -fused[j])
            runs[case.qid], qrels[case.qid] = documents(order, docs), case.relevant
        return summarize(runs, qrels, (10, 100))

    rows = [["MiniLM weight (alpha)", "fusion", "train nDCG@10", "train R@100", "test nDCG@10", "test R@100"]]
    table: dict[str, Any] = {}
    for alpha in ALPHAS:
        hits = {split: vector_hits(split, alpha) for split in splits}
        for weight in WEIGHTS:
            name = f"alpha={alpha}, " + ("vector only" if weight is None else f"convex w={weight}")
            train, test = evaluate("train", hits["train"], weight), evaluate("test", hits["test"], weight)
            table[name] = {"train": train, "test": test}
            rows.append([str(alpha), "vector only" if weight is None else f"convex w={weight}",
                         f"{train['ndcg@10']:.4f}", f"{train['recall@100']:.4f}", f"{test['ndcg@10']:.4f}",
                         f"{test['recall@100']:.4f}"])
    best = max((n for n in table if "convex" in n), key=lambda n: table[n]["train"]["ndcg@10"])
    write_results(f"ensemble_{dataset.name}", {"dataset": str(dataset), "best_on_train": best, "configs": table},
                  rows)
    print(f"best on train: {best}: train {table[best]['train']['ndcg@10']:.4f}, "
          f"test {table[best]['test']['ndcg@10']:.4f}")
