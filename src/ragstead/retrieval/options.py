"""`SearchOptions`: how to search, and the limits of a search. Apart from the search (search.py) so the settings
can name its defaults without loading numpy and the search stages: `ls` and `status` read the settings too."""

from __future__ import annotations

from dataclasses import dataclass

from ragstead.errors import InvalidQueryError
from ragstead.retrieval.fusion import FUSIONS

MODES = ("vector", "lexical", "hybrid")
MAX_QUERY_CHARS = 4096
MAX_K = 1000
MAX_FEEDBACK_K = 20


@dataclass(frozen=True)
class SearchOptions:
    """How to search. The defaults are the CLI's; the measurements behind them are in docs/design.md."""

    mode: str = "hybrid"
    k: int = 8
    top_k_vector: int = 25
    top_k_lexical: int = 25
    rrf_k: int = 60
    fusion: str = "convex"  # convex beat RRF on SciFact train (docs/benchmarks.md, "Fusion")
    fusion_weight: float = 0.5  # convex: share of the vector side
    rerank_top_n: int = 30  # candidates a reranker (if one is given to search) re-orders
    rerank_weight: float = 0.5  # final = min-max(first-stage score) + weight * min-max(rerank score)
    # Hybrid only: Rocchio feedback moves the query vector toward the mean of the first pass's best
    # `feedback_k` chunks, by `feedback_weight`, and searches the vector side again (0: off). Chosen on SciFact
    # train by `python -m bench feedback` (docs/benchmarks.md, "Query feedback").
    feedback_k: int = 2
    feedback_weight: float = 0.5
    dedup_sources: bool = False  # keep only the best chunk of each document (a source)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise InvalidQueryError(f"unknown mode {self.mode!r}; use one of {MODES}")
        for name in ("k", "top_k_vector", "top_k_lexical"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= MAX_K:
                raise InvalidQueryError(f"{name} must be between 1 and {MAX_K}, got {value}")
        if self.rrf_k < 0:
            raise InvalidQueryError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if self.fusion not in FUSIONS:
            raise InvalidQueryError(f"unknown fusion {self.fusion!r}; use one of {FUSIONS}")
        if not 0.0 <= self.fusion_weight <= 1.0:
            raise InvalidQueryError(f"fusion_weight must be between 0 and 1, got {self.fusion_weight}")
        if not 1 <= self.rerank_top_n <= 200:
            raise InvalidQueryError(f"rerank_top_n must be between 1 and 200, got {self.rerank_top_n}")
        if not 0.0 <= self.rerank_weight <= 100.0:
            raise InvalidQueryError(f"rerank_weight must be between 0 and 100, got {self.rerank_weight}")
        if not isinstance(self.feedback_k, int) or not 0 <= self.feedback_k <= MAX_FEEDBACK_K:
            raise InvalidQueryError(f"feedback_k must be between 0 and {MAX_FEEDBACK_K}, got {self.feedback_k}")
        if not 0.0 <= self.feedback_weight <= 10.0:
            raise InvalidQueryError(f"feedback_weight must be between 0 and 10, got {self.feedback_weight}")
