"""File names that hold line breaks or terminal escapes (#45.10): `index` and `watch` lines, `ls`'s TSV and the CSV
formats show them escaped (`\\n`, `\\x1b`), so a name cannot forge a line of output or reach a terminal raw."""

from __future__ import annotations

import csv
import io

import pytest
from typer.testing import CliRunner

from ragstead import cli as cli_module

FORGED = "kb/notes/x.md\nadded 99, updated 0, removed 0\n\x1b[2J.md"


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


@pytest.fixture
def run(tmp_path, embedder, monkeypatch):  # type: ignore[no-untyped-def]
    (tmp_path / "kb" / "notes").mkdir(parents=True)
    (tmp_path / "kb" / "notes" / "plain.md").write_text("# Plain\n\nA plain note about herons.\n")
    (tmp_path / FORGED).write_text("# Forged\n\nA note whose name holds line breaks and an escape.\n")
    monkeypatch.setattr("ragstead.services.runtime.embedder_for", lambda *args, **kwargs: embedder)
    runner = CliRunner()
    return lambda *args: runner.invoke(cli_module.app, [*args, "--root", str(tmp_path)])


def test_index_lines_show_a_newline_in_a_name_escaped(run):
    result = run("index")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert not any(line.startswith("added 99") for line in lines)  # was a line of its own
    assert "  + kb/notes/x.md\\nadded 99, updated 0, removed 0\\n\\x1b[2J.md" in lines
    assert "\x1b" not in result.output


def test_ls_tsv_keeps_one_row_per_document_and_csv_has_no_raw_control_characters(run):
    assert run("index").exit_code == 0
    tsv = run("ls").output.splitlines()  # not a terminal: TSV, a header, a row a document, a `#` summary
    assert len(tsv) == 4 and tsv[-1].startswith("# ")
    assert all(len(row.split("\t")) == 6 for row in tsv[:-1])
    table = run("ls", "--format", "csv").output
    assert "\x1b" not in table and "\n\n" not in table  # was written raw
    rows = list(csv.reader(io.StringIO(table)))
    assert {row[0] for row in rows[1:]} >= {"kb/notes/x.md\\nadded 99, updated 0, removed 0\\n\\x1b[2J.md"}


def test_query_tsv_and_ask_citations_keep_a_name_on_its_line(run):
    # A re-probe of #45.10: query's TSV and ask's citation lines still wrote a name raw (a forged line, a tab that
    # made a column, a raw escape).
    assert run("index").exit_code == 0
    tsv = run("query", "line breaks escape", "--lexical-only").output.splitlines()
    assert len(tsv) >= 2 and all(len(row.split("\t")) == 5 for row in tsv)  # the header and a row a hit
    assert any("kb/notes/x.md\\nadded 99, updated 0, removed 0\\n\\x1b[2J.md" in row for row in tsv)
    for question in ("what note holds line breaks and an escape?", "which notes mention line breaks?"):
        answer = run("ask", question, "--extractive")
        assert answer.exit_code == 0, answer.output
        assert "x.md\\nadded 99" in answer.output  # the forged name was cited, escaped
        assert not any(line.startswith("added 99") for line in answer.output.splitlines())
        assert "\x1b" not in answer.output
