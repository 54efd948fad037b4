"""A fetched web response made into an `Extracted`: the content type is sniffed so HTML, PDF and plain text
each take the right path; HTML goes through trafilatura's main-text extraction (navigation, ads and comments
dropped) with its metadata (title, author, date, site name, canonical URL)."""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from ragstead.ingest.base import Extracted, SourceError
from ragstead.ingest.fetch import Fetched

_HTML_TYPES = ("text/html", "application/xhtml+xml")
_HTML_START = re.compile(rb"^\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body|title|meta)\b", re.I | re.S)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
# Below this many characters of main text a page is taken to be empty (a paywall, a JavaScript-only page).
MIN_TEXT_CHARS = 80


def sniff(fetched: Fetched) -> str:
    """"html" | "pdf" | "text", from the bytes first and the declared type second; SourceError for binary
    content that is none of these."""
    head = fetched.data[:1024]
    if head.lstrip().startswith(b"%PDF-"):
        return "pdf"
    if fetched.content_type in _HTML_TYPES or _HTML_START.match(head):
        return "html"
    if fetched.content_type == "application/pdf":
        raise SourceError("declared a PDF but the body is not one")
    texty = not fetched.content_type or fetched.content_type.startswith("text/")  # _TEXT_TYPES and the rest
    if texty and b"\x00" not in head:
        return "text"
    raise SourceError(f"binary content ({fetched.content_type or 'unknown type'}), not a page, a PDF or text")


def name_in_url(url: str) -> str | None:
    """The last path segment of a URL without its extension ("report" for …/files/report.pdf)."""
    stem = PurePosixPath(unquote(urlsplit(url).path)).stem
    return stem or None


def extract_html(fetched: Fetched, url: str, source_id: str) -> Extracted:
    """Main text as markdown, and the page's metadata. SourceError when there is no main text."""
    import trafilatura
    from trafilatura.metadata import extract_metadata

    html = fetched.data
    markdown = trafilatura.extract(html, url=fetched.url, output_format="markdown", include_comments=False,
                                   include_tables=True, include_formatting=True, include_links=False,
                                   favor_precision=True)
    if not markdown or len(markdown.strip()) < MIN_TEXT_CHARS:
        raise SourceError("no main text found (a paywall, a login page or a page that needs JavaScript?)")
    meta = extract_metadata(html, default_url=fetched.url)
    title = (meta.title if meta else None) or _html_title(html) or name_in_url(url)
    canonical = meta.url if meta and meta.url and meta.url.startswith(("http://", "https://")) else None
    return Extracted(
        source_type="Article", source_id=source_id, url=url, body=markdown.strip() + "\n", ext="md", title=title,
        canonical_url=canonical if canonical != url else None, author=meta.author if meta else None,
        published_at=meta.date if meta else None, site_name=meta.sitename if meta else None,
    )


def _html_title(html: bytes) -> str | None:
    found = _TITLE.search(html[:200_000].decode("utf-8", "replace"))
    return " ".join(found.group(1).split())[:300] or None if found else None


def as_download(fetched: Fetched, url: str, source_id: str, kind: str) -> Extracted:
    """A PDF or a plain text file, archived as fetched."""
    return Extracted(source_type="PDF" if kind == "pdf" else "Text", source_id=source_id, url=url, body=fetched.data,
                     ext="pdf" if kind == "pdf" else "txt", title=name_in_url(fetched.url) or name_in_url(url),
                     extra={"sha256": hashlib.sha256(fetched.data).hexdigest()})


def extract(fetched: Fetched, url: str, source_id: str) -> Extracted:
    kind = sniff(fetched)
    if kind == "html":
        return extract_html(fetched, url, source_id)
    extracted = as_download(fetched, url, source_id, kind)
    if kind == "text" and (fetched.content_type in ("text/markdown", "text/x-markdown")
                           or urlsplit(fetched.url).path.lower().endswith((".md", ".markdown"))):
        extracted.ext = "md"  # kept as markdown, so its headings cut and name its sections
    return extracted
