"""`ask`: retrieve, decide whether what was retrieved answers the question, answer from it with citations, or
refuse.

Order of work: the usual search (same filters and mode as `query`); the cosine similarity of every retrieved
chunk to the question (the lexical side's chunks are scored from their stored vectors) and of every sentence of
the top chunks; the relevance gate (answer/gate.py) turns these and the lexical signals into a probability, and
below its threshold the answer is the refusal sentence. Otherwise the relevant chunks, best first, without
duplicate text and within a token budget, are screened for prompt injection and handed to the first provider of
the chain that answers. An explicit `min_similarity` replaces the gate with the cosine threshold `ask` used before it.
An answer's citation markers are checked against what was handed over: a marker that points at nothing is
removed, and an LLM answer with no valid marker counts as a failure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any, cast

import httpx
import numpy as np

from ragstead.answer.base import DEFAULT_MIN_SIMILARITY as DEFAULT_MIN_SIMILARITY  # re-exported (knowledge_base, tests)
from ragstead.answer.base import (
    REFUSAL,
    AnswerProvider,
    Context,
    Listing,
    Locator,
    ProviderError,
    ToolCallingProvider,
)
from ragstead.answer.consent import LocalOnly
from ragstead.answer.evidence import answer_type, asked_terms, line_structured, missing_names, question_parts
from ragstead.answer.extractive import ExtractiveAnswerer, reader_order
from ragstead.answer.gate import (
    EVIDENCE_CHUNKS,
    Candidate,
    GateModel,
    Signals,
    confidence,
    lexical_ceilings,
    load_model,
    measure,
)
from ragstead.answer.gate import UnitVectorCache as UnitVectorCache
from ragstead.answer.prompt import PromptTemplate
from ragstead.answer.quotes import Quote, joined, quote_markers
from ragstead.answer.registry import DEFAULT_ORDER, AnswererSetup, answerer_chain
from ragstead.answer.screening import screen
from ragstead.answer.supersession import document_day, label_superseded, superseded_in
from ragstead.answer.tools import ToolRegistry, ToolSession
from ragstead.core import egress
from ragstead.documents.metadata import PathRule
from ragstead.documents.sources import tabular
from ragstead.embeddings.base import Embedder
from ragstead.errors import InvalidQueryError
from ragstead.filters import QueryFilters
from ragstead.memory.decision import decide
from ragstead.records import Record
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.rerank import Reranker
from ragstead.retrieval.search import Hit, SearchOptions, SearchResult, search, snippet
from ragstead.stores.base import Store

DEFAULT_MAX_CONTEXT_TOKENS = 3000
CITATION_SNIPPET_CHARS = 240
# Once the gate answers, a chunk is handed over when its own cosine, or its best sentence's, reaches this: the
# right note can score low as a whole (a long note, one relevant line) but not in every sentence.
CONTEXT_FLOOR = 0.3
_MARKER = re.compile(r"\[(\d{1,3})\]")
# A name of the question that the handed-over text lacks makes the answer tentative (docs/design.md, "Answer
# selection and context": no answer of the notes fit or held-out half changed its confidence).
MISSING_NAMES_TENTATIVE = True
# ... and so does one the quoted sentences lack, read with their note's title and headings (docs/benchmarks.md,
# "The reader").
QUOTED_NAMES_TENTATIVE = True


@dataclass(frozen=True)
class AskOptions:
    """How `ask` retrieves, decides and budgets; providers come separately.

    `min_similarity`: None lets the relevance gate decide (at `min_confidence`, default the model's threshold);
    a number replaces the gate with that cosine threshold per chunk. `group_sources`: hand the chunks over
    source by source (each source's best chunk first) rather than in rank order; off, because it measured
    no better on the notes set (docs/benchmarks.md, "Answers")."""

    search: SearchOptions
    min_similarity: float | None = None
    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    reranker: Reranker | None = None
    min_confidence: float | None = None
    group_sources: bool = False
    gate: GateModel | None = None  # None: the shipped model
    local_only: tuple[str, ...] = ()  # patterns of documents never handed to a remote answerer (answer/consent.py)

    def validate(self) -> None:
        if self.min_confidence is not None and not 0.0 <= self.min_confidence <= 1.0:
            raise InvalidQueryError(f"min_confidence must be between 0 and 1, got {self.min_confidence}")
        if self.min_similarity is not None and not -1.0 <= self.min_similarity <= 1.0:
            raise InvalidQueryError(f"min_similarity must be between -1 and 1, got {self.min_similarity}")


def providers_from_env(env: dict[str, str] | None = None, timeout: float = 60.0,
                       template: PromptTemplate | None = None,
                       transport: httpx.BaseTransport | None = None,
                       remote: Collection[str] = ()) -> list[AnswerProvider]:
    """The built-in answerers' chain in their default order (openai, gemini, extractive last), each one the
    environment sets up: RAGSTEAD_OPENAI_BASE_URL (+ RAGSTEAD_OPENAI_MODEL, OPENAI_API_KEY) for any
    OpenAI-compatible server, OPENAI_API_KEY alone for api.openai.com, GEMINI_API_KEY (+ RAGSTEAD_GEMINI_MODEL,
    RAGSTEAD_GEMINI_BASE_URL) for Gemini. A server on loopback is local and always used; one elsewhere only
    when `remote` (config `answerers`, `ask --llm`) names it (answer/registry.py, answer/consent.py). `template`
    (default: the `grounded` template) shapes every LLM's prompt; the extractive answerer needs none.
    """
    setup = AnswererSetup(dict(os.environ if env is None else env), template, timeout, transport)
    return answerer_chain(setup, DEFAULT_ORDER, remote)


@dataclass(frozen=True)
class Citation:
    """A retrieved chunk an answer cites as `[n]`, with the sentence(s) it quotes: `quote` is the chunk's text
    from `char_start` to `char_end` (offsets into the chunk's text; None for a tool's result)."""

    n: int
    source: str
    locator: Locator
    snippet: str
    similarity: float | None  # None: a tool's result (answer/tools.py), not a retrieved chunk
    quote: Quote | None = None  # the first sentence(s) it backs in the answer's order, adjacent ones joined
    quotes: tuple[Quote, ...] = ()  # every sentence of it the answer rests on, in the answer's order
    superseded_by: int | None = None  # the citation of a newer document that says otherwise (Answer.superseded)

    @property
    def where(self) -> str:
        """A short locator a person reads: the file's path, or an ingested page's title, then in parentheses the
        section or heading, the page, and an ingested page's URL (a video's at its time):
        `notes/lease.pdf (Dates › p. 2)`, `Sourdough basics (https://example.org/sourdough)`."""
        loc = self.locator
        # An ingested page is labelled by its title: its heading would say it twice. A file is labelled by its
        # path, so its title (an HTML page's <title>, a PDF's) is what the parentheses add.
        heading = loc.get("heading") if not loc.get("url") or loc.get("heading") != loc.get("title") else None
        places = [s.strip() for s in (loc.get("section_path") or "").split(">") if s.strip()] or (
            [heading] if heading else [])
        if loc.get("page"):
            places.append(f"p. {loc['page']}")
        label = self.source
        if loc.get("url"):
            time = loc.get("video_time")
            places.append((loc.get("link") or loc["url"]) + (f" at {time // 60}:{time % 60:02d}"
                                                              if isinstance(time, int) else ""))
            label = loc.get("title") or ""
            if not label:
                label, places = places[-1], places[:-1]
        return f"{label} ({' › '.join(places)})" if places else label

    def to_dict(self) -> dict[str, Any]:
        quoted = self.quote.to_dict() if self.quote else {"quote": None, "char_start": None, "char_end": None}
        data = {"n": self.n, "source": self.source, "locator": dict(self.locator), "snippet": self.snippet,
                "similarity": self.similarity, **quoted, "quotes": [q.to_dict() for q in self.quotes]}
        if self.superseded_by is not None:
            data["superseded_by"] = self.superseded_by
        return data


@dataclass(frozen=True)
class Superseded(Record):
    """A cited statement a newer document replaces: citation `n` (its `source`, its document's `date`, the
    sentence `quote`) says otherwise than citation `superseded_by` (`newer_source`, `newer_date`), which leads."""

    n: int
    source: str
    date: str
    quote: str
    superseded_by: int
    newer_source: str
    newer_date: str

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "source": self.source, "date": self.date, "quote": self.quote,
                "superseded_by": self.superseded_by, "newer_source": self.newer_source, "newer_date": self.newer_date}


@dataclass(frozen=True)
class Answer:
    """What `ask` returns: the answer text with its citations, or the refusal. `to_dict()` is the ask JSON."""

    question: str
    text: str
    refused: bool
    citations: tuple[Citation, ...]
    provider: str | None
    retrieval: dict[str, Any]
    memory: dict[str, Any]
    gate: Relevance | None = None  # the relevance gate's verdict; None: not gathered
    flagged: tuple[dict[str, Any], ...] = ()
    fallbacks: tuple[dict[str, str], ...] = ()
    memory_write: dict[str, Any] | None = None  # set by `ask(..., remember=True)`
    withheld: tuple[str, ...] = ()  # local-only sources kept from the remote answerer that answered
    notes: tuple[str, ...] = ()  # what the citation check dropped ("citation [2] was dropped: ...")
    superseded: tuple[Superseded, ...] = ()  # cited statements a newer document says otherwise (answer/supersession.py)
    listing: Listing | None = None  # a complete list or count answer (answer/listing.py); None: an answer from top k

    @property
    def kind(self) -> str:
        """`answer` (from the top k), or `list` / `count` (every matching document of the scope)."""
        return self.listing.kind if self.listing is not None else "answer"

    def explain(self, knob: Callable[[str], str] = str) -> str:
        """Who answered, how sure, or why nothing did and which setting to change: one sentence every door shows
        (the ask JSON's `explanation`; the CLI's last line). `knob` spells a setting as the door does (the CLI:
        `--min-confidence`; the JSON: `min_confidence`)."""
        gate, retrieval = self.gate, self.retrieval
        if not self.refused:
            if gate is not None and gate.confidence == "tentative":
                return (f"answered by {self.provider}, tentatively (relevance {gate.score:.2f}): the sources may "
                        "not hold this answer; check the citations")
            return f"answered by {self.provider}" + (f" (relevance {gate.score:.2f})" if gate is not None else "")
        if self.provider:
            return f"answered by {self.provider}: the {retrieval['relevant']} chunks it was given do not answer it"
        if retrieval["relevant"]:
            return "no answerer gave a cited answer (see the notes above)"
        best = retrieval.get("best_similarity")
        if best is None:
            scope = ", ".join(knob(name) for name in ("user", "doc_type", "public_only", "include_archive"))
            return f"nothing in scope was retrieved; widen the scope ({scope}) or run `ragstead index`"
        if gate is None or gate.decided_by == "min_similarity":
            return (f"best match {best:.3f} < {knob('min_similarity')} {retrieval['min_similarity']}; lower it to "
                    "answer from weaker matches")
        return (f"relevance {gate.score:.2f} < gate {gate.threshold:.2f} (best match {best:.3f}); lower "
                f"{knob('min_confidence')} to answer from weaker matches")

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind, **(self.listing.to_dict() if self.listing is not None else {}),
            "question": self.question, "retrieval": self.retrieval,
            "gate": self.gate.to_dict() if self.gate is not None else None, "memory": self.memory,
            "flagged": list(self.flagged), "fallbacks": list(self.fallbacks), "answer": self.text,
            "refused": self.refused, "citations": [c.to_dict() for c in self.citations], "provider": self.provider,
            "notes": list(self.notes), "explanation": self.explain(),
        }
        if self.memory_write is not None:
            data["memory_write"] = self.memory_write
        if self.withheld:
            data["withheld"] = list(self.withheld)
        if self.superseded:
            data["superseded"] = [s.to_dict() for s in self.superseded]
        return data


_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
# A title an editor filled in for its writer ("Untitled", "Document1", "Microsoft Word - x.docx") names nothing:
# the file's own name is cited instead.
_PLACEHOLDER_TITLE = re.compile(r"^\s*(untitled\b.*|document\s*\d*|microsoft (word|powerpoint) - .*|"
                                r"new document|slide \d+|\s*)$", re.I)


def hit_locator(hit: Hit) -> Locator:
    """Where a cited chunk sits: its page (PDF), its section path (markdown chunker), and a heading a person
    recognises: the first markdown heading in the chunk, else the document's title (a placeholder title such as
    "Untitled" names nothing). An ingested document's citation also shows its URL (and the video time)."""
    title = None if _PLACEHOLDER_TITLE.match(hit.title or "") else hit.title
    found = _HEADING.search(hit.text)
    heading = found.group(1).strip() if found else title
    if hit.source_url:
        return Locator(hit.page, hit.section_path, heading or None, hit.chunk_id, url=hit.source_url, link=hit.link,
                       video_time=hit.video_time, title=title or None)
    return Locator(hit.page, hit.section_path, heading or None, hit.chunk_id, title=title or None)


def ask(
    question: str,
    store: Store,
    embedder: Embedder,
    filters: QueryFilters,
    options: AskOptions,
    providers: list[AnswerProvider],
    rules: tuple[PathRule, ...],
    on_text: Callable[[str], None] | None = None,
) -> Answer:
    """Answer `question` from the index, or refuse."""
    found, contexts = gather(question, store, embedder, filters, options, rules)
    return answer(found, contexts, options.min_similarity, providers, on_text)


@dataclass(frozen=True)
class Relevance(Record):
    """The gate's verdict for one question: its probability `score`, the `threshold` it was held to, whether it
    `passed`, what decided (`gate`, or `min_similarity` when that was given), and the signals it read."""

    score: float
    threshold: float
    passed: bool
    decided_by: str
    signals: Signals
    missing: tuple[str, ...] = ()  # the question's names the handed-over text lacks (evidence.missing_names)
    untyped: str | None = None  # the type of value asked for (a time, a date, an amount) that the answer lacks

    @property
    def confidence(self) -> str:
        """`likely`, `tentative` or `refused` (gate.confidence); an answer whose evidence lacks a name of the
        question, or whose text lacks the type of value asked for ("what time …?" answered without a time), is
        tentative whatever the score: it is likely about something else."""
        verdict = confidence(self.score, self.passed)
        return "tentative" if verdict == "likely" and (self.missing or self.untyped) else verdict

    def to_dict(self) -> dict[str, Any]:
        return {"score": round(self.score, 4), "threshold": self.threshold, "passed": self.passed,
                "confidence": self.confidence, "decided_by": self.decided_by, "signals": self.signals.to_dict()}


class Contexts(list[Context]):
    """The chunks `gather` hands to the answerers; `best_similarity`: the highest cosine of any retrieved chunk
    to the question, handed over or not (None when nothing was retrieved); `relevance`: the gate's verdict."""

    best_similarity: float | None = None
    relevance: Relevance | None = None


def gather(
    question: str,
    store: Store,
    embedder: Embedder,
    filters: QueryFilters,
    options: AskOptions,
    rules: tuple[PathRule, ...],
    cache: UnitVectorCache | None = None,
) -> tuple[SearchResult, Contexts]:
    """The store-side half of `ask`: search, score, gate, order, budget and screen. Returns (search result,
    contexts). `cache` keeps sentence vectors between questions (a KnowledgeBase holds one)."""
    options.validate()
    found = search(question, store, embedder, filters, options.search, rules, options.reranker)
    query_vector = found.query_vector if found.query_vector is not None else embedder.embed_query(found.question)
    hits = list(found.hits)
    similarities = _similarities(hits, store, query_vector)
    lexical = _lexical_scores(found, store, filters)
    candidates = [Candidate(hit.text, sim, lexical.get(hit.chunk_id), line_structured(hit.file_path))
                  for hit, sim in zip(hits, similarities, strict=True)]
    cache = cache or UnitVectorCache(embedder)
    unit_similarities = {i: cache.vectors(hits[i].text, candidates[i].lines) @ query_vector
                         for i in range(min(EVIDENCE_CHUNKS, len(hits)))}
    model = options.gate or load_model()
    ceilings = lexical_ceilings(store, asked_terms(found.question), filters) if hits else {}
    signals, _ = measure(found.question, candidates, unit_similarities, ceilings, model.sentence,
                         model.cosine_map(embedder.name))
    score = model.probability(signals) if hits else 0.0
    contexts = Contexts()
    contexts.best_similarity = max(similarities, default=None)
    contexts.relevance, floor = _verdict(options, model, score if hits else 0.0, signals, similarities)
    if not contexts.relevance.passed:
        return found, contexts
    relevance = [max(sim, float(unit_similarities[i].max()) if i in unit_similarities and
                     unit_similarities[i].size else -1.0) for i, sim in enumerate(similarities)]
    if options.min_similarity is None:
        floor = min(floor, max(relevance))  # past the gate, the best chunk is always handed over
        similarities_read = relevance
    else:
        similarities_read = similarities

    def units(i: int) -> np.ndarray:  # the reader scores every unit handed over
        return unit_similarities[i] if i in unit_similarities else (
            cache.vectors(hits[i].text, candidates[i].lines) @ query_vector)

    _hand_over(contexts, hits, similarities, [i for i in _order(hits, options.group_sources)
                                              if similarities_read[i] >= floor], units, options)
    if MISSING_NAMES_TENTATIVE and contexts.relevance is not None:
        missing = tuple(missing_names(found.question, [c.text for c in contexts]))
        contexts.relevance = replace(contexts.relevance, missing=missing)
    return found, contexts


def _verdict(options: AskOptions, model: GateModel, score: float, signals: Signals,
             similarities: list[float]) -> tuple[Relevance, float]:
    """The gate's verdict (or, with `min_similarity`, the cosine rule's) and the floor a chunk's relevance must
    reach to be handed over."""
    if options.min_similarity is not None:
        passed = any(sim >= options.min_similarity for sim in similarities)
        return Relevance(score, options.min_similarity, passed, "min_similarity", signals), options.min_similarity
    threshold = model.threshold if options.min_confidence is None else options.min_confidence
    return Relevance(score, threshold, bool(similarities) and score >= threshold, "gate", signals), CONTEXT_FLOOR


def _hand_over(contexts: Contexts, hits: list[Hit], similarities: list[float], order: list[int],
               units: Callable[[int], np.ndarray], options: AskOptions) -> None:
    """Append the chunks at `order` to `contexts`, within the token budget, each text once, screened."""
    budget = options.max_context_tokens
    local_only = LocalOnly(options.local_only)
    seen: set[str] = set()
    for i in order:
        hit = hits[i]
        text = " ".join(hit.text.split())
        if text in seen or (hit.token_estimate > budget and contexts):
            continue  # the same text again (a copy of a file) adds nothing; over budget: the next may fit
        seen.add(text)
        budget -= hit.token_estimate
        contexts.append(Context(len(contexts) + 1, hit.text, hit.file_path, hit_locator(hit), round(similarities[i], 4),
                                screen(hit.text), tuple(float(x) for x in units(i)),
                                local_only(hit.file_path, hit.tags), document_day(hit.created_at)))


def _similarities(hits: list[Hit], store: Store, query_vector: np.ndarray) -> list[float]:
    """Each hit's cosine to the question; the lexical side's hits are scored from their stored vectors."""
    stored = store.chunk_vectors([hit.chunk_id for hit in hits if hit.vector_score is None])
    out = []
    for hit in hits:
        if hit.vector_score is not None:
            out.append(hit.vector_score)
        else:
            vector = stored.get(hit.chunk_id)
            out.append(float(vector @ query_vector) if vector is not None else 0.0)
    return out


def _lexical_scores(found: SearchResult, store: Store, filters: QueryFilters) -> dict[str, float]:
    """Each hit's BM25 score by chunk id. A vector-only search has none, so the lexical side is asked once for
    the gate (it reads both sides whatever the mode)."""
    scores = {hit.chunk_id: hit.lexical_score for hit in found.hits if hit.lexical_score is not None}
    terms = query_terms(found.question)
    if scores or not found.hits or not terms or found.mode.startswith("lexical"):
        return scores
    ranked = store.lexical_search(terms, filters, max(25, len(found.hits)))
    rows = store.fetch_chunks([rowid for rowid, _ in ranked], filters)
    by_id = {rows[rowid]["chunk_id"]: score for rowid, score in ranked if rowid in rows}
    return {hit.chunk_id: by_id[hit.chunk_id] for hit in found.hits if hit.chunk_id in by_id}


def _order(hits: list[Hit], group_sources: bool) -> list[int]:
    """Hit positions in the order they are handed over: rank order, or source by source (sources in the order
    of their best chunk, each source's chunks best first), so one long note does not split the others apart."""
    if not group_sources:
        return list(range(len(hits)))
    first: dict[str, int] = {}
    for i, hit in enumerate(hits):
        first.setdefault(hit.doc_id, i)
    return sorted(range(len(hits)), key=lambda i: (first[hits[i].doc_id], i))


def answer(
    found: SearchResult,
    contexts: list[Context],
    min_similarity: float | None,
    providers: list[AnswerProvider],
    on_text: Callable[[str], None] | None = None,
    tools: ToolRegistry | None = None,
    refusal_text: str = REFUSAL,
) -> Answer:
    """The answering half of `ask` (needs no store): the provider chain over `contexts`, or the refusal.

    `refusal_text`: the sentence a refusal says (the project's `refusal` setting); an answerer that replies
    with it, or with the sentence its prompt taught (REFUSAL), refuses.

    With `tools`, an answerer that can call tools (`answer_with_tools`) may use them; their results are cited
    after the retrieved chunks. With tools and nothing retrieved, only such answerers are tried (a tool may
    answer what the documents cannot)."""
    run = _Run(found.question, _shared(found, contexts, min_similarity), refusal_text, on_text)
    tool_users = [p for p in providers if callable(getattr(p, "answer_with_tools", None))] if tools else []
    if tools is not None and not contexts:
        providers = tool_users
    if not contexts and (tools is None or not providers):
        if on_text:
            on_text(refusal_text)
        return run.refusal(None)
    for provider in providers:
        given, withheld = _handed(run.question, contexts, provider)
        if not given and contexts and tools is None:
            run.fail(provider, "every source is local-only: not sent")
            continue
        session = ToolSession(tools, len(given)) if tools is not None and provider in tool_users else None
        text = _reply(run, provider, given, session)
        if text is None:
            continue
        if text.strip() in (REFUSAL, refusal_text):
            return run.refusal(provider.name)
        shown = _cited(run, provider, [*given, *(session.contexts if session else ())], text, withheld)
        if shown is not None:
            return shown
    return run.refusal(None)


def _shared(found: SearchResult, contexts: list[Context], min_similarity: float | None) -> dict[str, Any]:
    """What every answer to this question holds, whoever answers it or refuses."""
    return {
        "question": found.question,
        "retrieval": {"mode": found.mode, "filters": found.filters.to_dict(), "retrieved": len(found.hits),
                      "relevant": len(contexts), "min_similarity": min_similarity,
                      "best_similarity": _best_similarity(contexts)},
        "gate": getattr(contexts, "relevance", None),
        # What selective memory would make of the question; `ask --remember` writes it if it says so.
        "memory": decide(found.question).to_dict(),
        "flagged": tuple({"n": c.n, "chunk_id": c.locator["chunk_id"], "reasons": c.flags}
                         for c in contexts if c.flags),
    }


@dataclass
class _Run:
    """One `answer` call as it goes down the provider chain: the question, what every answer shares, how a
    refusal reads, where text streams, and the answerers that failed so far."""

    question: str
    shared: dict[str, Any]
    refusal_text: str
    on_text: Callable[[str], None] | None
    fallbacks: list[dict[str, str]] = field(default_factory=list)

    def refusal(self, provider: str | None) -> Answer:
        return Answer(text=self.refusal_text, refused=True, citations=(), provider=provider,
                      fallbacks=tuple(self.fallbacks), **self.shared)

    def fail(self, provider: AnswerProvider, error: str) -> None:
        self.fallbacks.append({"provider": provider.name, "error": error})


def _reply(run: _Run, provider: AnswerProvider, contexts: list[Context], session: ToolSession | None) -> str | None:
    """The provider's answer text, or None when it failed (recorded as a fallback). The extractive answer is
    shown once its citations are numbered, so it does not stream."""
    extractive = isinstance(provider, ExtractiveAnswerer)
    try:
        with egress.purpose(f"llm prompt: {provider.name}", [c.source for c in contexts]):
            if session is not None:
                text = cast(ToolCallingProvider, provider).answer_with_tools(run.question, contexts, session,
                                                                             run.on_text)
            else:
                text = provider.answer(run.question, contexts, None if extractive else run.on_text)
    except ProviderError as exc:
        run.fallbacks.extend(session.fallbacks if session else ())
        run.fail(provider, str(exc))
        return None
    run.fallbacks.extend(session.fallbacks if session else ())
    return text


def _cited(run: _Run, provider: AnswerProvider, sources: list[Context], text: str,
           withheld: tuple[str, ...]) -> Answer | None:
    """The answer `text` with its citations checked against `sources`, or None (a fallback) when it cites none."""
    text, cited = _check_citations(text, len(sources))
    # Each marker is checked against its source: its quote must stand there (answer/quotes.py).
    quoted = quote_markers(text, [(c.text, not c.locator.get("tool")) for c in sources])
    text, cited = quoted.text, [n for n in cited if n in quoted.quotes]
    if not cited:
        run.fail(provider, "the answer cited no retrieved document")
        return None
    # The newer note wins: a cited statement a newer cited document says otherwise is marked superseded.
    superseded = superseded_in(run.question, [(sources[n - 1], quoted.quotes[n]) for n in cited])
    # Citations are numbered 1..n in the order the answer cites them (a context it did not cite, or a marker the
    # check dropped, leaves no gap); text streamed as it came keeps the answerer's own numbers.
    extractive = isinstance(provider, ExtractiveAnswerer)
    streamed = run.on_text is not None and not extractive
    number = {n: i for i, n in enumerate(cited, start=1)} if not streamed else {n: n for n in cited}
    text = _renumbered(text, number)
    newer = {d.older.key: number[d.newer.key] for d in superseded}
    citations = tuple(Citation(number[c.n], c.source, c.locator,
                               snippet(c.text, CITATION_SNIPPET_CHARS, tabular(c.source)), c.similarity,
                               joined(quoted.quotes[c.n], c.text), tuple(quoted.quotes[c.n]), newer.get(c.n))
                      for c in (sources[n - 1] for n in cited))
    lacking = _lacking(run, text, _read_as(sources, quoted.quotes, cited))
    if extractive:  # its sentences stand whole: each older one gets its label
        # Two notes of one day are ordered by what the newer says, not by a date: no date is shown.
        text = label_superseded(text, [(d.older.text, _shown_date(d.older.date, d.newer.date)) for d in superseded])
        if run.on_text:
            run.on_text(text)
    return Answer(text=text, refused=False, citations=citations, provider=provider.name,
                  fallbacks=tuple(run.fallbacks), withheld=withheld, notes=(*lacking, *quoted.notes),
                  superseded=tuple(Superseded(number[d.older.key], d.older.source, d.older.date or "", d.older.text,
                                              number[d.newer.key], d.newer.source, d.newer.date or "")
                                   for d in superseded), **run.shared)


def _shown_date(older: str | None, newer: str | None) -> str:
    """The date an older statement's label shows: none when unknown or the same day as the newer note."""
    return (older or "") if older != newer else ""


def _lacking(run: _Run, text: str, quoted: list[str]) -> list[str]:
    """What the answer's notes say it lacks: a name of the question the sources never mention, or that the
    quoted sentences (read with their note's title and headings) never mention ("What time is the Tuesday yoga
    class?" answered with the Thursday class, while the swimming note handed over says Tuesdays); a value the
    question (or one part of a two-part one) asks for that the answer does not hold. Each makes the gate's verdict
    tentative (Relevance.missing, Relevance.untyped): a near miss, or half an answer."""
    relevance = run.shared["gate"]
    lacking = [f"the sources never mention {', '.join(relevance.missing)}: the answer may be about something "
               "else"] if relevance is not None and relevance.missing else []
    unquoted = [name for name in missing_names(run.question, quoted) if relevance is None
                or name not in relevance.missing] if quoted else []
    if relevance is not None and unquoted:
        run.shared["gate"] = relevance = replace(relevance, missing=(*relevance.missing, *unquoted))
        lacking.append(f"the quoted sentences never mention {', '.join(unquoted)}: the answer may be about "
                       "something else")
    untyped = _untyped(run.question, _MARKER.sub("", text))
    if relevance is not None and untyped:
        run.shared["gate"] = replace(relevance, untyped=untyped[0][0])
        lacking += [f"the answer holds no {kind}, which {'the question' if part == run.question else repr(part)} "
                    "asks for" for kind, part in untyped]
    return lacking


def _read_as(sources: list[Context], quotes: dict[int, list[Quote]], cited: list[int]) -> list[str]:
    """Each quoted sentence as a person reads it in its note: after the note's first line and the markdown
    headings above it (none when QUOTED_NAMES_TENTATIVE is off)."""
    out: list[str] = []
    for n in cited if QUOTED_NAMES_TENTATIVE else ():
        source = sources[n - 1].text
        for quote in quotes[n]:
            heads = [line for line in source[:quote.char_start].splitlines() if line.lstrip().startswith("#")]
            out.append(" ".join([source.lstrip().split("\n", 1)[0], *heads, quote.text]))
    return out


def _untyped(question: str, text: str) -> list[tuple[str, str]]:
    """(type, part) for each part of the question (evidence.question_parts) that asks for a time, a date or an
    amount the answer's text does not hold."""
    return [(asked[0], part) for part in question_parts(question)
            if (asked := answer_type(part)) is not None and not asked[1].search(text)]


def _handed(question: str, contexts: list[Context],
            provider: AnswerProvider) -> tuple[list[Context], tuple[str, ...]]:
    """What `provider` is handed (`_for_provider`), and for an LLM answerer in the reader's order: the chunks
    holding the units the extractive answerer would quote lead its prompt (extractive.reader_order)."""
    given, withheld = _for_provider(contexts, provider)
    return (given if isinstance(provider, ExtractiveAnswerer) else reader_order(question, given)), withheld


def _for_provider(contexts: list[Context], provider: AnswerProvider) -> tuple[list[Context], tuple[str, ...]]:
    """The contexts `provider` may read: all of them for a local one; for a remote one, all but the local-only
    ones (renumbered), and the sources withheld from it."""
    if not getattr(provider, "remote", False) or not any(c.local_only for c in contexts):
        return contexts, ()
    kept = [replace(c, n=i) for i, c in enumerate((c for c in contexts if not c.local_only), start=1)]
    return kept, tuple(dict.fromkeys(c.source for c in contexts if c.local_only))


def _best_similarity(contexts: list[Context]) -> float | None:
    """The best cosine `gather` saw (4 decimals); for a plain list of contexts, the best among them."""
    best = getattr(contexts, "best_similarity", None)
    if best is None:
        best = max((c.similarity for c in contexts if c.similarity is not None), default=None)
    return None if best is None else round(best, 4)


def _renumbered(text: str, number: dict[int, int]) -> str:
    """`text` with each marker `[n]` as `[number[n]]` (a number not in `number` stays)."""
    return _MARKER.sub(lambda m: f"[{number.get(int(m.group(1)), int(m.group(1)))}]", text)


def _check_citations(text: str, count: int) -> tuple[str, list[int]]:
    """Drop markers that point at no handed-over context; return the text and the valid numbers in order."""
    valid: list[int] = []

    def keep(match: re.Match[str]) -> str:
        n = int(match.group(1))
        if 1 <= n <= count:
            if n not in valid:
                valid.append(n)
            return match.group(0)
        return ""

    return _MARKER.sub(keep, text).strip(), valid
