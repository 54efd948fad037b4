"""USER_MEMORY.md and COMPANY_MEMORY.md: where remembered facts live, and how they get indexed.

Both files sit in the user's own folder (`kb/users/<user>/memory/`; in a personal project the owner's is
the folder itself, so theirs are `memory/` there, next to `uploads/` and `ingested/`), so the path rules
index them as private `user_kb` content of that user: a fact one person remembers is never visible to another, even
the COMPANY ones (a person's notes about their team stay theirs until they move them to shared docs).
Appends are serialised by a lock and written whole through a temporary file and a rename, so a crash
leaves either the old file or the new one, never half a line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragstead.core.atomic import PRIVATE_FILE_MODE, make_private_folder, write_text_atomically
from ragstead.errors import IndexLockedError, RagsteadError
from ragstead.filters import USER_SLUG

# The decision rules and the lock are imported by `remember`: `status` reads only the file names (FILES).
if TYPE_CHECKING:
    from ragstead.memory.decision import MemoryDecision

FILES = {"USER": "USER_MEMORY.md", "COMPANY": "COMPANY_MEMORY.md"}
# Headings only: boilerplate prose in the file would be embedded with every fact and dilute it (a
# preamble paragraph cut a fact's cosine to its own question from 0.54 to 0.35, under the `ask` gate).
_HEADERS = {"USER": "# User memory ({user})\n\n", "COMPANY": "# Company memory (noted by {user})\n\n"}
_ENTRY = re.compile(r"^- (.*?)(?: _\(.*\)_)?$", re.M)


@dataclass(frozen=True)
class RememberResult:
    """What `remember` did: the decision, and whether (and where) it was written and indexed."""

    decision: MemoryDecision
    written: bool
    file: str | None
    indexed: bool
    note: str

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision.to_dict(), "written": self.written, "file": self.file,
                "indexed": self.indexed, "note": self.note}


def memory_file(user: str, target: str, folder: str | None = None) -> str:
    """The project-relative path of a user's memory file for `target` (USER or COMPANY), in `folder` (the
    user's own folder, `Settings.user_folder`; "" = the project folder itself; default `kb/users/<user>`)."""
    _check_user(user)
    folder = f"kb/users/{user}" if folder is None else folder.strip("/")
    return f"{folder}/memory/{FILES[target]}" if folder else f"memory/{FILES[target]}"


def _check_user(user: str) -> None:
    if not USER_SLUG.match(user or ""):
        raise RagsteadError(f"memory needs a user slug (letters, digits, '.', '_' or '-'); got {user!r}")


def _key(summary: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", summary.casefold()).strip()


def remembered(path: Path) -> list[str]:
    """The summaries already in a memory file (its `- ` lines, dates stripped)."""
    return _entries(path.read_text(encoding="utf-8")) if path.is_file() else []


def _entries(text: str) -> list[str]:
    return [m.group(1) for m in _ENTRY.finditer(text)]


def remember(
    text: str,
    user: str,
    root: Path,
    *,
    lock_dir: Path,
    index: Callable[[list[str]], object] | None = None,
    dry_run: bool = False,
    wait_seconds: float = 30.0,
    folder: str | None = None,
) -> RememberResult:
    """Decide on `text`; if it is high-signal, append it to the user's memory file under `root` and
    `index` that file (a callable taking project-relative paths).

    With no `index` (or `dry_run`) nothing is indexed; the next `ragstead index` picks the file up.
    `folder` is the user's own folder (see `memory_file`).
    """
    from filelock import FileLock, Timeout

    from ragstead.memory.decision import decide

    _check_user(user)
    decision = decide(text)
    if not decision.should_write:
        return RememberResult(decision, False, None, False, "not written: " + decision.reasons[0])
    rel = memory_file(user, decision.target, folder)
    if dry_run:
        return RememberResult(decision, False, rel, False, "dry run: would be written")
    path = root / rel
    make_private_folder(path.parent)  # the user's memory: readable by the owner only
    make_private_folder(lock_dir)
    try:
        with FileLock(str(lock_dir / "memory.lock"), timeout=wait_seconds, mode=PRIVATE_FILE_MODE):
            old = path.read_text(encoding="utf-8") if path.is_file() else _HEADERS[decision.target].format(user=user)
            if _key(decision.summary) in {_key(s) for s in _entries(old)}:
                return RememberResult(decision, False, rel, False, "already remembered; not written again")
            day = datetime.now(UTC).date().isoformat()
            write_text_atomically(path, old + f"- {decision.summary} _({day}, confidence {decision.confidence})_\n")
    except Timeout as exc:
        raise IndexLockedError("another `remember` is writing this memory; try again") from exc
    if index is None:
        return RememberResult(decision, True, rel, False, "written; run `ragstead index` to make it searchable")
    try:
        index([rel])
    except RagsteadError as exc:  # busy index, kb/ not among the roots, ...: the fact itself is safe on disk
        return RememberResult(decision, True, rel, False, f"written but not indexed ({exc}); run `ragstead index`")
    return RememberResult(decision, True, rel, True, "written and indexed")
