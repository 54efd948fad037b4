"""Calibrate `ask`'s relevance threshold on SciFact: when is nothing relevant in the index?

For every judged query we look at what the refusal gate sees, the cosine similarity of the best
retrieved chunk, in two worlds: the full corpus ("answerable": its relevant abstracts are there) and
the corpus without that query's relevant abstracts ("unanswerable": only near-topic abstracts are
left, the hardest case). A third set is off-topic questions (written here, 30 of them) against the
full corpus. The threshold is the one that still answers 95 % of answerable *train* queries (a
knowledge base that refuses what it knows is worse than one that shows a weak match with citations);
the table shows what it refuses on each set, and test shows how it generalises.
Needs the SciFact index that `python -m bench quality` keeps in bench/results/.cache/.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, write_results
from ragstead.embeddings import default_embedder
from ragstead.evaluation.cases import load_beir


def best_similarities(dataset: Path, split: str, index_db: Path) -> tuple[np.ndarray, np.ndarray]:
    """(max cosine with the relevant docs present, max cosine with them removed), one pair per query."""
    db = sqlite3.connect(index_db)
    rows = db.execute("SELECT file_path, embedding FROM chunks").fetchall()
    doc_of = np.array([path.rsplit("/", 1)[-1] for path, _ in rows])
    matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype=np.float32).reshape(len(rows), -1)
    cases = load_beir(dataset, split).cases
    embedder = default_embedder()
    answerable, unanswerable = [], []
    for case in cases:
        scores = matrix @ embedder.embed_query(case.query)
        answerable.append(float(scores.max()))
        relevant = np.isin(doc_of, [d for d, gain in case.relevant.items() if gain > 0])
        unanswerable.append(float(scores[~relevant].max()))
    return np.array(answerable), np.array(unanswerable)


OFF_TOPIC = [
    "what time does the bakery on main street open", "how do I reset my router password",
    "best pancake recipe without eggs", "who won the football match last night", "train times from Lisbon to Porto",
    "how much does a used bicycle cost", "what is the capital of Australia", "tips for learning the guitar",
    "how to remove red wine stains from carpet", "when is the next public holiday", "cheap flights to Berlin in May",
    "how to change a car tyre", "lyrics of a famous pop song", "which phone has the best camera",
    "how to write a cover letter", "is it going to rain tomorrow", "good books for a long flight",
    "how do I file my tax return", "what should I cook for dinner tonight", "how to train a puppy to sit",
    "rules of chess castling", "how many calories in a banana", "what is the stock price of a big tech company",
    "how to knit a scarf", "opening hours of the city museum", "how to paint a bedroom wall",
    "best hiking trails near the coast", "how do I renew my passport", "what is a good name for a cat",
    "how to set up a home printer",
]


def balanced_accuracy(answerable: np.ndarray, unanswerable: np.ndarray, threshold: float) -> float:
    return float(((answerable >= threshold).mean() + (unanswerable < threshold).mean()) / 2)


def main(dataset: Path) -> None:
    index_db = RESULTS / ".cache" / f"{dataset.name}.db"
    train = best_similarities(dataset, "train", index_db)
    test = best_similarities(dataset, "test", index_db)
    threshold = float(np.floor(np.percentile(train[0], 5) * 1000) / 1000)
    db = sqlite3.connect(index_db)
    matrix = np.frombuffer(b"".join(r[0] for r in db.execute("SELECT embedding FROM chunks")), np.float32)
    matrix = matrix.reshape(-1, 384)
    embedder = default_embedder()
    off_topic = np.array([float((matrix @ embedder.embed_query(q)).max()) for q in OFF_TOPIC])
    off_refused = float((off_topic < threshold).mean())
    results: dict[str, Any] = {"data": __doc__.split("\n\n")[1].replace("\n", " "), "threshold": threshold,
                               "off_topic": {"queries": len(off_topic), "refused": off_refused,
                                             "median": float(np.median(off_topic)), "max": float(off_topic.max())}}
    rows = [["split", "queries", "answered when answerable", "refused when unanswerable", "balanced accuracy"]]
    for name, (ans, unans) in (("train", train), ("test", test)):
        kept, refused = float((ans >= threshold).mean()), float((unans < threshold).mean())
        results[name] = {"queries": len(ans), "answered_when_answerable": kept, "refused_when_unanswerable": refused,
                         "balanced_accuracy": (kept + refused) / 2,
                         "answerable_median": float(np.median(ans)), "unanswerable_median": float(np.median(unans))}
        rows.append([name, str(len(ans)), f"{kept:.3f}", f"{refused:.3f}", f"{(kept + refused) / 2:.3f}"])
    rows.append(["off-topic questions, full corpus", str(len(off_topic)), "", f"{off_refused:.3f}", ""])
    rows.append([f"threshold (answers 95 % of answerable train queries): {threshold:.3f}", "", "", "", ""])
    write_results("refusal_calibration", results, rows)
