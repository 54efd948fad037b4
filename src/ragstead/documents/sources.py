"""Where an ingested document came from, as a reader wants it: the link a citation opens (with the video
time for a transcript chunk), and the source fields front matter or a sidecar carries into the index.

The archive of `ragstead ingest` is what gets indexed, so the source metadata travels with the file:
markdown archives carry it in front matter (`source_url: …`), PDFs and text in a sidecar
`<file>.source.json`. A plain file has neither and no source.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# The fields an index keeps per ingested document (front matter keys are these with a `source_` prefix where
# they would be ambiguous: source_url, source_type, source_key, source_id).
SOURCE_FIELDS = ("url", "type", "key", "id", "canonical_url", "fetched_at", "author", "published_at", "site_name",
                 "content_hash", "feed")  # feed: the RSS/Atom feed an entry was ingested from (freshness --urls)
SIDECAR_SUFFIX = ".source.json"
_MAX_VALUE = 2000
# A transcript section heading ("12:03", "1:02:03"), as the YouTube fetcher writes it: the chunk's start time.
_TIMESTAMP = re.compile(r"(?:(\d+):([0-5]\d)|(\d+):([0-5]\d):([0-5]\d))")
_TIME_HEADING = re.compile(r"^#{2,6}[ \t]+(\d[\d:]*\d)[ \t]*$", re.MULTILINE)


_LINK_FIELDS = ("url", "canonical_url", "feed")


def web_url(value: Any) -> str | None:
    """`value` if it is an http(s) URL, else None: a link a client opens (front matter is anyone's text, and
    `javascript:` or `data:` there must not reach an API or MCP client as a citation link)."""
    if not isinstance(value, str) or any(ch.isspace() or ord(ch) < 32 for ch in value.strip()):
        return None
    try:
        parts = urlsplit(value.strip())
    except ValueError:
        return None
    return value.strip() if parts.scheme.lower() in ("http", "https") and parts.netloc else None


def clean_source(raw: dict[str, Any]) -> dict[str, Any] | None:
    """Keep the known fields as short strings; None when there is no URL (nothing to cite)."""
    source = {}
    for name in SOURCE_FIELDS:
        value = raw.get(name)
        if value is None or value == "":
            continue
        source[name] = str(value)[:_MAX_VALUE]
    return source if source.get("url") else None


def client_source(source: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored source as results show it: its links only when they are http(s) (a dossier's database URL
    and a front-matter `javascript:` alike stay in the index, never in a result)."""
    if not isinstance(source, dict):
        return None
    shown = {name: value for name, value in source.items() if name not in _LINK_FIELDS or web_url(value)}
    return shown or None


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> tuple[dict[str, Any] | None, list[str], str | None]:
    """(source, tags, title) of a PDF or text archive, from its sidecar; (None, [], None) if there is none or it
    is unreadable (the file is still indexed, as a plain file)."""
    try:
        data = json.loads(sidecar_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, [], None
    if not isinstance(data, dict):
        return None, [], None
    tags = [str(t).lower()[:100] for t in data.get("tags", []) if str(t).strip()] \
        if isinstance(data.get("tags"), list) else []
    title = str(data["title"])[:500] if data.get("title") else None
    return clean_source(data), tags, title


def from_front_matter(fields: dict[str, str]) -> dict[str, Any] | None:
    """The source of a markdown archive, from its front matter fields."""
    raw = {name: fields.get(f"source_{name}", fields.get(name)) for name in SOURCE_FIELDS}
    raw["url"] = fields.get("source_url")
    raw["type"] = fields.get("source_type")
    raw["key"] = fields.get("source_key")
    raw["id"] = fields.get("source_id")
    return clean_source(raw)


def timestamp_seconds(section_path: str | None) -> int | None:
    """The start time, in seconds, named by the last component of a chunk's `section_path`
    ("Title > 1:23" → 83, "Title > 1:02:03" → 3723), or None when it names no time."""
    if not section_path:
        return None
    match = _TIMESTAMP.fullmatch(section_path.rsplit(">", 1)[-1].strip())
    if match is None:
        return None
    if match.group(1) is not None:
        return int(match.group(1)) * 60 + int(match.group(2))
    return int(match.group(3)) * 3600 + int(match.group(4)) * 60 + int(match.group(5))


def with_time(url: str, seconds: int) -> str:
    """The video URL that starts playing at `seconds` (`&t=83s`)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "t"]
    query.append(("t", f"{seconds}s"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def citation_link(source: dict[str, Any] | None, section_path: str | None,
                  text: str = "") -> tuple[str | None, int | None]:
    """(the link a citation of this chunk opens, the video time in seconds or None). A transcript chunk starts
    at its section's time, or, when it starts before the first one (the title), at the first in its text."""
    source = client_source(source)
    if not source or not source.get("url"):
        return None, None
    url = source.get("canonical_url") or source["url"]
    if source.get("type") == "Video":
        seconds = timestamp_seconds(section_path)
        if seconds is None:
            first = _TIME_HEADING.search(text)
            seconds = timestamp_seconds(first.group(1)) if first else None
        if seconds is not None:
            return with_time(source["url"], seconds), seconds
    return url, None


TABULAR_SUFFIXES = (".csv", ".tsv", ".xlsx", ".ods")  # rendered one row a line ("month: 2025-02; category: …")


def tabular(path: str) -> bool:
    """Whether a source is a spreadsheet, whose text is one row a line (documents/formats/sheets.py)."""
    return path.lower().endswith(TABULAR_SUFFIXES)
