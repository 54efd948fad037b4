"""What a conversation is made of: its turns, how each question was rewritten, and whose scope it lives in.

A `Turn` keeps what the next question may lean on (the question as typed, what was searched instead, the answer's
text and the documents it cited) and, for a turn asked in this process, the whole `Answer`. `to_dict()` is the
JSON every door prints (`ragstead chat --json`, `POST /v1/chat`); `Turn.of` reads it back, from the server's store
or from a client that sends its own history (then nothing in it is trusted beyond its text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ragstead.errors import InvalidQueryError
from ragstead.records import Record
from ragstead.request.model import MAX_QUERY_CHARS, Scope

if TYPE_CHECKING:
    from ragstead.answer.ask import Answer

MAX_HISTORY_TURNS = 50  # turns a client may send as history, and turns a stored conversation keeps
MAX_ANSWER_CHARS = 20_000  # of a history turn's answer text; the rewriter reads its first sentence only
MAX_SOURCES = 20
METHODS = ("none", "carried", "llm", "memory")


@dataclass(frozen=True)
class Rewrite(Record):
    """How a question became the one that was searched and judged. `method`: `none` (asked as typed: the first
    question, or one that names its own subject), `carried` (the offline rule carried the conversation's subject
    into it: `carried` lists what), `llm` (a condensing prompt to `model` rewrote it), `memory` (a "remember
    that ..." turn, which is not searched). `reason` says why, for people."""

    question: str
    rewritten: str
    method: str = "none"
    carried: tuple[str, ...] = ()
    reason: str = ""
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"method": self.method, "carried": list(self.carried), "reason": self.reason}
        if self.model:
            data["model"] = self.model
        return data


@dataclass(frozen=True)
class TurnSource(Record):
    """A document a turn's answer cited: its citation number, path (or URL) and title."""

    n: int
    source: str
    title: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "source": self.source, "title": self.title}


@dataclass(frozen=True)
class Turn(Record):
    """One question and its answer. `answer` is the whole `Answer` of a turn asked in this process (None for a
    turn read back from a store or a client); `answer_json` is what a read-back turn carried of it."""

    question: str
    rewrite: Rewrite
    text: str
    refused: bool
    sources: tuple[TurnSource, ...] = ()
    kind: str = "answer"  # answer, list, count (ask's kinds) or memory
    memory_write: Mapping[str, Any] | None = None
    asked_at: str = ""
    answer: Answer | None = field(default=None, compare=False, repr=False)
    answer_json: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def rewritten(self) -> str:
        """The question that was searched and judged."""
        return self.rewrite.rewritten

    def to_dict(self) -> dict[str, Any]:
        answer = self.answer.to_dict() if self.answer is not None else (
            dict(self.answer_json) if self.answer_json is not None else
            {"answer": self.text, "refused": self.refused, "kind": self.kind})
        data: dict[str, Any] = {"question": self.question, "rewritten": self.rewritten,
                                "rewrite": self.rewrite.to_dict(), "answer": answer, "asked_at": self.asked_at}
        if self.memory_write is not None:
            data["memory_write"] = dict(self.memory_write)
        return data

    @classmethod
    def of(cls, data: Turn | Mapping[str, Any]) -> Turn:
        """A turn from its JSON (`to_dict()`'s shape), or from the short form a client may send as history:
        `{"question": ..., "answer": "the answer's text"}`. Raises InvalidQueryError naming what is malformed."""
        if isinstance(data, Turn):
            return data
        if not isinstance(data, Mapping):
            raise InvalidQueryError(f"history: a turn must be an object, got {type(data).__name__}",
                                    fields=("history",))
        question = _text(data.get("question"), "question", MAX_QUERY_CHARS)
        raw = data.get("answer")
        answer: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {"answer": raw or ""}
        text = _text(answer.get("answer") or "", "answer", MAX_ANSWER_CHARS, allow_empty=True)
        rewrite: Mapping[str, Any] = data["rewrite"] if isinstance(data.get("rewrite"), Mapping) else {}
        rewritten = data.get("rewritten") if isinstance(data.get("rewritten"), str) else question
        method = rewrite["method"] if rewrite.get("method") in METHODS else "none"
        listed = rewrite.get("carried")
        carried = tuple(c[:200] for c in listed if isinstance(c, str))[:10] if isinstance(listed, list) else ()
        return cls(question, Rewrite(question, _text(rewritten, "rewritten", 2 * MAX_QUERY_CHARS), method, carried,
                                     str(rewrite.get("reason") or "")[:300], rewrite.get("model") or None),
                   text, bool(answer.get("refused", False)), _sources(answer.get("citations")),
                   str(answer.get("kind") or "answer")[:20], _mapping(data.get("memory_write")),
                   str(data.get("asked_at") or "")[:40],
                   answer_json=answer if isinstance(raw, Mapping) else None)


def _text(value: Any, name: str, limit: int, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value.strip() and not allow_empty):
        raise InvalidQueryError(f"history: a turn's {name} must be text", fields=("history",))
    if len(value) > limit:
        raise InvalidQueryError(f"history: a turn's {name} is {len(value)} characters; the limit is {limit}",
                                fields=("history",))
    return value


def _sources(citations: Any) -> tuple[TurnSource, ...]:
    """What a turn's citations name (a path and a title each): plain text from the turn, never looked up."""
    found = []
    for i, citation in enumerate(citations if isinstance(citations, list) else [], 1):
        if not isinstance(citation, Mapping) or not isinstance(citation.get("source"), str):
            continue
        locator: Mapping[str, Any] = citation["locator"] if isinstance(citation.get("locator"), Mapping) else {}
        title = citation.get("title", locator.get("title"))
        found.append(TurnSource(citation["n"] if isinstance(citation.get("n"), int) else i,
                                citation["source"][:500], title[:300] if isinstance(title, str) else None))
    return tuple(found[:MAX_SOURCES])


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def answer_turn(question: str, rewrite: Rewrite, answer: Answer, asked_at: str,
                memory_write: Mapping[str, Any] | None = None) -> Turn:
    """The turn of an answered question: what the next question may lean on, and the whole answer."""
    sources = tuple(TurnSource(c.n, c.source, c.locator.get("title") or c.locator.get("heading"))
                    for c in answer.citations)
    return Turn(question, rewrite, answer.text, answer.refused, sources, answer.kind, memory_write, asked_at,
                answer=answer)


@dataclass(frozen=True)
class Conversation(Record):
    """A thread of turns, one user's (`owner`; None: the library's caller, unnamed) in one `scope`. `id` is set
    when the turns are kept in the project's conversation store (None: held by the caller alone)."""

    id: str | None
    owner: str | None
    scope: Scope
    turns: tuple[Turn, ...] = ()
    created_at: str = ""
    updated_at: str = ""

    @property
    def last(self) -> Turn | None:
        """The newest turn (None before the first question)."""
        return self.turns[-1] if self.turns else None

    @property
    def answer(self) -> Answer | None:
        """The newest turn's whole answer, when it was asked in this process."""
        return self.last.answer if self.last is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {"conversation_id": self.id, "owner": self.owner, "scope": scope_dict(self.scope),
                "created_at": self.created_at, "updated_at": self.updated_at,
                "turns": [turn.to_dict() for turn in self.turns]}


def scope_dict(scope: Scope) -> dict[str, Any]:
    """A scope as JSON (its fields; tuples as lists)."""
    return {f.name: list(v) if isinstance(v := getattr(scope, f.name), tuple) else v for f in fields(scope)}


def scope_of(data: Mapping[str, Any]) -> Scope:
    """The scope `scope_dict` wrote."""
    names = {f.name for f in fields(Scope)}
    values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
    return Scope(**values)


def history_turns(history: Sequence[Turn | Mapping[str, Any]]) -> tuple[Turn, ...]:
    """A client's history as turns, at most MAX_HISTORY_TURNS (the newest are the ones a rewrite reads)."""
    if isinstance(history, str | bytes | Mapping) or not isinstance(history, Sequence):
        raise InvalidQueryError("history must be a list of turns", fields=("history",))
    if len(history) > MAX_HISTORY_TURNS:
        raise InvalidQueryError(f"history holds {len(history)} turns; the limit is {MAX_HISTORY_TURNS}",
                                fields=("history",))
    return tuple(Turn.of(turn) for turn in history)


__all__ = ["MAX_HISTORY_TURNS", "Conversation", "Rewrite", "Turn", "TurnSource", "answer_turn", "history_turns",
           "scope_dict", "scope_of"]
