"""One `ragstead index` at a time per index.

filelock uses an OS lock (flock), which the kernel drops when the holder dies, so a SIGKILLed run
never leaves a stale lock behind (a PID file would need a staleness rule for that).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from ragstead.atomic import PRIVATE_FILE_MODE, make_private_folder
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
