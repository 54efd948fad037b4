"""Write the notes set's Word and PDF notes from the texts below (python-docx, and the repo's own PDF writer).

Run from the repository root: `.venv/bin/python tests/data/notes/make_binaries.py`. The files are committed; this
script only shows how they were made and remakes them byte-for-byte in content (not in timestamps).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for helpers.note_binaries

from helpers.note_binaries import write_binaries  # noqa: E402

DOCX = {
    "hiring/debrief-candidate-k.docx": (
        "Debrief – candidate K. (senior backend)",
        ["Date: 18 April 2024. Interviewers: Jonas, Priya, Marta and me.",
         "Take-home: clean code and good tests, but it missed pagination on the list endpoint. Jonas: strong yes.",
         "System design: event ingestion with a queue and idempotent consumers; weak on capacity estimates. "
         "Priya: yes.",
         "Team fit: Marta yes, me yes.",
         "Decision: we make an offer at 92k €, start date 1 July if possible. Hanna sends the offer on Monday."]),
    "work/beacon-decisions.docx": (
        "Project Beacon – decision log",
        ["D1 (2024-04-12): The site is hosted on Vercel, so marketing can preview every branch.",
         "D2 (2024-04-19): The blog moves to the main domain under /blog; old blog URLs redirect with 301s.",
         "D3 (2024-05-07): Storyblok is the CMS (see the weekly of that day).",
         "D4 (2024-05-14): No cookie banner: we switch to Plausible analytics, which sets no cookies.",
         "D5 (2024-05-21): English and German at launch; French waits until after the summer."]),
}

PDF = {
    "work/offsite-agenda.pdf": (
        "Offsite Lisbon - day 2 agenda",
        "Offsite Lisbon - day 2 agenda (17 October)\n\n"
        "09:00 Coffee and pastries in the hotel lobby.\n"
        "09:30 Strategy workshop, part 1: where do we win in 2025?\n"
        "11:00 Break.\n"
        "11:15 Workshop, part 2: every team picks three bets for next year.\n"
        "12:30 Lunch at the hotel.\n"
        "14:00 The bus leaves for Carcavelos. The surf lesson runs from 15:00 to 17:00, wetsuits and boards "
        "are provided.\n"
        "19:30 Free evening; the hotel recommends the miradouro at Santa Luzia for the sunset.\n"),
    "work/q3-okrs.pdf": (
        "Q3 2024 OKRs - platform team",
        "Q3 2024 OKRs - platform team\n\n"
        "Objective 1: Make Atlas boring to run.\n"
        "KR1: p95 API latency under 300 ms. KR2: zero severity 1 incidents. KR3: a restore from backup is tested "
        "every month.\n\n"
        "Objective 2: Onboard the second pilot customer.\n"
        "KR1: a signed contract by 15 August. KR2: onboarding takes under 10 working days.\n\n"
        "Objective 3: Grow the team.\n"
        "KR1: hire two backend engineers. KR2: every new hire ships to production in their first week.\n"),
}


def write(folder: Path) -> None:
    write_binaries(folder, DOCX, PDF)


if __name__ == "__main__":
    write(HERE / "notes")
    print(f"{len(DOCX)} docx, {len(PDF)} pdf notes written under {HERE / 'notes'}")
