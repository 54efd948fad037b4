"""A one-person folder's daily life (#47.5): `remember` is the owner's without `--user` and lands in the folder's
own `memory/`, not a team path; `ls` calls the owner's files notes and titles an untitled file by its name."""

from __future__ import annotations

import json

import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.cli import _output as cli_output

ENV = {**OFFLINE_ENV, "COLUMNS": "100"}
FILES = {"atlas.md": "# Project Atlas\n\nWe chose PostgreSQL for Project Atlas after the load test.",
         "budget.csv": "item,amount\nrent,900\nfood,300\n",
         "huts.txt": "The huts on the Alta Via accept cards, but carry cash for the small ones."}


@pytest.fixture
def notes(tmp_path):
    folder = tmp_path / "notes"
    write_files(folder, FILES)
    made = run_ragstead("init", str(folder), "--owner", "sam", env=ENV)
    indexed = run_ragstead("index", "-q", "--root", str(folder), env=ENV)
    assert made.returncode == indexed.returncode == 0, made.stderr + indexed.stderr
    return folder


def test_remember_in_a_personal_folder_is_the_owners_and_stays_out_of_a_team_path(notes):
    out = run_ragstead("remember", "I prefer answers as bullet points.", "--json", "--root", str(notes), env=ENV)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["written"] and result["indexed"] and result["file"] == "memory/USER_MEMORY.md"
    assert (notes / "memory/USER_MEMORY.md").is_file() and not (notes / "kb/users").exists()
    listed = json.loads(run_ragstead("ls", "--json", "--root", str(notes), env=ENV).stdout)["documents"]
    memory = next(doc for doc in listed if doc["file_path"] == "memory/USER_MEMORY.md")
    assert (memory["user_slug"], memory["is_private"]) == ("sam", True)
    # Another person's memory in the same folder keeps the team path; a team project still needs --user.
    theirs = run_ragstead("remember", "I prefer tea over coffee.", "--user", "alice", "--json", "--no-index",
                          "--root", str(notes), env=ENV)
    assert json.loads(theirs.stdout)["file"] == "kb/users/alice/memory/USER_MEMORY.md"
    team = notes.parent / "team"
    assert run_ragstead("init", str(team), "--layout", "team", "--owner", "sam", env=ENV).returncode == 0
    refused = run_ragstead("remember", "I prefer tea over coffee.", "--root", str(team), env=ENV)
    assert refused.returncode == 2 and "--user" in refused.stderr and not (team / "memory").exists()


def test_ls_calls_the_owners_files_notes_and_titles_an_untitled_file_by_its_name(notes, monkeypatch):
    piped = run_ragstead("ls", "--root", str(notes), env=ENV)
    rows = [line.split("\t") for line in piped.stdout.splitlines()[1:] if not line.startswith("#")]
    assert {row[1] for row in rows} == {"note"}, piped.stdout  # the type column, not the stored `user_kb`
    stored = json.loads(run_ragstead("ls", "--json", "--root", str(notes), env=ENV).stdout)["documents"]
    assert {doc["doc_type"] for doc in stored} == {"user_kb"}  # the stored type and the JSON contract keep theirs
    monkeypatch.setattr(cli_output, "on_terminal", lambda: True)
    table = run_ragstead("ls", "--root", str(notes), env=ENV).stdout
    lines = {line.split()[0]: line for line in table.splitlines()[1:] if line.strip()}
    assert "budget" in lines["budget.csv"].split()[1:] and "huts" in lines["huts.txt"].split()[1:], table
    assert "user_kb" not in table


def test_a_new_project_made_as_root_is_owned_by_me_and_an_existing_one_keeps_its_owner(tmp_path, monkeypatch):
    import ragstead
    from ragstead.config import load_settings

    monkeypatch.setattr("getpass.getuser", lambda: "root")
    ragstead.init(tmp_path / "new")
    assert load_settings(tmp_path / "new").owner == "me"
    old = tmp_path / "old"
    old.mkdir()
    (old / "ragstead.toml").write_text('[ragstead]\nroots = ["."]\n')  # indexed as root's before this init
    ragstead.init(old)
    assert load_settings(old).owner == "root"
    ragstead.init(tmp_path / "named", owner="sam")
    assert load_settings(tmp_path / "named").owner == "sam"


def test_ask_remember_in_a_personal_folder_needs_no_user(notes):
    # The owner asks and keeps what they said, as `remember` does; a team project still refuses before answering.
    out = run_ragstead("ask", "Lesson learned: always carry cash for the small huts.", "--extractive", "--remember",
                       "--json", "--root", str(notes), env=ENV)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["memory_write"]["file"] == "memory/COMPANY_MEMORY.md"
    assert "always carry cash" in (notes / "memory/COMPANY_MEMORY.md").read_text()
    team = notes.parent / "team"
    assert run_ragstead("init", str(team), "--layout", "team", "--owner", "sam", env=ENV).returncode == 0
    refused = run_ragstead("ask", "what about huts?", "--extractive", "--remember", "--root", str(team), env=ENV)
    assert refused.returncode == 2 and "--user" in refused.stderr and refused.stdout == ""
