"""The archive of ingested sources, under the target's private tree:
`…/ingested/{SourceType}/{YYYY-MM}/{sourceId}-{sanitized-title}.{ext}`.

The archive is what gets indexed, so `ragstead index --rebuild` rebuilds everything without the network.
Pages, videos and posts are kept as markdown with their source in front matter; PDFs and text as fetched,
with the source in a sidecar `<file>.source.json`. Every file is written atomically (temp file + rename).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

from ragstead.core.atomic import make_private_folder, write_bytes_atomically
from ragstead.documents.sources import clean_source, sidecar_path
from ragstead.ingest.base import Extracted

MAX_TITLE_BYTES = 80  # of the sanitized title in a file name (UTF-8): paths stay well under NAME_MAX (255)
_UNSAFE = re.compile(r"[^\w.-]+", re.UNICODE)


def sanitize_title(title: str | None) -> str:
    """A title as a file-name part: NFKC, no path separators, dots or control characters that could mean
    traversal or hiding, words joined by '-', at most MAX_TITLE_BYTES of UTF-8 (cut on a character)."""
    text = unicodedata.normalize("NFKC", title or "")
    text = _UNSAFE.sub("-", text.replace(".", "-")).strip("-_")
    text = re.sub(r"-{2,}", "-", text)
    encoded = text.encode("utf-8")[:MAX_TITLE_BYTES]
    text = encoded.decode("utf-8", "ignore").strip("-_")
    return text.lower() or "untitled"


def _month(fetched_at: str) -> str:
    return fetched_at[:7] if re.match(r"^\d{4}-\d{2}", fetched_at) else "unknown"


def archive_path(folder: Path, extracted: Extracted) -> Path:
    """Where this source is archived inside `folder` (the target's `ingested/` folder)."""
    # Case kept: video ids are case-sensitive, so two videos never share an archive file.
    source_id = re.sub(r"[^A-Za-z0-9_-]+", "-", extracted.source_id).strip("-")[:40] or "source"
    name = f"{source_id}-{sanitize_title(extracted.title)}.{extracted.ext}"
    return folder / extracted.source_type / _month(extracted.fetched_at) / name


def content_hash(extracted: Extracted) -> str:
    """The hash `--refresh` compares: of the extracted text (pages) or the bytes (PDFs, text)."""
    data = extracted.body.encode("utf-8") if isinstance(extracted.body, str) else extracted.body
    return hashlib.sha256(data).hexdigest()


def source_fields(extracted: Extracted, key: str) -> dict[str, Any]:
    """What the index keeps about where the document came from (documents/sources.py)."""
    return clean_source({
        "url": extracted.url, "type": extracted.source_type, "key": key, "id": extracted.source_id,
        "canonical_url": extracted.canonical_url, "fetched_at": extracted.fetched_at, "author": extracted.author,
        "published_at": extracted.published_at, "site_name": extracted.site_name,
        "content_hash": content_hash(extracted),
    }) or {}


def _front_matter_value(value: str) -> str:
    # JSON strings are valid YAML double-quoted scalars; the escaping keeps a value on one line, so no value
    # can end the front matter or add a key.
    return json.dumps(value, ensure_ascii=False)


def render_markdown(extracted: Extracted, source: dict[str, Any], tags: list[str]) -> str:
    """The markdown archive: front matter (title, source fields, tags), then the extracted text."""
    lines = ["---"]
    if extracted.title:
        lines.append(f"title: {_front_matter_value(extracted.title)}")
    prefixed = {"url", "type", "key", "id"}
    for name, value in source.items():
        lines.append(f"{'source_' + name if name in prefixed else name}: {_front_matter_value(value)}")
    if tags:
        lines.append(f"tags: [{', '.join(_front_matter_value(t) for t in tags)}]")
    lines.append("---")
    body = extracted.text()
    if extracted.title and not body.lstrip().startswith("# "):
        body = f"# {extracted.title}\n\n{body}"
    return "\n".join(lines) + "\n\n" + body.rstrip() + "\n"


def write_archive(path: Path, extracted: Extracted, source: dict[str, Any], tags: list[str]) -> list[Path]:
    """Write the archive file (and its sidecar), each atomically; returns the files written. The sidecar is
    written first, so a crash never leaves a PDF without its source."""
    make_private_folder(path.parent)
    if extracted.ext == "md":
        write_bytes_atomically(path, render_markdown(extracted, source, tags).encode("utf-8"))
        return [path]
    sidecar = sidecar_path(path)
    meta = {**source, "title": extracted.title, "tags": tags}
    write_bytes_atomically(sidecar, json.dumps(meta, ensure_ascii=False, indent=1).encode("utf-8"))
    data = extracted.body if isinstance(extracted.body, bytes) else extracted.body.encode("utf-8")
    write_bytes_atomically(path, data)
    return [sidecar, path]
