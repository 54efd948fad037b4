"""Answers to whole-folder questions: sums, counts and averages over a period, the earliest or latest of them,
lists joined by "or", documents by tag or sender, and sheet rows as records.

answer/folder_question.py parses the question; this module answers it from the caller's whole scope:

- **Aggregates** ("how much did I pay the roofer in 2025?"): every chunk of the scope holding a word of the topic
  (the lexical index, the scope a clause of the store's query, then the path backstop), cut into units (a
  sentence; a sheet row). A unit counts when it, or its document's head (title, subject, first lines; never a
  sheet's), holds every word of a topic, states an amount in the answer's currency (documents/amounts.py), and
  its day (the first it states, a row's date column, else the document's date) is in the period. The same amount
  on the same day in two documents (the invoice e-mail and the note "paid the invoice") is one payment, counted
  once, and the answer says so. A unit naming the topic without an amount, or with another currency, is listed as
  left out; `complete` is false when an amount was left out (another currency) or the scope was not read whole.
- **Rows as records** ("how many rows where status is open", "total of amount where category is electricity",
  "how many orders are still open"): the rows of the scope's sheets holding the value, matched on the column.
- **Lists joined by "or"** and "in which notes ...": answer/listing.py's list answer for each topic, united.
- **Tags and senders**: the documents carrying the tag (the index's tags, as `query --tag`), the e-mails whose
  From line names the sender.

The amounts and dates are read from the scoped units when the question is asked, not stored at index time: the
store schema is shared by four backends (SQLite, PostgreSQL, Chroma, Milvus), and a column for them there is a
migration of each; reading the few hundred units a topic's words select costs milliseconds.

Each answer is an `Answer` whose `listing` is an `Aggregate` (a `Listing` with the figure, its units and what was
left out): its `to_dict()` is the ask JSON every door returns. None: not a whole-folder question this reads with
confidence (nothing counted), and the caller answers it as before.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal
from typing import Any, Protocol

from ragstead.answer.ask import CITATION_SNIPPET_CHARS, Answer, AskOptions, Citation, hit_locator
from ragstead.answer.base import Listing
from ragstead.answer.folder_question import FolderQuestion, Period, folder_question, list_form, or_topics
from ragstead.answer.gate import UnitVectorCache
from ragstead.answer.listing import MAX_LIST_CHUNKS, ListPage, ListQuestion, count_documents, list_answer, list_question
from ragstead.answer.quotes import Quote
from ragstead.documents.amounts import amounts, dates, money_column, row_amount, row_date, row_fields
from ragstead.documents.metadata import PathRule
from ragstead.documents.sources import tabular
from ragstead.embeddings.base import Embedder
from ragstead.filters import QueryFilters
from ragstead.memory.decision import decide
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.search import Candidate as Ranked
from ragstead.retrieval.search import RowReader, snippet
from ragstead.stores.base import Store
from ragstead.stores.lexical_index import text_analyzer

FETCH_BATCH = 500
HEAD_CHARS = 300  # a document's head: its title and this much of its first chunk
_MAIL = (".eml", ".mbox", ".msg")
# A sentence ends at . ! ? before a space or the end (not "1,250.00", not "costaroofing.example"), or a line's end.
_PAYMENT = re.compile(r"\b(?:paid|pay|pays|paying|payment|payable|invoice[sd]?|total|due|received|fees?|costs?|"
                      r"charged?|bill(?:ed)?|price|debited|taken|spent|amount|sum|receipt)\b", re.I)
_SENTENCE = re.compile(r"(?:[^\n.!?]|[.!?]+(?=[^\s.!?]))+(?:[.!?]+|(?=\n)|$)")


@dataclass(frozen=True)
class CountedUnit:
    """A unit an aggregate read: its source, the quoted text, its day and amount, and its citation `n` (counted)
    or why it was left out (`reason`)."""

    source: str
    quote: str
    day: date | None
    amount: Decimal | None
    currency: str | None
    n: int | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "quote": self.quote,
                                "date": self.day.isoformat() if self.day else None,
                                "amount": f"{self.amount:.2f}" if self.amount is not None else None,
                                "currency": self.currency}
        if self.n is not None:
            data["n"] = self.n
        if self.reason is not None:
            data["reason"] = self.reason
        return data


@dataclass(frozen=True)
class Aggregate(Listing):
    """A whole-folder answer's figure with its evidence, beside the `Listing` fields (`kind`: sum, count,
    average, earliest, latest, list; `matched`: the units counted): `figure` (an amount with two decimals, a
    count, an ISO date), its `unit` (a currency, "rows", "payments", "date"), the `period` asked, every unit
    counted (`units`) and left out (`left_out`), and `notes` (what was counted once)."""

    figure: str | None = None
    unit: str | None = None
    period: Period | None = None
    units: tuple[CountedUnit, ...] = ()
    left_out: tuple[CountedUnit, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "figure": self.figure, "unit": self.unit,
                "period": self.period.to_dict() if self.period else None,
                "units": [u.to_dict() for u in self.units], "left_out": [u.to_dict() for u in self.left_out],
                "aggregate_notes": list(self.notes)}


@dataclass
class _Unit:
    doc_id: str
    row: dict[str, Any]
    start: int
    end: int
    day: date | None
    amount: Decimal | None = None
    currency: str | None = None
    fields: dict[str, str] | None = None
    own: bool = False  # it holds the topic itself, not through its document's head

    @property
    def text(self) -> str:
        return str(self.row["text"][self.start:self.end])


@dataclass
class _Scope:
    """What one answer reads with: the store, the caller's filters and path rules, the options and the page."""

    store: Store
    embedder: Embedder
    filters: QueryFilters
    options: AskOptions
    rules: tuple[PathRule, ...]
    page: ListPage
    cache: UnitVectorCache | None = None
    lock: AbstractContextManager[Any] = field(default_factory=nullcontext)  # a server's read lock, per store call

    def examined(self) -> int:
        with self.lock:
            return count_documents(self.store, self.filters)


class Asked(Protocol):
    """What `whole_folder` reads of an ask request (requests.AskRequest): the question, whether list questions
    are on, and the page of units or documents cited."""

    @property
    def query(self) -> str: ...

    @property
    def list_questions(self) -> bool: ...

    @property
    def offset(self) -> int: ...

    @property
    def limit(self) -> int: ...


class Ruled(Protocol):
    """What `whole_folder` reads of the settings (config.Settings): the path rules of the scope backstop."""

    @property
    def scope_rules(self) -> tuple[PathRule, ...]: ...


class Index(Protocol):
    """What `whole_folder` reads of the knowledge base it answers for: its store, embedder and settings."""

    @property
    def store(self) -> Store: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def settings(self) -> Ruled: ...


def whole_folder(request: Asked, index: Index, filters: QueryFilters, options: AskOptions,
                 cache: UnitVectorCache | None = None, lock: AbstractContextManager[Any] | None = None,
                 today: date | None = None) -> tuple[Answer | None, ListQuestion | None]:
    """The whole-folder answer to `request`'s question in the scope `filters`, else the list question it asks
    (answer/listing.py answers it), else (None, None): the usual `ask` answers it. List questions off: nothing
    here. `lock` (a server's read lock) is held per store call, never across the scan (as `list_answer`)."""
    if not request.list_questions:
        return None, None
    scope = _Scope(index.store, index.embedder, filters, options, index.settings.scope_rules,
                   ListPage(request.offset, request.limit), cache, lock or nullcontext())
    question = request.query
    parsed = folder_question(question, today)
    if parsed is None:
        answered = _lists(question, scope)
    elif parsed.tag is not None or parsed.sender is not None:
        answered = _documents(parsed, scope)
    else:
        answered = _rows(parsed, scope) if parsed.rows else _aggregate(parsed, scope)
    return answered, None if answered is not None else list_question(question)


# --- lists joined by "or", and "in which notes ..." -------------------------------------------------------------

def _lists(question: str, scope: _Scope) -> Answer | None:
    asked = list_question(list_form(question))
    if asked is None:
        return None
    topics = or_topics(asked.topic)
    if len(topics) == 1 and list_form(question) == question:
        return None  # answer/listing.py answers it as it always has
    cited: dict[str, Citation] = {}
    complete, examined = True, 0
    for topic in topics:
        one = list_answer(ListQuestion(question, asked.kind, asked.noun, topic), scope.store, scope.embedder,
                          scope.filters, scope.options, scope.rules, ListPage(0, MAX_LIST_CHUNKS), scope.cache,
                          scope.lock)
        assert one.listing is not None
        complete, examined = complete and one.listing.complete, one.listing.examined
        for citation in one.citations:
            cited.setdefault(citation.source, citation)
    listed = [cited[source] for source in sorted(cited)]
    topic = " or ".join(topics)
    return _document_answer(question, asked.kind, asked.noun, topic, listed, examined, complete, scope,
                            f"the words of {topic}")


def _document_answer(question: str, kind: str, noun: str, topic: str, listed: list[Citation], examined: int,
                     complete: bool, scope: _Scope, what: str) -> Answer:
    page = scope.page
    shown = [replace(c, n=page.offset + i) for i, c in enumerate(listed[page.offset:page.offset + page.limit], 1)]
    after = page.offset + len(shown)
    listing = Listing(kind, topic, examined, len(listed), complete, page.offset, page.limit,
                      after if after < len(listed) else None)
    scope_text = f"examined {examined} document{'' if examined == 1 else 's'} in your scope"
    count = len(listed)
    if kind == "count":
        text = f"{count or 'No'} {noun if count != 1 else noun.removesuffix('s')} {topic}. {scope_text.capitalize()}."
    else:
        text = f"{scope_text.capitalize()}; {count or 'none'} {topic}" + (
            ": " + ", ".join(f"{c.source} [{c.n}]" for c in shown) + "." if shown else ".")
    if listing.next_offset is not None:
        text += f" Listed {page.offset + 1}-{after}; the next page starts at offset {listing.next_offset}."
    if not complete:
        text += " Not complete: only the first passages holding " + what + " were read."
    return Answer(question=question, text=text, refused=False, citations=tuple(shown), provider="list", gate=None,
                  listing=listing, memory=decide(question).to_dict(),
                  retrieval={"mode": "list", "filters": scope.filters.describe(scope.rules).to_dict(),
                             "retrieved": count, "relevant": len(shown), "min_similarity": scope.options.min_similarity,
                             "best_similarity": None})


# --- documents by tag or sender ---------------------------------------------------------------------------------

def _documents(parsed: FolderQuestion, scope: _Scope) -> Answer | None:
    filters = scope.filters
    if parsed.tag is not None:
        if filters.tags and parsed.tag not in filters.tags:
            docs: list[dict[str, Any]] = []  # the scope asks for other tags: AND across fields
        else:
            filters = replace(filters, tags=(parsed.tag,))
            docs = [d for d in _all_documents(scope, filters) if parsed.tag in (d.get("tags") or [])]
        if parsed.noun in ("e-mails", "emails", "mails", "messages"):
            docs = [d for d in docs if _is_mail(d["file_path"])]
        topic, what = f"{'is' if parsed.op == 'count' else 'are'} tagged {parsed.tag}", "the tag"
    else:
        docs = _mails_from(parsed.sender or "", scope)
        topic, what = f"from {parsed.sender}", "the sender's name"
    if parsed.period is not None:
        docs = [d for d in docs if parsed.period.holds(_day_of(d.get("created_at")))]
    listed = []
    for doc in sorted(docs, key=lambda d: (d["file_path"], d["doc_id"])):
        if not filters.admits(doc["file_path"], scope.rules):
            continue  # the path backstop only ever removes
        with scope.lock:
            chunks = scope.store.document_chunks(filters, doc_id=doc["doc_id"])
        if chunks:
            listed.append(_citation(len(listed) + 1, chunks[0], None))
    examined = scope.examined()
    period = f" {parsed.period.label}" if parsed.period else ""
    return _document_answer(parsed.question, parsed.op, parsed.noun, topic + period, listed, examined, True, scope,
                            what)


def _all_documents(scope: _Scope, filters: QueryFilters) -> list[dict[str, Any]]:
    documents, offset = [], 0
    while True:
        with scope.lock:
            got = scope.store.list_documents(filters, 1000, offset)
        documents += got
        offset += 1000
        if len(got) < 1000:
            return documents


def _is_mail(path: str) -> bool:
    return path.split("#", 1)[0].lower().endswith(_MAIL)


def _mails_from(sender: str, scope: _Scope) -> list[dict[str, Any]]:
    """The e-mails of the scope whose From line (or from: tag) names `sender`: candidates by the lexical index."""
    terms = query_terms(sender)
    if not terms:
        return []
    wanted = [t.lower() for t in terms]
    found: dict[str, dict[str, Any]] = {}
    for doc_id, rows in _candidate_rows(terms, scope).items():
        row = min(rows, key=lambda r: r["chunk_index"])
        if not _is_mail(row["file_path"]):
            continue
        sent = re.search(r"^From:[^\n]*", row["text"], re.M)
        said = " ".join([sent.group(0) if sent else ""] + [t for t in row.get("tags") or [] if t.startswith("from:")])
        if all(re.search(rf"\b{re.escape(w)}\b", said, re.I) for w in wanted):
            found[doc_id] = row
    return list(found.values())


def _day_of(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value[:10]) if value else None
    except ValueError:
        return None


# --- the candidate chunks and their units ------------------------------------------------------------------------

def _candidate_rows(terms: list[str], scope: _Scope) -> dict[str, list[dict[str, Any]]]:
    """Every admitted chunk row of the scope holding a word of `terms`, by document."""
    with scope.lock:
        ranked = scope.store.lexical_search(terms, scope.filters, MAX_LIST_CHUNKS)
    reader = RowReader(scope.store, scope.filters, scope.rules)
    documents: dict[str, list[dict[str, Any]]] = {}
    for start in range(0, len(ranked), FETCH_BATCH):
        batch = [rowid for rowid, _ in ranked[start:start + FETCH_BATCH]]
        with scope.lock:
            reader.read(batch)
        for rowid in batch:
            if reader.admitted(rowid):
                row = reader.rows[rowid]
                documents.setdefault(row["doc_id"], []).append(row)
    for rows in documents.values():
        rows.sort(key=lambda r: r["chunk_index"])
    scope.options.validate()
    return documents


def _spans(text: str, rows: bool) -> list[tuple[int, int]]:
    """(start, end) of each unit of a chunk: a line of a sheet, a sentence (or line) of anything else."""
    spans = []
    pattern = re.compile(r"[^\n]+") if rows else _SENTENCE
    for found in pattern.finditer(text):
        start, end = found.start(), found.end()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end - start > 1:
            spans.append((start, end))
    return spans


def _stems(text: str) -> set[str]:
    return set(text_analyzer().analyze(text.replace("'s", "")))


def _units(doc_id: str, rows: list[dict[str, Any]]) -> list[_Unit]:
    """The units of a document's candidate chunks, each once (overlapping chunks repeat text), with their amount
    and day: a sheet row's from its columns, a sentence's from what it states, else the document's date."""
    seen: set[str] = set()
    units = []
    sheet = tabular(rows[0]["file_path"])
    document_day = _day_of(rows[0].get("created_at"))
    for row in rows:
        for start, end in _spans(row["text"], sheet):
            unit = _Unit(doc_id, row, start, end, None)
            if unit.text in seen:
                continue
            seen.add(unit.text)
            unit.fields = row_fields(unit.text) if sheet else None
            if unit.fields is not None:
                money = row_amount(unit.fields)
                unit.amount, unit.currency = money if money else (None, None)
                unit.day = row_date(unit.fields)  # a row without a date column has none (not the file's)
            else:
                stated = amounts(unit.text)
                if stated:
                    unit.amount, unit.currency = stated[0].value, stated[0].currency
                days = dates(unit.text)
                unit.day = days[0].day if days else document_day
            units.append(unit)
    return units


def _head(rows: list[dict[str, Any]]) -> set[str]:
    """The stems of a document's head (its title and the start of its first chunk); none for a sheet."""
    first = rows[0]
    if tabular(first["file_path"]):
        return set()
    start = first["text"][:HEAD_CHARS] if first["chunk_index"] == 0 else ""
    return _stems(f"{first.get('title') or ''} {start}")


# --- sums, counts, averages, earliest and latest ----------------------------------------------------------------

def _aggregate(parsed: FolderQuestion, scope: _Scope) -> Answer | None:
    wanted = [_stems(topic) for topic in parsed.topics]
    terms = list(dict.fromkeys(t for topic in parsed.topics for t in query_terms(topic)))
    if not terms or not all(wanted):
        return None
    candidates = _candidate_rows(terms, scope)
    in_period = [u for u in _mentions(candidates, wanted) if parsed.period is None or parsed.period.holds(u.day)]
    priced, unpaid = _payments(in_period)
    if not priced:
        return None  # nothing to add up: the usual answer says what the notes do say
    currency = Counter(u.currency for u in priced).most_common(1)[0][0]
    counted, left_out, notes = _counted(priced, currency)
    left_out += [_left(u, "no amount") for u in _unpriced(in_period, priced)]
    left_out += [_left(u, "an amount its sentence does not call a payment") for u in unpaid]
    read_whole = sum(len(rows) for rows in candidates.values()) < MAX_LIST_CHUNKS
    complete = read_whole and not unpaid and not _other_currency(left_out)
    examined = scope.examined()
    return _figure_answer(parsed, scope, counted, left_out, notes, currency, examined, complete)


def _payments(units: list[_Unit]) -> tuple[list[_Unit], list[_Unit]]:
    """The units with an amount that count as payments, and those that do not: an amount whose sentence does not
    name the topic (only its document's title or subject does) counts when the sentence says it was paid
    ("Total: €210.00", "Amount due"), not a balance or a price in passing."""
    priced = [u for u in units if u.amount is not None]
    unpaid = [u for u in priced if not u.own and u.fields is None and not _PAYMENT.search(u.text)]
    return [u for u in priced if u not in unpaid], unpaid


def _other_currency(left_out: list[CountedUnit]) -> bool:
    return any((u.reason or "").startswith("another currency") for u in left_out)


def _mentions(candidates: dict[str, list[dict[str, Any]]], wanted: list[set[str]]) -> list[_Unit]:
    """The units that hold every word of a topic, themselves or through their document's head."""
    mentions: list[_Unit] = []
    for doc_id, rows in candidates.items():
        head = _head(rows)
        for unit in _units(doc_id, rows):
            held = _stems(unit.text) | head
            if any(topic <= held for topic in wanted):
                unit.own = any(topic <= _stems(unit.text) for topic in wanted)
                mentions.append(unit)
    return mentions


def _counted(priced: list[_Unit], currency: str | None) -> tuple[list[_Unit], list[CountedUnit], list[str]]:
    """The units counted (one per payment: the same amount on the same day stated twice is one), those left out
    (another currency, a second statement of a payment), and the notes saying what was counted once."""
    counted: list[_Unit] = []
    left_out: list[CountedUnit] = []
    notes: list[str] = []
    first: dict[tuple[Decimal | None, date | None], _Unit] = {}
    for unit in sorted(priced, key=lambda u: (u.day or date.min, u.row["file_path"], u.start)):
        if unit.currency != currency:
            left_out.append(_left(unit, f"another currency ({unit.currency or 'not stated'})"))
            continue
        key = (unit.amount, unit.day)
        same = first.get(key)
        if same is not None and (same.doc_id != unit.doc_id or unit.fields is None):
            if same.doc_id != unit.doc_id:
                notes.append(f"{unit.row['file_path']} and {same.row['file_path']} state the same payment "
                             f"({currency} {unit.amount:,.2f} on {unit.day}): counted once.")
                left_out.append(_left(unit, f"the same payment as {same.row['file_path']} (same amount and date)"))
            continue
        first.setdefault(key, unit)
        counted.append(unit)
    return counted, left_out, notes


def _unpriced(in_period: list[_Unit], priced: list[_Unit]) -> list[_Unit]:
    """The units naming the topic without an amount, one per document (the first that names it itself), of the
    documents with no amount counted."""
    with_amount = {u.doc_id for u in priced}
    chosen: dict[str, _Unit] = {}
    for unit in in_period:
        header = unit.text.lstrip().startswith(("From:", "To:", "Date:", "Subject:"))
        if unit.amount is None and unit.doc_id not in with_amount and unit.fields is None and not header and (
                unit.doc_id not in chosen or (unit.own and not chosen[unit.doc_id].own)):
            chosen[unit.doc_id] = unit
    return list(chosen.values())


def _left(unit: _Unit, reason: str) -> CountedUnit:
    return CountedUnit(unit.row["file_path"], unit.text, unit.day, unit.amount, unit.currency, None, reason)


def _money(value: Decimal, currency: str | None) -> str:
    return f"{currency or ''} {value:,.2f}".strip()


def _figure(op: str, counted: list[_Unit]) -> tuple[str, list[_Unit]]:
    """The figure an op states over the counted units, and the units it rests on."""
    total = sum((u.amount for u in counted if u.amount is not None), Decimal(0))
    if op == "sum":
        return f"{total:.2f}", counted
    if op == "average":
        return f"{total / len(counted):.2f}", counted
    if op == "count":
        return str(len(counted)), counted
    pick = (min if op == "earliest" else max)(counted, key=lambda u: u.day or date.min)
    return (pick.day.isoformat() if pick.day else ""), [pick]


def _figure_answer(parsed: FolderQuestion, scope: _Scope, counted: list[_Unit], left_out: list[CountedUnit],
                   notes: list[str], currency: str | None, examined: int, complete: bool) -> Answer:
    figure, cited_units = _figure(parsed.op, counted)
    citations = tuple(_citation(i, u.row, Quote(u.text, u.start, u.end)) for i, u in enumerate(cited_units, 1))
    units = tuple(CountedUnit(u.row["file_path"], u.text, u.day, u.amount, u.currency, i)
                  for i, u in enumerate(cited_units, 1))
    unit = currency if parsed.op in ("sum", "average") else "date" if parsed.op in ("earliest", "latest") else (
        "rows" if parsed.rows else "payments")
    topic = " or ".join(parsed.topics) if parsed.topics else _where_text(parsed)
    aggregate = Aggregate(parsed.op, topic, examined, len(cited_units), complete, 0, len(cited_units), None,
                          figure, unit, parsed.period, units, tuple(left_out), tuple(notes))
    text = _text(parsed, aggregate, currency)
    return Answer(question=parsed.question, text=text, refused=False, citations=citations, provider="aggregate",
                  gate=None, listing=aggregate, memory=decide(parsed.question).to_dict(),
                  retrieval={"mode": "aggregate", "filters": scope.filters.describe(scope.rules).to_dict(),
                             "retrieved": len(counted) + len(left_out), "relevant": len(citations),
                             "min_similarity": scope.options.min_similarity, "best_similarity": None})


def _headline(parsed: FolderQuestion, aggregate: Aggregate, currency: str | None) -> str:
    period = f" {parsed.period.label}" if parsed.period else ""
    count = aggregate.matched
    about = f" for {aggregate.topic}" if parsed.topics else f" where {aggregate.topic}"
    if parsed.op == "sum":
        return (f"Total{about}{period}: {_money(Decimal(aggregate.figure or 0), currency)}, "
                f"{count} {'payment' if not parsed.rows else 'row'}{'' if count == 1 else 's'} added.")
    if parsed.op == "average":
        return f"Average{about}{period}: {_money(Decimal(aggregate.figure or 0), currency)} over {count}."
    if parsed.op == "count":
        noun = "rows" if parsed.rows else "payments"
        return f"{count} {noun if count != 1 else noun[:-1]}{about}{period}."
    return f"The {parsed.op}{about}{period}: {aggregate.figure}."


def _text(parsed: FolderQuestion, aggregate: Aggregate, currency: str | None) -> str:
    lines = [_headline(parsed, aggregate, currency)]
    for unit in aggregate.units:
        amount = f"{_money(unit.amount, unit.currency)}, " if unit.amount is not None else ""
        lines.append(f"- {unit.day or 'undated'}: {amount}\"{unit.quote}\" [{unit.n}]")
    lines += list(aggregate.notes)
    for unit in aggregate.left_out:
        if not unit.reason or not unit.reason.startswith("the same payment"):
            lines.append(f"Left out ({unit.reason}): {unit.source}: \"{unit.quote}\"")
    lines.append(f"Examined {aggregate.examined} document{'' if aggregate.examined == 1 else 's'} in your scope."
                 + ("" if aggregate.complete else " Not complete: see what was left out."))
    return "\n".join(lines)


def _citation(n: int, row: dict[str, Any], quote: Quote | None) -> Citation:
    hit = Ranked(row).to_hit(n)
    return Citation(n, row["file_path"], hit_locator(hit),
                    snippet(row["text"], CITATION_SNIPPET_CHARS, tabular(row["file_path"])), None, quote,
                    (quote,) if quote is not None else ())


# --- sheet rows as records --------------------------------------------------------------------------------------

def _where_text(parsed: FolderQuestion) -> str:
    column, value = parsed.where or (None, "")
    return f"{column} is {value}" if column else f"a column is {value}"


def _header_match(header: str, name: str) -> bool:
    wanted = _stems(name)
    return bool(wanted) and wanted <= _stems(header)


def _sum_column(fields: dict[str, str], named: str | None) -> str | None:
    """The column a rows total adds: the one named, when it is a money column or named exactly ("amount" for
    "amount (EUR)"; not "order" for "the orders": the sheet's money column then), else the money column."""
    money = money_column(list(fields))
    name = re.sub(r"^(?:the|my)\s+", "", (named or "").strip(), flags=re.I).casefold()
    for header in fields:
        plain = re.sub(r"\s*\(.*?\)\s*", "", header).strip().casefold()
        if name and (plain == name or (header == money and _header_match(header, name))):
            return header
    return money


def _row_matches(fields: dict[str, str], parsed: FolderQuestion, path: str) -> bool:
    column, value = parsed.where or (None, "")
    wanted = value.strip().casefold()
    if column is None:
        noun = _stems(parsed.noun)
        named = noun <= _stems(path.rsplit("/", 1)[-1].replace("-", " ").replace("_", " ")) or any(
            noun <= _stems(h) for h in fields)
        return named and any(v.strip().casefold() == wanted for v in fields.values())
    return any(_header_match(h, column) and v.strip().casefold() == wanted for h, v in fields.items())


def _rows(parsed: FolderQuestion, scope: _Scope) -> Answer | None:
    _, value = parsed.where or (None, "")
    terms = query_terms(value)
    if not terms:
        return None
    matched: list[_Unit] = []
    for doc_id, rows in _candidate_rows(terms, scope).items():
        if tabular(rows[0]["file_path"]):
            matched += [unit for unit in _units(doc_id, rows)
                        if unit.fields is not None and _row_matches(unit.fields, parsed, unit.row["file_path"])]
    counted, left_out, currency = _row_amounts(matched, parsed) if parsed.op == "sum" else (matched, [], None)
    if not counted:
        return None
    examined = scope.examined()
    return _figure_answer(parsed, scope, counted, left_out, [], currency, examined, not left_out)


def _row_amounts(matched: list[_Unit], parsed: FolderQuestion) -> tuple[list[_Unit], list[CountedUnit], str | None]:
    """The rows a total adds (their amount in the column it names, in the most common currency), the rows it
    leaves out (no amount there, another currency) and the currency."""
    for unit in matched:
        assert unit.fields is not None
        money = row_amount(unit.fields, _sum_column(unit.fields, parsed.column))
        unit.amount, unit.currency = money if money else (None, None)
    if not matched:
        return [], [], None
    currency = Counter(u.currency for u in matched).most_common(1)[0][0]
    left_out = [_left(u, "no amount in the column") for u in matched if u.amount is None]
    left_out += [_left(u, f"another currency ({u.currency})") for u in matched
                 if u.amount is not None and u.currency != currency]
    return [u for u in matched if u.amount is not None and u.currency == currency], left_out, currency


__all__: Sequence[str] = ["Aggregate", "CountedUnit", "whole_folder"]
