"""Whole-file replacement that a crash cannot tear (write a temporary file beside it, then rename), and
private folders: what ragstead writes about your documents is readable by you only."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# The modes of everything ragstead writes that holds private data (index, keys, memory): the owner only.
PRIVATE_FILE_MODE = 0o600
PRIVATE_FOLDER_MODE = 0o700


def write_text_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8), as `write_bytes_atomically` does."""
    write_bytes_atomically(path, text.encode("utf-8"))


def write_bytes_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`: readers see the old file or the new one, never half of either."""
    with replacing_atomically(path) as handle:
        handle.write(data)


@contextmanager
def replacing_atomically(path: Path) -> Iterator[BinaryIO]:
    """A private file to write `path`'s new content into, streamed; it replaces `path` when the block ends
    (readers see the old file or the new one, never half of either) and is removed if the block fails.

    The temporary file comes from `mkstemp` (a unique name, mode 0600 whatever the umask, hidden with a
    leading dot so the indexer skips it), is fsynced before the rename, and the rename keeps its mode, so the
    file is always 0600.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)  # mkstemp asks for 0600, but a umask such as 0o277 would take more away
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_private_folder(path: Path) -> Path:
    """Create `path` and any missing parents, each 0700 whatever the umask. A folder that already exists
    keeps its mode (`ragstead doctor` reports one that others can read)."""
    missing = []
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_FOLDER_MODE)
        except FileExistsError:  # created meanwhile by another process (or a dangling symlink): not ours
            continue
        os.chmod(folder, PRIVATE_FOLDER_MODE)  # mkdir's mode passes through the umask
    return path
