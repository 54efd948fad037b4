"""Files per second of each loader (#39), a row per format the index reads, on files made like
tests/helpers/format_files.py makes them but bigger: a 20-chapter EPUB, a 30-slide deck, a 2,000-row sheet
(xlsx, ods, csv), a message with a PDF attachment (.eml and Outlook .msg), a 200-message mbox, a vault note
with 40 [[links]] to titled notes, and for OCR one-line images in every image format, a 2-page TIFF and a
one-page scanned PDF (pages per second). Loading only (no chunking or embedding). Writes
bench/results/formats_speed.{json,md}. Run: PYTHONPATH=src:tests:. python bench/formats_speed.py"""

from __future__ import annotations

import io
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import docx

from bench.common import write_results
from helpers.format_files import (
    make_epub,
    make_heic,
    make_mbox,
    make_message,
    make_msg,
    make_ods,
    make_png,
    make_pptx,
    make_scanned_pdf,
    make_xlsx,
    text_image,
)
from helpers.pdf_writer import make_pdf
from ragstead.documents.loaders import load_document

PROSE = "The harbour committee agreed to repair the northern breakwater before the winter storms. " * 20
LINE = "The whiteboard says repair the breakwater"


def _image(kind: str, pages: int = 1) -> bytes:
    out = io.BytesIO()
    images = [text_image(f"{LINE} page {n + 1}") for n in range(pages)]
    images[0].save(out, kind, save_all=pages > 1, append_images=images[1:])
    return out.getvalue()


def _docx() -> bytes:
    document = docx.Document()
    for n in range(40):
        document.add_paragraph(f"{n}. {PROSE[:400]}")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# file name -> (what it is, its bytes, OCR pages in it or 0); the vault's linked notes are written beside it.
def files() -> dict[str, tuple[str, bytes, int]]:
    rows = [["Item", "Qty", "Note"]] + [[f"item {n}", n, "kept in the north shed"] for n in range(2000)]
    sent = datetime(2024, 3, 5, 9, tzinfo=UTC)
    links = " ".join(f"[[Note {n}]]" for n in range(40))
    return {
        "notes.txt": ("text, 40 paragraphs", "\n\n".join([PROSE[:400]] * 40).encode(), 0),
        "vault/plan.md": ("vault note, 40 [[links]] to titled notes", f"# Plan\n\n{PROSE}\n\n{links}\n".encode(), 0),
        "report.pdf": ("PDF with a text layer, 10 pages", make_pdf([PROSE[:800]] * 10), 0),
        "page.html": ("HTML page", f"<html><body><main>{'<p>' + PROSE + '</p>' * 10}</main></body></html>".encode(),
                      0),
        "report.docx": ("DOCX, 40 paragraphs", _docx(), 0),
        "book.epub": ("EPUB, 20 chapters", make_epub([(f"Chapter {n}", PROSE) for n in range(20)]), 0),
        "deck.pptx": ("PPTX, 30 slides", make_pptx([(f"Slide {n}", PROSE[:300]) for n in range(30)]), 0),
        "sheet.xlsx": ("XLSX, 2,000 rows × 3 (openpyxl, read-only)", make_xlsx({"Inventory": rows}), 0),
        "sheet.ods": ("ODS, the same sheet (lxml)", make_ods({"Inventory": [[str(c) for c in row] for row in rows]}),
                      0),
        "sheet.csv": ("CSV, the same sheet", "\n".join(",".join(str(c) for c in row) for row in rows).encode(), 0),
        "mail.eml": (".eml with a 2-page PDF attachment", make_message(
            "Review", PROSE, "Tue, 05 Mar 2024 10:00:00 +0100", {"r.pdf": make_pdf([PROSE, PROSE])}).as_bytes(), 0),
        "mail.msg": ("Outlook .msg with a 2-page PDF attachment (extract-msg)",
                     make_msg("Review", PROSE, sent, {"r.pdf": make_pdf([PROSE, PROSE])}), 0),
        "box.mbox": (".mbox, 200 messages (200 documents)", make_mbox([
            make_message(f"Note {n}", PROSE[:400], "Mon, 01 Jan 2024 09:00:00 +0000") for n in range(200)]), 0),
        "whiteboard.png": ("PNG, one line of text (OCR)", make_png(LINE), 1),
        "photo.jpg": ("JPEG, one line of text (OCR)", _image("JPEG"), 1),
        "photo.webp": ("WebP, one line of text (OCR)", _image("WEBP"), 1),
        "photo.heic": ("HEIC, one line of text (OCR, pillow-heif)", make_heic(LINE), 1),
        "scan.tiff": ("TIFF, 2 pages (OCR)", _image("TIFF", pages=2), 2),
        "scan.pdf": ("scanned PDF, one page (OCR)", make_scanned_pdf("A scanned letter about the breakwater"), 1),
    }


def main() -> None:
    table = [["file", "size", "files/s", "OCR pages/s"]]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "vault" / ".obsidian").mkdir(parents=True)
        for n in range(40):
            (Path(folder) / "vault" / f"Note {n}.md").write_text(f"---\ntitle: The titled note {n}\n---\nText.\n")
        for name, (what, data, pages) in files().items():
            path = Path(folder) / name
            path.write_bytes(data)
            load_document(path)  # warm: imports and, for OCR, Tesseract's first start
            runs = 3 if pages else 10
            start = time.perf_counter()
            for _ in range(runs):
                load_document(path)
            seconds = (time.perf_counter() - start) / runs
            rows.append({"file": name, "what": what, "bytes": len(data), "files_per_second": round(1 / seconds, 2),
                         "ocr_pages_per_second": round(pages / seconds, 2) if pages else None})
            table.append([what, f"{len(data) / 1024:.0f} KiB", f"{1 / seconds:.1f}",
                          f"{pages / seconds:.1f}" if pages else ""])
    write_results("formats_speed", {"rows": rows}, table)


if __name__ == "__main__":
    main()
