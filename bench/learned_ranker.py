"""A learned ranker over cheap signals (issue 23), measured against convex fusion on the same candidates.

Candidates: convex fusion of the cached vector and lexical lists of `bench fusion` (300 per side, SciFact train
and test), ordered as `search` orders them; the ranker re-orders the fused HEAD and the tail keeps its convex
order, so Recall@HEAD is convex fusion's. Per (query, chunk) features, all available at query time without a
model: dense and BM25 scores raw and min-max normalised over each list's first DEPTH, BM25 over the list's best,
both ranks (log), which lists hold the chunk, query-term coverage of the chunk and of its document's title, the
chunk's length, the number of the document's chunks in the head, and the convex score itself.

Models: LightGBM LambdaMART (`lambdarank`, graded by the qrels) and L2 logistic regression (bench/answers.py's
Newton solver), pointwise on relevant-or-not. Two 5-fold cross-validations on train:
- by query (train[i::5]), as the first version of this bench chose;
- by document: queries that share a judged-relevant document fall in the same fold, so a held-out fold asks
  for documents no training query was judged on. That is the case of a user's own corpus and of any held-out set.
SciFact's train and test queries share judged documents (65 % of test queries have a relevant document that is
relevant to some train query), so a model that learns which documents tend to be relevant scores well on test
and on the by-query folds without ranking better. Test is reported for the configuration each protocol chooses,
split into those "seen" queries and the "unseen" rest.
Ranking is by chunk; a document ranks where its best chunk does, as everywhere in ragstead's evaluation.
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
from bench.fusion_sweep import documents
from ragstead.evaluation.metrics import summarize
from ragstead.retrieval.fusion import convex_fusion, fused_order, min_max
from ragstead.retrieval.lexical_query import query_terms

DEPTH = 100  # entries of each retriever's list the features look at
HEAD = 100  # fused candidates the ranker re-orders
FEATURES = ("dense", "bm25", "dense_minmax", "bm25_minmax", "bm25_over_best", "log_dense_rank", "log_bm25_rank",
            "in_vector", "in_lexical", "coverage", "title_coverage", "log_words", "doc_chunks", "convex")


def chunk_table(conn: sqlite3.Connection) -> dict[int, tuple[str, str, str]]:
    """chunk rowid -> (text, document title, SciFact corpus id) for every chunk of the cached index."""
    rows = conn.execute("SELECT c.id, c.text, d.title, c.file_path FROM chunks c JOIN documents d USING (doc_id)")
    return {rowid: (text, title or text.split("\n", 1)[0], path.removeprefix("kb/beir/"))
            for rowid, text, title, path in rows}


def features(question: str, head: list[int], vector: list[tuple[int, float]], lexical: list[tuple[int, float]],
             fused: dict[int, float], chunks: dict[int, tuple[str, str, str]]) -> np.ndarray:
    """One row per head chunk, columns in FEATURES order."""
    vector, lexical = vector[:DEPTH], lexical[:DEPTH]
    v_score, l_score = dict(vector), dict(lexical)
    v_rank = {r: i for i, (r, _) in enumerate(vector, start=1)}
    l_rank = {r: i for i, (r, _) in enumerate(lexical, start=1)}
    v_norm, l_norm = min_max(vector), min_max(lexical)
    floor = min(v_score.values(), default=0.0)
    best_bm25 = max(l_score.values(), default=1.0) or 1.0
    terms = set(query_terms(question))
    share = 1.0 / max(1, len(terms))
    per_doc: dict[str, int] = {}
    for r in head:
        per_doc[chunks[r][2]] = per_doc.get(chunks[r][2], 0) + 1
    rows = []
    for r in head:
        text, title, doc = chunks[r]
        rows.append([
            v_score.get(r, floor), l_score.get(r, 0.0), v_norm.get(r, 0.0), l_norm.get(r, 0.0),
            l_score.get(r, 0.0) / best_bm25, math.log1p(v_rank.get(r, DEPTH + 1)),
            math.log1p(l_rank.get(r, DEPTH + 1)), float(r in v_score), float(r in l_score),
            len(terms.intersection(query_terms(text))) * share, len(terms.intersection(query_terms(title))) * share,
            math.log1p(len(text.split())), float(per_doc[doc]), fused[r],
        ])
    return np.asarray(rows, dtype=np.float64)


def prepare(split: str, chunks: dict[int, tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Per query: convex fusion over the cached lists, ties broken as `search` breaks them, and its head's rows."""
    queries = json.loads((RESULTS / ".cache" / f"candidates-scifact-{split}.json").read_text())
    out = []
    for q in queries:
        vector = [(int(r), float(s)) for r, s in q["vector"]]
        lexical = [(int(r), float(s)) for r, s in q["lexical"]]
        fused = convex_fusion(vector, lexical, 0.5)
        order = fused_order(fused, vector, lexical)
        head = order[:HEAD]
        out.append({"qid": q["qid"], "relevant": q["relevant"], "ids": head, "tail": order[HEAD:],
                    "x": features(q["query"], head, vector, lexical, fused, chunks),
                    "y": np.array([q["relevant"].get(chunks[r][2], 0.0) for r in head]), "convex_order": order})
    return out


def relevant_docs(query: dict[str, Any]) -> set[str]:
    return {doc for doc, gain in query["relevant"].items() if gain > 0}


def folds_by_document(queries: list[dict[str, Any]], n: int = 5) -> list[list[dict[str, Any]]]:
    """n folds in which no judged-relevant document is shared across folds: queries joined by a shared relevant
    document form one group (union-find), and groups go largest first to the smallest fold."""
    parent = list(range(len(queries)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, q in enumerate(queries):
        for doc in relevant_docs(q):
            if doc in owner:
                parent[root(i)] = root(owner[doc])
            else:
                owner[doc] = i
    groups: dict[int, list[dict[str, Any]]] = {}
    for i, q in enumerate(queries):
        groups.setdefault(root(i), []).append(q)
    folds: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(folds, key=len).extend(group)
    return folds


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
    return lightgbm.train(params, data, num_boost_round=config["trees"]).predict


def orders(model: Any, queries: list[dict[str, Any]]) -> list[list[int]]:
    """The ranked head, then the convex tail."""
    return [[q["ids"][i] for i in np.argsort(-model(q["x"]), kind="stable")] + q["tail"] for q in queries]


def cross_validate(config: dict[str, Any] | None, folds: list[list[dict[str, Any]]], docs: dict[int, str]) -> float:
    """Mean held-out nDCG@10 over the folds; `config` None is convex fusion."""
    scores = []
    for i, held in enumerate(folds):
        if config is None:
            scores.append(ndcg(held, docs, [q["convex_order"] for q in held])["ndcg@10"])
            continue
        model = fit(config, [q for j, f in enumerate(folds) if j != i for q in f])
        scores.append(ndcg(held, docs, orders(model, held))["ndcg@10"])
    return float(np.mean(scores))


CONFIGS = [{"model": "logistic", "l2": l2} for l2 in (0.1, 1.0, 10.0)] + [
    {"model": "lambdamart", "trees": trees, "leaves": leaves} for trees in (100, 300) for leaves in (7, 15, 31)]


def label(config: dict[str, Any] | None) -> str:
    if config is None:
        return "convex w=0.5 (the default), same candidates"
    if config["model"] == "logistic":
        return f"logistic, l2 {config['l2']}"
    return f"LambdaMART, {config['trees']} trees, {config['leaves']} leaves"


def main(index_db: Path | None = None) -> None:
    index_db = index_db or RESULTS / ".cache" / "scifact.db"
    with sqlite3.connect(index_db) as conn:
        chunks = chunk_table(conn)
    docs = {rowid: doc for rowid, (_, _, doc) in chunks.items()}
    train, test = prepare("train", chunks), prepare("test", chunks)
    judged = set().union(*(relevant_docs(q) for q in train))
    parts = {"all": test, "seen": [q for q in test if relevant_docs(q) & judged],
             "unseen": [q for q in test if not relevant_docs(q) & judged]}
    protocols = {"by query": [train[i::5] for i in range(5)], "by document": folds_by_document(train)}
    results: dict[str, Any] = {"head": HEAD, "depth": DEPTH, "features": FEATURES,
                               "test_queries": {k: len(v) for k, v in parts.items()}, "configs": {}, "chosen": {}}
    cv = {name: {label(c): cross_validate(c, folds, docs) for c in [None, *CONFIGS]}
          for name, folds in protocols.items()}
    rows = [["configuration", "train CV by query", "train CV by document", "test nDCG@10 (all / seen / unseen)",
             "test R@100"]]
    for config in [None, *CONFIGS]:
        name = label(config)
        results["configs"][name] = {protocol: cv[protocol][name] for protocol in protocols}
        chosen_by = [p for p in protocols if max(cv[p], key=cv[p].get) == name]
        cells = ["", ""]
        if config is None or chosen_by:  # test is scored only for what a protocol chose (and for the baseline)
            model = None if config is None else fit(config, train)
            scored = {part: ndcg(qs, docs, [q["convex_order"] for q in qs] if model is None else orders(model, qs))
                      for part, qs in parts.items()}
            results["chosen"][name] = {"chosen_by": chosen_by, "test": scored}
            cells = [" / ".join(f"{scored[p]['ndcg@10']:.4f}" for p in parts), f"{scored['all']['recall@100']:.4f}"]
        mark = f" (chosen {', '.join(chosen_by)})" if chosen_by else ""
        rows.append([name + mark, f"{cv['by query'][name]:.4f}", f"{cv['by document'][name]:.4f}", *cells])
    write_results("learned_ranker_scifact", results, rows)
