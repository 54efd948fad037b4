"""Real processes: SIGKILL mid-index, two concurrent index runs; and the CLI's contract and errors (in-process)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files

ENV = OFFLINE_ENV


def cli(root: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "ragstead", *args, "--root", str(root)],
        capture_output=True, text=True, env=ENV, timeout=300,
    )
    if check and result.returncode != 0:
        raise AssertionError(result.stderr)
    return result


def command(root: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`cli` in this process: for the command's contract and errors, where no process boundary is tested."""
    result = run_ragstead(*args, "--root", str(root), env=ENV)
    if check and result.returncode != 0:
        raise AssertionError(result.stderr)
    return result


def big_corpus(n_files: int) -> dict[str, str]:
    # Distinct text per file so nothing is served from the embedding cache: the run is embedder-bound.
    return {
        f"kb/users/u{i % 5}/doc{i:04d}.md": " ".join(f"file{i} word{j} topic{(i * j) % 97}" for j in range(350))
        for i in range(n_files)
    }


def count(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchone()[0]


@pytest.mark.slow
def test_sigkill_mid_index_then_rerun_loses_nothing(tmp_path):
    # 16 files, 64 chunks: the first commit comes after 32 and the rest is one more batch, so the kill lands between
    # the two with half still to embed (seconds of the model; the poll below is 0.2 s); the re-run embeds only what
    # the killed run had not committed. A bigger corpus only made both runs longer.
    files = big_corpus(16)
    write_files(tmp_path, files)
    db = tmp_path / "kb/rag/ragstead.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragstead", "index", "--root", str(tmp_path), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV,
    )
    deadline = time.time() + 240
    committed = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if db.exists():
            try:
                committed = count(db, "SELECT COUNT(*) FROM documents")
            except sqlite3.OperationalError:
                continue
            if committed > 0:
                break
    assert proc.poll() is None, "indexer finished before it could be killed; make the corpus bigger"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 0 < committed < len(files)

    # The store opens, is consistent, and a re-run completes without duplicates (read and re-run in this process:
    # the process under test is the one killed).
    status = json.loads(command(tmp_path, "status", "--json", check=True).stdout)
    assert status["integrity"] == "ok" and status["chunks"] == status["lexical_rows"]
    partial_docs = status["documents"]
    result = command(tmp_path, "index", "--quiet", "--format", "json", check=True)
    report = json.loads(result.stdout)
    assert report["unchanged"] == partial_docs
    assert len(report["added"]) == len(files) - partial_docs
    assert count(db, "SELECT COUNT(*) FROM documents") == len(files)
    assert count(db, "SELECT COUNT(*) FROM chunks") == count(db, "SELECT COUNT(DISTINCT chunk_id) FROM chunks")
    final = json.loads(command(tmp_path, "status", "--json", check=True).stdout)
    assert final["integrity"] == "ok" and final["lexical_rows"] == count(db, "SELECT COUNT(*) FROM chunks")
    assert count(db, "SELECT COUNT(DISTINCT file_path) FROM chunks") == len(files)


@pytest.mark.slow
def test_two_index_runs_at_once_one_fails_clearly(tmp_path):
    # 16 files, 64 chunks: the first run embeds for seconds after it takes the lock, far past the second's start-up.
    write_files(tmp_path, big_corpus(16))
    first = subprocess.Popen(
        [sys.executable, "-m", "ragstead", "index", "--root", str(tmp_path), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )
    lock = tmp_path / "kb/rag/index.lock"
    db = tmp_path / "kb/rag/ragstead.db"
    deadline = time.time() + 120
    while time.time() < deadline and not (lock.exists() and db.exists()):
        time.sleep(0.05)
    time.sleep(1.0)  # the first run is now embedding, holding the lock
    second = cli(tmp_path, "index", "--quiet")
    first.wait(timeout=300)
    assert first.returncode == 0, first.stderr.read()
    assert second.returncode == 2 and "another `ragstead index` run" in second.stderr, second.stderr
    assert "Traceback" not in second.stderr
    status = json.loads(command(tmp_path, "status", "--json", check=True).stdout)
    assert status["documents"] == 16 and status["integrity"] == "ok"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    write_files(root, {
        "kb/users/alice/2025-03-01-db.md": "# Decision\n\nWe migrate billing to PostgreSQL.",
        "kb/users/bob/notes.md": "Bob likes trains and billing spreadsheets.",
        "docs/faq.md": "Public FAQ about installing.",
    })
    out = command(root, "index", "--roots", "kb,docs", "--format", "json", check=True)
    report = json.loads(out.stdout)
    assert len(report["added"]) == 3 and report["index"]["chunks"] == 3
    return root


def test_cli_query_json_contract(sample):
    out = command(sample, "query", "billing PostgreSQL", "--hybrid", "--user", "alice", "--k", "3", "--json",
                  check=True)
    payload = json.loads(out.stdout)
    assert payload["mode"] == "hybrid" and payload["k"] == 3
    assert payload["filters"]["user_slug"] == "alice" and payload["filters"]["private_only"] is True
    assert [r["file_path"] for r in payload["results"]] == ["kb/users/alice/2025-03-01-db.md"]
    assert "text" not in payload["results"][0] and payload["results"][0]["snippet"]


def test_cli_module_and_table_format(sample):
    out = command(sample, "query", "trains", "--lexical-only", "--doc-type", "user_kb,kb", "--format", "table",
                  check=True)
    assert "kb/users/bob/notes.md" in out.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("query", "x", "--date-from", "2025-99-01"),
        ("query", "x", "--hybrid", "--lexical-only"),
        ("query", "x", "--doc-type", "secret"),
        ("query", "x", "--k", "0"),
        ("query", "x", "--private-only", "--public-only"),
        ("query", "x", "--user", "../../etc"),
        ("query", "   "),
        ("index", "--roots", "../outside"),
        ("ask", "x", "--format", "yaml"),
        ("ask", "x", "--user", "a/b"),
        ("ask", "", "--extractive"),
    ],
)
def test_cli_bad_input_is_one_clear_line(sample, args):
    out = command(sample, *args)
    assert out.returncode == 2
    assert out.stderr.startswith("error:") and "Traceback" not in out.stderr


def test_cli_ask_answers_with_citations_or_refuses_exactly(sample):
    out = command(sample, "ask", "Where do we migrate billing?", "--user", "alice", "--extractive", check=True)
    first, *citations, answerer = out.stdout.strip().splitlines()
    assert "PostgreSQL" in first and first.endswith("[1]")
    assert citations[0].startswith("[1] kb/users/alice/2025-03-01-db.md")
    assert answerer.startswith("answered by extractive (relevance ")
    refused = command(sample, "ask", "best pancake recipe without eggs", "--extractive", check=True)
    sentence, knob = refused.stdout.strip().splitlines()
    assert sentence == "I could not find relevant information in the uploaded documents."
    assert knob.startswith("relevance ") and "lower --min-confidence" in knob
    payload = json.loads(command(sample, "ask", "billing spreadsheets", "--user", "bob", "--format", "json",
                             check=True).stdout)
    assert payload["provider"] == "extractive" and {c["source"] for c in payload["citations"]} == {
        "kb/users/bob/notes.md"}


def test_cli_query_without_index(tmp_path):
    out = command(tmp_path, "query", "x")
    assert out.returncode == 2 and "ragstead index" in out.stderr


@pytest.mark.slow
def test_indexing_small_notes_stays_under_500_mb(tmp_path):
    """Peak memory grows with the embedding batch, not with the number of files (docs/design.md)."""
    import random

    rng = random.Random(1)
    words = "alpha beta gamma delta billing database heron survey migration invoice pelican census".split()
    write_files(tmp_path, {f"kb/notes/n{i}.md": f"# Note {i}\n\n" + " ".join(
        rng.choice(words) for _ in range(rng.randint(50, 300))) for i in range(120)})
    # A wrapper process reports the peak of its only child, so earlier children of pytest do not count.
    wrapper = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
               "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    result = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "ragstead", "index", "-q",
                             "--root", str(tmp_path)], capture_output=True, text=True, env=OFFLINE_ENV, timeout=600)
    code, peak_kb = result.stdout.split()[-2:]
    assert code == "0", result.stderr
    assert int(peak_kb) / 1024 <= 500, f"indexing 120 notes peaked at {int(peak_kb) / 1024:.0f} MB"


@pytest.mark.slow
def test_ctrl_c_during_a_rebuild_keeps_the_old_index_and_a_rebuild_keeps_every_root(tmp_path):
    # The old index: a few notes and the public FAQ (kb and docs). Then 56 more notes: tens of seconds of embedding
    # for the rebuild, so the interrupt, 1 s into it, lands inside it.
    files = big_corpus(60)
    old = {path: files.pop(path) for path in sorted(files)[:4]}
    old["docs/faq.md"] = "Public FAQ: the ledger is append-only."
    write_files(tmp_path, old)
    db = tmp_path / "kb/rag/ragstead.db"
    command(tmp_path, "index", "--roots", "kb,docs", "--quiet", check=True)  # set-up, in this process
    before = count(db, "SELECT COUNT(*) FROM documents")
    assert before == len(old)
    write_files(tmp_path, files)
    # Ctrl-C while the rebuild embeds: the old index stays whole.
    # Ctrl-C's default disposition in the child, whatever the test run inherited (see test_cli_conventions).
    proc = subprocess.Popen([sys.executable, "-m", "ragstead", "index", "--rebuild", "--root", str(tmp_path), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    aside = tmp_path / "kb/rag"
    deadline = time.time() + 120
    while time.time() < deadline and not any(p.name.startswith(".rebuild-") for p in aside.iterdir()):
        time.sleep(0.05)
    time.sleep(1.0)
    assert proc.poll() is None, "the rebuild finished before the interrupt; make the corpus bigger"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)
    assert proc.returncode != 0
    assert count(db, "SELECT COUNT(*) FROM documents") == before
    assert not any(p.name.startswith(".rebuild-") for p in aside.iterdir())  # the scratch index is gone
    # A rebuild without --roots rebuilds every root the index holds (kb from the config default, docs too); the
    # notes added for the interrupted run go first, so it re-embeds only the old index's files.
    for path in files:
        (tmp_path / path).unlink()
    report = json.loads(command(tmp_path, "index", "--rebuild", "--quiet", "--format", "json", check=True).stdout)
    assert report["rebuild"] is True
    assert count(db, "SELECT COUNT(*) FROM documents") == before
    assert count(db, "SELECT COUNT(*) FROM documents WHERE file_path = 'docs/faq.md'") == 1


@pytest.mark.slow
def test_simultaneous_first_runs_either_index_or_say_the_lock_is_held(tmp_path):
    write_files(tmp_path, {f"kb/n{i}.md": f"note {i} about herons and ospreys" for i in range(3)})
    runs = [subprocess.Popen([sys.executable, "-m", "ragstead", "index", "--root", str(tmp_path), "-q"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV) for _ in range(6)]
    results = [(run.wait(timeout=300), run.stderr.read()) for run in runs]
    for code, stderr in results:
        assert "database is locked" not in stderr and "Traceback" not in stderr, stderr
        assert code == 0 or (code == 2 and "holds" in stderr and stderr.startswith("error:")), (code, stderr)
    assert any(code == 0 for code, _ in results)
    assert count(tmp_path / "kb/rag/ragstead.db", "SELECT COUNT(*) FROM documents") == 3
