"""`kb.chat`: a question asked as the next turn of a conversation.

A follow-up is rewritten from the earlier turns before anything is searched (an LLM's condensing prompt when the
conversation's answerer chain holds one, else the offline rule of rewrite.py), and the rewritten question is the
one `ask` retrieves, gates and answers: the answer's `question` is it. The earlier turns go nowhere else: the
answerer reads the rewritten question only, never the history.

A conversation is one user's, in one scope: its first question fixes the scope, and a later turn in another is
refused rather than answered from documents the conversation never saw. Kept conversations (an id) live in the
project's conversation store (history.py). A "remember that ..." turn is not searched: it goes through the
selective memory rule, and is written only where the conversation may write memory; no other turn, and nothing of
the history, is ever written to memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ragstead.answer.consent import LocalOnly
from ragstead.conversation.condense import TEMPLATE, condense, is_llm
from ragstead.conversation.history import FOLDER, ConversationStore, new_id
from ragstead.conversation.rewrite import rewrite
from ragstead.conversation.turns import Conversation, Rewrite, Turn, answer_turn, history_turns, scope_dict
from ragstead.core import egress
from ragstead.errors import InvalidQueryError
from ragstead.request.model import MAX_QUERY_CHARS, AskRequest, Scope
from ragstead.services.runtime import Runtime

if TYPE_CHECKING:
    from ragstead.answer.ask import Answer
    from ragstead.answer.base import AnswerProvider
    from ragstead.memory.files import RememberResult

# "remember that ...", "please remember ...", "don't forget that ...": a request to remember, not a question.
REMEMBER = re.compile(r"^\s*(?:please\s+)?(?:remember|don't forget|do not forget|keep in mind)\b(?!\s+(?:when|what|"
                      r"who|where|how|which|if)\b)", re.I)


class Conversations:
    """The conversation service under the KnowledgeBase: `ask`, `remember` and `providers` are the facade's."""

    def __init__(self, runtime: Runtime, ask: Callable[..., Answer], remember: Callable[..., RememberResult],
                 providers: Callable[..., list[AnswerProvider]]) -> None:
        self.runtime, self._ask, self._remember, self._providers = runtime, ask, remember, providers

    @property
    def store(self) -> ConversationStore:
        """Where kept conversations live: `conversations/` beside the index file, private."""
        settings = self.runtime.settings
        return ConversationStore(settings.db_file.parent / FOLDER, retention_days=settings.chat_retention_days)

    def chat(self, question: str | AskRequest, *, conversation: Conversation | str | None = None,
             history: Sequence[Turn | Mapping[str, Any]] | None = None, owner: str | None = None, keep: bool = False,
             answerers: Sequence[AnswerProvider] | None = None, condensers: Sequence[AnswerProvider] | None = None,
             on_text: Callable[[str], None] | None = None, **fields: Any) -> Conversation:
        """Ask `question` (an `AskRequest`, or its text with the request's fields as keywords, as `ask` takes it)
        as the next turn and return the conversation with that turn last (`.last`; `.answer` is its `Answer`).

        Continue a conversation by passing the one returned before (`conversation=`), a kept one's id (with its
        `owner`), or a client's own `history` (turns as `Turn.to_dict()` gives them, or `{"question", "answer"}`);
        none of them starts a new one, kept in the conversation store when `keep` (its id is the result's `id`).
        The scope is the first question's: a later turn may leave it out, and one in another scope raises
        InvalidQueryError. `answerers` is a chain built once by `providers()` (a server's); `condensers` the same
        chain built with the condensing prompt (`providers(template=...)`; None: built here). `remember=True` lets
        a "remember that ..." turn write the fact to the user's memory (the selective rule decides); without it
        the turn says what would have been written.
        """
        if conversation is not None and history is not None:
            raise InvalidQueryError("give a conversation or a history, not both", fields=("history",))
        # `remember` is checked against the scope once it is known: a later turn may leave its user out.
        remember = bool(fields.pop("remember", False)) if isinstance(question, str) else question.remember
        request = AskRequest.of(question if isinstance(question, str) else replace(question, remember=False), **fields)
        prior = self._prior(conversation, history, owner, keep, request)
        request = replace(request, scope=prior.scope, remember=remember)
        now = datetime.now(UTC).isoformat(timespec="seconds")
        if REMEMBER.match(request.query) and not request.query.rstrip().endswith("?"):
            turn = self._memory_turn(request, prior.owner, now)
        else:
            found = self._rewrite(request, prior.turns, condensers)
            answer = self._ask(replace(request, query=found.rewritten, remember=False), answerers=answerers,
                               on_text=on_text)
            turn = answer_turn(request.query, found, answer, now)
        result = replace(prior, turns=(*prior.turns, turn), created_at=prior.created_at or now, updated_at=now)
        if result.id is not None:
            self.store.save(result)
        return result

    def conversation(self, conversation_id: str, *, owner: str) -> Conversation:
        """A kept conversation of `owner`; another's, an expired or a missing one raises DocumentNotFoundError."""
        return self.store.load(conversation_id, owner)

    def delete_conversation(self, conversation_id: str, *, owner: str) -> None:
        """Forget a kept conversation of `owner` (DocumentNotFoundError for another's or a missing one)."""
        self.store.delete(conversation_id, owner)

    # -- the parts of a turn ----------------------------------------------------------------------------------

    def _prior(self, conversation: Conversation | str | None, history: Sequence[Turn | Mapping[str, Any]] | None,
               owner: str | None, keep: bool, request: AskRequest) -> Conversation:
        """The conversation this turn continues, in the request's scope (a request that names none takes it)."""
        if isinstance(conversation, str):
            prior = self.store.load(conversation, owner or self._owner(request))
        elif isinstance(conversation, Conversation):
            if owner is not None and conversation.owner not in (None, owner):
                raise InvalidQueryError("this conversation is another user's", fields=("conversation",))
            prior = conversation
        elif history is not None:
            return Conversation(None, owner, request.scope, history_turns(history))
        else:
            kept_by = (owner or self._owner(request)) if keep else owner
            return Conversation(new_id() if keep else None, kept_by, request.scope)
        if request.scope not in (Scope(), prior.scope):
            raise InvalidQueryError(f"scope: a conversation keeps the scope of its first question "
                                    f"({_describe(prior.scope)}); start a new conversation for another",
                                    fields=("scope",))
        return prior

    def _owner(self, request: AskRequest) -> str:
        return request.scope.user or self.runtime.settings.owner_slug

    def _rewrite(self, request: AskRequest, turns: Sequence[Turn],
                 condensers: Sequence[AnswerProvider] | None) -> Rewrite:
        """The question to search: the LLM's condensed one when the chain has an LLM, else the offline rule's."""
        offline = rewrite(request.query, turns)
        if not turns or request.extractive:
            return _fitting(offline, request)
        chain = condensers if condensers is not None else self._providers(template=str(TEMPLATE), llm=request.llm)
        notes: list[str] = []
        if any(is_llm(p) for p in chain):
            with egress.recording(self.runtime.egress_file):  # privacy: what a remote model was sent is logged
                condensed = condense(request.query, turns, chain, self._shareable, notes)
            if condensed is not None:
                return _fitting(condensed, request)
        if notes:
            offline = replace(offline, reason=f"{offline.reason} ({'; '.join(notes)})")
        return _fitting(offline, request)

    def _shareable(self, turn: Turn) -> bool:
        """Whether a remote model may read `turn`'s answer: a turn answered in this conversation whose cited
        documents are none of them local-only. A client's turn cannot be checked, so it is never shared."""
        if turn.answer is None and turn.answer_json is None:
            return False
        local_only = LocalOnly(self.runtime.settings.local_only)
        for source in turn.sources:
            document = self.runtime.document(path=source.source)
            if document is None or local_only(source.source, document.get("tags") or ()):
                return False
        return True

    def _memory_turn(self, request: AskRequest, owner: str | None, now: str) -> Turn:
        """A "remember that ..." turn: the selective memory rule on what was typed, written only when allowed."""
        user = request.scope.user or owner  # None in a personal project: remember writes its owner's memory
        found = Rewrite(request.query, request.query, "memory", (), "a request to remember")
        if not user and not self.runtime.settings.personal:
            return Turn(request.query, found, "Not remembered: memory belongs to one person, and this conversation "
                        "has no user.", True, kind="memory", asked_at=now)
        result = self._remember(request.query, user=user, dry_run=not request.remember)
        decision = result.decision
        if result.written:
            text = f"Remembered in {result.file}: {decision.summary}"
        elif decision.should_write and not request.remember:
            text = (f"Not remembered: this conversation may not write to memory. It would go to {decision.target} "
                    f"memory: {decision.summary}")
        else:
            text = f"Not remembered: {result.note}"
        return Turn(request.query, found, text, not result.written, kind="memory", memory_write=result.to_dict(),
                    asked_at=now)


def _fitting(found: Rewrite, request: AskRequest) -> Rewrite:
    """The rewrite, unless carrying made it longer than a question may be: then the question as typed."""
    if len(found.rewritten) <= MAX_QUERY_CHARS:
        return found
    return Rewrite(request.query, request.query, "none", (), "too long to carry the conversation's subject into")


def _describe(scope: Scope) -> str:
    parts = ["public documents" if scope.public_only else f"{scope.user}'s documents" if scope.user else
             "private documents"]
    parts += [f"{name} {value}" for name, value in scope_dict(scope).items()
              if value and name not in ("user", "public_only")]
    return ", ".join(str(p) for p in parts)


__all__ = ["REMEMBER", "Conversations"]
