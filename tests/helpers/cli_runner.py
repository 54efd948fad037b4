"""Run the `ragstead` command in this process (typer/click's CliRunner isolation) and hand back what a subprocess
would have: exit code, stdout, stderr. A process costs a second of start-up per call; tests of what a command
prints or exits with do not need one. Tests of the process itself (signals, Ctrl-C, SIGPIPE, start-up, tty) still
start `python -m ragstead`."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
import warnings
from collections.abc import Mapping
from contextlib import chdir
from pathlib import Path

from click.testing import CliRunner

from helpers.project import LLM_ENV
from ragstead import cli as ragstead_cli
from ragstead.cli._app import show_warning


def _env_changes(env: Mapping[str, str] | None) -> dict[str, str | None]:
    """The changes to os.environ that give `env` (a subprocess's whole environment) or, without one, the offline
    environment; None removes a variable for the call."""
    if env is None:
        return {key: None for key in LLM_ENV}
    changes: dict[str, str | None] = {key: None for key in os.environ if key not in env}
    changes.update({key: value for key, value in env.items() if os.environ.get(key) != value})
    return changes


def run_ragstead(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
                 input: str | bytes | None = None) -> subprocess.CompletedProcess[str]:
    """`ragstead ARGS` through the real entry point (`ragstead.cli.main`: its usage-error lines and exit codes),
    with `env` as the whole environment (default: this one without LLM keys) and `cwd` as the working folder."""
    with CliRunner().isolation(input=input, env=_env_changes(env)) as streams, chdir(cwd or os.getcwd()), \
            warnings.catch_warnings():
        # A fresh interpreter's warning filters and the CLI's own printer: pytest records warnings otherwise.
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.showwarning = show_warning
        try:
            ragstead_cli.main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        except Exception:  # what the interpreter would do: the traceback on stderr, exit code 1
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = streams[0].getvalue(), streams[1].getvalue()
    return subprocess.CompletedProcess(["ragstead", *args], code, stdout.decode(), stderr.decode())
