"""The Word and PDF notes of a notes set, written from their texts (python-docx, and the repo's own PDF writer):
shared by tests/data/notes/make_binaries.py and tests/data/notes_fresh/make_binaries.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

from helpers.pdf_writer import make_pdf


def write_binaries(folder: Path, docx_notes: dict[str, tuple[str, list[str]]],
                   pdf_notes: dict[str, tuple[str, str]]) -> None:
    """Each DOCX note (title, paragraphs) under its heading, each PDF note (title, text) wrapped at 90 columns."""
    import docx

    for rel, (title, paragraphs) in docx_notes.items():
        document = docx.Document()
        document.core_properties.title = title
        document.add_heading(title, level=1)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        document.save(str(folder / rel))
    for rel, (title, text) in pdf_notes.items():
        lines = [wrapped for line in text.split("\n") for wrapped in (textwrap.wrap(line, 90) or [""])]
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(make_pdf(["\n".join(lines)], title=title))
