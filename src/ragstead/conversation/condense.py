"""Follow-up resolution by an LLM: a short condensing prompt (condense.toml) turns the latest message and the
earlier turns into one standalone question, which is then searched, gated and answered like any other.

The condensers are the conversation's own answerer chain built with this prompt, so the consent rules of `ask`
hold: a remote model only with consent (answer/consent.py), and a remote one never reads the answer of a turn
that cited a local-only document (nor any answer a client sent, which cannot be checked): it gets the questions
alone. The earlier turns go in as JSON data, screened for injected instructions like retrieved chunks. A failed
or unusable reply leaves the offline rule (rewrite.py) to do it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from ragstead.answer.base import REFUSAL, AnswerProvider, Context, Locator, ProviderError
from ragstead.answer.screening import screen
from ragstead.conversation.turns import Rewrite, Turn
from ragstead.core import egress
from ragstead.request.model import MAX_QUERY_CHARS

TEMPLATE = Path(__file__).with_name("condense.toml")
TURNS_SENT = 4  # the last turns a condensing prompt reads; earlier ones rarely hold what a pronoun points at
ANSWER_CHARS = 600  # of each earlier answer: its first sentences carry what it named
_PREFIX = re.compile(r"^\s*(?:standalone question|question|rewritten(?: question)?)\s*:\s*", re.I)


def is_llm(provider: AnswerProvider) -> bool:
    """Whether `provider` is a language model (the extractive answerer cannot rewrite a question)."""
    return getattr(provider, "name", "") != "extractive"


def condense(question: str, history: Sequence[Turn], condensers: Sequence[AnswerProvider],
             shareable: Callable[[Turn], bool], notes: list[str]) -> Rewrite | None:
    """`question` rewritten by the first condenser whose reply is one usable question, else None. `shareable(turn)`
    says whether a remote condenser may read the turn's answer; each failed condenser adds a line to `notes`."""
    turns = [t for t in history if t.rewrite.method != "memory"][-TURNS_SENT:]
    if not turns:
        return None
    for provider in (p for p in condensers if is_llm(p)):
        remote = bool(getattr(provider, "remote", False))
        contexts = [_context(i, turn, with_answer=not remote or shareable(turn)) for i, turn in enumerate(turns, 1)]
        sources = [s.source for turn, context in zip(turns, contexts, strict=True) if "\nAnswer:" in context.text
                   for s in turn.sources]
        try:
            with egress.purpose(f"condense a follow-up: {provider.name}", sources):
                reply = provider.answer(question, contexts, None)
        except ProviderError as exc:
            notes.append(f"{provider.name} could not rewrite the follow-up ({exc})")
            continue
        rewritten = cleaned(reply, question)
        if rewritten is None:
            notes.append(f"{provider.name} gave no usable rewrite")
            continue
        changed = rewritten.strip().lower() != question.strip().lower()
        return Rewrite(question, rewritten, "llm" if changed else "none", (),
                       "a condensing prompt rewrote it" if changed else "a condensing prompt kept it as typed",
                       provider.name)
    return None


def _context(n: int, turn: Turn, *, with_answer: bool) -> Context:
    text = f"Question: {turn.question}"
    if with_answer:
        text += f"\nAnswer: {turn.text[:ANSWER_CHARS]}"
    return Context(n, text, f"turn {n}", Locator(None, None, None, f"turn-{n}"), None, screen(text))


def cleaned(reply: str, question: str) -> str | None:
    """The model's reply as one question, or None when it is not one (empty, the refusal, an answer with
    citations, or far longer than any rewrite of `question` needs)."""
    line = next((ln for ln in reply.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line).strip().strip("\"'“”‘’`").strip()
    if not line or REFUSAL.lower() in line.lower() or re.search(r"\[\d+\]", line):
        return None
    if len(line) > min(MAX_QUERY_CHARS, max(400, 4 * len(question))):
        return None
    return line


__all__ = ["TEMPLATE", "cleaned", "condense", "is_llm"]
