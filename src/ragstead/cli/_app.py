"""The typer app every command module registers on: the group (Ctrl-C, a closed pipe), tidy help, --version."""

from __future__ import annotations

import os
import sys
import typing
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperGroup

from ragstead import __version__
from ragstead.cli._output import err
from ragstead.errors import RagsteadWarning


class Group(TyperGroup):
    """The command group: Ctrl-C in any command is one `interrupted` line and exit code 130, no traceback; a
    reader that stops early (`ragstead ls | head -1`) ends the command quietly with exit code 0."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        tidy_help(self)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            err.print("interrupted", markup=False, highlight=False)
            raise typer.Exit(code=130) from None
        except BrokenPipeError:
            drop_stdout()
            raise typer.Exit(code=0) from None


def drop_stdout() -> None:
    """The reader of stdout has gone: point stdout at /dev/null so the last flush at exit cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


# The value names `--help` shows (typer's default is the Python type, `<list[str]>`); a flag shows none.
_METAVARS = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH"}


class _CoercedOnDemand:
    """typer's coercion of one parameter's value, built only for a value that needs it. typer coerces every value
    through a pydantic TypeAdapter, built on first use (importing pydantic: ~0.1 s of CPU, a third of `ls`); a
    value left unset (None) or a default that already has its plain type (str, int, float) comes back from it
    unchanged, so it is passed as it is, and `ls`, `status` and `tags` run with their defaults never import pydantic.
    A value from the command line or the environment still goes through typer's coercion and its checks."""

    def __init__(self, param: Any) -> None:
        self.param, self.built = param, None

    def __call__(self) -> _CoercedOnDemand:  # stands in for the parameter's `get_runtime_param`
        return self

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # typer's own answer for an unset value
            return () if param.multiple or param.nargs == -1 else None
        source = ctx.get_parameter_source(param.name)
        if getattr(source, "name", None) == "DEFAULT" and type(value) in (str, int, float) and (
                type(value) is param.type_descriptor.annotation):
            return value
        if self.built is None:
            self.built = param.__class__.get_runtime_param(param)
        return self.built.coerce(value, param=param, ctx=ctx)


def tidy_help(command: Any) -> None:
    """Help that reads well: value names such as TEXT or TAG, and each command's summary in the command list as
    one paragraph (its docstring's line breaks are for the source, not for the reader). Each parameter's value is
    coerced on demand (`_CoercedOnDemand`)."""
    for param in getattr(command, "params", ()):
        if hasattr(param, "get_runtime_param") and hasattr(param, "type_descriptor"):
            param.get_runtime_param = _CoercedOnDemand(param)
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
                param.default = False  # as in Group.get_params: an unset -h must not build a pydantic validator
        return params

    command.get_params = get_params
    for sub in getattr(command, "commands", {}).values():
        if sub.help and not sub.short_help:
            sub.short_help = " ".join(sub.help.split("\n\n")[0].split())
        tidy_help(sub)

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
    cls=Group,
    add_completion=True,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="ragstead: a local-first, private knowledge base. Index your files, query them offline.",
    epilog="Examples:\n  ragstead index\n  ragstead query \"what did we decide about billing\" --user alice\n"
           "  ragstead ask \"what did we decide about billing\" --user alice\n  ragstead ls --json",
)


def show_warning(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
    """A repair the library made (RagsteadWarning) is one `warning:` line; other warnings stay Python's."""
    if issubclass(category, RagsteadWarning):
        err.print(f"[bold yellow]warning:[/] {escape(str(message))}", markup=True, highlight=False, soft_wrap=True)
    else:
        _python_showwarning(message, category, *args, **kwargs)


_python_showwarning = warnings.showwarning
warnings.showwarning = show_warning


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
