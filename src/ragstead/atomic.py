"""Whole-file replacement that a crash cannot tear: write a temporary file beside it, then rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text`: readers see the old file or the new one, never half of either.

    The temporary file comes from `mkstemp` (a unique name, mode 0600, hidden with a leading dot so
    the indexer skips it), is fsynced before the rename, and is removed if anything fails.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
