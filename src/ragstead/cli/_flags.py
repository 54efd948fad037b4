"""The options commands share, declared once: the project flags (`ProjectFlags`), the search and scope flags
(`SearchFlags`) and `ask`'s own (`AskFlags`), each collected into one argument by a decorator. The search and
ask options are the field table's (ragstead.request.fields): their spelling, help, type and default."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from ragstead.errors import RagsteadError
from ragstead.request.fields import TAG_HELP as TAG_HELP  # documents' --tag reads the same words
from ragstead.request.fields import Door, RequestField, exposed, spellings, table
from ragstead.request.model import AskRequest, SearchRequest

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
SEARCH_PANEL = "Search"
SCOPE_PANEL = "Scope"


def _field_parameter(item: RequestField, door: Door, *, panels: bool = True) -> inspect.Parameter:
    """The option the field table gives a field in this door: its spelling, help, type and default; a search
    field in the Search or Scope panel (`panels`), completion for a choice, a `--x/--no-x` pair for a flag on by
    default."""
    kind: Any = item.kind
    default = item.default
    if item.kind is list:
        kind, default = list[str] | None, None  # typer's repeatable option; None: not given
    elif default is None:
        kind = kind | None
    names = (f"{door.name}/--no-{door.name.removeprefix('--')}",) if kind is bool and default is True else (
        door.name, *door.aliases)
    panel = None if item.request == "ask" or not panels else SCOPE_PANEL if item.scope else SEARCH_PANEL
    option = typer.Option(*names, help=door.doc or item.doc, rich_help_panel=panel, show_default=default is not None,
                          autocompletion=_completer(item.choices) if item.choices else None)
    return inspect.Parameter(_parameter_name(door), inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, option])


def _parameter_name(door: Door) -> str:
    return door.name.removeprefix("--").replace("-", "_")


def _completer(values: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Shell completion (`--mode <TAB>`) of an option that takes one of a few words."""
    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]

    return complete


def field_option(name: str) -> Any:
    """The table's option of one field, as an `Annotated` alias for a command that takes it alone (`eval`)."""
    item = table()[name]
    assert item.cli is not None, f"{name} is not a CLI option"
    annotation: Any = _field_parameter(item, item.cli, panels=False).annotation
    return annotation


# `eval` takes these alone, spelt and explained as `query` and `ask` take them.
RrfKOpt = field_option("rrf_k")
FusionOpt = field_option("fusion")
FusionWeightOpt = field_option("fusion_weight")
RerankTopNOpt = field_option("rerank_top_n")
FeedbackOpt = field_option("feedback_k")
FeedbackWeightOpt = field_option("feedback_weight")


@dataclass(frozen=True)
class ProjectFlags:
    """The flags that say which project and index a command works on: --root, --config, --db and --store
    (`with_project_flags` gives a command them, last in its help, as every command had them)."""

    root: Path | None = None
    config: Path | None = None
    db: str | None = None
    store: str | None = None
    # The models a searching command opens the index with (`with_project_flags(models=True)`): None, the index's.
    model: str | None = None
    reranker: str | None = None
    allow_download: bool = False

    def open(self, **overrides: Any) -> KnowledgeBase:
        """The project's knowledge base (imported here: the KnowledgeBase and what it loads stay out of -h), with
        the models given on the command line."""
        from ragstead.knowledge_base import open as open_kb

        models = {"model": self.model, "reranker": self.reranker, "allow_download": self.allow_download or None}
        return open_kb(self.root, config=self.config, db_path=self.db, store=self.store,
                       **{name: value for name, value in models.items() if value is not None}, **overrides)


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
# What `query`, `ask`, `chat` and `eval` open the index with, spelt once.
_MODEL_PARAMETERS = [
    inspect.Parameter("model", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ModelOpt),
    inspect.Parameter("reranker", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=RerankerOpt),
    inspect.Parameter("allow_download", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=AllowDownloadOpt),
]



@dataclass(frozen=True)
class SearchFlags:
    """The flags `query` and `ask` share: the field table's search fields as given (by their library names:
    `given["feedback_k"]` is --feedback), and the CLI's shorthands for two of them (--hybrid, --lexical-only,
    --vector for --mode; --private-only, the default scope)."""

    given: Mapping[str, Any]
    hybrid: bool = False
    lexical_only: bool = False
    vector: bool = False
    private_only: bool = False

    @property
    def user(self) -> str | None:
        user: str | None = self.given.get("user")
        return user

    def chosen_mode(self) -> str | None:
        chosen = [m for m, on in (("hybrid", self.hybrid), ("lexical", self.lexical_only), ("vector", self.vector))
                  if on]
        if self.given.get("mode"):
            chosen.append(self.given["mode"])
        if len(set(chosen)) > 1:
            raise RagsteadError(f"choose one mode, got {sorted(set(chosen))}")
        return chosen[0] if chosen else None

    def search_request(self, question: str) -> SearchRequest:
        """The library request these flags make."""
        return SearchRequest.of(question, **self._request_fields())

    def ask_request(self, question: str, **fields: Any) -> AskRequest:
        """The library request these flags and `ask`'s own `fields` make (None: the default)."""
        return AskRequest.of(question, **self._request_fields(), **fields)

    def _request_fields(self) -> dict[str, Any]:
        if self.private_only and self.given.get("public_only"):
            raise RagsteadError("--private-only and --public-only exclude each other")
        return {**self.given, "mode": self.chosen_mode()}


# The request fields as the CLI spells them (a library error names `date_from`, the CLI user reads --date-from).
CLI_SPELLING = {**spellings("cli"), "query": "the question"}


def _option(default: Any, kind: Any, *names: str, help: str, panel: str = SEARCH_PANEL) -> inspect.Parameter:
    name = names[0].lstrip("-").replace("-", "_")
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(*names, help=help, rich_help_panel=panel)])


# The CLI's shorthands, each shown after the field it stands for (the help keeps them together).
_SHORTHANDS = {
    "k": [_option(False, bool, "--hybrid", help="Vector + lexical, fused (convex by default; see --fusion). The "
                                                "default."),
          _option(False, bool, "--lexical-only", help="BM25 full-text only."),
          _option(False, bool, "--vector", help="Vector search only.")],
    "doc_types": [_option(False, bool, "--private-only", help="Only private content (default).", panel=SCOPE_PANEL)],
}


def _table_parameters(request: Literal["search", "ask"]) -> tuple[list[inspect.Parameter], dict[str, str]]:
    """The options of the table's fields this door shows for `request`'s own fields (read when a command is
    decorated), with the shorthands, and each option's field name."""
    parameters: list[inspect.Parameter] = []
    field_names: dict[str, str] = {}
    for item, door in exposed("cli", request, only=request):
        parameters.append(_field_parameter(item, door))
        field_names[_parameter_name(door)] = item.name
        parameters += _SHORTHANDS.get(item.name, []) if request == "search" else []
    return parameters, field_names


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
    """Give a command the table's search and scope options, collected into one `flags: SearchFlags` argument."""
    parameters, field_names = _table_parameters("search")

    def make(**values: Any) -> SearchFlags:
        shorthands = {name: values.pop(name) for name in ("hybrid", "lexical_only", "vector", "private_only")}
        return SearchFlags({field_names[name]: value for name, value in values.items()}, **shorthands)

    return _with_flags(parameters, "flags", make)(func)


@dataclass(frozen=True)
class AskFlags:
    """The flags `ask` and `chat` share beside the search flags, how an answer is decided and written: the field
    table's ask fields as given, by their library names."""

    given: Mapping[str, Any]

    @property
    def extractive(self) -> bool:
        return bool(self.given.get("extractive"))

    @property
    def remember(self) -> bool:
        return bool(self.given.get("remember"))

    def request_fields(self) -> dict[str, Any]:
        """The `AskRequest` fields these flags set (for `SearchFlags.ask_request`), checked against each other."""
        if self.given.get("tools") and self.extractive:
            raise RagsteadError("--tools needs an LLM answerer; --extractive never calls tools")
        return dict(self.given)


def with_ask_flags(func: Callable[..., None]) -> Callable[..., None]:
    """Give a command the table's ask options, collected into one `answer_flags: AskFlags` argument."""
    parameters, field_names = _table_parameters("ask")

    def make(**values: Any) -> AskFlags:
        return AskFlags({field_names[name]: value for name, value in values.items()})

    return _with_flags(parameters, "answer_flags", make)(func)


def with_project_flags(func: Callable[..., None] | None = None, *, db: bool = True,
                       store: bool = True, models: bool = False) -> Any:
    """Give a command the project flags (without --db or --store where they mean nothing; with --model, --reranker
    and --allow-download for `models`), collected into one `project: ProjectFlags` argument. Bare
    (`@with_project_flags`) or called (`@with_project_flags(store=False)`)."""
    left_out = {name for name, wanted in (("db", db), ("store", store)) if not wanted}
    parameters = [*(_MODEL_PARAMETERS if models else []), *(p for p in _PROJECT_PARAMETERS if p.name not in left_out)]
    decorate = _with_flags(parameters, "project", ProjectFlags, last=True)
    return decorate(func) if func is not None else decorate
