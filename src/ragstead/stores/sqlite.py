"""The embedded default store: one SQLite file (WAL) with documents, chunks and vectors, a tantivy BM25
index beside it (`<name>.tantivy/`) and the vectors' search files (`<name>.vectors/`, vector_index.py).
SQLite is the source of truth and the filter: vector search scores only the rows its WHERE clause admits,
exactly up to EXACT_ROWS of them (docs/design.md, "The embedded store").
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from ragstead.errors import RagsteadError
from ragstead.filters import QueryFilters
from ragstead.stores.base import (
    CHUNK_FIELDS,
    CHUNK_SELECT,
    DOCUMENT_FIELDS,
    ChunkRow,
    DocumentRecord,
    DocumentWrite,
    assemble_writes,
    check_same_model,
)
from ragstead.stores.lexical_index import LexicalIndex, LexicalRow
from ragstead.stores.permissions import (
    companion_paths,
    create_private_file,
    index_paths,
    make_private_folder,
    tighten,
)
from ragstead.stores.redaction import redact
from ragstead.stores.sql import QMARK, SqlStore, document_row
from ragstead.stores.transaction import transaction

# numpy and the vector files are imported where vectors are read or written: listing the documents (`ls`, `tags`)
# needs neither (docs/benchmarks.md, "Start-up").
if TYPE_CHECKING:
    import numpy as np

    from ragstead.stores.vector_index import VectorIndex

SCHEMA_VERSION = 5
# settle_lexical: exact BM25 statistics up to this many chunks (a rebuild takes ~0.1 ms a chunk: 5 s here);
# above it, a rebuild once deletions reach this share (docs/design.md, "Exact lexical statistics").
EXACT_LEXICAL_ROWS = 50_000
LEXICAL_DRIFT_SHARE = 0.05
# Eligible-row sets kept per filter scope (each up to 8 bytes x chunks).
ELIGIBLE_CACHE_SIZE = 8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Bumped by every write transaction; the lexical index records the value it reflects.
INSERT OR IGNORE INTO meta VALUES ('lexical_generation', '0');
-- Chunks deleted from the lexical index since it was last built whole: they still count in its BM25
-- statistics until a rebuild (settle_lexical).
INSERT OR IGNORE INTO meta VALUES ('lexical_deleted', '0');
-- `language`: detected at index time (ISO 639-1, NULL when none was); the lexical index stems by it.
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY,
    file_path TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    file_hash TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime REAL NOT NULL,
    doc_type TEXT NOT NULL,
    is_private INTEGER NOT NULL,
    user_slug TEXT,
    subject TEXT,
    created_at TEXT,
    title TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    source TEXT,
    indexed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    language TEXT
);
CREATE TABLE IF NOT EXISTS doc_tags (
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    tag TEXT NOT NULL,
    PRIMARY KEY (doc_id, tag)
);
CREATE INDEX IF NOT EXISTS doc_tags_tag ON doc_tags(tag);
-- Filter columns are copied onto chunks so both searches filter without a join.
-- AUTOINCREMENT: an id is never reused, so a lexical hit can never name a different chunk.
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id TEXT NOT NULL UNIQUE,
    doc_id TEXT NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    chunk_index INTEGER NOT NULL,
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    start_word INTEGER NOT NULL,
    end_word INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    page INTEGER,
    section_path TEXT,
    token_estimate INTEGER NOT NULL,
    file_path TEXT NOT NULL,
    doc_type TEXT NOT NULL,
    is_private INTEGER NOT NULL,
    user_slug TEXT,
    created_at TEXT,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE INDEX IF NOT EXISTS chunks_text_hash ON chunks(text_hash);
CREATE INDEX IF NOT EXISTS chunks_scope ON chunks(is_private, user_slug, doc_type, created_at);
-- The sentence re-ranker's vectors (opt-in, `sentence_vectors`): one float32 row per sentence of the chunk, in
-- split_sentences order. A cache derived from chunks.text: it goes with its chunk, and is never exported.
CREATE TABLE IF NOT EXISTS chunk_sentences (
    chunk INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    vectors BLOB NOT NULL
);
"""

__all__ = ["SqliteStore", "VectorFiles", "VectorSide"]


def _document_dict(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    """A documents or chunks row (DOCUMENT_SELECT / CHUNK_SELECT) as the dict every store returns."""
    record = dict(zip([d[0] for d in cursor.description], row, strict=True))
    record["is_private"] = bool(record["is_private"])
    record["tags"] = json.loads(record["tags"])
    record["source"] = json.loads(record["source"]) if record.get("source") else None
    return record


# A scope of at most 1/EXACT_SCOPE_FRACTION of the index (and at most a vector index's `exact_scope_rows`) is
# scored exactly from SQLite, which beats Chroma's or Milvus's filtered search there (docs/design.md, "Chroma").
EXACT_SCOPE_FRACTION = 5

class SqliteStore(SqlStore):
    """`Store` backed by a SQLite file and its lexical index. Safe for one writer and many readers (WAL)."""

    def __init__(self, path: Path | str, *, project_root: Path | None = None, private_folders: Sequence[Path] = (),
                 vectors: Callable[[SqliteStore], VectorSide] | None = None) -> None:
        """`project_root`: the project the index belongs to; when given, the index's folder (unless it is the
        project root or above it, see permissions.own_folder) is kept private whole, lock files included;
        `private_folders`: the project's index folder, whose lock files and API keys are kept private too
        when this index lives elsewhere (permissions.companion_paths); `vectors`: makes the vector side for
        this store (default: the vector files, VectorFiles; the Chroma store passes its collection's)."""
        self.path = Path(path)
        self._project_root = project_root
        self._private_folders = tuple(private_folders)
        in_memory = str(path) == ":memory:"
        created = False
        if not in_memory:
            # Private from the first byte: a 0700 folder, and a 0600 file whose mode SQLite copies to its
            # -wal, -shm and -journal files whenever it creates them (docs/stores.md, "Private on disk").
            try:
                make_private_folder(self.path.parent)
                created = create_private_file(self.path)
            except OSError as exc:
                raise RagsteadError(f"cannot open index {path}: {exc}") from exc
        self._db = self._connect(str(path))
        try:
            self._check_schema_version()
        except sqlite3.DatabaseError as exc:
            raise RagsteadError(f"cannot open index {path}: {exc}") from exc
        self.lexical_path = None if in_memory else self.path.with_suffix(".tantivy")
        self._lexical = LexicalIndex(self.lexical_path)
        self._lexical_checked: tuple[int, int] | None = None
        self._generation = 0
        self._counted: tuple[tuple[int, int], int] | None = None  # chunk_count() by data version
        try:
            self.vectors: VectorSide = (vectors or VectorFiles)(self)
        except BaseException:
            self._lexical.release()
            self._db.close()
            raise
        if created:
            self._secure()

    @staticmethod
    def _connect(path: str) -> sqlite3.Connection:
        """Open the database and create its schema. Switching a new file to WAL takes an exclusive lock that
        SQLite's busy timeout does not wait for, so processes opening one new index at once take turns here."""
        deadline = time.monotonic() + 30
        while True:
            db = None
            try:
                db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute("PRAGMA foreign_keys=ON")
                db.executescript(_SCHEMA)
                return db
            except sqlite3.OperationalError as exc:
                if db is not None:
                    db.close()
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise RagsteadError(f"cannot open index {path}: {exc}") from exc
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                if db is not None:
                    db.close()
                raise RagsteadError(f"cannot open index {path}: {exc}") from exc

    def _private_paths(self) -> list[Path]:
        """The files and folders this store keeps at 0600 / 0700 (permissions.index_paths)."""
        if self.lexical_path is None:
            return []
        return [*index_paths(self.path, self._project_root), *self.vectors.private_paths()]

    def _secure(self) -> None:
        """Tighten what the last write created: tantivy's segment and lock files, lock files beside the
        index. Existing files that someone loosened are tightened too; `ragstead status` reports them
        in between."""
        tighten(self._private_paths())
        if self.lexical_path is not None:
            tighten([p for f in self._private_folders for p in companion_paths(f, self._project_root)], walk=False)

    # -- how it runs the shared statements (sql.SqlStore) ------------------------------------------

    statements = QMARK
    source_key = "json_extract(c.source, '$.key')"

    def _rows(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self._db.execute(sql, params or ()).fetchall()

    def _dicts(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        cursor = self._db.execute(sql, params)
        return [_document_dict(cursor, row) for row in cursor]

    def _write(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        changed = 0
        try:
            with transaction(self._db):
                for row in rows:
                    changed += self._db.execute(sql, row).rowcount
        finally:
            self._secure()
        return changed

    # -- metadata ---------------------------------------------------------------------------------

    def _meta(self, key: str) -> str | None:
        row = self._db.execute(QMARK.meta_value, (key,)).fetchone()
        return row[0] if row else None

    def _check_schema_version(self) -> None:
        version = self._meta("schema_version")
        if version is None:
            self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(version) in (3, 4):
            self._upgrade_schema()
        elif int(version) != SCHEMA_VERSION:
            raise RagsteadError(
                f"index {self.path} has schema version {version}, this ragstead needs {SCHEMA_VERSION}; "
                "delete the file and run `ragstead index` to rebuild it"
            )
        # `ragstead ingest`'s dedup looks documents up by their source's key.
        self._db.execute("CREATE INDEX IF NOT EXISTS documents_source_key ON documents(json_extract(source, '$.key'))")
        self._add_language_column()

    def _add_language_column(self) -> None:
        """An index written before documents kept their language (#47.1) gets the column, empty: its documents stay
        analysed as English until they are written again (`index --rebuild`). A nullable column an older ragstead
        never reads, so the schema version stays; looked up inside the transaction, so two processes opening the
        index at once add it once."""
        if "language" in self._document_columns():
            return
        with transaction(self._db):
            if "language" not in self._document_columns():
                self._db.execute("ALTER TABLE documents ADD COLUMN language TEXT")

    def _document_columns(self) -> set[str]:
        return {row[1] for row in self._db.execute("PRAGMA table_info(documents)")}

    def _upgrade_schema(self) -> None:
        """Bring a version 3 or 4 index to SCHEMA_VERSION in place, in one transaction: v4 added where an ingested
        document came from (`source`), v5 renamed `proxy_wallet` to the general `subject`. Each step looks at the
        table, not the version, so two processes opening the old index at once both end at the same layout."""
        with transaction(self._db):
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(documents)")}
            if "source" not in columns:
                self._db.execute("ALTER TABLE documents ADD COLUMN source TEXT")
            if "proxy_wallet" in columns:
                self._db.execute("ALTER TABLE documents RENAME COLUMN proxy_wallet TO subject")
            self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))

    def ensure_model(self, model: str, dim: int) -> None:
        """Record the model of an empty index; refuse to mix models in one index."""
        stored_model, stored_dim = self._meta("embed_model"), self._meta("embed_dim")
        if stored_model is None:
            with transaction(self._db):
                self._db.executemany(QMARK.meta_upsert, [("embed_model", model), ("embed_dim", str(dim))])
            return
        check_same_model(self.path, stored_model, stored_dim, model, dim, writing=True)

    def reset(self) -> None:
        """Drop all content and the recorded model (the next ensure_model records the new one)."""
        self._lexical.acquire()
        try:
            with transaction(self._db):
                self._db.execute("DELETE FROM chunks")
                self._db.execute("DELETE FROM doc_tags")
                self._db.execute("DELETE FROM documents")
                self._db.execute("DELETE FROM meta WHERE key IN ('embed_model', 'embed_dim')")
                self._db.execute("UPDATE meta SET value = '0' WHERE key = 'lexical_deleted'")
                generation = self._bump_generation()
            self._invalidate()
            self._lexical.replace_all(generation, iter(()))
            self.vectors.written(generation, None, [], None)
        finally:
            self._lexical.release()
            self._secure()

    # -- manifest and cache -----------------------------------------------------------------------

    def cached_vectors(self, text_hashes: list[str]) -> dict[str, np.ndarray]:
        """Reuse the stored vector of any chunk with the same text (the index holds one model only)."""
        import numpy as np

        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(text_hashes))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            rows = self._db.execute(
                f"SELECT text_hash, embedding FROM chunks WHERE text_hash IN ({','.join('?' * len(part))})",
                part,
            )
            for text_hash, blob in rows:
                found.setdefault(text_hash, np.frombuffer(blob, dtype=np.float32))
        return found

    # -- writes -----------------------------------------------------------------------------------

    def _sqlite_generation(self) -> int:
        """The generation of the last SQLite write, which the lexical index must match."""
        return int(self._meta("lexical_generation") or 0)

    def _bump_generation(self) -> int:
        self._db.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'lexical_generation'"
        )
        return self._sqlite_generation()

    def _delete_path(self, file_path: str) -> list[int]:
        """Delete a document (its chunks and tags cascade); return the chunk ids it had."""
        # Through documents: chunks has no index on file_path (a scan per document, quadratic overall).
        ids = [
            r[0]
            for r in self._db.execute(
                "SELECT c.id FROM documents d JOIN chunks c ON c.doc_id = d.doc_id WHERE d.file_path = ?", (file_path,)
            )
        ]
        self._db.execute("DELETE FROM documents WHERE file_path = ?", (file_path,))
        return ids

    def _insert(self, write: DocumentWrite) -> list[LexicalRow]:
        import numpy as np

        doc = write.document
        self._db.execute(QMARK.document_insert, document_row(doc))
        if write.language:
            self._db.execute("UPDATE documents SET language = ? WHERE doc_id = ?", (write.language, doc.doc_id))
        self._db.executemany(QMARK.doc_tag_insert, [(doc.doc_id, t) for t in set(doc.tags)])
        vectors = np.ascontiguousarray(write.vectors, dtype=np.float32)
        tags = tuple(sorted(set(doc.tags)))
        rows = []
        for chunk, vector in zip(write.chunks, vectors, strict=True):
            cursor = self._db.execute(
                "INSERT INTO chunks (chunk_id, doc_id, chunk_index, text, text_hash, start_word, end_word, "
                "char_start, char_end, page, section_path, token_estimate, file_path, doc_type, is_private, "
                "user_slug, created_at, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (chunk.chunk_id, doc.doc_id, chunk.chunk_index, chunk.text, chunk.text_hash,
                 chunk.start_word, chunk.end_word, chunk.char_start, chunk.char_end, chunk.page,
                 chunk.section_path, chunk.token_estimate, doc.file_path, doc.doc_type,
                 int(doc.is_private), doc.user_slug, doc.created_at, vector.tobytes()),
            )
            rows.append(
                LexicalRow(int(cursor.lastrowid or 0), chunk.text, doc.doc_type, doc.is_private, doc.user_slug,
                           doc.created_at, tags, write.language)
            )
        return rows

    def apply(self, writes: list[DocumentWrite], removals: list[str], touches: list[DocumentRecord]) -> None:
        """One transaction: replace each written document, delete removed paths, refresh touched stats."""
        import numpy as np

        if not (writes or removals or touches):
            return
        # The lexical writer lock is taken first and held until both sides have committed, so no
        # reader mistakes the gap between the two commits for a crash.
        self._lexical.acquire()
        try:
            deleted: list[int] = []
            added: list[LexicalRow] = []
            vectors: list[np.ndarray] = []
            with transaction(self._db):
                for path in removals:
                    deleted += self._delete_path(path)
                for write in writes:
                    deleted += self._delete_path(write.document.file_path)
                    added += self._insert(write)
                    vectors.append(np.asarray(write.vectors, dtype=np.float32).reshape(len(write.chunks), -1))
                self._db.executemany(QMARK.document_touch, [(d.size, d.mtime, d.file_path) for d in touches])
                generation = self._bump_generation() if (deleted or added) else None
                if deleted:
                    self._db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'lexical_deleted'",
                                     (len(deleted),))
            self._invalidate()
            if generation is not None:
                if self._lexical.refresh() == generation - 1:
                    self._lexical.write(generation, deleted, added)
                else:  # it missed an earlier write (a crash, or a failure here): start it over
                    self._rebuild_lexical()
                self.vectors.written(generation, deleted, [row.key for row in added],
                                    np.concatenate(vectors) if vectors else None)
        finally:
            self._lexical.release()
            self._secure()

    # -- lexical index upkeep ---------------------------------------------------------------------

    def _rebuild_lexical(self) -> None:
        """Rewrite the lexical index from one SQLite snapshot. The caller holds the lexical writer lock."""
        with transaction(self._db, immediate=False):
            generation = self._sqlite_generation()
            rows = self._db.execute(
                "SELECT c.id, c.text, c.doc_type, c.is_private, c.user_slug, c.created_at, "
                "(SELECT json_group_array(tag) FROM doc_tags t WHERE t.doc_id = c.doc_id), "
                "(SELECT d.language FROM documents d WHERE d.doc_id = c.doc_id) "
                "FROM chunks c ORDER BY c.id"
            )
            self._lexical.replace_all(
                generation,
                (LexicalRow(r[0], r[1], r[2], bool(r[3]), r[4], r[5], tuple(json.loads(r[6])), r[7]) for r in rows),
            )
        self._db.execute("UPDATE meta SET value = '0' WHERE key = 'lexical_deleted'")

    def settle_lexical(self) -> bool:
        """Make the lexical index's BM25 statistics exact again after deletions (deleted chunks count in them
        until a rebuild): rebuild it from SQLite when it has deletions and holds at most EXACT_LEXICAL_ROWS
        chunks, or when deletions reach LEXICAL_DRIFT_SHARE of it. Returns whether it rebuilt.

        Every commit also deletes the previous commit's generation marker, which then counts in BM25's document
        count like a deleted chunk: an index of several segments (several commits) carries such markers, so a
        build committed in batches would score unlike one built in a single commit until it is settled."""
        if self.lexical_path is None:
            return False
        deleted = int(self._meta("lexical_deleted") or 0)
        self._lexical.refresh()
        if not deleted and self._lexical.segments() <= 1:
            return False
        live = int(self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        if live > EXACT_LEXICAL_ROWS and deleted < live * LEXICAL_DRIFT_SHARE:
            return False
        self._lexical.acquire()
        try:
            self._rebuild_lexical()
        finally:
            self._lexical.release()
            self._secure()
        return True

    def _lexical_in_step(self) -> None:
        """Make the lexical index reflect SQLite's latest commit before a lexical search (see `_in_step`)."""
        self._lexical_checked = self._in_step(
            self._lexical_checked, lambda: self._lexical.refresh() != self._sqlite_generation(), self._rebuild_lexical
        )

    def _in_step(
        self, checked: tuple[int, int] | None, behind: Callable[[], bool], repair: Callable[[], None]
    ) -> tuple[int, int] | None:
        """Bring an index derived from SQLite back in step once per data version; return the version it is
        now known to be in step with.

        Another process's write shows up as a newer version; `behind` reloads and compares. If it is still
        behind and nobody holds the writer lock, the last writer died between its commits: `repair`. If the
        lock is held, a write is in flight; search the previous commit (at worst ms behind) and look again.
        """
        version = self._version()
        if version == checked:
            return checked
        if behind():
            if not self._lexical.try_acquire():
                return checked
            try:
                if behind():
                    repair()
            finally:
                self._lexical.release()
                self._secure()
            version = self._version()
        return version

    # -- search -----------------------------------------------------------------------------------

    def _invalidate(self) -> None:
        self._generation += 1

    def _version(self) -> tuple[int, int]:
        """Changes whenever this connection or any other one commits a write."""
        return self._generation, self._db.execute("PRAGMA data_version").fetchone()[0]

    def vector_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """Cosine similarity over the rows the SQL filter admits, by the vector side."""
        return self.vectors.search(query, filters, k) if k > 0 else []

    # -- for a vector side kept in another engine (remote_vectors.py) ---------------------------------

    def meta(self, key: str) -> str | None:
        """One value of the index's `meta` table (`embed_model`, `embed_dim`, ...)."""
        return self._meta(key)

    def generation(self) -> int:
        """The generation of the last SQLite write, which every derived index is stamped with."""
        return self._sqlite_generation()

    def keep_in_step(self, checked: tuple[int, int] | None, behind: Callable[[], bool],
                     repair: Callable[[], None]) -> tuple[int, int] | None:
        """`_in_step` for a derived index kept outside this module (see there)."""
        return self._in_step(checked, behind, repair)

    def index_id(self) -> str:
        """A random id of this index, made once: it names the index's collection in another engine."""
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('index_id', ?)", (os.urandom(16).hex(),))
        return str(self._meta("index_id"))

    def chunk_ids(self) -> set[int]:
        """Every chunk's row id."""
        return {r[0] for r in self._db.execute("SELECT id FROM chunks")}

    def vector_rows(self, rowids: Sequence[int], with_text: bool = False) -> list[tuple[Any, ...]]:
        """These chunks' (id, embedding bytes, is_private, doc_type, user_slug, created_at, tags JSON[, text]):
        what another engine holds of a chunk."""
        text = ", c.text" if with_text else ""
        return self._db.execute(
            f"SELECT c.id, c.embedding, c.is_private, c.doc_type, c.user_slug, c.created_at, d.tags{text} "
            f"FROM chunks c JOIN documents d ON d.doc_id = c.doc_id WHERE c.id IN ({QMARK.marks(len(rowids))})",
            list(rowids),
        ).fetchall()

    def chunk_count(self) -> int:
        """All chunks in the index, counted once per data version (a server-side vector index asks often)."""
        version = self._version()
        if self._counted is None or self._counted[0] != version:
            self._counted = (version, self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
        return self._counted[1]

    def scope_is_small(self, filters: QueryFilters, max_rows: int) -> bool:
        """Whether the scope holds at most `max_rows` chunks and at most 1/EXACT_SCOPE_FRACTION of the index: then
        exact search from SQLite beats a server-side vector index's filtered search. Counting stops at the
        limit + 1st row, so a large scope costs no full count (~1 ms at 100k)."""
        limit = min(max_rows, self.chunk_count() // EXACT_SCOPE_FRACTION)
        where, params = QMARK.where(filters)
        in_scope = self._db.execute(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM chunks c WHERE {where} LIMIT ?)", [*params, limit + 1]
        ).fetchone()[0]
        return in_scope <= limit

    def exact_vector_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """Cosine over the scope's vectors read from SQLite (only the scope: no full matrix in memory): what a
        server-side vector index falls back to for a small scope, or when it returned fewer than k."""
        import numpy as np

        from ragstead.stores.vector_index import best_positions

        where, params = QMARK.where(filters)
        rows = self._db.execute(f"SELECT c.id, c.embedding FROM chunks c WHERE {where}", params).fetchall()
        if not rows:
            return []
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        scores = matrix @ query.astype(np.float32)
        return [(int(ids[i]), float(scores[i])) for i in best_positions(scores, k)]

    def lexical_search(self, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """BM25 (tantivy) over the chunks the filters admit; the filters are clauses of the query itself."""
        self._lexical_in_step()
        return self._lexical.search(terms, filters, k)

    def fetch_chunks(self, rowids: list[int], filters: QueryFilters) -> dict[int, ChunkRow]:
        """Rows for the given ids, with the filter applied once more in SQL."""
        if not rowids:
            return {}
        where, params = QMARK.where(filters)
        # NOT INDEXED: given the scope columns, the planner picked chunks_scope and walked every private
        # row (2 ms at 20k chunks, growing with the corpus); the rowid lookup is what a fetch of k ids wants.
        cursor = self._db.execute(
            f"SELECT {CHUNK_SELECT} FROM chunks c NOT INDEXED JOIN documents d ON d.doc_id = c.doc_id "
            f"WHERE c.id IN ({','.join('?' * len(rowids))}) AND {where}",
            [*rowids, *params],
        )
        records = (_document_dict(cursor, row) for row in cursor)
        return {record.pop("id"): cast(ChunkRow, record) for record in records}  # CHUNK_SELECT's columns

    def chunk_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors by chunk id (to score chunks that only the lexical side returned)."""
        import numpy as np

        if not chunk_ids:
            return {}
        rows = self._db.execute(
            f"SELECT chunk_id, embedding FROM chunks WHERE chunk_id IN ({','.join('?' * len(chunk_ids))})", chunk_ids
        )
        return {chunk_id: np.frombuffer(blob, dtype=np.float32) for chunk_id, blob in rows}

    # -- sentence vectors: the sentence re-ranker's, computed at index time when asked (docs/design.md) --------

    def sentence_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """The stored sentence vectors of these chunks (a sentences x dim matrix each); absent ones are left out."""
        import numpy as np

        if not chunk_ids:
            return {}
        dim = int(self._meta("embed_dim") or 0)
        rows = self._db.execute(
            "SELECT c.chunk_id, s.vectors FROM chunks c JOIN chunk_sentences s ON s.chunk = c.id "
            f"WHERE c.chunk_id IN ({','.join('?' * len(chunk_ids))})", chunk_ids)
        return {chunk_id: np.frombuffer(blob, dtype=np.float32).reshape(-1, dim) for chunk_id, blob in rows if dim}

    def export_documents(self, batch_size: int = 200) -> Iterator[DocumentWrite]:
        """Every document with its chunks and vectors, `batch_size` documents at a time, in path order."""
        import numpy as np

        after = ""
        while True:
            documents = [
                (*row[:12], json.loads(row[12]), json.loads(row[13]) if row[13] else None)
                for row in self._db.execute(
                    f"SELECT {', '.join(DOCUMENT_FIELDS)} FROM documents WHERE file_path > ? "
                    "ORDER BY file_path LIMIT ?",
                    (after, batch_size),
                )
            ]
            if not documents:
                return
            ids = [row[0] for row in documents]
            rows = self._db.execute(
                f"SELECT {', '.join(CHUNK_FIELDS)}, embedding FROM chunks WHERE doc_id IN ({','.join('?' * len(ids))}) "
                "ORDER BY doc_id, chunk_index",
                ids,
            ).fetchall()
            vectors = [np.frombuffer(row[-1], dtype=np.float32) for row in rows]
            yield from assemble_writes(documents, (row[:-1] for row in rows), vectors)
            after = documents[-1][1]

    def stats(self) -> dict[str, Any]:
        """Counts and model; `lexical_rows == chunks` is the consistency invariant."""
        one = lambda sql: self._db.execute(sql).fetchone()[0]  # noqa: E731
        self._lexical_in_step()
        stats = {
            "store": "sqlite",
            "documents": one("SELECT COUNT(*) FROM documents"),
            "chunks": one("SELECT COUNT(*) FROM chunks"),
            "lexical_rows": self._lexical.count(),
            "lexical_generation": self._lexical.generation(),
            "lexical_segments": self._lexical.segments(),
            "vector_rows": 0,  # these two, and anything of its own, from the vector side
            "vector_generation": None,
            "embed_model": self._meta("embed_model"),
            "embed_dim": int(self._meta("embed_dim") or 0) or None,
            "sentence_vector_chunks": one("SELECT COUNT(*) FROM chunk_sentences"),
            "schema_version": SCHEMA_VERSION,
            "path": redact(str(self.path)),
        }
        return stats | self.vectors.stats()

    def integrity_check(self) -> str:
        """SQLite's integrity check, then the lexical index and the vector side against it; 'ok' when all agree."""
        result = self._db.execute("PRAGMA integrity_check").fetchone()[0]
        if result != "ok":
            return result
        self._lexical_in_step()
        wanted = self._sqlite_generation()
        chunks = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        generation, rows = self._lexical.generation(), self._lexical.count()
        if generation != wanted or rows != chunks:
            return f"lexical index at generation {generation} with {rows} rows; SQLite at {wanted} with {chunks} chunks"
        return self.vectors.check(chunks, wanted)

    def close(self) -> None:
        """Close the connection and let go of the lexical index and the vector side."""
        self._lexical.release()
        self.vectors.close()
        self._db.close()


class VectorSide(Protocol):
    """What answers vector search for a `SqliteStore`: derived from SQLite (the source of truth) and kept in step
    with it, like the lexical index. VectorFiles by default; a Chroma or Milvus collection (remote_vectors.py)."""

    def written(self, generation: int, deleted: list[int] | None, added: list[int],
                vectors: np.ndarray | None) -> None:
        """After SQLite and the lexical index committed write `generation` (under the writer lock): it deleted
        and added these chunk ids, with these vectors (`deleted` None: everything was removed)."""
        ...

    def search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """Cosine over the chunks the filters admit: [(chunk rowid, similarity)], best first (k > 0)."""
        ...

    def stats(self) -> dict[str, Any]:
        """`vector_rows` and `vector_generation`, and any fields of its own, for the store's stats."""
        ...

    def check(self, chunks: int, generation: int) -> str:
        """'ok' when it holds `chunks` rows at SQLite's `generation`, else what differs."""
        ...

    def private_paths(self) -> list[Path]:
        """Files and folders of its own that the store keeps private, beyond permissions.index_paths."""
        ...

    def close(self) -> None:
        ...


class VectorFiles:
    """The embedded store's vector side: the `<name>.vectors/` files (vector_index.py), scored over the rows
    SQLite's WHERE admits, exactly up to `exact_rows` of them (docs/design.md, "The embedded store")."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._index: VectorIndex | None = None
        self._checked: tuple[int, int] | None = None
        # Scopes of more rows than this go through the int8 scan (None: vector_index's EXACT_ROWS; tests set 0 to
        # compare it with exact).
        self._exact_rows: int | None = None
        self._eligible_cache: OrderedDict[QueryFilters, tuple[np.ndarray, np.ndarray | None]] = OrderedDict()
        self._eligible_version: tuple[Any, ...] | None = None

    @property
    def index(self) -> VectorIndex:
        """The vector files, opened on first use (a store opened to list documents never reads them)."""
        if self._index is None:
            from ragstead.stores.vector_index import VectorIndex

            store = self._store
            self._index = VectorIndex(None if store.lexical_path is None else store.path.with_suffix(".vectors"))
        return self._index

    @property
    def exact_rows(self) -> int:
        if self._exact_rows is None:
            from ragstead.stores.vector_index import EXACT_ROWS

            return EXACT_ROWS
        return self._exact_rows

    @exact_rows.setter
    def exact_rows(self, rows: int) -> None:
        self._exact_rows = rows

    def written(self, generation: int, deleted: list[int] | None, added: list[int],
                vectors: np.ndarray | None) -> None:
        """Bring the vector index up to `generation` after a write that deleted and added these chunk ids
        with these vectors (`deleted` None: everything was removed). Runs after SQLite and the lexical index
        have committed, under the lexical writer lock; appends when it was in step, else rebuilds."""
        import numpy as np

        index = self.index
        if deleted is not None and index.refresh() == generation - 1:
            ids = np.asarray(added, dtype=np.int64)
            rows = vectors if vectors is not None else np.zeros((0, 0), np.float32)
            if index.append(generation, ids, rows, len(deleted)):
                return
        self._rebuild()

    def _rebuild(self) -> None:
        """Rewrite the vector index from one SQLite snapshot. The caller holds the writer lock."""
        import numpy as np

        with transaction(self._store._db, immediate=False):
            generation = self._store._sqlite_generation()
            dim = int(self._store._meta("embed_dim") or 0)
            cursor = self._store._db.execute("SELECT id, embedding FROM chunks ORDER BY id")

            def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
                while rows := cursor.fetchmany(8192):
                    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                    yield ids, np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), dim)

            self.index.replace_all(generation, dim, batches())

    def _in_step(self) -> None:
        """Make the vector files reflect SQLite's latest commit before a search (see `SqliteStore._in_step`)."""
        if self._checked is None and self.index.refresh() is None and self._store._sqlite_generation():
            # Never built (an index from before it existed): wait for any writer, then build it once.
            self._store._lexical.acquire()
            try:
                if self.index.refresh() != self._store._sqlite_generation():
                    self._rebuild()
            finally:
                self._store._lexical.release()
                self._store._secure()
        self._checked = self._store._in_step(
            self._checked, lambda: self.index.refresh() != self._store._sqlite_generation(),
            self._rebuild,
        )

    def _eligible(self, filters: QueryFilters, version: tuple[Any, ...]) -> tuple[np.ndarray, np.ndarray | None]:
        """Vector-index positions of the rows the SQL filter admits, and (when they are most of the index)
        the same as a mask; cached per (filter, data version).

        The WHERE clause runs in SQLite on every cache miss; a hit only happens while no write has
        landed since, so the cached answer is exactly what SQLite would return now.
        """
        import numpy as np

        if self._eligible_version != version:
            self._eligible_cache.clear()
            self._eligible_version = version
        cached = self._eligible_cache.get(filters)
        if cached is not None:
            self._eligible_cache.move_to_end(filters)
            return cached
        ids = self.index.ids
        where, params = QMARK.where(filters)
        # One string from SQLite, parsed in C: 5x faster than a Python row per chunk (0.15 s at 1M rows).
        listed = self._store._db.execute(f"SELECT group_concat(c.id) FROM chunks c WHERE {where}", params).fetchone()[0]
        eligible = np.fromstring(listed, dtype=np.int64, sep=",") if listed else np.zeros(0, np.int64)
        if eligible.size > 1 and np.any(eligible[1:] < eligible[:-1]):  # the scope index returns id order
            eligible.sort()
        # Rows another process wrote after the vector index's last commit are matched by id, not position;
        # deleted rows still in its files are never admitted.
        positions = np.searchsorted(ids, eligible)
        inside = positions < ids.size
        positions, eligible = positions[inside], eligible[inside]
        positions = positions[ids[positions] == eligible]
        mask = None
        if positions.size * 3 > ids.size and positions.size > self.exact_rows:
            # Most rows qualify: scan them all in place and mask the rest, rather than copy a gathered set.
            mask = np.zeros(ids.size, dtype=bool)
            mask[positions] = True
        self._eligible_cache[filters] = (positions, mask)
        if len(self._eligible_cache) > ELIGIBLE_CACHE_SIZE:
            self._eligible_cache.popitem(last=False)
        return positions, mask

    def search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """Exact for scopes up to `exact_rows`, else an int8 scan whose best rows are re-scored exactly."""
        self._in_step()
        positions, mask = self._eligible(filters, (*self._store._version(), self.index.mapping))
        return self.index.search(query, positions, mask, k, exact_rows=self.exact_rows)

    def stats(self) -> dict[str, Any]:
        self._in_step()
        # Rows in the vector files not yet compacted away; live ones equal `chunks` when in step.
        return {"vector_rows": self.index.rows - self.index.dead(), "vector_generation": self.index.generation}

    def check(self, chunks: int, generation: int) -> str:
        self._in_step()
        have, rows = self.index.generation, self.index.rows - self.index.dead()
        if chunks and (have != generation or rows != chunks):
            return f"vector files at generation {have} with {rows} rows; SQLite at {generation} with {chunks} chunks"
        return "ok"

    def private_paths(self) -> list[Path]:
        return []  # the vector files are among permissions.index_paths

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
