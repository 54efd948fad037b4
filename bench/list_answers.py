"""`python -m bench lists`: complete answers to list and count questions on 1,000 notes (issue 40, item 1).

1,000 notes in one user's folder, written from a few dozen everyday sentences (meetings, recipes, trips,
reading, garden, money), indexed with the default model (MiniLM-L6). 70 notes mention Lisbon: 30 as their
subject, 40 in one sentence in passing; 300 mention the budget; 60 are near misses about Porto. Each
question is asked five times after one warm-up (`kb.ask`, the library call every door makes), and the
table gives the median: how long a list answer takes, how many documents it examined, matched and cited
(every match, or the first page of 50), and whether it matched exactly the notes planted (the recall and
precision of the list); beside it, the usual extractive answer from the top 8 chunks.
"""

from __future__ import annotations

import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.common import Timer, write_results

NOTES = 1000
RUNS = 5
USER = "ana"
FILLER = [
    "The retro moved planning to Tuesday mornings and cut the Monday meetings in half.",
    "Soak the beans overnight, then simmer them with a bay leaf for an hour.",
    "The compost needs turning every two weeks and a little more brown material.",
    "Finished the second part of the novel; the narrator is less reliable than she seemed.",
    "The boiler service is due in October and the engineer's number is on the fridge.",
    "Ran eight kilometres along the canal; the knee held up fine this time.",
    "Jonas takes the export job and Marta the onboarding emails this sprint.",
    "The insurance renews in September, so compare the quotes before the end of August.",
    "Repot the basil into a bigger pot and keep it out of the afternoon sun.",
    "The incident came from a consumer that crashed on one malformed message.",
    "Mum would like a pottery class for her birthday this year.",
    "The train to the coast takes two hours and the last one back leaves at nine.",
]
LISBON_SUBJECT = ["We spent four nights in Lisbon, in a flat above a bakery in Alfama.",
                  "Tram 28 climbs through Lisbon from Martim Moniz to Campo de Ourique.",
                  "The tiles of the station in Lisbon are worth the detour."]
LISBON_PASSING = ["Marta is away next week for a wedding in Lisbon.",
                  "Next year's edition of the conference moves to Lisbon.",
                  "I first ate this dish in a small tasca in Lisbon."]
PORTO = ["A weekend in Porto: port cellars in Gaia and a walk along the Ribeira.",
         "From Porto the train follows the Douro river up to Pinhão."]
BUDGET = ["The team budget for tooling is twelve thousand euros this year.",
          "We are over budget on the kitchen by about eight percent."]


def notes(count: int = NOTES, seed: int = 40) -> tuple[dict[str, str], dict[str, set[str]]]:
    """{relative path: markdown} of `count` notes, and the paths that mention each planted topic."""
    rng = random.Random(seed)
    files: dict[str, str] = {}
    planted: dict[str, set[str]] = {"lisbon": set(), "budget": set()}
    for i in range(count):
        sentences = rng.sample(FILLER, 6)
        path = f"kb/users/{USER}/notes/{i // 100:02d}/note-{i:04d}.md"
        if i % 100 < 3:  # 30 notes about Lisbon
            sentences.insert(0, rng.choice(LISBON_SUBJECT))
            planted["lisbon"].add(path)
        elif i % 100 < 7:  # 40 that mention it in passing, mid-note
            sentences.insert(3, rng.choice(LISBON_PASSING))
            planted["lisbon"].add(path)
        elif i % 100 < 13:  # 60 near misses
            sentences.insert(0, rng.choice(PORTO))
        if i % 10 < 3:
            sentences.insert(rng.randrange(len(sentences)), rng.choice(BUDGET))
            planted["budget"].add(path)
        files[path] = f"# Note {i}\n\n" + " ".join(sentences) + "\n"
    return files, planted


QUESTIONS = [  # (question, the planted topic it should list exactly or None, documents cited: the page's limit)
    ("which notes mention Lisbon?", "lisbon", 500),
    ("how many notes mention Lisbon", "lisbon", 500),
    ("which notes mention the budget?", "budget", 500),
    ("which notes mention the budget? (first page)", None, 50),
    ("which notes mention the Lisbon trip?", None, 500),
    ("which notes mention Reykjavik?", None, 500),
]


def main(count: int = NOTES) -> None:
    import ragstead
    from ragstead.request.model import AskRequest, Scope

    files, planted = notes(count)
    rows: list[list[str]] = [["question", "examined", "matched", "cited", "exact", "median ms", "min ms",
                              "usual ask, median ms"]]
    data: dict[str, Any] = {"notes": count, "runs": RUNS, "questions": []}
    with tempfile.TemporaryDirectory(prefix="ragstead-bench-lists-") as scratch:
        root = Path(scratch)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        with ragstead.open(root, roots=("kb",)) as kb:
            with Timer() as timer:
                indexed = kb.index()
            data["index_seconds"] = round(timer.seconds, 2)
            data["chunks"] = indexed.chunks_written
            for label, topic, limit in QUESTIONS:
                question = label.removesuffix(" (first page)")
                listed, seconds = _timed(kb, AskRequest(question, scope=Scope(user=USER), limit=limit))
                _, usual = _timed(kb, AskRequest(question, scope=Scope(user=USER), list_questions=False,
                                                 extractive=True))
                data_row = listed.to_dict()
                sources = {c.source for c in listed.citations}
                exact = "" if topic is None else ("yes" if sources == planted[topic] else
                                                  f"no ({len(sources & planted[topic])}/{len(planted[topic])})")
                data["questions"].append({
                    "question": label, "kind": data_row["kind"], "examined": data_row["examined"],
                    "matched": data_row["matched"], "cited": len(listed.citations), "complete": data_row["complete"],
                    "planted": len(planted[topic]) if topic else None, "exact": exact or None,
                    "seconds": [round(s, 4) for s in seconds], "usual_ask_seconds": [round(s, 4) for s in usual]})
                rows.append([label, str(data_row["examined"]), str(data_row["matched"]), str(len(listed.citations)),
                             exact or "–",
                             f"{statistics.median(seconds) * 1000:.0f}", f"{min(seconds) * 1000:.0f}",
                             f"{statistics.median(usual) * 1000:.0f}"])
    write_results("list_answers", data, rows)


def _timed(kb: Any, request: Any) -> tuple[Any, list[float]]:
    """The answer and the wall time of RUNS asks after one warm-up (the model and caches loaded)."""
    result = kb.ask(request)
    seconds = []
    for _ in range(RUNS):
        with Timer() as timer:
            result = kb.ask(request)
        seconds.append(timer.seconds)
    return result, seconds
