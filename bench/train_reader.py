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

Model: L2-regularised logistic regression on standardised features (bench/answers.py fit_logistic, numpy). A
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


def top1(observed: list[tuple[np.ndarray, np.ndarray]], score: Any) -> float:
    return float(np.mean([labels[int(np.argmax(score(rows)))] > 0 for rows, labels in observed]))


def main(squad: Path, limit: int | None = None, out: Path = OUT) -> dict[str, Any]:
    from ragstead.answer.reader import UNIT_FEATURES, Logistic, Reader

    started = time.perf_counter()
    articles = json.loads(squad.read_text(encoding="utf-8"))["data"]
    train = observe([a for a in articles if a["title"] not in HELD_OUT], limit)
    held = observe([a for a in articles if a["title"] in HELD_OUT], None)
    x, y = np.vstack([rows for rows, _ in train]), np.concatenate([labels for _, labels in train])
    mean, scale, weights, bias = fit_logistic(x, y, l2=L2)
    model = Logistic(UNIT_FEATURES, mean, scale, weights, bias)
    cosine = UNIT_FEATURES.index("cosine")
    card = {"data": {**DATA, "articles_held_out": list(HELD_OUT)},
            "training": {"questions": len(train), "units": len(y), "l2": L2, "command":
                         "python -m bench train-reader --squad FILE", "seconds": round(time.perf_counter() - started)},
            "held_out": {"questions": len(held), "top1_reader": round(top1(held, model), 3),
                         "top1_cosine": round(top1(held, lambda rows: rows[:, cosine]), 3)}}
    reader = Reader(model, card)
    out.write_text(json.dumps(reader.to_dict(), indent=1) + "\n", encoding="utf-8")
    print(json.dumps(card, indent=1))
    return card
