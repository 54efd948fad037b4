"""The conversation store: turns kept on the server, per user, in the project's private index folder.

One JSON file a conversation, `<index folder>/conversations/<owner>/<id>.json`, mode 0600 in 0700 folders (the
index folder is never indexed). The retention limit: a conversation untouched for `retention_days` is deleted, an
owner keeps at most `max_conversations` (the least recently used go first) and a conversation its last
MAX_HISTORY_TURNS turns. What a person typed is stored with its secrets masked (the answers' text comes from the
index, masked already), and so is an answer's text, which may repeat the question.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ragstead.conversation.turns import MAX_HISTORY_TURNS, Conversation, Rewrite, Turn, scope_dict, scope_of
from ragstead.core.atomic import make_private_folder, write_text_atomically
from ragstead.documents.secrets import mask_secrets
from ragstead.errors import DocumentNotFoundError, InvalidQueryError
from ragstead.filters import USER_SLUG

FOLDER = "conversations"
ID = re.compile(r"^c_[0-9a-f]{20}\Z")
DEFAULT_RETENTION_DAYS = 30
DEFAULT_MAX_CONVERSATIONS = 200
_VERSION = 1


def new_id() -> str:
    """A conversation id: random, so one cannot be guessed from another."""
    return f"c_{secrets.token_hex(10)}"


class ConversationStore:
    """Conversations kept for their owners under `folder`, within the retention limit."""

    def __init__(self, folder: Path, *, retention_days: int = DEFAULT_RETENTION_DAYS,
                 max_conversations: int = DEFAULT_MAX_CONVERSATIONS) -> None:
        self.folder = folder
        self.retention_seconds = max(0, retention_days) * 86400
        self.max_conversations = max(1, max_conversations)
        self._lock = threading.Lock()  # one server's threads take turns writing an owner's folder

    def load(self, conversation_id: str, owner: str) -> Conversation:
        """`owner`'s conversation; another owner's, an expired or a missing one raises DocumentNotFoundError,
        all alike, so ids cannot be probed."""
        path = self._path(conversation_id, owner)
        if path is None or not path.is_file() or self._expired(path):
            raise DocumentNotFoundError("no such conversation")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DocumentNotFoundError("no such conversation") from exc
        return Conversation(conversation_id, owner, scope_of(data.get("scope") or {}),
                            tuple(Turn.of(t) for t in data.get("turns") or ()), data.get("created_at", ""),
                            data.get("updated_at", ""))

    def save(self, conversation: Conversation) -> None:
        """Write the conversation (secrets masked, the last MAX_HISTORY_TURNS turns), then apply the limit."""
        if conversation.id is None or conversation.owner is None:
            raise ValueError("a stored conversation needs an id and an owner")
        path = self._path(conversation.id, conversation.owner)
        if path is None:
            raise InvalidQueryError("conversation_id is malformed", fields=("conversation_id",))
        data = {"version": _VERSION, "conversation_id": conversation.id, "owner": conversation.owner,
                "scope": scope_dict(conversation.scope), "created_at": conversation.created_at,
                "updated_at": conversation.updated_at,
                "turns": [masked(turn).to_dict() for turn in conversation.turns[-MAX_HISTORY_TURNS:]]}
        with self._lock:
            make_private_folder(path.parent)
            write_text_atomically(path, json.dumps(data, ensure_ascii=False))
            self._prune(path.parent)

    def delete(self, conversation_id: str, owner: str) -> None:
        """Forget `owner`'s conversation; a missing one (or another owner's) raises DocumentNotFoundError."""
        path = self._path(conversation_id, owner)
        with self._lock:
            if path is None or not path.is_file():
                raise DocumentNotFoundError("no such conversation")
            path.unlink()

    def ids(self, owner: str) -> list[str]:
        """`owner`'s conversations within the limit, the most recently used first."""
        folder = self._owner_folder(owner)
        if folder is None or not folder.is_dir():
            return []
        with self._lock:
            self._prune(folder)
            return [p.stem for p in sorted(folder.glob("c_*.json"), key=_mtime, reverse=True)]

    def _owner_folder(self, owner: str) -> Path | None:
        return self.folder / owner if isinstance(owner, str) and USER_SLUG.match(owner) else None

    def _path(self, conversation_id: str, owner: str) -> Path | None:
        folder = self._owner_folder(owner)
        if folder is None or not isinstance(conversation_id, str) or not ID.match(conversation_id):
            return None
        return folder / f"{conversation_id}.json"

    def _expired(self, path: Path) -> bool:
        return bool(self.retention_seconds) and time.time() - _mtime(path) > self.retention_seconds

    def _prune(self, folder: Path) -> None:
        files = sorted(folder.glob("c_*.json"), key=_mtime, reverse=True)
        for i, path in enumerate(files):
            if i >= self.max_conversations or self._expired(path):
                path.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


# Fields that hold ids and paths, never a person's words: a chunk id's 64 hex digits read like a digest to the detector.
_IDS = frozenset(("chunk_id", "doc_id", "source", "url", "link", "file_path", "newer_source"))


def _masked(value: Any, key: str = "") -> Any:
    """`value` (the ask JSON) with every string's secrets masked: the question is repeated in notes and may be
    echoed by an answer."""
    if isinstance(value, str):
        return value if key in _IDS else mask_secrets(value)
    if isinstance(value, dict):
        return {k: _masked(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v, key) for v in value]
    return value


def masked(turn: Turn) -> Turn:
    """The turn as it may be stored: what was typed, and the answer's text, with their secrets masked."""
    rewrite = turn.rewrite
    carried = tuple(mask_secrets(c) for c in rewrite.carried)
    data = _masked(turn.answer.to_dict() if turn.answer is not None else dict(turn.answer_json or {}))
    return replace(turn, question=mask_secrets(turn.question), text=mask_secrets(turn.text), answer=None,
                   answer_json=data or None,
                   rewrite=Rewrite(mask_secrets(rewrite.question), mask_secrets(rewrite.rewritten), rewrite.method,
                                   carried, rewrite.reason, rewrite.model))


__all__ = ["DEFAULT_MAX_CONVERSATIONS", "DEFAULT_RETENTION_DAYS", "FOLDER", "ConversationStore", "masked", "new_id"]
