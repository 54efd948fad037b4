"""Read indexed text back: one document's chunks, or one chunk with its neighbours, inside a scope.

What a cited `[n]` opens (the web page, `GET /v1/chunks/{id}`) and what an agent reads (`get_document` and the
`ragstead://doc/{id}` resource of `ragstead mcp`). The store's SQL filter decides the scope, as for a search;
the path backstop (`QueryFilters.admits`) only ever removes. A document out of scope reads like a missing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ragstead.documents.metadata import PathRule
from ragstead.documents.sources import citation_link, client_source
from ragstead.filters import QueryFilters
from ragstead.stores.base import Store

DOCUMENT_KEYS = ("doc_id", "file_path", "doc_type", "is_private", "user_slug", "created_at", "title", "tags",
                 "file_hash", "source")
CHUNK_KEYS = ("chunk_id", "chunk_index", "page", "section_path", "char_start", "char_end", "text")
MAX_CHUNKS = 200  # one read returns at most this many chunks; `offset` pages through a longer document


@dataclass(frozen=True)
class Passage:
    """Chunks of one document in reading order, with the document's metadata. `focus` is the chunk asked for
    (a citation's), `total_chunks` how many the document has. `to_dict()` is the documented JSON."""

    document: dict[str, Any]
    chunks: tuple[dict[str, Any], ...]
    total_chunks: int
    focus: str | None = None
    offset: int = 0

    @property
    def text(self) -> str:
        """The chunks' text, one paragraph each (chunks overlap a little: the index cuts them that way)."""
        return "\n\n".join(chunk["text"] for chunk in self.chunks)

    def to_dict(self) -> dict[str, Any]:
        return {"document": self.document, "focus": self.focus, "offset": self.offset,
                "total_chunks": self.total_chunks, "chunks": list(self.chunks)}


def read_passage(store: Store, filters: QueryFilters, rules: tuple[PathRule, ...], *, doc_id: str | None = None,
                 chunk_id: str | None = None, around: int | None = None, offset: int = 0,
                 limit: int = MAX_CHUNKS) -> Passage | None:
    """The chunks of the document `doc_id` (or of the one holding `chunk_id`) that `filters` admit, or None.

    With `chunk_id` and `around`: that chunk and up to `around` chunks on each side. Else `limit` chunks from
    `offset` (at most MAX_CHUNKS)."""
    if (doc_id is None) == (chunk_id is None):
        raise ValueError("give doc_id or chunk_id")
    rows = store.document_chunks(filters, doc_id=doc_id, chunk_id=chunk_id)
    rows = [row for row in rows if filters.admits(row["file_path"], rules)]
    if not rows:
        return None
    first: Mapping[str, Any] = rows[0]  # read by the key lists below
    document = {key: first.get(key) for key in DOCUMENT_KEYS}
    document["tags"] = list(document["tags"] or [])
    document["source"] = client_source(document.get("source"))  # only http(s) links reach a client
    document["url"] = (document["source"] or {}).get("url")
    if chunk_id is not None and around is not None:
        at = next((i for i, row in enumerate(rows) if row["chunk_id"] == chunk_id), None)
        if at is None:
            return None
        offset = max(0, at - around)
        chosen = rows[offset:at + around + 1]
    else:
        chosen = rows[offset:offset + max(1, min(limit, MAX_CHUNKS))]
    chunks = []
    for row in chosen:
        link, video_time = citation_link(row.get("source"), row["section_path"])
        chunk: Mapping[str, Any] = row
        chunks.append({**{key: chunk[key] for key in CHUNK_KEYS}, "link": link, "video_time": video_time})
    return Passage(document, tuple(chunks), len(rows), chunk_id, offset)
