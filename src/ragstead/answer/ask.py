"""`ask`: retrieve, keep only what is relevant, answer from it with citations, or refuse.

Order of work: the usual search (same filters and mode as `query`); the cosine similarity of every
retrieved chunk to the question (the lexical side's chunks are scored from their stored vectors);
chunks under `min_similarity` are dropped, and if none is left the answer is the refusal sentence. The
rest, within a token budget, are screened for prompt injection and handed to the first provider of the
chain that answers. An answer's citation markers are checked against what was handed over: a marker
that points at nothing is removed, and an LLM answer with no valid marker counts as a failure.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import httpx

from ragstead.answer.base import REFUSAL, AnswerProvider, Context, ProviderError, ToolCallingProvider
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.prompt import PromptTemplate
from ragstead.answer.providers import GeminiAnswerer, OpenAICompatibleAnswerer
from ragstead.answer.screening import screen
from ragstead.answer.tools import ToolRegistry, ToolSession
from ragstead.documents.metadata import PathRule
from ragstead.embeddings.base import Embedder
from ragstead.filters import QueryFilters
from ragstead.memory.decision import decide
from ragstead.retrieval.rerank import Reranker
from ragstead.retrieval.search import Hit, SearchOptions, SearchResult, search, snippet
from ragstead.stores.base import Store

# Calibrated by `python -m bench refusal` on SciFact train: answers 95 % of answerable train queries,
# refuses 97 % of off-topic questions (bench/results/refusal_calibration.md).
DEFAULT_MIN_SIMILARITY = 0.428
DEFAULT_MAX_CONTEXT_TOKENS = 3000
CITATION_SNIPPET_CHARS = 240
_MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class AskOptions:
    """How `ask` retrieves and budgets; providers come separately."""

    search: SearchOptions
    min_similarity: float = DEFAULT_MIN_SIMILARITY
    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    reranker: Reranker | None = None


def providers_from_env(env: dict[str, str] | None = None, timeout: float = 60.0,
                       template: PromptTemplate | None = None,
                       transport: httpx.BaseTransport | None = None) -> list[AnswerProvider]:
    """The fallback chain from configured endpoints and keys, in this order, extractive always last.

    RAGSTEAD_OPENAI_BASE_URL (+ RAGSTEAD_OPENAI_MODEL, OPENAI_API_KEY) for any OpenAI-compatible server,
    OPENAI_API_KEY alone for api.openai.com, GEMINI_API_KEY (+ RAGSTEAD_GEMINI_MODEL,
    RAGSTEAD_GEMINI_BASE_URL) for Gemini. Nothing configured: extractive only (offline). `template`
    (default: the `grounded` template) shapes every LLM's prompt; the extractive answerer needs none.
    """
    env = dict(os.environ if env is None else env)
    chain: list[AnswerProvider] = []
    base_url = env.get("RAGSTEAD_OPENAI_BASE_URL") or ("https://api.openai.com/v1" if env.get("OPENAI_API_KEY") else "")
    if base_url:
        chain.append(OpenAICompatibleAnswerer(base_url, env.get("RAGSTEAD_OPENAI_MODEL", "gpt-4o-mini"),
                                              env.get("OPENAI_API_KEY"), timeout, template, transport=transport))
    if env.get("GEMINI_API_KEY"):
        gemini_base = env.get("RAGSTEAD_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com/v1beta")
        chain.append(GeminiAnswerer(env["GEMINI_API_KEY"], env.get("RAGSTEAD_GEMINI_MODEL", "gemini-2.0-flash"),
                                    gemini_base, timeout, template, transport=transport))
    chain.append(ExtractiveAnswerer())
    return chain


@dataclass(frozen=True)
class Citation:
    """A retrieved chunk an answer cites as `[n]`."""

    n: int
    source: str
    locator: dict[str, Any]
    snippet: str
    similarity: float | None  # None: a tool's result (answer/tools.py), not a retrieved chunk

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "source": self.source, "locator": self.locator, "snippet": self.snippet,
                "similarity": self.similarity}


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
    flagged: tuple[dict[str, Any], ...] = ()
    fallbacks: tuple[dict[str, str], ...] = ()
    memory_write: dict[str, Any] | None = None  # set by `ask(..., remember=True)`

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "question": self.question, "retrieval": self.retrieval, "memory": self.memory,
            "flagged": list(self.flagged), "fallbacks": list(self.fallbacks), "answer": self.text,
            "refused": self.refused, "citations": [c.to_dict() for c in self.citations], "provider": self.provider,
        }
        if self.memory_write is not None:
            data["memory_write"] = self.memory_write
        return data


_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def _locator(hit: Hit) -> dict[str, Any]:
    """Where a cited chunk sits: its page (PDF), its section path (markdown chunker), and a heading a person
    recognises: the first markdown heading in the chunk, else the document's title."""
    found = _HEADING.search(hit.text)
    heading = found.group(1).strip() if found else hit.title
    locator = {"page": hit.page, "section_path": hit.section_path, "heading": heading or None,
               "chunk_id": hit.chunk_id}
    if hit.source_url:  # an ingested document: the citation shows its URL (and the video time)
        locator.update(url=hit.source_url, link=hit.link, video_time=hit.video_time)
    return locator


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


class Contexts(list[Context]):
    """The chunks `gather` hands to the answerers, and `best_similarity`: the highest cosine of any retrieved
    chunk to the question, gated out or not (None when nothing was retrieved), so a refusal can say how close
    the best match came to `min_similarity`."""

    best_similarity: float | None = None


def gather(
    question: str,
    store: Store,
    embedder: Embedder,
    filters: QueryFilters,
    options: AskOptions,
    rules: tuple[PathRule, ...],
) -> tuple[SearchResult, Contexts]:
    """The store-side half of `ask`: search, score, gate, budget and screen. Returns (search result, contexts)."""
    found = search(question, store, embedder, filters, options.search, rules, options.reranker)
    query_vector = found.query_vector if found.query_vector is not None else embedder.embed_query(found.question)
    missing = [hit.chunk_id for hit in found.hits if hit.vector_score is None]
    stored = store.chunk_vectors(missing)
    contexts = Contexts()
    budget = options.max_context_tokens
    for hit in found.hits:
        similarity = hit.vector_score
        if similarity is None:
            vector = stored.get(hit.chunk_id)
            similarity = float(vector @ query_vector) if vector is not None else 0.0
        if contexts.best_similarity is None or similarity > contexts.best_similarity:
            contexts.best_similarity = similarity
        if similarity < options.min_similarity or (hit.token_estimate > budget and contexts):
            continue
        budget -= hit.token_estimate
        contexts.append(Context(len(contexts) + 1, hit.text, hit.file_path, _locator(hit), round(similarity, 4),
                                screen(hit.text)))
    return found, contexts


def answer(
    found: SearchResult,
    contexts: list[Context],
    min_similarity: float,
    providers: list[AnswerProvider],
    on_text: Callable[[str], None] | None = None,
    tools: ToolRegistry | None = None,
) -> Answer:
    """The answering half of `ask` (needs no store): the provider chain over `contexts`, or the refusal.

    With `tools`, an answerer that can call tools (`answer_with_tools`) may use them; their results are cited
    after the retrieved chunks. With tools and nothing retrieved, only such answerers are tried (a tool may
    answer what the documents cannot)."""
    question = found.question
    base: dict[str, Any] = {
        "question": question,
        "retrieval": {"mode": found.mode, "filters": found.filters, "retrieved": len(found.hits),
                      "relevant": len(contexts), "min_similarity": min_similarity,
                      "best_similarity": _best_similarity(contexts)},
        # What selective memory would make of the question; `ask --remember` writes it if it says so.
        "memory": decide(question).to_dict(),
        "flagged": tuple({"n": c.n, "chunk_id": c.locator["chunk_id"], "reasons": c.flags}
                         for c in contexts if c.flags),
    }
    fallbacks: list[dict[str, str]] = []

    def refusal(provider: str | None) -> Answer:
        return Answer(text=REFUSAL, refused=True, citations=(), provider=provider, fallbacks=tuple(fallbacks), **base)

    tool_users = [p for p in providers if callable(getattr(p, "answer_with_tools", None))] if tools else []
    if tools is not None and not contexts:
        providers = tool_users
    if not contexts and (tools is None or not providers):
        if on_text:
            on_text(REFUSAL)
        return refusal(None)
    for provider in providers:
        session = ToolSession(tools, len(contexts)) if tools is not None and provider in tool_users else None
        try:
            if session is not None:
                text = cast(ToolCallingProvider, provider).answer_with_tools(question, contexts, session, on_text)
            else:
                text = provider.answer(question, contexts, on_text)
        except ProviderError as exc:
            fallbacks.extend(session.fallbacks if session else ())
            fallbacks.append({"provider": provider.name, "error": str(exc)})
            continue
        fallbacks.extend(session.fallbacks if session else ())
        sources = [*contexts, *(session.contexts if session else ())]
        if text.strip() == REFUSAL:
            return refusal(provider.name)
        text, cited = _check_citations(text, len(sources))
        if not cited:
            fallbacks.append({"provider": provider.name, "error": "the answer cited no retrieved document"})
            continue
        citations = tuple(Citation(c.n, c.source, c.locator, snippet(c.text, CITATION_SNIPPET_CHARS), c.similarity)
                          for c in (sources[n - 1] for n in cited))
        return Answer(text=text, refused=False, citations=citations, provider=provider.name,
                      fallbacks=tuple(fallbacks), **base)
    return refusal(None)


def _best_similarity(contexts: list[Context]) -> float | None:
    """The best cosine `gather` saw (4 decimals); for a plain list of contexts, the best among them."""
    best = getattr(contexts, "best_similarity", None)
    if best is None and contexts:
        best = max(c.similarity for c in contexts)
    return None if best is None else round(best, 4)


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
