"""Incremental indexing.

A file is re-read only when its size or mtime changed, re-indexed only when its SHA-256 changed,
and a chunk is embedded only when no stored chunk has the same text (content-hash cache). Each
batch of documents is written in one transaction, so a crash loses at most the batch in flight
and the next run picks up exactly where it stopped.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragstead.chunking import ChunkingOptions, TextChunk, chunk_text, estimate_tokens
from ragstead.documents.ids import file_sha256, make_chunk_id, make_doc_id, sha256_text
from ragstead.documents.loaders import LoadedDocument, is_supported, load_document
from ragstead.documents.metadata import DEFAULT_PATH_RULES, PathRule, derive_metadata
from ragstead.embeddings.base import Embedder
from ragstead.errors import LoadError, RagsteadError
from ragstead.indexing.lock import index_lock
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite, ManifestEntry, Store

# A transaction per this many chunks: large enough to amortise fsync, small enough that a crash
# loses little work.
BATCH_CHUNKS = 256


@dataclass(frozen=True)
class IndexingOptions:
    """What an index run reads and how it cuts it (the project settings, narrowed to indexing)."""

    root: Path
    roots: tuple[str, ...] = ("kb", "artifacts")
    lock_file: Path = Path("kb/rag/index.lock")
    chunking: ChunkingOptions = field(default_factory=ChunkingOptions)
    path_rules: tuple[PathRule, ...] = DEFAULT_PATH_RULES
    skip_dirs: tuple[Path, ...] = ()  # the index's own folders, never indexed


@dataclass
class IndexReport:
    """What an index run did. `to_dict()` is the stable JSON shape printed by `ragstead index --format json`."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    chunks_written: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    seconds: float = 0.0
    rebuild: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "chunks_written": self.chunks_written,
            "chunks_embedded": self.chunks_embedded,
            "chunks_reused": self.chunks_reused,
            "seconds": round(self.seconds, 3),
            "rebuild": self.rebuild,
        }


@dataclass
class _Candidate:
    rel_path: str
    root: str
    path: Path
    size: int
    mtime: float
    file_hash: str
    is_new: bool
    loaded: LoadedDocument | None = None  # in-memory records (eval corpora) skip the file loader


ProgressHook = Callable[[int, int], None]


def _check_roots(options: IndexingOptions, roots: tuple[str, ...]) -> None:
    """Refuse any root that resolves outside the project (`..`, absolute, or a symlink leaving it).

    This runs before the lock and before `--rebuild` resets the store: a bad root found halfway
    through the walk would otherwise leave the user with an emptied index.
    """
    base = options.root.resolve()
    for root in roots:
        if not (base / root).resolve().is_relative_to(base):
            raise RagsteadError(f"root {root!r} must be a folder inside the project root {base}")


def _walk(options: IndexingOptions, roots: tuple[str, ...]) -> Iterator[tuple[str, Path]]:
    """Yield (root, file) for every regular file under the roots, skipping the index's own folder,
    hidden entries and symlinks that leave the project root."""
    base = options.root.resolve()
    own = {path.resolve() for path in (*options.skip_dirs, options.lock_file.parent)}
    for root in roots:
        top = (base / root).resolve()
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            current = Path(dirpath)
            dirnames[:] = sorted(
                d for d in dirnames if not d.startswith(".") and (current / d).resolve() not in own
            )
            for name in sorted(filenames):
                if name.startswith("."):
                    continue
                path = current / name
                if path.is_symlink() and not path.resolve().is_relative_to(base):
                    continue
                yield root, path


def _pieces(loaded: LoadedDocument, options: IndexingOptions) -> list[tuple[TextChunk, int | None]]:
    """Chunk the document; paged documents are chunked page by page so every chunk cites one page."""
    if not loaded.page_starts:
        return [(piece, None) for piece in chunk_text(loaded.text, options.chunking)]
    out: list[tuple[TextChunk, int | None]] = []
    bounds = [*loaded.page_starts, len(loaded.text) + 2]
    words_before = 0
    for number, (start, end) in enumerate(itertools.pairwise(bounds), start=1):
        page_text = loaded.text[start : end - 2]
        for piece in chunk_text(page_text, options.chunking):
            piece.index = len(out)
            piece.char_start += start
            piece.char_end += start
            piece.start_word += words_before
            piece.end_word += words_before
            out.append((piece, number))
        words_before += len(page_text.split())
    return out


def _prepare(candidate: _Candidate, options: IndexingOptions) -> DocumentWrite:
    loaded = candidate.loaded or load_document(candidate.path)
    meta = derive_metadata(candidate.rel_path, candidate.mtime or None, options.path_rules)
    doc_id = make_doc_id(candidate.rel_path, candidate.file_hash)
    chunks = []
    for piece, page in _pieces(loaded, options):
        text_hash = sha256_text(piece.text)
        chunks.append(
            ChunkRecord(
                chunk_id=make_chunk_id(doc_id, piece.index, text_hash),
                chunk_index=piece.index,
                text=piece.text,
                text_hash=text_hash,
                start_word=piece.start_word,
                end_word=piece.end_word,
                char_start=piece.char_start,
                char_end=piece.char_end,
                page=page,
                section_path=piece.section_path,
                token_estimate=estimate_tokens(piece.text),
            )
        )
    if not chunks:
        raise LoadError(f"{candidate.rel_path}: no text to index (empty or image-only), skipped")
    document = DocumentRecord(
        doc_id=doc_id,
        file_path=candidate.rel_path,
        root=candidate.root,
        file_hash=candidate.file_hash,
        size=candidate.size,
        mtime=candidate.mtime,
        doc_type=meta.doc_type,
        is_private=meta.is_private,
        user_slug=meta.user_slug,
        proxy_wallet=meta.proxy_wallet,
        created_at=meta.created_at,
        title=loaded.title,
        tags=sorted(set(meta.tags) | set(loaded.tags)),
    )
    return DocumentWrite(document, chunks, np.zeros((0, 0), dtype=np.float32))


def _embed(writes: list[DocumentWrite], store: Store, embedder: Embedder, report: IndexReport) -> None:
    """Fill each write's vectors, embedding only texts with no cached vector (deduplicated in-batch)."""
    hashes = [c.text_hash for w in writes for c in w.chunks]
    cached = store.cached_vectors(hashes)
    missing: dict[str, str] = {}
    for write in writes:
        for chunk in write.chunks:
            if chunk.text_hash not in cached:
                missing.setdefault(chunk.text_hash, chunk.text)
    if missing:
        vectors = embedder.embed_documents(list(missing.values()))
        cached.update(zip(missing.keys(), vectors, strict=True))
    report.chunks_embedded += len(missing)
    report.chunks_reused += len(hashes) - len(missing)
    for write in writes:
        write.vectors = np.stack([cached[c.text_hash] for c in write.chunks]).astype(np.float32)


def index_roots(
    options: IndexingOptions,
    store: Store,
    embedder: Embedder,
    roots: tuple[str, ...] | None = None,
    rebuild: bool = False,
    wait_seconds: float = 0.0,
    progress: ProgressHook | None = None,
) -> IndexReport:
    """Bring the index in line with the files under `roots`; see the module docstring."""
    roots = tuple(roots or options.roots)
    _check_roots(options, roots)
    started = time.perf_counter()
    report = IndexReport(rebuild=rebuild)
    with index_lock(options.lock_file, wait_seconds):
        if rebuild:
            store.reset()
        store.ensure_model(embedder.name, embedder.dim)
        manifest = store.manifest()
        seen: set[str] = set()
        todo: list[_Candidate] = []
        touches: list[DocumentRecord] = []
        base = options.root.resolve()
        for root, path in _walk(options, roots):
            rel = path.relative_to(base).as_posix()
            if is_supported(path):
                seen.add(rel)
            _consider(root, path, rel, manifest, report, todo, touches)
        removed = sorted(p for p, entry in manifest.items() if entry.root in roots and p not in seen)

        _write(todo, removed, touches, manifest, options, store, embedder, report, progress)
    report.seconds = time.perf_counter() - started
    return report


def _consider(
    root: str,
    path: Path,
    rel: str,
    manifest: dict[str, ManifestEntry],
    report: IndexReport,
    todo: list[_Candidate],
    touches: list[DocumentRecord],
) -> None:
    """Sort one file into skipped, unchanged (maybe with fresh stat) or to-do, by stat, then hash."""
    if not is_supported(path):
        report.skipped.append({"path": rel, "reason": f"unsupported file type {path.suffix or '(none)'!r}"})
        return
    try:
        stat = path.stat()
        known = manifest.get(rel)
        if known and known.size == stat.st_size and known.mtime == stat.st_mtime:
            report.unchanged += 1
            return
        file_hash = file_sha256(path)
    except OSError as exc:
        report.skipped.append({"path": rel, "reason": f"cannot read: {exc.strerror or exc}"})
        return
    if known and known.file_hash == file_hash:
        report.unchanged += 1
        touches.append(_touch_record(known, rel, stat.st_size, stat.st_mtime))
        return
    todo.append(_Candidate(rel, root, path, stat.st_size, stat.st_mtime, file_hash, known is None))


def index_paths(
    options: IndexingOptions,
    store: Store,
    embedder: Embedder,
    paths: list[str],
    wait_seconds: float = 0.0,
    *,
    take_lock: bool = True,
) -> IndexReport:
    """Index or remove exactly these files (project-relative paths under a configured root).

    The path-level twin of `index_roots` for callers that know what changed (an upload, a delete):
    a path whose file exists is indexed as `index_roots` would; a path whose file is gone is removed.
    Nothing else under the roots is looked at. `take_lock=False`: the caller already holds the index lock.
    """
    base = options.root.resolve()
    started = time.perf_counter()
    report = IndexReport()
    resolved: list[tuple[str, Path, str]] = []
    for rel in paths:
        path = (base / rel).resolve()
        root = next((r for r in options.roots if path.is_relative_to((base / r).resolve())), None)
        if root is None or not path.is_relative_to(base):
            raise RagsteadError(f"{rel!r} is not under a configured root ({', '.join(options.roots)})")
        resolved.append((root, path, path.relative_to(base).as_posix()))
    with index_lock(options.lock_file, wait_seconds) if take_lock else nullcontext():
        store.ensure_model(embedder.name, embedder.dim)
        manifest = store.manifest()
        todo: list[_Candidate] = []
        touches: list[DocumentRecord] = []
        removed: list[str] = []
        for root, path, rel in resolved:
            if path.is_file():
                _consider(root, path, rel, manifest, report, todo, touches)
            elif rel in manifest:
                removed.append(rel)
        _write(todo, removed, touches, manifest, options, store, embedder, report, progress=None)
    report.seconds = time.perf_counter() - started
    return report


def _write(
    todo: list[_Candidate],
    removed: list[str],
    touches: list[DocumentRecord],
    manifest: dict[str, ManifestEntry],
    options: IndexingOptions,
    store: Store,
    embedder: Embedder,
    report: IndexReport,
    progress: ProgressHook | None,
) -> None:
    """Prepare, embed and write candidates in batches of ~BATCH_CHUNKS chunks, one transaction each.
    Removals go in the last transaction, after the writes, so a renamed file's vectors are reused."""
    batch: list[DocumentWrite] = []
    failed: list[str] = []

    def flush(final: bool) -> None:
        nonlocal batch, touches
        _embed(batch, store, embedder, report)
        store.apply(batch, (removed + failed) if final else [], touches)
        for write in batch:
            path = write.document.file_path
            (report.added if manifest.get(path) is None else report.updated).append(path)
            report.chunks_written += len(write.chunks)
        batch, touches = [], []

    for done, candidate in enumerate(todo, start=1):
        try:
            batch.append(_prepare(candidate, options))
        except LoadError as exc:
            report.skipped.append({"path": candidate.rel_path, "reason": str(exc)})
            if not candidate.is_new:
                failed.append(candidate.rel_path)  # stale content of a now-unreadable file goes
        if progress:
            progress(done, len(todo))
        if sum(len(w.chunks) for w in batch) >= BATCH_CHUNKS:
            flush(final=False)
    flush(final=True)
    report.removed = sorted(set(removed) | set(failed))


@dataclass
class TextRecord:
    """An in-memory document (e.g. a BEIR corpus entry) indexed under `<root>/<key>`."""

    key: str
    text: str
    title: str | None = None


def index_records(
    options: IndexingOptions,
    store: Store,
    embedder: Embedder,
    records: list[TextRecord],
    root: str = "kb/corpus",
    progress: ProgressHook | None = None,
) -> IndexReport:
    """Index in-memory texts through the same chunk/embed/write path as files, incrementally.

    A record's identity is `<root>/<key>`; its hash is that of its title and text, so re-running with
    the same records embeds nothing, and records missing from `records` are removed from `root`.
    """
    started = time.perf_counter()
    report = IndexReport()
    with index_lock(options.lock_file):
        store.ensure_model(embedder.name, embedder.dim)
        manifest = store.manifest()
        todo: list[_Candidate] = []
        seen: set[str] = set()
        for record in records:
            rel = f"{root}/{record.key}"
            seen.add(rel)
            body = f"{record.title}\n\n{record.text}" if record.title else record.text
            content_hash = sha256_text(body)
            known = manifest.get(rel)
            if known and known.file_hash == content_hash:
                report.unchanged += 1
                continue
            loaded = LoadedDocument(text=body, title=record.title)
            todo.append(_Candidate(rel, root, Path(rel), len(body), 0.0, content_hash, known is None, loaded))
        removed = sorted(p for p, entry in manifest.items() if entry.root == root and p not in seen)
        _write(todo, removed, [], manifest, options, store, embedder, report, progress)
    report.seconds = time.perf_counter() - started
    return report


def _touch_record(known: ManifestEntry, rel: str, size: int, mtime: float) -> DocumentRecord:
    """A record carrying only what `apply` refreshes for an unchanged-content file: size and mtime."""
    return DocumentRecord(
        doc_id=known.doc_id, file_path=rel, root=known.root, file_hash=known.file_hash, size=size,
        mtime=mtime, doc_type="", is_private=True, user_slug=None, proxy_wallet=None, created_at=None,
        title=None,
    )
