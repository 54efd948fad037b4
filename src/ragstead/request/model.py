"""One search or ask request, declared once: its fields, defaults, limits and validation.

The CLI, the HTTP API and the MCP server build these requests (their flags and schemas take the limits from
here, so a request one door accepts every door accepts), and `KnowledgeBase.search` / `ask` take them. A
request validates itself when it is built and raises `InvalidQueryError` naming the library's field
(`date_from`, `k`); each door re-spells that name as its users know it (`--date-from`, `top_k`).

A knob left None takes the project's configured value (`Settings`) when the KnowledgeBase resolves it.
This module stays light (no numpy, no store): the CLI imports it to declare its flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, cast

from ragstead.errors import InvalidQueryError
from ragstead.filters import QueryFilters, clean_text, split_values

# The limits every door enforces live with the field table (request_fields.py), which builds the doors.
from ragstead.request.fields import (
    DATE_CHARS,
    DEFAULT_K,
    DEFAULT_LIST_LIMIT,
    DEFAULT_MAX_CONTEXT_TOKENS,
    FUSIONS,
    MAX_CANDIDATES,
    MAX_CONTEXT_TOKENS,
    MAX_DOC_TYPES,
    MAX_FEEDBACK_K,
    MAX_FEEDBACK_WEIGHT,
    MAX_K,
    MAX_LIST_LIMIT,
    MAX_LIST_OFFSET,
    MAX_QUERY_CHARS,
    MAX_RERANK_TOP_N,
    MAX_RRF_K,
    MAX_TAGS,
    MIN_CONTEXT_TOKENS,
    MODES,
    table,
)

R = TypeVar("R", bound="SearchRequest")


def _fail(name: str, problem: str) -> InvalidQueryError:
    return InvalidQueryError(f"{name} {problem}", fields=(name,))


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(name, f"must be a whole number between {low} and {high}, got {value!r}")


def _check_number(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _fail(name, f"must be a number between {low:g} and {high:g}, got {value!r}")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _fail(name, f"must be one of {', '.join(choices)}, got {value!r}")


def _check_rows(request: Any, names: tuple[str, ...]) -> None:
    """Each of `names` against its row of the field table: a flag true or false, a word among its choices, a number
    within its bounds (None: the configured value, where the row's default is None)."""
    rows = table()
    for name in names:
        row, value = rows[name], getattr(request, name)
        if value is None and row.default is None:
            continue
        if row.kind is bool and not isinstance(value, bool):
            raise _fail(name, f"must be true or false, got {value!r}")
        if row.choices:
            _check_choice(name, value, row.choices)
        if row.kind is int and row.low is not None and row.high is not None:
            _check_int(name, value, int(row.low), int(row.high))
        if row.kind is float and row.low is not None and row.high is not None:
            _check_number(name, value, row.low, row.high)


@dataclass(frozen=True)
class Scope:
    """Whose documents a request reads: private-only unless `public_only`, `user` narrows it to one user's,
    `doc_types` and `tags` match any value given (comma-separated values are split), dates are YYYY-MM-DD and
    inclusive, the archive is left out unless `include_archive` (or doc type `archive`). Normalised and
    validated when built."""

    user: str | None = None
    public_only: bool = False
    doc_types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    date_from: str | None = None
    date_to: str | None = None
    include_archive: bool = False

    def __post_init__(self) -> None:
        for name in ("doc_types", "tags"):
            values = getattr(self, name)
            if isinstance(values, str) or not isinstance(values, list | tuple):
                raise _fail(name, f"must be a list of strings, got {type(values).__name__}")
        for name in ("public_only", "include_archive"):
            if not isinstance(getattr(self, name), bool):
                raise _fail(name, f"must be true or false, got {getattr(self, name)!r}")
        if len(split_values([str(t) for t in self.tags])) > MAX_TAGS:
            raise _fail("tags", f"may hold at most {MAX_TAGS} tags")
        if len(split_values([str(t) for t in self.doc_types])) > MAX_DOC_TYPES:
            raise _fail("doc_types", f"may hold at most {MAX_DOC_TYPES} doc types")
        built = QueryFilters.build(self.user, self.doc_types, self.public_only, self.date_from, self.date_to,
                                   self.include_archive, self.tags)
        # The normalised values (split, deduplicated, dates as YYYY-MM-DD) are the scope's own.
        for name, value in (("doc_types", built.doc_types), ("tags", built.tags), ("date_from", built.date_from),
                            ("date_to", built.date_to)):
            object.__setattr__(self, name, value)

    def filters(self) -> QueryFilters:
        """The store-side filters of this scope."""
        return QueryFilters(self.user, self.doc_types, self.public_only, self.date_from, self.date_to,
                            self.include_archive, self.tags)


SCOPE_FIELDS = tuple(f.name for f in fields(Scope))


@dataclass(frozen=True, kw_only=True)
class SearchKnobs:
    """How to search: how many results, which mode, the fusion and feedback knobs (None: the configured
    value; docs/design.md has the measurements behind the defaults)."""

    k: int = DEFAULT_K
    mode: str | None = None
    top_k_vector: int | None = None
    top_k_lexical: int | None = None
    fusion: str | None = None
    fusion_weight: float | None = None
    rrf_k: int | None = None
    rerank_top_n: int | None = None
    dedup_sources: bool = False
    feedback_k: int | None = None
    feedback_weight: float | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        _check_rows(self, SEARCH_KNOBS)
        self.chosen_fusion()

    def chosen_fusion(self) -> str | None:
        """The fusion the request means: `rrf_k` alone implies RRF, `fusion_weight` alone convex; a knob of the
        other fusion is an error rather than silently ignored."""
        if self.rrf_k is not None and self.fusion_weight is not None:
            raise InvalidQueryError("rrf_k belongs to RRF fusion and fusion_weight to convex fusion; give one",
                                    fields=("rrf_k", "fusion_weight"))
        if self.rrf_k is not None:
            if self.fusion not in (None, "rrf"):
                raise InvalidQueryError(f"rrf_k only applies to RRF fusion, not {self.fusion!r}; drop it or use "
                                        "fusion rrf", fields=("rrf_k", "fusion"))
            return "rrf"
        if self.fusion_weight is not None:
            if self.fusion not in (None, "convex"):
                raise InvalidQueryError(f"fusion_weight only applies to convex fusion, not {self.fusion!r}",
                                        fields=("fusion_weight",))
            return "convex"
        return self.fusion

    def overrides(self) -> dict[str, Any]:
        """The knobs this request sets, as `Settings.search_options` takes them (None keeps the configured
        value)."""
        return {"k": self.k, "top_k_vector": self.top_k_vector, "top_k_lexical": self.top_k_lexical,
                "fusion": self.chosen_fusion(), "fusion_weight": self.fusion_weight, "rrf_k": self.rrf_k,
                "rerank_top_n": self.rerank_top_n, "dedup_sources": self.dedup_sources or None,
                "feedback_k": self.feedback_k, "feedback_weight": self.feedback_weight}


SEARCH_KNOBS = tuple(f.name for f in fields(SearchKnobs))


@dataclass(frozen=True)
class SearchRequest(SearchKnobs):
    """One search: the query text, whose documents (`scope`), how many results and how to rank them
    (`rerank`: re-order the best `rerank_top_n` with the configured re-ranker)."""

    query: str
    scope: Scope = field(default_factory=Scope, kw_only=True)
    rerank: bool = field(default=False, kw_only=True)

    def validate(self) -> None:
        if not isinstance(self.query, str):
            raise _fail("query", f"must be text, got {type(self.query).__name__}")
        if not self.query.strip():
            raise _fail("query", "is empty")
        size = len(clean_text(self.query))
        if size > MAX_QUERY_CHARS:
            raise _fail("query", f"is {size} characters; the limit is {MAX_QUERY_CHARS}")
        if not isinstance(self.scope, Scope):
            raise _fail("scope", f"must be a Scope, got {type(self.scope).__name__}")
        _check_rows(self, ("rerank",))
        super().validate()

    @classmethod
    def of(cls: type[R], query: str | R, **keywords: Any) -> R:
        """`query` itself when it is a request; else the request of the keyword form the library has always
        taken (`kb.search("billing", user="alice", k=3)`): the scope's fields flat beside the knobs, None for
        'the default'. An unknown keyword is a TypeError, as a misspelt argument always was."""
        if isinstance(query, cls):
            if keywords:
                raise TypeError(f"give a {cls.__name__} or keyword arguments, not both: {sorted(keywords)}")
            return query
        given = {name: value for name, value in keywords.items() if value is not None}
        scope = Scope(**{name: given.pop(name) for name in SCOPE_FIELDS if name in given})
        # A str here (an R returned above); mypy does not narrow `str | R` by isinstance against type[R].
        return cls(cast(str, query), scope=scope, **given)


@dataclass(frozen=True, kw_only=True)
class AskRequest(SearchRequest):
    """One question to answer: a search request plus how the answer is decided and written.

    `min_confidence`: the relevance gate's threshold (None: the calibrated model's); `min_similarity`: a cosine
    threshold per chunk that replaces the gate (-1 hands every chunk over). `max_context_tokens`: the budget of
    the chunks given to the answerer. `extractive`: answer offline from the retrieved sentences. `template`: the
    LLM prompt template (None: the configured one). `remember`: write a lasting fact the question states to the
    scope's user's memory. `tools`: the allow-listed tools an LLM answerer may call (None: the configured ones).
    `llm`: the remote answerers this question may use (consent; None: the `answerer` setting's).
    `list_questions`: answer "which notes mention X" / "how many files ..." from the whole scope, every matching
    document once (answer/listing.py); False: always the usual answer from the top k. `offset` and `limit`
    page such a list (matched documents in path order).
    """

    min_similarity: float | None = None
    min_confidence: float | None = None
    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    extractive: bool = False
    template: str | None = None
    remember: bool = False
    tools: tuple[str, ...] | None = None
    llm: tuple[str, ...] | None = None
    list_questions: bool = True
    offset: int = 0
    limit: int = DEFAULT_LIST_LIMIT

    def validate(self) -> None:
        super().validate()
        _check_rows(self, tuple(name for name in ASK_FIELDS if name not in ("tools", "llm")))
        if self.tools is not None:
            if isinstance(self.tools, str) or not all(isinstance(t, str) for t in self.tools):
                raise _fail("tools", f"must be a list of tool names, got {self.tools!r}")
            object.__setattr__(self, "tools", tuple(split_values(list(self.tools))))
        if self.llm is not None:
            if isinstance(self.llm, str) or not all(isinstance(t, str) for t in self.llm):
                raise _fail("llm", f"must be a list of answerer names, got {self.llm!r}")
            object.__setattr__(self, "llm", tuple(split_values(list(self.llm))))


# Ask's own fields, in the field table's order.
ASK_FIELDS = tuple(row.name for row in table().values() if row.request == "ask")

__all__ = ["DATE_CHARS", "DEFAULT_K", "DEFAULT_LIST_LIMIT", "DEFAULT_MAX_CONTEXT_TOKENS", "FUSIONS", "MAX_CANDIDATES",
           "MAX_CONTEXT_TOKENS", "MAX_DOC_TYPES", "MAX_FEEDBACK_K", "MAX_FEEDBACK_WEIGHT", "MAX_K", "MAX_LIST_LIMIT",
           "MAX_LIST_OFFSET", "MAX_QUERY_CHARS", "MAX_RERANK_TOP_N", "MAX_RRF_K", "MAX_TAGS", "MIN_CONTEXT_TOKENS",
           "MODES", "AskRequest", "Scope", "SearchKnobs", "SearchRequest"]
