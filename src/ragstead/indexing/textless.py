"""Files read once that held no text (#47.2): a photo OCR found nothing in, an empty note.

Such a file has no document in the index, so the manifest cannot say it was read; without a record every run
read it again (a textless photo costs a second of OCR, each run). The record keeps each one's size, mtime and
SHA-256 beside the index lock (`textless.json`, a private 0600 file of paths and hashes, never text), and a run
skips the file while its bytes stay the same: by stat, or by checksum when only the mtime moved. A changed file is
read again; `index --remask` and a rebuild read every file again; a file gone leaves the record with its run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ragstead.core.atomic import make_private_folder, write_text_atomically

TEXTLESS_FILE = "textless.json"
# The reason every run gives for a file with no text, the first time and the times it is skipped unread.
NO_TEXT = "no text to index (empty or image-only)"


@dataclass(frozen=True)
class TextlessEntry:
    size: int
    mtime: float
    file_hash: str


@dataclass
class TextlessFiles:
    """The record of one index (`folder`: the folder of its lock file; None keeps it in memory only)."""

    folder: Path | None
    entries: dict[str, TextlessEntry] = field(default_factory=dict)
    changed: bool = False

    @classmethod
    def load(cls, folder: Path | None) -> TextlessFiles:
        if folder is None:
            return cls(None)
        try:
            raw = json.loads((folder / TEXTLESS_FILE).read_text(encoding="utf-8"))
            files = raw.get("files", {}) if isinstance(raw, dict) else {}
            entries = {str(path): TextlessEntry(int(e["size"]), float(e["mtime"]), str(e["sha256"]))
                       for path, e in files.items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            entries = {}  # none yet, or unreadable: every file is read, and the record starts again
        return cls(folder, entries)

    def same_stat(self, path: str, size: int, mtime: float) -> bool:
        entry = self.entries.get(path)
        return entry is not None and entry.size == size and entry.mtime == mtime

    def same_hash(self, path: str, file_hash: str) -> bool:
        entry = self.entries.get(path)
        return entry is not None and entry.file_hash == file_hash

    def remember(self, path: str, size: int, mtime: float, file_hash: str) -> None:
        entry = TextlessEntry(size, mtime, file_hash)
        if self.entries.get(path) != entry:
            self.entries[path] = entry
            self.changed = True

    def forget(self, paths: list[str] | set[str]) -> None:
        for path in paths:
            if self.entries.pop(path, None) is not None:
                self.changed = True

    def keep_only(self, paths: set[str], roots: tuple[str, ...]) -> None:
        """After a whole walk of `roots`: entries under them whose file was not seen go."""
        self.forget({p for p in self.entries if p not in paths and any(_under(p, root) for root in roots)})

    def save(self) -> None:
        if self.folder is None or not self.changed:
            return
        make_private_folder(self.folder)
        files = {path: {"size": e.size, "mtime": e.mtime, "sha256": e.file_hash}
                 for path, e in sorted(self.entries.items())}
        write_text_atomically(self.folder / TEXTLESS_FILE, json.dumps({"files": files}, indent=1))
        self.changed = False


def forget_all(folder: Path) -> None:
    """A rebuild reads every file again: the record starts empty."""
    (folder / TEXTLESS_FILE).unlink(missing_ok=True)


def _under(path: str, root: str) -> bool:
    return root in (".", "") or path == root or path.startswith(root.rstrip("/") + "/")
