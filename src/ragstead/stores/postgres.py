"""The server store: PostgreSQL with pgvector (HNSW, exact fallback) for vectors and a generated tsvector
with BM25 computed in SQL for full text. Same `Store` contract and the same SQL filters as the embedded
store (docs/design.md, "PostgreSQL").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

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
from ragstead.stores.postgres_migrations import (
    AVGLEN_SQL,
    K1,
    LATEST,
    POSTINGS_INDEXES,
    SCHEMA,
    B,
    check_replica_schema,
    impact_sql,
    migrate,
)
from ragstead.stores.postgres_partitions import (
    ensure_partitions,
    is_partitioned,
    owner_clause,
    owner_of,
    partition_chunks,
    split_store_options,
)
from ragstead.stores.redaction import redact
from ragstead.stores.sql import FORMAT, SqlStore, document_row

# pg_advisory_xact_lock key of writers: 'ragwrite' as bytes.
WRITE_LOCK = 0x7261677772697465
# Rows per IN-list when reading by key.
BATCH = 1000
# Lexical top-k by impact reads at most this many postings per term before it scores every match instead.
MAX_POSTINGS_PER_TERM = 25_600 * 8
# ... and at most this many chunks scored exactly from their tsvector in one round.
MAX_SCORED = 60_000
# An exact-scoring batch of at least this many chunks may use the server's parallel workers (_score_by_bound).
PARALLEL_SCORING_ROWS = 1_600
# Postings read per term in the first round (at least 4k): cheap, and its k-th score is the floor the next round's
# depths are planned against (1,600 for a closer floor measured no faster at 1M: the first round then costs more).
FIRST_DEPTH = 100
# A filtered vector query with at most this many rows in scope is ranked exactly (a bitmap scan of the scope and
# a sort), not by the HNSW walk, which must visit ~1/selectivity nodes per result and loses recall there.
EXACT_SCOPE_ROWS = 50_000
# Chunk owners remembered from fetched rows (partitioned layout), at most about this many.
CHUNK_OWNERS_KEPT = 100_000

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


class PostgresStore(SqlStore):
    """`Store` on a PostgreSQL server with pgvector; the tables live in the `ragstead` schema."""

    exact_scope_rows = EXACT_SCOPE_ROWS  # 0: every vector query walks the HNSW graph (the bench's baseline)
    ef_search = 40  # pgvector's default candidate list; at least k (`bench partitions --ef-search` sweeps it)
    parallel_searches = True  # search() may run the vector and lexical sides at once, on two pooled connections
    parallel_scoring = True  # large exact-scoring batches may use parallel workers (_score_by_bound)
    scoring_table = "chunk_terms"  # what exact scoring by id reads: the narrow copy (chunks: the wide rows)

    def __init__(self, url: str, *, pool_size: int = 4, connect_timeout: float = 10.0) -> None:
        psycopg, register_vector, connection_pool = _import_driver()
        self.path = redact(url)
        # `?partition=user` and `?ef_search=N` are ragstead's (postgres_partitions.py), not libpq's: the driver gets
        # the URL without them.
        url, options = split_store_options(url)
        partition = options.get("partition")
        if "ef_search" in options:
            self.ef_search = int(options["ef_search"])
        self.url = url
        self._owners: set[str] = set()  # partitions known to exist (partitioned layout)
        # chunk id -> owner of rows fetch_chunks returned (partitioned layout): chunk_vectors, given ids of fetched
        # hits, then reads their partitions only instead of probing every user's (bounded; cleared when full).
        self._chunk_owners: dict[str, str] = {}
        self._psycopg = psycopg
        self.build_seconds: dict[str, float] = {}  # the last bulk load's builds (HNSW, postings), for the bench
        _OPENED.add(url)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=int(connect_timeout)) as conn:
                # A streaming replica (in recovery) is read-only: it serves the primary's schema as replayed.
                self.replica = bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])
                if self.replica:
                    check_replica_schema(conn)
                else:
                    migrate(conn)
                    if partition == "user":
                        self._partition_if_empty(conn)
                self.partitioned = is_partitioned(conn)
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

    def _partition_if_empty(self, conn: Any) -> None:
        """Give an empty, unpartitioned index the partitioned-by-user layout (an index already in it stays)."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            conn.execute(f"SET LOCAL search_path TO {SCHEMA}, public")
            if not is_partitioned(conn):
                partition_chunks(conn)

    # -- plumbing ---------------------------------------------------------------------------------

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A pooled connection inside one transaction (committed on exit, rolled back on error)."""
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except self._psycopg.errors.ReadOnlySqlTransaction:
            raise RagsteadError(f"PostgreSQL store {self.path} is a read replica: it cannot be written to; "
                                "index into the primary (the replica follows it)") from None
        except self._psycopg.Error as exc:
            raise RagsteadError(f"PostgreSQL store {self.path}: {_first_line(exc, self.url)}") from None

    # How it runs the shared statements (sql.SqlStore): psycopg decodes jsonb and booleans itself.
    statements = FORMAT
    source_key = "c.source->>'key'"

    def _rows(self, sql: str, params: Any = None, binary: bool = False) -> list[tuple[Any, ...]]:
        with self._transaction() as conn:
            return conn.execute(sql, params, binary=binary).fetchall()

    def _dicts(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        with self._transaction() as conn:
            cursor = conn.execute(sql, params)
            names = [d.name for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor]

    def _write(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        changed = 0
        with self._transaction() as conn:
            for row in rows:
                changed += conn.execute(sql, row).rowcount
        return changed

    def _meta(self, conn: Any, key: str) -> str | None:
        row = conn.execute(FORMAT.meta_value, (key,)).fetchone()
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
                with conn.cursor() as cur:
                    cur.executemany(FORMAT.meta_upsert, [("embed_model", model), ("embed_dim", str(dim))])
                return
        check_same_model(self.path, stored_model, stored_dim, model, dim, writing=True)

    def settle_lexical(self) -> bool:
        """BM25 statistics here are kept exact by every write (migration 2); the postings are rebuilt only when a
        bulk load stopped before it rebuilt them, or when the mean length grew past 1.25x the one their impacts
        used (their bounds, still correct, get loose). Returns whether it rebuilt."""
        with self._transaction() as conn:
            ready, stored = self._meta(conn, "postings_ready"), float(self._meta(conn, "postings_avglen") or 0)
            avglen = conn.execute(f"SELECT {AVGLEN_SQL}").fetchone()[0]
        drifted = ready == "1" and stored > 0 and avglen > 1.25 * stored
        if ready == "1" and not drifted:
            return False  # the common case after a write: no second transaction, no lock
        return self._settle_postings(force=drifted)

    def reset(self) -> None:
        """Drop all content and the recorded model; the vector column loses its dimension and index."""
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            conn.execute("TRUNCATE chunk_sentences, chunk_terms, chunks, doc_tags, documents, lexemes, postings")
            conn.execute("UPDATE meta SET value = '0' WHERE key IN ('lexical_chunks', 'lexical_length_sum', "
                         "'postings_avglen')")
            conn.execute("UPDATE meta SET value = '1' WHERE key = 'postings_ready'")
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            conn.execute("ALTER TABLE chunks ALTER COLUMN embedding TYPE vector")
            conn.execute("DELETE FROM meta WHERE key IN ('embed_model', 'embed_dim')")
            conn.execute("UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")

    # -- manifest and cache -----------------------------------------------------------------------

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
        if self.partitioned and writes:
            self._add_partitions({owner_of(w.document.is_private, w.document.user_slug) for w in writes})
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            paths = removals + [w.document.file_path for w in writes]
            postings = self._meta(conn, "postings_ready") == "1"
            if paths:
                self._count_lexemes(conn, "c.doc_id IN (SELECT doc_id FROM documents WHERE file_path = ANY(%s))",
                                    paths, -1)
                if postings:
                    # An array, not a subquery: the BRIN index is used for `= ANY(array)`.
                    conn.execute(
                        "DELETE FROM postings WHERE chunk_id = ANY((SELECT coalesce(array_agg(c.id), '{}') "
                        "FROM chunks c JOIN documents d ON d.doc_id = c.doc_id WHERE d.file_path = ANY(%s))::bigint[])",
                        (paths,),
                    )
                conn.execute("DELETE FROM documents WHERE file_path = ANY(%s)", (paths,))
            if writes:
                last_id = conn.execute("SELECT coalesce(max(id), 0) FROM chunks").fetchone()[0]
                self._insert(conn, writes)
                # Identities only grow, and writers hold the lock: the new rows are exactly those past last_id.
                self._count_lexemes(conn, "c.id > %s", last_id, +1)
                if postings:
                    self._add_postings(conn, "c.id > %s", (last_id,))
            if touches:
                with conn.cursor() as cur:
                    cur.executemany(FORMAT.document_touch, [(d.size, d.mtime, d.file_path) for d in touches])
            if paths or writes:
                conn.execute("UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation'")

    def _add_partitions(self, owners: set[str]) -> None:
        """Create the partitions a write needs, in a transaction of their own: creating one locks `chunks`
        against readers, and only until this short commit, not for the write's whole load."""
        missing = owners - self._owners
        if missing:
            with self._transaction() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                ensure_partitions(conn, missing)
            self._owners |= missing

    def _chunk_where(self, filters: QueryFilters) -> tuple[str, list[Any]]:
        """The scope's WHERE over chunks `c`; on the partitioned layout with the owner clause it implies, so the
        planner reads only the scope's partitions."""
        where, params = FORMAT.where(filters)
        if self.partitioned:
            clause, owners = owner_clause(filters)
            if clause:
                return f"{where} AND {clause}", [*params, *owners]
        return where, params

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

    def _add_postings(self, conn: Any, where: str, params: tuple[Any, ...]) -> None:
        """Postings of the chunks matching `where`, weighted with today's mean length; 'postings_avglen' keeps
        the smallest mean length any stored impact was computed with (the bound in `_top_by_impact` needs it)."""
        conn.execute(
            "INSERT INTO postings (lexeme, impact, chunk_id, user_slug) "
            f"SELECT u.lexeme, {impact_sql('array_length(u.positions, 1)', 'length(c.tsv)', 'a.avglen')}, c.id, "
            f"c.user_slug FROM (SELECT {AVGLEN_SQL} AS avglen) a, chunks c, unnest(c.tsv) AS u WHERE {where}",
            params,
        )
        conn.execute(
            f"UPDATE meta SET value = (CASE WHEN value::float8 = 0 THEN {AVGLEN_SQL} "
            f"ELSE least(value::float8, {AVGLEN_SQL}) END)::text WHERE key = 'postings_avglen'"
        )

    def _rebuild_postings(self, conn: Any) -> None:
        """Every chunk's postings again, all with today's mean length (the tightest bounds), indexes built last."""
        for index in ("postings_top", "postings_user_top", "postings_chunk"):
            conn.execute(f"DROP INDEX IF EXISTS {index}")
        conn.execute("TRUNCATE postings")
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'postings_avglen'")
        self._add_postings(conn, "true", ())
        conn.execute(POSTINGS_INDEXES)
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'postings_ready'")

    def _insert(self, conn: Any, writes: list[DocumentWrite]) -> None:
        with conn.cursor() as cur:
            cur.executemany(FORMAT.document_insert, [document_row(w.document) for w in writes])
            tags = [(w.document.doc_id, t) for w in writes for t in sorted(set(w.document.tags))]
            if tags:
                cur.executemany(FORMAT.doc_tag_insert, tags)
        # COPY in binary: 10-50x the rate of row-by-row INSERTs for chunk rows with vectors.
        owner = ("owner",) if self.partitioned else ()
        with conn.cursor() as cur, cur.copy(
            f"COPY chunks ({', '.join(_CHUNK_INSERT + owner)}) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "int4", "text", "text", "int4", "int4", "int4", "int4", "int4", "text",
                            "int4", "text", "text", "bool", "text", "text", "vector", *(["text"] if owner else [])])
            for write in writes:
                doc = write.document
                vectors = np.ascontiguousarray(write.vectors, dtype=np.float32)
                extra = (owner_of(doc.is_private, doc.user_slug),) if owner else ()
                for chunk, vector in zip(write.chunks, vectors, strict=True):
                    copy.write_row((
                        chunk.chunk_id, doc.doc_id, chunk.chunk_index, chunk.text, chunk.text_hash,
                        chunk.start_word, chunk.end_word, chunk.char_start, chunk.char_end, chunk.page,
                        chunk.section_path, chunk.token_estimate, doc.file_path, doc.doc_type, doc.is_private,
                        doc.user_slug, doc.created_at, vector, *extra,
                    ))

    # -- search -----------------------------------------------------------------------------------

    def vector_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """Cosine (inner product of unit vectors) over the rows the WHERE admits; HNSW, exact fallback."""
        if k <= 0:
            return []
        sql, where, params = self.vector_statement(filters)
        q = np.asarray(query, dtype=np.float32)
        with self._transaction() as conn:
            small = self.exact_scope_rows > 0 and _may_be_small(filters) and conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM chunks c WHERE {where} LIMIT %s) s",
                (*params, self.exact_scope_rows + 1),
            ).fetchone()[0] <= self.exact_scope_rows
            if not small:
                # relaxed_order: the scan keeps going until k filtered rows are found; order is fixed below.
                conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
                conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(min(max(self.ef_search, k), 1000)),))
                rows = conn.execute(sql, (q, *params, q, k)).fetchall()
            if small or len(rows) < k:
                # A small scope, or a graph walk that ran out before k rows passed the filter: rank exactly,
                # without the HNSW index (the scope index and a sort).
                conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                rows = conn.execute(self.vector_statement(filters, exact=True)[0], (q, *params, q, k)).fetchall()
        rows.sort(key=lambda r: (-r[1], r[0]))
        return [(int(r[0]), float(r[1])) for r in rows]

    def vector_statement(self, filters: QueryFilters, exact: bool = False) -> tuple[str, str, list[Any]]:
        """The vector query `vector_search` runs (parameters: the query vector, then `params`, the vector again,
        k), its WHERE and the WHERE's parameters. Public so a test can EXPLAIN the very statement. `exact`: ordered
        by an expression no index serves, so the rows are ranked by a sort, never by the HNSW walk (on a
        partitioned table, PostgreSQL 18 still picks the walk in a partition with enable_indexscan off)."""
        where, params = self._chunk_where(filters)
        order = "(c.embedding <#> %s) + 0" if exact else "c.embedding <#> %s"
        sql = f"SELECT c.id, -(c.embedding <#> %s) AS score FROM chunks c WHERE {where} ORDER BY {order} LIMIT %s"
        return sql, where, params

    def lexical_search(self, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """BM25 top-k over the chunks the WHERE admits: from the impact-ordered postings when they are ready
        (`_top_by_impact`), else by scoring every match. Both give the same ranking and the same scores."""
        if k <= 0 or not terms:
            return []
        where, params = FORMAT.where(filters)
        with self._transaction() as conn:
            # One snapshot for the postings read and the scoring, so a write between them cannot skew either.
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            words, avglen, factor = self._query_words(conn, terms)
            if not words:
                return []
            if factor is not None:
                hits = self._top_by_impact(conn, words, where, params, filters.user_slug, k, avglen, factor)
                if hits is not None:
                    return hits
            return self._score_every_match(conn, terms, words, where, params, k, avglen)

    def _query_words(self, conn: Any, terms: list[str]) -> tuple[list[tuple[str, float]], float, float | None]:
        """The query's lexemes found in the index with their idf, the mean length, and the factor that turns a
        stored impact into a bound on today's (None while the postings are being rebuilt)."""
        n, avglen, ready, stored = conn.execute(
            "SELECT max(value::float8) FILTER (WHERE key = 'lexical_chunks'), "
            "max(value::float8) FILTER (WHERE key = 'lexical_length_sum') "
            "  / greatest(max(value::float8) FILTER (WHERE key = 'lexical_chunks'), 1), "
            "max(value) FILTER (WHERE key = 'postings_ready'), "
            "max(value::float8) FILTER (WHERE key = 'postings_avglen') "
            "FROM meta WHERE key IN ('lexical_chunks', 'lexical_length_sum', 'postings_ready', 'postings_avglen')"
        ).fetchone()
        words = conn.execute(
            "SELECT l.lexeme, ln(1 + (%s - l.df + 0.5) / (l.df + 0.5)) FROM lexemes l "
            "WHERE l.lexeme = ANY(SELECT DISTINCT w FROM unnest(tsvector_to_array(to_tsvector('english', "
            "array_to_string(%s::text[], ' ')))) AS w) AND l.df > 0 ORDER BY l.lexeme",
            (n, terms),
        ).fetchall()
        # A stored impact used mean length A_s; with today's A the same posting weighs at most max(1, A/A_s) times
        # as much (the length term of BM25's denominator shrinks by at most A_s/A), so the smallest A_s bounds all.
        factor = max(1.0, avglen / stored) if ready == "1" and stored else (1.0 if ready == "1" else None)
        return [(str(w), float(idf)) for w, idf in words], float(avglen or 0), factor

    def _top_by_impact(self, conn: Any, words: list[tuple[str, float]], where: str, params: list[Any],
                       user: str | None, k: int, avglen: float, factor: float) -> list[tuple[int, float]] | None:
        """Exact BM25 top-k from each term's highest-impact postings (a threshold algorithm, in SQL).

        Each term t's top d_t postings are read from the index (with a user filter there too, so a 2 % user
        scope costs no more rounds than the whole index). A list not read to its end gives theta_t, idf times
        its d_t-th impact: a chunk missing from that term's top d_t weighs at most theta_t there. So a chunk
        seen under some terms is bounded by its summed weights plus the other terms' thetas, and a chunk seen
        under none by the sum of all thetas ('unseen'). Every seen chunk whose bound reaches `floor` (a score
        the k-th result is known to reach) is scored exactly, from its tsvector and with the WHERE; once the
        k-th exact score beats 'unseen' and every chunk left unscored is bounded below `floor`, the top k is
        exact. Otherwise the next round's depths are planned from probes of each list's deeper impacts: the
        fewest extra postings that bring 'unseen' below `floor` (`_plan_depths`). Past MAX_POSTINGS_PER_TERM
        the caller scores every match instead. `factor` turns stored impacts into bounds on today's weights
        (`_query_words`); 1e-6 covers their float4 rounding."""
        lexemes, idfs = [w for w, _ in words], [i for _, i in words]
        user_clause, user_params = ("AND p.user_slug = %s", (user,)) if user is not None else ("", ())
        slack = factor * (1 + 1e-6)
        depths, floor = [max(4 * k, FIRST_DEPTH)] * len(words), 0.0
        for _ in range(6):
            rows = conn.execute(
                f"""
                WITH w AS (SELECT * FROM unnest(%s::text[], %s::float8[], %s::int[]) AS w(lexeme, idf, depth)),
                top AS MATERIALIZED (
                    SELECT w.lexeme, w.idf, w.depth, p.chunk_id, p.impact FROM w CROSS JOIN LATERAL (
                        SELECT p.chunk_id, p.impact FROM postings p WHERE p.lexeme = w.lexeme {user_clause}
                        ORDER BY p.impact DESC LIMIT w.depth) p),
                theta AS (
                    SELECT lexeme, CASE WHEN count(*) = max(depth) THEN min(idf * impact) ELSE 0 END AS bound
                    FROM top GROUP BY lexeme),
                unseen AS (SELECT coalesce(sum(bound), 0) AS bound FROM theta)
                SELECT 0, lexeme, NULL::bigint, bound FROM theta
                UNION ALL (
                    SELECT 1, NULL, t.chunk_id, sum(t.idf * t.impact - h.bound) + (SELECT bound FROM unseen)
                    FROM top t JOIN theta h USING (lexeme) GROUP BY t.chunk_id
                    HAVING (sum(t.idf * t.impact - h.bound) + (SELECT bound FROM unseen)) * %s >= %s
                    ORDER BY 4 DESC, 3 LIMIT %s)
                """,
                (lexemes, idfs, depths, *user_params, slack, floor, MAX_SCORED + 1),
            ).fetchall()
            theta = {row[1]: row[3] for row in rows if row[0] == 0}
            bounds = [(row[2], row[3] * slack) for row in rows if row[0] == 1]
            unseen = sum(theta.values()) * slack
            scored = self._score_by_bound(conn, words, bounds[:MAX_SCORED], where, params, k, avglen)
            kth = scored[-1][1] if len(scored) == k else 0.0
            floor = max(floor, kth)
            unscored = bounds[MAX_SCORED][1] if len(bounds) > MAX_SCORED else 0.0
            if unscored >= floor and unscored > 0:
                return None  # too many chunks bounded above the k-th score to score them one by one
            if unseen == 0.0 or unseen < kth:
                return scored  # every unscored chunk is bounded below floor <= kth, every unseen one below kth
            planned = self._plan_depths(conn, lexemes, idfs, depths, theta, floor / slack, user_clause, user_params)
            if planned is None:
                return None
            depths = planned
        return None

    def _score_by_bound(self, conn: Any, words: list[tuple[str, float]], bounds: list[tuple[int, float]],
                        where: str, params: list[Any], k: int, avglen: float) -> list[tuple[int, float]]:
        """The exact top k of the chunks in `bounds` (id, upper bound; falling bounds), scored in batches: after
        each batch only chunks whose bound reaches the k-th score so far can still enter, so the rest are
        never read."""
        best: list[tuple[int, float]] = []
        start, size, parallel = 0, max(4 * k, 400), False
        while start < len(bounds):
            kth = best[-1][1] if len(best) == k else 0.0
            batch = [c for c, bound in bounds[start : start + size] if bound >= kth]
            if not batch:
                break
            if len(batch) >= PARALLEL_SCORING_ROWS and self.parallel_scoring and not parallel:
                # Thousands of random row reads: worth the server's parallel workers (its own default cost
                # settings never choose them for an id list). For the rest of this transaction only.
                conn.execute("SELECT set_config('parallel_setup_cost', '0', true), "
                             "set_config('parallel_tuple_cost', '0', true), "
                             "set_config('min_parallel_index_scan_size', '0', true)")
                parallel = True
            found = self._score(conn, words, "c.id = ANY(%s::bigint[])", [batch], where, params, k, avglen,
                                table=self.scoring_table)
            best = sorted(best + found, key=lambda r: (-r[1], r[0]))[:k]
            start, size = start + size, size * 2
        return best

    def _plan_depths(self, conn: Any, lexemes: list[str], idfs: list[float], depths: list[int],
                     theta: dict[str, float], target: float, user_clause: str,
                     user_params: tuple[Any, ...]) -> list[int] | None:
        """Per-term depths for the next round: from each list's impact at 4x, 16x, ... its depth (a probe walks
        the index without reading rows), add depth where it lowers the unseen bound most per posting read,
        until the bound is below `target`; out of reach, every list goes 16x deeper. With no target yet (fewer
        than k scored), every depth grows 8x. None when no list can go deeper."""
        if target <= 0:
            grown = [min(d * 8, MAX_POSTINGS_PER_TERM) for d in depths]
            return grown if grown != depths else None
        options = [[d * 4**j for j in range(1, 9) if d * 4**j <= MAX_POSTINGS_PER_TERM] for d in depths]
        at = self._probe_bounds(conn, lexemes, idfs, options, theta, user_clause, user_params)
        return _deepen(at, lexemes, depths, options, theta, target)

    def _probe_bounds(self, conn: Any, lexemes: list[str], idfs: list[float], options: list[list[int]],
                      theta: dict[str, float], user_clause: str,
                      user_params: tuple[Any, ...]) -> dict[tuple[int, int], float]:
        """Each term's bound at each depth it may go to: idf x the impact of its posting at that depth (0 past
        the list's end), by term index and depth. One query; the probe walks the index without reading rows.
        Only the terms still in the unseen bound (`theta`) are probed."""
        probe = [(t, d) for t, (lexeme, opts) in enumerate(zip(lexemes, options, strict=True)) if theta.get(lexeme)
                 for d in opts]
        rows = conn.execute(
            "SELECT w.n, w.depth, coalesce((SELECT p.impact FROM postings p WHERE p.lexeme = w.lexeme "
            f"{user_clause} ORDER BY p.impact DESC OFFSET w.depth - 1 LIMIT 1), 0) "
            "FROM unnest(%s::int[], %s::text[], %s::int[]) AS w(n, lexeme, depth)",
            (*user_params, [t for t, _ in probe], [lexemes[t] for t, _ in probe], [d for _, d in probe]),
        ).fetchall() if probe else []
        return {(t, d): idfs[t] * impact for t, d, impact in rows}

    def _score_every_match(self, conn: Any, terms: list[str], words: list[tuple[str, float]], where: str,
                           params: list[Any], k: int, avglen: float) -> list[tuple[int, float]]:
        """BM25 of every chunk holding a query lexeme (the GIN index finds them; each term its own
        `plainto_tsquery`, OR-ed, so no user text reaches a tsquery parser)."""
        tsquery = " || ".join(["plainto_tsquery('english', %s)"] * len(terms))
        return self._score(conn, words, f"c.tsv @@ ({tsquery})", list(terms), where, params, k, avglen)

    def _score(self, conn: Any, words: list[tuple[str, float]], match: str, match_params: list[Any], where: str,
               params: list[Any], k: int, avglen: float, table: str = "chunks") -> list[tuple[int, float]]:
        """BM25 top-k of the chunks matching `match` and the WHERE. Each hit's tsvector is cut down to the query's
        lexemes (setweight + ts_filter, in C) before its term frequencies are read, so the cost per hit does not
        grow with chunk length. Length is the number of distinct lexemes (`length(tsvector)`). `table`: chunks,
        or chunk_terms (the same columns without text and vector) for chunks looked up by id."""
        lexemes = [w for w, _ in words]
        sql = f"""
            WITH words AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS w(lexeme, idf)),
            hits AS (SELECT c.id, c.tsv FROM {table} c WHERE {match} AND {where})
            SELECT h.id, sum(w.idf * tf * {K1 + 1} / (tf + {K1} * (1 - {B} + {B} * length(h.tsv) / %s))) AS score
            FROM hits h
            CROSS JOIN LATERAL unnest(ts_filter(setweight(h.tsv, 'A', %s::text[]), '{{a}}')) AS u
            JOIN words w ON w.lexeme = u.lexeme
            CROSS JOIN LATERAL (SELECT array_length(u.positions, 1)::float8 AS tf) f
            GROUP BY h.id ORDER BY score DESC, h.id LIMIT %s
        """
        rows = conn.execute(sql, (lexemes, [i for _, i in words], *match_params, *params, avglen, lexemes, k))
        return [(int(r[0]), float(r[1])) for r in rows.fetchall()]

    def fetch_chunks(self, rowids: list[int], filters: QueryFilters) -> dict[int, ChunkRow]:
        """Rows for the given ids, with the filter applied once more in SQL."""
        if not rowids:
            return {}
        where, params = self._chunk_where(filters)
        with self._transaction() as conn:
            cursor = conn.execute(
                f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
                f"WHERE c.id = ANY(%s) AND {where}",
                (rowids, *params),
            )
            names = [d.name for d in cursor.description]
            out: dict[int, ChunkRow] = {}
            for row in cursor:
                record = dict(zip(names, row, strict=True))
                out[record.pop("id")] = cast(ChunkRow, record)  # CHUNK_SELECT's columns
        if self.partitioned:
            if len(self._chunk_owners) > CHUNK_OWNERS_KEPT:
                self._chunk_owners.clear()
            self._chunk_owners.update((r["chunk_id"], owner_of(r["is_private"], r["user_slug"])) for r in out.values())
        return out

    def chunk_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors by chunk id (to score chunks that only the lexical side returned)."""
        if not chunk_ids:
            return {}
        sql = "SELECT chunk_id, embedding FROM chunks c WHERE c.chunk_id = ANY(%s)"
        owners = {self._chunk_owners.get(chunk_id) for chunk_id in chunk_ids} if self.partitioned else {None}
        if None not in owners:
            # Only the partitions these chunks were fetched from; a row not found there (moved or gone since) sends
            # the lookup to every partition below, so the answer is the same either way.
            marks = ", ".join(["%s"] * len(owners))
            rows = self._rows(f"{sql} AND c.owner IN ({marks})", (chunk_ids, *sorted(o for o in owners if o)),
                              binary=True)
            if len(rows) == len(set(chunk_ids)):
                return {chunk_id: _array(vector) for chunk_id, vector in rows}
        rows = self._rows(sql, (chunk_ids,), binary=True)
        return {chunk_id: _array(vector) for chunk_id, vector in rows}

    # -- sentence vectors: the sentence re-ranker's, computed at index time when asked (docs/design.md) --------

    def sentence_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """The stored sentence vectors of these chunks (a sentences x dim matrix each); absent ones are left out."""
        if not chunk_ids:
            return {}
        with self._transaction() as conn:
            dim = int(self._meta(conn, "embed_dim") or 0)
            rows = conn.execute("SELECT c.chunk_id, s.vectors FROM chunks c JOIN chunk_sentences s ON s.chunk = c.id "
                                "WHERE c.chunk_id = ANY(%s)", (chunk_ids,)).fetchall()
        return {chunk_id: np.frombuffer(blob, dtype=np.float32).reshape(-1, dim) for chunk_id, blob in rows if dim}

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
        """Drop the HNSW index and the postings for a large load and build both once at the end.

        Building the graph once over all rows is several times faster than growing it row by row, and the
        postings built once carry one mean length (the tightest bounds). Until they are back, 'postings_ready'
        is '0' and lexical search scores every match, so a load that dies midway leaves correct (slower)
        search; `settle_lexical` rebuilds them after the next write. `build_seconds` records each build.
        """
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
            conn.execute("UPDATE meta SET value = '0' WHERE key = 'postings_ready'")
        try:
            yield
        finally:
            self.build_seconds = {}
            with self._transaction() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
                conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (self._build_memory(conn),))
                started = time.perf_counter()
                if self._meta(conn, "embed_model") is not None:
                    conn.execute(
                        "CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw ON chunks "
                        "USING hnsw (embedding vector_ip_ops)"
                    )
                self.build_seconds["hnsw"] = time.perf_counter() - started
                conn.execute("ANALYZE chunks")
            self._settle_postings(force=True)

    def _settle_postings(self, force: bool = False) -> bool:
        """Rebuild the postings when they are not ready (a load that stopped midway) or, with `force`, always;
        then VACUUM them, so their index is read without visiting the table (an index-only scan needs the
        visibility map a fresh table lacks). Returns whether it rebuilt."""
        started = time.perf_counter()
        with self._transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            if not force and self._meta(conn, "postings_ready") == "1":
                return False
            conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (self._build_memory(conn),))
            self._rebuild_postings(conn)
        with self._psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"VACUUM (ANALYZE) {SCHEMA}.postings")
        self.build_seconds["postings"] = time.perf_counter() - started
        return True

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
            sentence_vector_chunks = conn.execute("SELECT COUNT(*) FROM chunk_sentences").fetchone()[0]
            lexical = int(self._meta(conn, "lexical_chunks") or 0)
            model, dim = self._meta(conn, "embed_model"), self._meta(conn, "embed_dim")
            generation = self._meta(conn, "generation")
            postings_ready = self._meta(conn, "postings_ready")
            version = conn.execute(f"SELECT max(version) FROM {SCHEMA}.migrations").fetchone()[0]
            server = conn.execute("SHOW server_version").fetchone()[0]
            pgvector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
            replica = replica_lag(conn) if self.replica else None
        if replica is not None:  # `status` shows the server line: say there that this is a replica, and how far behind
            server = f"{server} (read replica, {replica['summary']})"
        return {
            "documents": documents,
            "chunks": chunks,
            "lexical_rows": lexical,
            "lexical_generation": int(generation or 0),
            "lexical_postings": "ready" if postings_ready == "1" else "rebuilding (lexical search scores every match)",
            "embed_model": model,
            "embed_dim": int(dim or 0) or None,
            "sentence_vector_chunks": sentence_vector_chunks,
            "schema_version": version,
            "store": "postgresql",
            "server_version": server,
            "pgvector_version": pgvector,
            "path": self.path,
            "replica": replica,
        }

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
            # Lexical scoring filters on chunk_terms' copy of the scope columns: it must be chunks' exactly.
            drift = conn.execute(
                "SELECT COUNT(*) FROM chunks c FULL JOIN chunk_terms t USING (id) WHERE c.doc_id IS NULL OR "
                "t.doc_id IS NULL OR (c.doc_id, c.is_private, c.user_slug, c.doc_type, c.created_at, c.tsv) IS "
                "DISTINCT FROM (t.doc_id, t.is_private, t.user_slug, t.doc_type, t.created_at, t.tsv)"
            ).fetchone()[0]
            if drift:
                return f"{drift} chunks whose lexical scoring row differs from the chunk"
            if self.partitioned:
                # The owner clauses of the searches are only right while each row's owner is its scope's.
                misplaced = conn.execute(
                    "SELECT count(*) FROM chunks WHERE owner <> CASE WHEN NOT is_private THEN %s WHEN user_slug IS "
                    "NULL THEN %s ELSE 'u:' || user_slug END", (owner_of(False, None), owner_of(True, None))
                ).fetchone()[0]
                if misplaced:
                    return f"{misplaced} chunks in another scope's partition"
            if self._meta(conn, "postings_ready") == "1":
                # One posting per (chunk, lexeme): their count is the length total the BM25 statistics hold.
                postings = conn.execute("SELECT count(*) FROM postings").fetchone()[0]
                if postings != int(self._meta(conn, "lexical_length_sum") or 0):
                    return f"{postings} postings for {self._meta(conn, 'lexical_length_sum')} chunk lexemes"
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


def replica_lag(conn: Any) -> dict[str, Any]:
    """How far a streaming replica is behind: WAL received from the primary but not replayed yet (bytes), and the
    age of the last transaction it replayed (seconds; it grows while the primary is idle, so both are shown)."""
    received, replayed, lag_bytes, lag_seconds = conn.execute(
        "SELECT pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, "
        "pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint, "
        "extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8"
    ).fetchone()
    seconds = None if lag_seconds is None else round(max(lag_seconds, 0.0), 3)
    summary = (f"replayed to {replayed}, {lag_bytes or 0} bytes of received WAL not replayed yet, last replayed "
               f"transaction {'never' if seconds is None else f'{seconds} s ago'}")
    return {"received_lsn": received, "replayed_lsn": replayed, "replay_lag_bytes": int(lag_bytes or 0),
            "last_replay_age_seconds": seconds, "summary": summary}


def _may_be_small(filters: QueryFilters) -> bool:
    """Whether the scope is narrower than a privacy side of the index (then it is worth counting)."""
    return bool(filters.user_slug is not None or filters.doc_types or filters.tags or filters.date_from
                or filters.date_to or filters.public_only)


def _array(vector: Any) -> np.ndarray:
    """pgvector's Vector (binary transfer) as the float32 array the rest of ragstead uses."""
    return np.asarray(vector.to_numpy(), dtype=np.float32)


def _first_line(exc: BaseException, url: str) -> str:
    """The first line of a driver error, with every secret of `url` masked (libpq repeats a malformed URI,
    a DSN or the misparsed tail of a password in its messages)."""
    text = str(exc).strip() or type(exc).__name__
    return redact(text.splitlines()[0], url)


def _deepen(at: dict[tuple[int, int], float], lexemes: list[str], depths: list[int], options: list[list[int]],
            theta: dict[str, float], target: float) -> list[int] | None:
    """The depths `_plan_depths` picks from the probed bounds `at`: greedily the step that lowers the unseen
    bound most per posting read, until the bound is below `target`. None when no list can go deeper."""
    current = {t: theta.get(lexeme, 0.0) for t, lexeme in enumerate(lexemes)}
    planned = list(depths)
    while sum(current.values()) >= target:
        steps = [(current[t] - at[t, d], d - planned[t], t, d) for (t, d) in at
                 if d > planned[t] and at[t, d] < current[t]]
        if not steps:
            # Out of reach with today's floor: every list that can goes 16x deeper; the next round's k-th
            # score, higher, is the floor the round after is planned against.
            deeper = [max((o for o in opts if o <= d * 16), default=d) for d, opts in zip(depths, options,
                                                                                      strict=True)]
            return deeper if deeper != depths else None
        _, _, t, d = max(steps, key=lambda s: (s[0] / s[1], s[0]))
        planned[t], current[t] = d, at[t, d]
    return planned
