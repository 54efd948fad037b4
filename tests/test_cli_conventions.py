"""The CLI follows the conventions people know, checked on the real command (in this process; Ctrl-C in a real
one): --version, -h, one-line usage errors, human output by default with the same --json / --format
everywhere, `ls`, `status`, an `ask` that says how it answered, and `sanity` from any folder."""

from __future__ import annotations

import csv
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from filelock import FileLock

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead import __version__
from ragstead.answer.base import REFUSAL

# A narrow terminal width: nothing may wrap, whatever the width.
ENV = {**OFFLINE_ENV, "COLUMNS": "40"}
QUERY_KEYS = {"question", "k", "mode", "filters", "model", "params", "results", "timings_ms"}
FILES = {
    "kb/users/alice/2025-03-01-db.md": "# Decision\n\nWe migrate billing to PostgreSQL 16 in March.",
    "kb/users/alice/standup.txt": "Standup: the search latency regression came from a missing index.",
    "kb/users/bob/notes.md": "Bob likes trains and billing spreadsheets.",
    "docs/faq.md": "Public FAQ about installing the client.",
}


def ragstead(*args: str, root: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--root", str(root)] if root is not None else []
    return run_ragstead(*args, *extra, env=ENV, cwd=cwd)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("conventions")
    write_files(root, FILES)
    indexed = ragstead("index", "--roots", "kb,docs", "-q", root=root)
    assert indexed.returncode == 0, indexed.stderr
    return root


def test_version():
    result = ragstead("--version")
    assert result.returncode == 0 and result.stdout == f"ragstead {__version__}\n"


@pytest.mark.parametrize("command", [("query",), ("keys", "add"), ("ls",)])
def test_dash_h_is_help_with_examples(command):
    result = ragstead(*command, "-h")
    assert result.returncode == 0, result.stderr
    assert "Usage: ragstead " + " ".join(command) in result.stdout and "Examples:" in result.stdout


def test_help_shows_defaults():
    result = run_ragstead("ask", "--help", env={**OFFLINE_ENV, "COLUMNS": "200"})
    assert "[default: 3000]" in result.stdout  # --max-context-tokens


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("querry", "billing"), "No such command 'querry'"),
        (("query", "billing", "--kk", "3"), "No such option: --kk"),
        (("query", "billing", "--k", "three"), "Invalid value for '--k'"),
        (("query",), "Missing argument"),
        (("keys", "addd"), "No such command 'addd'"),
        (("ls", "--limit", "0"), "Invalid value for '--limit'"),
    ],
)
def test_a_usage_error_is_one_error_line_with_a_hint(args, says):
    result = ragstead(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and says in lines[0]
    command = "ragstead keys" if args[0] == "keys" else "ragstead" if args[0] == "querry" else f"ragstead {args[0]}"
    assert lines[0].endswith(f"(see `{command} --help`)")


def test_query_prints_a_table_by_default_and_the_json_contract_with_json(project):
    table = ragstead("query", "billing PostgreSQL", "--user", "alice", "-k", "2", root=project)
    assert table.returncode == 0, table.stderr
    assert "kb/users/alice/2025-03-01-db.md" in table.stdout and "snippet" in table.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(table.stdout)
    as_json = json.loads(ragstead("query", "billing PostgreSQL", "--user", "alice", "-k", "2", "--json",
                                  root=project).stdout)
    as_format = json.loads(ragstead("query", "billing PostgreSQL", "--user", "alice", "-k", "2", "--format", "json",
                                    root=project).stdout)
    assert set(as_json) == QUERY_KEYS and as_json["k"] == 2 and as_json["filters"]["user_slug"] == "alice"
    assert as_json["results"][0]["file_path"] == "kb/users/alice/2025-03-01-db.md"
    assert {k: v for k, v in as_json.items() if k != "timings_ms"} == {
        k: v for k, v in as_format.items() if k != "timings_ms"}


def test_feedback_flags_reach_the_search_and_a_bad_value_is_one_error_line(project):
    def params(*flags: str) -> dict:
        out = ragstead("query", "billing PostgreSQL", "--user", "alice", "--json", *flags, root=project)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["params"]

    assert params()["feedback_k"] == 2 and params()["feedback_weight"] == 0.5  # the defaults
    assert params("--feedback", "0")["feedback_k"] == 0 and params("--feedback", "0")["feedback_weight"] is None
    chosen = params("--feedback", "3", "--feedback-weight", "0.25")
    assert (chosen["feedback_k"], chosen["feedback_weight"]) == (3, 0.25)
    bad = ragstead("query", "billing", "--feedback", "30", root=project)
    assert bad.returncode != 0 and bad.stdout == ""
    # The library's error names its field (feedback_k); the CLI re-spells it as the flag its user typed.
    assert len(bad.stderr.splitlines()) == 1 and bad.stderr.startswith("error: ") and "--feedback must be" in bad.stderr


def test_query_jsonl_and_csv(project):
    jsonl = ragstead("query", "billing", "--user", "alice", "--format", "jsonl", root=project)
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert rows and [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(r["user_slug"] == "alice" for r in rows)
    table = list(csv.reader(io.StringIO(ragstead("query", "billing", "--user", "alice", "--format", "csv",
                                                 root=project).stdout)))
    assert table[0][:4] == ["rank", "file_path", "score", "snippet"]
    assert [row[1] for row in table[1:]] == [r["file_path"] for r in rows]
    both = ragstead("query", "billing", "--json", "--format", "csv", root=project)
    assert both.returncode == 2 and both.stderr.startswith("error: --json and --format csv")


def test_status_is_human_by_default_and_json_with_json(project):
    human = ragstead("status", root=project)
    assert human.returncode == 0, human.stderr
    labels = {line.split()[0] for line in human.stdout.splitlines() if line.strip()}
    assert {"index", "roots", "documents", "chunks", "model", "last", "integrity", "permissions"} <= labels
    assert any(line.split() == ["documents", "4"] for line in human.stdout.splitlines())
    assert any(line.split() == ["integrity", "ok"] for line in human.stdout.splitlines())
    status = json.loads(ragstead("status", "--json", root=project).stdout)
    assert status["documents"] == 4 and status["integrity"] == "ok" and status["permissions"] == []
    assert status["roots"] == ["kb", "artifacts"] and status["last_indexed_at"].endswith("Z")
    assert f"last index   {status['last_indexed_at']}" in human.stdout


def test_ls_lists_documents_with_filters_as_a_table_and_as_json(project):
    table = ragstead("ls", "--user", "alice", root=project)
    assert table.returncode == 0, table.stderr
    assert "kb/users/alice/2025-03-01-db.md" in table.stdout and "kb/users/alice/standup.txt" in table.stdout
    assert "bob" not in table.stdout and "docs/faq.md" not in table.stdout
    assert "2 documents" in table.stdout
    listed = json.loads(ragstead("ls", "--user", "alice", "--json", root=project).stdout)
    assert [d["file_path"] for d in listed["documents"]] == ["kb/users/alice/2025-03-01-db.md",
                                                             "kb/users/alice/standup.txt"]
    assert all(d["chunks"] == 1 and d["indexed_at"] and d["is_private"] for d in listed["documents"])
    assert (listed["limit"], listed["offset"]) == (100, 0)
    public = json.loads(ragstead("ls", "--public-only", "--format", "json", root=project).stdout)
    assert [d["file_path"] for d in public["documents"]] == ["docs/faq.md"]
    paged = ragstead("ls", "--limit", "1", "--offset", "1", "--format", "jsonl", root=project)
    assert len(paged.stdout.splitlines()) == 1


def test_ask_names_the_answerer_and_a_refusal_shows_the_best_score_and_the_knob(project):
    answered = ragstead("ask", "Where do we migrate billing?", "--user", "alice", "--extractive", root=project)
    assert answered.returncode == 0, answered.stderr
    lines = answered.stdout.strip().splitlines()
    sure = json.loads(ragstead("ask", "Where do we migrate billing?", "--user", "alice", "--extractive", "--json",
                               root=project).stdout)["gate"]
    assert sure["passed"] and sure["confidence"] == "likely" and sure["score"] >= 0.5
    assert lines[-1] == f"answered by extractive (relevance {sure['score']:.2f})"
    assert lines[1].startswith("[1] kb/users/alice/2025-03-01-db.md")
    refused = ragstead("ask", "best pancake recipe without eggs", "--user", "alice", "--extractive", root=project)
    sentence, knob = refused.stdout.strip().splitlines()
    assert sentence == REFUSAL
    payload = json.loads(ragstead("ask", "best pancake recipe without eggs", "--user", "alice", "--extractive",
                                  "--json", root=project).stdout)
    best, gate = payload["retrieval"]["best_similarity"], payload["gate"]
    assert payload["refused"] and gate["decided_by"] == "gate" and gate["score"] < gate["threshold"]
    assert gate["confidence"] == "refused"
    assert knob == (f"relevance {gate['score']:.2f} < gate {gate['threshold']:.2f} (best match {best:.3f}); "
                    "lower --min-confidence to answer from weaker matches")
    legacy = ragstead("ask", "best pancake recipe without eggs", "--user", "alice", "--extractive",
                      "--min-similarity", "0.428", root=project)
    assert legacy.stdout.strip().splitlines()[-1] == (f"best match {best:.3f} < --min-similarity 0.428; lower it "
                                                      "to answer from weaker matches")
    # Forced past the gate, an off-topic answer says it is tentative, in the text and in the JSON.
    for knob_turned in (("--min-similarity", str(round(best - 0.01, 3))), ("--min-confidence", "0")):
        lowered = ragstead("ask", "best pancake recipe without eggs", "--user", "alice", "--extractive",
                           *knob_turned, root=project)
        assert lowered.stdout.strip().splitlines()[-1] == (
            f"answered by extractive, tentatively (relevance {gate['score']:.2f}): the sources may not hold this "
            "answer; check the citations")
        forced = json.loads(ragstead("ask", "best pancake recipe without eggs", "--user", "alice", "--extractive",
                                     *knob_turned, "--json", root=project).stdout)
        assert not forced["refused"] and forced["gate"]["confidence"] == "tentative"


def test_the_refusal_is_the_seeds_sentence_and_a_project_may_set_its_own(project, monkeypatch):
    from ragstead import open as open_kb

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # an LLM answerer is built (never called: nothing is asked)
    monkeypatch.setenv("RAGSTEAD_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    question = ("ask", "best pancake recipe without eggs", "--user", "alice", "--extractive")
    assert REFUSAL == "I could not find relevant information in the uploaded documents."  # seed 003, exactly
    assert ragstead(*question, root=project).stdout.splitlines()[0] == REFUSAL
    config = project / "ragstead.toml"
    config.write_text('[ragstead]\nrefusal = "Nothing in the notes says so."\n', encoding="utf-8")
    try:
        said = ragstead(*question, root=project)
        assert said.returncode == 0, said.stderr
        assert said.stdout.splitlines()[0] == "Nothing in the notes says so."
        payload = json.loads(ragstead(*question, "--json", root=project).stdout)
        assert payload["answer"] == "Nothing in the notes says so." and payload["refused"]
        assert payload["citations"] == []
        with open_kb(project, answerers=("openai", "extractive")) as kb:  # the LLM is taught the same sentence
            system = kb.providers()[0].template.messages("q", [])[0]["content"]
        assert "Nothing in the notes says so." in system and REFUSAL not in system
        config.write_text('[ragstead]\nrefusal = "  "\n', encoding="utf-8")
        bad = ragstead(*question, root=project)
        assert bad.returncode != 0 and "refusal must be one line" in bad.stderr
    finally:
        config.unlink()


def test_keys_add_prints_the_key_alone_and_says_it_is_shown_once(project):
    added = ragstead("keys", "add", "--user", "alice", root=project)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("rsk_") and len(added.stdout.splitlines()) == 1
    assert "cannot be shown again" in added.stderr
    listed = ragstead("keys", "list", root=project)
    assert "alice" in listed.stdout and added.stdout.strip() not in listed.stdout
    assert json.loads(ragstead("keys", "list", "--json", root=project).stdout)[0]["user_slug"] == "alice"


def test_sanity_runs_from_any_folder_on_the_packaged_sample(tmp_path):
    result = ragstead("sanity", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "artifacts" / "sanity_output.json").read_text())
    assert report["passed"] and report["index"]


def test_ctrl_c_is_one_line_and_exit_code_130(tmp_path):
    write_files(tmp_path, FILES)
    assert ragstead("index", "-q", root=tmp_path).returncode == 0
    with FileLock(str(tmp_path / "kb/rag/index.lock")):  # `remember` waits for it, then is interrupted
        # The child gets Ctrl-C's default disposition, as a command run from a terminal has: a test run launched
        # as a background job inherits SIGINT ignored (bash does that), and Python keeps it ignored.
        proc = subprocess.Popen([sys.executable, "-m", "ragstead", "remember", "I prefer tea over coffee.",
                                 "--user", "alice", "--root", str(tmp_path)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=ENV,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        memory = tmp_path / "kb/users/alice/memory/USER_MEMORY.md"
        deadline = time.monotonic() + 120
        while not memory.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        out, errors = proc.communicate(timeout=60)
    assert proc.returncode == 130 and out == ""
    assert errors == "interrupted\n"


# In-process (CliRunner): what a person reads in a terminal or a pipe. CliRunner's stdout is not a terminal.
def cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from ragstead.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "60"})


def test_piped_query_is_tsv_of_the_relevant_hits_and_says_how_many_were_hidden(project):
    from ragstead.answer.ask import CONTEXT_FLOOR

    args = ("query", "pancake recipe with eggs", "--root", str(project))
    full = json.loads(cli(*args, "--json").stdout)["results"]
    relevant = [r for i, r in enumerate(full) if i == 0 or r["vector_score"] is None
                or r["vector_score"] >= CONTEXT_FLOOR or r["lexical_score"] is not None]
    piped = cli(*args)
    assert piped.exit_code == 0, piped.output
    lines = piped.stdout.splitlines()
    assert lines[0].split("\t") == ["rank", "file", "loc", "score", "snippet"]  # TSV, no box drawing
    assert [line.split("\t")[1] for line in lines[1:]] == [r["file_path"] for r in relevant]
    assert all(len(line.split("\t")) == 5 for line in lines) and "│" not in piped.stdout
    hidden = len(full) - len(relevant)
    assert (f"{hidden} less relevant hit" in piped.stderr) == bool(hidden)
    everything = cli(*args, "--all")
    assert len(everything.stdout.splitlines()) == len(full) + 1 and "hidden" not in everything.stderr


def test_query_numbers_the_shown_hits_without_a_gap_where_a_weak_one_is_hidden(project, monkeypatch):
    from ragstead.cli import _output as cli_output
    from ragstead.knowledge_base import KnowledgeBase

    search = KnowledgeBase.search

    def second_hit_weak(self, request):  # the second hit alone is neither close in meaning nor sharing a word
        payload = search(self, request).to_dict()
        for i, row in enumerate(payload["results"]):
            row.update(vector_score=0.0, lexical_score=None) if i == 1 else row.update(vector_score=0.9)
        return SimpleNamespace(to_dict=lambda: payload)

    monkeypatch.setattr(KnowledgeBase, "search", second_hit_weak)
    args = ("query", "billing", "--k", "4", "--root", str(project))
    full = json.loads(cli(*args, "--json").stdout)["results"]
    assert len(full) >= 3 and [r["final_rank"] for r in full] == list(range(1, len(full) + 1))  # JSON as it was
    piped = cli(*args)
    rows = [line.split("\t") for line in piped.stdout.splitlines()[1:]]
    assert [row[1] for row in rows] == [r["file_path"] for i, r in enumerate(full) if i != 1]
    assert [row[0] for row in rows] == [str(n) for n in range(1, len(rows) + 1)] and "hidden" in piped.stderr
    monkeypatch.setattr(cli_output, "on_terminal", lambda: True)
    shown = cli(*args).stdout.splitlines()
    heads = [words[0] for words in map(str.split, shown[1:]) if words[1:2] and words[1].startswith(("kb/", "docs/"))]
    assert heads == [str(n) for n in range(1, len(rows) + 1)]


def test_piped_ls_is_tsv_and_paths_are_whole(project):
    piped = cli("ls", "--root", str(project))
    rows = [line.split("\t") for line in piped.stdout.splitlines() if not line.startswith("#")]
    assert rows[0] == ["file", "type", "user", "privacy", "chunks", "indexed"]
    assert {row[0] for row in rows[1:]} == set(FILES) - {"docs/faq.md"} and all(len(row) == 6 for row in rows)
    assert piped.stdout.splitlines()[-1].startswith("# 3 documents")


def test_index_summarises_skipped_files_by_type_and_lists_them_with_v(tmp_path):
    write_files(tmp_path, {"notes/a.md": "A note about trains.", **{f"notes/p{i}.mp4": b"\xff\xd8" for i in range(28)},
                           "notes/x.mov": b"\x00", "notes/y.mov": b"\x00"})
    first = cli("index", "-q", "--root", str(tmp_path), str(tmp_path / "notes"))
    assert first.exit_code == 0, first.output
    assert first.stderr.splitlines() == ["  skipped 30 files: 28 .mp4, 2 .mov (unsupported; -v lists them)"]
    verbose = cli("index", "-q", "-v", "--root", str(tmp_path))
    assert len([line for line in verbose.stderr.splitlines() if line.startswith("  skipped notes/")]) == 30


def test_init_prints_a_short_summary(tmp_path):
    result = cli("init", str(tmp_path / "notes"))
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) <= 6 and ".gitignore +=" not in result.stdout
    assert ".gitignore:" in result.stdout and "/kb/rag/" in (tmp_path / "notes/.gitignore").read_text()


def test_dash_capital_v_is_the_version():
    result = cli("-V")
    assert result.exit_code == 0 and result.stdout == f"ragstead {__version__}\n"


def test_help_reads_well_value_names_and_whole_sentences():
    top = CliRunnerWide("--help")
    assert "<bool>" not in top and "<str>" not in top
    # Every command's summary is one paragraph: no line of the command list ends mid-sentence and restarts
    # at the left edge with a lowercase word (the docstring's own line breaks).
    summaries = top.split("Commands")[1]
    assert "the run\n" not in summaries and "optionally\n" not in summaries
    query_help = CliRunnerWide("query", "--help")
    assert "<list[str]>" not in query_help and "<bool>" not in query_help
    assert " TAG " in query_help and " INTEGER " in query_help


def CliRunnerWide(*args: str) -> str:
    from typer.testing import CliRunner

    from ragstead.cli import app

    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"}).stdout


def test_mode_completes_the_modes():
    import typer

    from ragstead.cli import app

    command = typer.main.get_command(app).commands["query"]
    mode = next(p for p in command.params if p.name == "mode")
    ctx = command.make_context("query", ["x"], resilient_parsing=True)
    assert [item.value for item in mode.shell_complete(ctx, "")] == ["vector", "lexical", "hybrid"]
    assert [item.value for item in mode.shell_complete(ctx, "h")] == ["hybrid"]


def test_a_reader_that_stops_early_is_not_an_error(project):
    # The process is the subject here (a closed pipe; Python ignores SIGPIPE, so a write fails with EPIPE): a
    # real subprocess. The reader goes before the first line is written, as `head -1` goes after its line.
    for command in (("ls",), ("query", "billing"), ("status",)):
        reader = subprocess.Popen([sys.executable, "-m", "ragstead", *command, "--root", str(project)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        assert reader.stdout is not None and reader.stderr is not None
        reader.stdout.close()
        errors = reader.stderr.read()
        assert reader.wait(timeout=120) == 0, errors
        assert b"Traceback" not in errors and b"BrokenPipe" not in errors and b"Exception ignored" not in errors


def test_a_rebuild_keeps_its_chunker_and_a_nested_root_is_not_a_failure(tmp_path):
    write_files(tmp_path, {"docs/a.md": "Doc one about trains.", "docs/archive/old.md": "Old note about boats."})
    assert cli("init", str(tmp_path), "--roots", "docs").exit_code == 0
    assert cli("index", "-q", "--root", str(tmp_path)).exit_code == 0
    rebuilt = cli("index", "-q", "--rebuild", "--chunker", "sentences", "--root", str(tmp_path),
                  str(tmp_path / "docs/archive"))
    assert rebuilt.exit_code == 0, rebuilt.output  # docs/archive/old.md is indexed once, not "failed"
    assert "failed" not in rebuilt.stdout and "skipped" not in rebuilt.stderr
    assert 'chunker = "sentences"' in (tmp_path / "ragstead.toml").read_text()
    again = cli("index", "-q", "--root", str(tmp_path))  # the next plain run cuts the same way
    assert again.exit_code == 0, again.output
    assert json.loads(cli("status", "--json", "--root", str(tmp_path)).stdout)["roots"] == ["docs"]


def test_dotenv_supplies_keys_the_config_orders_the_chain_and_ask_json_notes_a_failure(project, monkeypatch):
    import ragstead
    from helpers.project import LLM_ENV

    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    # A loopback port nothing listens on: the OpenAI-compatible answerer fails at once, nothing leaves the machine.
    (project / ".env").write_text("RAGSTEAD_OPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_API_KEY=sk-test\n"
                                  "GEMINI_API_KEY=g-test\nRAGSTEAD_GEMINI_BASE_URL=http://127.0.0.1:9/v1beta\n")
    try:
        with ragstead.open(project) as kb:
            assert [p.name.split(":")[0] for p in kb.providers()] == ["openai-compatible", "gemini", "extractive"]
        with ragstead.open(project, answerers=("gemini", "extractive")) as kb:
            assert [p.name.split(":")[0] for p in kb.providers()] == ["gemini", "extractive"]
        monkeypatch.setenv("RAGSTEAD_ANSWERERS", "openai")  # the shell wins over .env and the config file
        asked = cli("ask", "Where do we migrate billing?", "--user", "alice", "--json", "--root", str(project))
        assert asked.exit_code == 0, asked.output
        assert json.loads(asked.stdout)["provider"] == "extractive"  # stdout is the JSON alone
        notes = [line for line in asked.stderr.splitlines() if line.startswith("note: openai-compatible")]
        assert len(notes) == 1 and notes[0].endswith("the next answerer took over")
    finally:
        (project / ".env").unlink()
