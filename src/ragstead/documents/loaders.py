"""Loaders: one function per format, each returning plain text plus what citations need.

A loader raises `LoadError` (never anything else) for a file it cannot read, so the indexer can
report it, skip it and index the rest.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragstead.errors import LoadError, UnsupportedFileError

# Files larger than this are skipped: a knowledge base of notes and reports has no business
# loading a multi-GB file into memory, and one such file must not take the whole run down.
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass
class LoadedDocument:
    """Text of one file. `page_starts[i]` is the char offset where page i+1 begins (PDF only)."""

    text: str
    title: str | None = None
    page_starts: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)


def _decode(data: bytes, path: Path) -> str:
    if b"\x00" in data[:8192]:
        raise LoadError(f"{path}: looks binary (NUL bytes), skipped")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Legacy 8-bit text is common in old notes; cp1252 decodes it without losing words.
        return data.decode("cp1252", errors="replace")


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)
_TAGS_LINE = re.compile(r"^tags\s*:\s*(.+)$", re.MULTILINE)


def _front_matter_tags(text: str) -> tuple[str, list[str]]:
    """Strip YAML front matter; return (body, tags). Only `tags: [a, b]` or `tags: a, b` is read."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return text, []
    tags: list[str] = []
    line = _TAGS_LINE.search(match.group(1))
    if line:
        raw = line.group(1).strip().strip("[]")
        tags = [t.strip().strip("'\"").lower() for t in raw.split(",") if t.strip().strip("'\"")]
    return text[match.end() :], tags


def load_text(path: Path) -> LoadedDocument:
    """Plain text, decoded as UTF-8 (cp1252 fallback)."""
    return LoadedDocument(text=_decode(path.read_bytes(), path))


def load_markdown(path: Path) -> LoadedDocument:
    """Markdown, kept as text (headings are used by the markdown chunker); front-matter tags read."""
    body, tags = _front_matter_tags(_decode(path.read_bytes(), path))
    title = next((line.lstrip("# ").strip() for line in body.splitlines() if line.startswith("# ")), None)
    return LoadedDocument(text=body, title=title, tags=tags)


def load_pdf(path: Path) -> LoadedDocument:
    """PDF text per page with pypdf; page boundaries kept so chunks cite their page."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            raise LoadError(f"{path}: PDF is encrypted, skipped")
        parts: list[str] = []
        starts: list[int] = []
        offset = 0
        for page in reader.pages:
            page_text = (page.extract_text() or "").strip()
            starts.append(offset)
            parts.append(page_text)
            offset += len(page_text) + 2  # the "\n\n" joiner
        title = None
        if reader.metadata is not None and reader.metadata.title:
            title = str(reader.metadata.title)
    except LoadError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError) as exc:
        raise LoadError(f"{path}: corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from exc
    return LoadedDocument(text="\n\n".join(parts), title=title, page_starts=starts)


_BOILERPLATE_TAGS = "script, style, noscript, nav, header, footer, aside, form, iframe, svg, template"


def load_html(path: Path) -> LoadedDocument:
    """Main text of an HTML page with selectolax: boilerplate elements dropped, <main>/<article> preferred."""
    from selectolax.lexbor import LexborHTMLParser

    html = _decode(path.read_bytes(), path)
    tree = LexborHTMLParser(html)
    title_node = tree.css_first("title")
    title = title_node.text(strip=True) if title_node else None
    for node in tree.css(_BOILERPLATE_TAGS):
        node.decompose()
    # Hidden content is not what a reader sees; indexing it invites prompt-injection payloads.
    for node in tree.css('[hidden], [aria-hidden="true"], [style*="display:none"], [style*="display: none"]'):
        node.decompose()
    root = tree.css_first("main") or tree.css_first("article") or tree.body or tree.root
    text = root.text(separator="\n", strip=True) if root is not None else ""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return LoadedDocument(text=text, title=title)


def load_docx(path: Path) -> LoadedDocument:
    """Word .docx paragraphs and table cells, in document order of paragraphs then tables."""
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        raise LoadError(f"{path}: corrupt or unreadable DOCX ({type(exc).__name__}: {exc})") from exc
    parts = [p.text for p in document.paragraphs if p.text.strip()]
    for table in document.tables:
        for row in table.rows:
            cells = [cell.text.strip() for cell in row.cells if cell.text.strip()]
            if cells:
                parts.append(" | ".join(cells))
    title = document.core_properties.title or None
    return LoadedDocument(text="\n\n".join(parts), title=title)


LOADERS: dict[str, Callable[[Path], LoadedDocument]] = {
    ".txt": load_text,
    ".text": load_text,
    ".md": load_markdown,
    ".markdown": load_markdown,
    ".pdf": load_pdf,
    ".html": load_html,
    ".htm": load_html,
    ".docx": load_docx,
}


def is_supported(path: Path) -> bool:
    """True when a loader exists for the file's extension."""
    return path.suffix.lower() in LOADERS


def load_document(path: Path) -> LoadedDocument:
    """Load any supported file. Raises `UnsupportedFileError` or `LoadError` with a message for the user."""
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise UnsupportedFileError(f"{path}: unsupported file type {path.suffix or '(none)'!r}, skipped")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise LoadError(f"{path}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit, skipped")
        return loader(path)
    except LoadError:
        raise
    except (OSError, UnicodeError) as exc:
        raise LoadError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from exc
