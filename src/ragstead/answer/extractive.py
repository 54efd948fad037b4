"""The offline, deterministic answerer: the sentences of the retrieved chunks most likely to hold the answer,
each cited.

Every unit (sentence, list item, table row: answer/evidence.py) is scored by the reader (answer/reader.py, a
model trained on public question-answering data): its cosine to the question read after its headings (`ask`
embeds the units of the chunks it hands over), the share of the question's words it and its headings hold weighted
by rarity, whether it holds what the question asks for (a date for "when", a number for "how much", a name for
"who"), and its chunk's rank. The best unit leads; a header-like line ("Attendees: ...") or a note's title never
leads unless it answers. Up to two more units follow,
best first, when they score at least half as well. Of two plausible units that state the same thing with
different values from documents of different dates (answer/supersession.py), the newer leads and the older closes
the answer (`ask` labels it superseded).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ragstead.answer.base import Context
from ragstead.answer.evidence import (
    Unit,
    line_structured,
    months_named,
    question_parts,
    split_units,
)
from ragstead.answer.reader import Item, Reader, holds_asked, load_reader, question_share
from ragstead.answer.screening import screen
from ragstead.answer.supersession import Statement, disagreements, is_revision

MAX_SENTENCES = 3
# A further sentence joins the answer when the reader scores it at least this share of the best unit: chosen on the
# notes and notes-reader fit halves for the listwise reader, whose scores lie closer together than the pointwise
# one's: at 0.45 they hold the fact as often as 0.3 did, with fewer sentences than before the listwise reader
# (docs/benchmarks.md, "The reader, trained listwise").
SUPPORT_SHARE = 0.45
# ... and holds the kind of thing asked for, or at least this share of the question's (rarity-weighted) words;
# 0 turns the bar off. A list question ("What are ...", "Which ... are", "List ...") may list.
PADDING_BAR = 0.5
SUPERSEDE_CANDIDATES = 8  # the best units read for a disagreement with the lead (each pair is compared)
# A unit that says its value changed ("switching from MySQL to PostgreSQL") is plausible down to this share of the
# lead's score: it scores low on a question worded like the old decision (docs/design.md, "The newer note wins"),
# and the reader's scores fall off more steeply than the rules' did (0.25 then; the test set's revisions read at
# 0.07-0.1 of the lead).
REVISION_RATIO = 0.05
MAX_SUPERSEDED = 2  # older statements quoted after the answer, newest first
_TOTAL = re.compile(r"\b(total|in sum|overall|altogether|grand total)\b", re.I)
# A question for the sum of a bill: "what did it cost in the end, everything included?" (hand-written, English).
_ASKS_TOTAL = re.compile(r"\b(total|in sum|overall|altogether|in the end|all in|(everything|all) included|in all)\b",
                         re.I)
_LIST_QUESTION = re.compile(r"^(what|which) (are|were)\b|^which \w+s (are|were|do|did|should)\b|^(list|name)\b"
                            r"|\b(all|every|each)\b", re.I)


class ExtractiveAnswerer:
    """`AnswerProvider` that never fails and never invents: it quotes retrieved sentences."""

    name = "extractive"

    def __init__(self, max_sentences: int = MAX_SENTENCES, reader: Reader | None = None) -> None:
        self.max_sentences = max_sentences
        self._reader = reader

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        items, numbers = _units(contexts)
        if not items:
            return ""
        reader = self._reader or load_reader()
        read = _read(contexts, items)
        parts = question_parts(question)
        if len(parts) > 1:  # each part gets its own best unit ("when is the class, and what does it cost?")
            chosen = _part_leads(parts, reader, read)
        else:
            scores, rows = reader.read(question, read)
            chosen = self._chosen(question, items, [contexts[rank] for rank, _, _ in items],
                                  [float(x) for x in scores], rows)
        text = " ".join(f"{items[j][1].text} [{numbers[j]}]" for j in chosen)
        if on_text:
            on_text(text)
        return text

    def _chosen(self, question: str, items: list[tuple[int, Unit, float]], owners: list[Context],
                scores: list[float], rows: np.ndarray) -> list[int]:
        """The units the answer quotes, in order: the lead, up to two that support it, then what it supersedes."""
        order = sorted(range(len(items)), key=lambda j: (-scores[j], items[j][0], items[j][1].position))
        if _ASKS_TOTAL.search(question):  # the total leads over the line items it adds up, when it is plausible
            plausible = SUPPORT_SHARE * scores[order[0]]
            order.sort(key=lambda j: not (_TOTAL.search(items[j][1].text) and scores[j] >= plausible))
        lead, older = _newer_lead(question, items, owners, scores, order)
        chosen = [lead]
        padding = _padding(question, items, lead, rows)
        # Support is measured against the first unit in order (the best scored, or the total that leads), not only
        # the lead: a newer revision that took the lead may score far below the statement it revises, and a unit
        # that weak is no support.
        bar = SUPPORT_SHARE * max(scores[lead], scores[order[0]])
        for j in order[1:]:
            if len(chosen) == self.max_sentences or scores[j] < bar:
                break
            if j in older or padding(j):
                continue  # an older statement is quoted last, as superseded
            if items[j][1].text not in {items[c][1].text for c in chosen}:  # overlapping chunks repeat sentences
                chosen.append(j)
        return chosen + [j for j in older[:MAX_SUPERSEDED] if items[j][1].text not in {items[c][1].text
                                                                                       for c in chosen}]


def reader_order(question: str, contexts: list[Context], reader: Reader | None = None) -> list[Context]:
    """`contexts` with the chunks holding the reader's best units first (best unit score, then the search's order),
    renumbered: what an LLM answerer is handed, so the units the extractive answerer would quote lead its prompt."""
    if len(contexts) < 2:
        return contexts
    items, _ = _units(contexts)
    if not items:
        return contexts
    read = _read(contexts, items)
    scores = (reader or load_reader()).unit_scores(question, read)
    best = [0.0] * len(contexts)
    for item, score in zip(read, scores, strict=True):
        best[item.rank] = max(best[item.rank], float(score))
    order = sorted(range(len(contexts)), key=lambda i: (-best[i], i))
    return [replace(contexts[i], n=n) for n, i in enumerate(order, start=1)]


def _read(contexts: list[Context], items: list[tuple[int, Unit, float]]) -> list[Item]:
    """`_units`' items as the reader reads them, each with its chunk's cosine (0 for a tool's result)."""
    return [Item(rank, unit, similarity, contexts[rank].similarity or 0.0) for rank, unit, similarity in items]


def _units(contexts: list[Context]) -> tuple[list[tuple[int, Unit, float]], list[int]]:
    """(context rank, unit, cosine to the question) for every quotable unit, and each one's citation number."""
    items: list[tuple[int, Unit, float]] = []
    numbers: list[int] = []
    for rank, context in enumerate(contexts):
        units = split_units(context.text, line_structured(context.source))
        scored = len(context.unit_similarities) == len(units)
        for position, unit in enumerate(units):
            if screen(unit.text):  # never quote an instruction-like sentence
                continue
            # Without sentence vectors (a chunk `ask` did not score), the chunk's own cosine stands in.
            items.append((rank, unit, context.unit_similarities[position] if scored else (context.similarity or 0.0)))
            numbers.append(context.n)
    return items, numbers


def _padding(question: str, items: list[tuple[int, Unit, float]], lead: int,
             rows: np.ndarray) -> Callable[[int], bool]:
    """Whether a further unit would be padding: it carries neither what was asked nor as much of the question as
    PADDING_BAR (a list question may list; read from the reader's rows), a line item under a total that answers,
    or another month's entry when the question names its month ("in February 2025")."""
    share, holds = question_share(rows), holds_asked(rows)
    bar = bool(PADDING_BAR) and not _LIST_QUESTION.search(question)
    total = bool(_ASKS_TOTAL.search(question)) and bool(_TOTAL.search(items[lead][1].text))
    asked_months = months_named(question)

    def padding(j: int) -> bool:
        text = items[j][1].text
        months = months_named(text) if asked_months else set()
        return bool((bar and not (holds[j] or share[j] >= PADDING_BAR))
                    or (total and not _TOTAL.search(text)) or (months and months.isdisjoint(asked_months)))

    return padding


def _part_leads(parts: list[str], reader: Reader, read: list[Item]) -> list[int]:
    """One unit per part of a two-part question, in the question's order. The parts are about one thing, so they
    are answered from the chunk whose best units score highest over all parts, each part from there when that unit
    scores at least SUPPORT_SHARE of its best anywhere ("which evening is the pottery course, and what's the fee?"
    takes the pottery note's fee, not the swimming course's price); one unit may answer both."""
    scores = [reader.unit_scores(part, read) for part in parts]
    chunks = sorted({item.rank for item in read})
    home = max(chunks, key=lambda c: sum(max(float(s[j]) for j, item in enumerate(read) if item.rank == c)
                                         for s in scores))
    leads = []
    for s in scores:
        best = int(np.argmax(s))
        local = max((j for j, item in enumerate(read) if item.rank == home), key=lambda j: float(s[j]))
        leads.append(local if s[local] >= SUPPORT_SHARE * s[best] else best)
    return list(dict.fromkeys(leads))


def _newer_lead(question: str, items: list[tuple[int, Unit, float]], owners: list[Context], scores: list[float],
                order: list[int]) -> tuple[int, list[int]]:
    """The unit that leads and the units it supersedes (newest first). The best unit leads unless a plausible
    one (at least SUPPORT_SHARE of its score, among the best SUPERSEDE_CANDIDATES) from a newer document states
    the same thing with another value: then the newest such unit leads."""
    best = order[0]
    plausible = [j for j in order[:SUPERSEDE_CANDIDATES] if scores[j] > 0 and scores[j] >= (
        REVISION_RATIO if is_revision(items[j][1].text) else SUPPORT_SHARE) * scores[best]]
    statements = [Statement(j, items[j][1].text, owners[j].source, owners[j].date, items[j][1].context)
                  for j in plausible]
    found = disagreements(question, statements) if len(statements) > 1 else []
    newer = [d.newer for d in found if d.older.key == best]
    lead = max(newer, key=lambda s: (s.date or "", scores[s.key])).key if newer else best
    older = sorted((d.older for d in found if d.newer.key == lead), key=lambda s: (s.date or "", scores[s.key]),
                   reverse=True)
    return lead, list(dict.fromkeys(s.key for s in older))
