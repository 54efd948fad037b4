"""Private on disk: the index folder is 0700 and every file in it 0600, whatever the umask (the index holds the
full text of private documents). `status` reports anything looser; `doctor --fix` tightens it.

The commands run in this process with the umask set around each one, as a user's shell would set it; the check
while the index is open runs in a real child process (preexec_fn sets its umask).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.stores.permissions import find_loose, own_folder, tighten

FILES = {
    "kb/users/alice/2025-03-01-plan.md": "# Plan\nAlice's private plan: move the billing database to PostgreSQL.",
    "kb/users/alice/2025-03-02-trip.md": "# Trip\nAlice flies to Lisbon in May; window seat, economy class.",
    "kb/users/bob/2025-03-03-salary.md": "# Salary\nBob negotiated a raise of eight percent.",
    "kb/team/2025-03-04-runbook.md": "# Runbook\nRestart the billing database with the failover script.",
}


def run(root: Path, *args: str, umask: int = 0o022, expect: int = 0) -> subprocess.CompletedProcess[str]:
    previous = os.umask(umask)
    try:
        result = run_ragstead(*args, "--root", str(root), env=OFFLINE_ENV)
    finally:
        os.umask(previous)
    assert result.returncode == expect, result.stdout + result.stderr
    return result


def modes(folder: Path) -> dict[str, int]:
    """Every file and folder under `folder` (itself included), by relative path: its permission bits."""
    found = {".": stat.S_IMODE(folder.stat().st_mode)}
    for path in folder.rglob("*"):
        found[path.relative_to(folder).as_posix()] = stat.S_IMODE(path.lstat().st_mode)
    return found


def assert_private(folder: Path) -> dict[str, int]:
    found = modes(folder)
    wrong = {p: f"{m:04o}" for p, m in found.items()
             if m != (0o700 if (folder / p).is_dir() else 0o600)}
    assert not wrong, f"not 0600 files / 0700 folders under {folder}: {wrong}"
    return found


# Opens the index like a reader in a long-lived process and lists the index folder while the connection (and
# so SQLite's -wal and -shm files) is open.
_WHILE_OPEN = """
import json, os, stat, sys
from pathlib import Path
import ragstead
folder = Path(sys.argv[1])
with ragstead.open(sys.argv[2], store=sys.argv[3] if len(sys.argv) > 3 else None) as kb:
    kb.stats()
    print(json.dumps({p.relative_to(folder).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*")}))
"""


def modes_while_open(root: Path, folder: Path, umask: int, *store: str) -> dict[str, int]:
    result = subprocess.run([sys.executable, "-c", _WHILE_OPEN, str(folder), str(root), *store], capture_output=True,
                            text=True, env=OFFLINE_ENV, timeout=300, preexec_fn=lambda: os.umask(umask))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
def test_the_index_folder_and_every_file_in_it_are_owner_only(tmp_path, umask):
    root = tmp_path / "project"
    write_files(root, FILES)
    for path in (root / "kb").rglob("*"):  # the sources are private, as the user made them
        path.chmod(0o700 if path.is_dir() else 0o600)
    run(root, "index", umask=umask)
    run(root, "query", "billing database", "--user", "alice", umask=umask)
    remembered = run(root, "remember", "I prefer window seats on long flights", "--user", "alice", umask=umask)
    assert "written and indexed" in remembered.stdout, remembered.stdout
    run(root, "keys", "add", "--user", "alice", umask=umask)
    run(root, "index", umask=umask)  # a second run: a deletion commit (.del files), merges

    rag = root / "kb" / "rag"
    found = assert_private(rag)
    # What SQLite, tantivy, filelock and the key file actually made (all of it checked above).
    for name in ("ragstead.db", "ragstead.tantivy", "ragstead.tantivy/meta.json", "ragstead.tantivy/.managed.json",
                 "ragstead.tantivy/.tantivy-meta.lock", "ragstead.tantivy/.tantivy-writer.lock", "index.lock",
                 "memory.lock", "api_keys.json"):
        assert name in found, sorted(found)
    segment_files = {Path(p).suffix for p in found if p.startswith("ragstead.tantivy/") and len(Path(p).stem) >= 32}
    assert {".idx", ".pos", ".term", ".store", ".fast", ".fieldnorm"} <= segment_files, sorted(found)

    # SQLite's -wal and -shm exist only while a connection is open: they take the database file's mode.
    open_modes = modes_while_open(root, rag, umask)
    assert {"ragstead.db-wal", "ragstead.db-shm"} <= set(open_modes)
    assert {p: m for p, m in open_modes.items() if m not in (0o600, 0o700)} == {}

    memory = sorted((root / "kb/users/alice/memory").glob("*.md"))
    assert memory and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in memory)

    status = json.loads(run(root, "status", "--json", umask=umask).stdout)
    assert status["permissions"] == [] and status["integrity"] == "ok"


def test_status_reports_a_loosened_file_and_doctor_fix_tightens_it(tmp_path):
    root = tmp_path / "project"
    write_files(root, FILES)
    run(root, "index")
    db = root / "kb/rag/ragstead.db"
    segment = next(p for p in (root / "kb/rag/ragstead.tantivy").iterdir() if p.suffix == ".idx")
    db.chmod(0o644)
    segment.chmod(0o664)
    (root / "kb/rag").chmod(0o755)

    listed = {item["path"]: item for item in json.loads(run(root, "status", "--json").stdout)["permissions"]}
    assert {str(db), str(segment), str(root / "kb/rag")} <= set(listed), listed
    assert listed[str(db)] == {"path": str(db), "kind": "file", "mode": "0644", "wanted": "0600"}
    assert listed[str(root / "kb/rag")]["kind"] == "folder" and listed[str(root / "kb/rag")]["wanted"] == "0700"

    # Without --fix: reported (exit 1), nothing changed.
    checked = run(root, "doctor", expect=1)
    assert f"loose file {db}: 0644, should be 0600" in checked.stdout, checked.stdout
    assert stat.S_IMODE(db.stat().st_mode) == 0o644 and stat.S_IMODE(segment.stat().st_mode) == 0o664
    assert stat.S_IMODE((root / "kb/rag").stat().st_mode) == 0o755
    report = json.loads(run(root, "doctor", "--format", "json", expect=1).stdout)
    assert not report["ok"] and report["fixed"] == [] and str(db) in {i["path"] for i in report["remaining"]}

    fixed = run(root, "doctor", "--fix")
    assert f"fixed file {db}: 0644 -> 0600" in fixed.stdout and fixed.stdout.rstrip().endswith(
        "ok: the index files are private (files 0600, folders 0700)"), fixed.stdout
    assert stat.S_IMODE(db.stat().st_mode) == 0o600 and stat.S_IMODE(segment.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "kb/rag").stat().st_mode) == 0o700
    assert json.loads(run(root, "status", "--json").stdout)["permissions"] == []
    assert json.loads(run(root, "doctor", "--format", "json").stdout) == {"ok": True, "loose": [], "fixed": [],
                                                                        "remaining": []}


def test_the_next_write_tightens_what_was_loosened_and_memory_files_are_checked(tmp_path):
    root = tmp_path / "project"
    write_files(root, FILES)
    run(root, "remember", "I prefer window seats on long flights", "--user", "alice", "--no-index")
    memory = root / "kb/users/alice/memory/USER_MEMORY.md"
    assert stat.S_IMODE(memory.stat().st_mode) == 0o600
    memory.chmod(0o644)
    run(root, "index")
    listed = [item["path"] for item in json.loads(run(root, "status", "--json").stdout)["permissions"]]
    assert listed == [str(memory)]  # the memory file (a source, not the index: a write leaves it alone)
    (root / "kb/rag/index.lock").chmod(0o644)
    write_files(root, {"kb/users/alice/2025-03-05-new.md": "A new note about the red bicycle."})
    run(root, "index")  # a write: the index folder is tightened again
    assert stat.S_IMODE((root / "kb/rag/index.lock").stat().st_mode) == 0o600
    run(root, "doctor", "--fix")
    assert stat.S_IMODE(memory.stat().st_mode) == 0o600


@pytest.mark.parametrize("umask", [0o022, 0o000], ids=["umask022", "umask000"])
def test_the_chroma_folder_and_its_files_are_owner_only(tmp_path, umask):
    pytest.importorskip("chromadb")
    root = tmp_path / "project"
    write_files(root, FILES)
    spec = "chroma:kb/rag/chroma?exact_rows=0"  # every vector query goes through Chroma
    run(root, "index", "--store", spec, umask=umask)
    run(root, "query", "billing database", "--user", "alice", "--store", spec, umask=umask)
    chroma = root / "kb/rag/chroma"
    found = assert_private(chroma)
    assert "chroma.sqlite3" in found and "ragstead.db" in found, sorted(found)
    assert any(p.endswith("/data_level0.bin") for p in found), sorted(found)  # Chroma's HNSW files
    assert stat.S_IMODE((root / "kb/rag").stat().st_mode) == 0o700
    open_modes = modes_while_open(root, chroma, umask, spec)
    assert {p: m for p, m in open_modes.items() if m not in (0o600, 0o700)} == {}
    assert json.loads(run(root, "status", "--json", "--store", spec, umask=umask).stdout)["permissions"] == []


def test_an_index_in_the_project_root_only_has_its_own_files_checked(tmp_path):
    """A SQLite file beside the documents: its folder is not the index's own, so writes and `doctor --fix`
    leave the other files (and the folder) alone."""
    root = tmp_path / "project"
    write_files(root, FILES)
    readme = root / "README.md"
    readme.write_text("A public readme.")
    readme.chmod(0o644)
    root.chmod(0o755)
    run(root, "index", "--db", "ragstead.db")
    assert stat.S_IMODE((root / "ragstead.db").stat().st_mode) == 0o600
    assert_private(root / "ragstead.tantivy")
    assert stat.S_IMODE(readme.stat().st_mode) == 0o644 and stat.S_IMODE(root.stat().st_mode) == 0o755
    assert not own_folder(root, root) and not own_folder(root.parent, root) and own_folder(root / "kb", root)
    run(root, "doctor", "--fix", "--db", "ragstead.db")
    assert stat.S_IMODE(readme.stat().st_mode) == 0o644 and stat.S_IMODE(root.stat().st_mode) == 0o755


def test_find_loose_skips_symlinks_and_tighten_keeps_owner_bits(tmp_path):
    folder = tmp_path / "rag"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    outside.chmod(0o644)
    (folder / "link").symlink_to(outside)
    script = folder / "tool"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    assert [p.path for p in find_loose([folder])] == [script]
    assert [p.wanted for p in tighten([folder])] == [0o700]
    assert stat.S_IMODE(script.stat().st_mode) == 0o700 and stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert find_loose([folder, tmp_path / "missing"]) == []


def test_a_store_without_a_configured_index_file_keeps_only_its_own_folder_private(tmp_path):
    """A scratch store (`default_db=Path()`, as a rebuild opens one) has no project index folder: its writes
    never tighten anything but its own folder, whatever the current folder is."""
    from ragstead.stores.factory import StoreSpec

    root = tmp_path / "project"
    root.mkdir()
    spec = StoreSpec.parse(f"sqlite:{tmp_path}/scratch/ragstead.db", root=root, default_db=Path())
    assert spec.index_folder is None
    assert StoreSpec.parse("", root=root, default_db=root / "kb/rag/ragstead.db").index_folder == root / "kb/rag"
    store = spec.open()
    try:
        assert stat.S_IMODE((tmp_path / "scratch").stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp_path / "scratch/ragstead.db").stat().st_mode) == 0o600
    finally:
        store.close()
