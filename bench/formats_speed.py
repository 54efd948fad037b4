"""Files per second of each loader (#39), on files made like tests/helpers/format_files.py makes them but
bigger: a 20-chapter EPUB, a 30-slide deck, a 2,000-row sheet (xlsx, ods, csv), a message with a PDF
attachment, a 200-message mbox, a one-page image and a one-page scanned PDF (OCR). Loading only (no
chunking or embedding). Run: PYTHONPATH=src:tests python bench/formats_speed.py"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from helpers.format_files import (
    make_epub,
    make_mbox,
    make_message,
    make_ods,
    make_png,
    make_pptx,
    make_scanned_pdf,
    make_xlsx,
)
from helpers.pdf_writer import make_pdf
from ragstead.documents.loaders import load_document

PROSE = "The harbour committee agreed to repair the northern breakwater before the winter storms. " * 20


def files() -> dict[str, bytes]:
    rows = [["Item", "Qty", "Note"]] + [[f"item {n}", n, "kept in the north shed"] for n in range(2000)]
    return {
        "book.epub": make_epub([(f"Chapter {n}", PROSE) for n in range(20)]),
        "deck.pptx": make_pptx([(f"Slide {n}", PROSE[:300]) for n in range(30)]),
        "sheet.xlsx": make_xlsx({"Inventory": rows}),
        "sheet.ods": make_ods({"Inventory": [[str(c) for c in row] for row in rows]}),
        "sheet.csv": "\n".join(",".join(str(c) for c in row) for row in rows).encode(),
        "mail.eml": make_message("Review", PROSE, "Tue, 05 Mar 2024 10:00:00 +0100",
                                 {"r.pdf": make_pdf([PROSE, PROSE])}).as_bytes(),
        "box.mbox": make_mbox([make_message(f"Note {n}", PROSE[:400], "Mon, 01 Jan 2024 09:00:00 +0000")
                               for n in range(200)]),
        "whiteboard.png": make_png("The whiteboard says repair the breakwater"),
        "scan.pdf": make_scanned_pdf("A scanned letter about the breakwater"),
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name, data in files().items():
            path = Path(folder) / name
            path.write_bytes(data)
            load_document(path)  # warm: imports and, for OCR, Tesseract's first start
            runs = 3 if name.endswith((".png", "scan.pdf")) else 10
            start = time.perf_counter()
            for _ in range(runs):
                load_document(path)
            seconds = (time.perf_counter() - start) / runs
            print(f"| {name} | {len(data) / 1024:.0f} KiB | {1 / seconds:.1f} |")


if __name__ == "__main__":
    main()
