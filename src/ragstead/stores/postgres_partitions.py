"""The PostgreSQL store's partitioned-by-user layout (opt-in: `postgresql://...?partition=user`).

`chunks` is LIST-partitioned on an `owner` column derived from each chunk's privacy and user: one partition per
user ('u:<slug>', created on the user's first write), one for public documents ('public') and one for private
documents that belong to no user ('shared'). Each partition has its own HNSW graph and GIN index, so a query
scoped to one user walks that user's graph only: the planner prunes the others, from a clause that
`owner_clause` derives from the scope and that the scope's own WHERE already implies (it never changes an
answer, it only names the partitions). Why LIST and not HASH, and what it costs: docs/stores.md,
"Partitioned by user".

The layout is made on an empty index only (`partition_chunks`); an index that holds chunks moves to it with
`ragstead migrate --to postgresql://...?partition=user`. The other tables (documents, chunk_terms, postings, ...)
stay as they are.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ragstead.errors import ConfigError, RagsteadError
from ragstead.filters import QueryFilters
from ragstead.stores.postgres_migrations import SCHEMA

__all__ = ["LAYOUT_KEY", "PARTITIONED", "PUBLIC", "SHARED", "ensure_partitions", "is_partitioned", "owner_clause",
           "owner_of", "partition_chunks", "partition_name", "split_partition_option",
           "split_store_options"]

# meta key and value that mark the layout; absent on an unpartitioned index.
LAYOUT_KEY, PARTITIONED = "chunk_layout", "partitioned_by_user"
PUBLIC, SHARED = "public", "shared"
OPTION = "partition"
# hnsw.ef_search for graph walks (pgvector's candidate list): `?ef_search=N`; `bench partitions --ef-search`
# measured what it buys in a user's own graph (docs/scaling.md).
EF_SEARCH = "ef_search"
STORE_OPTIONS = (OPTION, EF_SEARCH)

# The partitioned `chunks`: the same columns (LIKE copies types, defaults, the identity and the generated tsvector)
# plus `owner`. A partitioned table's unique keys must hold the partition key: (id, owner), (chunk_id, owner); ids
# and chunk ids stay unique across partitions all the same (one identity; a chunk id hashes its document's path,
# and a path has one owner). chunk_terms and chunk_sentences lose their foreign key to chunks (it would need the
# owner too): a statement trigger deletes their rows with their chunk's instead, as the cascade did.
_LAYOUT_SQL = f"""
CREATE TABLE chunks_by_user (LIKE chunks INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING IDENTITY
    INCLUDING STORAGE INCLUDING COMPRESSION, owner text NOT NULL) PARTITION BY LIST (owner);
DROP TABLE chunks CASCADE;
ALTER TABLE chunks_by_user RENAME TO chunks;
ALTER TABLE chunks ADD CONSTRAINT chunks_pkey PRIMARY KEY (id, owner),
    ADD CONSTRAINT chunks_chunk_id_key UNIQUE (chunk_id, owner),
    ADD CONSTRAINT chunks_doc_id_fkey FOREIGN KEY (doc_id) REFERENCES documents (doc_id) ON DELETE CASCADE;
CREATE INDEX chunks_doc ON chunks (doc_id);
CREATE INDEX chunks_text_hash ON chunks (text_hash);
-- owner included: the scope count of a small-scope query (stores/postgres.py, vector_search) then reads this index
-- alone (an index-only scan), not the partition's wide rows.
CREATE INDEX chunks_scope ON chunks (is_private, user_slug, doc_type, created_at) INCLUDE (owner);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);
CREATE TRIGGER chunks_inserted_terms AFTER INSERT ON chunks REFERENCING NEW TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_terms_copy();
CREATE TRIGGER chunks_updated_terms AFTER UPDATE ON chunks REFERENCING NEW TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_terms_copy();
CREATE OR REPLACE FUNCTION chunk_dependents_delete() RETURNS trigger LANGUAGE plpgsql SET search_path = {SCHEMA} AS $$
BEGIN
    DELETE FROM chunk_terms WHERE id IN (SELECT id FROM gone_chunks);
    DELETE FROM chunk_sentences WHERE chunk IN (SELECT id FROM gone_chunks);
    RETURN NULL;
END $$;
CREATE TRIGGER chunks_deleted_dependents AFTER DELETE ON chunks REFERENCING OLD TABLE AS gone_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_dependents_delete();
"""


def split_store_options(url: str) -> tuple[str, dict[str, str]]:
    """The URL without ragstead's own parameters (libpq would refuse them: `partition`, `ef_search`), and their
    values, checked. The other parameters stay byte for byte as written; a URL without them, or too malformed to
    split, is returned as it is (libpq then says what is wrong with it)."""
    if not any(f"{name}=" in url for name in STORE_OPTIONS):
        return url, {}
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, {}
    pairs = parts.query.split("&") if parts.query else []
    options = {pair.partition("=")[0]: unquote(pair.partition("=")[2]) for pair in pairs
               if pair.partition("=")[0] in STORE_OPTIONS}  # the last one of a name wins
    if OPTION in options and options[OPTION] != "user":
        raise ConfigError(f"unknown {OPTION}={options[OPTION]!r} in the PostgreSQL store setting; the one layout is "
                          f"{OPTION}=user")
    if EF_SEARCH in options and not (options[EF_SEARCH].isdigit() and 1 <= int(options[EF_SEARCH]) <= 1000):
        raise ConfigError(f"{EF_SEARCH}={options[EF_SEARCH]!r} in the PostgreSQL store setting must be a whole "
                          "number from 1 to 1000 (pgvector's limit; the default is 40)")
    rest = "&".join(pair for pair in pairs if pair.partition("=")[0] not in STORE_OPTIONS)
    return urlunsplit(parts._replace(query=rest)), options


def split_partition_option(url: str) -> tuple[str, str | None]:
    """The URL without ragstead's parameters, and the `partition` one's value (split_store_options)."""
    url, options = split_store_options(url)
    return url, options.get(OPTION)


def owner_of(is_private: bool, user_slug: str | None) -> str:
    """The partition value of a chunk: its user's, or the public or shared one."""
    if not is_private:
        return PUBLIC
    return f"u:{user_slug}" if user_slug is not None else SHARED


def partition_name(owner: str) -> str:
    """A table name for the partition of `owner`: readable where the slug allows, unique by a hash suffix."""
    if owner in (PUBLIC, SHARED):
        return f"chunks_{owner}"
    readable = re.sub(r"[^a-z0-9_]", "_", owner.removeprefix("u:").lower())[:32]
    return f"chunks_u_{readable}_{hashlib.sha256(owner.encode()).hexdigest()[:8]}"


def owner_clause(filters: QueryFilters, alias: str = "c") -> tuple[str, list[Any]]:
    """A clause on `owner` that the scope's WHERE already implies, written so the planner prunes on it (scalar
    parameters: pruned in generic plans too). ('', []) when the scope spans every user's partition."""
    private_side = not filters.public_only
    public_side = filters.public_only or filters.archive_beside_private  # the public archive beside private
    owners = []
    if private_side and filters.user_slug is not None:
        owners.append(owner_of(True, filters.user_slug))
    if public_side:
        owners.append(PUBLIC)
    if private_side and filters.user_slug is None:
        return ("", []) if public_side else (f"{alias}.owner <> %s", [PUBLIC])
    return f"{alias}.owner IN ({', '.join(['%s'] * len(owners))})", owners


def ensure_partitions(conn: Any, owners: set[str]) -> None:
    """Create the partitions of these owners that do not exist yet (the caller holds the write lock)."""
    from psycopg import sql

    for owner in sorted(owners):
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} PARTITION OF chunks FOR VALUES IN ({}) "
                             "WITH (toast_tuple_target = 8160)").format(sql.Identifier(partition_name(owner)),
                                                                       sql.Literal(owner)))


def is_partitioned(conn: Any) -> bool:
    """Whether this index has the partitioned layout (read from meta)."""
    row = conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = %s", (LAYOUT_KEY,)).fetchone()
    return row is not None and row[0] == PARTITIONED


def partition_chunks(conn: Any) -> None:
    """Give an empty index the partitioned layout, in the caller's transaction (which holds the write lock).

    The vector column keeps its type and, once a model is recorded, the HNSW index is made on the partitioned
    table (each partition, present and future, gets its own graph)."""
    if conn.execute(f"SELECT EXISTS (SELECT 1 FROM {SCHEMA}.chunks)").fetchone()[0]:
        raise RagsteadError("this PostgreSQL index holds chunks in the unpartitioned layout; move it to a new "
                            "database with `ragstead migrate --from THIS --to postgresql://.../NEW?partition=user`")
    hnsw = conn.execute("SELECT to_regclass('chunks_embedding_hnsw') IS NOT NULL").fetchone()[0]
    conn.execute(_LAYOUT_SQL)
    ensure_partitions(conn, {PUBLIC, SHARED})
    if hnsw:
        conn.execute("CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_ip_ops)")
    conn.execute("INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = "
                 "excluded.value", (LAYOUT_KEY, PARTITIONED))
