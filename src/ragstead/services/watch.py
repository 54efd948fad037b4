"""`ragstead watch`: the index follows the folders, without a command.

File events come from `watchfiles` (inotify, FSEvents, ReadDirectoryChangesW; polling where none works). An
event only says *where* to look: each batch re-runs the index's own comparison (`index_roots`) narrowed to
the changed paths (`Within`), so every rule of `index` holds unchanged: hidden and excluded names, editor
swap and backup files (hidden, or of no supported type), symlink scopes, renames that re-embed nothing.
A moved or deleted folder is one event; the narrowed walk finds what was under it, and the manifest what was
indexed there. Events keep queueing in `watchfiles` while a batch is indexed, so none is lost in between.

A root that disappears is left alone in the index (as `index` leaves a missing root alone: an unmounted disk
is not a mass delete); the watcher re-arms when it comes back and catches it up. A folder without permission
is reported by the walk and skipped; the rest is still watched (folder by folder, see `_follow`).

The index's own folder (`kb/rag`) and its file are different: when either goes (its root moved or deleted, the
index file deleted), any index run would create a new index in its place holding only what changed next. The
watcher stops instead, saying so, and creates nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import watchfiles

from ragstead.errors import IndexLockedError, InvalidQueryError
from ragstead.indexing.build import IndexingOptions, IndexReport, Within
from ragstead.indexing.ignore import IgnoreRules
from ragstead.services.indexer import Indexer

DEFAULT_DEBOUNCE = 1.0
# A batch waits for the folders to be quiet for `debounce` seconds, but never more than this many debounces
# after its first change: a file that is rewritten every second still gets indexed.
MAX_BATCH_DEBOUNCES = 10
# How often (seconds) the watcher checks that its roots are still the folders it watches.
ROOT_CHECK_SECONDS = 1.0

Sync = Callable[[tuple[str, ...], Within | None], IndexReport]


@dataclass
class WatchBatch:
    """One batch: the events it gathered and what the index run made of them, or a note (a root gone or back,
    a busy index). `to_dict()` is one line of `ragstead watch --json`."""

    time: str
    events: int = 0
    report: IndexReport | None = None
    note: str | None = None
    catch_up: bool = False
    roots: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """The index changed, or something could not be read (worth a line)."""
        report = self.report
        return report is not None and bool(report.added or report.updated or report.removed or report.failed)

    def to_dict(self) -> dict[str, Any]:
        report = self.report
        out: dict[str, Any] = {"time": self.time, "events": self.events, "catch_up": self.catch_up,
                               "roots": self.roots, "note": self.note}
        if report is not None:
            out |= {"added": report.added, "updated": report.updated, "removed": report.removed,
                    "unchanged": report.unchanged,
                    "failed": [s for s in report.skipped if s["path"] in report.failed],
                    "chunks_embedded": report.chunks_embedded, "chunks_reused": report.chunks_reused,
                    "seconds": round(report.seconds, 3)}
        return out


_Identity = tuple[tuple[int, int], tuple[int, int] | None]


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _stamp() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


class FolderFollower:
    """Keeps the index in line with the files under `roots` until `stop` is set (or Ctrl-C: see `run`).

    Every time the watcher is armed (at start, and again when a root goes, comes back or is replaced) the
    roots it covers are caught up with an incremental index run once it is armed, so nothing that changed
    while no watcher was armed is missed."""

    def __init__(self, options: IndexingOptions, roots: tuple[str, ...], sync: Sync, *,
                 debounce: float = DEFAULT_DEBOUNCE, on_batch: Callable[[WatchBatch], None] | None = None,
                 stop: threading.Event | None = None, force_polling: bool | None = None,
                 index_file: Path | None = None) -> None:
        if not 0.05 <= debounce <= 3600:
            raise InvalidQueryError(f"--debounce must be between 0.05 and 3600 seconds, got {debounce:g}")
        self.base = options.root.resolve()
        self.roots = roots
        self.sync = sync
        self.debounce = debounce
        self.on_batch = on_batch or (lambda batch: None)
        self.stop = stop or threading.Event()
        self.force_polling = force_polling
        self._own = tuple(Path(os.path.realpath(p)) for p in (*options.skip_dirs, options.lock_file.parent))
        self._ignore = IgnoreRules(self.base, options.exclude)
        self._tops = {root: (self.base / root).resolve() for root in roots}
        self._index_dir = Path(os.path.realpath(options.lock_file.parent))
        # The embedded store's file (None for a server store): deleted alone, it would come back holding only the
        # next batch's files (#45).
        self._index_file = Path(os.path.realpath(index_file)) if index_file is not None else None
        self._index_identity: _Identity | None = None  # the folder's and file's (device, inode) once they exist
        self._pending: set[str] = set()
        self._notes: dict[str, str] = {}  # what to say at the next catch-up (a root that came back)
        self._started = False
        self._events = 0
        self._interrupts = 0

    # -- the loop --------------------------------------------------------------------------------------

    def run(self) -> None:
        """Catch up with what changed while nobody watched, then follow the roots. The first Ctrl-C (main thread
        only) lets the batch in flight finish and stops; a second one stops at once (what was committed
        stays, and the next start catches up)."""
        with self._first_interrupt_stops():
            seen = self._identities()
            while not self.stop.is_set():
                present = tuple(r for r, ident in seen.items() if ident is not None)
                if not present:
                    self.stop.wait(ROOT_CHECK_SECONDS)
                else:
                    self._follow(present, seen)
                now = self._identities()
                self._roots_moved(seen, now)
                seen = now

    def _follow(self, present: tuple[str, ...], seen: dict[str, tuple[int, int] | None]) -> None:
        """Watch the present roots until one of the roots disappears, appears or is replaced, or `stop` is set.

        Recursively, as a rule: notify then follows new and moved folders itself. But a recursive watch stops
        adding watches at the first folder it cannot read, leaving the rest of that root unwatched; so when a
        root holds such a folder, each readable folder is watched on its own instead, and the watcher is armed
        again whenever a folder appears or goes."""
        folders, unreadable = self._folders(present)
        paths = sorted(folders) if unreadable else [str(self._tops[r]) for r in present]
        step = max(50, int(self.debounce * 1000))
        armed = False
        for changes in self._changes(paths, step, recursive=not unreadable):
            if not armed:  # armed now: from here on every change is an event; before, the catch-up sees it
                armed = True
                self._catch_up(present)
            rearm = self._gather(changes, folders if unreadable else None)
            moved = self._identities() != seen
            if self._pending:  # also after the first Ctrl-C: what was gathered is indexed before it stops
                self._flush(present)
            if moved or rearm:
                return

    def _folders(self, present: tuple[str, ...]) -> tuple[set[str], bool]:
        """Every folder an index run would enter under the present roots, and whether some could not be read."""
        found: set[str] = set()
        errors: list[OSError] = []
        for root in present:
            for current, names, _files in os.walk(self._tops[root], onerror=errors.append):
                found.add(current)
                keep = []
                for name in names:
                    folder = os.path.join(current, name)
                    if name.startswith(".") or os.path.islink(folder) or Path(os.path.realpath(folder)) in self._own:
                        continue
                    if Path(folder).is_relative_to(self.base) and \
                            self._ignore.ignored(Path(folder).relative_to(self.base).as_posix(), folder=True):
                        continue
                    keep.append(name)
                names[:] = keep
        return found, bool(errors)

    def _changes(self, paths: list[str], step: int, recursive: bool) -> Iterator[set[tuple[Any, str]]]:
        """`watchfiles.watch` over the paths; if the OS cannot watch them all (inotify's watch limit), polling
        instead, with a note."""
        polling = self.force_polling
        while True:
            try:
                yield from watchfiles.watch(
                    *paths, watch_filter=None, debounce=step * MAX_BATCH_DEBOUNCES, step=step,
                    stop_event=self.stop, rust_timeout=int(ROOT_CHECK_SECONDS * 1000), yield_on_timeout=True,
                    raise_interrupt=True, ignore_permission_denied=True, force_polling=polling, recursive=recursive)
                return
            except FileNotFoundError:  # a folder went between the walk and the watch: look again
                self.stop.wait(0.05)
                return
            except OSError as exc:
                if polling:
                    raise
                polling = True
                self.on_batch(WatchBatch(_stamp(), note=f"cannot watch with file events ({exc.strerror or exc}); "
                                                        "polling instead"))

    def _gather(self, changes: set[tuple[Any, str]], folders: set[str] | None) -> bool:
        """Queue the changed paths. Watching folder by folder (`folders`), True when a folder appeared, or a
        watched one went or moved: the watcher is armed again (and catches up)."""
        rearm = False
        for _change, raw in changes:
            rel = self._relative(Path(raw))
            if rel is None:
                continue
            self._pending.add(rel)
            self._events += 1
            if folders is not None:
                is_folder = os.path.isdir(raw) and not os.path.islink(raw)
                rearm = rearm or (raw in folders) != is_folder
        return rearm

    def _relative(self, path: Path) -> str | None:
        """The project-relative path of an event worth a look, or None: outside the project, inside the index's
        own folders (its writes would wake the watcher forever), or hidden below a root (swap files, temp
        files of atomic saves, `.git`), which `index` never reads."""
        if not path.is_relative_to(self.base) or any(path.is_relative_to(own) for own in self._own):
            return None
        for top in self._tops.values():
            if path.is_relative_to(top):
                if any(part.startswith(".") for part in path.relative_to(top).parts):
                    return None
                return path.relative_to(self.base).as_posix()
        return None

    def _flush(self, present: tuple[str, ...]) -> None:
        """Index what the pending events point at, in the roots that hold them. A busy index (another `index`
        run) keeps them pending for the next tick."""
        if self._index_gone():
            return
        pending = Within.of(self._pending)
        # Events under a root that is gone wait for it: its documents stay until it comes back.
        roots = tuple(r for r in present if self._tops[r].is_dir() and pending.leads_to(self._rel_top(r)))
        if not roots:
            self._pending.clear()
            self._events = 0
            return
        try:
            report = self.sync(roots, pending)
            self._index_identity = self._index_folder()  # the first run creates it
        except IndexLockedError:
            self.on_batch(WatchBatch(_stamp(), self._events, note="the index is busy (another index run); "
                                                                  "retrying shortly", roots=list(roots)))
            self.stop.wait(ROOT_CHECK_SECONDS)
            return
        batch = WatchBatch(_stamp(), self._events, report, roots=list(roots))
        self._pending.clear()
        self._events = 0
        self.on_batch(batch)

    def _catch_up(self, roots: tuple[str, ...]) -> None:
        """An incremental index of whole roots, once the watcher is armed. Announced at start and for a root that
        came back (`catch_up`); after any other arming it is a plain batch (a line only if it changed
        something)."""
        if self._index_gone():
            return
        notes = [self._notes.pop(r) for r in roots if r in self._notes]
        announce = not self._started or bool(notes)
        self._started = True
        while True:
            try:
                report = self.sync(roots, None)
                self._index_identity = self._index_folder()  # the first run creates it
                break
            except IndexLockedError:
                self.on_batch(WatchBatch(_stamp(), note="the index is busy (another index run); waiting",
                                         roots=list(roots)))
                if self.stop.wait(ROOT_CHECK_SECONDS):
                    return
        self.on_batch(WatchBatch(_stamp(), report=report, note="; ".join(notes) or None, catch_up=announce,
                                 roots=list(roots)))

    # -- roots that come and go --------------------------------------------------------------------------

    def _index_folder(self) -> _Identity | None:
        """The index's folder and file as (device, inode) each (the file's None for a server store); None while
        the folder is missing, or the file, once it existed, is."""
        folder = _identity(self._index_dir)
        if folder is None:
            return None
        file = _identity(self._index_file) if self._index_file is not None else None
        return (folder, file)

    def _index_gone(self) -> bool:
        """True (and the watcher stopped, with a note) when the index's folder or file, once seen, is missing or
        is another one: an index run now would create a new index in its place, holding only what changed next.
        A project without an index yet gets one from the first catch-up, as `index` would."""
        now = self._index_folder()
        seen = self._index_identity
        if seen is None or now == seen or (now is not None and seen[1] is None and now[0] == seen[0]):
            self._index_identity = now  # the first sight, or the file the first run created
            return False
        gone = self._index_dir if now is None or now[0] != seen[0] else self._index_file
        shown = gone.relative_to(self.base).as_posix() if gone is not None and gone.is_relative_to(self.base) \
            else str(gone)
        what = "folder" if gone == self._index_dir else "file"
        self.on_batch(WatchBatch(_stamp(), note=f"the index {what} {shown} is gone (moved or deleted): watching "
                                                "stopped, and no index is created in its place; put it back or "
                                                "run `ragstead index`, then `ragstead watch` again"))
        self.stop.set()
        return True

    def _rel_top(self, root: str) -> str:
        top = self._tops[root]
        return top.relative_to(self.base).as_posix() if top.is_relative_to(self.base) else root

    def _identities(self) -> dict[str, tuple[int, int] | None]:
        """Each root's folder as (device, inode), or None while it is missing: a root replaced by another
        folder of the same name is a new folder to watch."""
        out: dict[str, tuple[int, int] | None] = {}
        for root, top in self._tops.items():
            try:
                info = os.stat(top)
                out[root] = (info.st_dev, info.st_ino) if os.path.isdir(top) else None
            except OSError:
                out[root] = None
        return out

    def _roots_moved(self, before: dict[str, tuple[int, int] | None], after: dict[str, tuple[int, int] | None]) -> None:
        gone = [r for r in self.roots if before[r] is not None and after[r] is None]
        back = [r for r in self.roots if after[r] is not None and before[r] != after[r]]
        if gone:
            self._pending = {p for p in self._pending if not any(Within.of([self._rel_top(r)]).holds(p) for r in gone)}
            self.on_batch(WatchBatch(_stamp(), note=f"{', '.join(gone)} is gone; its documents stay in the index "
                                                    "while it is away, and it is caught up when it comes back",
                                     roots=gone))
        for root in back:  # said at the catch-up that follows the next arming
            self._notes[root] = f"{root} is back"

    # -- Ctrl-C ----------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _first_interrupt_stops(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def on_interrupt(number: int, frame: Any) -> None:
            self._interrupts += 1
            if self._interrupts > 1:
                raise KeyboardInterrupt
            self.stop.set()

        previous = signal.signal(signal.SIGINT, on_interrupt)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)



def watch(indexer: Indexer, paths: Sequence[str | Path] | None = None, *, debounce: float = DEFAULT_DEBOUNCE,
          wait: float = 30.0, on_batch: Callable[[WatchBatch], None] | None = None,
          stop: threading.Event | None = None) -> None:
    """Keep the index in line with the folders under `paths` (default: the configured roots) until `stop` is
    set or Ctrl-C: first an incremental index (what changed while nobody watched), then, for each burst of
    file events (quiet for `debounce` seconds), an index run narrowed to the changed paths. `on_batch` hears
    of each batch. In the main thread the first Ctrl-C lets the batch in flight finish."""
    runtime = indexer.runtime
    if paths:
        roots = []
        for path in paths:
            full = Path(path) if Path(path).is_absolute() else runtime.root / path
            if not full.is_dir():
                raise InvalidQueryError(f"{path} is not a folder" if full.exists() else f"no such folder: {path}")
            roots.append(runtime.relative_path(full))
        watched = tuple(dict.fromkeys(roots))
    else:
        watched = tuple(runtime.settings.roots)

    def sync(roots: tuple[str, ...], within: Within | None) -> IndexReport:
        return indexer.sync(roots, within, wait)

    FolderFollower(runtime.settings.indexing(watched), watched, sync, debounce=debounce, on_batch=on_batch,
                   stop=stop, index_file=runtime.spec.sqlite_file).run()
