"""The CLI as a package (#51.1): one module per command group over one app, the project flags and the output
flags declared once (`ProjectFlags`, `with_output_flags`) and handed to every command the same way. In-process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import ragstead.cli
from ragstead.cli import app
from ragstead.errors import RagsteadError

PACKAGE = Path(ragstead.cli.__file__).parent
PROJECT_FLAGS = ("--root", "--config", "--db", "--store")


def commands() -> list[tuple[str, Any]]:
    """Every command as `ragstead ...` names it, subcommands of the groups included."""
    found = []
    for name, command in typer.main.get_command(app).commands.items():
        subs = getattr(command, "commands", None)
        found += [(f"{name} {sub}", c) for sub, c in subs.items()] if subs else [(name, command)]
    return found


def test_no_command_module_spells_the_shared_flags():
    declared = re.compile(r'Option\(\s*"--(root|config|db|store|format)"')
    for module in sorted(PACKAGE.glob("*.py")):
        if module.name in ("_flags.py", "_output.py"):  # where ProjectFlags and with_output_flags declare them
            continue
        found = declared.findall(module.read_text(encoding="utf-8"))
        assert not found, f"cli/{module.name} declares --{found[0]}: use @with_project_flags / @with_output_flags"


@pytest.mark.parametrize(("name", "command"), commands(), ids=[name for name, _ in commands()])
def test_the_project_flags_come_last_and_read_the_same_everywhere(name, command):
    options = [p.opts[0] for p in command.params if p.param_type_name == "option"]
    shared = [o for o in options if o in PROJECT_FLAGS]
    if not shared:
        return  # init, templates, models, sanity: no project to open
    assert options[-len(shared):] == shared and shared[:2] == ["--root", "--config"], (name, options)
    helps = {p.opts[0]: p.help for p in command.params if p.opts[0] in PROJECT_FLAGS}
    reference = {p.opts[0]: p.help for p in typer.main.get_command(app).commands["status"].params
                 if p.opts[0] in PROJECT_FLAGS}
    assert helps == {flag: reference[flag] for flag in helps}


def test_every_project_flag_reaches_the_knowledge_base(monkeypatch, tmp_path):
    import ragstead.knowledge_base

    opened: list[tuple[Any, dict[str, Any]]] = []

    def fake_open(root: Any, **kwargs: Any) -> Any:
        opened.append((root, kwargs))
        raise RagsteadError("stop here")

    monkeypatch.setattr(ragstead.knowledge_base, "open", fake_open)
    args = ["--root", str(tmp_path), "--config", str(tmp_path / "c.toml"), "--db", "x.db", "--store", "sqlite:y.db"]
    result = CliRunner().invoke(app, ["tags", *args])
    assert result.exit_code == 2 and "error: stop here" in result.output
    assert opened == [(tmp_path, {"config": tmp_path / "c.toml", "db_path": "x.db", "store": "sqlite:y.db"})]
    opened.clear()
    CliRunner().invoke(app, ["index", "--model", "m", *args])  # a command's own overrides go along
    assert opened[0][1]["model"] == "m" and opened[0][1]["store"] == "sqlite:y.db"
    opened.clear()
    CliRunner().invoke(app, ["migrate", "--from", "sqlite:a.db", "--to", "sqlite:b.db", "--root", str(tmp_path)])
    assert opened == [(tmp_path, {"config": None, "db_path": None, "store": "sqlite:a.db"})]  # --from is the store


@pytest.mark.parametrize("command", [["query", "q"], ["ask", "q"], ["chat"], ["eval", "--beir", "."]])
def test_the_model_flags_are_declared_once_and_reach_the_knowledge_base(monkeypatch, tmp_path, command):
    import ragstead.knowledge_base

    opened: list[dict[str, Any]] = []

    def fake_open(root: Any, **kwargs: Any) -> Any:
        opened.append(kwargs)
        raise RagsteadError("stop here")

    monkeypatch.setattr(ragstead.knowledge_base, "open", fake_open)
    models = ["--model", "m", "--reranker", "onnx:r", "--allow-download"]
    result = CliRunner().invoke(app, [*command, *models, "--root", str(tmp_path)], input="q\n")
    assert "error: stop here" in result.output, result.output
    assert {k: opened[0][k] for k in ("model", "reranker", "allow_download")} == {
        "model": "m", "reranker": "onnx:r", "allow_download": True}
    opened.clear()
    CliRunner().invoke(app, [*command, "--root", str(tmp_path)], input="q\n")  # not given: the index's own
    assert not {"model", "reranker", "allow_download"} & set(opened[0])


@pytest.mark.parametrize(("args", "code", "expected"), [
    (["models", "--json"], 0, '"id"'),
    (["models", "--format", "json"], 0, '"id"'),
    (["models", "--json", "--format", "text"], 0, '"id"'),  # --json with the default format: JSON
    (["models", "--format", "xml"], 2, "error: --format must be text or json, got 'xml'"),
    (["ls", "--json", "--format", "csv"], 2, "error: --json and --format csv exclude each other; give one"),
    (["query", "x", "--format", "tsv"], 2, "error: --format must be table or json or jsonl or csv, got 'tsv'"),
])
def test_json_and_format_are_one_choice(args, code, expected, tmp_path):
    result = CliRunner().invoke(app, [*args, *(["--root", str(tmp_path)] if args[0] != "models" else [])])
    assert result.exit_code == code, result.output
    assert expected in result.output


@pytest.mark.parametrize("args", [["serve", "--head-timeout", "0"], ["serve", "--body-timeout", "-1"],
                                  ["mcp", "--http", "--head-timeout", "0"]])
def test_a_server_time_limit_of_zero_is_one_error_line(tmp_path, args):
    # at 0 or below every connection would be closed before its first request: refused before anything starts
    result = CliRunner().invoke(app, [*args, "--root", str(tmp_path)])
    assert result.exit_code == 2 and "must be above 0 seconds" in result.output, result.output
