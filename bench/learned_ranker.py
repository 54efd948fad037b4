"""A learned ranker over cheap signals (issue 23), measured against convex fusion on the same candidates.

Candidates: the cached vector and lexical lists of `bench fusion` (300 per side, SciFact train and test), cut to
the top DEPTH of each and united. Per (query, chunk) features, all available at query time without a model:
dense and BM25 scores raw and min-max normalised (as convex fusion sees them), BM25 over the list's best, both
ranks (log), which lists hold the chunk, query-term coverage of the chunk and of its title line, the chunk's
length, the number of the document's chunks among the candidates, and the convex score itself.

Models: LightGBM LambdaMART (`lambdarank`, graded by the qrels) and L2 logistic regression (bench/answers.py's
Newton solver), pointwise on relevant-or-not. Chosen by 5-fold cross-validation on train (folds by query);
test is scored once, at the end, with the chosen configuration fitted on all of train. Ranking is by chunk;
a document ranks where its best chunk does, as everywhere in ragstead's evaluation.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from bench.answers import fit_logistic
from bench.common import RESULTS, write_results
from bench.fusion_sweep import chunk_docs, documents
from ragstead.evaluation.metrics import summarize
from ragstead.retrieval.fusion import convex_fusion
from ragstead.retrieval.lexical_query import query_terms

DEPTH = 100
FEATURES = ("dense", "bm25", "dense_minmax", "bm25_minmax", "bm25_over_best", "log_dense_rank", "log_bm25_rank",
            "in_vector", "in_lexical", "coverage", "title_coverage", "log_words", "doc_chunks", "convex")


def _minmax(hits: list[tuple[int, float]]) -> dict[int, float]:
    if not hits:
        return {}
    scores = [s for _, s in hits]
    low, high = min(scores), max(scores)
    return {r: (s - low) / (high - low) if high > low else 1.0 for r, s in hits}


def features(query: dict[str, Any], texts: dict[int, str], docs: dict[int, str]) -> tuple[list[int], np.ndarray]:
    """The candidate chunk ids of one query and their feature rows (FEATURES order)."""
    vector = [(int(r), float(s)) for r, s in query["vector"][:DEPTH]]
    lexical = [(int(r), float(s)) for r, s in query["lexical"][:DEPTH]]
    v_score, l_score = dict(vector), dict(lexical)
    v_rank = {r: i for i, (r, _) in enumerate(vector, start=1)}
    l_rank = {r: i for i, (r, _) in enumerate(lexical, start=1)}
    v_norm, l_norm = _minmax(vector), _minmax(lexical)
    convex = convex_fusion(vector, lexical, 0.5)
    ids = list(dict.fromkeys([r for r, _ in vector] + [r for r, _ in lexical]))
    floor = min(v_score.values(), default=0.0)
    best_bm25 = max(l_score.values(), default=1.0) or 1.0
    terms = set(query_terms(query["query"]))
    per_doc: dict[str, int] = {}
    for r in ids:
        per_doc[docs[r]] = per_doc.get(docs[r], 0) + 1
    rows = []
    for r in ids:
        text = texts[r]
        title = text.split("\n", 1)[0]
        words = set(query_terms(text))
        rows.append([
            v_score.get(r, floor), l_score.get(r, 0.0), v_norm.get(r, 0.0), l_norm.get(r, 0.0),
            l_score.get(r, 0.0) / best_bm25, math.log1p(v_rank.get(r, DEPTH + 1)),
            math.log1p(l_rank.get(r, DEPTH + 1)), float(r in v_score), float(r in l_score),
            len(terms & words) / max(1, len(terms)), len(terms & set(query_terms(title))) / max(1, len(terms)),
            math.log1p(len(text.split())), float(per_doc[docs[r]]), convex.get(r, 0.0),
        ])
    return ids, np.asarray(rows, dtype=np.float64)


def prepare(split: str, texts: dict[int, str], docs: dict[int, str]) -> list[dict[str, Any]]:
    queries = json.loads((RESULTS / ".cache" / f"candidates-scifact-{split}.json").read_text())
    out = []
    for q in queries:
        ids, x = features(q, texts, docs)
        labels = np.array([q["relevant"].get(docs[r], 0.0) for r in ids])
        out.append({"qid": q["qid"], "relevant": q["relevant"], "ids": ids, "x": x, "y": labels,
                    "convex_order": [r for r, _ in sorted(zip(ids, x[:, FEATURES.index("convex")], strict=True),
                                                          key=lambda p: -p[1])]})
    return out


def ndcg(queries: list[dict[str, Any]], docs: dict[int, str], orders: list[list[int]]) -> dict[str, float]:
    runs = {q["qid"]: documents(order, docs) for q, order in zip(queries, orders, strict=True)}
    return summarize(runs, {q["qid"]: q["relevant"] for q in queries}, (10, 100))


def fit(config: dict[str, Any], train: list[dict[str, Any]]) -> Any:
    x = np.vstack([q["x"] for q in train])
    y = np.concatenate([q["y"] for q in train])
    if config["model"] == "logistic":
        mean, scale, w, b = fit_logistic(x, (y > 0).astype(float), l2=config["l2"])
        return lambda xs: ((xs - mean) / scale) @ w + b
    import lightgbm  # the native API: its sklearn wrapper would pull in scikit-learn

    data = lightgbm.Dataset(x, label=y.astype(int), group=[len(q["ids"]) for q in train])
    params = {"objective": "lambdarank", "learning_rate": 0.05, "num_leaves": config["leaves"],
              "min_data_in_leaf": 20, "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8,
              "seed": 7, "verbose": -1, "num_threads": 2}
    booster = lightgbm.train(params, data, num_boost_round=config["trees"])
    return booster.predict


def orders(model: Any, queries: list[dict[str, Any]]) -> list[list[int]]:
    out = []
    for q in queries:
        scores = model(q["x"])
        out.append([q["ids"][i] for i in np.argsort(-scores, kind="stable")])
    return out


CONFIGS = [{"model": "logistic", "l2": l2} for l2 in (0.1, 1.0, 10.0)] + [
    {"model": "lambdamart", "trees": trees, "leaves": leaves} for trees in (100, 300) for leaves in (7, 15)]


def label(config: dict[str, Any]) -> str:
    if config["model"] == "logistic":
        return f"logistic, l2 {config['l2']}"
    return f"LambdaMART, {config['trees']} trees, {config['leaves']} leaves"


def main(index_db: Path | None = None) -> None:
    index_db = index_db or RESULTS / ".cache" / "scifact.db"
    with sqlite3.connect(index_db) as conn:
        texts = dict(conn.execute("SELECT id, text FROM chunks"))
    docs = chunk_docs(index_db)
    train, test = prepare("train", texts, docs), prepare("test", texts, docs)
    folds = [train[i::5] for i in range(5)]
    rows = [["configuration", "train 5-fold nDCG@10", "train fit nDCG@10", "test nDCG@10", "test R@100"]]
    baseline_cv = float(np.mean([ndcg(f, docs, [q["convex_order"] for q in f])["ndcg@10"] for f in folds]))
    convex_test = ndcg(test, docs, [q["convex_order"] for q in test])
    results: dict[str, Any] = {"depth": DEPTH, "features": FEATURES, "configs": {}}
    best, best_cv = None, baseline_cv
    for config in CONFIGS:
        cv = []
        for i, held in enumerate(folds):
            model = fit(config, [q for j, f in enumerate(folds) if j != i for q in f])
            cv.append(ndcg(held, docs, orders(model, held))["ndcg@10"])
        model = fit(config, train)
        fit_score = ndcg(train, docs, orders(model, train))["ndcg@10"]
        results["configs"][label(config)] = {"cv_ndcg10": float(np.mean(cv)), "train_fit_ndcg10": fit_score}
        if float(np.mean(cv)) > best_cv:
            best, best_cv = config, float(np.mean(cv))
        rows.append([label(config), f"{np.mean(cv):.4f}", f"{fit_score:.4f}", "", ""])
    rows.insert(1, ["convex w=0.5 (today's default), same candidates", f"{baseline_cv:.4f}", "",
                    f"{convex_test['ndcg@10']:.4f}", f"{convex_test['recall@100']:.4f}"])
    results["convex"] = {"cv_ndcg10": baseline_cv, "test": convex_test}
    if best is not None:  # test is scored once, for the configuration cross-validation chose
        chosen = ndcg(test, docs, orders(fit(best, train), test))
        results["chosen"] = {"config": label(best), "test": chosen}
        rows.append([f"chosen on train: {label(best)}", f"{best_cv:.4f}", "", f"{chosen['ndcg@10']:.4f}",
                     f"{chosen['recall@100']:.4f}"])
    write_results("learned_ranker_scifact", results, rows)
