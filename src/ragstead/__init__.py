"""ragstead: a local-first, private knowledge base with hybrid retrieval.

    import ragstead
    with ragstead.open("path/to/project") as kb:
        kb.index()
        for hit in kb.search("what did we decide", k=3).hits:
            print(hit.file_path, hit.score)

See docs/python.md for the whole API.
"""

from ragstead.answer.ask import Answer, Citation, Relevance
from ragstead.answer.base import AnswerProvider, Locator
from ragstead.config import Settings
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

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "AnswerProvider",
    "AppliedFilters",
    "Citation",
    "ConfigError",
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
    "SearchOptions",
    "SearchResult",
    "Settings",
    "Store",
    "ToolError",
    "__version__",
    "init",
    "open",
]
