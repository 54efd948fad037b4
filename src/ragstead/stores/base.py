"""The seam between ragstead and a storage backend (SQLite now; PostgreSQL and Chroma plug in here)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, runtime_checkable

from ragstead.errors import ModelMismatchError
from ragstead.filters import QueryFilters
from ragstead.records import Record

if TYPE_CHECKING:  # numpy is imported where vectors are made: listing documents needs none (`ls`, `status`)
    import numpy as np


@dataclass
class DocumentRecord:
    """One indexed file; also its manifest entry (path -> hash, size, mtime)."""

    doc_id: str
    file_path: str
    root: str
    file_hash: str
    size: int
    mtime: float
    doc_type: str
    is_private: bool
    user_slug: str | None
    # What (whom) the document is about: a dossier's group key, a `subject:` front matter line, or a `0x` wallet
    # address in the path. Stored as `proxy_wallet` before schema 5 / migration 7; results still carry that alias.
    subject: str | None
    created_at: str | None
    title: str | None
    tags: list[str] = field(default_factory=list)
    # Where an ingested document came from (`ragstead ingest`): url, type, key (the dedup key), fetched_at,
    # author, published_at, site_name, content_hash. None for a plain file.
    source: dict[str, Any] | None = None


@dataclass
class ChunkRecord:
    """One chunk with its place in the document and the text hash its embedding is cached under."""

    chunk_id: str
    chunk_index: int
    text: str
    text_hash: str
    start_word: int
    end_word: int
    char_start: int
    char_end: int
    page: int | None
    section_path: str | None
    token_estimate: int


@dataclass
class DocumentWrite:
    """A document with its chunks and one vector per chunk, written atomically."""

    document: DocumentRecord
    chunks: list[ChunkRecord]
    vectors: np.ndarray
    secrets: int = 0  # secrets found in the document, masked in its chunks (not stored)
    language: str | None = None  # detected at index time (documents/language.py), kept in the index's languages.json


@dataclass
class ManifestEntry:
    """What the index knows about a file, to decide whether it changed."""

    doc_id: str
    file_hash: str
    size: int
    mtime: float
    root: str


class ChunkRow(TypedDict):
    """One chunk as a store reads it back (`fetch_chunks`, `document_chunks`): CHUNK_SELECT's columns, the chunk's
    place in its document and its document's metadata, the same keys and types from every store. A TypedDict, not
    a class: a row is the dict the driver's row became, so reading 1000 of them costs what it did."""

    chunk_id: str
    doc_id: str
    chunk_index: int
    text: str
    start_word: int
    end_word: int
    char_start: int
    char_end: int
    page: int | None
    section_path: str | None
    token_estimate: int
    file_path: str
    doc_type: str
    is_private: bool
    user_slug: str | None
    created_at: str | None
    subject: str | None
    proxy_wallet: str | None  # `subject`'s name before schema 5, kept for readers of old results
    title: str | None
    tags: list[str]
    file_hash: str
    root: str
    source: dict[str, Any] | None


class DocumentRow(TypedDict):
    """One document as a store lists it (`list_documents`, `get_document`, `documents_from_source`):
    DOCUMENT_SELECT's columns, the same keys and types from every store."""

    doc_id: str
    file_path: str
    file_hash: str
    size: int
    doc_type: str
    is_private: bool
    user_slug: str | None
    created_at: str | None
    title: str | None
    tags: list[str]
    source: dict[str, Any] | None
    indexed_at: str
    chunks: int


@runtime_checkable
class DocumentStore(Protocol):
    """What every store does: hold documents, their chunks and vectors, written atomically, and read them back
    scoped by the filters, which the store itself enforces (user, private-only default, types, dates, archive,
    tags: the same WHERE in every read)."""

    def ensure_model(self, model: str, dim: int) -> None:
        """Record the embedding model of an empty index, or raise ModelMismatchError if it differs."""
        ...

    def check_model(self, model: str, dim: int) -> None:
        """Raise ModelMismatchError if stored vectors come from another model (read-only)."""
        ...

    def embed_model(self) -> str | None:
        """The name of the model the index was built with, or None for an index without one (one meta read)."""
        ...

    def chunking(self) -> str | None:
        """How the index's text was cut (the settings guard's record), or None for an index without one."""
        ...

    def record_chunking(self, chunking: str) -> None:
        """Record how the index's text is cut."""
        ...

    def reset(self) -> None:
        """Remove every document, chunk and vector (for --rebuild)."""
        ...

    def manifest(self) -> dict[str, ManifestEntry]:
        """file_path -> ManifestEntry for every indexed file."""
        ...

    def cached_vectors(self, text_hashes: list[str]) -> dict[str, np.ndarray]:
        """Vectors already stored for these chunk-text hashes (the embedding cache)."""
        ...

    def apply(self, writes: list[DocumentWrite], removals: list[str], touches: list[DocumentRecord]) -> None:
        """In ONE transaction: replace documents, remove paths, refresh manifest entries."""
        ...

    def fetch_chunks(self, rowids: list[int], filters: QueryFilters) -> dict[int, ChunkRow]:
        """Chunk rows with document metadata, filtered again in SQL: `ChunkRow`s (declared as dicts until
        retrieval/'s row readers take the ChunkRow type; tests/test_store_protocols.py checks their keys)."""
        ...

    def chunk_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored vectors by chunk id."""
        ...

    def list_documents(self, filters: QueryFilters, limit: int = 1000, offset: int = 0) -> list[DocumentRow]:
        """Documents the filters admit, ordered by path: doc_id, file_path, file_hash, scope, chunks, ..."""
        ...

    def get_document(self, doc_id: str | None = None, *, file_path: str | None = None) -> DocumentRow | None:
        """One document's fields (as in list_documents) by id or by path, or None."""
        ...

    def document_chunks(self, filters: QueryFilters, *, doc_id: str | None = None,
                        chunk_id: str | None = None) -> list[ChunkRow]:
        """Every chunk of one document (by id, or the document holding `chunk_id`), in order, with the columns
        of `fetch_chunks` (`ChunkRow`s, as there), filtered in SQL: [] when there is no such document or the
        filters do not admit it."""
        ...

    def tag_counts(self, filters: QueryFilters) -> dict[str, int]:
        """Tags of the documents the filters admit -> how many carry each, most used first."""
        ...

    def documents_from_source(self, key: str) -> list[DocumentRow]:
        """The documents ingested from the source with this dedup key (`source["key"]`), as in list_documents."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counts and model info."""
        ...

    def export_documents(self, batch_size: int = 200) -> Iterator[DocumentWrite]:
        """Every document with its chunks and stored vectors, in path order (for `ragstead migrate`)."""
        ...

    def integrity_check(self) -> str:
        """'ok', or what is inconsistent (for `ragstead status`)."""
        ...

    def last_indexed_at(self) -> str | None:
        """The latest `indexed_at` of any document (ISO 8601 UTC), or None when there are none."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


@runtime_checkable
class VectorSearch(Protocol):
    """Nearest chunks to a query vector, inside the filters' scope."""

    def vector_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """Exact cosine search over the chunks that pass `filters`: [(chunk rowid, similarity)], best first."""
        ...


@runtime_checkable
class LexicalSearch(Protocol):
    """BM25 over the chunks' text, inside the filters' scope."""

    def lexical_search(self, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """BM25 over the chunks that pass `filters`, query words OR-ed: [(chunk rowid, score)], best first.

        `terms` are plain words (see retrieval.lexical_query); a store must never hand them to a query parser.
        """
        ...

    def settle_lexical(self) -> bool:
        """After writes that deleted chunks: make keyword statistics equal a clean build's again (or as the
        store's policy allows); True if it did work."""
        ...


@runtime_checkable
class SentenceVectors(Protocol):
    """Optional: the sentence re-ranker's vectors, stored beside the chunks (`sentence_vectors = true`)."""

    def sentence_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """The sentence re-ranker's stored vectors by chunk id: one row per sentence (split_sentences order)."""
        ...

    def chunks_without_sentence_vectors(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """(row id, text hash, text) of chunks after row id `after` that have no sentence vectors, in id order."""
        ...

    def put_sentence_vectors(self, rows: list[tuple[int, str, np.ndarray]]) -> int:
        """Store sentence matrices by (row id, text hash), skipping chunks gone or rewritten since; one transaction."""
        ...


@runtime_checkable
class DocumentCount(Protocol):
    """Optional: count the documents a scope admits in the store (else a caller pages through the listing)."""

    def count_documents(self, filters: QueryFilters) -> int:
        """How many documents the filters admit, counted in the store (the scope is part of the query)."""
        ...


@runtime_checkable
class BulkLoad(Protocol):
    """Optional: defer index builds over a large load and build them once at the end (PostgreSQL's HNSW graph
    and postings); `ragstead migrate` and snapshot imports load inside it."""

    def bulk_load(self) -> AbstractContextManager[None]:
        ...


@runtime_checkable
class Store(DocumentStore, VectorSearch, LexicalSearch, SentenceVectors, DocumentCount, Protocol):
    """Everything the built-in stores do (SQLite, PostgreSQL, and SQLite beside Chroma or Milvus): what the core
    is written against. Code that must also take a store without an optional capability (a plugin's) checks
    `isinstance(store, SentenceVectors)` and the like first; `tests/test_store_protocols.py` holds every store
    that runs here to the protocols it claims.

    Optional attribute: `parallel_searches = True` lets search() run `vector_search` and `lexical_search` on
    two threads at once (a store whose searches are safe to call concurrently, such as a pooled server).
    """


# The columns `fetch_chunks` and the document listing return, in every store (aliases: c = chunks or
# documents, d = documents), so their rows have the same keys whichever store answered.
CHUNK_SELECT = (
    "c.id, c.chunk_id, c.doc_id, c.chunk_index, c.text, c.start_word, c.end_word, c.char_start, "
    "c.char_end, c.page, c.section_path, c.token_estimate, c.file_path, c.doc_type, c.is_private, "
    "c.user_slug, c.created_at, d.subject, d.subject AS proxy_wallet, d.title, d.tags, d.file_hash, d.root, d.source"
)
@dataclass(frozen=True)
class DocumentInfo(Record):
    """A document as `KnowledgeBase.documents()` lists it: its path, type, owner, privacy, title, tags, where it
    came from (`source`, ingested documents only), when it was indexed and how many chunks it has. `to_dict()`
    is the row as the store gave it (the `ls --json` and `GET /v1/documents` items)."""

    doc_id: str
    file_path: str
    doc_type: str
    user_slug: str | None
    is_private: bool
    title: str | None
    tags: tuple[str, ...]
    created_at: str | None
    indexed_at: str | None
    chunks: int
    source: dict[str, Any] | None
    row: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def of(cls, row: DocumentRow) -> DocumentInfo:
        return cls(row["doc_id"], row["file_path"], row["doc_type"], row.get("user_slug"), bool(row["is_private"]),
                   row.get("title"), tuple(row.get("tags") or ()), row.get("created_at"), row.get("indexed_at"),
                   int(row.get("chunks") or 0), row.get("source"), dict(row))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.row)


DOCUMENT_SELECT = (
    "c.doc_id, c.file_path, c.file_hash, c.size, c.doc_type, c.is_private, c.user_slug, c.created_at, "
    "c.title, c.tags, c.source, c.indexed_at, (SELECT COUNT(*) FROM chunks k WHERE k.doc_id = c.doc_id) AS chunks"
)


def check_same_model(
    where: str, stored_model: str | None, stored_dim: str | int | None, model: str, dim: int, writing: bool
) -> None:
    """The model guard of every store: raise ModelMismatchError when the index holds another model's vectors."""
    if stored_model is None or (stored_model == model and int(stored_dim or 0) == dim):
        return
    if writing:
        raise ModelMismatchError(
            f"index {where} was built with {stored_model} ({stored_dim}-d) but the configured "
            f"embedder is {model} ({dim}-d); run `ragstead index --rebuild` to re-embed with it"
        )
    raise ModelMismatchError(
        f"index {where} was built with {stored_model} ({stored_dim}-d); the configured embedder "
        f"is {model} ({dim}-d): query vectors would not be comparable. Use the index's model, "
        "or run `ragstead index --rebuild`"
    )


DOCUMENT_FIELDS = ("doc_id", "file_path", "root", "file_hash", "size", "mtime", "doc_type", "is_private", "user_slug",
                   "subject", "created_at", "title", "tags", "source")
CHUNK_FIELDS = ("doc_id", "chunk_id", "chunk_index", "text", "text_hash", "start_word", "end_word", "char_start",
                "char_end", "page", "section_path", "token_estimate")


def assemble_writes(
    documents: list[tuple[Any, ...]], chunks: Iterable[tuple[Any, ...]], vectors: list[np.ndarray]
) -> list[DocumentWrite]:
    """DocumentWrites from rows in DOCUMENT_FIELDS / CHUNK_FIELDS order; `chunks` ordered by (doc_id, index)
    with `vectors` aligned to them. Both stores export through this, so a migration preserves every field."""
    import numpy as np

    by_doc: dict[str, list[tuple[ChunkRecord, np.ndarray]]] = {row[0]: [] for row in documents}
    for row, vector in zip(chunks, vectors, strict=True):
        by_doc[row[0]].append((ChunkRecord(*row[1:]), vector))
    writes = []
    for row in documents:
        record = DocumentRecord(*row[:12])
        record.is_private, record.tags, record.source = bool(record.is_private), list(row[12]), row[13] or None
        found = by_doc[record.doc_id]
        matrix = np.vstack([v for _, v in found]).astype(np.float32) if found else np.zeros((0, 0), np.float32)
        writes.append(DocumentWrite(record, [c for c, _ in found], matrix))
    return writes
