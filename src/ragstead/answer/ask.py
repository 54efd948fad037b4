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
from typing import Any

import numpy as np

from ragstead.answer.base import REFUSAL, AnswerProvider, Context, ProviderError
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.prompt import PromptTemplate
from ragstead.answer.providers import GeminiAnswerer, OpenAICompatibleAnswerer
from ragstead.answer.screening import screen
from ragstead.documents.metadata import PathRule
from ragstead.embeddings.base import Embedder
from ragstead.memory.decision import decide
from ragstead.retrieval.filters import QueryFilters
from ragstead.retrieval.rerank import Reranker
from ragstead.retrieval.search import SearchOptions, search, snippet
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
                       template: PromptTemplate | None = None) -> list[AnswerProvider]:
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
                                              env.get("OPENAI_API_KEY"), timeout, template))
    if env.get("GEMINI_API_KEY"):
        gemini_base = env.get("RAGSTEAD_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com/v1beta")
        chain.append(GeminiAnswerer(env["GEMINI_API_KEY"], env.get("RAGSTEAD_GEMINI_MODEL", "gemini-2.0-flash"),
                                    gemini_base, timeout, template))
    chain.append(ExtractiveAnswerer())
    return chain


class _LastQueryVector:
    """Passes an embedder through, keeping the last query vector so `gather` does not embed it twice."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self._last: tuple[str, np.ndarray] | None = None

    def embed_query(self, text: str) -> np.ndarray:
        if self._last is None or self._last[0] != text:
            self._last = (text, self.inner.embed_query(text))
        return self._last[1]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)


def _locator(row: dict[str, Any]) -> dict[str, Any]:
    return {"page": row.get("page"), "section_path": row.get("section_path"), "chunk_id": row["chunk_id"]}


def ask(
    question: str,
    store: Store,
    embedder: Embedder,
    filters: QueryFilters,
    options: AskOptions,
    providers: list[AnswerProvider],
    rules: tuple[PathRule, ...],
    on_text: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Answer `question` from the index, or refuse. Returns the documented `ask` JSON shape."""
    found, contexts = gather(question, store, embedder, filters, options, rules)
    return answer(question, found, contexts, providers, on_text)


def gather(
    question: str,
    store: Store,
    embedder: Embedder,
    filters: QueryFilters,
    options: AskOptions,
    rules: tuple[PathRule, ...],
) -> tuple[dict[str, Any], list[Context]]:
    """The store-side half of `ask`: search, score, gate, budget and screen. Returns (search result, contexts)."""
    remembered = _LastQueryVector(embedder)
    found = search(question, store, remembered, filters, options.search, rules, options.reranker)
    query_vector = remembered.embed_query(question)  # search() already embedded it unless it was lexical-only
    missing = [r["chunk_id"] for r in found["results"] if r.get("vector_score") is None]
    stored = store.chunk_vectors(missing)
    contexts: list[Context] = []
    budget = options.max_context_tokens
    for row in found["results"]:
        similarity = row["vector_score"]
        if similarity is None:
            vector = stored.get(row["chunk_id"])
            similarity = float(vector @ query_vector) if vector is not None else 0.0
        if similarity < options.min_similarity or (row["token_estimate"] > budget and contexts):
            continue
        budget -= row["token_estimate"]
        contexts.append(Context(len(contexts) + 1, row["text"], row["file_path"], _locator(row), round(similarity, 4),
                                screen(row["text"])))
    found["min_similarity"] = options.min_similarity
    return found, contexts


def answer(
    question: str,
    found: dict[str, Any],
    contexts: list[Context],
    providers: list[AnswerProvider],
    on_text: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The answering half of `ask` (needs no store): the provider chain over `contexts`, or the refusal."""
    out: dict[str, Any] = {
        "question": question,
        "retrieval": {"mode": found["mode"], "filters": found["filters"], "retrieved": len(found["results"]),
                      "relevant": len(contexts), "min_similarity": found["min_similarity"]},
        # What selective memory would make of the question; `ask --remember` writes it if it says so.
        "memory": decide(question).as_dict(),
        "flagged": [{"n": c.n, "chunk_id": c.locator["chunk_id"], "reasons": c.flags} for c in contexts if c.flags],
        "fallbacks": [],
    }
    if not contexts:
        if on_text:
            on_text(REFUSAL)
        return {**out, "answer": REFUSAL, "refused": True, "citations": [], "provider": None}
    for provider in providers:
        try:
            text = provider.answer(question, contexts, on_text)
        except ProviderError as exc:
            out["fallbacks"].append({"provider": provider.name, "error": str(exc)})
            continue
        if text.strip() == REFUSAL:
            return {**out, "answer": REFUSAL, "refused": True, "citations": [], "provider": provider.name}
        text, cited = _check_citations(text, len(contexts))
        if not cited:
            out["fallbacks"].append({"provider": provider.name, "error": "the answer cited no retrieved document"})
            continue
        cited_contexts = [contexts[n - 1] for n in cited]
        citations = [{"n": c.n, "source": c.source, "locator": c.locator,
                      "snippet": snippet(c.text, CITATION_SNIPPET_CHARS), "similarity": c.similarity}
                     for c in cited_contexts]
        return {**out, "answer": text, "refused": False, "citations": citations, "provider": provider.name}
    return {**out, "answer": REFUSAL, "refused": True, "citations": [], "provider": None}


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
