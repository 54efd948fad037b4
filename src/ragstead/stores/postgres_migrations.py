"""Versioned schema migrations of the PostgreSQL store: each runs once, in its own transaction, under an
advisory lock; a database at a version this code does not know is refused (docs/design.md, "PostgreSQL").
Append new migrations to MIGRATIONS; never edit one that has shipped.
"""

from __future__ import annotations

from typing import Any

from ragstead.errors import RagsteadError

SCHEMA = "ragstead"
# pg_advisory_xact_lock key: any fixed bigint; this one is 'ragstead' read as bytes.
MIGRATION_LOCK = 0x7261677374656164

# BM25 parameters (Lucene's and tantivy's defaults, so both stores rank alike).
K1, B = 1.2, 0.75
# The mean chunk length (distinct lexemes) the statistics of migration 2 hold; 1 on an empty index.
AVGLEN_SQL = (
    "(SELECT greatest(max(value::float8) FILTER (WHERE key = 'lexical_length_sum')"
    " / greatest(max(value::float8) FILTER (WHERE key = 'lexical_chunks'), 1), 1)"
    " FROM meta WHERE key IN ('lexical_chunks', 'lexical_length_sum'))"
)
# The postings' read paths: a term's postings by falling impact, in the whole index and in one user's scope
# (a user's list read directly, not the whole list filtered: 50x fewer entries walked for a 2 % user). The
# BRIN index finds a document's chunks' rows for deletion (rows are appended in chunk-id order) at a fraction
# of a B-tree's size.
POSTINGS_INDEXES = """
CREATE INDEX postings_top ON postings (lexeme, impact DESC) INCLUDE (chunk_id);
CREATE INDEX postings_user_top ON postings (user_slug, lexeme, impact DESC) INCLUDE (chunk_id);
CREATE INDEX postings_chunk ON postings USING brin (chunk_id);
"""


CHUNK_TERMS_COLUMNS = "id, doc_id, is_private, user_slug, doc_type, created_at, tsv"


def impact_sql(tf: str, length: str, avglen: str) -> str:
    """BM25's term weight without idf, as SQL over the given expressions."""
    return f"({tf})::float8 * {K1 + 1} / (({tf})::float8 + {K1} * (1 - {B} + {B} * ({length}) / ({avglen})))"


MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "documents, tags, chunks with vector and generated tsvector, filter indexes",
        """
CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO meta VALUES ('generation', '0');
CREATE TABLE documents (
    doc_id text PRIMARY KEY,
    file_path text NOT NULL UNIQUE,
    root text NOT NULL,
    file_hash text NOT NULL,
    size bigint NOT NULL,
    mtime double precision NOT NULL,
    doc_type text NOT NULL,
    is_private boolean NOT NULL,
    user_slug text,
    proxy_wallet text,
    created_at text,
    title text,
    tags jsonb NOT NULL DEFAULT '[]',
    indexed_at text NOT NULL DEFAULT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
);
CREATE INDEX documents_scope ON documents (is_private, user_slug, doc_type, created_at);
CREATE TABLE doc_tags (
    doc_id text NOT NULL REFERENCES documents (doc_id) ON DELETE CASCADE,
    tag text NOT NULL,
    PRIMARY KEY (doc_id, tag)
);
CREATE INDEX doc_tags_tag ON doc_tags (tag, doc_id);
-- Filter columns are copied onto chunks so both searches filter without a join (as in SQLite).
-- The vector column gets its dimension (and its HNSW index) when the first model is recorded.
CREATE TABLE chunks (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chunk_id text NOT NULL UNIQUE,
    doc_id text NOT NULL REFERENCES documents (doc_id) ON DELETE CASCADE,
    chunk_index integer NOT NULL,
    text text NOT NULL,
    text_hash text NOT NULL,
    start_word integer NOT NULL,
    end_word integer NOT NULL,
    char_start integer NOT NULL,
    char_end integer NOT NULL,
    page integer,
    section_path text,
    token_estimate integer NOT NULL,
    file_path text NOT NULL,
    doc_type text NOT NULL,
    is_private boolean NOT NULL,
    user_slug text,
    created_at text,
    embedding vector NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED
);
CREATE INDEX chunks_doc ON chunks (doc_id);
CREATE INDEX chunks_text_hash ON chunks (text_hash);
CREATE INDEX chunks_scope ON chunks (is_private, user_slug, doc_type, created_at);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);
""",
    ),
    (
        2,
        "lexeme document frequencies and length totals for BM25",
        """
-- ts_rank has no inverse document frequency; BM25 needs df per lexeme, the chunk count and the mean length.
-- Kept in step by every write (stores/postgres.py), in the write's own transaction.
CREATE TABLE lexemes (lexeme text PRIMARY KEY, df bigint NOT NULL);
INSERT INTO lexemes SELECT u.lexeme, count(*) FROM chunks c, unnest(c.tsv) AS u GROUP BY u.lexeme;
INSERT INTO meta SELECT 'lexical_chunks', count(*)::text FROM chunks;
INSERT INTO meta SELECT 'lexical_length_sum', coalesce(sum(length(tsv)), 0)::text FROM chunks;
""",
    ),
    (
        3,
        "where an ingested document came from, with its dedup key indexed",
        """
ALTER TABLE documents ADD COLUMN source jsonb;
CREATE INDEX documents_source_key ON documents ((source->>'key'));
""",
    ),
    (
        4,
        "impact-ordered postings, so lexical top-k reads a few postings per term instead of scoring every match; "
        "chunk rows kept whole",
        f"""
-- One row per (lexeme, chunk): the term's BM25 weight without idf (its 'impact'), computed with the mean length
-- recorded in meta 'postings_avglen' (the smallest any stored impact used; see stores/postgres.py).
CREATE TABLE postings (lexeme text NOT NULL, impact real NOT NULL, chunk_id bigint NOT NULL, user_slug text);
INSERT INTO meta SELECT 'postings_avglen', {AVGLEN_SQL}::text;
INSERT INTO meta VALUES ('postings_ready', '1');
INSERT INTO postings (lexeme, impact, chunk_id, user_slug)
SELECT u.lexeme, {impact_sql("array_length(u.positions, 1)", "length(c.tsv)", AVGLEN_SQL)}, c.id, c.user_slug
FROM chunks c, unnest(c.tsv) AS u;
{POSTINGS_INDEXES}
-- Chunk rows of new writes stay whole in the table, vector included (below a page, 8160 bytes): a scoped exact
-- vector scan then reads each row's page once instead of detoasting its vector (1.5 KB, out of line at the
-- default 2 KB target) through the TOAST index: 2.2x faster for a 20k-row scope. Rows written before keep theirs.
ALTER TABLE chunks SET (toast_tuple_target = 8160);
""",
    ),
    (
        5,
        "the sentence re-ranker's vectors, per chunk (opt-in: `sentence_vectors`)",
        """
-- One float32 row per sentence of the chunk, in split_sentences order: a cache derived from chunks.text that
-- goes with its chunk and is never exported.
CREATE TABLE chunk_sentences (chunk bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
                              vectors bytea NOT NULL);
""",
    ),
    (
        6,
        "what exact lexical scoring reads, apart from the wide chunk rows, kept in step by triggers",
        f"""
-- The tsvector and the filter columns of each chunk: about a fifth of its row (text and vector make the rest), so
-- the thousands of random reads that score a head-term query's candidates hit a table the page cache can hold.
-- Statement triggers with transition tables copy every insert and update of chunks (COPY included); deletes
-- cascade. docs/design.md, "PostgreSQL".
CREATE TABLE chunk_terms (
    id bigint PRIMARY KEY REFERENCES chunks (id) ON DELETE CASCADE,
    doc_id text NOT NULL,
    is_private boolean NOT NULL,
    user_slug text,
    doc_type text NOT NULL,
    created_at text,
    tsv tsvector NOT NULL
);
INSERT INTO chunk_terms SELECT {CHUNK_TERMS_COLUMNS} FROM chunks ORDER BY id;
CREATE FUNCTION chunk_terms_copy() RETURNS trigger LANGUAGE plpgsql SET search_path = {SCHEMA} AS $$
BEGIN
    INSERT INTO chunk_terms SELECT {CHUNK_TERMS_COLUMNS} FROM changed_chunks
    ON CONFLICT (id) DO UPDATE SET doc_id = excluded.doc_id, is_private = excluded.is_private,
        user_slug = excluded.user_slug, doc_type = excluded.doc_type, created_at = excluded.created_at,
        tsv = excluded.tsv;
    RETURN NULL;
END $$;
CREATE TRIGGER chunks_inserted_terms AFTER INSERT ON chunks REFERENCING NEW TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_terms_copy();
CREATE TRIGGER chunks_updated_terms AFTER UPDATE ON chunks REFERENCING NEW TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_terms_copy();
""",
    ),
    (
        7,
        "a document's subject (what it is about), the general name of proxy_wallet",
        """
-- Values stay; results still carry them as `proxy_wallet` too (stores/base.py, CHUNK_SELECT).
ALTER TABLE documents RENAME COLUMN proxy_wallet TO subject;
""",
    ),
]

LATEST = MIGRATIONS[-1][0]


def migrate(conn: Any) -> int:
    """Bring the `ragstead` schema of this database to LATEST; return the version it is at.

    `conn` is a psycopg connection in autocommit mode.
    """
    with conn.transaction():
        # Under the lock: two processes creating the extension at once would collide on pg_extension.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
            if available is None:
                raise RagsteadError(
                    "the PostgreSQL server has no pgvector extension; install it on the server (see docs/stores.md, "
                    "'Server backends') or use `python -m ragstead.stores.postgres_local`, which ships it"
                )
            conn.execute("CREATE EXTENSION vector")
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.migrations (version integer PRIMARY KEY, "
            "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        applied = {row[0] for row in conn.execute(f"SELECT version FROM {SCHEMA}.migrations")}
        unknown = sorted(v for v in applied if v > LATEST)
        if unknown:
            raise RagsteadError(
                f"this database has ragstead schema version {unknown[-1]}, newer than this ragstead knows "
                f"({LATEST}); upgrade ragstead"
            )
        for version, description, sql in MIGRATIONS:
            if version in applied:
                continue
            conn.execute(f"SET LOCAL search_path TO {SCHEMA}, public")
            conn.execute(sql)
            conn.execute(
                f"INSERT INTO {SCHEMA}.migrations (version, description) VALUES (%s, %s)", (version, description)
            )
    return LATEST


def check_replica_schema(conn: Any) -> int:
    """On a read replica, which cannot migrate: the version its primary's schema has reached (as replayed), or a
    clear error when the primary has not made (or not finished) ragstead's schema yet."""
    exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.migrations",)).fetchone()[0]
    version = conn.execute(f"SELECT max(version) FROM {SCHEMA}.migrations").fetchone()[0] if exists else None
    if version != LATEST:
        raise RagsteadError(
            f"this read replica has ragstead schema version {version or 'none'}, expected {LATEST}: open the "
            "primary with this ragstead once (it migrates), and let the replica replay it"
        )
    return int(version)
