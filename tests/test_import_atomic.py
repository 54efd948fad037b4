"""`import` is all or nothing (#45.2): a snapshot whose sums check out but whose records are malformed or repeat
an id is refused before anything is written (it used to take `--replace`'s index to 0 documents); `--replace`
builds the new index aside and swaps it in, so a failure while it is built keeps the old one; a SIGKILL part-way
leaves a marker `status` reports, and the next import of the same snapshot finishes it."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from helpers.project import OFFLINE_ENV
from ragstead import cli as cli_module
from ragstead.errors import RagsteadError
from ragstead.knowledge_base import KnowledgeBase
from ragstead.stores import snapshot as snapshot_format
from ragstead.stores.base import ChunkRecord, DocumentRecord

TESTS = Path(__file__).parent
NOTES = {f"kb/notes/n{i:03}.md": f"# Note {i}\n\nNote {i} is about the {w} schedule and the {w} budget.\n"
         for i, w in enumerate(["lisbon", "billing", "chess", "violin", "cycling", "gardening"] * 10)}


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


@pytest.fixture
def snapshot(make_project, tmp_path):  # type: ignore[no-untyped-def]
    project = make_project(NOTES)
    project.index()
    with KnowledgeBase(project.settings, embedder=project.embedder) as kb:
        kb.export_snapshot(tmp_path / "notes.ragsnap")
    return tmp_path / "notes.ragsnap"


@pytest.fixture
def existing(make_project):  # type: ignore[no-untyped-def]
    """A project whose own index holds 3 other documents: what a failed `import --replace` must keep."""
    project = make_project({f"kb/mine/m{i}.md": f"# Mine {i}\n\nMy own note {i} on herons.\n" for i in range(3)})
    project.index()
    return project


def _rewritten(snapshot: Path, out: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    """A copy of `snapshot` whose records `edit(records, vectors)` changed, with sums and counts made to match:
    only the record checks can refuse it."""
    with zipfile.ZipFile(snapshot) as archive:
        manifest = json.loads(archive.read("manifest.json"))
        records = [json.loads(line) for line in archive.read("documents.jsonl").splitlines()]
        data = archive.read("vectors.f32")
    row = manifest["dim"] * 4
    vectors, at = [], 0
    for record in records:
        vectors.append(data[at : at + row * len(record["chunks"])])
        at += row * len(record["chunks"])
    edit(records, vectors)
    lines = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" if not isinstance(r, bytes) else r
                     for r in records)
    data = b"".join(vectors)
    manifest.update(documents=len(records), chunks=sum(len(r["chunks"]) if isinstance(r, dict) else 0
                                                       for r in records),
                    sha256={"documents.jsonl": hashlib.sha256(lines).hexdigest(),
                            "vectors.f32": hashlib.sha256(data).hexdigest()})
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("documents.jsonl", lines)
        archive.writestr("vectors.f32", data)
        archive.writestr("manifest.json", json.dumps(manifest))
    return out


def _duplicate_document(records, vectors):  # type: ignore[no-untyped-def]
    records.append(json.loads(json.dumps(records[0])))
    vectors.append(vectors[0])


def _duplicate_chunk_id(records, vectors):  # type: ignore[no-untyped-def]
    records[1]["chunks"][0]["chunk_id"] = records[0]["chunks"][0]["chunk_id"]


def _text_not_a_string(records, vectors):  # type: ignore[no-untyped-def]
    records[5]["chunks"][0]["text"] = 12


def _unknown_field(records, vectors):  # type: ignore[no-untyped-def]
    records[7]["document"]["owner"] = "mallory"


def _missing_field(records, vectors):  # type: ignore[no-untyped-def]
    del records[9]["document"]["doc_type"]


def _path_outside(records, vectors):  # type: ignore[no-untyped-def]
    records[11]["document"]["file_path"] = "../../../etc/cron.d/job"


def _bool_for_int(records, vectors):  # type: ignore[no-untyped-def]
    records[13]["document"]["size"] = True


def _int_past_sqlite(records, vectors):  # type: ignore[no-untyped-def]
    records[15]["chunks"][0]["chunk_index"] = 10**400  # a re-probe of #45: an OverflowError traceback at the write


def _nested_too_deep(records, vectors):  # type: ignore[no-untyped-def]
    records[2] = b'{"document": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"  # and a RecursionError traceback
    vectors[2] = b""


@pytest.mark.parametrize("edit", [_duplicate_document, _duplicate_chunk_id, _text_not_a_string, _unknown_field,
                                  _missing_field, _path_outside, _bool_for_int, _int_past_sqlite, _nested_too_deep],
                         ids=lambda f: f.__name__[1:])
def test_a_malformed_record_is_refused_before_replace_touches_the_index(edit, snapshot, existing, tmp_path):
    bad = _rewritten(snapshot, tmp_path / "bad.ragsnap", edit)
    with KnowledgeBase(existing.settings, embedder=existing.embedder) as kb:
        with pytest.raises(RagsteadError, match="damaged"):
            kb.import_snapshot(bad, replace=True)
        assert kb.stats()["documents"] == 3  # was 0: the index was emptied, then the write failed
        assert kb.search("herons", k=1).hits[0].file_path.startswith("kb/mine/")


def test_the_record_checks_know_every_field_of_a_document_and_a_chunk():
    import dataclasses

    assert set(snapshot_format.DOCUMENT_FIELDS) == {f.name for f in dataclasses.fields(DocumentRecord)}
    assert set(snapshot_format.CHUNK_FIELDS) == {f.name for f in dataclasses.fields(ChunkRecord)}


def test_a_line_over_the_bound_is_refused_without_reading_it_whole(snapshot, make_project, tmp_path, monkeypatch):
    def spaces(records, vectors):  # type: ignore[no-untyped-def]
        records[0] = b"{" + b" " * 20_000 + b'"document": 1}\n'  # 800 MB of spaces in the probe, 20 KB here
        vectors[0] = b""

    bad = _rewritten(snapshot, tmp_path / "spaces.ragsnap", spaces)
    monkeypatch.setattr(snapshot_format, "MAX_LINE_BYTES", 4096)
    reads: list[int] = []
    real_open = zipfile.ZipFile.open

    def counted_open(self, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        member = real_open(self, name, *args, **kwargs)
        if getattr(name, "filename", name) == "documents.jsonl":
            real_readline = member.readline
            member.readline = lambda limit=-1: reads.append(limit) or real_readline(limit)  # type: ignore[method-assign]
        return member

    monkeypatch.setattr(zipfile.ZipFile, "open", counted_open)
    with pytest.raises(RagsteadError, match="over"):
        snapshot_format.read_manifest(bad)
    assert reads and all(0 < limit <= 4097 for limit in reads)  # never a whole line, whatever its length


def test_replace_builds_aside_so_a_failed_reembed_keeps_the_old_index(snapshot, existing, monkeypatch):
    calls: list[int] = []
    real = existing.embedder.embed_documents

    def failing(texts):  # type: ignore[no-untyped-def]
        calls.append(len(texts))
        raise RuntimeError("the model ran out of memory")
        return real(texts)

    with KnowledgeBase(existing.settings, embedder=existing.embedder) as kb:
        monkeypatch.setattr(existing.embedder, "embed_documents", failing)
        with pytest.raises(RuntimeError, match="out of memory"):
            kb.import_snapshot(snapshot, replace=True, reembed=True)
        assert kb.stats()["documents"] == 3  # was 0: the index was emptied before the first batch
        assert kb.status().get("unfinished_import") is None  # the index was never touched
        monkeypatch.setattr(existing.embedder, "embed_documents", real)
        report = kb.import_snapshot(snapshot, replace=True)
        assert kb.stats()["documents"] == report.documents == len(NOTES)
        assert kb.search("chess budget", k=1).hits[0].file_path.startswith("kb/notes/")


_KILLABLE = """
import sys, time
sys.path.insert(0, {tests!r})
from helpers.fake_embedder import HashingEmbedder
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase
from ragstead.stores import migrate, snapshot as snapshot_format
from ragstead.stores.sqlite import SqliteStore

# Batches of 200 documents are one write: the 60 notes go 10 at a time, so the kill lands between two.
snapshot_format.restore_snapshot.__kwdefaults__["batch_size"] = 10
migrate.copy_store.__kwdefaults__["batch_size"] = 10
real = SqliteStore.apply
def apply(self, writes, removals, touches):
    real(self, writes, removals, touches)
    print("applied", self.path.parent.name, flush=True)
    time.sleep(0.2)
SqliteStore.apply = apply
with KnowledgeBase(load_settings({root!r}), embedder=HashingEmbedder()) as kb:
    kb.import_snapshot({snapshot!r}, replace={replace!r})
print("done", flush=True)
"""


@pytest.mark.parametrize("replace", [False, True], ids=["into-empty", "replace"])
def test_a_killed_import_is_reported_by_status_and_finished_by_the_next_import(replace, snapshot, make_project,
                                                                                existing, monkeypatch):
    target = existing if replace else make_project({})
    existing.store.close()
    target.store.close()
    script = _KILLABLE.format(tests=str(TESTS), root=str(target.root), snapshot=str(snapshot), replace=replace)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=OFFLINE_ENV)
    target_writes = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        assert line.strip() != "done", "the import ended before it was killed"
        if line.startswith("applied rag"):  # a write into the project's own index (not the scratch one)
            target_writes += 1
            if target_writes == 2:
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait(timeout=60)

    runner = CliRunner()
    monkeypatch.setattr("ragstead.services.runtime.embedder_for", lambda *args, **kwargs: existing.embedder)
    status = runner.invoke(cli_module.app, ["status", "--json", "--root", str(target.root)])
    data = json.loads(status.output)
    assert 0 < data["documents"] < len(NOTES)
    assert data["unfinished_import"]["documents"] == len(NOTES)  # was absent: a part of the snapshot read as ok
    assert data["unfinished_import"]["snapshot"] == str(snapshot.resolve())
    text = runner.invoke(cli_module.app, ["status", "--root", str(target.root)]).output
    assert "unfinished" in text

    finished = runner.invoke(cli_module.app, ["import", str(snapshot), "--json", "--root", str(target.root)])
    assert finished.exit_code == 0, finished.output
    assert json.loads(finished.output)["documents"] == len(NOTES) - data["documents"]  # only the rest written
    after = json.loads(runner.invoke(cli_module.app, ["status", "--json", "--root", str(target.root)]).output)
    assert after["documents"] == len(NOTES) and "unfinished_import" not in after
    with KnowledgeBase(target.settings, embedder=existing.embedder) as kb:
        assert not any(d.file_path.startswith("kb/mine/") for d in kb.documents(limit=1000))
        assert kb.search("violin schedule", k=1).hits[0].file_path.startswith("kb/notes/")


def test_a_killed_runs_scratch_index_is_removed_by_the_next_import_or_rebuild(snapshot, existing, tmp_path):
    # A re-probe of #45: a SIGKILL while the snapshot filled the scratch index left kb/rag/.import-*/ (a copy of
    # the index, its tantivy files 0644 that status then listed), and no later run removed it.
    folder = existing.settings.db_file.parent
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the index's\n")
    for name in (".import-dead1", ".rebuild-dead2", ".keepme-3"):
        (folder / name).mkdir()
        (folder / name / "ragstead.db").write_bytes(b"left by a killed run")
    (folder / ".import-link").symlink_to(outside, target_is_directory=True)
    with KnowledgeBase(existing.settings, embedder=existing.embedder) as kb:
        kb.import_snapshot(snapshot, replace=True)
        assert not (folder / ".import-dead1").exists() and not (folder / ".rebuild-dead2").exists()  # were kept
        assert (folder / ".keepme-3" / "ragstead.db").exists() and (outside / "keep.txt").exists()
        (folder / ".import-dead4").mkdir()
        kb.index(rebuild=True)
        assert not (folder / ".import-dead4").exists()
    assert sorted(p.name for p in folder.glob(".*-*")) == [".import-link", ".keepme-3"]
