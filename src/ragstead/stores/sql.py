"""The SQL the two relational stores speak alike: SQLite (sqlite3, `?`) and PostgreSQL (psycopg, `%s`) differ
in these statements only by their parameter placeholder, and `SqlStore` runs them the same way for both. What
truly differs (full text, vector operators, key lists, bulk copies, transactions, JSON paths) stays in each store.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from ragstead.filters import QueryFilters
from ragstead.stores.base import (
    CHUNK_SELECT,
    DOCUMENT_FIELDS,
    DOCUMENT_SELECT,
    ChunkRow,
    DocumentRecord,
    DocumentRow,
    ManifestEntry,
    check_same_model,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["FORMAT", "LAST_INDEXED_AT", "MANIFEST", "QMARK", "SqlStore", "Statements", "document_row"]

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


class SqlStore(ABC):
    """The store methods SQLite and PostgreSQL run alike, over `Statements`. A store gives its placeholder's
    statements, the SQL of a source's dedup key, and how it runs a statement (`_rows`, `_dicts`, `_write`: a
    connection of its own or one from a pool, its transactions); the filters stay inside every statement."""

    statements: ClassVar[Statements]
    source_key: ClassVar[str]  # `source["key"]` of documents `c`, in the store's JSON syntax
    path: Any  # the index, as messages name it (a file, or a URL without its secrets)

    @abstractmethod
    def _rows(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement (in a transaction of its own where the driver needs one) and return its rows."""

    @abstractmethod
    def _dicts(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        """A DOCUMENT_SELECT or CHUNK_SELECT query's rows as dicts, tags and source decoded and is_private a bool:
        the same keys and types from every store (base.DocumentRow, base.ChunkRow)."""

    @abstractmethod
    def _write(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run `sql` once for each parameter row, all in one transaction; return the rows it changed."""

    def _chunk_where(self, filters: QueryFilters) -> tuple[str, list[Any]]:
        """The scope's WHERE over chunks `c` (PostgreSQL's partitioned layout adds its owner clause)."""
        return self.statements.where(filters)

    def _metas(self, *keys: str) -> dict[str, str]:
        """These keys' values in the index's `meta` table, in one statement (absent keys are left out)."""
        return dict(self._rows(f"SELECT key, value FROM meta WHERE key IN ({self.statements.marks(len(keys))})",
                               keys))

    # -- model and chunking ---------------------------------------------------------------------------

    def embed_model(self) -> str | None:
        """The model the index was built with, or None (read from meta, no counting)."""
        return self._metas("embed_model").get("embed_model")

    def check_model(self, model: str, dim: int) -> None:
        """Read-only guard for queries: raise ModelMismatchError if the index holds another model's vectors."""
        meta = self._metas("embed_model", "embed_dim")
        check_same_model(str(self.path), meta.get("embed_model"), meta.get("embed_dim"), model, dim, writing=False)

    def chunking(self) -> str | None:
        """The chunking the index was built with (as `record_chunking` wrote it), or None."""
        return self._metas("chunking").get("chunking")

    def record_chunking(self, chunking: str) -> None:
        """Record how the index's text was cut (the settings guard compares it on every write)."""
        self._write(self.statements.meta_upsert, [("chunking", chunking)])

    # -- manifest and sentence vectors ----------------------------------------------------------------

    def manifest(self) -> dict[str, ManifestEntry]:
        """file_path -> manifest entry, for incremental indexing."""
        return {r[0]: ManifestEntry(r[1], r[2], r[3], r[4], r[5]) for r in self._rows(MANIFEST)}

    def last_indexed_at(self) -> str | None:
        """The latest `indexed_at` of any document, or None when there are none."""
        return cast("str | None", self._rows(LAST_INDEXED_AT)[0][0])

    def chunks_without_sentence_vectors(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """(row id, text hash, text) of up to `limit` chunks with a row id above `after` and no sentence vectors."""
        return cast("list[tuple[int, str, str]]",
                    self._rows(self.statements.chunks_without_sentence_vectors, (after, limit)))

    def put_sentence_vectors(self, rows: list[tuple[int, str, np.ndarray]]) -> int:
        """Store (row id, text hash, sentence matrix) in one transaction; a chunk deleted or rewritten since it
        was read (its text hash differs) is skipped, so no lock is needed. Returns the chunks stored."""
        import numpy as np

        if not rows:
            return 0
        return self._write(self.statements.sentence_vectors_upsert,
                           [(np.ascontiguousarray(matrix, dtype=np.float32).tobytes(), rowid, text_hash)
                            for rowid, text_hash, matrix in rows])

    # -- documents ------------------------------------------------------------------------------------

    def list_documents(self, filters: QueryFilters, limit: int = 1000, offset: int = 0) -> list[DocumentRow]:
        """Documents the filters admit (the same WHERE as the searches), in path order, paged."""
        where, params = self.statements.where(filters)
        return cast("list[DocumentRow]", self._dicts(self.statements.documents_page(where), [*params, limit, offset]))

    def count_documents(self, filters: QueryFilters) -> int:
        """How many documents the filters admit (the same WHERE as the searches)."""
        where, params = self.statements.where(filters)
        return int(self._rows(self.statements.document_count(where), params)[0][0])

    def get_document(self, doc_id: str | None = None, *, file_path: str | None = None) -> DocumentRow | None:
        """One document by id or by path, or None."""
        column, value = ("doc_id", doc_id) if doc_id is not None else ("file_path", file_path)
        found = self._dicts(self.statements.document_by(column), [value])
        return cast("DocumentRow", found[0]) if found else None

    def tag_counts(self, filters: QueryFilters) -> dict[str, int]:
        """Tags of the documents the filters admit -> how many carry each, most used first."""
        where, params = self.statements.where(filters)
        return {tag: count for tag, count in self._rows(self.statements.tag_counts(where), params)}

    def documents_from_source(self, key: str) -> list[DocumentRow]:
        """The documents ingested from the source with this dedup key (each store indexes the key)."""
        where = f"{self.source_key} = {self.statements.mark} ORDER BY c.file_path"
        return cast("list[DocumentRow]", self._dicts(self.statements.documents(where), [key]))

    def document_chunks(self, filters: QueryFilters, *, doc_id: str | None = None,
                        chunk_id: str | None = None) -> list[ChunkRow]:
        """Every chunk of one document (by id, or the one holding `chunk_id`), in order, if the filters admit it."""
        if chunk_id is not None:
            found = self._rows(self.statements.document_of_chunk, (chunk_id,))
            if not found:
                return []
            doc_id = found[0][0]
        where, params = self._chunk_where(filters)
        records = self._dicts(self.statements.document_chunks(where), [doc_id, *params])
        for record in records:
            del record["id"]
        return cast("list[ChunkRow]", records)  # the driver's rows, of CHUNK_SELECT's columns (test_store_protocols)
