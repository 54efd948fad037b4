"""The SQL the two relational stores speak alike: SQLite (sqlite3, `?`) and PostgreSQL (psycopg, `%s`) differ
in these statements only by their parameter placeholder. What truly differs (full text, vector operators,
key lists, bulk copies, JSON paths) stays in each store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ragstead.filters import QueryFilters
from ragstead.stores.base import CHUNK_SELECT, DOCUMENT_FIELDS, DOCUMENT_SELECT, DocumentRecord

__all__ = ["FORMAT", "LAST_INDEXED_AT", "MANIFEST", "QMARK", "Statements", "document_row"]

# Needs no parameter: the same text for every driver.
MANIFEST = "SELECT file_path, doc_id, file_hash, size, mtime, root FROM documents"
LAST_INDEXED_AT = "SELECT max(indexed_at) FROM documents"


@dataclass(frozen=True)
class Statements:
    """The shared statements, spelled with one driver's placeholder (`mark`)."""

    mark: str

    def where(self, filters: QueryFilters, alias: str = "c") -> tuple[str, list[Any]]:
        """The scope filter as a WHERE fragment over `alias` and its parameters (filters.QueryFilters.to_sql)."""
        return filters.to_sql(alias, self.mark)

    def marks(self, count: int) -> str:
        """`count` placeholders, comma-separated (a VALUES row or an IN list)."""
        return ",".join([self.mark] * count)

    # -- meta ---------------------------------------------------------------------------------------

    @property
    def meta_value(self) -> str:
        return f"SELECT value FROM meta WHERE key = {self.mark}"

    @property
    def meta_upsert(self) -> str:
        """Set one meta key (key, value); both engines have had `ON CONFLICT ... DO UPDATE` for years."""
        return (f"INSERT INTO meta (key, value) VALUES ({self.mark}, {self.mark}) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value")

    # -- writes -------------------------------------------------------------------------------------

    @property
    def document_insert(self) -> str:
        """One documents row; its values are `document_row`'s, in DOCUMENT_FIELDS order."""
        return f"INSERT INTO documents ({', '.join(DOCUMENT_FIELDS)}) VALUES ({self.marks(len(DOCUMENT_FIELDS))})"

    @property
    def doc_tag_insert(self) -> str:
        return f"INSERT INTO doc_tags (doc_id, tag) VALUES ({self.mark}, {self.mark})"

    @property
    def document_touch(self) -> str:
        """A file's new size and mtime (size, mtime, file_path) when its content did not change."""
        return f"UPDATE documents SET size = {self.mark}, mtime = {self.mark} WHERE file_path = {self.mark}"

    # -- reads --------------------------------------------------------------------------------------

    def documents(self, where: str) -> str:
        """Documents (alias c) with DOCUMENT_SELECT's columns; `where` may end in ORDER BY / LIMIT."""
        return f"SELECT {DOCUMENT_SELECT} FROM documents c WHERE {where}"

    def documents_page(self, where: str) -> str:
        """The documents a filter admits, in path order, paged: parameters of `where`, then limit and offset."""
        return self.documents(f"{where} ORDER BY c.file_path LIMIT {self.mark} OFFSET {self.mark}")

    def document_by(self, column: str) -> str:
        """One document by `doc_id` or `file_path`."""
        if column not in ("doc_id", "file_path"):
            raise ValueError(f"no document lookup by {column!r}")
        return self.documents(f"c.{column} = {self.mark}")

    def document_count(self, where: str) -> str:
        """How many documents a filter admits (what a complete list answer examined)."""
        return f"SELECT COUNT(*) FROM documents c WHERE {where}"

    def tag_counts(self, where: str) -> str:
        return (f"SELECT t.tag, COUNT(*) AS n FROM doc_tags t JOIN documents c ON c.doc_id = t.doc_id WHERE {where} "
                "GROUP BY t.tag ORDER BY n DESC, t.tag")

    @property
    def document_of_chunk(self) -> str:
        return f"SELECT doc_id FROM chunks WHERE chunk_id = {self.mark}"

    def document_chunks(self, where: str) -> str:
        """Every chunk of one document with CHUNK_SELECT's columns, in order: the doc_id, then `where`'s parameters."""
        return (f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
                f"WHERE c.doc_id = {self.mark} AND {where} ORDER BY c.chunk_index")

    @property
    def chunks_without_sentence_vectors(self) -> str:
        """(id, text_hash, text) of chunks past an id with no sentence vectors: after, limit."""
        return (f"SELECT c.id, c.text_hash, c.text FROM chunks c WHERE c.id > {self.mark} AND NOT EXISTS "
                f"(SELECT 1 FROM chunk_sentences s WHERE s.chunk = c.id) ORDER BY c.id LIMIT {self.mark}")

    @property
    def sentence_vectors_upsert(self) -> str:
        """A chunk's sentence matrix (bytes, id, text_hash), only while the chunk still holds that text."""
        return (f"INSERT INTO chunk_sentences (chunk, vectors) SELECT id, {self.mark} FROM chunks "
                f"WHERE id = {self.mark} AND text_hash = {self.mark} "
                "ON CONFLICT (chunk) DO UPDATE SET vectors = excluded.vectors")


QMARK = Statements("?")  # sqlite3
FORMAT = Statements("%s")  # psycopg


def document_row(doc: DocumentRecord) -> tuple[Any, ...]:
    """A document's values for `Statements.document_insert`. Tags and source go in as JSON text (SQLite keeps the
    text, PostgreSQL reads it into jsonb); `is_private` stays a bool (sqlite3 stores it as 1/0)."""
    return (doc.doc_id, doc.file_path, doc.root, doc.file_hash, doc.size, doc.mtime, doc.doc_type, doc.is_private,
            doc.user_slug, doc.subject, doc.created_at, doc.title, json.dumps(doc.tags),
            json.dumps(doc.source) if doc.source else None)
