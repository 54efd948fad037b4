"""Portable snapshots (`ragstead export` / `ragstead import`): one file that holds an index, vectors included,
so it moves between machines and stores without parsing or embedding anything.

The format (version 1) is a zip archive with three members:

- `manifest.json`: {"format": "ragstead-snapshot", "version": 1, "created_at", "model", "dim", "chunking",
  "documents", "chunks", "sha256": {"documents.jsonl": hex, "vectors.f32": hex}, "secrets": {"checked": bool,
  "files": {path: count}}} (`secrets`: whether the source index masked every chunk, and the files it masked
  secrets in; absent in snapshots written before it, whose state is unknown)
- `documents.jsonl`: one JSON object a line, path order: {"document": {the DocumentRecord fields: doc_id,
  file_path, root, file_hash, size, mtime, doc_type, is_private, user_slug, subject, created_at, title, tags,
  source}, "chunks": [{the ChunkRecord fields}, ...]}
- `vectors.f32`: the chunks' vectors, little-endian float32, one row of `dim` values per chunk, in the order
  the chunks appear in documents.jsonl.

A reader checks the format, both SHA-256 sums, the counts, the vector size and every record (its fields and their
types, unique document ids, paths and chunk ids, relative paths, sizes) before it writes anything; a snapshot that
fails any check is refused whole. A line is read at most MAX_LINE_BYTES at a time, so a line of 800 MB of spaces
(816 KB deflated) is refused after 64 MiB instead of being read whole. The file is private data: written 0600,
named `*.ragsnap` (the guard's secret-file patterns block that name from a push).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

import numpy as np

from ragstead.core.atomic import replacing_atomically
from ragstead.errors import ModelMismatchError, RagsteadError
from ragstead.stores.base import BulkLoad, ChunkRecord, DocumentRecord, DocumentWrite, Store

FORMAT = "ragstead-snapshot"
VERSION = 1
SUFFIX = ".ragsnap"
MANIFEST, DOCUMENTS, VECTORS = "manifest.json", "documents.jsonl", "vectors.f32"
_VECTOR_DTYPE = np.dtype("<f4")
_READ_BLOCK = 1 << 20
# RecursionError: JSON nested past the parser's depth (a record of 100,000 brackets).
_CORRUPT = (zipfile.BadZipFile, zlib.error, EOFError, KeyError, ValueError, UnicodeDecodeError, TypeError,
            RecursionError)
_INT_RANGE = range(-(1 << 63), 1 << 63)  # what a store's integer column holds (SQLite's, PostgreSQL's bigint)
# One document's line holds all of its chunks' text: at most max_file_chars (5 M) characters cut with overlap, as
# JSON in UTF-8. 64 MiB holds that with room to spare and bounds what one line can make a reader hold.
MAX_LINE_BYTES = 64 << 20
MAX_ID_CHARS = 256  # a doc or chunk id, a hash, a type, a user slug: ours are at most 64
MAX_PATH_CHARS = 4096
_STR, _INT, _OPT_STR, _OPT_INT = (str,), (int,), (str, type(None)), (int, type(None))
# The fields of a document and of a chunk line and the JSON types each may hold (bool is not an int here).
DOCUMENT_FIELDS: dict[str, tuple[type, ...]] = {
    "doc_id": _STR, "file_path": _STR, "root": _STR, "file_hash": _STR, "size": _INT, "mtime": (int, float),
    "doc_type": _STR, "is_private": (bool,), "user_slug": _OPT_STR, "subject": _OPT_STR, "created_at": _OPT_STR,
    "title": _OPT_STR, "tags": (list,), "source": (dict, type(None))}
OPTIONAL_DOCUMENT_FIELDS = frozenset({"tags", "source"})
CHUNK_FIELDS: dict[str, tuple[type, ...]] = {
    "chunk_id": _STR, "chunk_index": _INT, "text": _STR, "text_hash": _STR, "start_word": _INT, "end_word": _INT,
    "char_start": _INT, "char_end": _INT, "page": _OPT_INT, "section_path": _OPT_STR, "token_estimate": _INT}


class SnapshotError(RagsteadError):
    """A file that is not a ragstead snapshot, or one that is damaged or truncated."""


class DocumentEmbedder(Protocol):
    name: str
    dim: int

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class SnapshotManifest:
    """What a snapshot holds, read from its manifest.json."""

    model: str
    dim: int
    chunking: str | None
    documents: int
    chunks: int
    created_at: str
    sha256: dict[str, str]
    secrets: dict[str, Any] | None = None  # {"checked": bool | None, "files": {path: count}}; None: not said

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, **dataclasses.asdict(self)}


@dataclass
class ExportReport:
    path: str
    documents: int
    chunks: int
    bytes: int
    model: str
    dim: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"seconds": round(self.seconds, 3)}


@dataclass
class ImportReport:
    """What an import wrote; `embedded` is 0 unless the snapshot was re-embedded (`--reembed`)."""

    path: str
    documents: int
    chunks: int
    embedded: int
    model: str
    target: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"seconds": round(self.seconds, 3)}


def snapshot_path(path: str | Path) -> Path:
    """The file `export` writes: `path`, with `.ragsnap` added unless it ends so (the name the guard blocks)."""
    path = Path(path)
    return path if path.name.endswith(SUFFIX) else path.with_name(path.name + SUFFIX)


def write_snapshot(store: Store, path: Path, batch_size: int = 200,
                   secrets: dict[str, Any] | None = None) -> ExportReport:
    """Write every document, chunk and vector of `store` to the snapshot `path` (replaced atomically, 0600);
    `secrets`: the source index's secrets state ({"checked", "files"}), carried in the manifest."""
    started = time.perf_counter()
    stats = store.stats()
    model, dim = stats["embed_model"], int(stats["embed_dim"] or 0)
    if model is None:
        raise RagsteadError(f"the index {stats['path']} is empty: nothing to export")
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing_atomically(path) as handle:  # 0600 whatever the umask: the snapshot holds the documents' text
        documents, chunks = _write_zip(store, handle, path.parent, model, dim, batch_size, secrets)
    return ExportReport(str(path), documents, chunks, path.stat().st_size, model, dim, time.perf_counter() - started)


def _write_zip(store: Store, handle: IO[bytes], folder: Path, model: str, dim: int,
               batch_size: int, secrets: dict[str, Any] | None) -> tuple[int, int]:
    documents = chunks = 0
    doc_sum, vec_sum = hashlib.sha256(), hashlib.sha256()
    # The vectors wait in an unlinked temporary file beside the snapshot: a zip writes one member at a time.
    with tempfile.TemporaryFile(dir=folder) as vectors, \
            zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open(DOCUMENTS, "w", force_zip64=True) as out:
            for write in store.export_documents(batch_size):
                line = json.dumps({"document": dataclasses.asdict(write.document),
                                   "chunks": [dataclasses.asdict(c) for c in write.chunks]},
                                  ensure_ascii=False).encode("utf-8") + b"\n"
                out.write(line)
                doc_sum.update(line)
                if write.chunks:
                    if write.vectors.shape != (len(write.chunks), dim):
                        raise RagsteadError(f"{write.document.file_path}: stored vectors are {write.vectors.shape}, "
                                            f"expected ({len(write.chunks)}, {dim})")
                    data = np.ascontiguousarray(write.vectors, dtype=_VECTOR_DTYPE).tobytes()
                    vectors.write(data)
                    vec_sum.update(data)
                documents, chunks = documents + 1, chunks + len(write.chunks)
        vectors.seek(0)
        info = zipfile.ZipInfo(VECTORS, date_time=time.localtime()[:6])
        info.compress_type = zipfile.ZIP_STORED  # float noise does not compress
        with archive.open(info, "w", force_zip64=True) as out:
            while block := vectors.read(_READ_BLOCK):
                out.write(block)
        manifest = SnapshotManifest(model, dim, store.chunking(), documents, chunks,
                                    datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                                    {DOCUMENTS: doc_sum.hexdigest(), VECTORS: vec_sum.hexdigest()}, secrets)
        archive.writestr(MANIFEST, json.dumps(manifest.to_dict(), indent=2))
    return documents, chunks


def read_manifest(path: Path) -> SnapshotManifest:
    """The snapshot's manifest, after checking every member against its SHA-256 sum and the counts: a
    damaged, truncated or foreign file raises SnapshotError before anything reads its content."""
    try:
        with zipfile.ZipFile(path) as archive:
            raw = json.loads(archive.read(MANIFEST))
            if not isinstance(raw, dict) or raw.get("format") != FORMAT:
                raise SnapshotError(f"{path} is not a ragstead snapshot (no {FORMAT} manifest)")
            if raw.get("version") != VERSION:
                raise SnapshotError(f"{path} is a version {raw.get('version')} snapshot; this ragstead reads "
                                    f"version {VERSION}")
            manifest = SnapshotManifest(**{f.name: raw[f.name] for f in dataclasses.fields(SnapshotManifest)
                                           if f.name != "secrets"}, secrets=_secrets(raw.get("secrets")))
            counts = (manifest.dim, manifest.documents, manifest.chunks)
            if not (isinstance(manifest.model, str) and isinstance(manifest.sha256, dict)
                    and all(isinstance(n, int) and n >= 0 for n in counts)):
                raise SnapshotError(f"{path} is damaged: its manifest is malformed; nothing was imported")
            digest, documents, chunks = _check_documents(archive, path)
            _check_sum(path, DOCUMENTS, digest, manifest)
            with archive.open(VECTORS) as data:
                digest, size = hashlib.sha256(), 0
                while block := data.read(_READ_BLOCK):
                    digest.update(block)
                    size += len(block)
            _check_sum(path, VECTORS, digest, manifest)
    except SnapshotError:
        raise
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except (*_CORRUPT, OSError) as exc:
        raise SnapshotError(f"{path} is damaged or not a ragstead snapshot ({_reason(exc)}); nothing was "
                            "imported") from None
    if (documents, chunks) != (manifest.documents, manifest.chunks) or size != chunks * manifest.dim * 4:
        raise SnapshotError(f"{path} is damaged: its manifest says {manifest.documents} documents / "
                            f"{manifest.chunks} chunks, it holds {documents} / {chunks}; nothing was imported")
    return manifest


def _check_documents(archive: zipfile.ZipFile, path: Path) -> tuple[Any, int, int]:
    """Read documents.jsonl once: its SHA-256 and its documents and chunks, each record checked (check_record)."""
    documents = chunks = 0
    seen = _Seen()
    digest = hashlib.sha256()
    try:
        with archive.open(DOCUMENTS) as lines:
            for line in bounded_lines(lines):
                digest.update(line)
                chunks += check_record(json.loads(line), seen)
                documents += 1
    except SnapshotError as exc:
        raise SnapshotError(f"{path} is damaged: {exc} (record {documents + 1}); nothing was imported") from None
    return digest, documents, chunks


def bounded_lines(member: IO[bytes]) -> Iterator[bytes]:
    """The lines of a snapshot member, each read at most MAX_LINE_BYTES (+1) at a time: a longer one is refused
    before the rest of it is read."""
    while line := member.readline(MAX_LINE_BYTES + 1):
        if len(line) > MAX_LINE_BYTES:
            raise SnapshotError(f"a line of {DOCUMENTS} is over {MAX_LINE_BYTES >> 20} MiB")
        yield line


@dataclass
class _Seen:
    """The ids and paths read so far: each must be unique in the snapshot."""

    doc_ids: set[str] = dataclasses.field(default_factory=set)
    paths: set[str] = dataclasses.field(default_factory=set)
    chunk_ids: set[str] = dataclasses.field(default_factory=set)


def check_record(item: Any, seen: _Seen) -> int:
    """Check one line of documents.jsonl before anything is written: a document with exactly its fields, each of
    its JSON type, an id, path and chunk ids not seen before, a relative path inside the project, sizes within
    bounds. Returns its number of chunks; raises SnapshotError naming the first problem."""
    if not isinstance(item, dict) or set(item) != {"document", "chunks"} or not isinstance(item["chunks"], list):
        raise SnapshotError("a line is not a {document, chunks} record")
    document = _fields(item["document"], DOCUMENT_FIELDS, OPTIONAL_DOCUMENT_FIELDS, "a document")
    doc_id, file_path = document["doc_id"], document["file_path"]
    _bounded(document, ("doc_id", "file_hash", "doc_type", "user_slug"), MAX_ID_CHARS, "a document")
    _bounded(document, ("file_path", "root"), MAX_PATH_CHARS, "a document")
    if not all(isinstance(tag, str) for tag in document.get("tags", [])):
        raise SnapshotError(f"document {doc_id}: a tag is not a string")
    parts = PurePosixPath(file_path).parts
    if not parts or file_path.startswith("/") or ".." in parts or "\x00" in file_path:
        raise SnapshotError(f"document {doc_id}: its path {file_path!r} is not a relative path inside the project")
    for name, pool, value in (("document id", seen.doc_ids, doc_id), ("path", seen.paths, file_path)):
        if value in pool:
            raise SnapshotError(f"the {name} {value!r} comes twice")
        pool.add(value)
    for raw in item["chunks"]:
        chunk = _fields(raw, CHUNK_FIELDS, frozenset(), f"a chunk of {file_path!r}")
        _bounded(chunk, ("chunk_id", "text_hash"), MAX_ID_CHARS, f"a chunk of {file_path!r}")
        if chunk["chunk_id"] in seen.chunk_ids:
            raise SnapshotError(f"the chunk id {chunk['chunk_id']!r} comes twice")
        seen.chunk_ids.add(chunk["chunk_id"])
    return len(item["chunks"])


def _fields(raw: Any, kinds: dict[str, tuple[type, ...]], optional: frozenset[str], what: str) -> dict[str, Any]:
    """`raw` as a record of exactly these fields (the optional ones may be missing), each of its JSON type."""
    if not isinstance(raw, dict):
        raise SnapshotError(f"{what} is not an object")
    unknown, missing = set(raw) - set(kinds), set(kinds) - set(raw) - optional
    if unknown or missing:
        raise SnapshotError(f"{what} has fields {sorted(unknown)} it should not have, lacks {sorted(missing)}")
    for name, value in raw.items():
        if not isinstance(value, kinds[name]) or (isinstance(value, bool) and bool not in kinds[name]):
            raise SnapshotError(f"{what}: {name} is a {type(value).__name__}")
        if isinstance(value, int) and value not in _INT_RANGE:
            raise SnapshotError(f"{what}: {name} is past a 64-bit integer")
    return raw


def _bounded(record: dict[str, Any], names: tuple[str, ...], limit: int, what: str) -> None:
    for name in names:
        if isinstance(record.get(name), str) and len(record[name]) > limit:
            raise SnapshotError(f"{what}: {name} is over {limit} characters")


def _secrets(raw: Any) -> dict[str, Any] | None:
    """The manifest's secrets state, if it says one that makes sense (an older snapshot does not)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("checked"), bool):
        return None
    files = raw.get("files")
    files = {str(k): v for k, v in files.items() if isinstance(v, int)} if isinstance(files, dict) else {}
    return {"checked": raw["checked"], "files": files}


def _check_sum(path: Path, member: str, digest: Any, manifest: SnapshotManifest) -> None:
    if digest.hexdigest() != manifest.sha256.get(member):
        raise SnapshotError(f"{path} is damaged: {member} does not match its SHA-256 sum; nothing was imported")


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def read_writes(path: Path, manifest: SnapshotManifest) -> Iterator[DocumentWrite]:
    """The snapshot's documents with their chunks and vectors, in order (after `read_manifest` checked it)."""
    row_bytes = manifest.dim * _VECTOR_DTYPE.itemsize
    with zipfile.ZipFile(path) as archive, archive.open(DOCUMENTS) as lines, archive.open(VECTORS) as data:
        for line in bounded_lines(lines):
            item = json.loads(line)
            document = DocumentRecord(**item["document"])
            chunks = [ChunkRecord(**c) for c in item["chunks"]]
            raw = _read_exactly(data, row_bytes * len(chunks))
            vectors = np.frombuffer(raw, dtype=_VECTOR_DTYPE).reshape(len(chunks), manifest.dim).astype(np.float32)
            yield DocumentWrite(document, chunks, vectors)


def _read_exactly(data: IO[bytes], size: int) -> bytes:
    out = io.BytesIO()
    while out.tell() < size:
        block = data.read(size - out.tell())
        if not block:
            raise SnapshotError("the snapshot's vectors end early")
        out.write(block)
    return out.getvalue()


def restore_snapshot(path: Path, target: Store, *, replace: bool = False, embedder: DocumentEmbedder | None = None,
                     manifest: SnapshotManifest | None = None, batch_size: int = 200,
                     resume: bool = False) -> ImportReport:
    """Write the snapshot `path` into the empty store `target` (emptied first with `replace`), all or nothing:
    it is checked whole before the first write, and a failure part-way empties the target again.

    Without `embedder` the stored vectors are written as they are (nothing embedded); with one, every chunk's
    text is embedded again with it (the snapshot's model differs from the project's: `--reembed`).
    `manifest`: what `read_manifest(path)` returned, when the caller checked the file already. `resume`: the
    target holds part of this snapshot from an import that stopped; its documents are kept, the others written
    (a failure then leaves what is there, for the next resume)."""
    started = time.perf_counter()
    manifest = manifest or read_manifest(path)  # given: the caller checked it already
    existing = target.stats()
    if existing["documents"] and not (replace or resume):
        raise RagsteadError(f"the target {existing['path']} already holds documents; pass --replace to empty it first")
    model, dim = (embedder.name, embedder.dim) if embedder is not None else (manifest.model, manifest.dim)
    if replace:
        target.reset()
    present = {entry.doc_id for entry in target.manifest().values()} if resume else set()
    documents = chunks = embedded = 0
    batch: list[DocumentWrite] = []

    def flush() -> None:
        nonlocal documents, chunks, embedded
        if not batch:
            return
        if embedder is not None:
            texts = [c.text for w in batch for c in w.chunks]
            matrix = np.asarray(embedder.embed_documents(texts), dtype=np.float32) if texts else None
            at = 0
            for write in batch:
                write.vectors = matrix[at : at + len(write.chunks)] if matrix is not None else write.vectors
                at += len(write.chunks)
            embedded += len(texts)
        target.apply(batch, [], [])
        documents, chunks = documents + len(batch), chunks + sum(len(w.chunks) for w in batch)
        batch.clear()

    try:
        target.ensure_model(model, dim)
        # PostgreSQL builds its ANN index once, after the last row.
        with target.bulk_load() if isinstance(target, BulkLoad) else nullcontext():
            for write in read_writes(path, manifest):
                if write.document.doc_id in present:
                    continue
                batch.append(write)
                if len(batch) >= batch_size:
                    flush()
            flush()
        if manifest.chunking:  # the text was cut this way: the settings guard compares it on the next index run
            target.record_chunking(manifest.chunking)
        target.settle_lexical()
    except BaseException as exc:
        if not resume:
            target.reset()  # the target was empty: leave it so, never half an index
        if isinstance(exc, _CORRUPT):
            raise SnapshotError(f"{path} is damaged ({_reason(exc)}); nothing was imported") from None
        raise
    after = target.stats()
    if (after["documents"], after["chunks"]) != (manifest.documents, manifest.chunks):
        target.reset()
        raise RagsteadError(f"imported {after['documents']} documents / {after['chunks']} chunks, but the snapshot "
                            f"holds {manifest.documents} / {manifest.chunks}; nothing was kept")
    return ImportReport(str(path), documents, chunks, embedded, model, after["path"], time.perf_counter() - started)


def check_snapshot_model(manifest: SnapshotManifest, model: str | None, dim: int | None) -> None:
    """Refuse a snapshot of another model than the project's (`model` None: the project has none yet)."""
    if model is None or (manifest.model == model and manifest.dim == dim):
        return
    raise ModelMismatchError(
        f"the snapshot was built with {manifest.model} ({manifest.dim}-d) but this project uses {model} ({dim}-d); "
        "pass --reembed to embed its chunks again with the project's model, or import it into a project of that "
        "model")
