"""What a newcomer reads on an 80-column terminal and in a pipe: `ls` columns that fit, `ask` wrapped like
`query`, a hit's lines in a plain-text file, an HTML page cited by its title, and a plain word outside any
project. In-process (helpers/cli_runner.py); "a terminal" is `ragstead.cli._output.on_terminal` saying so."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.cli import _output as cli_output
from ragstead.cli.search import WordWrapper

ENV = {**OFFLINE_ENV, "COLUMNS": "80"}
TODO = ("TODO\n- call Marta about the leaking kitchen tap\n- renew passport\n- book dentist\n"
        "- water the plants\n- the lighthouse keeper's ferry leaves the harbour at seven, so we pack the bicycles, "
        "the tent and the stove the night before\n- cancel the gym\n")
# 150 lines of 6 words: more than one 400-word chunk, the lighthouse on line 140, in the second.
LOG = "".join(f"day {n} walked the dog twice\n" if n != 140 else "day 140 saw the zebra lighthouse\n"
              for n in range(1, 151))
FILES = {
    "notes/todo.txt": TODO,
    "notes/log.txt": LOG,
    "notes/saved-page-cycling-routes.html": "<html><head><title>Best cycling routes along the Tagus</title></head>"
                                            "<body><p>The riverside path from Cais do Sodre to Belem is 7 km, flat "
                                            "and fully segregated.</p></body></html>",
    "notes/work/team-meetings/2025/project-atlas-weekly-sync-2025-02-11.md":
        "---\ntitle: Project Atlas weekly sync, the one where we finally chose the database\n---\n"
        "We chose MySQL 8 for Atlas.",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("terminal")
    write_files(root, FILES)
    made = run_ragstead("init", str(root / "notes"), env=ENV)
    indexed = run_ragstead("index", "-q", "--root", str(root / "notes"), env=ENV)
    assert made.returncode == indexed.returncode == 0, made.stderr + indexed.stderr
    return root / "notes"


@pytest.fixture
def terminal(monkeypatch):
    monkeypatch.setattr(cli_output, "on_terminal", lambda: True)


def widths(text: str) -> list[int]:
    return [len(line.rstrip()) for line in text.splitlines()]


def test_ls_on_an_80_column_terminal_fits_with_the_type_whole_and_the_title(project, terminal):
    listed = run_ragstead("ls", "--root", str(project), env=ENV)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["file", "title", "type", "date"]
    assert max(widths(listed.stdout)) <= 80 and "user_…" not in listed.stdout
    rows = [line for line in lines[1:] if " note " in line]  # a personal folder's files, by what they are (#47.5)
    assert len(rows) == 4 and "user_kb" not in listed.stdout
    assert "Best cycling routes" in listed.stdout and "Project Atlas weekly" in listed.stdout
    # The long path keeps its folder's start and its file name's end, the ellipsis in the middle.
    long = next(row.split()[0] for row in rows if row.startswith("work/"))
    assert "…" in long and long.endswith("2025-02-11.md")


def test_ask_wraps_to_the_terminal_and_never_in_a_pipe(project, terminal, monkeypatch):
    question = ("when does the lighthouse keeper's ferry leave the harbour", "--extractive", "--root", str(project))
    on_terminal = run_ragstead("ask", *question, env=ENV)
    assert on_terminal.returncode == 0, on_terminal.stderr
    assert "ferry leaves the harbour" in on_terminal.stdout and max(widths(on_terminal.stdout)) <= 80
    monkeypatch.setattr(cli_output, "on_terminal", lambda: False)
    piped = run_ragstead("ask", *question, env=ENV)
    assert max(widths(piped.stdout)) > 80  # the quoted sentence, whole, for grep
    assert " ".join(on_terminal.stdout.split()) == " ".join(piped.stdout.split())


def test_a_text_hit_shows_its_lines_not_a_chunk_number(project):
    piped = run_ragstead("query", "lighthouse ferry harbour", "--root", str(project), env=ENV)
    rows = [line.split("\t") for line in piped.stdout.splitlines()[1:]]
    todo = next(row for row in rows if row[1] == "todo.txt")
    assert todo[2] == "lines 1-7" and not any(row[2].startswith("chunk") for row in rows)
    found = run_ragstead("query", "zebra lighthouse", "--json", "--root", str(project), env=ENV)
    hit = next(r for r in json.loads(found.stdout)["results"] if r["file_path"] == "log.txt" and r["chunk_index"])
    first, last = LOG[:hit["char_start"]].count("\n") + 1, LOG[:hit["char_end"]].count("\n") + 1
    assert 1 < first <= 140 <= last == 150
    piped = run_ragstead("query", "zebra lighthouse", "--all", "--root", str(project), env=ENV)
    assert f"log.txt\tlines {first}-{last}\t" in piped.stdout


def test_a_text_hit_from_a_changed_file_shows_no_lines(project, tmp_path):
    changed = tmp_path / "copy"
    write_files(changed, {"todo.txt": TODO})
    assert run_ragstead("index", "-q", "--root", str(changed), str(changed), env=ENV).returncode == 0
    (changed / "todo.txt").write_text("Moved everything.\n" + TODO)  # the offsets point into the old text
    piped = run_ragstead("query", "lighthouse ferry harbour", "--root", str(changed), env=ENV)
    assert piped.stdout.splitlines()[1].split("\t")[1:3] == ["todo.txt", ""]


def test_an_html_page_is_cited_by_its_title(project):
    asked = run_ragstead("ask", "how long is the riverside path to Belem", "--extractive", "--root", str(project),
                         env=ENV)
    assert "[1] saved-page-cycling-routes.html (Best cycling routes along the Tagus):" in asked.stdout


def test_outside_any_project_ask_and_query_say_how_to_make_one(tmp_path):
    env = {key: value for key, value in ENV.items() if key not in ("RAGSTEAD_ROOT", "RAGSTEAD_CONFIG")}
    for command in (("ask", "what is in my notes?"), ("query", "notes")):
        result = run_ragstead(*command, env=env, cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr == (f"error: no ragstead project here or above ({os.path.realpath(tmp_path)}): run "
                                 "`ragstead init FOLDER` then `ragstead index`, or pass --root\n")
    given = run_ragstead("query", "notes", "--root", str(tmp_path), env=env)
    assert given.stderr.startswith("error: no index at ")  # a root given is a project: its index is missing


def test_a_streamed_answer_wraps_at_words_whatever_its_pieces(capsys):
    wrapper = WordWrapper(20)
    for piece in ("The ferry lea", "ves the harbour at se", "ven.\n\n- bikes\n  - ", "tent and stove", ""):
        wrapper.feed(piece)
    wrapper.close()
    assert capsys.readouterr().out == "The ferry leaves the\nharbour at seven.\n\n- bikes\n  - tent and stove\n"
