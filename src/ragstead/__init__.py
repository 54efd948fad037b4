"""ragstead: a local-first, private knowledge base with hybrid retrieval.

    import ragstead
    with ragstead.open("path/to/project") as kb:
        kb.index()
        for hit in kb.search("what did we decide", k=3).hits:
            print(hit.file_path, hit.score)

See docs/python.md for the whole API.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragstead.answer.ask import Answer, Citation, Relevance, Superseded
    from ragstead.answer.base import AnswerProvider, Locator
    from ragstead.config import Settings
    from ragstead.conversation.turns import Conversation, Rewrite, Turn
    from ragstead.embeddings.base import Embedder
    from ragstead.errors import (
        ConfigError,
        DocumentNotFoundError,
        IndexLockedError,
        InvalidQueryError,
        LoadError,
        ModelMismatchError,
        ProviderError,
        RagsteadError,
        ToolError,
    )
    from ragstead.filters import AppliedFilters, QueryFilters
    from ragstead.indexing.build import IndexReport
    from ragstead.knowledge_base import KnowledgeBase, init, open
    from ragstead.memory.files import RememberResult
    from ragstead.retrieval.passages import Passage
    from ragstead.retrieval.rerank import Reranker
    from ragstead.retrieval.search import Hit, SearchOptions, SearchResult
    from ragstead.stores.base import DocumentInfo, Store

# Each public name -> the module that defines it. Imported on first use (PEP 562), so `import ragstead` and
# `ragstead --version` do not load numpy, tantivy, onnxruntime, httpx... until a name that needs them is used.
_LAZY = {
    "Answer": "ragstead.answer.ask",
    "Citation": "ragstead.answer.ask",
    "Relevance": "ragstead.answer.ask",
    "Superseded": "ragstead.answer.ask",
    "Locator": "ragstead.answer.base",
    "AppliedFilters": "ragstead.filters",
    "DocumentInfo": "ragstead.stores.base",
    "AnswerProvider": "ragstead.answer.base",
    "Settings": "ragstead.config",
    "Conversation": "ragstead.conversation.turns",
    "Rewrite": "ragstead.conversation.turns",
    "Turn": "ragstead.conversation.turns",
    "Embedder": "ragstead.embeddings.base",
    "ConfigError": "ragstead.errors",
    "DocumentNotFoundError": "ragstead.errors",
    "IndexLockedError": "ragstead.errors",
    "InvalidQueryError": "ragstead.errors",
    "LoadError": "ragstead.errors",
    "ModelMismatchError": "ragstead.errors",
    "ProviderError": "ragstead.errors",
    "RagsteadError": "ragstead.errors",
    "ToolError": "ragstead.errors",
    "QueryFilters": "ragstead.filters",
    "IndexReport": "ragstead.indexing.build",
    "KnowledgeBase": "ragstead.knowledge_base",
    "init": "ragstead.knowledge_base",
    "open": "ragstead.knowledge_base",
    "RememberResult": "ragstead.memory.files",
    "Passage": "ragstead.retrieval.passages",
    "Reranker": "ragstead.retrieval.rerank",
    "Hit": "ragstead.retrieval.search",
    "SearchOptions": "ragstead.retrieval.search",
    "SearchResult": "ragstead.retrieval.search",
    "Store": "ragstead.stores.base",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragstead' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.1.0"

__all__ = [
    "Answer",
    "AnswerProvider",
    "AppliedFilters",
    "Citation",
    "ConfigError",
    "Conversation",
    "DocumentInfo",
    "DocumentNotFoundError",
    "Embedder",
    "Hit",
    "IndexLockedError",
    "IndexReport",
    "InvalidQueryError",
    "KnowledgeBase",
    "LoadError",
    "Locator",
    "ModelMismatchError",
    "Passage",
    "ProviderError",
    "QueryFilters",
    "RagsteadError",
    "Relevance",
    "RememberResult",
    "Reranker",
    "Rewrite",
    "SearchOptions",
    "SearchResult",
    "Settings",
    "Store",
    "Superseded",
    "ToolError",
    "Turn",
    "__version__",
    "init",
    "open",
]
