"""Complete answers to list and count questions: "which notes mention Lisbon?", "how many files are about taxes?".

An answer from the top k chunks cannot say which or how many documents of a scope hold something: it sees a
few of them. A list question is answered from the whole scope instead:

1. `list_question` recognises the question ("which/what <notes|files|documents> …", "list <notes|…> …", "how many
   <notes|…> …") and keeps its topic ("Lisbon"); anything else goes to the usual `ask`.
2. Candidates: every chunk of the scope that holds a word of the topic, by the lexical index (the scope is a
   clause of the store's query, never a filter applied afterwards), read back through the path backstop.
3. A document holding every word of the topic mentions it. One holding only some is checked like an answer:
   the relevance gate's signals over its own chunks (answer/gate.py), at the gate's threshold, and a name of the
   question it lacks rules it out, so a near miss ("the Porto trip" for "the Lisbon trip") is not listed.
4. Each listed document is cited once, with the sentence that mentions the topic quoted (`quote`, `char_start`,
   `char_end`, as any citation), in path order and paged; the answer says how many documents it examined.

Nothing is handed to an answerer: the list is the engine's own, so nothing leaves the machine.

A server's read connection is shared by its threads: `list_answer` takes the caller's `lock` for each store call
(one query, one page of rows, one document's vectors), never across the scan, so another user's query answers
while a big list is read (#45.4). The sentence vectors of the gate are computed without it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragstead.answer.ask import CITATION_SNIPPET_CHARS, Answer, AskOptions, Citation, hit_locator
from ragstead.answer.base import Listing
from ragstead.answer.evidence import held_stems, line_structured, missing_names, question_stems, split_units
from ragstead.answer.gate import EVIDENCE_CHUNKS, Candidate, UnitVectorCache, lexical_ceilings, load_model, measure
from ragstead.answer.quotes import Quote, find
from ragstead.documents.metadata import PathRule
from ragstead.documents.sources import tabular
from ragstead.embeddings.base import Embedder
from ragstead.filters import QueryFilters
from ragstead.memory.decision import decide
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.search import Candidate as Ranked
from ragstead.retrieval.search import RowReader, snippet
from ragstead.stores.base import DocumentCount, Store

# Chunks holding a topic word that one list answer reads at most; past it the answer says it is not complete.
MAX_LIST_CHUNKS = 20_000
# Documents holding only some of the topic's words that the gate checks at most (each costs sentence vectors).
MAX_GATE_CHECKS = 200
FETCH_BATCH = 500  # chunk rows read per store call
COUNT_PAGE = 1000  # documents a store without `count_documents` lists per call to count them

# Plural only: "what page is the warranty on?" asks for a fact, "what pages mention the warranty?" for a list.
_NOUNS = (r"notes|files|documents|docs|pages|journal entries|entries|articles|memos|papers|pdfs|emails|messages|"
          r"recipes|posts|bookmarks")
_OWNER = r"(?:(?:all|every|any|each)\s+)?(?:(?:of\s+)?(?:the|my|our|your)\s+)?"
_LIST_FORMS = (
    ("count", re.compile(rf"^\s*how\s+many\s+(?:of\s+)?{_OWNER}(?P<noun>{_NOUNS})\b(?P<rest>.*)$", re.I | re.S)),
    ("list", re.compile(rf"^\s*(?:which|what)\s+(?:of\s+)?{_OWNER}(?P<noun>{_NOUNS})\b(?P<rest>.*)$", re.I | re.S)),
    ("list", re.compile(rf"^\s*(?:list|show|find|name)\s+(?:me\s+)?{_OWNER}(?P<noun>{_NOUNS})\b(?P<rest>.*)$",
                        re.I | re.S)),
)
# The words that frame a list question around its topic: "… (that|do I have that) mention(s) | talk about | are
# about | refer to | contain …". Dropped from the front of what follows the noun, repeatedly.
_FRAME = re.compile(
    r"^(?:(?:that|which|where|who|do|does|did|have|has|had|i|we|you|they|it|are|is|was|were|ever|still|"
    r"mention(?:s|ed|ing)?|talk(?:s|ed|ing)?|speak(?:s|ing)?|about|refer(?:s|red|ring)?|to|contain(?:s|ed|ing)?|"
    r"include(?:s|d)?|including|say(?:s|ing)?|said|anything|something|discuss(?:es|ed|ing)?|cover(?:s|ed|ing)?|"
    r"concern(?:s|ed|ing)?|relate(?:s|d)?|related|deal(?:s|ing)?|with|on|of|in|reference(?:s|d)?|name(?:s|d)?|"
    r"there|written|wrote|write|keep|kept|got|store[ds]?|saved)\b[\s,]*)+", re.I)
# "the word Lisbon in them": the topic is Lisbon. (An article stays: "mention the Lisbon trip" reads back whole.)
_WORD_OF = re.compile(r"^(?:the\s+)?(?:words?|terms?|names?|phrases?)\s+(?=\S)", re.I)
_IN_THEM = re.compile(r"\s+(?:in|inside)\s+(?:them|it)\s*$", re.I)


_RELATION = re.compile(
    r"\b(?:mention\w*|talk\w*|speak\w*|about|refer\w*|contain\w*|includ\w*|say\w*|said|discuss\w*|cover\w*|"
    r"concern\w*|relate\w*|deal\w*|with|on|of|in|reference\w*|name\w*|have|has|had)\b", re.I)
_STOP_TOPIC = frozenset({"mention", "mentions", "about", "list", "all", "every"})  # a topic of only these is none


@dataclass(frozen=True)
class ListQuestion:
    """A recognised list or count question: its `kind`, the documents it asks about as the person named them
    (`noun`: "notes"), and its `topic` ("Lisbon"), whose words the documents are matched on."""

    question: str
    kind: str  # list | count
    noun: str
    topic: str

    @property
    def terms(self) -> list[str]:
        return query_terms(self.topic)


def list_question(question: str) -> ListQuestion | None:
    """The list or count question `question` asks, or None for any other question (then `ask` answers from the
    top k as always). A question whose topic has no word left ("which notes?") is not one."""
    for kind, form in _LIST_FORMS:
        found = form.match(question)
        if found is None:
            continue
        rest = found.group("rest").strip()
        frame = _FRAME.match(rest)
        topic = _IN_THEM.sub("", _WORD_OF.sub("", rest[frame.end() if frame else 0:].strip().rstrip("?.! "))).strip()
        # The frame must relate the documents to the topic ("mention", "about", "with"): "what documents do I
        # need for a visa?" asks for an answer, not for the notes that say "need" and "visa".
        related = frame is not None and _RELATION.search(frame.group(0)) is not None
        if related and query_terms(topic) and any(t not in _STOP_TOPIC for t in query_terms(topic)):
            return ListQuestion(question, kind, found.group("noun").lower(), topic)
        return None
    return None


@dataclass(frozen=True)
class ListPage:
    """Which matched documents a list answer cites: `limit` of them from `offset`, in path order."""

    offset: int = 0
    limit: int = 50


@dataclass
class _Document:
    """One candidate document: its matched chunk rows, best BM25 first, and their scores."""

    rows: list[dict[str, Any]]
    scores: list[float]


def list_answer(
    asked: ListQuestion,
    store: Store,
    embedder: Embedder,
    filters: QueryFilters,
    options: AskOptions,
    rules: tuple[PathRule, ...],
    page: ListPage,
    cache: UnitVectorCache | None = None,
    lock: AbstractContextManager[Any] | None = None,
) -> Answer:
    """Every document in scope that mentions the topic of `asked`, one citation each (the `page` of them), and
    how many documents of the scope were examined. `lock` (a server's read lock) is held per store call."""
    options.validate()
    lock = lock if lock is not None else nullcontext()
    with lock:
        examined = count_documents(store, filters)
    terms = asked.terms
    with lock:
        ranked = store.lexical_search(terms, filters, MAX_LIST_CHUNKS) if examined else []
    complete = len(ranked) < MAX_LIST_CHUNKS
    documents = _candidates(ranked, store, filters, rules, lock)
    wanted = question_stems(asked.topic)
    query_vector = embedder.embed_query(asked.topic)
    matched: dict[str, _Document] = {}
    partial: list[tuple[str, _Document]] = []
    for doc_id, document in documents.items():
        held = set().union(*(held_stems(row["text"], asked.topic, wanted) for row in document.rows))
        if held >= wanted:  # every word of the topic: it mentions it, no model needed
            matched[doc_id] = document
        else:
            partial.append((doc_id, document))
    if len(partial) > MAX_GATE_CHECKS:
        partial.sort(key=lambda item: -item[1].scores[0])
        complete, partial = False, partial[:MAX_GATE_CHECKS]
    if partial:
        cache = cache or UnitVectorCache(embedder)
        with lock:
            ceilings = lexical_ceilings(store, terms, filters)
        for doc_id, document in partial:
            if _passes_gate(asked, document, store, query_vector, ceilings, options, cache, lock):
                matched[doc_id] = document
    listed = sorted(matched.values(), key=lambda document: (document.rows[0]["file_path"], document.rows[0]["doc_id"]))
    shown = listed[page.offset:page.offset + page.limit]
    evidence = [_evidence(document, asked, wanted) for document in shown]
    with lock:
        vectors = store.chunk_vectors([row["chunk_id"] for row, _, _ in evidence])
    citations = tuple(_citation(page.offset + i, row, score, quote, vectors.get(row["chunk_id"]), query_vector)
                      for i, (row, score, quote) in enumerate(evidence, start=1))
    after = page.offset + len(shown)
    listing = Listing(asked.kind, asked.topic, examined, len(listed), complete, page.offset, page.limit,
                      after if after < len(listed) else None)
    return Answer(
        question=asked.question, text=_summary(asked, listing, len(shown)), refused=False, citations=citations,
        provider="list", gate=None, listing=listing, memory=decide(asked.question).to_dict(),
        retrieval={"mode": "list", "filters": filters.describe(rules).to_dict(), "retrieved": len(ranked),
                   "relevant": len(shown), "min_similarity": options.min_similarity,
                   "best_similarity": max((c.similarity for c in citations if c.similarity is not None),
                                          default=None)})


def count_documents(store: Store, filters: QueryFilters) -> int:
    """How many documents the scope holds: the store counts them, or (a store without `count_documents`) its
    scoped document listing is paged through."""
    if isinstance(store, DocumentCount):
        return int(store.count_documents(filters))
    total, offset = 0, 0
    while True:
        got = len(store.list_documents(filters, COUNT_PAGE, offset))
        total, offset = total + got, offset + COUNT_PAGE
        if got < COUNT_PAGE:
            return total


def _candidates(ranked: list[tuple[int, float]], store: Store, filters: QueryFilters, rules: tuple[PathRule, ...],
                lock: AbstractContextManager[Any]) -> dict[str, _Document]:
    """The documents of the ranked chunks, each chunk read with the scope applied again in the store and checked
    against its path (the backstop of every search), best document first; `lock` held per page of rows."""
    reader = RowReader(store, filters, rules)
    documents: dict[str, _Document] = {}
    for start in range(0, len(ranked), FETCH_BATCH):
        batch = ranked[start:start + FETCH_BATCH]
        with lock:
            reader.read([rowid for rowid, _ in batch])
        for rowid, score in batch:
            if reader.admitted(rowid):
                row = reader.rows[rowid]
                document = documents.setdefault(row["doc_id"], _Document([], []))
                document.rows.append(row)
                document.scores.append(score)
    return documents


def _passes_gate(asked: ListQuestion, document: _Document, store: Store, query_vector: np.ndarray,
                 ceilings: dict[str, float], options: AskOptions, cache: UnitVectorCache,
                 lock: AbstractContextManager[Any]) -> bool:
    """Whether a document holding only some of the topic's words is about it: no name of the question missing,
    and the relevance gate's probability over its chunks at the gate's threshold (as `ask` decides to answer)."""
    rows = document.rows[:EVIDENCE_CHUNKS * 2]
    if missing_names(asked.question, [row["text"] for row in rows]):
        return False
    with lock:
        stored = store.chunk_vectors([row["chunk_id"] for row in rows])
    lines = line_structured(rows[0]["file_path"])
    candidates = [Candidate(row["text"], float(stored[row["chunk_id"]] @ query_vector)
                            if row["chunk_id"] in stored else 0.0, score, lines)
                  for row, score in zip(rows, document.scores, strict=False)]
    units = {i: cache.vectors(rows[i]["text"], lines) @ query_vector for i in range(min(EVIDENCE_CHUNKS, len(rows)))}
    model = options.gate or load_model()
    signals, _ = measure(asked.topic, candidates, units, ceilings, model.sentence,
                         model.cosine_map(cache.embedder.name))
    if options.min_similarity is not None:
        return signals.dense >= options.min_similarity
    threshold = model.threshold if options.min_confidence is None else options.min_confidence
    return model.probability(signals) >= threshold


def _evidence(document: _Document, asked: ListQuestion,
              wanted: set[str]) -> tuple[dict[str, Any], float, Quote | None]:
    """What a document is cited by: the chunk and sentence holding the most of the topic's words (the earliest of
    equals, best chunk first), with the chunk's BM25 score and the sentence quoted where it stands in its text
    (None when no sentence holds a word: a document the gate let in on meaning alone)."""
    best: tuple[int, int, Quote] | None = None  # (words held, row position, quote)
    for position, row in enumerate(document.rows):
        for unit in split_units(row["text"], line_structured(row["file_path"])):
            held = len(held_stems(unit.text, asked.topic, wanted))
            if held and (best is None or held > best[0]):
                quote = find(unit.text, row["text"])
                if quote is not None:
                    best = (held, position, quote)
        if best is not None and best[0] == len(wanted):
            break
    position = best[1] if best is not None else 0
    return document.rows[position], document.scores[position], best[2] if best is not None else None


def _citation(n: int, row: dict[str, Any], score: float, quote: Quote | None, vector: np.ndarray | None,
              query_vector: np.ndarray) -> Citation:
    """Citation n of a list: the chunk `row` with its quote, and its cosine to the topic (stored vector)."""
    hit = Ranked(row, lexical_score=round(score, 6)).to_hit(n)
    similarity = round(float(vector @ query_vector), 4) if vector is not None else None
    return Citation(n, row["file_path"], hit_locator(hit),
                    snippet(row["text"], CITATION_SNIPPET_CHARS, tabular(row["file_path"])), similarity, quote,
                    (quote,) if quote is not None else ())


def _summary(asked: ListQuestion, listing: Listing, shown: int) -> str:
    """The completeness line, and for a count the number first: "7 notes mention Lisbon. Examined 412 documents
    in your scope." / "Examined 412 documents in your scope; 7 mention Lisbon." Then what is left to page."""
    examined = f"examined {listing.examined} document{'' if listing.examined == 1 else 's'} in your scope"
    count = listing.matched
    verb = "mentions" if count == 1 else "mention"
    if asked.kind == "count":
        text = f"{count or 'No'} {_noun(asked.noun, count)} {verb} {asked.topic}. {examined.capitalize()}."
    else:
        text = f"{examined.capitalize()}; {count or 'none'} {verb} {asked.topic}."
    if listing.next_offset is not None:
        text += (f" Listed {listing.offset + 1}-{listing.offset + shown}; the next page starts at offset "
                 f"{listing.next_offset}.")
    elif shown == 0 and count and listing.offset:
        text += f" The offset {listing.offset} is past the last of them."
    if not listing.complete:
        text += (f" Not complete: only the first {MAX_LIST_CHUNKS} passages holding its words, or "
                 f"{MAX_GATE_CHECKS} documents holding only some of them, were read.")
    return text


def _noun(noun: str, count: int) -> str:
    """The question's own word for the documents, singular for one ("1 note"), plural otherwise."""
    singular = {"entries": "entry", "journal entries": "journal entry"}.get(noun) or (
        noun[:-1] if noun.endswith("s") else noun)
    plural = noun if noun != singular else {"entry": "entries", "journal entry": "journal entries"}.get(
        noun, noun + "s")
    return singular if count == 1 else plural


__all__: Sequence[str] = ["ListPage", "ListQuestion", "count_documents", "list_answer", "list_question"]
