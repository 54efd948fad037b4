"""The docs tell the truth: the README's Python tour runs, and every CLI command and option is documented."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from helpers.project import OFFLINE_ENV
from ragstead.cli import app

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CLI_DOC = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")


def _commands() -> list[tuple[str, Any]]:
    """(`ragstead keys add`, command) for every command, subcommands included."""
    out = []

    def walk(prefix: str, command: Any) -> None:
        if hasattr(command, "commands"):  # a group (typer may ship its own click: no isinstance)
            for name, sub in command.commands.items():
                walk(f"{prefix} {name}", sub)
        else:
            out.append((prefix, command))

    walk("ragstead", typer.main.get_command(app))
    return out


COMMANDS = _commands()


def test_the_readme_stays_short():
    assert len(README.splitlines()) <= 250


def test_the_readme_puts_a_private_users_path_first():
    """#47.10: install, init, index, query, ask and chat come first and need no --user; the team layout, its
    --user, the guard and the benchmarks come after the personal sections; `make demo`/`make test` stay second."""
    heads = [line for line in README.splitlines() if line.startswith("## ")]
    assert heads[:2] == ["## Quick start: a folder of notes", "## The two commands"]
    quick = README.split("## Quick start: a folder of notes", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", quick, re.S).group(1)
    for command in ("pip install", "ragstead init", "ragstead index", "ragstead query", "ragstead ask",
                    "ragstead chat"):
        assert command in block, command
    team = README.index("## A team's folder")
    personal = README[:team]
    assert "--user" not in personal and "kb/users/" not in personal and "--layout team" not in personal
    assert team < README.index("## Keep it fresh and private") < README.index("## Quality and speed")


def _pip_installs(target: str, venv: Path) -> list[str]:
    """The `pip install` lines `make TARGET` would run on a fresh venv (make -n prints, runs nothing)."""
    out = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines() if "pip install" in line and "--upgrade pip" not in line]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_readmes_first_command_installs_the_core_and_the_second_the_dev_extras(tmp_path):
    """#47.9: `make demo` (the README's first command) installs the core only, no server store or other extra;
    `make test` (the second, CI's) still installs the dev extras."""
    block = README.split("## The two commands", 1)[1].split("```", 2)[1]
    assert [line.split()[:2] for line in block.splitlines()[1:3]] == [["make", "demo"], ["make", "test"]]
    demo = _pip_installs("demo", tmp_path / "venv")
    assert demo and all(line.rstrip().endswith("-e .") for line in demo), demo
    assert not any("[" in line for line in demo), demo
    test = _pip_installs("test", tmp_path / "venv")
    assert any("-e '.[dev]'" in line for line in test), test


def test_the_python_tour_in_the_readme_runs(tmp_path):
    section = README.split("## Python quick tour", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "the Python quick tour has no python block"
    shutil.copytree(REPO / "examples" / "sample", tmp_path / "examples" / "sample",
                    ignore=shutil.ignore_patterns("rag"))
    result = subprocess.run([sys.executable, "-c", code.group(1)], cwd=tmp_path, capture_output=True, text=True,
                            env=OFFLINE_ENV, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("indexed 9 files")
    assert lines[1].startswith("1 kb/users/alice/2025-03-14-database-decision.md")
    assert "PostgreSQL 16" in result.stdout and "[1]" in result.stdout
    assert "['kb/users/alice/2025-03-14-database-decision.md']" in lines
    assert lines[-3] == "True"
    assert lines[-2] == "added" and lines[-1] == "True"  # the ingested page, found with its URL


def test_there_are_commands_to_document():
    names = {name for name, _ in COMMANDS}
    assert {"ragstead index", "ragstead query", "ragstead ask", "ragstead serve", "ragstead keys add"} <= names


def _section(name: str) -> str:
    """The text under docs/cli.md's heading for `name`, down to the next heading of the same or a higher level."""
    lines = CLI_DOC.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#") and f"`{name}`" in line), None)
    assert start is not None, f"docs/cli.md has no heading for `{name}`"
    level = len(lines[start]) - len(lines[start].lstrip("#"))
    body = []
    for line in lines[start + 1:]:
        depth = len(line) - len(line.lstrip("#"))
        if line.startswith("#") and depth <= level:
            break
        body.append(line)
    return "\n".join(body)


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_command_and_option_is_documented_with_help(name, command):
    assert (command.help or "").strip(), f"{name} has no help text"
    section = _section(name)
    for param in command.params:
        if param.param_type_name == "option":
            assert (param.help or "").strip(), f"{name} {param.opts[0]} has no help text"
            long = [o for o in param.opts if o.startswith("--")]
            assert any(f"`{o}" in section for o in long), f"docs/cli.md's `{name}` section lacks {long}"
        else:
            assert (param.name or "").upper() in section, f"docs/cli.md's `{name}` section lacks {param.name}"
