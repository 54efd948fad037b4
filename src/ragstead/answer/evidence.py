"""Sentence-level evidence for `ask`: the units a chunk is read as, which of them are header-like, what kind of
answer a question asks for, and whether a unit holds one.

Units are sentences, list items, and lines that belong together: a table row whose cells the loader put on
separate lines, or a PDF line wrapped mid-sentence, is one unit, so "Total / 7,520 €" stays one answer. The
relevance gate (answer/gate.py) and the extractive answerer both read chunks through `split_units`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any

from ragstead.documents.sources import tabular
from ragstead.retrieval.lexical_query import query_terms
from ragstead.stores.lexical_index import text_analyzer

MAX_UNIT_CHARS = 400
MIN_WORDS = 4  # shorter units are fragments (a lone heading, "Ingredients") unless they hold a number
CONTEXT_SHARE = 0.5  # how much a question word found only in a unit's heading counts toward its overlap
LONG_LINE_WORDS = 8  # a line this long is a line of its own, not a cell or a wrapped piece of the next
FINER_QUANTITIES = True  # "how long" wants a duration, "how much" an amount, "how many" a count (quantity_type)

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_ENDS_CLAUSE = re.compile(r"[.!?:;]\s*$")
# A unit that holds a value stands alone however short: a number ("Severity 2."), or the place of a masked
# secret ("Wifi password: [secret]", documents/secrets.py MASK).
_VALUE = re.compile(r"\d|\[secret\]")
_ABBREVIATION = re.compile(r"\b(no|nr|mr|mrs|ms|dr|prof|st|vs|etc|e\.g|i\.e|approx|ca|incl|fig|pp?|vol|ch)\.$", re.I)

# "Attendees: Marta (PM), Jonas (backend), me." and its kin: a label, a colon, then a list. Such a line frames
# a note; it answers only a question about that label (who attended, when, where, how long).
_HEADER = re.compile(
    r"^(attendees|participants|present|members|interviewers|who|date|when|time|where|location|venue|"
    r"facilitator|to|from|cc|subject|re|owner|duration|severity|agenda)\s*:", re.I)
HEADER_KINDS = {
    "attendees": "person", "participants": "person", "present": "person", "members": "person",
    "interviewers": "person", "who": "person", "facilitator": "person", "owner": "person", "to": "person",
    "from": "person", "cc": "person", "date": "date", "when": "date", "time": "date", "where": "place",
    "location": "place", "venue": "place", "duration": "quantity",
}


@dataclass(frozen=True)
class Unit:
    """One readable piece of a chunk: its text, its position, and the header label if it is header-like
    ("" for a title line: the first line of a note, short and without a full stop)."""

    text: str
    position: int
    header: str | None = None
    context: str = ""  # the headings or title line above it: what the unit is about when it does not say


def in_context_text(unit: Unit) -> str:
    """A unit as the reader embeds it: after the headings or title above it, so "who is my dentist?" meets
    "Dr. Okoye, Harbour Street" under "## Dentist" (docs/benchmarks.md, "The reader")."""
    return f"{unit.context}: {unit.text}" if unit.context else unit.text


def line_structured(path: str) -> bool:
    """Whether a source's lines are its units: a plain-text file's writer ends a line where a thought ends (a log
    entry, a list without bullets), unlike a PDF's wrapped lines or the cells an HTML table leaves one per line; a
    spreadsheet's lines are its rows."""
    return path.lower().endswith(".txt") or tabular(path)


def split_units(text: str, lines: bool = False) -> list[Unit]:
    """The units of `text` in reading order (markdown headings end a unit and title what follows; a table row is
    a unit of its own). `lines`: every line is a unit unless it continues the one before (starts in lower case
    after a line that ends mid-clause): see `line_structured`. Markdown markup is dropped from a unit's text."""
    units: list[Unit] = []
    title_line = ""
    for block_number, (block, context) in enumerate(b for b in _blocks(text, lines) if b[0].strip()):
        title = block_number == 0 and _is_title(block)
        title_line = block if title else title_line
        context = " ".join(part for part in (title_line if not title else "", context) if part)
        for sentence in _joined_fragments(_sentences(_LIST_ITEM.sub("", block, count=1))):
            words = len(sentence.split())
            if words < MIN_WORDS and not (words >= 2 and _VALUE.search(sentence)):
                continue
            if len(sentence) > MAX_UNIT_CHARS:
                sentence = sentence[: MAX_UNIT_CHARS - 1] + "…"
            # A sheet row ("date: 2024-10-02; work: clutch replaced; cost_eur: 1140") is a record, not a header.
            found = None if _RECORD.match(sentence) else _HEADER.match(sentence)
            units.append(Unit(sentence, len(units), "" if title else found.group(1).lower() if found else None,
                              context))
    return units


def _blocks(text: str, lines: bool) -> list[tuple[str, str]]:
    """(block text without markup, the headings above it) for each block of `text`, in order: a paragraph's run of
    lines up to a heading, a table row, or a line that starts a unit of its own (`_starts_unit`)."""
    blocks: list[tuple[str, str]] = []
    headings: list[str] = []
    for paragraph in re.split(r"\n[ \t]*\n", text):
        current: list[str] = []
        for line in paragraph.split("\n"):
            if not line.strip() or _TABLE_RULE.match(line):
                continue
            if _HEADING.match(line):
                blocks.append((" ".join(current), " ".join(headings)))
                current = []
                # The first heading titles the note; a later one replaces the section before it.
                headings = [*headings[:1], _plain(_HEADING.sub("", line).strip())]
                continue
            if _TABLE_ROW.match(line):  # a markdown table row: its cells, one unit
                blocks += [(" ".join(current), " ".join(headings)), (_row(line), " ".join(headings))]
                current = []
                continue
            if current and (_starts_unit(line, current[-1], lines) or _LIST_ITEM.match(line)):
                blocks.append((" ".join(current), " ".join(headings)))
                current = []
            current.append(line.strip())
        blocks.append((" ".join(current), " ".join(headings)))
    return [(_plain(block), context) for block, context in blocks]


def _starts_unit(line: str, previous: str, lines: bool) -> bool:
    """Whether `line` starts a new unit after the line `previous` of the same block: after a clause's end; in a
    line-structured file unless it continues in lower case (or is a sheet row); in prose when the line before is a
    long one and this one starts like a sentence."""
    first = line.lstrip()[:1]
    if _ENDS_CLAUSE.search(previous):
        return True
    if lines:
        return not (first.islower() or first in ",;)") or bool(_RECORD.match(line))
    return len(previous.split()) >= LONG_LINE_WORDS and (first.isupper() or first.isdigit())


_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
# A spreadsheet row as documents/formats/sheets.py renders it ("month: 2025-02; category: groceries; amount_eur:
# 395"): a record of its own, never the continuation of the row above.
_RECORD = re.compile(r"^\s*[\w][\w .()/-]{0,40}: [^;]*; [\w][\w .()/-]{0,40}: ")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
# Markdown markup a reader should not see in an answer (the stored chunk keeps it): emphasis, code, links.
_MARKUP = (
    (re.compile(r"!?\[([^\]\n]*)\]\([^)\s]*(?:\s+\"[^\"]*\")?\)"), r"\1"),  # [text](url), ![alt](src)
    (re.compile(r"(\*\*|__|~~)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # **bold**, __bold__, ~~struck~~
    (re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])"), r"\1"),  # *italic*
    (re.compile(r"(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"), r"\1"),  # _italic_ (not snake_case)
    (re.compile(r"`+([^`\n]+?)`+"), r"\1"),  # `code`
)


def _plain(text: str) -> str:
    for pattern, replacement in _MARKUP:
        text = pattern.sub(replacement, text)
    return text


def _row(line: str) -> str:
    """A markdown table row as its cells: `| Total | 7,520 € |` reads `Total | 7,520 €`."""
    return " | ".join(cell.strip() for cell in line.strip().strip("|").split("|") if cell.strip())


def _joined_fragments(sentences: list[str]) -> list[str]:
    """The sentences of one block, whitespace-normalised, with a fragment too short to stand alone joined to the
    next sentence of its block ("To try: Acquired. Jonas recommends the Nvidia episode." keeps the name the second
    sentence is about). A block that is only a fragment stays one, and is dropped as before."""
    out: list[str] = []
    pending = ""
    for raw in sentences:
        sentence = " ".join(f"{pending} {raw}".split())
        words = len(sentence.split())
        pending = sentence if words < MIN_WORDS and not (words >= 2 and _VALUE.search(sentence)) else ""
        if not pending:
            out.append(sentence)
    if pending:
        out.append(pending)
    return out


def _is_title(block: str) -> bool:
    """A note's first line when it reads as a title: short, and not ending like a sentence. Dashes and ampersands
    are not words ("Tom & Sara's wedding – 24 August 2024, Gut Kaltenbach", an HTML page's h1, is a title)."""
    words = sum(any(c.isalnum() for c in token) for token in block.split())
    return words < 10 and not block.rstrip().endswith((".", "!", "?", ":"))


def _sentences(block: str) -> list[str]:
    """Sentences of one block; a split after an abbreviation ("slip no. 5521", "Dr. Okafor") is undone."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(block):
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


# What a question asks for, from its opening words: the answerer prefers units that hold such a thing.
_KINDS = (
    ("date", re.compile(r"^(when|until when|by when|since when|what time|what date|which day|what day)\b"
                        r"|\b(deadline|due date|what time|which date)\b", re.I)),
    ("quantity", re.compile(r"^how (much|many|big|large|long|far|fast|often|old|tall|heavy|high|warm|hot)\b"
                            r"|\b(cost|price|budget|fee|rent|salary|limit|target|total|size|weight|temperature|"
                            r"how much|how many)\b", re.I)),
    ("person", re.compile(r"^(who|whom|whose)\b|\bwhich (person|colleague|one of us)\b", re.I)),
    ("place", re.compile(r"^where\b", re.I)),
    ("entity", re.compile(r"^(which|what)\b", re.I)),
)
# A month's name, whole or short (a regex alternation, no group of its own).
MONTH_NAME = (r"jan(uary)?|feb(ruary)?|mar(ch)?|apr(il)?|may|june?|july?|aug(ust)?|sep(t(ember)?)?|oct(ober)?|"
              r"nov(ember)?|dec(ember)?")
_MONTH = (rf"{MONTH_NAME}|monday|tuesday|wednesday|thursday|friday|saturday|sunday|mondays|tuesdays|"
          r"wednesdays|thursdays|fridays|saturdays|sundays|today|tomorrow|weekend")
_HAS = {
    "date": re.compile(rf"\b({_MONTH})\b|\b\d{{1,2}}[:.]\d{{2}}\b|\b(19|20)\d{{2}}\b|\b\d{{4}}-\d{{2}}-\d{{2}}\b|"
                       r"\b\d{1,2}(st|nd|rd|th)\b", re.I),
    "quantity": re.compile(r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|twelve|twice|once|half|"
                           r"dozen|hundred|thousand|every|daily|weekly|monthly|yearly)\b", re.I),
    "person": re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zà-ÿ]+\b|\bme\b"),
    "place": re.compile(r"\b(in|at|on|under|behind|near|next to|inside|from)\s+(the\s+)?\w+", re.I),
    "entity": re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w-]*\b|\d"),
}


# What kind of quantity a "how ..." question wants: a duration (or a length) for "how long", an amount of money for
# "how much"/cost words, a count for "how many". A unit holding only another kind of number does not answer it
# ("375 g water" does not say how long the bread bakes). Hand-written: no kept library detects these.
_QUANTITY_TYPES = (
    ("duration", re.compile(r"^how (long|much time)\b|\bhow many (seconds|minutes|hours|days|nights|weeks|months|"
                            r"years)\b", re.I)),
    # "How much is the gym?" asks a price; "How much stock goes in?" a measure, left to the generic quantity.
    ("amount", re.compile(r"^how much (is|are|was|were)\b|\b(cost|costs|price|"
                          r"budget|fee|fees|rent|salary|total|spend|spent|pay|paid|owe)\b", re.I)),
    ("count", re.compile(r"^how many\b", re.I)),
)
_NUMBER = r"(\d+(?:[.,]\d+)?|a|an|one|two|three|four|five|six|seven|eight|nine|ten|twelve|half an?|a few)"
_QUANTITY_HAS = {
    "duration": re.compile(rf"\b{_NUMBER}(\s*(-|to|–)\s*\d+)?\s*(-\s*)?(s|secs?|seconds?|min|mins|minutes?|h|hrs?|"
                           r"hours?|days?|nights?|weeks?|months?|years?|yrs?|km|kilometres?|kilometers?|miles?|m)\b"
                           r"|\bovernight\b|\b\d{1,2}:\d{2}:\d{2}\b", re.I),  # ... or a race time, 1:57:02
    "amount": re.compile(r"[€$£¥]\s?\d|\d[\d.,]*\s?(k\b|€|\$|£|eur\b|euros?\b|usd\b|dollars?\b|chf\b|gbp\b|"
                         r"pounds?\b)|\bfree\b"
                         # a money field of a table row as rendered ("amount_eur: 395", "price: 12.50")
                         r"|\b\w*(eur|usd|gbp|chf|amount|price|cost|total|fee)\w*:\s*\d", re.I),
    "count": re.compile(r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|dozen|"
                        r"hundred|thousand|none|no)\b", re.I),
}


# Which end of a span a date question asks about, and the words that mark each end in a note: "When does the lease
# end?" wants the sentence with the end date ("ends", "until", "expires", "to 31 May"), not the start date beside
# it. Hand-written: a short closed list of English span verbs; no kept library tags a date as a start or an end.
_DATE_AHEAD = rf"(?=\s*(\d|({_MONTH})\b))"
_BOUNDARY_ASKED = {
    "end": re.compile(r"\b(end|ends|ending|finish|finishes|expire|expires|expiry|until|till|runs? out|last day|"
                      r"stop|stops)\b", re.I),
    "start": re.compile(r"\b(start|starts|started|begin|begins|began|commence|commences|first day|kick off)\b", re.I),
}
_BOUNDARY_SAID = {
    "end": re.compile(rf"\b(end|ends|ended|ending|until|till|expires?|expired|expiry|finish(es|ed)?|terminat\w*|"
                      rf"runs? out|ran out|last day)\b|\b(to|–){_DATE_AHEAD}", re.I),
    "start": re.compile(rf"\b(start|starts|started|starting|begin|begins|began|beginning|commenc\w*|first day)\b"
                        rf"|\bfrom{_DATE_AHEAD}", re.I),
}


def asked_boundary(question: str) -> str | None:
    """`end` or `start` when a question asks when a span ends or starts (not both), else None."""
    asked = [name for name, pattern in _BOUNDARY_ASKED.items() if pattern.search(question)]
    return asked[0] if len(asked) == 1 else None


def other_end_only(unit: str, question: str) -> bool:
    """Whether `unit` speaks only of the other end of the span a "when does it end/start" question asks about
    ("The lease starts on 1 April." for "When does the lease end?"): its date answers no such question."""
    boundary = answer_kind(question) == "date" and asked_boundary(question)
    if not boundary:
        return False
    other = "start" if boundary == "end" else "end"
    return bool(_BOUNDARY_SAID[other].search(unit)) and not _BOUNDARY_SAID[boundary].search(unit)


def quantity_type(question: str) -> str | None:
    """duration, amount or count when a quantity question says which (see _QUANTITY_TYPES), else None."""
    text = question.strip()
    return next((name for name, pattern in _QUANTITY_TYPES if pattern.search(text)), None)


# "When is the class, and what does it cost?": a second question joined by "and" starts with its own question word.
_SECOND_QUESTION = re.compile(r",?\s+and\s+(?=(?:what|when|where|who|whom|which|how)\b)", re.I)


def question_parts(question: str) -> list[str]:
    """The questions a two-part question asks, each on its own ("When is Theo's swimming" and "how much does the
    course cost?"); a one-part question is its own only part. Hand-written: English question words."""
    parts = [part.strip(" ,") for part in _SECOND_QUESTION.split(question.strip(), maxsplit=1)]
    return parts if len(parts) == 2 and all(len(p.split()) >= 2 for p in parts) else [question]


def answer_kind(question: str) -> str | None:
    """date, quantity, person, place or entity (a name or number: "which tool", "what's the IP") when the
    question's wording asks for one, else None (a yes/no question, a claim, a keyword query)."""
    text = question.strip()
    for kind, pattern in _KINDS:
        if pattern.search(text):
            return kind
    return None


def kind_pattern(kind: str, question: str) -> re.Pattern[str]:
    """What a value of `kind` looks like in a unit; for a quantity, the finer kind the question wants if it says."""
    sub = quantity_type(question) if kind == "quantity" and FINER_QUANTITIES else None
    return _QUANTITY_HAS[sub] if sub else _HAS[kind]


# What a question for a time of day wants: a clock time ("8 April" is a date, not a time). Used only to check an
# answer's type (`answer_type`), not to score units: the sentence scorer was fitted on the coarse kinds.
_TIME_QUESTION = re.compile(r"\bwhat time\b|\bat what hour\b", re.I)
_HOURS = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
# A clock time in digits ("7:30", "7 pm") or in words after "at" ("at seven", "at half past six", "at 7").
_CLOCK_TIME = re.compile(r"\b\d{1,2}[:.h]\d{2}\b|\b\d{1,2}\s?(am|pm|a\.m\.|p\.m\.)|\b(noon|midnight)\b|"
                         rf"\bat\s+(half\s+past\s+|(a\s+)?quarter\s+(past|to)\s+)?(\d{{1,2}}|{_HOURS})\b|"
                         rf"\b({_HOURS})\s+o'?clock\b", re.I)

_DATE_OR_CLOCK_TIME = re.compile(f"{_HAS['date'].pattern}|{_CLOCK_TIME.pattern}", re.I)


def answer_type(question: str) -> tuple[str, re.Pattern[str]] | None:
    """The type of value an answer must carry when the question asks for a time, a date or a quantity (the finer
    quantity when it says: an amount, a duration, a count), with what such a value looks like; None for other
    questions (a name, a place, a yes/no)."""
    kind = answer_kind(question)
    if kind == "date" and _TIME_QUESTION.search(question):
        return "time", _CLOCK_TIME
    if kind == "date":  # "when does the ferry leave?" is answered by "at seven" as well as by a date
        return kind, _DATE_OR_CLOCK_TIME
    if kind == "quantity":
        return quantity_type(question) or kind, kind_pattern(kind, question)
    return None


def holds_kind(unit: str, kind: str | None, question: str) -> bool:
    """Whether `unit` holds something of `kind` that the question does not already say."""
    if kind is None:
        return False
    asked = {w.lower() for w in re.findall(r"\w+", question)}
    if kind == "date" and other_end_only(unit, question):
        return False
    pattern = kind_pattern(kind, question)
    return any(m.group(0).strip().lower() not in asked and not set(re.findall(r"\w+", m.group(0).lower())) <= asked
               for m in pattern.finditer(unit))


def header_answers(unit: Unit, kind: str | None, question_stems: set[str], label_stems: set[str]) -> bool:
    """A header-like unit may lead only when the question asks about its label: "Who attended?" for Attendees,
    "How long did it last?" for Duration. A title line never answers."""
    if unit.header is None:
        return True
    if not unit.header:
        return False
    return bool(label_stems & question_stems) or (kind is not None and HEADER_KINDS.get(unit.header) == kind
                                                  and unit.header not in ("to", "from", "cc", "owner"))


@lru_cache(maxsize=1)
def _analyzer() -> Any:
    return text_analyzer()


def stem_sequence(text: str) -> list[str]:
    """The stemmed content words of `text` in order (stop words dropped; each word once)."""
    terms = query_terms(text)
    return list(_analyzer().analyze(" ".join(terms))) if terms else []


def stems_of(text: str) -> set[str]:
    """The stemmed words of `text`, as the lexical index stems them."""
    return set(_analyzer().analyze(text))


_HOW_QUANTIFIER = re.compile(r"\bhow (much|many)\b", re.I)
_MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                "november", "december")
_ISO_MONTH = re.compile(r"\b(?:19|20)\d{2}-(0[1-9]|1[0-2])(?:-\d{2})?\b")


def asked_terms(question: str) -> list[str]:
    """The question's lexical terms that a document can hold: "much" and "many" of "how much"/"how many" ask for a
    value, no note says them, and counted as words they lower every coverage of a "how much" question."""
    asking = {m.group(1).lower() for m in _HOW_QUANTIFIER.finditer(question)}
    terms = query_terms(question)
    return [t for t in terms if t not in asking] or terms


def question_stems(question: str) -> set[str]:
    """The stemmed content words of a question (stop words dropped, as for a lexical query; `asked_terms`)."""
    return stems_of(" ".join(asked_terms(question)))


# "may" the verb is not May the month: that one month counts only capitalised.
_NAMED_MONTH = re.compile(r"\b(" + "|".join(f"(?i:{m})" for m in _MONTH_NAMES if m != "may") + r"|May)\b")


def months_named(text: str) -> set[str]:
    """The months `text` names, by name or as an ISO month or date ("February", "2025-02-14" → "february")."""
    return {m.group(1).lower() for m in _NAMED_MONTH.finditer(text)} | set(_month_names(text).split())


def _month_names(text: str) -> str:
    """The month names of the ISO months and dates in `text` ("2025-02" → "february"), so a question's "February
    2025" meets a spreadsheet row's "2025-02" (docs/design.md, "The relevance gate")."""
    return " ".join(_MONTH_NAMES[int(m.group(1)) - 1] for m in _ISO_MONTH.finditer(text))


_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][\w'’-]*[\w]|\b\w*\d\w*\b")  # not the question's first word
_POSSESSIVE = re.compile(r"['’]s$")  # "Mila's birthday" asks about Mila: the note says "Mila was born…"


def missing_names(question: str, texts: Sequence[str]) -> list[str]:
    """The proper names and codes of the question ("Rome", "B-KM 2231", "KR3") that none of `texts` holds: an
    answer from them is about something else ("Which restaurant did I book in Rome?" from a note on Paris)."""
    body = question.strip()
    names = [_POSSESSIVE.sub("", m.group(0)) for m in _NAME.finditer(body)
             if m.group(0) not in ("I", "I'm", "I've", "I'd")]
    stems = stems_of(" ".join(texts))
    return [name for name in dict.fromkeys(names) if not (stems_of(name) <= stems or held_stems(
        " ".join(texts), name, stems_of(name)) == stems_of(name))]


def held_stems(text: str, question: str, wanted: set[str] | None = None) -> set[str]:
    """The question's stems (`wanted`, default `question_stems`) that `text` holds, a compound meeting its parts
    either way: "rollback" in the text holds "roll back" of the question, "roll back" holds "rollback". (The
    stemmer already meets inflections: insured/insurance → insur.)"""
    wanted = question_stems(question) if wanted is None else wanted
    tokens = _analyzer().analyze(text)
    have = (set(tokens) | stems_of(_month_names(text))) & wanted
    if len(have) == len(wanted):
        return have
    joined = {a + b for a, b in pairwise(tokens)}
    have |= wanted & joined
    asked = [t for t in _analyzer().analyze(" ".join(asked_terms(question))) if t in wanted]
    for a, b in pairwise(asked):
        if a + b in tokens:
            have |= {a, b}
    return have


@dataclass(frozen=True)
class SentenceScorer:
    """How likely a unit is to hold the answer: a logistic model over its cosine to the question, the share of
    the question's words it holds (each weighted by how rare it is among the candidate units), whether it holds
    the kind of thing the question asks for, and its chunk's rank. Fitted on the notes set's fit half
    (`python -m bench answers --fit`). A header-like unit that does not answer scores 0: it may not lead."""

    weights: tuple[float, float, float, float]  # similarity, overlap, kind, rank
    bias: float

    FEATURES = ("similarity", "overlap", "kind", "rank")

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SentenceScorer:
        weights = tuple(float(raw["weights"][name]) for name in cls.FEATURES)
        return cls((weights[0], weights[1], weights[2], weights[3]), float(raw["bias"]))

    def to_dict(self) -> dict[str, Any]:
        return {"weights": dict(zip(self.FEATURES, self.weights, strict=True)), "bias": self.bias}

    def score(self, question: str, items: Sequence[tuple[int, Unit, float]], headings: bool = False) -> list[float]:
        """One probability per (chunk rank, unit, cosine to the question). `headings`: question words in a unit's
        headings count toward its overlap (choosing the answer's sentences, not gating: see unit_features)."""
        return [0.0 if blocked else 1.0 / (1.0 + math.exp(-(self.bias + sum(
            w * x for w, x in zip(self.weights, row, strict=True)))))
            for row, blocked in unit_features(question, items, headings)]


def unit_features(question: str, items: Sequence[tuple[int, Unit, float]],
                  headings: bool = False) -> list[tuple[list[float], bool]]:
    """Per item: the SentenceScorer's features, and whether it is a header that may not lead. With `headings`, a
    question word found only in the unit's headings counts CONTEXT_SHARE toward its overlap: among the retrieved
    units that picks the one under the right heading ("Duration: 47 minutes" under "checkout outage"). The gate
    leaves it off: a near miss matches its note's title as well as an answer does, and with it on, held-out
    near-miss refusal fell (docs/design.md, "Answer selection and context")."""
    wanted = question_stems(question)
    held = [held_stems(unit.text, question, wanted) for _, unit, _ in items]
    weight = {t: math.log(1 + len(items) / (1 + sum(t in h for h in held))) for t in wanted}
    total = sum(weight.values()) or 1.0
    kind = answer_kind(question)
    out = []
    for (rank, unit, similarity), have in zip(items, held, strict=True):
        inherited = held_stems(unit.context, question, wanted) - have if headings and unit.context else set()
        overlap = (sum(weight[t] for t in have) + CONTEXT_SHARE * sum(weight[t] for t in inherited)) / total
        holds = 1.0 if holds_kind(unit.text, kind, question) else 0.0
        # A header that does not answer may not lead, nor may the other end's date of a span the question asks
        # about (it reads like an answer: the same note, a date, the question's words).
        blocked = not header_answers(unit, kind, wanted, stems_of(unit.header or "")) or (
            kind == "date" and other_end_only(unit.text, question))
        out.append(([similarity, overlap, holds, 1.0 / (1 + rank)], blocked))
    return out
