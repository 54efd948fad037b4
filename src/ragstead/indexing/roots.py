"""Roots the index holds documents for that this machine cannot re-read: a folder that is missing (an unmounted
drive, a renamed folder) or a root restored by `ragstead import` whose files stayed on the machine it came from.

An index run keeps such a root's documents (with a warning) instead of removing them as deleted files: the run
could not tell "deleted" from "not here". `--prune-missing-roots` drops them on purpose.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ragstead.core.atomic import make_private_folder, write_text_atomically
from ragstead.documents.ids import file_of, fs_path
from ragstead.stores.base import ManifestEntry

IMPORTED_FILE = "imported.json"  # beside the index lock: the roots an import restored (paths only, no text)


@dataclass(frozen=True)
class MissingRoot:
    """A root whose documents an index run keeps: `reason` is "missing" (no such folder) or "imported" (the
    folder is here, none of the files its imported documents came from are)."""

    root: str
    documents: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"root": self.root, "documents": self.documents, "reason": self.reason}


def record_import(index_folder: Path, roots: list[str]) -> None:
    """Remember the roots an import restored, so later runs know their files may live elsewhere."""
    make_private_folder(index_folder)
    write_text_atomically(index_folder / IMPORTED_FILE, json.dumps({"roots": sorted(set(roots))}, indent=1))


def imported_roots(index_folder: Path) -> set[str]:
    try:
        data = json.loads((index_folder / IMPORTED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    roots = data.get("roots") if isinstance(data, dict) else None
    return {r for r in roots if isinstance(r, str)} if isinstance(roots, list) else set()


def missing_roots(project: Path, index_folder: Path, manifest: dict[str, ManifestEntry]) -> list[MissingRoot]:
    """The roots of `manifest` this machine cannot re-read, with how many documents each holds. A present root
    whose files were deleted is not one of them (its documents go, as deleted files do), unless an import
    restored it and not one of its documents' files is here."""
    counts = Counter(entry.root for entry in manifest.values())
    imported = imported_roots(index_folder) if counts else set()
    found = []
    for root, documents in sorted(counts.items()):
        if not (project / root).is_dir():
            found.append(MissingRoot(root, documents, "missing"))
        elif root in imported and not any(fs_path(project, file_of(path)).exists()
                                          for path, entry in manifest.items() if entry.root == root):
            found.append(MissingRoot(root, documents, "imported"))
    return found
