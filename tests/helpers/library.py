"""Adapters from the tests' call shapes to the library: each returns the documented JSON dict, so tests
assert on the same contract the CLI and the API print."""

from __future__ import annotations

from typing import Any

from ragstead.answer.ask import ask as ask_answer
from ragstead.documents.metadata import DEFAULT_PATH_RULES
from ragstead.knowledge_base import KnowledgeBase
from ragstead.retrieval.search import search as search_hits


def search(question: str, store: Any, embedder: Any, filters: Any, options: Any, rules: Any = DEFAULT_PATH_RULES,
           reranker: Any = None) -> dict[str, Any]:
    """`retrieval.search.search` as the query JSON contract, with the chunk text (as the HTTP API sends it)."""
    return search_hits(question, store, embedder, filters, options, rules, reranker).to_dict(include_text=True)


def ask(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """`answer.ask.ask` as the `ask` JSON shape."""
    return ask_answer(*args, **kwargs).to_dict()


def remember(text: str, user: str, settings: Any, store: Any = None, embedder: Any = None, dry_run: bool = False,
             wait_seconds: float = 30.0) -> Any:
    """`KnowledgeBase.remember` over the test project's store; without a store nothing is indexed."""
    kb = KnowledgeBase(settings, store=store, embedder=embedder)
    return kb.remember(text, user=user, dry_run=dry_run, index=store is not None, wait=wait_seconds)
