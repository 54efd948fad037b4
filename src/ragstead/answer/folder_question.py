"""Whole-folder questions, parsed: what to compute (list, count, sum, average, earliest, latest), over what
(topics joined by "or"/"and"), when (a period: "in 2025", "last quarter", "since March", "in the first
quarter"), and among which documents (tagged X, e-mails from Y, sheet rows where a column is a value).

`folder_question` returns None for anything it does not read with confidence: the question then goes on to the
list answers (answer/listing.py) or the usual answer from the top k, never to a figure stated as complete.
Nothing here reads the index; answer/aggregate.py answers what this parses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from ragstead.documents.amounts import MONTHS

OPS = ("list", "count", "sum", "average", "earliest", "latest")
_ORDINAL = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4, "last": 4}
_MONTH = "|".join(MONTHS)
_YEAR = r"(?:19|20)\d{2}"


@dataclass(frozen=True)
class Period:
    """The days a question asks about, both ends included (None: open), and how it said it ("in 2025")."""

    start: date | None
    end: date | None
    label: str

    def holds(self, day: date | None) -> bool:
        if day is None:
            return False
        return (self.start is None or day >= self.start) and (self.end is None or day <= self.end)

    def to_dict(self) -> dict[str, str | None]:
        return {"label": self.label, "from": self.start.isoformat() if self.start else None,
                "to": self.end.isoformat() if self.end else None}


@dataclass(frozen=True)
class FolderQuestion:
    """A parsed whole-folder question. `op`: one of OPS. `topics`: what a unit must mention (each topic's words
    all; any topic of several, "the roofer or the garage"); `tag`: documents carrying that tag; `sender`: e-mails
    from them; `where`: sheet rows whose column (None: any column) has that value; `column`: the column a rows
    total adds ("total of amount where ..."; None: the sheet's money column)."""

    question: str
    op: str
    topics: tuple[str, ...] = ()
    period: Period | None = None
    tag: str | None = None
    sender: str | None = None
    where: tuple[str | None, str] | None = None
    column: str | None = None
    noun: str = "notes"

    @property
    def rows(self) -> bool:
        return self.where is not None


def _month_end(year: int, month: int) -> date:
    return (date(year + (month == 12), month % 12 + 1, 1)) - timedelta(days=1)


def _quarter(year: int, quarter: int, label: str) -> Period:
    first = 3 * (quarter - 1) + 1
    return Period(date(year, first, 1), _month_end(year, first + 2), label)


def _recent_month(month: int, today: date) -> int:
    """The year of the most recent `month` that has begun by `today` ("in March" asked in February: last year's)."""
    return today.year if month <= today.month else today.year - 1


_PERIODS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"\b(?:in|during|for|over)\s+(?:the\s+)?(?P<q>first|1st|second|2nd|third|3rd|fourth|4th|last)\s+"
                rf"quarter(?:\s+of\s+(?P<year>{_YEAR}))?\b", re.I), "quarter"),
    (re.compile(rf"\b(?:in|during|for)\s+q(?P<qn>[1-4])(?:\s+(?:of\s+)?(?P<year>{_YEAR}))?\b", re.I), "quarter"),
    (re.compile(r"\b(?P<which>last|this|previous)\s+(?P<unit>quarter|month|year)\b", re.I), "relative"),
    (re.compile(rf"\bsince\s+(?P<month>{_MONTH})(?:\s+(?P<year>{_YEAR}))?\b", re.I), "since_month"),
    (re.compile(rf"\bsince\s+(?P<year>{_YEAR})\b", re.I), "since_year"),
    (re.compile(rf"\b(?:in|during|for)\s+(?P<month>{_MONTH})(?:\s+(?:of\s+)?(?P<year>{_YEAR}))?\b", re.I), "month"),
    (re.compile(rf"\b(?:in|during|for)\s+(?P<year>{_YEAR})\b", re.I), "year"),
]


def _period_of(kind: str, found: re.Match[str], today: date) -> Period | None:
    label = " ".join(found.group(0).split())
    groups = found.groupdict()
    year = int(groups["year"]) if groups.get("year") else None
    if kind == "quarter":
        quarter = int(groups["qn"]) if groups.get("qn") else _ORDINAL[groups["q"].lower()]
        return _quarter(year or today.year, quarter, label)
    if kind in ("month", "since_month"):
        month = MONTHS.index(groups["month"].lower()) + 1
        year = year or _recent_month(month, today)
        return Period(date(year, month, 1), _month_end(year, month) if kind == "month" else None, label)
    if kind == "since_year":
        return Period(date(year or today.year, 1, 1), None, label)
    if kind == "year":
        return Period(date(year or today.year, 1, 1), date(year or today.year, 12, 31), label)
    back = groups["which"].lower() in ("last", "previous")
    unit = groups["unit"].lower()
    if unit == "year":
        return Period(date(today.year - back, 1, 1), date(today.year - back, 12, 31), label)
    if unit == "month":
        month, year = (today.month - 1 or 12, today.year - (today.month == 1)) if back else (today.month, today.year)
        return Period(date(year, month, 1), _month_end(year, month), label)
    quarter = (today.month - 1) // 3 + 1
    if back:
        quarter, year = (quarter - 1, today.year) if quarter > 1 else (4, today.year - 1)
    return _quarter(year or today.year, quarter, label)


def take_period(text: str, today: date) -> tuple[Period | None, str]:
    """The period `text` names and `text` without it ("How much in March 2025?" -> March 2025, "How much ?")."""
    for pattern, kind in _PERIODS:
        found = pattern.search(text)
        if found is not None:
            period = _period_of(kind, found, today)
            if period is not None:
                return period, (text[:found.start()] + " " + text[found.end():]).strip()
    return None, text


# Words that frame an aggregate question around its topic; what is left is the topic.
_FRAME_WORDS = frozenset(
    "how much many times time did do does i we me my our you pay paid paying spend spent spending cost costs costed "
    "what was were is are the a an at on for to in go went gone make made payment payments bill bills total "
    "average mean when first last latest earliest most recent have has had been of sum all altogether so far ever "
    "it there get got by with give gave which visit visits".split())
_LIST_NOUN = r"(?P<noun>notes|files|documents|docs|pages|entries|e-?mails|mails|messages|rows|records)"
_TAGGED = re.compile(r"\b(?:tagged(?:\s+with)?|with\s+(?:the\s+)?tag|carry(?:ing)?\s+(?:the\s+)?tag)\s+#?"
                     r"(?P<tag>[\w][\w/-]*)\s*$", re.I)
_FROM = re.compile(r"\b(?P<noun>e-?mails?|mails?|messages?|letters?)\b(?:\s+(?:are|were|did\s+i\s+get|i\s+got|"
                   r"have\s+i\s+got|came|that\s+came|sent))?\s+from\s+(?P<who>[\w][\w .'-]*?)\s*$", re.I)
_LIST_START = re.compile(rf"^\s*(?:(?:(?:in|on|from)\s+)?(?:which|what)\s+(?:of\s+)?|(?:list|show)\s+(?:me\s+)?"
                         rf"(?:all\s+)?)(?:my\s+|the\s+)?{_LIST_NOUN}\b", re.I)
_COUNT_START = re.compile(rf"^\s*how\s+many\s+(?:of\s+)?(?:my\s+|the\s+)?{_LIST_NOUN}\b", re.I)
_ROWS_COUNT = re.compile(r"^\s*how\s+many\s+(?:rows|records|lines|entries)\s+(?:are\s+there\s+)?(?:where|with)\s+"
                         r"(?P<col>[\w][\w ()]*?)\s+(?:is|=|equals|was)\s+(?P<val>.+?)\s*$", re.I)
_ROWS_TOTAL = re.compile(r"^\s*(?:what\s+is\s+|what's\s+)?(?:the\s+)?(?:total|sum)\s+of\s+(?:the\s+)?(?P<what>.+?)"
                         r"\s+(?:where|with)\s+(?P<col>[\w][\w ()]*?)\s+(?:is|=|equals|was)\s+(?P<val>.+?)\s*$", re.I)
_ROWS_STATE = re.compile(r"^\s*how\s+many\s+(?:of\s+)?(?:my\s+|the\s+)?(?P<noun>[a-z]+s)\s+(?:are|were)\s+"
                         r"(?:still\s+|now\s+|currently\s+)?(?P<val>[a-z][\w-]*)\s*$", re.I)
_SUM = re.compile(r"^\s*how\s+much\b|^\s*what\s+did\s+(?:i|we)\s+pay\b|\b(?:cost|costs|spend|spent|total|sum|"
                  r"add\s+up)\b", re.I)
_AVERAGE = re.compile(r"\baverage\b", re.I)
_COUNT = re.compile(r"^\s*how\s+many\b", re.I)
_COUNTED = re.compile(r"\b(?:times|payments?|visits?|invoices?|bills?|receipts?|transfers?|purchases?|donations?|"
                      r"instal(?:l)?ments?)\b", re.I)
_EARLIEST = re.compile(r"\b(?:earliest|first)\b", re.I)
_LATEST = re.compile(r"\b(?:latest|last|most\s+recent)\b", re.I)
_WHEN = re.compile(r"^\s*(?:when|what\s+(?:day|date)|on\s+what\s+(?:day|date))\b", re.I)
# A price asked in the present ("how much is the rent?", "what does a ticket cost?") is a fact, not a sum.
_PRESENT = re.compile(r"\b(?:is|are|does|do|will|would|should|can)\b", re.I)
# A sum adds several payments: a period, "in total", "so far", spending say so ("how much was the deposit?" does not).
_SUM_MARK = re.compile(r"\b(?:in\s+total|in\s+all|altogether|all\s+together|so\s+far|spent|spend|add\s+up)\b", re.I)
_STATE_WORDS = frozenset({"tagged", "from", "about", "there", "mentioned", "written", "saved", "kept"})


def _topics(text: str) -> tuple[str, ...]:
    """The topics of what is left of an aggregate question: split at "or"/"and", framing words dropped."""
    topics = []
    for part in re.split(r"\s*\b(?:or|and)\b\s*|,", text, flags=re.I):
        words = [w for w in re.findall(r"[\w'-]+", part.lower()) if w.removesuffix("'s") not in _FRAME_WORDS]
        if words:
            topics.append(" ".join(words))
    return tuple(dict.fromkeys(topics))


def _op(text: str) -> str | None:
    """What an aggregate question computes, or None. "When ... first/last" asks for the earliest/latest; "how
    many" counts payments only ("how many times", "how many insurance payments"): "how many nights are we in
    Kyoto?" asks for a fact."""
    if _WHEN.search(text):
        return "earliest" if _EARLIEST.search(text) else "latest" if _LATEST.search(text) else None
    if _AVERAGE.search(text):
        return "average"
    if _COUNT.search(text):
        return "count" if _COUNTED.search(text) else None
    return "sum" if _SUM.search(text) else None


def _rows_question(question: str, text: str) -> FolderQuestion | None:
    found = _ROWS_COUNT.match(text)
    if found is not None:
        return FolderQuestion(question, "count", where=(found["col"].strip(), found["val"].strip()), noun="rows")
    found = _ROWS_TOTAL.match(text)
    if found is not None:
        return FolderQuestion(question, "sum", where=(found["col"].strip(), found["val"].strip()),
                              column=found["what"].strip(), noun="rows")
    found = _ROWS_STATE.match(text)
    if found is not None and found["val"].lower() not in _STATE_WORDS and found["noun"].lower() not in (
            "notes", "files", "documents", "emails", "e-mails", "messages", "pages", "times"):
        return FolderQuestion(question, "count", where=(None, found["val"]), noun=found["noun"].lower())
    return None


def _documents_question(question: str, text: str, period: Period | None) -> FolderQuestion | None:
    """"Which notes are tagged garden", "how many e-mails from Dana": documents chosen by a tag or a sender."""
    kind = "count" if _COUNT_START.search(text) else "list" if _LIST_START.search(text) else None
    if kind is None:
        return None
    tagged = _TAGGED.search(text)
    if tagged is not None:
        noun = (_COUNT_START.search(text) or _LIST_START.search(text))
        return FolderQuestion(question, kind, period=period, tag=tagged["tag"].lower(),
                              noun=(noun["noun"] if noun is not None and noun["noun"] else "notes").lower())
    sent = _FROM.search(text)
    if sent is not None:
        return FolderQuestion(question, kind, period=period, sender=sent["who"].strip(), noun="e-mails")
    return None


def folder_question(question: str, today: date | None = None) -> FolderQuestion | None:
    """The whole-folder question `question` asks, or None (then it is answered as before). `today` anchors the
    relative periods ("last quarter"); the day it is asked by default."""
    today = today or date.today()
    text = " ".join(question.strip().rstrip("?.! ").split())
    if not text:
        return None
    rows = _rows_question(question, text)
    if rows is not None:
        return rows
    period, rest = take_period(text, today)
    documents = _documents_question(question, rest, period)
    if documents is not None:
        return documents
    if _LIST_START.search(rest) or _COUNT_START.search(rest):
        return None  # "which notes mention X": a list answer's (answer/listing.py), with its "or" split there
    op = _op(rest)
    if op is None:
        return None
    if op == "sum" and (_PRESENT.search(rest) or (period is None and not _SUM_MARK.search(rest))):
        return None  # "how much is the rent?", "how much was the deposit?": a fact
    topics = _topics(re.sub(r"^\s*(?:when|what)\b", "", rest, flags=re.I))
    if not topics:
        return None
    return FolderQuestion(question, op, topics, period)


def or_topics(topic: str) -> tuple[str, ...]:
    """A list question's topic split at "or" ("Madrid or Porto" -> Madrid, Porto); one topic when there is none."""
    parts = [p.strip(" ,") for p in re.split(r"\s*,?\s+\bor\b\s+|\s*,\s*(?=\S)", topic, flags=re.I) if p.strip(" ,")]
    return tuple(parts) if len(parts) > 1 and re.search(r"\bor\b", topic, re.I) else (topic,)


def list_form(question: str) -> str:
    """A list question as answer/listing.py reads it: "In which notes do I mention X?" -> "Which notes mention X?"
    ("in"/"on" before "which" is dropped, "do I mention" is the frame it already knows)."""
    return re.sub(r"^\s*(?:in|on|from)\s+(?=(?:which|what)\b)", "", question, flags=re.I)


__all__: Sequence[str] = ["OPS", "FolderQuestion", "Period", "folder_question", "list_form", "or_topics",
                          "take_period"]
