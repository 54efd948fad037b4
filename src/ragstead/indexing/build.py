"""Incremental indexing.

A file is re-read only when its size or mtime changed, re-indexed only when its SHA-256 changed,
and a chunk is embedded only when no stored chunk has the same text (content-hash cache). Each
batch of documents is written in one transaction, so a crash loses at most the batch in flight
and the next run picks up exactly where it stopped. Deleted files go in the run's first transaction.

Every file goes through `prepare_file`, which turns whatever goes wrong with that one file (a corrupt
or hostile file, a limit, a parser bug) into a one-line skip, so one bad file never stops a run. Only
regular files are opened, and a symlink is followed only inside its own scope (`follow_symlinks`).
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import numpy as np

from ragstead.core.atomic import make_private_folder, write_text_atomically
from ragstead.documents.chunking import TextChunk, chunk_text, estimate_tokens, fill_section_paths
from ragstead.documents.formats.ocr import IMAGE_SUFFIXES
from ragstead.documents.ids import (
    file_of,
    file_sha256,
    fs_path,
    make_chunk_id,
    make_doc_id,
    part_path,
    sha256_text,
    storable_path,
)
from ragstead.documents.language import detect_language
from ragstead.documents.loaders import (
    CONTAINER_SUFFIXES,
    Budget,
    LoadedDocument,
    is_supported,
    one_line,
)
from ragstead.documents.metadata import PathMetadata, derive_metadata
from ragstead.documents.sandbox import load_isolated
from ragstead.documents.secrets import (
    DETECTOR_VERSION,
    SecretSpan,
    credentials_notice,
    find_secrets,
    mask,
    mask_field,
    mask_secrets,
)
from ragstead.documents.sources import SIDECAR_SUFFIX
from ragstead.embeddings.base import Embedder
from ragstead.errors import LoadError, RagsteadError, UnsupportedFileError
from ragstead.indexing.ignore import IgnoreRules
from ragstead.indexing.languages import record_languages
from ragstead.indexing.lock import index_lock
from ragstead.indexing.options import IndexingOptions
from ragstead.indexing.roots import MissingRoot, missing_roots
from ragstead.indexing.secrets_record import (
    SECRETS_FILE,
    secret_counts,
    secrets_detector,
    secrets_record,
)
from ragstead.indexing.textless import NO_TEXT, TextlessFiles
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite, ManifestEntry, Store
from ragstead.stores.snapshot import SUFFIX as SNAPSHOT_SUFFIX

# A transaction per this many chunks: large enough to amortise fsync, small enough that a crash
# loses little work.
BATCH_CHUNKS = 256
# A batch is also bounded by time: the first holds FIRST_BATCH_CHUNKS chunks, each later one what the embedder
# did in about BATCH_SECONDS on the one before, so the first commit comes within seconds (Ctrl-C keeps it).
# A commit costs ~0.5 s on a busy machine (a tantivy segment and fsyncs): 10 s batches made a loaded run commit
# 4x as often as an idle one (docs/benchmarks.md, "Indexing a notes folder"); an idle one still fills 256 first.
FIRST_BATCH_CHUNKS = 32
BATCH_SECONDS = 30.0

OUTSIDE_SCOPE = "symlink outside scope"
# Files read at once (#47.2): each in its own reader process (documents/sandbox.py), OCR's Tesseract a process of
# its own, so a folder of photos uses every core; results are taken in walk order, at most 2 per reader ahead.
READERS = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
@dataclass
class IndexReport:
    """What an index run did. `to_dict()` is the stable JSON shape printed by `ragstead index --format json`.

    `skipped` lists every file left out, with why; `failed` the paths among them that could not be read (a
    corrupt or hostile file, a limit, an unreadable folder), as opposed to unsupported types, empty files and
    symlinks outside their scope."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    excluded: int = 0  # files an exclude pattern (config or .ragsteadignore) left out, on purpose
    secrets: dict[str, int] = field(default_factory=dict)  # written files that hold secrets -> how many (masked)
    chunks_written: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    sentence_vector_chunks: int = 0  # chunks whose sentences were embedded for the re-ranker (`sentence_vectors`)
    sentence_vector_seconds: float = 0.0  # not part of `seconds`
    seconds: float = 0.0
    rebuild: bool = False
    # Roots this machine cannot re-read (roots.py): their documents were kept, unless `pruned`.
    missing_roots: list[MissingRoot] = field(default_factory=list)
    pruned: bool = False

    def skip(self, path: str, reason: str, *, failed: bool) -> None:
        """Record a skipped file (or folder) with a one-line reason."""
        self.skipped.append({"path": path, "reason": " ".join(reason.split())})
        if failed:
            self.failed.append(path)

    def to_dict(self) -> dict[str, object]:
        return {
            "added": self.added,
            "updated": self.updated,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": self.skipped,
            "failed": self.failed,
            "excluded": self.excluded,
            "secrets": self.secrets,
            "chunks_written": self.chunks_written,
            "chunks_embedded": self.chunks_embedded,
            "chunks_reused": self.chunks_reused,
            "sentence_vector_chunks": self.sentence_vector_chunks,
            "sentence_vector_seconds": round(self.sentence_vector_seconds, 3),
            "seconds": round(self.seconds, 3),
            "rebuild": self.rebuild,
            "missing_roots": [m.to_dict() | {"kept": not self.pruned} for m in self.missing_roots],
        }


@dataclass
class FileCandidate:
    """A file to (re-)index. `rel_path` is the stored, printable path (`storable_path`); `id_path` the real
    root-relative name the doc id hashes (they differ only for a name that is not UTF-8)."""

    rel_path: str
    root: str
    path: Path
    size: int
    mtime: float
    file_hash: str
    is_new: bool
    loaded: LoadedDocument | None = None  # in-memory records (eval corpora) skip the file loader
    id_path: str | None = None
    stored: tuple[str, ...] = ()  # the paths of the file's documents in the index now (an mbox: its messages)


@dataclass(frozen=True)
class Skip:
    """Why `prepare_file` left a file out; `failed`: it could not be read (not merely nothing to index)."""

    reason: str
    failed: bool


ProgressHook = Callable[[int, int], None]


@dataclass(frozen=True)
class IndexedFile:
    """A file as the manifest knows it: its documents' entries by stored path (the file's own, or its messages
    and attachments: `documents.ids.part_path`), which share the file's size, mtime and hash."""

    entries: dict[str, ManifestEntry]

    @property
    def entry(self) -> ManifestEntry:
        return next(iter(self.entries.values()))

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(sorted(self.entries))


def indexed_files(manifest: dict[str, ManifestEntry]) -> dict[str, IndexedFile]:
    """The manifest by file: the documents inside a file (`a.mbox#msg-…`) grouped under its path."""
    grouped: dict[str, dict[str, ManifestEntry]] = {}
    for path, entry in manifest.items():
        grouped.setdefault(file_of(path), {})[path] = entry
    return {file: IndexedFile(entries) for file, entries in grouped.items()}


def _check_roots(options: IndexingOptions, roots: tuple[str, ...]) -> None:
    """Refuse any root that resolves outside the project (`..`, absolute, or a symlink leaving it).

    This runs before the lock and before `--rebuild` resets the store: a bad root found halfway
    through the walk would otherwise leave the user with an emptied index.
    """
    base = options.root.resolve()
    for root in roots:
        if not (base / root).resolve().is_relative_to(base):
            raise RagsteadError(f"root {root!r} must be a folder inside the project root {base}")


def _shown(base: Path, path: str | os.PathLike[str]) -> str:
    """A path as the report shows it: project-relative when it can be, always storable."""
    try:
        return storable_path(Path(path).relative_to(base).as_posix())
    except ValueError:
        return storable_path(path)


def _scope(rel: str, options: IndexingOptions) -> tuple[str | None, bool]:
    meta = derive_metadata(rel, None, options.path_rules)
    return meta.user_slug, meta.is_private


def _symlink_allowed(path: Path, rel: str, top: Path, base: Path, own: set[Path], options: IndexingOptions) -> bool:
    """Whether the symlink at `path` may be followed: its final target stays inside the project ("project"),
    or inside the same root with the same user and privacy by the path rules ("scope", the default), so a
    link in one user's folder never turns another user's file into its own. Never into the index's folder."""
    target = Path(os.path.realpath(path))
    if not target.is_relative_to(base) or any(target.is_relative_to(o) for o in own):
        return False
    if options.follow_symlinks == "project":
        return True
    return target.is_relative_to(top) and _scope(rel, options) == _scope(target.relative_to(base).as_posix(), options)


@dataclass(frozen=True)
class Within:
    """Project-relative paths a run is narrowed to (watch mode: what just changed). A file is held when it is
    one of them or lies under one; a folder is walked when it holds some or leads to some."""

    paths: frozenset[str]
    ancestors: frozenset[str]

    @classmethod
    def of(cls, paths: Iterable[str]) -> Within:
        clean = {p.strip("/") for p in paths}
        clean = {"" if p == "." else p for p in clean} | {storable_path(p) for p in clean if p not in ("", ".")}
        ancestors = {"/".join(p.split("/")[:i]) for p in clean for i in range(1, p.count("/") + 1)}
        return cls(frozenset(clean), frozenset(ancestors))

    def holds(self, rel: str) -> bool:
        rel = file_of(rel)  # a message of an mbox is held with its file
        if "" in self.paths or rel in self.paths:
            return True
        parts = rel.split("/")
        return any("/".join(parts[:i]) in self.paths for i in range(1, len(parts)))

    def leads_to(self, folder: str) -> bool:
        return folder in ("", ".") or folder in self.ancestors or self.holds(folder)


class PathScope(Protocol):
    """What a walk is narrowed to: a `Within` (paths), or any rule on paths (findability's caller's scope)."""

    def holds(self, rel: str) -> bool: ...

    def leads_to(self, folder: str) -> bool: ...


def _walk(options: IndexingOptions, roots: tuple[str, ...], report: IndexReport,
          within: PathScope | None = None) -> Iterator[tuple[str, Path, str, os.stat_result]]:
    """Yield (root, file, real relative path, stat) for every regular file under the roots that a loader
    reads, skipping hidden entries and the index's own folder. Everything else met on the way is reported as
    skipped: unsupported types, symlinks outside their scope, symlinked folders (never followed: no loops),
    FIFOs, sockets and devices (never opened), and folders or files that cannot be read.
    `within`: only these paths (and what lies under them) are visited; every other rule stays the same."""
    walker = _Walker.start(options, report, within)
    for root in roots:
        top = (walker.base / root).resolve()
        if not walker.visits(top):
            continue
        errors: list[OSError] = []  # os.walk's onerror: a folder it cannot list is reported, the walk goes on
        for dirpath, dirnames, filenames in os.walk(top, onerror=errors.append):
            _folder_errors(errors, walker.base, report)
            current = Path(dirpath)
            dirnames[:] = [name for name in sorted(dirnames) if walker.descends(current / name)]
            for name in sorted(filenames):
                found = walker.admitted(current / name, top)
                if found is not None:
                    yield root, current / name, *found
        _folder_errors(errors, walker.base, report)


@dataclass(frozen=True)
class _Walker:
    """One walk's rules: the project folder, the index's own folders and files (never read), the ignore rules
    and the scope it is narrowed to; what it leaves out goes in the report."""

    options: IndexingOptions
    report: IndexReport
    within: PathScope | None
    base: Path
    own: set[Path]
    own_files: set[Path]
    ignore: IgnoreRules

    @classmethod
    def start(cls, options: IndexingOptions, report: IndexReport, within: PathScope | None) -> _Walker:
        base = options.root.resolve()
        own = {Path(os.path.realpath(path)) for path in (*options.skip_dirs, options.lock_file.parent)}
        ignore = IgnoreRules(base, options.exclude)
        own_files = {Path(os.path.realpath(path)) for path in options.skip_files}
        return cls(options, report, within, base, own, own_files, ignore)

    def visits(self, top: Path) -> bool:
        """Whether a root is walked: a folder, and (inside the project) one that leads to the scope."""
        return top.is_dir() and not (self.within is not None and top.is_relative_to(self.base)
                                     and not self.within.leads_to(top.relative_to(self.base).as_posix()))

    def descends(self, folder: Path) -> bool:
        """Whether the walk goes into a folder: not hidden, not the index's own, not ignored, towards the scope,
        and not a symlink (reported, never followed: no loops)."""
        if folder.name.startswith(".") or Path(os.path.realpath(folder)) in self.own:
            return False
        rel = folder.relative_to(self.base).as_posix()
        if self.ignore.ignored(rel, folder=True):
            return False
        if self.within is not None and not self.within.leads_to(rel):
            return False
        if os.path.islink(folder):
            self.report.skip(_shown(self.base, folder), "symlinked folder, not followed", failed=False)
            return False
        return True

    def admitted(self, path: Path, top: Path) -> tuple[str, os.stat_result] | None:
        """(real relative path, stat) of a file the walk yields; None for one it passes over: hidden, the
        index's own, out of scope, ignored (counted as excluded), or refused by `_admit` (reported)."""
        if path.name.startswith(".") or path in self.own_files or is_sidecar(path) or is_snapshot(path):
            return None
        rel = path.relative_to(self.base).as_posix()
        if self.within is not None and not self.within.holds(rel):
            return None
        if self.ignore.ignored(rel) or _leads_to_ignored(path, self.base, self.ignore):
            self.report.excluded += 1
            return None
        info = _admit(path, rel, top, self.base, self.own, self.options, self.report)
        return None if info is None else (rel, info)


def _leads_to_ignored(path: Path, base: Path, ignore: IgnoreRules) -> bool:
    """A symlink whose target the project ignores: `notes/plan.md -> ../private/plan.md` with `private/` in
    .ragsteadignore read the ignored file under another name (#45)."""
    if not os.path.islink(path):
        return False
    target = Path(os.path.realpath(path))
    return target.is_relative_to(base) and ignore.ignored(target.relative_to(base).as_posix())


def is_sidecar(path: Path) -> bool:
    """`x.pdf.source.json` beside `x.pdf`: ingest's record of where the file came from, read with it, never a
    document of its own (nor worth a `skipped` line in every run)."""
    return path.name.endswith(SIDECAR_SUFFIX) and os.path.isfile(path.with_name(path.name[: -len(SIDECAR_SUFFIX)]))


def is_snapshot(path: Path) -> bool:
    """`x.ragsnap`: a snapshot `ragstead export` wrote, ragstead's own private data like the index folder: never
    read as a document, nor reported as skipped."""
    return path.name.endswith(SNAPSHOT_SUFFIX)


def _folder_errors(errors: list[OSError], base: Path, report: IndexReport) -> None:
    while errors:
        exc = errors.pop(0)
        report.skip(_shown(base, exc.filename or "?"), f"cannot read folder: {exc.strerror or exc}", failed=True)


def _admit(path: Path, rel: str, top: Path, base: Path, own: set[Path], options: IndexingOptions,
           report: IndexReport) -> os.stat_result | None:
    """The file's stat if the walk should consider it; else None, with the reason in the report."""
    shown = storable_path(rel)
    supported = is_supported(path)
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            if not _symlink_allowed(path, rel, top, base, own, options):
                report.skip(shown, OUTSIDE_SCOPE, failed=False)
                return None
            info = os.stat(path)
    except OSError as exc:  # a symlink loop (ELOOP), a file gone or unreadable
        report.skip(shown, f"cannot read: {exc.strerror or exc}", failed=supported)
        return None
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block the open, a device never ends
        report.skip(shown, "not a regular file", failed=supported)
        return None
    if not supported:
        report.skip(shown, f"unsupported file type {storable_path(path.suffix) or '(none)'!r}", failed=False)
        return None
    return info


def _pieces(loaded: LoadedDocument, options: IndexingOptions, budget: Budget) -> list[tuple[TextChunk, int | None]]:
    """Chunk the document; paged documents are chunked page by page so every chunk cites one page (or, with
    `part_labels`, one slide, sheet rows or message, named in its section path)."""
    if not loaded.page_starts:
        pieces = chunk_text(loaded.text, options.chunking)
        if loaded.markdown:
            fill_section_paths(loaded.text, pieces)
        return [(piece, None) for piece in pieces]
    out: list[tuple[TextChunk, int | None]] = []
    bounds = [*loaded.page_starts, len(loaded.text) + 2]
    words_before = 0
    for number, (start, end) in enumerate(itertools.pairwise(bounds), start=1):
        budget.tick()
        page_text = loaded.text[start : end - 2]
        for piece in chunk_text(page_text, options.chunking):
            piece.index = len(out)
            piece.char_start += start
            piece.char_end += start
            piece.start_word += words_before
            piece.end_word += words_before
            if loaded.part_labels:
                piece.section_path = loaded.part_labels[number - 1]
            out.append((piece, None if loaded.part_labels else number))
        words_before += len(page_text.split())
    return out


def prepare_file(candidate: FileCandidate, options: IndexingOptions) -> list[DocumentWrite] | Skip:
    """The per-file step of every index run: load, chunk and build the records of one file, within the
    options' limits. Returns its writes (vectors still empty; one, or one per message and attachment of an mbox)
    or a `Skip` with a one-line reason; nothing the file holds can make it raise (KeyboardInterrupt and
    SystemExit still stop the run)."""
    try:
        return _prepare(candidate, options)
    except LoadError as exc:  # an UnsupportedFileError here is a kind read only with an optional part (OCR off)
        return Skip(_reason(str(exc), storable_path(candidate.path)), failed=not isinstance(exc, UnsupportedFileError))
    except Exception as exc:  # a bug a hostile file found: this file is skipped, the run goes on
        return Skip(f"failed ({one_line(exc)})", failed=True)


def _reason(message: str, name: str) -> str:
    """A loader's message as a report reason: the report names the file already, and says it was skipped."""
    message = message.removeprefix(f"{name}: ").removesuffix(", skipped")
    return " ".join(message.split())


# A file whose name holds a secret is not indexed: every door shows a document's path, and the path is its identity.
SECRET_IN_NAME = "its name holds a secret (every output shows a file's name); rename it to index it"


def name_secrets(rel_path: str) -> list[SecretSpan]:
    """The secrets in a project-relative path ("kb/wifi password Tr0ub4dor.txt"), read as prose."""
    return find_secrets(rel_path.replace("/", " / "), "name.txt", context=False)


def shown_path(rel_path: str) -> str:
    """A path as a report shows it: its secrets masked (the report names a file it skipped for its name)."""
    spans = name_secrets(rel_path)
    return mask(rel_path.replace("/", " / "), spans).replace(" / ", "/") if spans else rel_path


def _prepare(candidate: FileCandidate, options: IndexingOptions) -> list[DocumentWrite] | Skip:
    if name_secrets(candidate.rel_path):
        return Skip(SECRET_IN_NAME, failed=False)
    budget = Budget(options.load_limits, storable_path(candidate.path))
    loaded = candidate.loaded or load_isolated(candidate.path, budget=budget)
    meta = derive_metadata(candidate.rel_path, candidate.mtime or None, options.path_rules)
    id_path = candidate.id_path or candidate.rel_path
    # The file's own document, and the documents inside it (an mbox's messages, attachments) under `path#key`.
    documents = [(candidate.rel_path, id_path, loaded)] if loaded.text.strip() or not loaded.inside else []
    documents += [(part_path(candidate.rel_path, key), part_path(id_path, key), inside)
                  for key, inside in loaded.inside]
    writes = []
    for rel_path, doc_id_path, document in documents:
        write = _document_write(candidate, rel_path, make_doc_id(doc_id_path, candidate.file_hash), document, meta,
                                options, budget)
        if write is not None:
            writes.append(write)
    budget.tick()
    if not writes:
        return Skip(NO_TEXT, failed=False)
    return writes


def _document_write(candidate: FileCandidate, rel_path: str, doc_id: str, loaded: LoadedDocument, meta: PathMetadata,
                    options: IndexingOptions, budget: Budget) -> DocumentWrite | None:
    """The records of one document of the file (None when it has no text to index)."""
    chunks = []
    # Secrets are masked before a chunk is stored or embedded, so no door, export or prompt can show them: in the
    # text and in every field shown beside it (headings, title, subject, tags), where a value found in the text
    # is masked too ("## Door code: 55173" in a heading is the same secret as in the text).
    spans = find_secrets(loaded.text, PurePosixPath(candidate.rel_path).name)
    values = [loaded.text[s.start:s.end] for s in spans]
    notice = credentials_notice(loaded.text, spans, PurePosixPath(rel_path).name)
    pieces = [(_notice_piece(notice, loaded.text), None)] if notice else _pieces(loaded, options, budget)
    for piece, page in pieces:
        text = notice or _masked(piece.text, loaded.text, piece.char_start, spans)
        text_hash = sha256_text(text)
        chunks.append(
            ChunkRecord(
                chunk_id=make_chunk_id(doc_id, piece.index, text_hash),
                chunk_index=piece.index,
                text=text,
                text_hash=text_hash,
                start_word=piece.start_word,
                end_word=piece.end_word,
                char_start=piece.char_start,
                char_end=piece.char_end,
                page=page,
                section_path=mask_field(piece.section_path, values),
                token_estimate=estimate_tokens(text),
            )
        )
    if not chunks:
        return None
    tags = sorted(set(meta.tags) | set(loaded.tags))
    document = DocumentRecord(
        doc_id=doc_id,
        file_path=rel_path,
        root=candidate.root,
        file_hash=candidate.file_hash,
        size=candidate.size,
        mtime=candidate.mtime,
        doc_type=meta.doc_type,
        is_private=meta.is_private,
        user_slug=meta.user_slug,
        subject=mask_field(loaded.subject or meta.subject, values),
        created_at=loaded.created_at or meta.created_at,
        title=mask_field(loaded.title, values),
        # A tag that holds a secret is left off (a masked tag names nothing, and the tagger would offer it on).
        tags=[tag for tag in tags if mask_field(tag, values) == tag],
        source=loaded.source,
    )
    return DocumentWrite(document, chunks, np.zeros((0, 0), dtype=np.float32), secrets=len(spans),
                         language=detect_language(loaded.text))


def _notice_piece(notice: str, text: str) -> TextChunk:
    """The one chunk of a file that is mostly credentials: it spans the whole file, and its text is the notice."""
    return TextChunk(0, notice, 0, len(text.split()), 0, len(text))


def _masked(text: str, whole: str, start: int, spans: list[SecretSpan]) -> str:
    """A chunk's text with the document's secret spans masked (found on the whole text, so a key cut by a
    chunk boundary is still found); a chunk that is not a plain slice of the text is searched on its own."""
    if not spans:
        return text
    if whole[start : start + len(text)] == text:
        return mask(text, spans, start)
    return mask_secrets(text)


def _embed(writes: list[DocumentWrite], store: Store, embedder: Embedder, report: IndexReport,
           on_chunks: Callable[[int], None] | None = None) -> None:
    """Fill each write's vectors, embedding only texts with no cached vector (deduplicated in-batch).
    `on_chunks(n)` hears of every chunk given a vector, a slice at a time, so progress moves while it embeds."""
    hashes = [c.text_hash for w in writes for c in w.chunks]
    cached = store.cached_vectors(hashes)
    missing: dict[str, str] = {}
    for write in writes:
        for chunk in write.chunks:
            if chunk.text_hash not in cached:
                missing.setdefault(chunk.text_hash, chunk.text)
    if on_chunks:
        on_chunks(len(hashes) - len(missing))
    # By length across the batch: the embedder pads each slice's texts to its longest, and slices in file order
    # padded 5 % more tokens than one call over the batch (1,000 small notes, docs/benchmarks.md).
    keys = sorted(missing, key=lambda h: len(missing[h]))
    texts = [missing[key] for key in keys]
    for start in range(0, len(texts), EMBED_SLICE):
        part = embedder.embed_documents(texts[start : start + EMBED_SLICE])
        cached.update(zip(keys[start : start + EMBED_SLICE], part, strict=True))
        if on_chunks:
            on_chunks(len(part))
    report.chunks_embedded += len(missing)
    report.chunks_reused += len(hashes) - len(missing)
    for write in writes:
        write.vectors = np.stack([cached[c.text_hash] for c in write.chunks]).astype(np.float32)


# Texts per embedder call: small enough that progress moves every few seconds, large enough to sort by length.
EMBED_SLICE = 32


def index_roots(
    options: IndexingOptions,
    store: Store,
    embedder: Embedder,
    roots: tuple[str, ...] | None = None,
    rebuild: bool = False,
    wait_seconds: float = 0.0,
    progress: ProgressHook | None = None,
    *,
    take_lock: bool = True,
    within: Within | None = None,
    prune_missing_roots: bool = False,
    remask: bool = False,
) -> IndexReport:
    """Bring the index in line with the files under `roots`; see the module docstring. `rebuild` empties the
    store first (the KnowledgeBase builds aside instead, so a failed rebuild loses nothing).
    `take_lock=False`: the caller already holds the index lock. `within`: only these paths under the roots
    are looked at (watch mode), by the same rules. The documents of a root this machine cannot re-read
    (indexing/roots.py) are kept and named in `report.missing_roots`, or dropped with `prune_missing_roots`."""
    roots = tuple(roots or options.roots)
    _check_roots(options, roots)
    started = time.perf_counter()
    report = IndexReport(rebuild=rebuild)
    with index_lock(options.lock_file, wait_seconds) if take_lock else nullcontext():
        if rebuild:
            store.reset()
        store.ensure_model(embedder.name, embedder.dim)
        manifest = store.manifest()
        if within is None and options.lock_file.is_absolute():  # a whole run, of a project (not a test's defaults)
            report.missing_roots = missing_roots(options.root, options.lock_file.parent, manifest)
            report.pruned = prune_missing_roots and bool(report.missing_roots)
        gone = frozenset(m.root for m in report.missing_roots)
        diff = diff_roots(options, roots, manifest, report, within, keep=frozenset() if report.pruned else gone,
                          reread=remask)
        if report.pruned:
            diff.removed = sorted({*diff.removed, *(p for p, entry in manifest.items() if entry.root in gone)})
        # Every file read again, and no root left unread: the whole index is now this detector's.
        remasked = (remask and within is None and not report.missing_roots
                    and {entry.root for entry in manifest.values()} <= set(roots))
        _write(diff.todo, diff.removed, diff.touches, manifest, options, store, embedder, report, progress,
               remask=remasked, textless=diff.textless)
    report.seconds = time.perf_counter() - started
    return report


@dataclass
class RootsDiff:
    """How the files under some roots differ from the manifest: files to (re-)index, manifest entries to
    refresh (same bytes, new mtime) and stored paths whose file is gone or now left out (see the report's
    skips for why)."""

    todo: list[FileCandidate]
    touches: list[DocumentRecord]
    removed: list[str]
    textless: TextlessFiles | None = None  # the files read before that held no text (indexing/textless.py)


def diff_roots(options: IndexingOptions, roots: tuple[str, ...], manifest: dict[str, ManifestEntry],
               report: IndexReport, within: PathScope | None = None, keep: frozenset[str] = frozenset(),
               reread: bool = False) -> RootsDiff:
    """The comparison every index run makes (by size and mtime, then SHA-256), without writing anything: what
    `index` would do to these roots. Files left out land in `report` as skips; unchanged ones are counted.
    The documents of the roots in `keep` (missing on this machine) are never counted as removed."""
    _check_roots(options, roots)
    seen: set[str] = set()
    walked: set[str] = set()
    todo: list[FileCandidate] = []
    touches: list[DocumentRecord] = []
    files = indexed_files(manifest)
    textless = textless_record(options)
    for root, path, rel, info in _walk(options, roots, report, within):
        if rel in walked:  # the same file again through a nested root (`docs` and `docs/archive`): once is enough
            continue
        walked.add(rel)
        shown = storable_path(rel)
        if shown in seen:  # two names that escape alike (a literal "\xe9" and a byte 0xE9): keep the first
            report.skip(shown, "another file's name reads the same once escaped", failed=True)
            continue
        if _consider(root, path, rel, info, files, report, todo, touches, options, reread,
                     None if reread else textless):
            seen.add(shown)
    if within is None:  # a whole walk: a textless file gone (or left out) leaves the record
        textless.keep_only({storable_path(rel) for rel in walked}, roots)
    removed = sorted(p for p, entry in manifest.items()
                     if entry.root in roots and entry.root not in keep and file_of(p) not in seen
                     and (within is None or within.holds(p)))
    return RootsDiff(todo, touches, removed, textless)


def textless_record(options: IndexingOptions) -> TextlessFiles:
    """The record of the files this index read that held no text (none for options without a project)."""
    return TextlessFiles.load(options.lock_file.parent if options.lock_file.is_absolute() else None)


def _consider(
    root: str,
    path: Path,
    rel: str,
    info: os.stat_result,
    files: dict[str, IndexedFile],
    report: IndexReport,
    todo: list[FileCandidate],
    touches: list[DocumentRecord],
    options: IndexingOptions,
    reread: bool = False,
    textless: TextlessFiles | None = None,
) -> bool:
    """Sort one regular, supported file into skipped, unchanged (maybe with fresh stat) or to-do, by stat, then
    hash. True when the file stays in the index (unchanged or to do); a skipped file's old entry goes. A file not
    in the index that `textless` knows held no text is skipped unread while its bytes stay the same."""
    # Stored and shown: the escaped name, so no lone surrogate reaches SQLite or JSON. It still leads back to the
    # file: every walk maps real names to it (the manifest's key), fs_path() maps it back for index_paths,
    # and the doc id hashes the real bytes (`id_path`).
    shown = storable_path(rel)
    if info.st_size > options.max_file_bytes:
        report.skip(shown, f"{info.st_size / (1 << 20):.1f} MiB, over the {options.max_file_bytes / (1 << 20):g} "
                           "MiB file size limit (max_file_mb)", failed=True)
        return False
    indexed = files.get(shown)
    known = indexed.entry if indexed else None
    outdated = _outdated(indexed, shown, path, reread)
    if known and not outdated and known.size == info.st_size and known.mtime == info.st_mtime:
        report.unchanged += 1
        return True
    if _still_textless(textless, indexed, shown, info, None, report):
        return False
    if name_secrets(shown):  # never a candidate: `freshness` and uploads would list its name as new
        report.skip(shown_path(shown), SECRET_IN_NAME, failed=False)
        return False
    try:
        file_hash = file_sha256(path)
    except OSError as exc:
        report.skip(shown, f"cannot read: {exc.strerror or exc}", failed=True)
        return False
    if indexed and known and not outdated and known.file_hash == file_hash:
        report.unchanged += 1
        touches.extend(_touch_record(entry, stored, info.st_size, info.st_mtime)
                       for stored, entry in indexed.entries.items())
        return True
    if _still_textless(textless, indexed, shown, info, file_hash, report):  # touched, not changed
        return False
    todo.append(FileCandidate(shown, root, path, info.st_size, info.st_mtime, file_hash, known is None, id_path=rel,
                              stored=indexed.paths if indexed else ()))
    return True


def _outdated(indexed: IndexedFile | None, shown: str, path: Path, reread: bool) -> bool:
    """Whether an indexed file is read again whatever its stat and hash say: an mbox indexed whole (before each
    message was a document of its own), or every file with `index --remask` (unchanged chunks keep vectors)."""
    return reread or (indexed is not None and shown in indexed.entries and path.suffix.lower() in CONTAINER_SUFFIXES)


def _still_textless(textless: TextlessFiles | None, indexed: IndexedFile | None, shown: str, info: os.stat_result,
                    file_hash: str | None, report: IndexReport) -> bool:
    """True (and the skip reported) for a file not in the index that held no text when last read, with the same
    stat, or (`file_hash` given) the same bytes: its new mtime is kept."""
    if textless is None or indexed is not None:
        return False
    if file_hash is None:
        same = textless.same_stat(shown, info.st_size, info.st_mtime)
    else:
        same = textless.same_hash(shown, file_hash)
        if same:
            textless.remember(shown, info.st_size, info.st_mtime, file_hash)
    if same:
        report.skip(shown, NO_TEXT, failed=False)
    return same


def index_paths(
    options: IndexingOptions,
    store: Store,
    embedder: Embedder,
    paths: list[str],
    wait_seconds: float = 0.0,
    *,
    take_lock: bool = True,
    progress: ProgressHook | None = None,
) -> IndexReport:
    """Index or remove exactly these files (project-relative paths under a configured root).

    The path-level twin of `index_roots` for callers that know what changed (an upload, a delete):
    a path whose file exists is indexed as `index_roots` would; a path whose file is gone is removed.
    A path may be given as stored (escaped, see `storable_path`) or as the real name.
    Nothing else under the roots is looked at. `take_lock=False`: the caller already holds the index lock.
    """
    started = time.perf_counter()
    report = IndexReport()
    resolved = _resolved_paths(options, paths, report)
    with index_lock(options.lock_file, wait_seconds) if take_lock else nullcontext():
        store.ensure_model(embedder.name, embedder.dim)
        manifest = store.manifest()
        files = indexed_files(manifest)
        textless = textless_record(options)
        todo: list[FileCandidate] = []
        touches: list[DocumentRecord] = []
        removed: list[str] = []
        for root, path, rel in resolved:
            shown = storable_path(rel)
            if is_sidecar(path) or is_snapshot(path):
                continue
            info = _indexable_stat(path, shown, report)
            if info is not None and _consider(root, path, rel, info, files, report, todo, touches, options,
                                              textless=textless):
                continue
            if shown in files:
                removed.extend(files[shown].paths)
        _write(todo, removed, touches, manifest, options, store, embedder, report, progress, textless=textless)
    report.seconds = time.perf_counter() - started
    return report


def _resolved_paths(options: IndexingOptions, paths: list[str], report: IndexReport) -> list[tuple[str, Path, str]]:
    """(root, real path, real relative path) of each file the paths name, once each (a message of an mbox: its
    file is what is read again); a path under an ignored folder is counted as excluded and never read. A path
    outside the configured roots is an error."""
    base = options.root.resolve()
    resolved: list[tuple[str, Path, str]] = []
    for rel in dict.fromkeys(file_of(p) for p in paths):
        path = Path(os.path.realpath(fs_path(base, rel)))  # realpath: a symlink loop does not raise
        root = next((r for r in options.roots if path.is_relative_to((base / r).resolve())), None)
        if root is None or not path.is_relative_to(base):
            raise RagsteadError(f"{storable_path(rel)!r} is not under a configured root ({', '.join(options.roots)})")
        if IgnoreRules(base, options.exclude).ignored(path.relative_to(base).as_posix()):
            report.excluded += 1  # an upload or a watched change under an ignored folder: never read
            continue
        resolved.append((root, path, path.relative_to(base).as_posix()))
    return resolved


def _indexable_stat(path: Path, shown: str, report: IndexReport) -> os.stat_result | None:
    """The stat of a named file that can be indexed (a regular file of a supported type); None for one that is
    gone (it is removed), or, reported as skipped, one that is not a regular file or not supported."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        report.skip(shown, "not a regular file", failed=True)
        return None
    if not is_supported(path):
        report.skip(shown, f"unsupported file type {storable_path(path.suffix) or '(none)'!r}", failed=False)
        return None
    return info


def _write(
    todo: list[FileCandidate],
    removed: list[str],
    touches: list[DocumentRecord],
    manifest: dict[str, ManifestEntry],
    options: IndexingOptions,
    store: Store,
    embedder: Embedder,
    report: IndexReport,
    progress: ProgressHook | None,
    remask: bool = False,
    textless: TextlessFiles | None = None,
) -> None:
    """Prepare, embed and write candidates in batches of at most BATCH_CHUNKS chunks (the first FIRST_BATCH_CHUNKS,
    then about BATCH_SECONDS of embedding each), one transaction each.

    Deleted files go first, in a transaction of their own, so a run that keeps being interrupted cannot keep
    them searchable. A renamed file (a candidate with the content hash of a removed path) is the exception:
    its old path goes in the transaction that writes the new one, after the batch read the old chunks'
    vectors from the cache, so a rename is atomic and re-embeds nothing. Candidates are prepared renames
    first, and a file that fails and was indexed before loses its stale chunks in the last transaction.
    Files are read READERS at a time; one that held no text goes in `textless`, kept even when the run stops."""
    paired, gone = _renames(todo, removed, manifest)
    if gone or touches:
        store.apply([], gone, touches)
        _record_languages(options, [], gone)
    todo = sorted(todo, key=lambda c: c.file_hash not in paired)  # stable: renames first, walk order kept
    meter = _Progress(todo, progress)
    batches = _Batches(options, store, embedder, report, manifest, meter.report)
    textless = textless or TextlessFiles(None)
    try:
        with closing(_prepared(todo, options)) as prepared:
            for candidate, outcome in prepared:
                batches.removals += paired.pop(candidate.file_hash, [])
                _note_textless(textless, candidate, outcome)
                batches.take(candidate, outcome)
                meter.read(candidate, outcome)
                if batches.chunks >= batches.limit:
                    batches.flush(final=False)
    finally:
        textless.save()  # what was read is known, even when the run stops here
    batches.removals += [p for paths in paired.values() for p in paths]
    batches.flush(final=True)
    report.removed = sorted(set(removed) | set(batches.stale) | set(batches.dropped))
    _record_secret_counts(options, report, fresh=not manifest, remasked=remask)


def _renames(todo: list[FileCandidate], removed: list[str],
             manifest: dict[str, ManifestEntry]) -> tuple[dict[str, list[str]], list[str]]:
    """The removed paths paired with a candidate of the same content hash (renames, by hash), and the rest
    (files gone for good)."""
    by_hash: dict[str, list[str]] = {}
    for path in removed:
        entry = manifest.get(path)
        if entry is not None:
            by_hash.setdefault(entry.file_hash, []).append(path)
    wanted = {c.file_hash for c in todo}
    paired = {h: paths for h, paths in by_hash.items() if h in wanted}
    gone = [p for h, paths in by_hash.items() if h not in paired for p in paths]
    return paired, gone


class _Batches:
    """An index run's writes gathered into transactions of at most `limit` chunks: the first FIRST_BATCH_CHUNKS,
    then about BATCH_SECONDS of embedding each. `removals` go with the batch that is written next; `stale` (the
    old chunks of files now unreadable) with the last one; `dropped`: documents a re-read file no longer holds."""

    def __init__(self, options: IndexingOptions, store: Store, embedder: Embedder, report: IndexReport,
                 manifest: dict[str, ManifestEntry], on_progress: Callable[[int], None]) -> None:
        self.options, self.store, self.embedder, self.report = options, store, embedder, report
        self.manifest, self.on_progress = manifest, on_progress
        self.batch: list[DocumentWrite] = []
        self.removals: list[str] = []
        self.stale: list[str] = []
        self.dropped: list[str] = []
        self.limit, self.chunks = FIRST_BATCH_CHUNKS, 0

    def take(self, candidate: FileCandidate, outcome: list[DocumentWrite] | Skip) -> None:
        """Add what one file made: its documents to the batch (and the documents it no longer holds to the
        removals), or its skip to the report (and the stale content of a now-unreadable file)."""
        if isinstance(outcome, Skip):
            self.report.skip(shown_path(candidate.rel_path), outcome.reason, failed=outcome.failed)
            if not candidate.is_new:  # stale content of a now-unreadable file goes
                self.stale.extend(candidate.stored or [candidate.rel_path])
            return
        self.batch.extend(outcome)
        written = {write.document.file_path for write in outcome}
        gone_inside = [p for p in candidate.stored if p not in written]  # a message gone from its mbox
        self.removals += gone_inside
        self.dropped += gone_inside
        self.chunks += sum(len(write.chunks) for write in outcome)

    def flush(self, final: bool) -> None:
        """Embed the batch and write it with the removals in one transaction (`final`: the stale paths too);
        the next batch's size follows this one's embedding rate."""
        report = self.report
        started, embedded = time.perf_counter(), report.chunks_embedded
        _embed(self.batch, self.store, self.embedder, report, self.on_progress)
        rate = (report.chunks_embedded - embedded) / max(time.perf_counter() - started, 1e-3)
        self.limit = BATCH_CHUNKS if report.chunks_embedded == embedded else (
            min(BATCH_CHUNKS, max(FIRST_BATCH_CHUNKS, int(rate * BATCH_SECONDS))))
        for write in self.batch:
            if write.secrets:
                report.secrets[write.document.file_path] = write.secrets
        # The record goes first: a run killed after this batch is written leaves it saying what the index holds
        # (a first run killed before its end said for good that the index predated masking).
        _record_secret_counts(self.options, report, fresh=not self.manifest)
        removals = self.removals + (self.stale if final else [])
        self.store.apply(self.batch, removals, [])
        _record_languages(self.options, self.batch, removals)
        for write in self.batch:
            path = write.document.file_path
            (report.added if self.manifest.get(path) is None else report.updated).append(path)
            report.chunks_written += len(write.chunks)
        self.batch, self.removals, self.chunks = [], [], 0


def _prepared(todo: list[FileCandidate],
              options: IndexingOptions) -> Generator[tuple[FileCandidate, list[DocumentWrite] | Skip], None, None]:
    """Each candidate with what `prepare_file` made of it, in order, READERS files read at once (a thread each,
    waiting on its reader process), at most two per reader ahead of the caller."""
    readers = min(READERS, sum(1 for c in todo if c.loaded is None))
    if readers <= 1:
        yield from ((candidate, prepare_file(candidate, options)) for candidate in todo)
        return
    from concurrent.futures import Future, ThreadPoolExecutor

    pool = ThreadPoolExecutor(readers, thread_name_prefix="ragstead-read")
    pending: deque[tuple[FileCandidate, Future[list[DocumentWrite] | Skip]]] = deque()
    try:
        for candidate in todo:
            pending.append((candidate, pool.submit(prepare_file, candidate, options)))
            if len(pending) >= 2 * readers:
                first, future = pending.popleft()
                yield first, future.result()
        while pending:
            first, future = pending.popleft()
            yield first, future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a stopped run starts no more reads


def _note_textless(textless: TextlessFiles, candidate: FileCandidate, outcome: list[DocumentWrite] | Skip) -> None:
    """Remember a file read whole that held no text; any other outcome forgets it."""
    if isinstance(outcome, Skip) and outcome.reason == NO_TEXT and candidate.loaded is None:
        textless.remember(candidate.rel_path, candidate.size, candidate.mtime, candidate.file_hash)
    else:
        textless.forget([candidate.rel_path])


class _Progress:
    """An index run's progress, counted in chunks (what costs time) and, for an image, one unit for its OCR
    (#47.2: a folder of photos moved no bar while Tesseract read them). The total is an estimate: the chunks
    prepared so far scaled by the bytes of text files still to read, plus one unit per image and the chunks of
    those read; it is exact once every file is prepared."""

    def __init__(self, todo: list[FileCandidate], hook: ProgressHook | None) -> None:
        self.hook = hook
        self.images = sum(1 for c in todo if _is_image(c))
        self.total_bytes = max(1, sum(c.size for c in todo if not _is_image(c)))
        self.done = self.chunks = self.bytes = self.image_chunks = 0

    def read(self, candidate: FileCandidate, outcome: list[DocumentWrite] | Skip) -> None:
        added = 0 if isinstance(outcome, Skip) else sum(len(write.chunks) for write in outcome)
        if _is_image(candidate):
            self.image_chunks += added
            self.done += 1
        else:
            self.chunks += added
            self.bytes += candidate.size
        self.report()

    def report(self, embedded: int = 0) -> None:
        self.done += embedded
        if self.hook:
            estimate = round(self.chunks * self.total_bytes / max(1, self.bytes)) + self.images + self.image_chunks
            self.hook(self.done, max(self.done, self.chunks + self.images + self.image_chunks, estimate))


def _is_image(candidate: FileCandidate) -> bool:
    return candidate.loaded is None and candidate.path.suffix.lower() in IMAGE_SUFFIXES


def _record_languages(options: IndexingOptions, batch: list[DocumentWrite], removed: list[str]) -> None:
    """Each written document's language, in the index's record (indexing/languages.py), after its transaction."""
    if options.lock_file.is_absolute():  # options without a project (a test's defaults): nowhere of its own
        record_languages(options.lock_file.parent, {w.document.file_path: w.language for w in batch}, removed)


def record_imported_secrets(options: IndexingOptions, checked: bool | None, files: dict[str, int]) -> None:
    """After an import: the snapshot's own secrets state (its source index's), None when it does not say."""
    path = options.lock_file.parent / SECRETS_FILE
    make_private_folder(path.parent)
    write_text_atomically(path, json.dumps({"complete": checked, "imported": True,
                                            "files": dict(sorted(files.items()))}, indent=1))


def restore_secrets_record(options: IndexingOptions, old: dict[str, Any], carried: set[str]) -> None:
    """After a rebuild that kept the documents of missing roots (`carried` paths) as they were: their counts
    and the old index's state come back, since the run did not pass them through the secrets pass again."""
    path = options.lock_file.parent / SECRETS_FILE
    counts = secret_counts(options) | {k: int(v) for k, v in old.get("files", {}).items() if k in carried}
    write_text_atomically(path, json.dumps({**old, "files": dict(sorted(counts.items()))}, indent=1))


def _record_secret_counts(options: IndexingOptions, report: IndexReport, fresh: bool, remasked: bool = False) -> None:
    """Keep the per-file counts beside the lock (a private 0600 file of paths and numbers, never values).
    `fresh`: this run writes every document (a new index, a rebuild), so the whole index is masked, by this
    detector; `remasked`: this run read every file again (`index --remask`), so this detector masked it all."""
    if not options.lock_file.is_absolute():
        return  # options without a project (a test's defaults): nowhere of its own to keep them
    old = secrets_record(options)
    changed = {*report.added, *report.updated, *report.removed}
    if not fresh and not remasked and not changed and not report.secrets:
        return
    counts = {} if fresh else {k: v for k, v in secret_counts(options).items() if k not in changed}
    counts |= report.secrets
    path = options.lock_file.parent / SECRETS_FILE
    make_private_folder(path.parent)
    # An imported index's state stays (unknown stays unknown) until a run re-writes every document.
    kept = {"complete": old.get("complete", False), "imported": True} if old.get("imported") else {
        "complete": bool(old.get("complete"))}
    state = {"complete": True} if fresh else kept
    detector = DETECTOR_VERSION if fresh or remasked else old.get("detector", 1)
    told = {"told": old["told"]} if "told" in old else {}
    write_text_atomically(path, json.dumps({**state, "detector": detector, **told,
                                            "files": dict(sorted(counts.items()))}, indent=1))


def tell_masking_improved(options: IndexingOptions) -> bool:
    """True the first time it is asked about an index masked by an older detector (the record keeps that it
    told, so `index` says it once; `status` says it until `index --remask` applies it)."""
    record = secrets_record(options)
    if not record.get("complete") or record.get("imported") or secrets_detector(options) >= DETECTOR_VERSION:
        return False
    if record.get("told", 0) >= DETECTOR_VERSION:
        return False
    write_text_atomically(options.lock_file.parent / SECRETS_FILE, json.dumps({**record, "told": DETECTOR_VERSION},
                                                                                indent=1))
    return True


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
        todo: list[FileCandidate] = []
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
            todo.append(FileCandidate(rel, root, Path(rel), len(body), 0.0, content_hash, known is None, loaded))
        removed = sorted(p for p, entry in manifest.items() if entry.root == root and p not in seen)
        _write(todo, removed, [], manifest, options, store, embedder, report, progress)
    report.seconds = time.perf_counter() - started
    return report


def _touch_record(known: ManifestEntry, rel: str, size: int, mtime: float) -> DocumentRecord:
    """A record carrying only what `apply` refreshes for an unchanged-content file: size and mtime."""
    return DocumentRecord(
        doc_id=known.doc_id, file_path=rel, root=known.root, file_hash=known.file_hash, size=size,
        mtime=mtime, doc_type="", is_private=True, user_slug=None, subject=None, created_at=None,
        title=None,
    )
