"""What every command prints with: errors as one `error:` line, the output format, terminal or pipe, JSON, CSV
and JSON Lines rows, progress bars and escaped names."""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ragstead.cli._flags import CLI_SPELLING, JsonOpt
from ragstead.errors import InvalidQueryError, RagsteadError

err = Console(stderr=True)


def fail(exc: Exception) -> typer.Exit:
    # The message is escaped: text in [brackets] (a path, a URL, an option list) is not rich markup.
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code=2)


@contextmanager
def library_errors() -> Iterator[None]:
    """Every library error a command meets becomes one `error:` line and exit code 2."""
    try:
        yield
    except InvalidQueryError as exc:
        raise fail(RagsteadError(exc.respelled(CLI_SPELLING))) from None
    except RagsteadError as exc:
        raise fail(exc) from None


def check_format(output: str, *allowed: str) -> None:
    if output not in allowed:
        raise RagsteadError(f"--format must be {' or '.join(allowed)}, got {output!r}")


def output_format(output: str, as_json: bool, *allowed: str) -> str:
    """The output format a command prints: `--json` is `--format json`; the default is the first (human) one."""
    if as_json:
        if output not in (allowed[0], "json"):
            raise RagsteadError(f"--json and --format {output} exclude each other; give one")
        return "json"
    check_format(output, *allowed)
    return output


def format_option(*allowed: str) -> Any:
    """The `--format` option; its default is the first (human) format."""
    return typer.Option("--format", help=" | ".join(allowed))


def with_output_flags(*formats: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Give a command `--format` (one of `formats`, the first, for people, the default) and `--json` where its
    `output: str` parameter stands, and hand it the format chosen (`output_format`): a command declares neither."""
    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(func, eval_str=True)
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            if parameter.name != "output":
                parameters.append(parameter)
                continue
            parameters += [parameter.replace(default=formats[0], annotation=Annotated[str, format_option(*formats)]),
                           parameter.replace(name="as_json", default=False, annotation=JsonOpt)]

        @functools.wraps(func)
        def command(**kwargs: Any) -> None:
            with library_errors():
                kwargs["output"] = output_format(kwargs.pop("output"), kwargs.pop("as_json"), *formats)
            func(**kwargs)

        command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command

    return decorate


def on_terminal() -> bool:
    """Whether stdout is a person's terminal (human layout, wrapped to its width) rather than a pipe or file."""
    return sys.stdout.isatty()


def human_console() -> Console:
    """Human output: colored on a terminal, plain and wide (nothing folded for grep) in a pipe."""
    return Console(soft_wrap=False, width=None if on_terminal() else 200)


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def say(message: str, *, err: bool = False, **style: Any) -> None:
    """One line for people, styled on a terminal only (click drops styles in a pipe), never with NO_COLOR."""
    if os.environ.get("NO_COLOR"):
        style = {}
    typer.secho(message, err=err, **style)


def show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@contextmanager
def progress_bar(quiet: bool, label: str) -> Iterator[Callable[..., None] | None]:
    """A rich progress bar on a terminal, else nothing; yields a (done, total) or (stage, done, total) hook."""
    if not show_progress(quiet):
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


def print_rows(rows: list[dict[str, Any]], columns: tuple[str, ...], output: str) -> None:
    """`--format jsonl` (one JSON object a line, every field) or `csv` (a header, then `columns`)."""
    if output == "jsonl":
        for row in rows:
            typer.echo(json.dumps(row, ensure_ascii=False))
        return
    import csv

    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else csv_cell(row[c]) for c in columns])
    sys.stdout.flush()


def csv_cell(value: Any) -> Any:
    """A CSV cell, control characters escaped (`\\n`, `\\x1b`): a file name or a text must not carry raw
    terminal escapes or line breaks into a spreadsheet or a pipe."""
    if isinstance(value, list | tuple):
        return escaped(",".join(str(v) for v in value))
    return escaped(value) if isinstance(value, str) else value


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escaped(text: str) -> str:
    """A name on one line: control characters (a newline in a file name) shown as escapes, `\\n`, so a
    name cannot add a line of its own to the output."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
