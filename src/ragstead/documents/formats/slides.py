"""PowerPoint .pptx with python-pptx: a slide is a part ("slide 3"), with its text boxes, tables and notes."""

from __future__ import annotations

import io

from ragstead.documents.formats.parts import Meter, Nested, Parts, check_count
from ragstead.errors import UnsupportedFileError


def _shape_lines(shape) -> list[str]:  # type: ignore[no-untyped-def]
    """The text of one shape: a text frame's paragraphs, a table's rows, a group's members."""
    if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        return [p.text for p in shape.text_frame.paragraphs if p.text.strip()]
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = (" | ".join(c.text.strip() for c in row.cells if c.text.strip()) for row in shape.table.rows)
        return [row for row in rows if row]
    if hasattr(shape, "shapes"):  # a group
        return [line for member in shape.shapes for line in _shape_lines(member)]
    return []


def read_pptx(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """Each slide's text in shape order, then its speaker notes; the deck's core title is the title."""
    try:
        from pptx import Presentation
    except ImportError:  # the `office` extra: the file is skipped with the reason, the run goes on (as for OCR)
        raise UnsupportedFileError(f"{budget.name}: a .pptx needs pip install 'ragstead[office]' (python-pptx), "
                                   "skipped") from None

    deck = Presentation(io.BytesIO(data))
    slides = list(deck.slides)
    check_count(len(slides), "slides", budget)
    found = Parts(title=deck.core_properties.title or None)
    for number, slide in enumerate(slides, start=1):
        budget.tick()
        lines = [line for shape in slide.shapes for line in _shape_lines(shape)]
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            lines.append(slide.notes_slide.notes_text_frame.text)
        found.add(f"slide {number}", "\n".join(lines), budget)
    return found
