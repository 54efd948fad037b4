"""One `ragstead index` at a time per index.

filelock uses an OS lock (flock), which the kernel drops when the holder dies, so a SIGKILLed run
never leaves a stale lock behind (a PID file would need a staleness rule for that).
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ragstead.core.atomic import PRIVATE_FILE_MODE, make_private_folder
from ragstead.errors import IndexLockedError


@contextmanager
def index_lock(path: Path, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the index lock; raise IndexLockedError if another run holds it after `wait_seconds`."""
    make_private_folder(path.parent)
    lock = FileLock(str(path), mode=PRIVATE_FILE_MODE)
    try:
        lock.acquire(timeout=wait_seconds)
    except Timeout as exc:
        raise IndexLockedError(
            f"another `ragstead index` run holds {path}; wait for it to finish or pass --wait SECONDS"
        ) from exc
    try:
        yield
    finally:
        lock.release()


SCRATCH_PREFIXES = (".rebuild-", ".import-")  # the scratch indexes `index --rebuild` and `import --replace` fill


@contextmanager
def scratch_index_folder(folder: Path, prefix: str) -> Iterator[str]:
    """A private temporary folder in `folder` for a scratch index, removed at the end. Taken under the index lock:
    any scratch folder already there belongs to a run that died (a SIGKILL skips the removal), so it is removed
    first; a killed import or rebuild left a copy of the index (its size, files 0644 in a 0700 folder)."""
    for leftover in folder.glob(".*-*"):
        if leftover.name.startswith(SCRATCH_PREFIXES) and leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=prefix) as scratch:
        yield scratch


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block ends, then raise it: for an index swap, which must run to its end
    once it has begun (`index --rebuild`, `import --replace`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
