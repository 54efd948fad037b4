"""`watch` on real folders with real file events (watchfiles): the index follows writes, renames, editor saves,
moves between folders, mass deletes and a root that goes away and comes back, within a bounded wait (polled,
never timed); a folder without permission is reported and the rest is still followed; Ctrl-C stops it."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers.project import OFFLINE_ENV, write_files
from ragstead import KnowledgeBase
from ragstead.config import load_settings

FILES = {
    "kb/notes/tides.md": "# Tides\n\nThe harbour floods at the spring tide, twice a month.",
    "kb/notes/sub/lighthouse.md": "The lighthouse keeper logs the lamp hours every night.",
    "kb/team/rota.md": "The on-call rota rotates every Monday at nine.",
    "artifacts/dossiers/ana/vendors.md": "Vendor shortlist: three suppliers of marine rope.",
}
PATIENCE = 60.0  # seconds a change may take to show: generous, since the machine may be busy


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"not within {PATIENCE:g}s: {what}"
        time.sleep(0.05)


class Watching:
    """A KnowledgeBase with `watch` running in a thread, and what it reported."""

    def __init__(self, root: Path, embedder) -> None:  # type: ignore[no-untyped-def]
        self.root = root
        self.kb = KnowledgeBase(load_settings(root), embedder=embedder)
        self.batches: list = []
        self.errors: list[BaseException] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        wait_for(lambda: any(b.catch_up for b in self.batches) or self.errors, "the first catch-up")
        assert not self.errors, self.errors

    def _run(self) -> None:
        try:
            self.kb.watch(debounce=0.2, on_batch=self.batches.append, stop=self.stop)
        except BaseException as exc:  # surfaced by the test, not lost in the thread
            self.errors.append(exc)

    def paths(self) -> set[str]:
        with self.kb.runtime.lock:
            return set(self.kb.store.manifest())

    def hash_of(self, path: str) -> str | None:
        doc = self.kb.document(path=path)
        return doc["file_hash"] if doc else None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive(), "watch did not stop"
        assert not self.errors, self.errors
        self.kb.close()


@pytest.fixture
def watching(tmp_path, embedder):
    write_files(tmp_path, FILES)
    watcher = Watching(tmp_path, embedder)
    yield watcher
    watcher.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_it_catches_up_first_then_follows_a_write_a_rename_and_a_delete(watching, embedder):
    assert watching.paths() == set(FILES)  # the catch-up indexed what was there
    root = watching.root
    write_files(root, {"kb/notes/storm.md": "Storm surge warnings go out six hours ahead."})
    wait_for(lambda: "kb/notes/storm.md" in watching.paths(), "a new file is indexed")
    embedded = list(embedder.texts_embedded)
    (root / "kb/notes/storm.md").rename(root / "kb/notes/storm-surge.md")
    wait_for(lambda: {"kb/notes/storm-surge.md"} <= watching.paths() and "kb/notes/storm.md" not in watching.paths(),
             "a rename moves the document")
    assert embedder.texts_embedded == embedded  # a rename re-embeds nothing
    (root / "kb/notes/storm-surge.md").unlink()
    wait_for(lambda: "kb/notes/storm-surge.md" not in watching.paths(), "a deleted file leaves the index")
    lines = [b for b in watching.batches if not b.catch_up and b.report is not None and b.changed]
    assert lines and all(b.events >= 1 for b in lines)


def test_editor_saves_swap_files_and_atomic_renames_index_the_new_text_and_nothing_else(watching):
    root = watching.root
    tides = root / "kb/notes/tides.md"
    # vim: a swap file, a probe file, the original renamed to a backup, the new text written, the backup gone.
    (root / "kb/notes/.tides.md.swp").write_bytes(b"b0VIM 9.0 swap")
    (root / "kb/notes/4913").write_text("")
    (root / "kb/notes/4913").unlink()
    tides.rename(root / "kb/notes/tides.md~")
    tides.write_text("# Tides\n\nThe harbour now floods at every spring tide and at storm surges.")
    (root / "kb/notes/tides.md~").unlink()
    (root / "kb/notes/.tides.md.swp").unlink()
    wait_for(lambda: watching.hash_of("kb/notes/tides.md") == sha256(tides), "vim's save is indexed")
    # An atomic save (VS Code, JetBrains, most libraries): a temporary file renamed over the original.
    rota = root / "kb/team/rota.md"
    temp = root / "kb/team/.rota.md.tmp-3141"
    temp.write_text("The on-call rota rotates every Tuesday at ten.")
    os.replace(temp, rota)
    wait_for(lambda: watching.hash_of("kb/team/rota.md") == sha256(rota), "an atomic save is indexed")
    assert watching.paths() == set(FILES)  # no swap, probe, backup or temporary file ever got in


def test_moving_a_folder_between_folders_moves_its_documents(watching):
    root = watching.root
    shutil.move(root / "kb/notes/sub", root / "kb/team/sub")
    wait_for(lambda: "kb/team/sub/lighthouse.md" in watching.paths()
             and "kb/notes/sub/lighthouse.md" not in watching.paths(), "a moved folder is followed")
    # ... and between roots: a file moved from kb/ to artifacts/.
    shutil.move(root / "kb/team/rota.md", root / "artifacts/rota.md")
    wait_for(lambda: "artifacts/rota.md" in watching.paths() and "kb/team/rota.md" not in watching.paths(),
             "a move between roots is followed")


def test_a_mass_delete_empties_the_index_of_that_folder(watching):
    root = watching.root
    write_files(root, {f"kb/bulk/note-{i:03}.md": f"Bulk note {i} about tide gauge {i * 7}." for i in range(60)})
    wait_for(lambda: len([p for p in watching.paths() if p.startswith("kb/bulk/")]) == 60, "sixty new files")
    shutil.rmtree(root / "kb/bulk")
    wait_for(lambda: not [p for p in watching.paths() if p.startswith("kb/bulk/")], "a mass delete")
    assert watching.paths() == set(FILES)


def test_a_root_that_goes_away_keeps_its_documents_and_is_caught_up_when_it_comes_back(watching):
    root = watching.root
    away = root / "artifacts-elsewhere"
    (root / "artifacts").rename(away)
    wait_for(lambda: any(b.note and "artifacts is gone" in b.note for b in watching.batches), "the root is missed")
    assert "artifacts/dossiers/ana/vendors.md" in watching.paths()  # an unmounted disk is not a mass delete
    (away / "dossiers/ana/vendors.md").write_text("Vendor shortlist: two suppliers left after the audit.")
    write_files(away, {"dossiers/ana/audit.md": "Audit notes: the rope supplier failed the load test."})
    away.rename(root / "artifacts")
    wait_for(lambda: "artifacts/dossiers/ana/audit.md" in watching.paths(), "the root is caught up")
    assert watching.hash_of("artifacts/dossiers/ana/vendors.md") == sha256(root / "artifacts/dossiers/ana/vendors.md")
    # And it is followed again afterwards.
    write_files(root, {"artifacts/dossiers/ana/after.md": "After the return: the new rope arrived."})
    wait_for(lambda: "artifacts/dossiers/ana/after.md" in watching.paths(), "the root is watched again")


def test_when_the_folder_holding_the_index_goes_watch_stops_and_creates_nothing(tmp_path, embedder):
    """kb/rag is the index: when kb goes (moved away), a new empty index must not appear in its place."""
    write_files(tmp_path, FILES)
    watcher = Watching(tmp_path, embedder)
    try:
        (tmp_path / "kb").rename(tmp_path / "kb-elsewhere")
        write_files(tmp_path, {"artifacts/dossiers/ana/later.md": "Written after the index went away."})
        watcher.thread.join(PATIENCE)
        assert not watcher.thread.is_alive(), "watch kept running without its index"
        assert not watcher.errors, watcher.errors
        notes = [b.note for b in watcher.batches if b.note]
        assert any("index" in note and "gone" in note and "stopped" in note for note in notes), notes
        assert not any("is back" in note for note in notes), notes
        assert not (tmp_path / "kb").exists()  # no index created in its place
        assert (tmp_path / "kb-elsewhere/rag").is_dir()
    finally:
        watcher.stop.set()
        watcher.thread.join(PATIENCE)
        watcher.kb.close()


def test_when_only_the_index_file_is_deleted_watch_stops_and_builds_no_partial_index(tmp_path, embedder):
    """#45: with kb/rag/ragstead.db deleted and the folder left, the next batch made a new index holding only the
    files of that batch."""
    write_files(tmp_path, FILES)
    watcher = Watching(tmp_path, embedder)
    index_file = watcher.kb.runtime.spec.sqlite_file
    try:
        assert index_file is not None and index_file.exists()
        for path in index_file.parent.glob(f"{index_file.name}*"):  # the file and its -wal/-shm
            path.unlink()
        write_files(tmp_path, {"kb/notes/after.md": "Written after the index file was deleted."})
        watcher.thread.join(PATIENCE)
        assert not watcher.thread.is_alive(), "watch kept running without its index file"
        assert not watcher.errors, watcher.errors
        notes = [b.note for b in watcher.batches if b.note]
        assert any("index file" in note and "gone" in note and "stopped" in note for note in notes), notes
        assert not index_file.exists()  # no new, partial index in its place
    finally:
        watcher.stop.set()
        watcher.thread.join(PATIENCE)
        watcher.kb.close()


def test_a_root_that_does_not_exist_yet_is_followed_once_it_appears(tmp_path, embedder):
    write_files(tmp_path, {"kb/notes/tides.md": FILES["kb/notes/tides.md"]})
    watcher = Watching(tmp_path, embedder)  # artifacts/ is a configured root, missing for now
    try:
        write_files(tmp_path, {"artifacts/first.md": "The first artifact of the season."})
        wait_for(lambda: "artifacts/first.md" in watcher.paths(), "a root that appears")
    finally:
        watcher.close()


def test_the_index_s_own_writes_do_not_wake_it(watching):
    write_files(watching.root, {"kb/notes/storm.md": "Storm surge warnings go out six hours ahead."})
    wait_for(lambda: any(b.report and "kb/notes/storm.md" in b.report.added for b in watching.batches),
             "the batch that indexed a new file")
    settled = len(watching.batches)
    time.sleep(1.5)  # not a speed threshold: proves an absence (no batch without a change)
    assert len(watching.batches) == settled


def test_a_bad_folder_argument_is_a_clear_error(tmp_path, embedder):
    write_files(tmp_path, FILES)
    kb = KnowledgeBase(load_settings(tmp_path), embedder=embedder)
    with pytest.raises(Exception, match="no such folder: kb/nowhere"):
        kb.watch(["kb/nowhere"])
    with pytest.raises(Exception, match="--debounce"):
        kb.watch(debounce=0)
    kb.close()


def _bound_by_permissions() -> dict:
    """Root reads any folder: a subprocess run as root loses the two capabilities that let it (CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH, dropped from its bounding set before exec), so a mode-000 folder is closed to it too."""
    if os.geteuid() != 0:
        return {}
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for capability in (1, 2):
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return {"preexec_fn": drop}


def _lines(stream) -> queue.Queue:  # type: ignore[no-untyped-def]
    found: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in stream:
            found.put(line.rstrip("\n"))
        found.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return found


def _next_line(lines: queue.Queue, wanted: Callable[[str], bool], seen: list[str]) -> str:
    deadline = time.monotonic() + PATIENCE * 2
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        assert line is not None, f"watch ended early: {seen}"
        seen.append(line)
        if wanted(line):
            return line
    raise AssertionError(f"no such line within the wait: {seen}")


def test_the_command_reports_a_folder_without_permission_follows_the_rest_and_stops_on_ctrl_c():
    base = Path(tempfile.mkdtemp(prefix="ragstead-watch-"))
    try:
        write_files(base, FILES)
        locked = base / "kb" / "locked"
        write_files(base, {"kb/locked/hidden.md": "Nobody may read this folder."})
        locked.chmod(0o000)
        process = subprocess.Popen([sys.executable, "-m", "ragstead", "watch", "--debounce", "0.3",
                                    "--root", str(base)],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=OFFLINE_ENV,
                                   **_bound_by_permissions())
        lines, seen = _lines(process.stdout), []
        try:
            caught_up = _next_line(lines, lambda line: "caught up" in line, seen)
            assert "+4" in caught_up and "could not read kb/locked" in caught_up and "Permission denied" in caught_up
            new = base / "kb/notes/storm.md"
            new.write_text("Storm surge warnings go out six hours ahead.")
            batch = _next_line(lines, lambda line: "kb/notes/storm.md" in line, seen)
            assert " +1 ~0 -0: kb/notes/storm.md (" in batch  # one line for the batch
            process.send_signal(signal.SIGINT)
            assert process.wait(PATIENCE) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr = process.stderr.read()
        assert stderr.startswith("watching kb, artifacts in ") and stderr.rstrip().endswith("stopped")
        assert "Traceback" not in stderr
    finally:
        (base / "kb" / "locked").chmod(0o700)
        shutil.rmtree(base, ignore_errors=True)


def test_serve_watch_keeps_the_served_index_following_the_folders(tmp_path):
    write_files(tmp_path, FILES)
    process = subprocess.Popen([sys.executable, "-m", "ragstead", "serve", "--no-auth", "--as-user", "ana",
                                "--port", "0", "--json", "--watch", "--root", str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=OFFLINE_ENV)
    try:
        lines = _lines(process.stdout)
        banner = json.loads(_next_line(lines, lambda line: line.startswith("{"), []))
        write_files(tmp_path, {"kb/users/ana/storm.md": "Storm surge warnings go out six hours ahead of the tide."})

        def served() -> bool:
            request = urllib.request.Request(f"{banner['url']}/v1/documents", headers={"Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                body = json.loads(response.read())
            return any(d["file_path"] == "kb/users/ana/storm.md" for d in body.get("documents", []))

        wait_for(served, "serve --watch indexes a new file and serves it")
        process.send_signal(signal.SIGINT)
        assert process.wait(PATIENCE) in (0, 130)  # as `serve` without --watch: the CLI's Ctrl-C convention
        stderr = process.stderr.read()
        assert "watch: " in stderr and "Traceback" not in stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
