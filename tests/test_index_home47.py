"""An index outside the folder (#47.6): `init --index-home` keeps it in $XDG_DATA_HOME/ragstead/<project>/, records
that in ragstead.toml so every command finds it, and gives it the privacy the in-folder index has (0600 files, 0700
folders, what `status` and `doctor` check). A folder synced to a cloud drive then holds no index."""

from __future__ import annotations

import json
import os
import stat
import tomllib
from pathlib import Path

import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files

FILES = {"atlas.md": "# Project Atlas\n\nWe chose PostgreSQL for Project Atlas after the load test.",
         "huts.txt": "The huts on the Alta Via accept cards, but carry cash for the small ones."}


def mode(path) -> int:  # type: ignore[no-untyped-def]
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def env(tmp_path):
    return {**OFFLINE_ENV, "XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}


@pytest.fixture
def synced(tmp_path, env):
    folder = tmp_path / "Dropbox" / "notes"
    write_files(folder, FILES)
    made = run_ragstead("init", str(folder), "--index-home", "--owner", "sam", "--json", env=env)
    assert made.returncode == 0, made.stderr
    return folder, json.loads(made.stdout)


def test_the_index_lives_in_the_data_folder_and_every_command_finds_it(tmp_path, env, synced):
    folder, made = synced
    homes = list((tmp_path / "data" / "ragstead").iterdir())
    assert len(homes) == 1 and homes[0].name.startswith("notes-")
    home = homes[0]
    config = tomllib.loads((folder / "ragstead.toml").read_text())["ragstead"]
    assert config["db_path"] == str(home / "ragstead.db") and config["lock_path"] == str(home / "index.lock")
    assert made["settings"]["db_path"] == config["db_path"]

    indexed = run_ragstead("index", "-q", "--root", str(folder), env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert (home / "ragstead.db").is_file() and not (folder / "kb").exists()
    assert {p.name for p in folder.iterdir()} <= {"atlas.md", "huts.txt", "ragstead.toml", ".gitignore",
                                                   ".ragsteadignore"}
    assert mode(home) == 0o700 and mode(home.parent) == 0o700 and mode(home / "ragstead.db") == 0o600
    # From inside the folder, without --root: the config leads every command to the index.
    found = run_ragstead("query", "Project Atlas database", "--json", "--lexical-only", env=env, cwd=folder)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["file_path"] == "atlas.md"
    listed = run_ragstead("ls", "--json", env=env, cwd=folder)
    assert sorted(d["file_path"] for d in json.loads(listed.stdout)["documents"]) == ["atlas.md", "huts.txt"]
    again = run_ragstead("index", "--json", env=env, cwd=folder)
    assert json.loads(again.stdout)["unchanged"] == 2


def test_status_and_doctor_check_the_index_home_as_they_check_an_index_in_the_folder(env, synced):
    folder, made = synced
    assert run_ragstead("index", "-q", "--root", str(folder), env=env).returncode == 0
    db = os.path.join(os.path.dirname(made["settings"]["db_path"]), "ragstead.db")
    status = json.loads(run_ragstead("status", "--json", "--root", str(folder), env=env).stdout)
    assert status["permissions"] == []
    os.chmod(db, 0o644)
    status = json.loads(run_ragstead("status", "--json", "--root", str(folder), env=env).stdout)
    assert db in [p["path"] for p in status["permissions"]]  # (SQLite gives its -wal and -shm the file's mode)
    fixed = run_ragstead("doctor", "--fix", "--root", str(folder), env=env)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert mode(Path(db)) == 0o600
    assert json.loads(run_ragstead("status", "--json", "--root", str(folder), env=env).stdout)["permissions"] == []


def test_without_xdg_data_home_it_is_under_the_home_folder_and_an_index_in_the_folder_is_not_left_behind(tmp_path,
                                                                                                         env):
    env = {k: v for k, v in env.items() if k != "XDG_DATA_HOME"}
    folder = tmp_path / "notes"
    write_files(folder, FILES)
    assert run_ragstead("init", str(folder), env=env).returncode == 0
    assert run_ragstead("index", "-q", "--root", str(folder), env=env).returncode == 0
    refused = run_ragstead("init", str(folder), "--index-home", env=env)
    assert refused.returncode != 0 and "an index exists at" in refused.stderr
    other = tmp_path / "other"
    write_files(other, FILES)
    assert run_ragstead("init", str(other), "--index-home", env=env).returncode == 0
    assert [p.name[:6] for p in (tmp_path / "home/.local/share/ragstead").iterdir()] == ["other-"]


def test_eval_writes_its_report_beside_the_index_home_and_nothing_in_the_folder(tmp_path, env, synced):
    folder, made = synced
    assert run_ragstead("index", "-q", "--root", str(folder), env=env).returncode == 0
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "which database for Project Atlas", "relevant_paths": ["atlas.md"]}))
    out = run_ragstead("eval", "--cases", str(cases), "--k", "1", "--modes", "lexical", "--root", str(folder),
                       env=env)
    assert out.returncode == 0, out.stderr
    home = Path(made["settings"]["db_path"]).parent
    reports = list((home / "eval" / "reports").glob("eval-*.json"))
    assert len(reports) == 1 and json.loads(reports[0].read_text())["modes"]["lexical"]["recall@1"] == 1.0
    assert f"report: {reports[0]}" in out.stdout
    assert not (folder / "kb").exists()
    # An index in the folder keeps its reports there, as before.
    plain = tmp_path / "plain"
    write_files(plain, FILES)
    assert run_ragstead("init", str(plain), env=env).returncode == 0
    assert run_ragstead("index", "-q", "--root", str(plain), env=env).returncode == 0
    out = run_ragstead("eval", "--cases", str(cases), "--k", "1", "--modes", "lexical", "--root", str(plain),
                       env=env)
    assert out.returncode == 0, out.stderr
    assert len(list((plain / "kb/rag/eval/reports").glob("eval-*.json"))) == 1
