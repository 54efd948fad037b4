"""An index made before `proxy_wallet` became the general `subject` (code of c37be57: SQLite schema 4, PostgreSQL
migrations 1-6) opens with this code: the column is renamed in place and its values come back as `subject`, and
still as `proxy_wallet` in results (the documented JSON keeps that key)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from ragstead.filters import QueryFilters
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite

WALLET = "0x" + "ab" * 20
DIM = 8
VECTOR = np.full(DIM, 1 / np.sqrt(DIM), dtype=np.float32)
PRIVATE_ALICE = QueryFilters(user_slug="alice")

# The SQLite layout of schema version 4, as c37be57 created it (stores/sqlite.py's _SCHEMA then).
OLD_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Bumped by every write transaction; the lexical index records the value it reflects.
INSERT OR IGNORE INTO meta VALUES ('lexical_generation', '0');
-- Chunks deleted from the lexical index since it was last built whole: they still count in its BM25
-- statistics until a rebuild (settle_lexical).
INSERT OR IGNORE INTO meta VALUES ('lexical_deleted', '0');
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
    proxy_wallet TEXT,
    created_at TEXT,
    title TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    source TEXT,
    indexed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
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


def _old_rows() -> tuple[tuple[object, ...], tuple[object, ...]]:
    document = ("doc1", f"kb/users/alice/{WALLET}.md", "kb", "hash1", 10, 1.0, "user_kb", 1, "alice", WALLET,
                "2025-01-01T00:00:00+00:00", "Wallet note", '["wallet"]', None)
    chunk = ("chunk1", "doc1", 0, "the wallet realised a profit", "th1", 0, 5, 0, 28, None, None, 7,
             document[1], "user_kb", 1, "alice", document[10])
    return document, chunk


def _assert_subject(store) -> None:  # type: ignore[no-untyped-def]
    """The old row's wallet shows up as `subject` (and as the `proxy_wallet` alias) wherever rows are read."""
    rows = store.document_chunks(PRIVATE_ALICE, doc_id="doc1")
    assert [(r["subject"], r["proxy_wallet"]) for r in rows] == [(WALLET, WALLET)]
    hits = store.lexical_search(["wallet"], PRIVATE_ALICE, 5)
    fetched = store.fetch_chunks([rowid for rowid, _ in hits], PRIVATE_ALICE)
    assert [(r["subject"], r["proxy_wallet"]) for r in fetched.values()] == [(WALLET, WALLET)]
    (exported,) = list(store.export_documents())
    assert exported.document.subject == WALLET
    # New writes fill the renamed column.
    record = DocumentRecord("doc2", "kb/users/alice/new.md", "kb", "hash2", 5, 2.0, "user_kb", True, "alice",
                            "acme corp", None, "New", ["x"])
    chunk = ChunkRecord("chunk2", 0, "acme corp quarterly numbers", "th2", 0, 4, 0, 27, None, None, 6)
    store.apply([DocumentWrite(record, [chunk], VECTOR.reshape(1, -1))], [], [])
    assert [r["subject"] for r in store.document_chunks(PRIVATE_ALICE, doc_id="doc2")] == ["acme corp"]
    assert store.integrity_check() == "ok"


def test_a_schema_4_sqlite_index_opens_with_its_wallets_as_subject(tmp_path: Path) -> None:
    from ragstead.stores.sqlite import SCHEMA_VERSION, SqliteStore

    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(OLD_SQLITE_SCHEMA)
    db.executemany("INSERT INTO meta VALUES (?, ?)",
                   [("schema_version", "4"), ("embed_model", "fake"), ("embed_dim", str(DIM))])
    db.execute("UPDATE meta SET value = '1' WHERE key = 'lexical_generation'")
    document, chunk = _old_rows()
    db.execute("INSERT INTO documents (doc_id, file_path, root, file_hash, size, mtime, doc_type, is_private, "
               "user_slug, proxy_wallet, created_at, title, tags, source) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
               document)
    db.execute("INSERT INTO doc_tags VALUES ('doc1', 'wallet')")
    db.execute("INSERT INTO chunks (chunk_id, doc_id, chunk_index, text, text_hash, start_word, end_word, char_start, "
               "char_end, page, section_path, token_estimate, file_path, doc_type, is_private, user_slug, created_at, "
               "embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (*chunk, VECTOR.tobytes()))
    db.commit()
    db.close()

    store = SqliteStore(path)
    try:
        columns = {row[1] for row in store._db.execute("PRAGMA table_info(documents)")}
        assert "subject" in columns and "proxy_wallet" not in columns
        assert store.stats()["schema_version"] == SCHEMA_VERSION == 5
        _assert_subject(store)
    finally:
        store.close()
    reopened = SqliteStore(path)  # a second open finds nothing left to migrate
    try:
        assert [r["subject"] for r in reopened.document_chunks(PRIVATE_ALICE, doc_id="doc1")] == [WALLET]
    finally:
        reopened.close()


def test_a_postgres_index_of_migration_6_opens_with_its_wallets_as_subject(pg_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from ragstead.stores import postgres_migrations
    from ragstead.stores.postgres import PostgresStore

    # Migrations 1-6 are what c37be57 applied (a shipped migration is never edited): stop there, as it did.
    with monkeypatch.context() as patch:
        patch.setattr(postgres_migrations, "MIGRATIONS", postgres_migrations.MIGRATIONS[:6])
        patch.setattr(postgres_migrations, "LATEST", 6)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert postgres_migrations.migrate(conn) == 6
    document, chunk = _old_rows()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SET search_path TO ragstead, public")
        conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({DIM})")
        conn.execute("INSERT INTO meta VALUES ('embed_model', 'fake'), ('embed_dim', %s)", (str(DIM),))
        conn.execute("INSERT INTO documents (doc_id, file_path, root, file_hash, size, mtime, doc_type, is_private, "
                     "user_slug, proxy_wallet, created_at, title, tags, source) "
                     "VALUES (%s,%s,%s,%s,%s,%s,%s,%s::int::boolean,%s,%s,%s,%s,%s::jsonb,%s)", document)
        conn.execute("INSERT INTO doc_tags VALUES ('doc1', 'wallet')")
        conn.execute("INSERT INTO chunks (chunk_id, doc_id, chunk_index, text, text_hash, start_word, end_word, "
                     "char_start, char_end, page, section_path, token_estimate, file_path, doc_type, is_private, "
                     "user_slug, created_at, embedding) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
                     "%s::int::boolean,%s,%s,%s::vector)", (*chunk, str(VECTOR.tolist())))
        # The BM25 statistics and postings every write of that code kept (migrations 2 and 4).
        conn.execute("INSERT INTO lexemes SELECT u.lexeme, count(*) FROM chunks c, unnest(c.tsv) AS u GROUP BY 1")
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'postings_ready'")
        conn.execute("UPDATE meta SET value = (SELECT count(*) FROM chunks)::text WHERE key = 'lexical_chunks'")
        conn.execute("UPDATE meta SET value = (SELECT sum(length(tsv)) FROM chunks)::text "
                     "WHERE key = 'lexical_length_sum'")

    store = PostgresStore(pg_url)
    try:
        with psycopg.connect(pg_url) as conn:
            columns = {row[0] for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'ragstead' "
                "AND table_name = 'documents'")}
        assert "subject" in columns and "proxy_wallet" not in columns
        assert store.stats()["schema_version"] == postgres_migrations.LATEST == 7
        store.settle_lexical()  # the postings this test left unbuilt
        _assert_subject(store)
    finally:
        store.close()


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    """The contract under test is the stored field, not the model."""
    return fake_embedder


def test_results_carry_the_subject_and_its_old_name_on_every_store(make_project, store_spec):  # type: ignore[no-untyped-def]
    from helpers.library import search
    from ragstead.retrieval.search import SearchOptions

    project = make_project({
        f"kb/users/alice/{WALLET}-trades.md": "# Trades\nThe wallet traded options all week.",
        "kb/users/alice/acme.md": "---\nsubject: \"Acme Corp\"\n---\n# Acme\nAcme traded shares on Monday.",
        "kb/users/alice/plain.md": "# Plain\nNothing traded here but words.",
    }, store=store_spec)
    project.index()
    out = search("traded", project.store, project.embedder, PRIVATE_ALICE, SearchOptions(mode="lexical", k=5))
    by_path = {hit["file_path"]: (hit["subject"], hit["proxy_wallet"]) for hit in out["results"]}
    assert by_path == {
        f"kb/users/alice/{WALLET}-trades.md": (WALLET, WALLET),
        "kb/users/alice/acme.md": ("Acme Corp", "Acme Corp"),
        "kb/users/alice/plain.md": (None, None),
    }
