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
                 "content_hash")
SIDECAR_SUFFIX = ".source.json"
_MAX_VALUE = 2000
# A transcript section heading ("12:03", "1:02:03"), as the YouTube fetcher writes it: the chunk's start time.
_TIMESTAMP = re.compile(r"(?:^|>\s*|\s)(?:(\d{1,2}):)?(\d{1,2}):(\d{2})\s*$")


def clean_source(raw: dict[str, Any]) -> dict[str, Any] | None:
    """Keep the known fields as short strings; None when there is no URL (nothing to cite)."""
    source = {}
    for name in SOURCE_FIELDS:
        value = raw.get(name)
        if value is None or value == "":
            continue
        source[name] = str(value)[:_MAX_VALUE]
    return source if source.get("url") else None


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
    """The start time a transcript chunk's section heading names (`… > 1:02:03`), in seconds."""
    if not section_path:
        return None
    found = _TIMESTAMP.search(section_path)
    if not found:
        return None
    hours, minutes, seconds = int(found[1] or 0), int(found[2]), int(found[3])
    return hours * 3600 + minutes * 60 + seconds if seconds < 60 else None


def with_time(url: str, seconds: int) -> str:
    """The video URL that starts playing at `seconds` (`&t=83s`)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "t"]
    query.append(("t", f"{seconds}s"))
    return urlunsplit(parts._replace(query=urlencode(query)))


def citation_link(source: dict[str, Any] | None, section_path: str | None) -> tuple[str | None, int | None]:
    """(the link a citation of this chunk opens, the video time in seconds or None)."""
    if not source or not source.get("url"):
        return None, None
    url = source.get("canonical_url") or source["url"]
    if source.get("type") == "Video":
        seconds = timestamp_seconds(section_path)
        if seconds is not None:
            return with_time(source["url"], seconds), seconds
    return url, None
