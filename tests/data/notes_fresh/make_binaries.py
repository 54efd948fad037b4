"""Write the fresh notes set's Word and PDF notes from the texts below (python-docx, and the repo's own PDF writer).

Run from the repository root: `.venv/bin/python tests/data/notes_fresh/make_binaries.py`. The files are committed;
this script only shows how they were made and remakes them byte-for-byte in content (not in timestamps).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for helpers.note_binaries

from helpers.note_binaries import write_binaries  # noqa: E402

DOCX = {
    "bike/ebike-service.docx": (
        "E-bike – service record",
        ["Bike: Kalkhoff Endeavour 5, bought in May 2023 at Radhaus Nord. Battery: 625 Wh.",
         "First service on 2 September 2024 at Radhaus Nord: chain and rear brake pads replaced, gears adjusted. "
         "It cost 149 €.",
         "The odometer read 3,870 km at the service. The next service is due at 5,000 km or in spring, "
         "whichever comes first.",
         "Tyre pressure: 3.5 bar at the front, 4 bar at the back. Charge the battery indoors in winter.",
         "The frame number is WBK-0083341; a photo of it is in the insurance folder."]),
}

PDF = {
    "work/conference-talk.pdf": (
        "PyCon DE talk - notes",
        "PyCon DE talk - notes\n\n"
        "Title: Boring billing: moving 2 million invoices without downtime.\n"
        "Slot: Wednesday 23 April, 14:30, in the Kuppelsaal; 30 minutes including questions.\n"
        "The slides are due to the programme committee by 14 April as a PDF.\n"
        "Travel: the conference pays the hotel for two nights (Hotel am Schloss); I book the train myself "
        "and claim it back.\n"
        "Rehearsal with the team on 16 April at 16:00; Sabine wants to see the outline first.\n"),
    "home/household-insurance.pdf": (
        "Household contents insurance",
        "Household contents insurance\n\n"
        "Insurer: Hanse Mutual, policy number HM-3390217.\n"
        "Sum insured: 65,000 EUR for the contents of the flat, including bicycles up to 3,000 EUR.\n"
        "Premium: 118 EUR a year, paid every January. Excess: 150 EUR per claim.\n"
        "Covered: fire, burst pipes, storm, burglary. Not covered: floods and valuables above 20,000 EUR.\n"
        "The policy moves with us to Leipzig; report the new address within a month of the move.\n"),
}


def write(folder: Path) -> None:
    write_binaries(folder, DOCX, PDF)


if __name__ == "__main__":
    write(HERE / "notes")
    print(f"{len(DOCX)} docx, {len(PDF)} pdf notes written under {HERE / 'notes'}")
