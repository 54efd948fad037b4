"""`python -m bench aggregates`: whole-folder questions (sums, counts over a period, lists joined by "or", tags,
sheet rows) on the household folders (issue 46; tests/data/household, questions written before any answer).

Each question of `questions.jsonl` is asked once in ana's scope through `kb.ask` (the library call every door
makes; the extractive answerer, so nothing leaves the machine). An answer is **right** when it states the expected
figure and cites every expected unit (each unit is a group: citing one of its files is enough, for the two
mentions of one payment). **Wrong and complete** counts the answers that state `complete: true` with a figure
other than the expected one: the failure that must never happen. The table splits the fit half (what the parser
and the aggregates were written against) from the held-out half.

The figure an answer states: `figure` of an aggregate answer; `matched` of a list or count answer; otherwise
any number (or date) in its text, leniently (an answer that says 1,250.00 states 1250.00).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from bench.common import write_results

HOUSEHOLD = Path(__file__).resolve().parent.parent / "tests" / "data" / "household"
USER = "ana"
PREFIX = f"kb/users/{USER}/"
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")
_MONTHS = ("january february march april may june july august september october november december").split()
_DAY = re.compile(r"\b(\d{1,2}) (" + "|".join(_MONTHS) + r") (\d{4})\b", re.I)


def questions(split: str | None = None) -> list[dict[str, Any]]:
    """The measurement set, one dict a question (`split`: only that half)."""
    rows = [json.loads(line) for line in (HOUSEHOLD / "questions.jsonl").read_text().splitlines() if line.strip()]
    return [row for row in rows if split is None or row["split"] == split]


def stated_figures(answer: dict[str, Any]) -> set[str]:
    """The figures an answer's JSON states, normalised (a number with two decimals or an integer; a date ISO)."""
    if answer.get("figure") is not None:
        return {_normal(str(answer["figure"]))}
    if answer.get("kind") in ("list", "count") and answer.get("matched") is not None:
        return {str(answer["matched"])}
    text = re.sub(r"\[\d+\]", "", answer.get("answer", ""))  # citation markers are not figures
    found = {_normal(n.replace(",", "")) for n in _NUMBER.findall(text)}
    found |= {_iso(m) for m in _DAY.finditer(text)}
    return found - {""}


def _normal(value: str) -> str:
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return value
    try:
        number = Decimal(value.replace(",", ""))
    except InvalidOperation:
        return value
    return str(int(number)) if number == number.to_integral_value() and "." not in value else f"{number:.2f}"


def _iso(match: re.Match[str]) -> str:
    return date(int(match[3]), _MONTHS.index(match[2].lower()) + 1, int(match[1])).isoformat()


def right_figure(row: dict[str, Any], answer: dict[str, Any]) -> bool:
    expected = _normal(row["figure"])
    stated = stated_figures(answer)
    if answer.get("figure") is not None or answer.get("kind") in ("list", "count"):
        return expected in stated  # a typed figure: exactly the expected one
    # Free text: the expected figure among the numbers it states, an integer count also as "N.00".
    return expected in stated or f"{expected}.00" in stated


def every_unit(row: dict[str, Any], answer: dict[str, Any]) -> bool:
    cited = {c["source"] for c in answer.get("citations", [])}
    cited |= {u.get("source") for u in answer.get("units", [])}
    return all(any(PREFIX + path in cited for path in group) for group in row["units"])


def score(row: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    figure, units = right_figure(row, answer), every_unit(row, answer)
    return {"id": row["id"], "split": row["split"], "class": row["class"], "kind": answer.get("kind"),
            "right_figure": figure, "every_unit": units, "right": figure and units,
            "complete": answer.get("complete"), "wrong_complete": answer.get("complete") is True and not figure,
            "stated": sorted(stated_figures(answer))[:6], "expected": row["figure"]}


def run(label: str = "") -> dict[str, Any]:
    """Index a copy of the household folders and score every question; returns the per-question scores."""
    import ragstead
    from ragstead.request.model import AskRequest, Scope

    scores = []
    with tempfile.TemporaryDirectory(prefix="ragstead-bench-aggregates-") as scratch:
        root = Path(scratch)
        shutil.copytree(HOUSEHOLD / "kb", root / "kb")
        with ragstead.open(root, roots=("kb",)) as kb:
            kb.index()
            for row in questions():
                answer = kb.ask(AskRequest(row["question"], scope=Scope(user=USER), extractive=True, limit=200))
                scores.append({**score(row, answer.to_dict()), "answer": answer.text[:300]})
    return {"label": label, "questions": scores}


def table(scores: list[dict[str, Any]]) -> list[list[str]]:
    rows = [["half", "questions", "right figure", "every unit listed", "right (both)", "wrong figure, complete"]]
    for half in ("fit", "heldout", None):
        chosen = [s for s in scores if half is None or s["split"] == half]
        count = len(chosen)
        rows.append([half or "all", str(count)] + [
            f"{sum(s[key] for s in chosen)}/{count}" for key in ("right_figure", "every_unit", "right")]
            + [str(sum(s["wrong_complete"] for s in chosen))])
    return rows


def main(label: str = "") -> None:
    data = run(label)
    name = "aggregates" + (f"_{label}" if label else "")
    write_results(name, data, table(data["questions"]))
    for s in data["questions"]:
        mark = "ok " if s["right"] else ("WC " if s["wrong_complete"] else "-- ")
        print(mark, s["split"][:3], s["id"], s["kind"], "stated", s["stated"], "expected", s["expected"],
              "units" if s["every_unit"] else "missing units")
