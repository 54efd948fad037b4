"""Whole-folder questions (issue 46): sums, counts over a period, lists joined by "or", tags and sheet rows.

The household folders (tests/data/household) are the measurement set: written before any answering change,
in fit and held-out halves, scored by `python -m bench aggregates`.
"""

from __future__ import annotations

import json
from pathlib import Path

HOUSEHOLD = Path(__file__).parent / "data" / "household"


def test_the_household_set_has_thirty_questions_in_two_halves_over_files_that_exist() -> None:
    rows = [json.loads(line) for line in (HOUSEHOLD / "questions.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) >= 30 and len({row["id"] for row in rows}) == len(rows)
    assert {row["split"] for row in rows} == {"fit", "heldout"}
    assert min(sum(row["split"] == half for row in rows) for half in ("fit", "heldout")) >= 15
    for row in rows:
        assert row["figure"] and row["unit"] and row["units"], row["id"]
        for group in row["units"]:
            for path in group:
                assert (HOUSEHOLD / "kb/users/ana" / path).is_file(), (row["id"], path)
    kinds = {path.suffix for path in (HOUSEHOLD / "kb").rglob("*") if path.is_file()}
    assert {".eml", ".md", ".csv", ".xlsx", ".pdf"} <= kinds
