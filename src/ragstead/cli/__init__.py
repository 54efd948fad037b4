"""The `ragstead` command line: a thin typer layer over `ragstead.KnowledgeBase`. Errors print one line, exit 2.

One module per command group, each registering its commands on the one app (`_app.py`); the options they share
are declared once in `_flags.py`, what they print with in `_output.py`. Only light modules at the top of each:
`ragstead --version` and `-h` must start in a blink, so the KnowledgeBase (and numpy, tantivy, onnxruntime,
httpx... behind it) is imported by `ProjectFlags.open` and the commands that use it.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.text import Text

# Importing a command module registers its commands on `app`.
from ragstead.cli import chat, documents, evaluate, guard, index, keys, project, search, serve  # noqa: F401
from ragstead.cli._app import app, drop_stdout
from ragstead.cli._output import err

__all__ = ["app", "main"]

# The order `ragstead --help` lists the commands in: the daily ones first, as a person meets them.
COMMAND_ORDER = ("init", "index", "query", "ask", "chat", "ingest", "tags", "remember", "eval", "migrate", "ls",
                 "status", "doctor", "templates", "models", "sanity", "serve", "mcp", "freshness", "watch",
                 "export", "import", "egress")
app.registered_commands.sort(key=lambda info: COMMAND_ORDER.index(info.name or info.callback.__name__))
app.add_typer(guard.guard_app, name="guard")
app.add_typer(keys.keys_app, name="keys")


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
        drop_stdout()
    sys.exit(code if isinstance(code, int) else 0)
