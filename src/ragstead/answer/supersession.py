"""The newer note wins: two statements of the same thing that give different values, from documents of different
dates ("The team meets on Mondays." in a 2024 note, "The team meets on Wednesdays." in a 2025 one). The newer
leads the answer; the older is cited as superseded.

A document's date is the index's `created_at`: its front matter `date`, else a date in its path
(`2025-05-12-standup.md`), else its modification time (indexing/build.py, documents/metadata.py), compared by day.

Detection is deliberately conservative (a false alarm hides a true answer behind a "superseded" label); two
statements disagree only when all of these hold:
- the question asks for a value (a date or weekday, an amount, a count, a place, a name) in the present tense: a
  question about a past event ("when did I visit the dentist?", "what was the original target?") has several
  true answers, one per event;
- both come from different documents with known, different days;
- both hold most of the question's subject words (SUBJECT_SHARE, headings above them included) and their own
  words, values aside, overlap (SAME_WORDS): they say the same thing;
- nothing names two different subjects: not two different words right before the first subject word ("platform
  team" and "design team", in the sentence or in its headings), not two different sets of names;
- each holds a value of the asked kind the question does not already hold, and the values differ: neither set of
  values holds the other ("Mondays" and "Mondays at 10:00" agree).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from ragstead.answer.base import Context
from ragstead.answer.evidence import (
    MONTH_NAME,
    answer_kind,
    held_stems,
    kind_pattern,
    line_structured,
    question_stems,
    split_units,
    stem_sequence,
    stems_of,
)
from ragstead.answer.quotes import Quote, find

SUBJECT_SHARE = 0.75  # the share of the question's content words each statement must hold (with its headings)
SAME_WORDS = 0.5  # Jaccard of the two statements' content words, their values left out
# A question about the past asks about an event, not a state that a newer note can replace; one that asks for
# the first or an earlier value wants the older note whatever the newer says.
_EARLIER = re.compile(r"\b(used to|original|originally|first|last|ago|previous|previously|before|history|ever)\b",
                      re.I)
# A plain past ("which database did we choose?") asks about a decision that a newer note may explicitly revise.
_PAST = re.compile(r"\b(did|was|were|had)\b", re.I)
_MONTHS = f"({MONTH_NAME})"
# A sentence that says its value changed: an explicit revision outranks word overlap (docs/design.md, "The newer
# note wins"; rule drawn from a newcomer's notes, a fit set).
_REVISION = re.compile(
    r"\b(moved|moves|moving|changed|changes|changing|postponed|pushed back|brought forward|switch(es|ed|ing)?|"
    r"rais(ed|es)|increased|decreased|reduced|updated?) (it |the \w+ )?(to|from)\b"
    r"|\b(replaces|replaced|replacing|instead of|no longer|is now|are now|now (is|are)|new \w+( \w+)? (is|are))\b"
    r"|\bfrom \S+( \S+){0,3} to \S"
    rf"|\b(from|as of|starting|effective|since) (\d{{1,2}} )?{_MONTHS}\b|\b(from|as of|effective) \d{{4}}-\d{{2}}",
    re.I)
# Words that ask for the value rather than name the subject ("how much is the rent", "the new go-live date").
_ASKING = stems_of("how much many long often day date time price cost amount number new current now latest today "
                   "use used choose chose chosen pick picked decide decided select selected")
_WEEKDAY_PLURAL = re.compile(r"^(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s$")
_DAY_WORDS = re.compile(r"^(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|mon|tue|wed|thu|fri|sat|sun)", re.I)
_NAME = re.compile(r"(?<!^)(?<![.!?:]\s)\b[A-Z][a-zà-ÿ'’-]+\b")


@dataclass(frozen=True)
class Statement:
    """One sentence an answer may rest on: `key` is the caller's (an item's index, a citation's number), `date`
    its document's day (YYYY-MM-DD, None when unknown), `context` the headings or title above it."""

    key: int
    text: str
    source: str
    date: str | None
    context: str = ""


@dataclass(frozen=True)
class Disagreement:
    """Two statements of the same thing with different values: `newer` wins, `older` is superseded."""

    newer: Statement
    older: Statement


def document_day(created_at: str | None) -> str | None:
    """The day part of an index `created_at` (an ISO timestamp), or None."""
    return created_at[:10] if created_at and re.match(r"\d{4}-\d{2}-\d{2}", created_at) else None


def disagreements(question: str, statements: Sequence[Statement]) -> list[Disagreement]:
    """Every pair of `statements` that disagree (see the module's rules), newer first in each, in input order."""
    kind, subject = _asked(question)
    if kind is None:
        return []
    revisions_only = bool(_PAST.search(question))
    read = {s.key: _read(s, question, kind, subject) for s in statements}
    out = []
    for a, b in combinations(statements, 2):
        if a.source == b.source:
            continue
        if a.date and b.date and a.date != b.date:
            newer, older = (a, b) if a.date > b.date else (b, a)
        elif read[a.key].revision != read[b.key].revision:
            # Days that cannot order them (one day, or unknown): a statement that says the value changed is the
            # later one.
            newer, older = (a, b) if read[a.key].revision else (b, a)
        else:
            continue
        if _disagree(read[newer.key], read[older.key], revisions_only):
            out.append(Disagreement(newer, older))
    return out


def superseded_in(question: str, cited: Sequence[tuple[Context, Sequence[Quote]]]) -> list[Disagreement]:
    """Of an answer's citations (each context with the quotes the answer rests on), the statements a newer cited
    document says otherwise: one per superseded citation (its `key` is the citation's number), with the newest
    citation that supersedes it."""
    if _asked(question)[0] is None:
        return []  # nothing to compare: not worth reading the cited chunks' units
    statements = []
    for context, quotes in cited:
        if not quotes:
            continue
        for unit in split_units(context.text, line_structured(context.source)):
            span = find(unit.text, context.text)
            if span and any(_covers(q, span) for q in quotes):
                statements.append(Statement(context.n, unit.text, context.source, context.date, unit.context))
    newest: dict[int, Disagreement] = {}
    for found in disagreements(question, statements):
        kept = newest.get(found.older.key)
        if kept is None or (found.newer.date or "") > (kept.newer.date or ""):
            newest[found.older.key] = found
    # A citation that is itself superseded supersedes nothing: only the newest value leads.
    return [d for d in newest.values() if d.newer.key not in newest]


def _covers(quote: Quote, unit: Quote) -> bool:
    """Whether a quote holds most of a unit: an LLM's claim may be quoted without the unit's full stop."""
    shared = min(quote.char_end, unit.char_end) - max(quote.char_start, unit.char_start)
    return shared >= 0.8 * (unit.char_end - unit.char_start)


def label_superseded(text: str, older: Sequence[tuple[str, str]]) -> str:
    """An extractive answer's text with "Superseded (date): " before each older statement (its sentence, as the
    answer quotes it whole) of `older` (sentence, date)."""
    for sentence, date in older:
        at = text.find(sentence)
        if at >= 0:
            text = f"{text[:at]}Superseded{f' ({date})' if date else ''}: {text[at:]}"
    return text


def is_revision(text: str) -> bool:
    """Whether a sentence says its value changed ("moved to", "switching from MySQL to PostgreSQL", "from 1
    February 2025 the rent is")."""
    return bool(_REVISION.search(text))


def _asked(question: str) -> tuple[str | None, set[str]]:
    """The kind of value the question asks for and its subject words; kind None: no statement can supersede
    another (no value asked for, no subject, or a question about the past)."""
    kind = answer_kind(question)
    subject = question_stems(question) - _ASKING
    return (None, subject) if kind is None or not subject or _EARLIER.search(question) else (kind, subject)


@dataclass(frozen=True)
class _Reading:
    values: frozenset[str]
    words: frozenset[str]  # content stems, values left out
    about: bool  # holds enough of the question's subject
    modifiers: tuple[str | None, str | None]  # the word before the first subject word: in the text, in its headings
    names: frozenset[str]
    revision: bool  # says its value changed ("moved to", "switching from … to", "from 1 February …")


def _read(statement: Statement, question: str, kind: str, subject: set[str]) -> _Reading:
    values = _values(statement.text, kind, question)
    value_stems = stems_of(" ".join(values))
    tokens = stem_sequence(statement.text)
    held = held_stems(f"{statement.context} {statement.text}", question, subject)
    asked = {w.lower() for w in re.findall(r"\w+", question)}
    # Names that are not the value asked for ("Who is the landlord?": the names are the values).
    names = frozenset(n.lower() for n in _NAME.findall(statement.text) if n.lower() not in asked
                      and not _DAY_WORDS.match(n) and stems_of(n).isdisjoint(subject | value_stems))
    modifiers = (_modifier(tokens, subject, value_stems),
                 _modifier(stem_sequence(statement.context), subject, value_stems))
    return _Reading(frozenset(values), frozenset(set(tokens) - value_stems),
                    len(held) >= SUBJECT_SHARE * len(subject), modifiers, names, is_revision(statement.text))


def _disagree(newer: _Reading, older: _Reading, revisions_only: bool = False) -> bool:
    """Whether `newer` replaces `older`: an explicit revision in the newer needs no word overlap, and is the only
    kind a past question ("which database did we choose?") accepts."""
    a, b = newer, older
    if revisions_only and not newer.revision:
        return False
    if not (a.about and b.about and a.values and b.values):
        return False
    if a.values <= b.values or b.values <= a.values:
        return False
    union = a.words | b.words
    if not newer.revision and (not union or len(a.words & b.words) / len(union) < SAME_WORDS):
        return False
    for mine, theirs in zip(a.modifiers, b.modifiers, strict=True):
        if mine and theirs and mine != theirs:
            return False  # "platform team" and "design team": two subjects
    return not (a.names - b.names and b.names - a.names)


def _modifier(tokens: list[str], subject: set[str], values: set[str]) -> str | None:
    """The word right before the first subject word ("platform" of "platform team", "marta" of "Marta's team"),
    if it is a plain word."""
    for i, token in enumerate(tokens):
        if token in subject:
            before = [t for t in tokens[:i] if len(t) > 1]  # the possessive's "s" is not a word
            word = before[-1] if before else None
            return word if word and word.isalpha() and word not in subject | values else None
    return None


def _values(text: str, kind: str, question: str) -> set[str]:
    """The values of the asked kind in `text` that the question does not already hold, normalised: "Mondays" and
    "monday" are one value, "1,800" and "1800" too."""
    asked = {w.lower() for w in re.findall(r"\w+", question)}
    date = kind_pattern("date", question)
    out = set()
    for match in kind_pattern(kind, question).finditer(text):
        raw = match.group(0).strip().lower()
        if kind == "place":  # "in the garage": the place is the last word, not a weekday ("on Mondays")
            raw = raw.split()[-1]
            if date.fullmatch(raw):
                continue
        words = set(re.findall(r"\w+", raw))
        if raw in asked or words <= asked:
            continue
        value = _WEEKDAY_PLURAL.sub(r"\1", re.sub(r"(?<=\d)[,\s](?=\d{3}\b)", "", raw))
        out.add(value)
    return out

