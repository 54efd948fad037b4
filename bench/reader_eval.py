"""`python -m bench reader [--fit]`: `ask` as a person meets it, on every notes set and on a public
answer-or-refuse set, through the public library only (`ragstead.open`, `kb.ask`), so the same file measures an
older checkout too (`PYTHONPATH=<old checkout>/src python -m bench reader`): before and after in one run.

Sets (each a folder indexed in personal mode, every question asked with the offline answerer):
- notes (tests/data/notes: fit and held-out halves), notes fresh (tests/data/notes_fresh: measured only) and notes
  reader (tests/data/notes_reader, written for the reader issue before anything was scored on it: fit and held-out
  halves; its held-out half was seen by no choice);
- public: the two articles of SQuAD 2.0's *train* split that the reader's training held out (HELD_OUT), one
  file per paragraph, with their answerable and adversarial unanswerable questions. Never SQuAD 2.0's dev split.
  Scored as the CRAG benchmark scores: +1 a confident answer holding the answer span, -1 a confident answer
  without it (any confident answer to an unanswerable question), 0 a refusal or a tentative answer.

Nothing is fitted here: it measures what `ask` does (`--label` names the results file).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.answers import fact_in

ROOT = Path(__file__).resolve().parents[1]
NOTES_SETS = {"notes": ROOT / "tests" / "data" / "notes", "notes fresh": ROOT / "tests" / "data" / "notes_fresh",
              "notes reader": ROOT / "tests" / "data" / "notes_reader"}
RESULTS = ROOT / "bench" / "results"
# The SQuAD 2.0 train articles the reader's training leaves out (one with unanswerable questions, one without).
HELD_OUT = ("Spectre_(2015_film)", "Solar_energy")


def _questions(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def public_set(squad: Path, scratch: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The held-out SQuAD train articles as a folder of paragraph notes, and their questions."""
    folder = scratch / "notes"
    questions = []
    for article in json.loads(squad.read_text(encoding="utf-8"))["data"]:
        if article["title"] not in HELD_OUT:
            continue
        title = article["title"].replace("_", " ")
        for n, paragraph in enumerate(article["paragraphs"]):
            path = folder / article["title"].replace("(", "").replace(")", "") / f"{n:03d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# {title}\n\n{paragraph['context']}\n", encoding="utf-8")
            for qa in paragraph["qas"]:
                impossible = bool(qa.get("is_impossible"))
                questions.append({"id": qa["id"], "question": qa["question"], "split": "public",
                                  "kind": "unanswerable" if impossible else "answerable",
                                  "answers": [] if impossible else [a["text"] for a in qa["answers"]]})
    return folder, questions


def run_set(folder: Path, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each question asked through `kb.ask` over a personal-mode copy of `folder`, timed."""
    import ragstead

    records = []
    with tempfile.TemporaryDirectory(prefix="ragstead-reader-bench-") as scratch:
        shutil.copytree(folder, Path(scratch) / "notes")
        with ragstead.open(Path(scratch), roots=("notes",), owner="me") as kb:
            kb.index()
            kb.ask("warm-up question", user="me", extractive=True)
            for q in questions:
                started = time.perf_counter()
                shipped = kb.ask(q["question"], user="me", extractive=True).to_dict()
                records.append({**q, "seconds": time.perf_counter() - started, "refused": shipped["refused"],
                                "answer": shipped["answer"], "confidence": "refused" if shipped["refused"] else
                                (shipped.get("gate") or {}).get("confidence", "likely")})
    return records


def right(record: dict[str, Any], text: str) -> bool:
    if record.get("answers"):
        return any(fact_in(text, a) for a in record["answers"])
    return bool(record.get("fact")) and fact_in(text, record["fact"])


def slim(record: dict[str, Any]) -> dict[str, Any]:
    """What the results file keeps of one question: its outcome, not the answer's text."""
    return {"id": record["id"], "split": record["split"], "kind": record["kind"], "refused": record["refused"],
            "confidence": record["confidence"], "right": right(record, record["answer"]),
            "ms": round(1000 * record["seconds"], 1)}


def rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in records if r["kind"] == "answerable"]
    declined = [r for r in records if r["kind"] in ("near_miss", "unanswerable")]
    off = [r for r in records if r["kind"] == "off_topic"]
    likely = [r for r in answerable if r["confidence"] == "likely"]
    score = [(1 if right(r, r["answer"]) else -1) if r["confidence"] == "likely" else 0 for r in answerable] + [
        -1 if r["confidence"] == "likely" else 0 for r in declined]
    return {"answerable": len(answerable),
            "right": sum(not r["refused"] and right(r, r["answer"]) for r in answerable),
            "confident_wrong": sum(not right(r, r["answer"]) for r in likely),
            "likely": len(likely),
            "declined": sum(r["confidence"] != "likely" for r in declined), "to_decline": len(declined),
            "declined_refused": sum(r["refused"] for r in declined),
            "off_topic_refused": sum(r["refused"] for r in off), "off_topic": len(off),
            "score": round(float(np.mean(score)), 3) if score else None,
            "ask_ms_p50": round(1000 * statistics.median(r["seconds"] for r in records), 1)}


def main(squad: Path | None, label: str = "") -> dict[str, Any]:
    import ragstead

    out: dict[str, Any] = {"label": label or getattr(ragstead, "__version__", "?"), "sets": {}}
    records_by_set: dict[str, list[dict[str, Any]]] = {}
    for name, folder in NOTES_SETS.items():
        if (folder / "questions.jsonl").is_file():
            records_by_set[name] = run_set(folder / "notes", _questions(folder))
    if squad is not None:
        with tempfile.TemporaryDirectory(prefix="ragstead-public-") as scratch:
            folder, questions = public_set(squad, Path(scratch))
            records_by_set["public (SQuAD 2.0 train, held-out articles)"] = run_set(folder, questions)
    for name, records in records_by_set.items():
        splits = sorted({r["split"] for r in records})
        out["sets"][name] = {split: rates([r for r in records if r["split"] == split]) for split in splits}
        out["sets"][name]["records"] = [slim(r) for r in records]
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = RESULTS / f"reader_{(label or 'now').replace(' ', '_')}.json"
    target.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    print("| set | split | right | confident wrong | declined (near miss / unanswerable) | off-topic refused | "
          "score | ask p50 ms |\n|---|---|---|---|---|---|---|---|")
    for name, by_split in out["sets"].items():
        for split, r in by_split.items():
            if split == "records":
                continue
            print(f"| {name} | {split} | {r['right']} of {r['answerable']} | {r['confident_wrong']} of {r['likely']} | "
                  f"{r['declined']} of {r['to_decline']} ({r['declined_refused']} refused) | "
                  f"{r['off_topic_refused']} of {r['off_topic']} | {r['score']} | {r['ask_ms_p50']} |")
    return out
