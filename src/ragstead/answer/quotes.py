"""The evidence an answer quotes: for every citation marker `[n]`, the sentence(s) of source n it rests on, found
in the source's own text with their character offsets, so a reader (or the web page) can check them.

An extractive answer quotes units verbatim (markup stripped, whitespace normalised), so each is found in its
chunk word for word. An LLM answer paraphrases: a claim is quoted by the source unit that shares most of its
content words, and a text it puts in quotation marks must stand in the source as written. A marker whose claim
has no such sentence in its source is dropped, with a note saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ragstead.answer.evidence import question_stems, split_units, stems_of

_MARKER = re.compile(r"\[(\d{1,3})\]")
_WORD = re.compile(r"\w+")
_QUOTED = re.compile(r"[\"“]([^\"“”]{12,}?)[\"”]")  # a text the answer puts in quotation marks
_CLAIM_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_MARKERS = "*_`~"
_GAP = " \t\n.,;:-*•|"
MAX_PATTERN_WORDS = 80  # a longer unit is matched on its first words: enough to be unique, cheap to search


@dataclass(frozen=True)
class Quote:
    """A span of a cited source's text: `text == source[char_start:char_end]`."""

    text: str
    char_start: int
    char_end: int

    def to_dict(self) -> dict[str, Any]:
        return {"quote": self.text, "char_start": self.char_start, "char_end": self.char_end}


def find(sentence: str, source: str) -> Quote | None:
    """Where `sentence` stands in `source`, its words in order with anything but words between them (whitespace,
    markdown markers, a list bullet), so a unit with its markup stripped is found in the raw chunk."""
    words = _WORD.findall(sentence.rstrip("…"))
    if not words:
        return None
    cut = words[:MAX_PATTERN_WORDS]
    found = re.search(r"\b" + r"\W*".join(re.escape(w) for w in cut) + r"\b", source, re.I)
    if found is None:
        return None
    start, end = found.start(), found.end()
    # The sentence's own signs before its first word and after its last ("€900", "2,700 €", a full stop).
    lead = re.match(r"\W*", sentence).group(0).strip()  # type: ignore[union-attr]
    if lead and source[:start].rstrip().endswith(lead):
        start = source.rindex(lead, 0, start)
    tail = re.search(r"\W*$", sentence.rstrip("…")).group(0).strip()  # type: ignore[union-attr]
    after = re.match(r"\s*" + re.escape(tail), source[end:]) if tail and len(cut) == len(words) else None
    end += len(after.group(0)) if after else 0
    while start > 0 and source[start - 1] in _MARKERS:  # the markup around it: "**Total**" is quoted whole
        start -= 1
    while end < len(source) and source[end] in _MARKERS:
        end += 1
    return Quote(source[start:end], start, end)


def support(claim: str, source: str) -> Quote | None:
    """The sentence of `source` a claim rests on: the claim itself when it stands there, else the unit sharing
    most of its content words (None when none shares any, or a quoted text of the claim is not in the source)."""
    exact = find(claim, source)
    if exact is not None:
        return exact
    if any(find(quoted, source) is None for quoted in _QUOTED.findall(claim)):
        return None
    wanted = question_stems(claim)  # content words: "the" and "is" support nothing
    best, best_shared = None, 0
    for unit in split_units(source):
        shared = len(stems_of(unit.text) & wanted)
        if shared > best_shared:
            best, best_shared = unit, shared
    return find(best.text, source) if best is not None else None


@dataclass(frozen=True)
class QuotedAnswer:
    """An answer's text after every marker was checked, the quotes of each cited source, and what was dropped."""

    text: str
    quotes: dict[int, list[Quote]]
    notes: list[str]


def quote_markers(text: str, sources: list[tuple[str, bool]]) -> QuotedAnswer:
    """Check each `[n]` of `text` against source n (`(text, checkable)`; a tool's result is not checkable: it
    is cited as it is). The claim of a marker is the text since the previous marker ("A [1][2]" gives both the
    same claim), one quote per sentence of it that its source holds."""
    quotes: dict[int, list[Quote]] = {}
    notes: list[str] = []
    pieces: list[str] = []
    last, claim = 0, ""
    for match in _MARKER.finditer(text):
        between = text[last:match.start()]
        pieces.append(between)
        last = match.end()
        if between.strip():
            claim = between.strip().lstrip(".,;:!? ")
        n = int(match.group(1))
        if not 1 <= n <= len(sources):
            pieces.append(match.group(0))  # an out-of-range marker is the caller's to judge
            continue
        source, checkable = sources[n - 1]
        if not checkable:
            quotes.setdefault(n, [])
            pieces.append(match.group(0))
            continue
        found = [q for q in (support(s, source) for s in _CLAIM_SENTENCE.split(claim) if s.strip()) if q]
        if not found:
            notes.append(f"citation [{n}] was dropped: the sentence it cites is not in source {n}")
            continue
        kept = quotes.setdefault(n, [])
        kept.extend(q for q in found if q not in kept)
        pieces.append(match.group(0))
    pieces.append(text[last:])
    return QuotedAnswer(re.sub(r"[ \t]+([.,;:!?])", r"\1", "".join(pieces)) if notes else "".join(pieces),
                        quotes, notes)


def joined(quotes: list[Quote], source: str) -> Quote | None:
    """One span for a citation: its first quote in the answer's order, grown over the others that touch it (only
    whitespace, punctuation or a bullet between them: adjacent sentences read as one passage)."""
    if not quotes:
        return None
    start, end = quotes[0].char_start, quotes[0].char_end
    grown = True
    while grown:
        grown = False
        for q in quotes[1:]:
            touches = ((q.char_start <= end and q.char_end >= start)
                       or (q.char_start >= end and not source[end:q.char_start].strip(_GAP))
                       or (q.char_end <= start and not source[q.char_end:start].strip(_GAP)))
            if touches and (q.char_start < start or q.char_end > end):
                start, end, grown = min(start, q.char_start), max(end, q.char_end), True
    return Quote(source[start:end], start, end)
