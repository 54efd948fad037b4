"""The store seam as protocols (#51.5): every store that runs here is an instance of each protocol it claims, the
split covers `Store` exactly, and a store without an optional capability is seen as lacking it, not crashed into.

The store kinds are conftest.py's (`store_spec`'s): SQLite, PostgreSQL (also partitioned by user), Chroma embedded
and as a server, Milvus Lite with lexical search in tantivy and in Milvus.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from helpers.project import PARTITIONED_KIND, STORE_KINDS, spec_for
from ragstead.filters import QueryFilters
from ragstead.indexing.build import IndexReport
from ragstead.services.indexer import Indexer
from ragstead.stores.base import (
    BulkLoad,
    ChunkRecord,
    ChunkRow,
    DocumentCount,
    DocumentRecord,
    DocumentRow,
    DocumentStore,
    DocumentWrite,
    LexicalSearch,
    SentenceVectors,
    Store,
    VectorSearch,
)
from ragstead.stores.factory import StoreSpec
from ragstead.stores.migrate import copy_store
from ragstead.stores.sqlite import SqliteStore

REQUIRED = (DocumentStore, VectorSearch, LexicalSearch)
OPTIONAL = (SentenceVectors, DocumentCount, BulkLoad)


def members(protocol: type) -> set[str]:
    """The methods a protocol declares itself (not those it inherits)."""
    return {name for name, value in vars(protocol).items() if callable(value) and not name.startswith("_")}


@pytest.fixture(params=[*STORE_KINDS, PARTITIONED_KIND])
def opened(request, tmp_path: Path) -> Iterator[tuple[str, Any]]:  # type: ignore[no-untyped-def]
    """A new, empty store of each kind, opened the way a project opens it."""
    spec = StoreSpec.parse(spec_for(request.param, request), root=tmp_path, default_db=tmp_path / "kb/rag/index.db")
    store = spec.open()
    yield request.param, store
    store.close()


def test_every_store_is_each_protocol_it_claims(opened: tuple[str, Any]) -> None:
    kind, store = opened
    for protocol in (*REQUIRED, SentenceVectors, DocumentCount, Store):
        assert isinstance(store, protocol), (kind, protocol.__name__)
    # Only PostgreSQL defers its index builds over a bulk load; the SQLite-based stores write as they go.
    assert isinstance(store, BulkLoad) == kind.startswith("postgresql"), kind


def test_every_store_reads_back_the_typed_rows(opened: tuple[str, Any]) -> None:
    """The rows that cross the seam have exactly ChunkRow's and DocumentRow's keys, with their types, in every
    store: a caller typed against them reads the same row whichever store answered."""
    kind, store = opened
    store.ensure_model("m", 4)
    store.apply([_write("a"), _write("b")], [], [])
    scope = QueryFilters()
    hits = store.vector_search(np.array([1.0, 0.0, 0.0, 0.0], np.float32), scope, 5)
    assert len(hits) == 2, kind
    chunks = [*store.fetch_chunks([rowid for rowid, _ in hits], scope).values(),
              *store.document_chunks(scope, doc_id="a")]
    documents = [*store.list_documents(scope), store.get_document("b")]
    assert len(chunks) == 3 and len(documents) == 3, kind
    for row, typed in [*((c, ChunkRow) for c in chunks), *((d, DocumentRow) for d in documents)]:
        assert set(row) == set(typed.__annotations__), (kind, typed.__name__, set(row) ^ set(typed.__annotations__))
        assert row["is_private"] is True and row["tags"] == [] and row["source"] is None, (kind, row)
    assert {c["chunk_index"] for c in chunks} == {0} and {d["chunks"] for d in documents} == {1}, kind


def test_the_protocols_split_the_store_exactly() -> None:
    """Each of Store's 28 methods is declared by exactly one protocol, and Store adds none of its own."""
    declared = [name for protocol in (*REQUIRED, SentenceVectors, DocumentCount) for name in members(protocol)]
    assert len(declared) == len(set(declared)) == 28
    assert members(Store) == set()
    assert not members(BulkLoad) & set(declared)


class Bare:
    """A plugin's store: what every store must do and the two searches, none of the optional capabilities."""

    def __init__(self, inner: SqliteStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if any(name in members(protocol) for protocol in REQUIRED):
            return getattr(self._inner, name)
        raise AttributeError(name)


def _write(doc_id: str) -> DocumentWrite:
    document = DocumentRecord(doc_id, f"kb/{doc_id}.md", "kb", "h" + doc_id, 10, 1.0, "note", True, None, None,
                              None, doc_id, [])
    chunk = ChunkRecord(f"{doc_id}:0", 0, f"the text of {doc_id}. A second sentence.", "t" + doc_id, 0, 8, 0, 40,
                        None, None, 10)
    vector = np.zeros((1, 4), np.float32)
    vector[0, 0] = 1.0
    return DocumentWrite(document, [chunk], vector)


def test_a_store_without_the_optional_capabilities_is_seen_as_lacking_them(tmp_path: Path) -> None:
    source = SqliteStore(tmp_path / "source.db")
    target = SqliteStore(tmp_path / "target.db")
    bare = Bare(target)
    try:
        source.ensure_model("m", 4)
        source.apply([_write("a"), _write("b")], [], [])
        assert all(isinstance(bare, protocol) for protocol in REQUIRED)
        assert not any(isinstance(bare, protocol) for protocol in OPTIONAL)
        # The index service stores no sentence vectors in it (it asked for methods the store lacks before),
        copied = SimpleNamespace(settings=SimpleNamespace(sentence_vectors=True), load_embedder=lambda store: None)
        Indexer(copied).fill_sentence_vectors(bare, IndexReport())  # type: ignore[arg-type]
        # ... a migration loads into it without a bulk load, and a list answer counts by paging the listing.
        report = copy_store(source, bare)  # type: ignore[arg-type]
        assert (report.documents, report.chunks) == (2, 2)
        from ragstead.answer.listing import count_documents

        assert count_documents(bare, QueryFilters()) == 2  # type: ignore[arg-type]
    finally:
        source.close()
        target.close()


def test_the_relational_stores_share_their_common_statements() -> None:
    """What SQLite and PostgreSQL run alike is defined once, in sql.SqlStore; neither store redefines it."""
    from ragstead.stores.postgres import PostgresStore
    from ragstead.stores.sql import SqlStore

    shared = {name for name in vars(SqlStore) if callable(vars(SqlStore)[name]) and not name.startswith("_")}
    assert len(shared) == 14
    for store in (SqliteStore, PostgresStore):
        assert issubclass(store, SqlStore)
        assert not shared & set(vars(store)), (store.__name__, shared & set(vars(store)))
