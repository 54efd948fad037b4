"""The field table of search and ask: each field's name, type, default, limits and words, and how each door
(the CLI, the HTTP API, MCP) spells it, if it shows it at all.

The doors are built from this table: the CLI's search and ask options (cli/_flags.py), the API's bodies and its
`GET /v1/limits` (api/app.py, which the web page reads), MCP's argument models (mcp_server.py). A field is added
here, in the request model (requests.py) and where the engine reads it; docs/design.md says how.

Pure data and two small builders, no import of the rest of ragstead: anything may read it, however light.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

# The limits every door enforces (requests.py checks them; retrieval/search.py's own are the same or wider).
MAX_QUERY_CHARS = 4096
DEFAULT_K = 8
MAX_K = 100  # results a request returns; the candidates behind them go up to MAX_CANDIDATES
MAX_CANDIDATES = 1000  # top_k_vector, top_k_lexical
MAX_RRF_K = 1000
MAX_RERANK_TOP_N = 200
MAX_FEEDBACK_K = 20
MAX_FEEDBACK_WEIGHT = 10.0
MAX_DOC_TYPES = 10
MAX_TAGS = 20
DATE_CHARS = 10  # YYYY-MM-DD
DATE_PATTERN = r"^\d{4}-\d{2}-\d{2}$"
DEFAULT_MAX_CONTEXT_TOKENS = 3000
# The exact sentence of a refusal (seed 003), what every door shows when the documents do not answer; a project may
# set its own (`refusal` in ragstead.toml). Here, not in answer/, so the settings take it as their default without
# loading the answer package (`ragstead ls` reads no answer code, tests/test_startup.py).
REFUSAL = "I could not find relevant information in the uploaded documents."
MIN_CONTEXT_TOKENS = 100
MAX_CONTEXT_TOKENS = 32000
DEFAULT_LIST_LIMIT = 50  # documents a page of a list answer names ("which notes mention ...")
MAX_LIST_LIMIT = 500
MAX_LIST_OFFSET = 10_000_000
MODES = ("vector", "lexical", "hybrid")
FUSIONS = ("convex", "rrf")

DoorName = Literal["cli", "api", "mcp"]
DOORS: tuple[DoorName, ...] = ("cli", "api", "mcp")
_SAME: Any = object()  # a Door's default: the field's own


@dataclass(frozen=True)
class Door:
    """How one door shows a field: its spelling there (`--top-k-vector`, `top_k`), its own words where the
    field's doc would not do (a CLI help naming other flags), a default of its own (MCP's include_archive is
    None, 'the server's'), its own words for the values (`choices`: the API's scope is private or public, the
    door turns it into public_only) and the CLI's short `aliases`."""

    name: str
    doc: str | None = None
    default: Any = _SAME
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class RequestField:
    """One field of the search or ask request. `kind` is int, float, bool, str or list (of str); a default of
    None means 'the configured value'. `low`/`high` bound a number, `max_chars` a string, `max_items` a list,
    `choices` a word. `request`: "search" (search and ask) or "ask" (ask alone); `scope`: one of the Scope's
    fields (whose documents) rather than a knob; `required`: no default (the query, never empty). Each door's
    `Door`, or None where that door does not show it."""

    name: str
    kind: type
    default: Any
    doc: str
    request: Literal["search", "ask"] = "search"
    scope: bool = False
    low: float | None = None
    high: float | None = None
    max_chars: int | None = None
    max_items: int | None = None
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    required: bool = False
    cli: Door | None = None
    api: Door | None = None
    mcp: Door | None = None

    def door(self, name: DoorName) -> Door | None:
        door: Door | None = getattr(self, name)
        return door

    def default_in(self, door: Door) -> Any:
        return self.default if door.default is _SAME else door.default

    def choices_in(self, door: Door) -> tuple[str, ...]:
        return door.choices or self.choices

    def limits(self, door: Door) -> dict[str, Any]:
        """The limits a client of `door` can check before it asks: only those this field has."""
        found = {"min": self.low, "max": self.high, "max_chars": self.max_chars, "max_items": self.max_items,
                 "choices": list(self.choices_in(door)) or None, "pattern": self.pattern}
        return {name: value for name, value in found.items() if value is not None}


def _cli(name: str, doc: str | None = None, *aliases: str) -> Door:
    return Door(name, doc, aliases=aliases)


FEEDBACK_HELP = ("Hybrid: move the query vector toward this many first-pass chunks and search again (0: off; "
                 "default: config, 2).")
FEEDBACK_WEIGHT_HELP = "How far --feedback moves the query vector (default: config, 0.5)."
# `--tag` of every command that reads a scope (query, ask, chat, ls): any of the tags, as the store's filter reads them.
TAG_HELP = "Any of these tags; repeatable or comma-separated."
MIN_SIMILARITY_RULE = 0.428  # the cosine rule before the gate (answer.base.DEFAULT_MIN_SIMILARITY; a test holds them)

# In the order the CLI's help lists them. The query is the CLI's argument, not an option (no `cli` door).
FIELDS: tuple[RequestField, ...] = (
    RequestField("query", str, None, "What to look for, in plain words.", max_chars=MAX_QUERY_CHARS,
                 required=True, api=Door("query"), mcp=Door("query")),
    RequestField("k", int, DEFAULT_K, "How many results to return (ask: chunks to consider).", low=1, high=MAX_K,
                 cli=_cli("--k", f"Results to return, 1-{MAX_K} (ask: chunks to consider).", "-k"),
                 api=Door("top_k"), mcp=Door("k", "How many passages to return (ask: to draw on).")),
    RequestField("mode", str, None, "vector (meaning), lexical (keywords) or hybrid (both; the default).",
                 choices=MODES, cli=_cli("--mode", "vector | lexical | hybrid (default: config default_mode, hybrid)"),
                 api=Door("mode"), mcp=Door("mode")),
    RequestField("user", str, None, "Only this user's documents.", scope=True,
                 cli=_cli("--user")),  # the API's key and the MCP server's --user decide it, never a body
    RequestField("doc_types", list, (), "Only these document types (e.g. user_kb, dossier, archive).", scope=True,
                 max_items=MAX_DOC_TYPES, cli=_cli("--doc-type", "Repeatable or comma-separated."),
                 api=Door("doc_types"), mcp=Door("doc_types")),
    RequestField("public_only", bool, False, "Only public documents.", scope=True,
                 cli=_cli("--public-only", "Only public content."),
                 api=Door("scope", "private: the key's own private documents; public: public documents",
                          default="private", choices=("private", "public"))),
    RequestField("date_from", str, None, "Created on or after, YYYY-MM-DD.", scope=True, max_chars=DATE_CHARS,
                 pattern=DATE_PATTERN, cli=_cli("--date-from", "YYYY-MM-DD, inclusive."), api=Door("date_from"),
                 mcp=Door("date_from")),
    RequestField("date_to", str, None, "Created on or before, YYYY-MM-DD.", scope=True, max_chars=DATE_CHARS,
                 pattern=DATE_PATTERN, cli=_cli("--date-to", "YYYY-MM-DD, inclusive."), api=Door("date_to"),
                 mcp=Door("date_to")),
    RequestField("include_archive", bool, False, "Include archived documents.", scope=True,
                 cli=_cli("--include-archive", "Include archive docs."), api=Door("include_archive"),
                 mcp=Door("include_archive", "Include archived documents; only where the server was started with "
                          "the archive (false narrows, true cannot widen).", default=None)),
    RequestField("tags", list, (), "Only documents with any of these tags.", scope=True, max_items=MAX_TAGS,
                 cli=_cli("--tag", TAG_HELP), api=Door("tags"), mcp=Door("tags")),
    RequestField("top_k_vector", int, None, "Vector candidates (default: config, 25).", low=1, high=MAX_CANDIDATES,
                 cli=_cli("--top-k-vector"), api=Door("top_k_vector")),
    RequestField("top_k_lexical", int, None, "Lexical candidates (default: config, 25).", low=1,
                 high=MAX_CANDIDATES, cli=_cli("--top-k-lexical"), api=Door("top_k_lexical")),
    RequestField("rrf_k", int, None, "RRF constant (implies RRF fusion; default: config, 60).", low=0,
                 high=MAX_RRF_K, cli=_cli("--rrf-k", "RRF constant (implies --fusion rrf; default: config, 60)."),
                 api=Door("rrf_k")),
    RequestField("fusion", str, None, "Hybrid fusion: convex | rrf (default: config, convex).", choices=FUSIONS,
                 cli=_cli("--fusion"), api=Door("fusion")),
    RequestField("fusion_weight", float, None, "convex: the vector side's share, 0..1 (implies convex fusion; "
                 "default: config, 0.5).", low=0.0, high=1.0,
                 cli=_cli("--fusion-weight", "convex: vector share, 0..1 (implies --fusion convex; default: "
                          "config, 0.5)."), api=Door("fusion_weight")),
    # The API takes rerank only where the server's config allows it (api_rerank): the re-ranker is a local model
    # loaded on first use and run on every re-ranked request, a cost its operator decides on (api/app.py).
    RequestField("rerank", bool, False, "Re-rank the top candidates (sentence max-sim).",
                 cli=_cli("--rerank"), api=Door("rerank", "Re-rank the top candidates with the server's re-ranker "
                                                "(sentence max-sim unless its config names a cross-encoder); "
                                                "refused (400) where the server's config sets api_rerank = false.")),
    RequestField("rerank_top_n", int, None, "Candidates the re-ranking re-orders (default: config, 30).", low=1,
                 high=MAX_RERANK_TOP_N, cli=_cli("--rerank-top-n", "Candidates --rerank re-orders (default: "
                                                 "config, 30)."), api=Door("rerank_top_n")),
    RequestField("dedup_sources", bool, False, "Keep only the best chunk of each document (source).",
                 cli=_cli("--dedup-sources"), api=Door("dedup_sources")),
    RequestField("feedback_k", int, None, "Hybrid: first-pass chunks the query vector moves toward before a "
                 "second vector search; 0: off (default: config, 2).", low=0, high=MAX_FEEDBACK_K,
                 cli=_cli("--feedback", FEEDBACK_HELP), api=Door("feedback_k")),
    RequestField("feedback_weight", float, None, "How far the feedback moves the query vector (default: config, "
                 "0.5).", low=0.0, high=MAX_FEEDBACK_WEIGHT, cli=_cli("--feedback-weight", FEEDBACK_WEIGHT_HELP),
                 api=Door("feedback_weight")),
    # -- ask's own ---------------------------------------------------------------------------------------
    RequestField("min_confidence", float, None, "The relevance gate's threshold, 0..1; under it: refuse (default: "
                 "the calibrated model's).", request="ask", low=0.0, high=1.0, cli=_cli("--min-confidence"),
                 api=Door("min_confidence")),
    RequestField("min_similarity", float, None, f"Replace the relevance gate with a cosine threshold per chunk "
                 f"(the rule before the gate was {MIN_SIMILARITY_RULE}; -1 hands every chunk over).",
                 request="ask", low=-1.0, high=1.0, cli=_cli("--min-similarity"), api=Door("min_similarity")),
    RequestField("max_context_tokens", int, DEFAULT_MAX_CONTEXT_TOKENS, "Token budget of the chunks given to the "
                 "answerer.", request="ask", low=MIN_CONTEXT_TOKENS, high=MAX_CONTEXT_TOKENS,
                 cli=_cli("--max-context-tokens"), api=Door("max_context_tokens")),
    RequestField("extractive", bool, False, "Answer offline from the retrieved sentences; no LLM.", request="ask",
                 cli=_cli("--extractive", "Offline extractive answer; no LLM."), api=Door("extractive"),
                 mcp=Door("extractive", "Quote the best sentences instead of asking a model.")),
    RequestField("template", str, None, "LLM prompt template: a name (`ragstead templates`) or a .toml path "
                 "(default: config answer_template, else grounded).", request="ask", cli=_cli("--template")),
    RequestField("remember", bool, False, "If the question states a lasting fact or preference, write it to the "
                 "user's memory.", request="ask",
                 cli=_cli("--remember", "If the question states a lasting fact or preference, write it to --user's "
                          "memory (chat: let a \"remember that ...\" turn write it).")),
    RequestField("tools", list, None, "Tools the LLM answerer may call: weather (Open-Meteo) (default: config "
                 "tools, none).", request="ask",
                 cli=_cli("--tools", "Tools the LLM answerer may call: weather (Open-Meteo); repeatable or "
                          "comma-separated (default: config tools, none).")),
    RequestField("llm", list, None, "Consent to a remote LLM answerer for this question: openai | gemini | an "
                 "installed plugin's name (default: config answerers; none: answered on this machine).",
                 request="ask", cli=_cli("--llm")),
    RequestField("list_questions", bool, True, "Answer \"which notes mention X\" and \"how many files ...\" from "
                 "the whole scope: every matching document once, with how many were examined.", request="ask",
                 cli=_cli("--list-questions"), api=Door("list_questions")),
    RequestField("offset", int, 0, "A list answer: the first matching document to cite (paging; the answer's "
                 "next_offset).", request="ask", low=0, high=MAX_LIST_OFFSET,
                 cli=_cli("--offset", "A list answer: the first matching document to show (paging)."),
                 api=Door("offset"), mcp=Door("offset", "A list or count question ('which notes mention X', 'how "
                                              "many files ...'): the first matching document to cite (paging: "
                                              "pass the answer's next_offset).")),
    RequestField("limit", int, DEFAULT_LIST_LIMIT, "A list answer: how many matching documents to cite.",
                 request="ask", low=1, high=MAX_LIST_LIMIT,
                 cli=_cli("--limit", f"A list answer: matching documents to show, 1-{MAX_LIST_LIMIT}."),
                 api=Door("limit"), mcp=Door("limit", "A list or count question: how many matching documents to "
                                             "cite.")),
)


def table() -> dict[str, RequestField]:
    """The fields by their library name (read at each call: a test may add one)."""
    return {f.name: f for f in FIELDS}


def exposed(door: DoorName, request: Literal["search", "ask"], *,
            only: Literal["search", "ask"] | None = None) -> Iterator[tuple[RequestField, Door]]:
    """The fields `door` shows for a search (`request` "search") or a question ("ask": the search's too), in
    table order; `only` keeps one request's own."""
    for found in FIELDS:
        spelt = found.door(door)
        if spelt is None or (request == "search" and found.request == "ask"):
            continue
        if only is None or found.request == only:
            yield found, spelt


def spellings(door: DoorName) -> dict[str, str]:
    """The library's field names as `door` spells them, where they differ (for an error's field names)."""
    found: dict[str, str] = {}
    for item in FIELDS:
        spelt = item.door(door)
        if spelt is not None and spelt.name != item.name:
            found[item.name] = spelt.name
    return found


def limits(door: DoorName) -> dict[str, Any]:
    """What `door` exposes, by its spelling: each field's type, default, limits, words and which requests take it
    (`GET /v1/limits` for the API)."""
    found: dict[str, Any] = {}
    for item in FIELDS:
        spelt = item.door(door)
        if spelt is None:
            continue
        default = item.default_in(spelt)
        found[spelt.name] = {"field": item.name, "type": "str" if spelt.choices else item.kind.__name__,
                             **({"required": True} if item.required else
                                {"default": list(default) if isinstance(default, tuple) else default}),
                             **item.limits(spelt), "doc": spelt.doc or item.doc,
                             "requests": ["ask"] if item.request == "ask" else ["search", "ask"]}
    return found


def _annotation(item: RequestField, door: Door) -> Any:
    """A field's type in a pydantic model: a choice a Literal, a list of strings, None allowed for 'the default'."""
    kind: Any = list[str] if item.kind is list else item.kind
    if item.choices_in(door):
        kind = Literal[item.choices_in(door)]
    return kind | None if item.default_in(door) is None and not item.required else kind


def _bounds(item: RequestField, door: Door, patterns: bool) -> dict[str, Any]:
    """A field's limits as pydantic's Field takes them (only those it has)."""
    bounds: dict[str, Any] = {"ge": item.low, "le": item.high}
    if item.kind is str and not door.choices:
        bounds.update(max_length=item.max_chars, min_length=1 if item.required else None,
                      pattern=item.pattern if patterns else None)
    if item.kind is list:
        bounds["max_length"] = item.max_items
    return {key: value for key, value in bounds.items() if value is not None}


def pydantic_fields(door: DoorName, request: Literal["search", "ask"], *, only: Literal["search", "ask"] | None = None,
                    rename: Mapping[str, Door] | None = None, patterns: bool = True) -> dict[str, tuple[Any, Any]]:
    """`pydantic.create_model`'s field definitions for what `door` shows (imported here: the CLI never loads
    pydantic for this). `rename` shows a field otherwise in one model (MCP's ask: `question`); `patterns`: check
    a date's shape here (else the request model says what is wrong with it, as the API has always let it)."""
    from pydantic import Field

    made: dict[str, tuple[Any, Any]] = {}
    for item, spelt in exposed(door, request, only=only):
        spelt = (rename or {}).get(item.name, spelt)
        default = item.default_in(spelt)
        settings: dict[str, Any] = {"default_factory": list} if isinstance(default, tuple) else (
            {} if item.required else {"default": default})
        made[spelt.name] = (_annotation(item, spelt), Field(**settings, description=spelt.doc or item.doc,
                                                            **_bounds(item, spelt, patterns)))
    return made


__all__ = ["DATE_CHARS", "DATE_PATTERN", "DEFAULT_K", "DEFAULT_LIST_LIMIT", "DEFAULT_MAX_CONTEXT_TOKENS", "DOORS",
           "FEEDBACK_HELP", "FEEDBACK_WEIGHT_HELP", "FIELDS", "FUSIONS", "MAX_CANDIDATES", "MAX_CONTEXT_TOKENS",
           "MAX_DOC_TYPES", "MAX_FEEDBACK_K", "MAX_FEEDBACK_WEIGHT", "MAX_K", "MAX_LIST_LIMIT", "MAX_LIST_OFFSET",
           "MAX_QUERY_CHARS", "MAX_RERANK_TOP_N", "MAX_RRF_K", "MAX_TAGS", "MIN_CONTEXT_TOKENS", "MODES", "TAG_HELP",
           "Door", "RequestField", "exposed", "limits", "pydantic_fields", "spellings", "table"]
