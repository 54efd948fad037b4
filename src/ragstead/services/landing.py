"""Landing files in a project, all or nothing: uploads, and the install step that uploads and ingests share.

A file is checked by its loader before it replaces anything, moved into place under the index lock with what
it replaces kept aside, and indexed; if indexing fails (Ctrl-C included) every file goes back and the index
is brought back in line with them.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, BinaryIO

from ragstead.core.atomic import PRIVATE_FILE_MODE, make_private_folder
from ragstead.documents.loaders import LOADERS, is_supported
from ragstead.documents.sandbox import load_isolated
from ragstead.embeddings.base import Embedder
from ragstead.errors import InvalidQueryError, LoadError, UnsupportedFileError
from ragstead.filters import QueryFilters
from ragstead.indexing.build import IndexingOptions, IndexReport, index_paths
from ragstead.indexing.ignore import IgnoreRules
from ragstead.indexing.lock import index_lock
from ragstead.services.indexer import Indexer

UPLOAD_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._ -]{0,119}\Z")  # \Z: `$` would let a trailing newline pass


class Landing:
    """Puts checked files into the project of one `Indexer` and indexes them, all or nothing."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer
        self.runtime = indexer.runtime
        # Chunks embedded and reused by every install so far: what `freshness --apply` reports for the pages it
        # ingests again (an ingest's own report is per source, not per chunk).
        self.chunks_embedded = 0
        self.chunks_reused = 0

    def upload(self, name: str, data: BinaryIO | bytes, *, user: str, wait: float = 30.0) -> tuple[str, dict[str, Any]]:
        """Store a file as `kb/users/<user>/uploads/<name>` (the owner of a personal project: `uploads/<name>`)
        and index it, all or nothing: the bytes are parsed before they replace anything, and if indexing fails
        the previous file and document come back.
        Returns ("added" | "updated" | "unchanged", the document)."""
        QueryFilters.build(user_slug=user)  # a valid slug, or InvalidQueryError
        if not UPLOAD_NAME.match(name or ""):
            raise InvalidQueryError("the file name must be 1-120 letters, digits, spaces, '.', '_' or '-', "
                                    "without a path")
        if not is_supported(Path(name)):
            raise UnsupportedFileError(f"unsupported file type {Path(name).suffix!r}; send one of "
                                       f"{sorted(LOADERS)}")
        root = self.runtime.root
        folder = root / self.runtime.settings.user_folder(user) / "uploads"
        target = folder / name
        if not target.resolve().is_relative_to(folder.resolve()):
            raise InvalidQueryError("the file name leaves the user's folder")
        rel = target.relative_to(root).as_posix()
        options = self.runtime.settings.indexing()
        if IgnoreRules(root, options.exclude).ignored(rel):
            raise InvalidQueryError(f"{rel} is ignored (.ragsteadignore or the exclude setting); not stored")
        # A hidden staging folder: the indexer never picks up a half-written upload or a backup.
        staged = folder / f".upload-{uuid.uuid4().hex}"
        make_private_folder(staged)
        tmp = staged / name
        try:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE), "wb") as out:
                if isinstance(data, bytes):
                    out.write(data)
                else:
                    shutil.copyfileobj(data, out, 1 << 20)
            try:
                # Unreadable content is refused before it replaces anything, under the project's limits.
                load_isolated(tmp, options.load_limits)
            except LoadError as exc:
                raise LoadError(str(exc).replace(str(tmp), name)) from None
            report = self.install([(tmp, target)], [], staged, [rel], options, wait)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        status = "added" if report.added else "updated" if report.updated else "unchanged"
        return status, self.runtime.document(path=rel) or {}

    def install(self, moves: list[tuple[Path, Path]], removals: list[Path], staging: Path, rels: list[str],
                options: IndexingOptions, wait: float, embedder: Embedder | None = None) -> IndexReport:
        """Move checked files into place (and `removals` aside) and index `rels`, all or nothing, under the
        index lock: the files they replace are kept as hard links in `staging`, so a crash at any point leaves
        the old file or the new one, never neither; if indexing fails (Ctrl-C included) every file goes back
        and the index is brought back in line with them. `embedder` replaces the runtime's (an ingest that
        embeds once for every target)."""
        rt = self.runtime
        with rt.writer() as store, index_lock(rt.settings.lock_file, wait), self.indexer.guarded(store):
            swap = _swap_files(moves, removals, staging)
            embedder = embedder or rt.load_embedder(store)
            try:
                report = index_paths(options, store, embedder, rels, take_lock=False)
                if report.skipped:  # reasons name files by absolute path: never show the server's
                    raise LoadError(report.skipped[0]["reason"].replace(f"{rt.root.resolve()}/", ""))
            except BaseException:
                swap.undo()
                index_paths(options, store, embedder, rels, take_lock=False)
                raise
        self.chunks_embedded += report.chunks_embedded
        self.chunks_reused += report.chunks_reused
        return report


class _FileSwap:
    """Files moved into place (and old ones moved aside) so that `undo` puts everything back as it was. The
    backups live in the staging folder, which the caller removes once the install has landed."""

    def __init__(self) -> None:
        self.placed: list[tuple[Path, Path | None]] = []  # (target, backup of what it replaced)
        self.removed: list[tuple[Path, Path]] = []  # (old path, where it waits)

    def undo(self) -> None:
        for target, backup in reversed(self.placed):
            if backup is not None:
                os.replace(backup, target)
            else:
                target.unlink(missing_ok=True)
        for old, aside in reversed(self.removed):
            os.replace(aside, old)


def _swap_files(moves: list[tuple[Path, Path]], removals: list[Path], staging: Path) -> _FileSwap:
    """Move each staged file onto its target and each of `removals` into `staging`, keeping what it takes
    the place of (a hard link, so the target is never missing) for `undo`."""
    swap = _FileSwap()
    try:
        for source, target in moves:
            backup = None
            if target.exists():
                backup = staging / f".previous-{uuid.uuid4().hex}"
                os.link(target, backup)
            os.replace(source, target)
            swap.placed.append((target, backup))
        for old in removals:
            if old.exists():
                aside = staging / f".removed-{uuid.uuid4().hex}"
                os.replace(old, aside)
                swap.removed.append((old, aside))
    except BaseException:
        swap.undo()
        raise
    return swap
