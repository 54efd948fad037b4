"""The server store: PostgreSQL with pgvector (HNSW, exact fallback) for vectors and a generated tsvector
with BM25 computed in SQL for full text. Same `Store` contract and the same SQL filters as the embedded
store (docs/design.md, "PostgreSQL").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ragstead.errors import RagsteadError
from ragstead.filters import QueryFilters
from ragstead.stores.base import (
    CHUNK_FIELDS,
    CHUNK_SELECT,
    DOCUMENT_FIELDS,
    DOCUMENT_SELECT,
    DocumentRecord,
    DocumentWrite,
    ManifestEntry,
    assemble_writes,
    check_same_model,
)
from ragstead.stores.postgres_migrations import LATEST, SCHEMA, migrate
from ragstead.stores.redaction import redact

# pg_advisory_xact_lock key of writers: 'ragwrite' as bytes.
WRITE_LOCK = 0x7261677772697465
# Rows per IN-list when reading by key.
BATCH = 1000
# BM25 parameters (Lucene's and tantivy's defaults, so both stores rank alike).
K1, B = 1.2, 0.75

_CHUNK_INSERT = (
    "chunk_id", "doc_id", "chunk_index", "text", "text_hash", "start_word", "end_word", "char_start", "char_end",
    "page", "section_path", "token_estimate", "file_path", "doc_type", "is_private", "user_slug", "created_at",
    "embedding",
)
# The driver's and the pool's loggers. The pool logs from its worker threads when a server is unreachable or
# goes away ("error connecting in 'pool-1': ...", "discarding closed connection: ..."); with no logging
# configured, Python would print those on stderr beside the command's one `error:` line.
DRIVER_LOGGERS = ("psycopg", "psycopg.pool", "psycopg_pool", "psycopg_pool.sched")
# Settings opened in this process: the log filter masks their secrets wherever a driver message repeats them.
_OPENED: set[str] = set()


class _RedactingFilter(logging.Filter):
    """Rewrites each driver log record through `redact`, so an application that does collect these logs
    never gets a password from them."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = redact(record.getMessage())
        for spec in list(_OPENED):
            message = redact(message, spec)
        record.msg, record.args = message, None
        return True


def quiet_driver_logs() -> None:
    """Keep the driver's and the pool's log lines off stderr (a NullHandler stops Python's last-resort
    printing; an application's own handlers still get them) and mask secrets in them. Idempotent."""
    for name in DRIVER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RedactingFilter) for f in logger.filters):
            logger.addFilter(_RedactingFilter())
        if name in ("psycopg", "psycopg_pool") and not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def _import_driver() -> tuple[Any, Any, Any]:
    try:
        import psycopg
        from pgvector.psycopg import register_vector
        from psycopg_pool import ConnectionPool
    except ImportError as exc:
        raise RagsteadError(
            f"the PostgreSQL store needs psycopg, psycopg-pool and pgvector ({exc.name} is missing): "
            "pip install 'ragstead[postgres]'"
        ) from exc
    quiet_driver_logs()
    return psycopg, register_vector, ConnectionPool


class PostgresStore:
    """`Store` on a PostgreSQL server with pgvector; the tables live in the `ragstead` schema."""

    def __init__(self, url: str, *, pool_size: int = 4, connect_timeout: float = 10.0) -> None:
        psycopg, register_vector, connection_pool = _import_driver()
        self.url = url
        self.path = redact(url)
        self._psycopg = psycopg
        _OPENED.add(url)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=int(connect_timeout)) as conn:
                migrate(conn)
        except psycopg.Error as exc:
            raise RagsteadError(f"cannot open PostgreSQL store {self.path}: {_first_line(exc, url)}") from None

        def configure(conn: Any) -> None:
            conn.execute(f"SET search_path TO {SCHEMA}, public")
            register_vector(conn)
            conn.commit()

        self._pool = connection_pool(
            url, min_size=1, max_size=pool_size, configure=configure, open=False,
            kwargs={"connect_timeout": int(connect_timeout)}, timeout=connect_timeout,
        )
        try:
            self._pool.open(wait=True, timeout=connect_timeout)
        except Exception as exc:
            self._pool.close()
            raise RagsteadError(f"cannot open PostgreSQL store {self.path}: {_first_line(exc, url)}") from None

    # -- plumbing ---------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A pooled connection inside one transaction (committed on exit, rolled back on error)."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except self._psycopg.Error as exc:
            raise RagsteadError(f"PostgreSQL store {self.path}: {_first_line(exc, self.url)}") from None

    def _rows(self, sql: str, params: Any = None, binary: bool = False) -> list[tuple[Any, ...]]:
        with self._transaction() as conn:
            return conn.execute(sql, params, binary=binary).fetchall()

    def _meta(self, conn: Any, key: str) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    # -- model ------------------------------------------------------------------------------------

    def ensure_model(self, model: str, dim: int) -> None:
        """Record the model of an empty index (typing the vector column and building its HNSW index)."""
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            stored_model, stored_dim = self._meta(conn, "embed_model"), self._meta(conn, "embed_dim")
            if stored_model is None:
                # HNSW needs a fixed dimension; the column gets it with the first model.
                conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({int(dim)})")
                conn.execute(
                    "CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_ip_ops)"
                )
                conn.execute(
                    "INSERT INTO meta VALUES ('embed_model', %s), ('embed_dim', %s)", (model, str(dim))
                )
                return
        check_same_model(self.path, stored_model, stored_dim, model, dim, writing=True)

    def embed_model(self) -> str | None:
        """The model the index was built with, or None (read from meta, no counting)."""
        with self._transaction() as conn:
            return self._meta(conn, "embed_model")

    def settle_lexical(self) -> bool:
        """Nothing to do: BM25 statistics here are kept exact by every write (migration 2)."""
        return False

    def chunking(self) -> str | None:
        """The chunking the index was built with (as `record_chunking` wrote it), or None."""
        with self._transaction() as conn:
            return self._meta(conn, "chunking")

    def record_chunking(self, chunking: str) -> None:
        """Record how the index's text was cut (the settings guard compares it on every write)."""
        with self._transaction() as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES ('chunking', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (chunking,))

    def check_model(self, model: str, dim: int) -> None:
        """Read-only guard for queries: raise ModelMismatchError if the index holds another model's vectors."""
        with self._transaction() as conn:
            stored_model, stored_dim = self._meta(conn, "embed_model"), self._meta(conn, "embed_dim")
        check_same_model(self.path, stored_model, stored_dim, model, dim, writing=False)

    def reset(self) -> None:
        """Drop all content and the recorded model; the vector column loses its dimension and index."""
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            conn.execute("TRUNCATE chunks, doc_tags, documents, lexemes")
            conn.execute("UPDATE meta SET value = '0' WHERE key IN ('lexical_chunks', 'lexical_length_sum')")
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            conn.execute("ALTER TABLE chunks ALTER COLUMN embedding TYPE vector")
            conn.execute("DELETE FROM meta WHERE key IN ('embed_model', 'embed_dim')")
            conn.execute("UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")

    # -- manifest and cache -----------------------------------------------------------------------

    def manifest(self) -> dict[str, ManifestEntry]:
        """file_path -> manifest entry, for incremental indexing."""
        rows = self._rows("SELECT file_path, doc_id, file_hash, size, mtime, root FROM documents")
        return {r[0]: ManifestEntry(r[1], r[2], r[3], r[4], r[5]) for r in rows}

    def cached_vectors(self, text_hashes: list[str]) -> dict[str, np.ndarray]:
        """Reuse the stored vector of any chunk with the same text (the index holds one model only)."""
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(text_hashes))
        with self._transaction() as conn:
            for start in range(0, len(unique), BATCH):
                rows = conn.execute(
                    "SELECT DISTINCT ON (text_hash) text_hash, embedding FROM chunks WHERE text_hash = ANY(%s)",
                    (unique[start : start + BATCH],),
                    binary=True,
                )
                for text_hash, vector in rows:
                    found[text_hash] = _array(vector)
        return found

    # -- writes -----------------------------------------------------------------------------------

    def apply(self, writes: list[DocumentWrite], removals: list[str], touches: list[DocumentRecord]) -> None:
        """One transaction: replace each written document, delete removed paths, refresh touched stats."""
        if not (writes or removals or touches):
            return
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            paths = removals + [w.document.file_path for w in writes]
            if paths:
                self._count_lexemes(conn, "c.doc_id IN (SELECT doc_id FROM documents WHERE file_path = ANY(%s))",
                                    paths, -1)
                conn.execute("DELETE FROM documents WHERE file_path = ANY(%s)", (paths,))
            if writes:
                last_id = conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]
                self._insert(conn, writes)
                # Identities only grow, and writers hold the lock: the new rows are exactly those past last_id.
                self._count_lexemes(conn, "c.id > %s", last_id, +1)
            if touches:
                with conn.cursor() as cur:
                    cur.executemany(
                        "UPDATE documents SET size = %s, mtime = %s WHERE file_path = %s",
                        [(d.size, d.mtime, d.file_path) for d in touches],
                    )
            if paths or writes:
                conn.execute("UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")

    def _count_lexemes(self, conn: Any, where: str, param: Any, sign: int) -> None:
        """Add (sign +1) or subtract (-1) the BM25 statistics of the chunks matching `where`."""
        conn.execute(
            "INSERT INTO lexemes (lexeme, df) "
            f"SELECT u.lexeme, %s * count(*) FROM chunks c, unnest(c.tsv) AS u WHERE {where} GROUP BY u.lexeme "
            "ON CONFLICT (lexeme) DO UPDATE SET df = lexemes.df + EXCLUDED.df",
            (sign, param),
        )
        chunks, length = conn.execute(
            f"SELECT count(*), coalesce(sum(length(c.tsv)), 0) FROM chunks c WHERE {where}", (param,)
        ).fetchone()
        conn.execute(
            "UPDATE meta SET value = (value::bigint + CASE key WHEN 'lexical_chunks' THEN %s ELSE %s END)::text "
            "WHERE key IN ('lexical_chunks', 'lexical_length_sum')",
            (sign * chunks, sign * length),
        )

    def _insert(self, conn: Any, writes: list[DocumentWrite]) -> None:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO documents (doc_id, file_path, root, file_hash, size, mtime, doc_type, is_private, "
                "user_slug, proxy_wallet, created_at, title, tags, source) "
                "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s::jsonb,%s::jsonb)",
                [
                    (d.doc_id, d.file_path, d.root, d.file_hash, d.size, d.mtime, d.doc_type, d.is_private,
                     d.user_slug, d.proxy_wallet, d.created_at, d.title, json.dumps(d.tags),
                     json.dumps(d.source) if d.source else None)
                    for d in (w.document for w in writes)
                ],
            )
            tags = [(w.document.doc_id, t) for w in writes for t in sorted(set(w.document.tags))]
            if tags:
                cur.executemany("INSERT INTO doc_tags (doc_id, tag) VALUES (%s, %s)", tags)
        # COPY in binary: 10-50x the rate of row-by-row INSERTs for chunk rows with vectors.
        with conn.cursor() as cur, cur.copy(
            f"COPY chunks ({', '.join(_CHUNK_INSERT)}) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "int4", "text", "text", "int4", "int4", "int4", "int4", "int4", "text",
                            "int4", "text", "text", "bool", "text", "text", "vector"])
            for write in writes:
                doc = write.document
                vectors = np.ascontiguousarray(write.vectors, dtype=np.float32)
                for chunk, vector in zip(write.chunks, vectors, strict=True):
                    copy.write_row((
                        chunk.chunk_id, doc.doc_id, chunk.chunk_index, chunk.text, chunk.text_hash,
                        chunk.start_word, chunk.end_word, chunk.char_start, chunk.char_end, chunk.page,
                        chunk.section_path, chunk.token_estimate, doc.file_path, doc.doc_type, doc.is_private,
                        doc.user_slug, doc.created_at, vector,
                    ))

    # -- search -----------------------------------------------------------------------------------

    def vector_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """Cosine (inner product of unit vectors) over the rows the WHERE admits; HNSW, exact fallback."""
        if k <= 0:
            return []
        where, params = filters.to_sql("c", "%s")
        q = np.asarray(query, dtype=np.float32)
        sql = (
            f"SELECT c.id, -(c.embedding <#> %s) AS score FROM chunks c WHERE {where} "
            "ORDER BY c.embedding <#> %s LIMIT %s"
        )
        with self._transaction() as conn:
            # relaxed_order: the scan keeps going until k filtered rows are found; order is fixed below.
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(min(max(40, k), 1000)),))
            rows = conn.execute(sql, (q, *params, q, k)).fetchall()
            if len(rows) < k:
                # The graph walk ran out before k rows passed the filter: rank exactly, without the index.
                conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                rows = conn.execute(sql, (q, *params, q, k)).fetchall()
        rows.sort(key=lambda r: (-r[1], r[0]))
        return [(int(r[0]), float(r[1])) for r in rows]

    def lexical_search(self, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """BM25 over the chunks the WHERE admits, computed in SQL from the tsvector and the lexeme statistics.

        The GIN index finds the chunks holding any query lexeme (each term its own `plainto_tsquery`, OR-ed,
        so no user text reaches a tsquery parser). Each hit's tsvector is cut down to the query's lexemes
        (setweight + ts_filter, in C) before its term frequencies are read, so scoring costs per hit do not
        grow with chunk length. Length is the number of distinct lexemes (`length(tsvector)`).
        """
        if k <= 0 or not terms:
            return []
        where, params = filters.to_sql("c", "%s")
        tsquery = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
        sql = f"""
            WITH stats AS (
                SELECT max(value::float8) FILTER (WHERE key = 'lexical_chunks') AS n,
                       max(value::float8) FILTER (WHERE key = 'lexical_length_sum')
                         / greatest(max(value::float8) FILTER (WHERE key = 'lexical_chunks'), 1) AS avglen
                FROM meta WHERE key IN ('lexical_chunks', 'lexical_length_sum')),
            query AS (SELECT {tsquery} AS q),
            words AS (
                SELECT l.lexeme, ln(1 + (s.n - l.df + 0.5) / (l.df + 0.5)) AS idf
                FROM lexemes l, stats s
                WHERE l.lexeme = ANY(SELECT DISTINCT w FROM unnest(tsvector_to_array(
                    to_tsvector('english', array_to_string(%s::text[], ' ')))) AS w) AND l.df > 0),
            hits AS (
                SELECT c.id, c.tsv FROM chunks c, query WHERE c.tsv @@ query.q AND {where})
            SELECT h.id, sum(w.idf * tf * {K1 + 1} / (tf + {K1} * (1 - {B} + {B} * length(h.tsv) / s.avglen))) AS score
            FROM hits h CROSS JOIN stats s
            CROSS JOIN LATERAL unnest(ts_filter(setweight(h.tsv, 'A', (SELECT array_agg(lexeme) FROM words)),
                                                '{{a}}')) AS u
            JOIN words w ON w.lexeme = u.lexeme
            CROSS JOIN LATERAL (SELECT array_length(u.positions, 1)::float8 AS tf) f
            GROUP BY h.id ORDER BY score DESC, h.id LIMIT %s
        """
        return [(int(r[0]), float(r[1])) for r in self._rows(sql, (*terms, terms, *params, k))]

    def fetch_chunks(self, rowids: list[int], filters: QueryFilters) -> dict[int, dict[str, Any]]:
        """Rows for the given ids, with the filter applied once more in SQL."""
        if not rowids:
            return {}
        where, params = filters.to_sql("c", "%s")
        with self._transaction() as conn:
            cursor = conn.execute(
                f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
                f"WHERE c.id = ANY(%s) AND {where}",
                (rowids, *params),
            )
            names = [d.name for d in cursor.description]
            out = {}
            for row in cursor:
                record = dict(zip(names, row, strict=True))
                out[record.pop("id")] = record
        return out

    def chunk_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors by chunk id (to score chunks that only the lexical side returned)."""
        if not chunk_ids:
            return {}
        rows = self._rows("SELECT chunk_id, embedding FROM chunks WHERE chunk_id = ANY(%s)", (chunk_ids,), binary=True)
        return {chunk_id: _array(vector) for chunk_id, vector in rows}

    # -- documents --------------------------------------------------------------------------------

    def _documents(self, where: str, params: list[Any]) -> list[dict[str, Any]]:
        with self._transaction() as conn:
            cursor = conn.execute(f"SELECT {DOCUMENT_SELECT} FROM documents c WHERE {where}", params)
            names = [d.name for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor]

    def list_documents(self, filters: QueryFilters, limit: int = 1000, offset: int = 0) -> list[dict[str, Any]]:
        """Documents the filters admit (the same WHERE as the searches), in path order, paged."""
        where, params = filters.to_sql("c", "%s")
        return self._documents(f"{where} ORDER BY c.file_path LIMIT %s OFFSET %s", [*params, limit, offset])

    def get_document(self, doc_id: str | None = None, *, file_path: str | None = None) -> dict[str, Any] | None:
        """One document by id or by path, or None."""
        column, value = ("doc_id", doc_id) if doc_id is not None else ("file_path", file_path)
        found = self._documents(f"c.{column} = %s", [value])
        return found[0] if found else None

    def tag_counts(self, filters: QueryFilters) -> dict[str, int]:
        where, params = filters.to_sql("c", "%s")
        rows = self._rows(
            f"SELECT t.tag, COUNT(*) AS n FROM doc_tags t JOIN documents c ON c.doc_id = t.doc_id WHERE {where} "
            "GROUP BY t.tag ORDER BY n DESC, t.tag", params)
        return {tag: count for tag, count in rows}

    def documents_from_source(self, key: str) -> list[dict[str, Any]]:
        """The documents ingested from the source with this dedup key (an index on source->>'key')."""
        return self._documents("c.source->>'key' = %s ORDER BY c.file_path", [key])

    def document_chunks(self, filters: QueryFilters, *, doc_id: str | None = None,
                        chunk_id: str | None = None) -> list[dict[str, Any]]:
        """Every chunk of one document (by id, or the one holding `chunk_id`), in order, if the filters admit it."""
        if chunk_id is not None:
            found = self._rows("SELECT doc_id FROM chunks WHERE chunk_id = %s", (chunk_id,))
            if not found:
                return []
            doc_id = found[0][0]
        where, params = filters.to_sql("c", "%s")
        with self._transaction() as conn:
            cursor = conn.execute(
                f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
                f"WHERE c.doc_id = %s AND {where} ORDER BY c.chunk_index", (doc_id, *params))
            names = [d.name for d in cursor.description]
            return [{k: v for k, v in zip(names, row, strict=True) if k != "id"} for row in cursor]

    # -- migration --------------------------------------------------------------------------------

    def export_documents(self, batch_size: int = 200) -> Iterator[DocumentWrite]:
        """Every document with its chunks and vectors, `batch_size` documents at a time, in path order."""
        after = ""
        while True:
            with self._transaction() as conn:
                documents = conn.execute(
                    f"SELECT {', '.join(DOCUMENT_FIELDS)} FROM documents WHERE file_path COLLATE \"C\" > %s "
                    "ORDER BY file_path COLLATE \"C\" LIMIT %s",
                    (after, batch_size),
                ).fetchall()
                if not documents:
                    return
                rows = conn.execute(
                    f"SELECT {', '.join(CHUNK_FIELDS)}, embedding FROM chunks WHERE doc_id = ANY(%s) "
                    "ORDER BY doc_id, chunk_index",
                    ([row[0] for row in documents],),
                    binary=True,
                ).fetchall()
            yield from assemble_writes(documents, (row[:-1] for row in rows), [_array(row[-1]) for row in rows])
            after = documents[-1][1]


    @contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Drop the HNSW index for a large load and build it once at the end.

        Building the graph once over all rows is several times faster than growing it row by row.
        """
        with self._transaction() as conn:
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        try:
            yield
        finally:
            with self._transaction() as conn:
                conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (self._build_memory(conn),))
                if self._meta(conn, "embed_model") is not None:
                    conn.execute(
                        "CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw ON chunks "
                        "USING hnsw (embedding vector_ip_ops)"
                    )
                conn.execute("ANALYZE chunks")

    def _build_memory(self, conn: Any) -> str:
        """maintenance_work_mem for the HNSW build: enough to hold the whole graph, never below the server's.

        Per element: the vector plus ~700 bytes of neighbour lists (2m = 32 on layer 0, m = 16 above) and
        bookkeeping; a graph that does not fit builds several times slower (docs/design.md, "PostgreSQL").
        """
        current = conn.execute("SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem'"
                               ).fetchone()[0]
        dim = int(self._meta(conn, "embed_dim") or 0)
        # An exact count (a second per million rows), not reltuples: autovacuum may have sampled mid-load.
        rows = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        needed = int(rows * (4 * dim + 8 + 700) * 1.2)
        # Capped at 8 GB: a bigger index should be built with the server's own setting, sized by its admin.
        return f"{max(current, min(needed, 8 << 30)) // 1024}kB"

    # -- health -----------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts and model; `lexical_rows` is the chunk count the BM25 statistics hold, so `lexical_rows ==
        chunks` is the consistency invariant, as in the embedded store."""
        with self._transaction() as conn:
            documents = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
            chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
            lexical = int(self._meta(conn, "lexical_chunks") or 0)
            model, dim = self._meta(conn, "embed_model"), self._meta(conn, "embed_dim")
            generation = self._meta(conn, "generation")
            version = conn.execute(f"SELECT max(version) FROM {SCHEMA}.migrations").fetchone()[0]
            server = conn.execute("SHOW server_version").fetchone()[0]
            pgvector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
        return {
            "documents": documents,
            "chunks": chunks,
            "lexical_rows": lexical,
            "lexical_generation": int(generation or 0),
            "embed_model": model,
            "embed_dim": int(dim or 0) or None,
            "schema_version": version,
            "store": "postgresql",
            "server_version": server,
            "pgvector_version": pgvector,
            "path": self.path,
        }

    def last_indexed_at(self) -> str | None:
        """The latest `indexed_at` of any document, or None when there are none."""
        with self._transaction() as conn:
            return conn.execute("SELECT max(indexed_at) FROM documents").fetchone()[0]

    def integrity_check(self) -> str:
        """'ok' when the schema is current, the indexes are valid and every chunk row is complete."""
        with self._transaction() as conn:
            version = conn.execute(f"SELECT max(version) FROM {SCHEMA}.migrations").fetchone()[0]
            if version != LATEST:
                return f"schema version {version}, expected {LATEST}"
            invalid = conn.execute(
                "SELECT string_agg(i.indexrelid::regclass::text, ', ') FROM pg_index i "
                "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
                "WHERE n.nspname = %s AND NOT (i.indisvalid AND i.indisready)",
                (SCHEMA,),
            ).fetchone()[0]
            if invalid:
                return f"invalid indexes: {invalid}"
            orphans = conn.execute(
                "SELECT COUNT(*) FROM chunks c LEFT JOIN documents d ON d.doc_id = c.doc_id WHERE d.doc_id IS NULL"
            ).fetchone()[0]
            if orphans:
                return f"{orphans} chunks without a document"
            dim = self._meta(conn, "embed_dim")
            if dim is not None:
                wrong = conn.execute(
                    "SELECT COUNT(*) FROM chunks WHERE vector_dims(embedding) != %s", (int(dim),)
                ).fetchone()[0]
                if wrong:
                    return f"{wrong} vectors not {dim}-d"
        return "ok"

    def close(self) -> None:
        """Close the pool's connections."""
        self._pool.close()


def _array(vector: Any) -> np.ndarray:
    """pgvector's Vector (binary transfer) as the float32 array the rest of ragstead uses."""
    return np.asarray(vector.to_numpy(), dtype=np.float32)


def _first_line(exc: BaseException, url: str) -> str:
    """The first line of a driver error, with every secret of `url` masked (libpq repeats a malformed URI,
    a DSN or the misparsed tail of a password in its messages)."""
    text = str(exc).strip() or type(exc).__name__
    return redact(text.splitlines()[0], url)
