"""The options commands share, declared once: the project flags (`ProjectFlags`), the search and scope flags
(`SearchFlags`) and `ask`'s own (`AskFlags`), each collected into one argument by a decorator."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragstead.answer.base import DEFAULT_MIN_SIMILARITY
from ragstead.errors import RagsteadError
from ragstead.filters import split_values
from ragstead.requests import (
    DEFAULT_K,
    DEFAULT_LIST_LIMIT,
    DEFAULT_MAX_CONTEXT_TOKENS,
    MAX_K,
    MAX_LIST_LIMIT,
    SCOPE_FIELDS,
    AskRequest,
    Scope,
    SearchRequest,
)

if TYPE_CHECKING:
    from ragstead.knowledge_base import KnowledgeBase

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (the same as --format json).")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Embedding model id (default: the index's, else "
                                                                "minilm-l6-int8); see `ragstead models`.")]
RevealOpt = Annotated[bool, typer.Option(
    "--reveal-secrets", help="Show the secret values the index masks (read again from your files), on this "
                             "terminal only; no server or agent can.")]
AllowDownloadOpt = Annotated[bool, typer.Option("--allow-download", help="Let --model/--reranker hf:ORG/NAME fetch "
                                                                         "a model missing from the local Hugging Face "
                                                                         "cache (the one network use; off).")]
RerankerOpt = Annotated[str | None, typer.Option("--reranker", help="What --rerank uses: a cross-encoder, onnx:DIR | "
                                                                   "hf:ORG/NAME (default: config reranker, else "
                                                                   "sentence max-sim).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
FusionOpt = Annotated[str | None, typer.Option("--fusion", help="Hybrid fusion: convex (default) | rrf.")]
FusionWeightOpt = Annotated[float | None, typer.Option("--fusion-weight", help="convex: vector share, 0..1 "
                                                                                 "(implies --fusion convex).")]
RrfKOpt = Annotated[int | None, typer.Option("--rrf-k", help="RRF constant (implies --fusion rrf).")]
RerankTopNOpt = Annotated[int | None, typer.Option("--rerank-top-n", help="Candidates --rerank re-orders.")]
FEEDBACK_HELP = ("Hybrid: move the query vector toward this many first-pass chunks and search again (0: off; "
                 "default: config, 2).")
FEEDBACK_WEIGHT_HELP = "How far --feedback moves the query vector (default: config, 0.5)."
FeedbackOpt = Annotated[int | None, typer.Option("--feedback", help=FEEDBACK_HELP)]
FeedbackWeightOpt = Annotated[float | None, typer.Option("--feedback-weight", help=FEEDBACK_WEIGHT_HELP)]

SEARCH_PANEL = "Search"
# `--tag` of every command that reads a scope (query, ask, chat, ls): any of the tags, as the store's filter reads them.
TAG_HELP = "Any of these tags; repeatable or comma-separated."
SCOPE_PANEL = "Scope"


@dataclass(frozen=True)
class ProjectFlags:
    """The flags that say which project and index a command works on: --root, --config, --db and --store
    (`with_project_flags` gives a command them, last in its help, as every command had them)."""

    root: Path | None = None
    config: Path | None = None
    db: str | None = None
    store: str | None = None

    def open(self, **overrides: Any) -> KnowledgeBase:
        """The project's knowledge base (imported here: the KnowledgeBase and what it loads stay out of -h)."""
        from ragstead.knowledge_base import open as open_kb

        return open_kb(self.root, config=self.config, db_path=self.db, store=self.store, **overrides)


# The default of a command's `project` argument: `with_project_flags` always passes the flags given.
NO_PROJECT_FLAGS = ProjectFlags()


def _project_option(name: str, kind: Any, *names: str, help: str, **extra: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[kind, typer.Option(*names, help=help, **extra)])


_PROJECT_PARAMETERS = [
    _project_option("root", Path | None, "--root", help="Project root (default: $RAGSTEAD_ROOT or cwd)."),
    _project_option("config", Path | None, "--config", help="Config file (default: <root>/ragstead.toml)."),
    _project_option("db", str | None, "--db", help="Index file (default: kb/rag/ragstead.db)."),
    _project_option("store", str | None, "--store", envvar="RAGSTEAD_STORE", show_envvar=False,
                    help="sqlite (default) | sqlite:PATH | postgresql://user@host:port/db | chroma:PATH | "
                         "chroma+http://host:port | milvus:PATH.db | milvus://host:19530"),
]


@dataclass(frozen=True)
class SearchFlags:
    """The flags `query` and `ask` share: mode, depth, fusion, re-ranking and the scope filters."""

    k: int = 8
    hybrid: bool = False
    lexical_only: bool = False
    vector: bool = False
    mode: str | None = None
    user: str | None = None
    doc_type: list[str] | None = None
    private_only: bool = False
    public_only: bool = False
    date_from: str | None = None
    date_to: str | None = None
    include_archive: bool = False
    tag: list[str] | None = None
    top_k_vector: int | None = None
    top_k_lexical: int | None = None
    rrf_k: int | None = None
    fusion: str | None = None
    fusion_weight: float | None = None
    rerank: bool = False
    rerank_top_n: int | None = None
    dedup_sources: bool = False
    feedback: int | None = None
    feedback_weight: float | None = None

    def chosen_mode(self) -> str | None:
        chosen = [m for m, on in (("hybrid", self.hybrid), ("lexical", self.lexical_only), ("vector", self.vector))
                  if on]
        if self.mode:
            chosen.append(self.mode)
        if len(set(chosen)) > 1:
            raise RagsteadError(f"choose one mode, got {sorted(set(chosen))}")
        return chosen[0] if chosen else None

    def search_request(self, question: str) -> SearchRequest:
        """The library request these flags make."""
        return SearchRequest(question, **self._request_fields())

    def ask_request(self, question: str, **fields: Any) -> AskRequest:
        """The library request these flags and `ask`'s own `fields` make (None: the default)."""
        return AskRequest(question, **self._request_fields(),
                          **{name: value for name, value in fields.items() if value is not None})

    def _request_fields(self) -> dict[str, Any]:
        if self.private_only and self.public_only:
            raise RagsteadError("--private-only and --public-only exclude each other")
        scope = Scope(self.user, self.public_only, tuple(self.doc_type or ()), tuple(self.tag or ()), self.date_from,
                      self.date_to, self.include_archive)
        knobs = {"mode": self.chosen_mode(), "top_k_vector": self.top_k_vector, "top_k_lexical": self.top_k_lexical,
                 "fusion": self.fusion, "fusion_weight": self.fusion_weight, "rrf_k": self.rrf_k,
                 "rerank_top_n": self.rerank_top_n, "feedback_k": self.feedback,
                 "feedback_weight": self.feedback_weight}
        return {"k": self.k, "scope": scope, "rerank": self.rerank, "dedup_sources": self.dedup_sources,
                **{name: value for name, value in knobs.items() if value is not None}}


# The request fields as the CLI spells them (a library error names `date_from`, the CLI user reads --date-from).
CLI_SPELLING = {name: "--" + name.replace("_", "-") for name in (
    *(f.name for f in dataclass_fields(AskRequest)), *SCOPE_FIELDS)} | {
    "query": "the question", "doc_types": "--doc-type", "tags": "--tag", "feedback_k": "--feedback"}


def _option(default: Any, kind: Any, *names: str, help: str, panel: str = SEARCH_PANEL,
            complete: tuple[str, ...] = ()) -> inspect.Parameter:
    name = names[0].lstrip("-").replace("-", "_")
    option = typer.Option(*names, help=help, rich_help_panel=panel,
                          autocompletion=_completer(complete) if complete else None)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, option])


def _completer(values: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Shell completion (`--mode <TAB>`) of an option that takes one of a few words."""
    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]

    return complete


_SEARCH_PARAMETERS = [
    _option(DEFAULT_K, int, "--k", "-k", help=f"Results to return, 1-{MAX_K} (ask: chunks to consider)."),
    _option(False, bool, "--hybrid", help="Vector + lexical, fused (convex by default; see --fusion). The default."),
    _option(False, bool, "--lexical-only", help="BM25 full-text only."),
    _option(False, bool, "--vector", help="Vector search only."),
    _option(None, str | None, "--mode", help="vector | lexical | hybrid (default: config default_mode, hybrid)",
            complete=("vector", "lexical", "hybrid")),
    _option(None, str | None, "--user", help="Only this user's documents.", panel=SCOPE_PANEL),
    _option(None, list[str] | None, "--doc-type", help="Repeatable or comma-separated.", panel=SCOPE_PANEL),
    _option(False, bool, "--private-only", help="Only private content (default).", panel=SCOPE_PANEL),
    _option(False, bool, "--public-only", help="Only public content.", panel=SCOPE_PANEL),
    _option(None, str | None, "--date-from", help="YYYY-MM-DD, inclusive.", panel=SCOPE_PANEL),
    _option(None, str | None, "--date-to", help="YYYY-MM-DD, inclusive.", panel=SCOPE_PANEL),
    _option(False, bool, "--include-archive", help="Include archive docs.", panel=SCOPE_PANEL),
    _option(None, list[str] | None, "--tag", help=TAG_HELP, panel=SCOPE_PANEL),
    _option(None, int | None, "--top-k-vector", help="Vector candidates (default: config, 25)."),
    _option(None, int | None, "--top-k-lexical", help="Lexical candidates (default: config, 25)."),
    _option(None, int | None, "--rrf-k", help="RRF constant (implies --fusion rrf; default: config, 60)."),
    _option(None, str | None, "--fusion", help="Hybrid fusion: convex | rrf (default: config, convex).",
            complete=("convex", "rrf")),
    _option(None, float | None, "--fusion-weight", help="convex: vector share, 0..1 (implies --fusion convex; "
                                                         "default: config, 0.5)."),
    _option(False, bool, "--rerank", help="Re-rank the top candidates (sentence max-sim)."),
    _option(None, int | None, "--rerank-top-n", help="Candidates --rerank re-orders (default: config, 30)."),
    _option(False, bool, "--dedup-sources", help="Keep only the best chunk of each document (source)."),
    _option(None, int | None, "--feedback", help=FEEDBACK_HELP),
    _option(None, float | None, "--feedback-weight", help=FEEDBACK_WEIGHT_HELP),
]


def _with_flags(parameters: list[inspect.Parameter], argument: str, make: Callable[..., Any], *,
                last: bool = False) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator that gives a command `parameters` (options declared once), collected into one argument named
    `argument`: `make(**their values)`. The command's keyword-only options come after them in the help (`last`:
    every option of the command comes before them)."""
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != argument]
        names = [p.name for p in parameters]

        @functools.wraps(func)
        def command(**kwargs: Any) -> None:
            collected = make(**{name: kwargs.pop(name) for name in names})
            func(**{argument: collected}, **kwargs)

        positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p not in positional]
        shared = [*positional, *keyword, *parameters] if last else [*positional, *parameters, *keyword]
        command.__signature__ = inspect.Signature(shared)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}  # type: ignore[attr-defined]
        return command

    return decorate


def with_search_flags(func: Callable[..., None]) -> Callable[..., None]:
    """Give a command the shared search and scope options, collected into one `flags: SearchFlags` argument."""
    return _with_flags(_SEARCH_PARAMETERS, "flags", SearchFlags)(func)


@dataclass(frozen=True)
class AskFlags:
    """The flags `ask` and `chat` share beside the search flags: how an answer is decided and written."""

    min_confidence: float | None = None
    min_similarity: float | None = None
    max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS
    extractive: bool = False
    template: str | None = None
    remember: bool = False
    tools: list[str] | None = None
    llm: list[str] | None = None
    list_questions: bool = True
    offset: int = 0
    limit: int = DEFAULT_LIST_LIMIT

    def request_fields(self) -> dict[str, Any]:
        """The `AskRequest` fields these flags set (for `SearchFlags.ask_request`), checked against each other."""
        if self.tools and self.extractive:
            raise RagsteadError("--tools needs an LLM answerer; --extractive never calls tools")
        return {"min_similarity": self.min_similarity, "min_confidence": self.min_confidence,
                "max_context_tokens": self.max_context_tokens, "extractive": self.extractive,
                "template": self.template, "remember": self.remember,
                "tools": tuple(self.tools) if self.tools else None,
                "llm": tuple(split_values(self.llm)) if self.llm else None, "list_questions": self.list_questions,
                "offset": self.offset, "limit": self.limit}


def _ask_option(name: str, default: Any, kind: Any, *names: str, help: str, **extra: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(*names, help=help, **extra)])


_ASK_PARAMETERS = [
    _ask_option("min_confidence", None, float | None, "--min-confidence", show_default=False,
                help="The relevance gate's threshold, 0..1; under it: refuse (default: the calibrated model's)."),
    _ask_option("min_similarity", None, float | None, "--min-similarity", show_default=False,
                help=f"Replace the relevance gate with a cosine threshold per chunk (the rule before the gate was "
                     f"{DEFAULT_MIN_SIMILARITY}; -1 hands every chunk over)."),
    _ask_option("max_context_tokens", DEFAULT_MAX_CONTEXT_TOKENS, int, "--max-context-tokens",
                help="Token budget of the chunks given to the answerer."),
    _ask_option("extractive", False, bool, "--extractive", help="Offline extractive answer; no LLM."),
    _ask_option("template", None, str | None, "--template", help="LLM prompt template: a name (`ragstead "
                "templates`) or a .toml path (default: config answer_template, else grounded)."),
    _ask_option("remember", False, bool, "--remember", help="If the question states a lasting fact or preference, "
                "write it to --user's memory (chat: let a \"remember that ...\" turn write it)."),
    _ask_option("tools", None, list[str] | None, "--tools", help="Tools the LLM answerer may call: weather "
                "(Open-Meteo); repeatable or comma-separated (default: config tools, none)."),
    _ask_option("llm", None, list[str] | None, "--llm", help="Consent to a remote LLM answerer for this question: "
                "openai | gemini (default: config answerer; none: answered on this machine)."),
    _ask_option("list_questions", True, bool, "--list-questions/--no-list-questions",
                help="Answer \"which notes mention X\" and \"how many files ...\" from the whole scope: every "
                     "matching document once, with how many were examined."),
    _ask_option("offset", 0, int, "--offset", help="A list answer: the first matching document to show (paging)."),
    _ask_option("limit", DEFAULT_LIST_LIMIT, int, "--limit",
                help=f"A list answer: matching documents to show, 1-{MAX_LIST_LIMIT}."),
]


def with_ask_flags(func: Callable[..., None]) -> Callable[..., None]:
    """Give a command `ask`'s own options, collected into one `answer_flags: AskFlags` argument."""
    return _with_flags(_ASK_PARAMETERS, "answer_flags", AskFlags)(func)


def with_project_flags(func: Callable[..., None] | None = None, *, db: bool = True,
                       store: bool = True) -> Any:
    """Give a command the project flags (without --db or --store where they mean nothing), collected into one
    `project: ProjectFlags` argument. Bare (`@with_project_flags`) or called (`@with_project_flags(store=False)`)."""
    left_out = {name for name, wanted in (("db", db), ("store", store)) if not wanted}
    decorate = _with_flags([p for p in _PROJECT_PARAMETERS if p.name not in left_out], "project", ProjectFlags,
                           last=True)
    return decorate(func) if func is not None else decorate
