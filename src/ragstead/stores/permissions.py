"""Private on disk: the index holds the full text of private documents, so its files are 0600 and its
folders 0700 (the owner only), whatever the umask.

How each backend gets there (docs/stores.md, "Private on disk"):

- folders are created 0700 (`make_private_folder`);
- the SQLite file is created empty and 0600 before SQLite opens it; SQLite gives its `-wal`, `-shm` and
  `-journal` files the database file's mode each time it creates them, so they follow;
- tantivy and Chroma create their files with the umask's mode (0644, or 0666 under umask 0), tantivy
  also later, in commits and background merges: the stores tighten their folders after each write
  (`tighten`), inside folders that are already 0700;
- `find_loose` is what `ragstead status` reports and `ragstead doctor` checks; `doctor --fix` tightens.

A folder is walked whole only when it is the index's own (`own_folder`); a SQLite file sitting in the
project root, a home folder or /tmp only has its own files checked.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstead.core.atomic import PRIVATE_FILE_MODE, PRIVATE_FOLDER_MODE, make_private_folder

__all__ = ["PRIVATE_FILE_MODE", "PRIVATE_FOLDER_MODE", "LoosePath", "companion_paths", "create_private_file",
           "doctor", "find_loose", "index_paths", "make_private_folder", "own_folder", "private_paths", "tighten"]

# Group and other bits: any of them set is looser than 0600 / 0700.
OTHERS = 0o077
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
# What the project keeps beside its index file (the default names: indexing/lock.py, memory/files.py, api/keys.py).
COMPANIONS = ("index.lock", "memory.lock", "api_keys.json")


@dataclass(frozen=True)
class LoosePath:
    """A file or folder that users other than its owner may read, write or enter."""

    path: Path
    mode: int
    folder: bool

    @property
    def wanted(self) -> int:
        """The mode `tighten` gives it: the same owner bits, nothing for group and others."""
        return self.mode & ~OTHERS

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": "folder" if self.folder else "file", "mode": f"{self.mode:04o}",
                "wanted": f"{self.wanted:04o}"}


def create_private_file(path: Path) -> bool:
    """Create `path` empty with mode 0600 (whatever the umask) if it does not exist; True if it was created."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    return True


def own_folder(folder: Path, project_root: Path | None) -> bool:
    """Whether every file in `folder` may be treated as the index's: a folder of its own, owned by this user.

    Not the project root or a folder above it, not the home folder or `/`, not a shared folder with the
    sticky bit (like /tmp). Without a project root, no folder counts (only named files are checked).
    """
    if project_root is None:
        return False
    try:
        folder = folder.resolve()
        info = folder.stat()
    except OSError:
        return False
    root = project_root.resolve()
    if folder == root or folder in root.parents or folder == Path(folder.anchor):
        return False
    try:
        if folder == Path.home().resolve():
            return False
    except (RuntimeError, KeyError, OSError):  # no home folder to compare with (a service account)
        pass
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & stat.S_ISVTX


def index_paths(sqlite_file: Path, project_root: Path | None) -> list[Path]:
    """The private paths of an embedded index: its whole folder when that is its own (`own_folder`), else the
    SQLite file, its -wal, -shm and -journal files and the tantivy folder beside it."""
    folder = sqlite_file.parent
    if own_folder(folder, project_root):
        return [folder]
    return [sqlite_file, *(sqlite_file.with_name(sqlite_file.name + side) for side in SQLITE_SIDE_FILES),
            sqlite_file.with_suffix(".tantivy"), sqlite_file.with_suffix(".vectors")]


def private_paths(project_root: Path, sqlite_files: Iterable[Path], files: Iterable[Path]) -> list[Path]:
    """Everything that must stay private for a project: each index's paths (`index_paths`) and single files
    (API keys, lock files, memory files), without repeats."""
    paths = [p for sqlite_file in sqlite_files for p in index_paths(sqlite_file, project_root)]
    return list(dict.fromkeys([*paths, *files]))


def companion_paths(folder: Path, project_root: Path | None) -> list[Path]:
    """The project's files in the folder of its configured index file, when the index itself lives elsewhere
    (`chroma:kb/rag/chroma`, `chroma+http://...?db=...`): that folder (if it is its own) and the lock files and
    API keys in it. Checked without walking: nothing else in that folder is the store's to tighten."""
    return [*([folder] if own_folder(folder, project_root) else []), *(folder / name for name in COMPANIONS)]


def find_loose(paths: Iterable[Path], *, walk: bool = True) -> list[LoosePath]:
    """Files and folders among `paths` (folders walked unless `walk` is False, symlinks inside them skipped,
    missing paths ignored) that are looser than 0600 / 0700, sorted by path."""
    found: dict[Path, LoosePath] = {}

    def check(path: Path, info: os.stat_result) -> None:
        if (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)) and info.st_mode & OTHERS:
            found[path] = LoosePath(path, stat.S_IMODE(info.st_mode), stat.S_ISDIR(info.st_mode))

    for path in paths:
        try:
            info = path.stat()  # a configured path may be a symlink (kb/rag -> /data/rag): its target counts
        except OSError:
            continue
        check(path, info)
        if not walk or not stat.S_ISDIR(info.st_mode):
            continue
        for folder, folders, names in os.walk(path, followlinks=False):
            for name in [*folders, *names]:
                entry = Path(folder, name)
                try:
                    entry_info = entry.lstat()
                except OSError:  # gone meanwhile (a merged tantivy segment, a checkpointed WAL)
                    continue
                if not stat.S_ISLNK(entry_info.st_mode):
                    check(entry, entry_info)
    return [found[p] for p in sorted(found)]


def tighten(paths: Iterable[Path], *, walk: bool = True) -> list[LoosePath]:
    """Take group and other permissions off every loose file and folder among `paths` (see `find_loose`);
    return what changed.

    Best effort: a file that vanished or belongs to another user is left to `find_loose` to report.
    """
    fixed = []
    for loose in find_loose(paths, walk=walk):
        try:
            os.chmod(loose.path, loose.wanted)
        except OSError:
            continue
        fixed.append(loose)
    return fixed


def doctor(paths: list[Path], *, fix: bool = False, folders: Iterable[Path] = ()) -> dict[str, Any]:
    """The check behind `ragstead doctor`: what is loose, what `fix` tightened, and what still is loose.
    `folders`: private folders checked themselves, not walked (the team layout's kb/, kb/users/<slug>/,
    artifacts/: the documents in them are the owner's files, their modes the owner's choice)."""
    folders = list(folders)

    def find() -> list[LoosePath]:
        return sorted({*find_loose(paths), *find_loose(folders, walk=False)}, key=lambda p: str(p.path))

    loose = find()
    fixed = [*tighten(paths), *tighten(folders, walk=False)] if fix and loose else []
    remaining = find() if fix else loose
    return {"ok": not remaining, "loose": [p.to_dict() for p in loose], "fixed": [p.to_dict() for p in fixed],
            "remaining": [p.to_dict() for p in remaining]}
