"""What a format reader returns, and what it is given: labelled parts, the file's budget, a nested loader."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragstead.errors import LoadError


class Meter(Protocol):
    """The file's budget (`loaders.Budget`): its limits, its clock and its character count."""

    name: str
    limits: Any

    def tick(self) -> None: ...

    def add_chars(self, count: int) -> None: ...


class Nested(Protocol):
    """What the loader registry lends a reader for the files and markup inside its file."""

    def __call__(self, name: str, data: bytes) -> str | None:
        """The text of a file found inside another (an e-mail attachment), read by the loader its name's
        suffix picks under the same budget; None when no loader reads it or it is unreadable."""

    def html(self, markup: str) -> Any:
        """`markup` parsed by selectolax under the HTML loader's own checks (an EPUB chapter, a mail body)."""


@dataclass
class Parts:
    """A file as (citation label, text) parts in reading order: "slide 3", "sheet Inventory, row 2", a message."""

    parts: list[tuple[str, str]] = field(default_factory=list)
    title: str | None = None
    created_at: str | None = None  # ISO timestamp the content carries (an e-mail's Date)
    tags: list[str] = field(default_factory=list)
    # Documents of their own inside the file (an mbox's messages, an e-mail's attachments), each under its key
    # (`msg-3f2a9c0d1e4b`, `att-1`; documents.ids.part_path): indexed beside the file's own parts, if it has any.
    documents: list[tuple[str, Parts]] = field(default_factory=list)

    def add(self, label: str, text: str, budget: Meter, counted: bool = False) -> None:
        """Keep a part with text (an empty slide or row is no part), counted against the character limit
        unless a nested loader `counted` it already."""
        text = text.strip()
        if text:
            if not counted:
                budget.add_chars(len(text) + 2)
            self.parts.append((label, text))


def check_count(count: int, what: str, budget: Meter) -> None:
    """Refuse a file with more parts (slides, messages, chapters) than the page limit allows a PDF."""
    if count > budget.limits.max_pdf_pages:
        raise LoadError(f"{budget.name}: {count} {what}, over the {budget.limits.max_pdf_pages}-part limit "
                        "(max_pdf_pages), skipped")


def open_zip(data: bytes) -> zipfile.ZipFile:
    """The archive (already checked against the zip limits by the loader registry)."""
    return zipfile.ZipFile(io.BytesIO(data))


def xml_parser() -> Any:
    """An lxml parser that expands no entity and fetches nothing: a hostile file's DTD gets no say."""
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, recover=True)
