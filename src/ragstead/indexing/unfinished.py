"""An import that did not finish: `ragstead import` writes this marker beside the index lock before its first write
to a store and removes it once the store holds the whole snapshot. A SIGKILL in between (or a failure part-way
through a swap) leaves it, so `status` can say the index holds part of a snapshot instead of calling it ok, and
the next `import` knows what it finds: the same snapshot is finished (the documents already written are kept),
another one replaces the part."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragstead.core.atomic import make_private_folder, write_text_atomically

UNFINISHED_FILE = "import-unfinished.json"


@dataclass(frozen=True)
class UnfinishedImport:
    """Which snapshot (its path and SHA-256 sums) was being written into which store, since when, and how many
    documents the whole of it holds."""

    snapshot: str
    sums: dict[str, str]
    target: str
    documents: int
    started_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mark_unfinished(index_folder: Path, entry: UnfinishedImport) -> None:
    make_private_folder(index_folder)
    write_text_atomically(index_folder / UNFINISHED_FILE, json.dumps(entry.to_dict(), indent=1))


def clear_unfinished(index_folder: Path) -> None:
    (index_folder / UNFINISHED_FILE).unlink(missing_ok=True)


def unfinished_import(index_folder: Path, target: str) -> UnfinishedImport | None:
    """The unfinished import into the store `target` (its StoreSpec description), if one is marked."""
    try:
        raw = json.loads((index_folder / UNFINISHED_FILE).read_text(encoding="utf-8"))
        entry = UnfinishedImport(**raw)
    except (OSError, ValueError, TypeError):
        return None
    return entry if entry.target == target else None
