"""The offline, deterministic answerer: the sentences of the retrieved chunks most likely to hold the answer,
each cited.

Every unit (sentence, list item, table row: answer/evidence.py) is scored by the gate model's sentence scorer:
its cosine to the question (`ask` embeds the sentences of the top chunks), the share of the question's words it
holds weighted by rarity (a word only in its headings counts half), whether it holds what the question asks for
(a date for "when", a number for "how much", a name for "who"), and its chunk's rank. The best unit leads; a
header-like line ("Attendees: ...") or a note's title never leads unless it answers. Up to two more units follow,
best first, when they score at least half as well. Of two plausible units that state the same thing with
different values from documents of different dates (answer/supersession.py), the newer leads and the older closes
the answer (`ask` labels it superseded).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ragstead.answer.base import Context
from ragstead.answer.evidence import (
    SentenceScorer,
    Unit,
    line_structured,
    months_named,
    split_units,
    unit_features,
)
from ragstead.answer.gate import load_model
from ragstead.answer.screening import screen
from ragstead.answer.supersession import Statement, disagreements, is_revision

MAX_SENTENCES = 3
SUPPORT_RATIO = 0.5  # a further sentence joins the answer when it scores at least this share of the lead's
# ... and holds the kind of thing asked for, or at least this share of the question's (rarity-weighted) words;
# 0 turns the bar off. A list question ("What are ...", "Which ... are", "List ...") may list.
PADDING_BAR = 0.5
SUPERSEDE_CANDIDATES = 8  # the best units read for a disagreement with the lead (each pair is compared)
# A unit that says its value changed ("switching from MySQL to PostgreSQL") is read at this share of the lead's
# score: it scores low on a question worded like the old decision (docs/design.md, "The newer note wins").
REVISION_RATIO = 0.25
MAX_SUPERSEDED = 2  # older statements quoted after the answer, newest first
_TOTAL = re.compile(r"\b(total|in sum|overall|altogether|grand total)\b", re.I)
_LIST_QUESTION = re.compile(r"^(what|which) (are|were)\b|^which \w+s (are|were|do|did|should)\b|^(list|name)\b"
                            r"|\b(all|every|each)\b", re.I)


class ExtractiveAnswerer:
    """`AnswerProvider` that never fails and never invents: it quotes retrieved sentences."""

    name = "extractive"

    def __init__(self, max_sentences: int = MAX_SENTENCES, scorer: SentenceScorer | None = None) -> None:
        self.max_sentences = max_sentences
        self._scorer = scorer

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        items: list[tuple[int, Unit, float]] = []  # (context rank, unit, cosine to the question)
        numbers: list[int] = []
        for rank, context in enumerate(contexts):
            units = split_units(context.text, line_structured(context.source))
            scored = len(context.unit_similarities) == len(units)
            for position, unit in enumerate(units):
                if screen(unit.text):  # never quote an instruction-like sentence
                    continue
                # Without sentence vectors (a chunk `ask` did not score), the chunk's own cosine stands in.
                similarity = context.unit_similarities[position] if scored else (context.similarity or 0.0)
                items.append((rank, unit, similarity))
                numbers.append(context.n)
        if not items:
            return ""
        scores = (self._scorer or load_model().sentence).score(question, items, headings=True)
        order = sorted(range(len(items)), key=lambda j: (-scores[j], items[j][0], items[j][1].position))
        lead, older = _newer_lead(question, items, [contexts[rank] for rank, _, _ in items], scores, order)
        chosen = [lead]
        features = [row for row, _ in unit_features(question, items, headings=True)] if PADDING_BAR else []
        listing = bool(_LIST_QUESTION.search(question))
        # A total answers a question for the total: the line items under it are padding.
        total = bool(_TOTAL.search(question)) and bool(_TOTAL.search(items[lead][1].text))
        asked_months = months_named(question)
        for j in order[1:]:
            if len(chosen) == self.max_sentences or scores[j] < SUPPORT_RATIO * scores[lead]:
                break
            # No padding: a further unit carries what was asked, or as much of the question as the bar.
            if features and not listing and not (features[j][2] or features[j][1] >= PADDING_BAR):
                continue
            if total and not _TOTAL.search(items[j][1].text):
                continue
            if asked_months and months_named(items[j][1].text).isdisjoint(asked_months) and months_named(
                    items[j][1].text):
                continue  # another month's row or entry: the question names its month ("in February 2025")
            if j in older:
                continue  # quoted last, as superseded
            if items[j][1].text not in {items[c][1].text for c in chosen}:  # overlapping chunks repeat sentences
                chosen.append(j)
        chosen += [j for j in older[:MAX_SUPERSEDED] if items[j][1].text not in {items[c][1].text for c in chosen}]
        text = " ".join(f"{items[j][1].text} [{numbers[j]}]" for j in chosen)
        if on_text:
            on_text(text)
        return text


def _newer_lead(question: str, items: list[tuple[int, Unit, float]], owners: list[Context], scores: list[float],
                order: list[int]) -> tuple[int, list[int]]:
    """The unit that leads and the units it supersedes (newest first). The best unit leads unless a plausible
    one (at least SUPPORT_RATIO of its score, among the best SUPERSEDE_CANDIDATES) from a newer document states
    the same thing with another value: then the newest such unit leads."""
    best = order[0]
    plausible = [j for j in order[:SUPERSEDE_CANDIDATES] if scores[j] > 0 and scores[j] >= (
        REVISION_RATIO if is_revision(items[j][1].text) else SUPPORT_RATIO) * scores[best]]
    statements = [Statement(j, items[j][1].text, owners[j].source, owners[j].date, items[j][1].context)
                  for j in plausible]
    found = disagreements(question, statements) if len(statements) > 1 else []
    newer = [d.newer for d in found if d.older.key == best]
    lead = max(newer, key=lambda s: (s.date or "", scores[s.key])).key if newer else best
    older = sorted((d.older for d in found if d.newer.key == lead), key=lambda s: (s.date or "", scores[s.key]),
                   reverse=True)
    return lead, list(dict.fromkeys(s.key for s in older))
