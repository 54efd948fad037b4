"""The freshness job on real files and a real index: the plan lists exactly what changed (by size, mtime,
then SHA-256), the ledger records every decision and run, `--apply` re-indexes exactly the plan, `--exec`
hands it to a hook that is bounded in time, and the exit codes fit cron."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers.project import OFFLINE_ENV, write_files
from ragstead import KnowledgeBase
from ragstead.config import load_settings
from ragstead.documents import ids, loaders
from ragstead.errors import IndexLockedError, InvalidQueryError, RagsteadError
from ragstead.indexing.lock import index_lock

FILES = {
    "kb/users/alice/alpha.md": "# Alpha\n\nThe alpha notes talk about billing runs and invoices.",
    "kb/users/alice/beta.md": "# Beta\n\nBeta covers the travel policy for conferences.",
    "kb/team/gamma.md": "Gamma: the on-call rota rotates every Monday.",
    "kb/team/delta.txt": "Delta is the backup schedule: nightly, kept for 30 days.",
    "artifacts/dossiers/alice/epsilon.md": "Epsilon dossier: the vendor shortlist.",
}


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


@pytest.fixture
def project(tmp_path, embedder):
    write_files(tmp_path, FILES)
    kb = KnowledgeBase(load_settings(tmp_path), embedder=embedder)
    kb.index()
    embedder.reset()
    yield kb
    kb.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def ledger_lines(kb: KnowledgeBase) -> list[dict]:
    path = kb.settings.db_file.parent / "embedding_ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def the_usual_changes(root: Path) -> dict[str, str]:
    """Add one file, change one, delete one, and touch one without changing it (mtime only)."""
    alpha = root / "kb/users/alice/alpha.md"
    old = {"alpha": sha256(alpha), "beta": sha256(root / "kb/users/alice/beta.md")}
    alpha.write_text("# Alpha\n\nThe alpha notes now also cover the refund process.")
    (root / "kb/users/alice/beta.md").unlink()
    write_files(root, {"kb/team/zeta.md": "Zeta: the new runbook for the search cluster."})
    later = time.time() + 60
    os.utime(root / "kb/team/gamma.md", (later, later))
    return old


def test_the_plan_lists_exactly_the_three_real_changes_and_apply_leaves_nothing_to_plan(project, embedder):
    root = project.root
    old = the_usual_changes(root)
    known = {d["file_path"]: d for d in project.documents(include_archive=True)}

    report = project.freshness()
    assert (report.outcome, report.exit_code, report.stale) == ("planned", 1, True)
    assert report.counts == {"new": 1, "changed": 1, "deleted": 1, "unchanged": 3}
    plan = [json.loads(line) for line in Path(report.plan_path).read_text().splitlines()]
    assert plan == [e.to_dict() for e in report.entries]
    by_path = {e["path"]: e for e in plan}
    assert set(by_path) == {"kb/users/alice/alpha.md", "kb/users/alice/beta.md", "kb/team/zeta.md"}
    alpha, beta, zeta = (by_path[p] for p in ("kb/users/alice/alpha.md", "kb/users/alice/beta.md",
                                              "kb/team/zeta.md"))
    assert alpha == {"path": "kb/users/alice/alpha.md", "status": "changed", "old_checksum": old["alpha"],
                     "new_checksum": sha256(root / "kb/users/alice/alpha.md"),
                     "chunks": known["kb/users/alice/alpha.md"]["chunks"],
                     "doc_id": known["kb/users/alice/alpha.md"]["doc_id"]}
    assert (beta["status"], beta["old_checksum"], beta["new_checksum"]) == ("deleted", old["beta"], None)
    assert beta["doc_id"] == known["kb/users/alice/beta.md"]["doc_id"] and beta["chunks"] >= 1
    assert (zeta["status"], zeta["old_checksum"], zeta["chunks"]) == ("new", None, 0)
    assert zeta["new_checksum"] == sha256(root / "kb/team/zeta.md") and len(zeta["doc_id"]) == 64
    assert embedder.texts_embedded == []  # planning embeds nothing, and the index is as it was
    assert project.document(path="kb/users/alice/beta.md") is not None

    lines = ledger_lines(project)
    decisions = [line for line in lines if line["type"] == "decision" and line["run_id"] == report.run_id]
    assert sorted(d["path"] for d in decisions) == sorted(by_path) and {d["outcome"] for d in decisions} == {"planned"}
    run = lines[-1]
    assert (run["type"], run["run_id"], run["outcome"], run["exit_code"]) == ("run", report.run_id, "planned", 1)
    assert run["counts"] == report.counts and run["plan"] == report.plan_path and run["finished_at"]

    applied = project.freshness(apply=True)
    assert (applied.outcome, applied.exit_code) == ("applied", 0)
    assert applied.applied["added"] == ["kb/team/zeta.md"] and applied.applied["updated"] == ["kb/users/alice/alpha.md"]
    assert applied.applied["removed"] == ["kb/users/alice/beta.md"]
    assert project.document(path="kb/team/zeta.md")["doc_id"] == zeta["doc_id"]  # the id the plan announced
    assert project.document(path="kb/users/alice/beta.md") is None

    after = project.freshness()
    assert (after.outcome, after.exit_code, after.entries) == ("fresh", 0, [])
    assert after.counts["unchanged"] == 5 and Path(after.plan_path).read_text() == ""
    assert [line["outcome"] for line in ledger_lines(project) if line["type"] == "run"] == ["planned", "applied",
                                                                                             "fresh"]


def test_apply_reads_the_planned_files_and_no_other(project, monkeypatch):
    root = project.root.resolve()
    (root / "kb/team/gamma.md").write_text("Gamma: the rota now rotates every Tuesday.")
    later = time.time() + 60
    os.utime(root / "kb/team/delta.txt", (later, later))  # same bytes, new mtime: hashed, never re-indexed
    opened: Counter[str] = Counter()
    real = ids.open_regular

    def counting(path: Path) -> int:  # every file ragstead opens for its bytes goes through open_regular
        opened[Path(path).resolve().relative_to(root).as_posix()] += 1
        return real(path)

    monkeypatch.setattr(ids, "open_regular", counting)
    monkeypatch.setattr(loaders, "open_regular", counting)
    report = project.freshness(apply=True)
    assert [e.path for e in report.entries] == ["kb/team/gamma.md"] and report.outcome == "applied"
    # The plan hashes the two files whose size or mtime changed; the apply reads the planned one alone.
    assert set(opened) == {"kb/team/gamma.md", "kb/team/delta.txt"} and opened["kb/team/delta.txt"] == 1
    assert "Tuesday" in " ".join(h.snippet for h in project.search("rota Tuesday", k=3).hits)
    opened.clear()
    assert project.freshness().outcome == "fresh" and not opened  # the touch was recorded: nothing to hash


def test_the_plan_is_what_index_would_do(project):
    root = project.root
    the_usual_changes(root)
    planned = {e.path: e.status for e in project.freshness().entries}
    report = project.index()
    done = ({p: "new" for p in report.added} | {p: "changed" for p in report.updated}
            | {p: "deleted" for p in report.removed})
    assert planned == done


def test_a_rename_is_planned_as_deleted_and_new_with_one_checksum_and_applied_without_embedding(project, embedder):
    root = project.root
    (root / "kb/team/gamma.md").rename(root / "kb/team/gamma-rota.md")
    report = project.freshness()
    entries = {e.path: e for e in report.entries}
    assert {p: e.status for p, e in entries.items()} == {"kb/team/gamma.md": "deleted", "kb/team/gamma-rota.md": "new"}
    assert entries["kb/team/gamma.md"].old_checksum == entries["kb/team/gamma-rota.md"].new_checksum
    project.freshness(apply=True)
    assert embedder.texts_embedded == []  # the stored vectors moved with the text
    assert project.document(path="kb/team/gamma-rota.md") is not None


def test_an_unreadable_file_is_a_changed_entry_with_its_reason_and_never_a_crash(tmp_path, embedder):
    write_files(tmp_path, FILES)
    (tmp_path / "ragstead.toml").write_text("[ragstead]\nmax_file_mb = 1\n")
    kb = KnowledgeBase(load_settings(tmp_path), embedder=embedder)
    kb.index()
    (tmp_path / "kb/team/gamma.md").write_text("gamma " * 300_000)  # 1.8 MiB: over the file size limit
    (tmp_path / "kb/team/delta.txt").unlink()
    os.mkfifo(tmp_path / "kb/team/delta.txt")  # a FIFO in its place: never opened
    report = kb.freshness()
    entries = {e.path: e for e in report.entries}
    assert {p: e.status for p, e in entries.items()} == {"kb/team/gamma.md": "changed", "kb/team/delta.txt": "changed"}
    assert "max_file_mb" in entries["kb/team/gamma.md"].reason and entries["kb/team/gamma.md"].new_checksum is None
    assert entries["kb/team/delta.txt"].reason == "not a regular file"
    assert json.loads(Path(report.plan_path).read_text().splitlines()[0])["reason"]
    kb.freshness(apply=True)  # their stale chunks go
    assert kb.document(path="kb/team/gamma.md") is None and kb.document(path="kb/team/delta.txt") is None
    again = kb.freshness()
    assert (again.outcome, again.exit_code) == ("fresh", 0)  # unreadable and not indexed: nothing to re-embed
    assert {s["path"] for s in again.skipped} == {"kb/team/gamma.md", "kb/team/delta.txt"}
    kb.close()


def test_a_missing_manifest_is_a_clear_error_and_full_plans_every_file_as_new(tmp_path, embedder):
    write_files(tmp_path, FILES)
    kb = KnowledgeBase(load_settings(tmp_path), embedder=embedder)
    with pytest.raises(RagsteadError, match=r"no previous manifest.*--full"):
        kb.freshness()
    assert ledger_lines(kb)[-1]["outcome"] == "error" and "no previous manifest" in ledger_lines(kb)[-1]["error"]
    full = kb.freshness(full=True)
    assert full.counts == {"new": 5, "changed": 0, "deleted": 0, "unchanged": 0} and full.full
    assert not kb.exists()  # a dry run writes no index
    kb.freshness(full=True, apply=True)
    assert kb.stats()["documents"] == 5 and kb.freshness().outcome == "fresh"
    kb.close()


def test_a_damaged_manifest_is_a_clear_error_and_full_still_plans(tmp_path, embedder):
    write_files(tmp_path, FILES)
    kb = KnowledgeBase(load_settings(tmp_path), embedder=embedder)
    kb.index()
    kb.close()
    db = kb.settings.db_file
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 100)
    damaged = KnowledgeBase(load_settings(tmp_path), embedder=embedder)
    with pytest.raises(RagsteadError, match=r"cannot be read.*--rebuild.*--full"):
        damaged.freshness()
    assert {e.status for e in damaged.freshness(full=True).entries} == {"new"}
    damaged.close()


def test_exec_runs_the_hook_with_the_plan_and_records_its_exit_code(project):
    root = project.root
    the_usual_changes(root)
    copy = root / "plan-seen.jsonl"
    hook = f"{sys.executable} -c \"import os, shutil; shutil.copy(os.environ['RAGSTEAD_PLAN'], {str(copy)!r})\""
    report = project.freshness(exec_command=hook)
    assert (report.outcome, report.exit_code, report.hook.exit_code) == ("exec", 0, 0)
    assert copy.read_text() == Path(report.plan_path).read_text() and len(copy.read_text().splitlines()) == 3
    assert ledger_lines(project)[-1]["exec"]["exit_code"] == 0
    assert project.document(path="kb/users/alice/beta.md") is not None  # the hook did the work, not ragstead

    failing = project.freshness(exec_command=f"{sys.executable} -c 'raise SystemExit(3)'")
    assert (failing.outcome, failing.exit_code, failing.hook.exit_code) == ("exec failed", 2, 3)
    assert ledger_lines(project)[-1]["exec"] | {"seconds": 0} == {
        "command": f"{sys.executable} -c 'raise SystemExit(3)'", "exit_code": 3, "timed_out": False, "seconds": 0,
        "error": "exited with code 3"}
    missing = project.freshness(exec_command="no-such-command-here --flag")
    assert missing.exit_code == 2 and "cannot run 'no-such-command-here'" in missing.hook.error


def test_a_hook_that_hangs_is_stopped_with_everything_it_started(project):
    the_usual_changes(project.root)
    pid_file = project.root / "child.pid"
    # The hook starts a grandchild and waits for it: both must go when the timeout hits.
    hook = f"sh -c 'sleep 300 & echo $! > {pid_file}; wait'"
    report = project.freshness(exec_command=hook, exec_timeout=1.0)
    assert (report.outcome, report.exit_code, report.hook.timed_out) == ("exec failed", 2, True)
    assert "--exec-timeout" in report.hook.error and ledger_lines(project)[-1]["exec"]["timed_out"] is True
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and "zombie" not in _state(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists() or "zombie" in _state(child)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].splitlines()[0].lower()
    except (OSError, IndexError):
        return "gone"


def test_a_fresh_index_runs_no_hook(project):
    report = project.freshness(exec_command=f"{sys.executable} -c 'raise SystemExit(9)'")
    assert (report.outcome, report.exit_code, report.hook) == ("fresh", 0, None)


def test_bad_options_are_clear_errors_that_change_nothing(project):
    with pytest.raises(InvalidQueryError, match="exclude each other"):
        project.freshness(apply=True, exec_command="true")
    with pytest.raises(InvalidQueryError, match="cannot be split"):
        project.freshness(exec_command="echo 'unbalanced")
    with pytest.raises(InvalidQueryError, match="--exec-timeout"):
        project.freshness(exec_command="true", exec_timeout=0)
    with pytest.raises(InvalidQueryError, match="no such folder"):
        project.freshness(["kb/nowhere"])
    assert not (project.settings.db_file.parent / "refresh_plan.jsonl").exists()


def test_a_run_during_an_index_run_fails_clearly_or_waits(project):
    the_usual_changes(project.root)
    with index_lock(project.settings.lock_file), pytest.raises(IndexLockedError, match="--wait"):
        project.freshness()
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with index_lock(project.settings.lock_file):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(30)
    threading.Timer(0.5, release.set).start()
    report = project.freshness(wait=60)  # waits for the holder, then plans
    holder.join(30)
    assert report.counts["new"] == 1


def test_the_plan_and_the_ledger_are_private_files(project):
    the_usual_changes(project.root)
    report = project.freshness()
    for path in (report.plan_path, report.ledger_path):
        assert os.stat(path).st_mode & 0o777 == 0o600


def test_custom_plan_and_ledger_paths_and_roots(project, tmp_path):
    the_usual_changes(project.root)
    report = project.freshness(["kb/team"], plan=tmp_path / "out" / "plan.jsonl", ledger=tmp_path / "ledger.jsonl")
    assert report.roots == ["kb/team"] and [e.path for e in report.entries] == ["kb/team/zeta.md"]
    assert (tmp_path / "out" / "plan.jsonl").read_text().count("\n") == 1
    assert json.loads((tmp_path / "ledger.jsonl").read_text().splitlines()[-1])["roots"] == ["kb/team"]


class Site:
    """Pages on a real HTTP server on 127.0.0.1 that answers conditional GETs as a web server does: an ETag
    (If-None-Match) and a Last-Modified date (If-Modified-Since) per page."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[bytes, datetime]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []

    def put(self, path: str, text: str, modified: datetime) -> None:
        self.pages[path] = (text.encode("utf-8"), modified.replace(microsecond=0))

    def answer(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        self.requests.append((path, headers))
        if path not in self.pages:
            return 404, {}, b""
        body, modified = self.pages[path]
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        validators = {"ETag": etag, "Last-Modified": format_datetime(modified, usegmt=True)}
        if headers.get("if-none-match") == etag:
            return 304, validators, b""
        since = headers.get("if-modified-since")
        if "if-none-match" not in headers and since and parsedate_to_datetime(since) >= modified:
            return 304, validators, b""
        return 200, validators | {"Content-Type": "text/plain"}, body


@pytest.fixture
def site():
    pages = Site()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            status, headers, body = pages.answer(self.path, {k.lower(): v for k, v in self.headers.items()})
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", pages
    server.shutdown()
    server.server_close()


def test_urls_are_checked_with_conditional_gets_and_applied_by_ingesting_again(tmp_path, embedder, site):
    import ragstead

    base, pages = site
    long_ago = datetime(2024, 1, 1, tzinfo=UTC)
    pages.put("/tides.txt", "Tide tables: the harbour floods at the spring tide, twice a month.", long_ago)
    pages.put("/gone.txt", "A page that will disappear from its site, kept in the archive.", long_ago)
    (tmp_path / "kb").mkdir()
    with ragstead.open(tmp_path, embedder=embedder, owner="ana", auto_tags=False) as kb:
        ingested = kb.ingest([f"{base}/tides.txt", f"{base}/gone.txt"], tags=["sea"])
        assert [r.status for r in ingested.results] == ["added", "added"]
        doc = kb.document(path=ingested.results[0].file_path)

        first = kb.freshness(urls=True)  # nothing changed since the ingest: If-Modified-Since, 304
        assert (first.outcome, first.counts["unchanged"]) == ("fresh", 4)  # two archive files, two pages
        assert "if-modified-since" in pages.requests[-1][1]

        pages.put("/tides.txt", "Tide tables: the harbour now floods at every spring tide and at storm surges.",
                  datetime.now(UTC) + timedelta(seconds=5))
        del pages.pages["/gone.txt"]
        stale = kb.freshness(urls=True)
        assert (stale.outcome, stale.exit_code) == ("planned", 1)
        [entry] = stale.entries
        assert entry.to_dict() == {"url": f"{base}/tides.txt", "status": "changed",
                                   "old_checksum": doc["source"]["content_hash"],
                                   "new_checksum": hashlib.sha256(pages.pages["/tides.txt"][0]).hexdigest(),
                                   "chunks": doc["chunks"], "doc_id": doc["doc_id"]}
        assert stale.skipped == [{"url": f"{base}/gone.txt", "reason": "HTTP 404"}]  # its archived copy stays
        plan_line = json.loads(Path(stale.plan_path).read_text())
        assert plan_line["url"] == f"{base}/tides.txt" and "path" not in plan_line

        applied = kb.freshness(urls=True, apply=True)
        assert applied.outcome == "applied" and [u["status"] for u in applied.applied["urls"]] == ["updated"]
        assert "storm surges" in kb.search("harbour storm surges", user="ana", k=1).hits[0].snippet
        refreshed = kb.document(path=applied.applied["urls"][0]["file_path"])
        assert "sea" in refreshed["tags"]  # the tags it had
        assert applied.applied["chunks_embedded"] == refreshed["chunks"] > 0  # the page's chunks, re-embedded

        pages.requests.clear()
        again = kb.freshness(urls=True)  # the ETag of the indexed content: If-None-Match, 304
        assert again.outcome == "fresh"
        tides = [h for p, h in pages.requests if p == "/tides.txt"]
        assert tides and tides[-1].get("if-none-match", "").startswith('"')
        assert len([d for d in kb.documents(user="ana") if ingested_url(d)]) == 2
        assert os.stat(kb.settings.db_file.parent / "url_validators.json").st_mode & 0o777 == 0o600


def ingested_url(document: dict) -> str | None:
    return (document.get("source") or {}).get("url")


def test_the_cli_exit_codes_fit_cron(tmp_path, cli, make_project):
    proj = make_project(FILES)
    cli(proj, "index", "-q")
    assert json.loads(cli(proj, "freshness", "--json").stdout)["outcome"] == "fresh"
    the_usual_changes(proj.root)
    stale = cli(proj, "freshness", expect=1)
    assert stale.stdout.startswith("stale: 1 new, 1 changed, 1 deleted, 3 unchanged")
    assert "  ~ kb/users/alice/alpha.md" in stale.stdout and "--apply" in stale.stderr
    applied = json.loads(cli(proj, "freshness", "--apply", "--json").stdout)
    assert (applied["outcome"], applied["exit_code"], applied["applied"]["added"]) == ("applied", 0,
                                                                                       ["kb/team/zeta.md"])
    assert cli(proj, "freshness").stdout.startswith("fresh: 0 new")
    error = cli(proj, "freshness", "--roots", "kb/nowhere", expect=2)
    assert error.stderr.startswith("error: no such folder: kb/nowhere")


def test_a_newline_in_a_file_name_adds_no_line_to_the_output(cli, make_project):
    proj = make_project(FILES)
    cli(proj, "index", "-q")
    (proj.root / "kb/team/evil.md\n  - important.md").write_text("A note with a newline in its name.")
    stale = cli(proj, "freshness", expect=1)
    lines = stale.stdout.splitlines()
    assert "  - important.md" not in lines, stale.stdout  # no fake "deleted" line
    assert "  + kb/team/evil.md\\n  - important.md" in lines, stale.stdout
    assert len(lines) == 2  # the summary and the one new file


def test_cron_runs_it_with_a_plain_environment(tmp_path, make_project):
    """The documented cron line's shape: an absolute path, a working folder, nothing else from a shell."""
    proj = make_project(FILES)
    ragstead = Path(sys.executable).parent / "ragstead"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run([str(ragstead), "freshness", "--full", "--root", str(proj.root)], capture_output=True,
                            text=True, env=env | {k: v for k, v in OFFLINE_ENV.items() if k.startswith("LC_")},
                            timeout=300)
    assert result.returncode == 1, result.stderr  # stale (no index yet, every file planned), plan written
    assert (proj.root / "kb/rag/refresh_plan.jsonl").read_text().count('"status": "new"') == 5


def test_an_mbox_is_planned_as_one_file_and_its_messages_go_with_it(tmp_path, embedder):
    import ragstead
    from helpers.format_files import make_mbox, make_message

    messages = [make_message(f"S{n}", f"a body about topic{n}", "Mon, 01 Apr 2024 09:00:00 +0000") for n in range(3)]
    box = tmp_path / "kb" / "a.mbox"
    box.parent.mkdir()
    box.write_bytes(make_mbox(messages))
    with ragstead.open(tmp_path, embedder=embedder, auto_tags=False) as kb:
        assert kb.index().added == ["kb/a.mbox#msg-n1", "kb/a.mbox#msg-n2", "kb/a.mbox#msg-n3"]
        box.write_bytes(make_mbox(messages[:2]))
        [entry] = kb.freshness().entries
        assert (entry.path, entry.status, entry.chunks) == ("kb/a.mbox", "changed", 3)
        applied = kb.freshness(apply=True).applied
        assert applied["removed"] == ["kb/a.mbox#msg-n3"] and applied["chunks_embedded"] == 0
        box.unlink()
        assert [(e.path, e.status) for e in kb.freshness().entries] == [("kb/a.mbox#msg-n1", "deleted"),
                                                                       ("kb/a.mbox#msg-n2", "deleted")]
        assert kb.freshness(apply=True).applied["removed"] == ["kb/a.mbox#msg-n1", "kb/a.mbox#msg-n2"]
        assert kb.documents() == []
