"""`python -m bench train-reader --squad FILE`: train the reader's unit model (answer/reader.py) and write it to
src/ragstead/answer/reader_model.json with a card of its data, licence and scores.

Data: SQuAD 2.0's *train* split (Rajpurkar, Jia and Liang 2018; CC BY-SA 4.0), the file given by --squad, kept
outside the repository. Never its dev split: that is held out for the public answer-or-refuse measure. The
articles are indexed as a folder (one note per paragraph, titled by its article) in a personal-mode project, and
every answerable question is asked through the library's own search: the units of the top chunks, each with its
cosine read after its headings, are what the model reads, exactly as `ask` reads them. A unit is a positive when
it holds an answer span of its own paragraph. Two articles are held out of training (bench/reader_eval.py
HELD_OUT); the card's scores (top-1: the best-scored unit holds the answer) are measured on them, against the
cosine alone.

Model: a linear score over standardised features, trained listwise: per question, a softmax over the units read,
its target the units that hold the answer (numpy, Adam, full batch; it optimises which unit leads, the reader's
job, where a pointwise logistic spent its weights on the many easy negatives). The score is then calibrated to a
probability by a one-feature logistic over the same units (bench/answers.py fit_logistic), so the shipped model is
still sigmoid(bias + weights . standardised features): the gate and the answerer read probabilities. A
cross-encoder fine-tuned from all-MiniLM-L6-v2 was the first route (git show 88eb29e:bench/train_reader.py); on
held-out articles it chose no better than the cosine and took 44 minutes of two CPU cores (docs/benchmarks.md, "A
trained reader: the first attempt, not shipped"). This one trains in minutes and chose better.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.answers import fit_logistic
from bench.reader_eval import HELD_OUT

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "ragstead" / "answer" / "reader_model.json"
L2 = 1.0
DATA = {"name": "SQuAD 2.0, train split (train-v2.0.json)", "url": "https://rajpurkar.github.io/SQuAD-explorer/",
        "licence": "CC BY-SA 4.0"}


def _folder(articles: list[dict[str, Any]], folder: Path) -> list[dict[str, Any]]:
    """Each paragraph as a note `# <article title>` + its text; the answerable questions with their note."""
    questions = []
    for article in articles:
        title = article["title"].replace("_", " ")
        for n, paragraph in enumerate(article["paragraphs"]):
            name = "".join(c for c in article["title"] if c.isalnum() or c in "_-")
            path = folder / name / f"{n:03d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# {title}\n\n{paragraph['context']}\n", encoding="utf-8")
            questions += [{"question": qa["question"], "file": f"{name}/{n:03d}.md",
                           "answers": [" ".join(a["text"].split()).lower() for a in qa["answers"]]}
                          for qa in paragraph["qas"] if not qa.get("is_impossible")]
    return questions


def observe(articles: list[dict[str, Any]], limit: int | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """(feature rows, labels) per answerable question whose answer is among the units read."""
    import ragstead
    from bench.answers import observe as observe_question
    from bench.answers import unit_items
    from ragstead.answer.gate import UnitVectorCache
    from ragstead.answer.reader import Item, unit_rows

    out = []
    with tempfile.TemporaryDirectory(prefix="ragstead-train-reader-") as scratch:
        questions = _folder(articles, Path(scratch) / "notes")[:limit]
        with ragstead.open(Path(scratch), roots=("notes",), owner="me") as kb:
            kb.index()
            cache, scope = UnitVectorCache(kb.embedder, size=10**6), kb.scope(user="me")
            for q in questions:  # the units `ask` reads, each with its chunk's cosine as `ask` scores it
                obs = observe_question(kb, scope, q["question"])
                items = [Item(rank, unit, cosine, obs.similarities[rank])
                         for rank, unit, cosine in unit_items(obs, cache)]
                labels = [float(obs.hits[item.rank].file_path.endswith(q["file"]) and any(
                    a in " ".join(item.unit.text.split()).lower() for a in q["answers"])) for item in items]
                if any(labels):
                    out.append((unit_rows(q["question"], items)[0], np.asarray(labels)))
    return out


LISTWISE_EPOCHS = 300
LISTWISE_RATE = 0.05


def fit_listwise(observed: list[tuple[np.ndarray, np.ndarray]], l2: float = 1e-3, epochs: int = LISTWISE_EPOCHS,
                 rate: float = LISTWISE_RATE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, scale, weights) of a linear score whose softmax over each question's units puts its mass on the units
    holding the answer (Adam on the mean cross-entropy, full batch, from zero: deterministic)."""
    x = np.vstack([rows for rows, _ in observed])
    mean, scale = x.mean(0), x.std(0) + 1e-6
    z = (x - mean) / scale
    target = np.concatenate([labels / labels.sum() for _, labels in observed])
    group = np.repeat(np.arange(len(observed)), [len(labels) for _, labels in observed])
    weights, m, v = np.zeros(x.shape[1]), np.zeros(x.shape[1]), np.zeros(x.shape[1])
    for step in range(1, epochs + 1):
        score = z @ weights
        top = np.full(len(observed), -np.inf)
        np.maximum.at(top, group, score)
        e = np.exp(score - top[group])
        total = np.zeros(len(observed))
        np.add.at(total, group, e)
        gradient = z.T @ (e / total[group] - target) / len(observed) + l2 * weights
        m, v = 0.9 * m + 0.1 * gradient, 0.999 * v + 0.001 * gradient ** 2
        weights -= rate * (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return mean, scale, weights


def calibrated(observed: list[tuple[np.ndarray, np.ndarray]], mean: np.ndarray, scale: np.ndarray,
               weights: np.ndarray) -> tuple[np.ndarray, float]:
    """The listwise weights rescaled, and a bias, so that sigmoid(bias + weights . standardised row) is the chance
    that a unit holds the answer (a one-feature logistic over every unit's score)."""
    x, y = np.vstack([rows for rows, _ in observed]), np.concatenate([labels for _, labels in observed])
    score = ((x - mean) / scale) @ weights
    s_mean, s_scale, (w,), b = fit_logistic(score[:, None], y, l2=L2)
    return weights * w / s_scale[0], float(b - w * s_mean[0] / s_scale[0])


def top1(observed: list[tuple[np.ndarray, np.ndarray]], score: Any) -> float:
    return float(np.mean([labels[int(np.argmax(score(rows)))] > 0 for rows, labels in observed]))


def main(squad: Path, limit: int | None = None, out: Path = OUT) -> dict[str, Any]:
    from ragstead.answer.reader import UNIT_FEATURES, Logistic, Reader

    started = time.perf_counter()
    articles = json.loads(squad.read_text(encoding="utf-8"))["data"]
    train = observe([a for a in articles if a["title"] not in HELD_OUT], limit)
    held = observe([a for a in articles if a["title"] in HELD_OUT], None)
    x, y = np.vstack([rows for rows, _ in train]), np.concatenate([labels for _, labels in train])
    mean, scale, listwise = fit_listwise(train)
    weights, bias = calibrated(train, mean, scale, listwise)
    model = Logistic(UNIT_FEATURES, mean, scale, weights, bias)
    pointwise = Logistic(UNIT_FEATURES, *fit_logistic(x, y, l2=L2))
    cosine = UNIT_FEATURES.index("cosine")
    card = {"data": {**DATA, "articles_held_out": list(HELD_OUT)},
            "training": {"questions": len(train), "units": len(y), "objective": "listwise softmax, calibrated",
                         "epochs": LISTWISE_EPOCHS, "command":
                         "python -m bench train-reader --squad FILE", "seconds": round(time.perf_counter() - started)},
            "held_out": {"questions": len(held), "top1_reader": round(top1(held, model), 3),
                         "top1_pointwise_logistic": round(top1(held, pointwise), 3),
                         "top1_cosine": round(top1(held, lambda rows: rows[:, cosine]), 3)}}
    reader = Reader(model, card)
    out.write_text(json.dumps(reader.to_dict(), indent=1) + "\n", encoding="utf-8")
    print(json.dumps(card, indent=1))
    return card
