"""`python -m bench superseded`: false alarms of "the newer note wins" (answer/supersession.py) on the notes set.

Every notes question (tests/data/notes/questions.jsonl) goes through the real `ask` path (gather + the extractive
answerer) twice:
- with the documents' own dates (front matter `date`, a date in the path, else the copy's modification time);
- with every document given a day of its own (the n-th path in sorted order gets the n-th day), so any two
  statements the detector reads as disagreeing are flagged: this measures the detector, not the dates.
and a third time, every note its own day, with the subject rules loosened (LOOSE: half the question's subject words,
a third of the words shared), to show what the shipped bars keep out.
Every answer that marks a citation superseded is listed with both statements; the notes hold no two versions of
one fact written as a state ("the team meets on ..."), so each such answer is a false alarm unless the listing
shows otherwise (the table says which were judged true).
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench.answers import K, load_questions, notes_kb
from bench.common import RESULTS, Timer, write_results

LOOSE = {"SUBJECT_SHARE": 0.5, "SAME_WORDS": 0.34}
# Detections judged by reading both statements: a newer note that does replace an older value (question id).
TRUE_SUPERSESSIONS: set[str] = set()


def run(kb: Any, questions: list[dict[str, Any]], own_days: bool) -> list[dict[str, Any]]:
    """The answers that mark a citation superseded, with what they cite."""
    from ragstead.answer.ask import AskOptions, Contexts, UnitVectorCache, answer, gather
    from ragstead.answer.extractive import ExtractiveAnswerer

    filters = kb.scope(user="me")
    options = AskOptions(kb.search_options(k=K))
    cache = UnitVectorCache(kb.embedder, size=10000)
    paths = sorted(d.file_path for d in kb.documents(user="me"))
    day = {path: (date(2020, 1, 1) + timedelta(days=i)).isoformat() for i, path in enumerate(paths)}
    flagged = []
    for q in questions:
        found, contexts = gather(q["question"], kb.store, kb.embedder, filters, options, kb.settings.scope_rules,
                                 cache)
        if own_days:
            dated = Contexts(replace(c, date=day.get(c.source, c.date)) for c in contexts)
            dated.relevance, dated.best_similarity = contexts.relevance, contexts.best_similarity
            contexts = dated
        result = answer(found, contexts, options.min_similarity, [ExtractiveAnswerer()])
        if result.superseded:
            flagged.append({"id": q["id"], "kind": q["kind"], "question": q["question"], "answer": result.text,
                            "superseded": [s.to_dict() for s in result.superseded],
                            "true": q["id"] in TRUE_SUPERSESSIONS})
    return flagged


def main() -> None:
    questions = load_questions()
    with tempfile.TemporaryDirectory() as tmp:
        from ragstead.embeddings import default_embedder

        kb = notes_kb(Path(tmp), default_embedder())
        days = {(d.created_at or "")[:10] for d in kb.documents(user="me")}
        from ragstead.answer import supersession

        with Timer() as t:
            own = run(kb, questions, own_days=False)
            blind = run(kb, questions, own_days=True)
            shipped = {name: getattr(supersession, name) for name in LOOSE}
            try:
                for name, value in LOOSE.items():
                    setattr(supersession, name, value)
                loose = run(kb, questions, own_days=True)
            finally:
                for name, value in shipped.items():
                    setattr(supersession, name, value)
        kb.close()
    rows = []
    for label, flagged in (("the notes' own dates", own), ("every note its own day", blind),
                           (f"every note its own day, loose bars {LOOSE}", loose)):
        false = [f for f in flagged if not f["true"]]
        rows.append({"dates": label, "questions": len(questions), "answers_with_superseded": len(flagged),
                     "false_alarms": len(false), "true": len(flagged) - len(false)})
    data = {"rows": rows, "distinct_document_days": len(days), "seconds": round(t.seconds, 1),
            "flagged": {"own_dates": own, "own_days": blind, "own_days_loose": loose}}
    header = ["dates", "questions", "answers_with_superseded", "false_alarms", "true"]
    write_results("superseded_notes", data, [header, *[[str(r[h]) for h in header] for r in rows]])
    print((RESULTS / "superseded_notes.md").read_text(encoding="utf-8"))
