"""What `index` leaves out on purpose: the `exclude` setting and `.ragsteadignore` files, gitignore syntax.

A `.ragsteadignore` may sit in any folder of the project; its patterns are relative to that folder, as a
`.gitignore`'s are. The one at the project root (with the `exclude` setting) arrives in the options' `exclude`;
the nested ones are read as the walk meets them. Index runs, `watch`, freshness checks and uploads all ask
the same `IgnoreRules`, so a file ignored by one is ignored by all.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path, PurePosixPath

import pathspec

IGNORE_FILE = ".ragsteadignore"
STARTER = """\
# .ragsteadignore: files and folders `ragstead index` leaves out (gitignore syntax). A .ragsteadignore may sit
# in any folder; its patterns are relative to that folder. Ignored files are never read, indexed or uploaded.
#
# drafts/          a folder, wherever it is
# /kb/scratch/     a folder at this level only
# *.tmp            a file pattern
# !keep.tmp        an exception to the line above
#
# Always left out, without a line here: hidden files and folders, the index folder (kb/rag/) and
# *.ragsnap          snapshots `ragstead export` writes: ragstead's own private data, never read as documents
"""


class IgnoreRules:
    """Whether a project-relative path is ignored, by the root patterns and every `.ragsteadignore` above it."""

    def __init__(self, base: Path, patterns: tuple[str, ...] = ()) -> None:
        self.base = base
        self.root_spec = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None

    def ignored(self, rel: str, *, folder: bool = False) -> bool:
        """`rel`: a project-relative POSIX path; `folder`: it names a folder (`drafts/` patterns match it)."""
        name = rel.rstrip("/") + ("/" if folder else "")
        if self.root_spec is not None and self.root_spec.match_file(name):
            return True
        parts = PurePosixPath(rel.rstrip("/")).parts
        for depth in range(1, len(parts)):  # the root's own file is in root_spec already
            spec = _spec_of(self.base / Path(*parts[:depth]) / IGNORE_FILE)
            if spec is not None and spec.match_file("/".join(parts[depth:]) + ("/" if folder else "")):
                return True
        return False


@lru_cache(maxsize=256)
def _read(path: Path, mtime_ns: int) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeError):
        return None
    lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def _spec_of(path: Path) -> pathspec.GitIgnoreSpec | None:
    """The patterns of one `.ragsteadignore` (cached until the file changes), or None."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    return _read(path, mtime)
