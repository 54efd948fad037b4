"""Portable snapshots: `export` then `import` into a fresh project gives the same hits with nothing embedded, on
the embedded store and on PostgreSQL; another model is refused unless re-embedded; a damaged file is refused
whole; the file is private (0600) and the guard keeps it out of a push."""

from __future__ import annotations

import json
import stat
import zipfile

import pytest
from typer.testing import CliRunner

from helpers.fake_embedder import HashingEmbedder
from helpers.project import CountingEmbedder, new_database
from ragstead import cli as cli_module
from ragstead.config import load_settings
from ragstead.errors import ModelMismatchError, RagsteadError
from ragstead.knowledge_base import KnowledgeBase
from ragstead.services.guard import SECRET_FILE_PATTERNS
from ragstead.stores.snapshot import restore_snapshot

NOTES = {
    **{f"kb/notes/topic{i}.md": f"---\ntags: [t{i % 3}]\n---\n# Topic {i}\n\nNote {i} is about "
       f"{word} and the {word} schedule for the team, with details on {word} budgets.\n"
       for i, word in enumerate(["lisbon", "billing", "kubernetes", "gardening", "sourdough", "cycling",
                                 "invoices", "telescopes", "violin", "chess"])},
    "kb/users/alice/diary.md": "# Diary\n\nAlice keeps her lisbon travel plans here, with the ferry times.\n",
    "docs/guide.md": "# Guide\n\nA public guide to billing and invoices for new staff.\n",
}
QUERIES = ["lisbon schedule", "billing invoices", "kubernetes budgets", "chess", "ferry times", "telescopes"]


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


def _hits(kb: KnowledgeBase) -> dict[str, list[tuple[str, str]]]:
    out = {}
    for query in QUERIES:
        for user in (None, "alice"):
            result = kb.search(query, user=user, k=5)
            out[f"{query}/{user}"] = [(hit.doc_id, hit.chunk_id) for hit in result.hits]
    out["public"] = [(h.doc_id, h.chunk_id) for h in kb.search("billing", public_only=True, k=5).hits]
    return out


@pytest.fixture
def source(make_project):  # type: ignore[no-untyped-def]
    project = make_project(NOTES)
    project.index()
    return project


@pytest.mark.parametrize("kind", ["sqlite", "postgresql", "chroma"])
def test_export_then_import_gives_the_same_hits_with_nothing_embedded(kind, source, make_project, tmp_path,
                                                                     hashing_embedder, request):
    with KnowledgeBase(source.settings, embedder=source.embedder) as kb:
        exported = kb.export_snapshot(tmp_path / "kb")
        before = _hits(kb)
    assert exported.path.endswith("kb.ragsnap") and exported.documents == len(NOTES)
    assert stat.S_IMODE((tmp_path / "kb.ragsnap").stat().st_mode) == 0o600

    spec = {"sqlite": "", "chroma": "chroma:kb/rag/chroma?exact_rows=0"}.get(kind) \
        or new_database(request.getfixturevalue("pg_server"))
    fresh = make_project({}, store=spec)
    counting = CountingEmbedder(hashing_embedder)
    with KnowledgeBase(fresh.settings, embedder=counting) as kb:
        report = kb.import_snapshot(tmp_path / "kb.ragsnap")
        assert report.embedded == 0 and counting.document_calls == 0 and counting.texts_embedded == []
        assert (report.documents, report.chunks) == (exported.documents, exported.chunks)
        assert _hits(kb) == before
        assert kb.tags() == KnowledgeBase(source.settings, embedder=source.embedder).tags()
        diary = kb.document(path="kb/users/alice/diary.md")
        assert diary is not None and diary["user_slug"] == "alice" and diary["is_private"]
    assert counting.document_calls == 0


def test_a_snapshot_of_another_model_is_refused_unless_reembedded(source, make_project, tmp_path):
    with KnowledgeBase(source.settings, embedder=source.embedder) as kb:
        kb.export_snapshot(tmp_path / "kb.ragsnap")
    fresh = make_project({})
    other = CountingEmbedder(HashingEmbedder(dim=64))
    with KnowledgeBase(fresh.settings, embedder=other) as kb:
        with pytest.raises(ModelMismatchError, match="--reembed"):
            kb.import_snapshot(tmp_path / "kb.ragsnap")
        assert not kb.documents()
        report = kb.import_snapshot(tmp_path / "kb.ragsnap", reembed=True)
        assert report.embedded == report.chunks > 0 and report.model == "test-hashing-64"
        assert kb.search("chess", k=1).hits[0].file_path == "kb/notes/topic9.md"


def _damaged(path, tmp_path, how):  # type: ignore[no-untyped-def]
    data = bytearray(path.read_bytes())
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "flipped":
        with zipfile.ZipFile(path) as archive:
            info = archive.getinfo("vectors.f32")
        data[info.header_offset + 200] ^= 0xFF  # inside the stored vectors: the zip's CRC or the sha256 sees it
    else:
        data = b"not a snapshot at all"
    bad = tmp_path / f"{how}.ragsnap"
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("how", ["truncated", "flipped", "foreign"])
def test_a_damaged_snapshot_is_refused_whole(how, source, make_project, tmp_path):
    with KnowledgeBase(source.settings, embedder=source.embedder) as kb:
        kb.export_snapshot(tmp_path / "kb.ragsnap")
    bad = _damaged(tmp_path / "kb.ragsnap", tmp_path, how)
    fresh = make_project({})
    with KnowledgeBase(fresh.settings, embedder=fresh.embedder) as kb:
        with pytest.raises(RagsteadError, match=r"damaged|not a ragstead snapshot"):
            kb.import_snapshot(bad)
        kb.create()
        assert kb.stats()["documents"] == 0

    result = CliRunner().invoke(cli_module.app, ["import", str(bad), "--root", str(fresh.root)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output


def test_a_tampered_manifest_count_is_refused(source, make_project, tmp_path):
    with KnowledgeBase(source.settings, embedder=source.embedder) as kb:
        kb.export_snapshot(tmp_path / "kb.ragsnap")
    with zipfile.ZipFile(tmp_path / "kb.ragsnap") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["manifest.json"] = members["manifest.json"].replace(b'"documents": 12', b'"documents": 13')
    with zipfile.ZipFile(tmp_path / "bad.ragsnap", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with KnowledgeBase(make_project({}).settings, embedder=source.embedder) as kb, \
            pytest.raises(RagsteadError, match="damaged"):
        kb.import_snapshot(tmp_path / "bad.ragsnap")


def test_the_cli_exports_and_imports_and_says_nothing_was_embedded(source, make_project, tmp_path):
    runner = CliRunner()
    out = tmp_path / "move.ragsnap"
    exported = runner.invoke(cli_module.app, ["export", str(out), "--root", str(source.root), "--json"])
    assert exported.exit_code == 0, exported.output
    fresh = make_project({})
    imported = runner.invoke(cli_module.app, ["import", str(out), "--root", str(fresh.root)])
    assert imported.exit_code == 0, imported.output
    assert "0 embedded" in imported.output
    again = runner.invoke(cli_module.app, ["import", str(out), "--root", str(fresh.root)])
    assert again.exit_code == 2 and "--replace" in again.output
    replaced = runner.invoke(cli_module.app, ["import", str(out), "--replace", "--json", "--root", str(fresh.root)])
    assert replaced.exit_code == 0 and '"embedded": 0' in replaced.output


def test_the_guard_blocks_a_snapshot_by_its_name():
    assert "*.ragsnap" in SECRET_FILE_PATTERNS


def test_a_write_that_fails_part_way_leaves_the_target_empty(source, make_project, tmp_path, monkeypatch):
    with KnowledgeBase(source.settings, embedder=source.embedder) as kb:
        kb.export_snapshot(tmp_path / "kb.ragsnap")
    target = make_project({}).store
    calls = []

    def failing_apply(writes, removals, touches):  # type: ignore[no-untyped-def]
        calls.append(len(writes))
        if len(calls) == 3:
            raise OSError("disk full")
        return original(writes, removals, touches)

    original = target.apply
    monkeypatch.setattr(target, "apply", failing_apply)
    with pytest.raises(OSError, match="disk full"):
        restore_snapshot(tmp_path / "kb.ragsnap", target, batch_size=2)
    assert calls == [2, 2, 2] and target.stats()["documents"] == 0 and target.stats()["chunks"] == 0


def _cli_with_fake_model(monkeypatch, fake):  # type: ignore[no-untyped-def]
    """The in-process CLI, with the fake embedder standing in for whatever model the index names."""
    monkeypatch.setattr("ragstead.services.runtime.embedder_for", lambda *args, **kwargs: fake)
    runner = CliRunner()
    return lambda *args: runner.invoke(cli_module.app, list(args))


def _exported_and_imported(source, tmp_path, cli):  # type: ignore[no-untyped-def]
    snapshot = tmp_path / "move.ragsnap"
    assert cli("export", str(snapshot), "--root", str(source.root)).exit_code == 0
    target = tmp_path / "empty"
    target.mkdir()
    imported = cli("import", str(snapshot), "--root", str(target))
    assert imported.exit_code == 0, imported.output
    return snapshot, target


def test_an_imported_index_says_its_chunks_were_masked_and_index_runs_keep_every_document(source, tmp_path,
                                                                                         monkeypatch):
    cli = _cli_with_fake_model(monkeypatch, source.embedder)
    _, target = _exported_and_imported(source, tmp_path, cli)
    status = cli("status", "--root", str(target))
    assert status.exit_code == 0 and "predates" not in status.output and "--rebuild" not in status.output
    assert json.loads(cli("status", "--json", "--root", str(target)).stdout)["secrets"]["checked"] is True
    # kb/ is here (it holds the index), none of its files are; docs/ is not here at all
    kept = {"kb": len(NOTES) - 1, "docs": 1}
    for args in (["index"], ["index", "--rebuild"], ["index"]):
        run = cli(*args, "--root", str(target))
        assert run.exit_code == 0, run.output
        warnings = [line for line in run.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 2 and all("--prune-missing-roots" in line for line in warnings), run.stderr
        for root, count in kept.items():
            assert len([w for w in warnings if f"root {root!r}" in w and f"kept its {count} document" in w]) == 1
        assert "removed 0" in run.stdout and f"({len(NOTES)} documents" in run.stdout
    report = json.loads(cli("index", "--json", "--root", str(target)).stdout)
    assert report["removed"] == [] and report["missing_roots"] == [
        {"root": "docs", "documents": 1, "reason": "missing", "kept": True},
        {"root": "kb", "documents": len(NOTES) - 1, "reason": "imported", "kept": True}]
    with KnowledgeBase(load_settings(target), embedder=source.embedder) as kb:
        assert kb.stats()["documents"] == len(NOTES) and kb.search("chess", k=3).hits
    assert "predates" not in cli("status", "--root", str(target)).output  # the rebuild kept the masked state


def test_a_snapshot_without_a_secrets_state_reads_unknown_and_never_advises_a_rebuild(source, tmp_path,
                                                                                      monkeypatch):
    cli = _cli_with_fake_model(monkeypatch, source.embedder)
    snapshot, target = _exported_and_imported(source, tmp_path, cli)
    old = tmp_path / "old.ragsnap"  # as written before the manifest carried it
    with zipfile.ZipFile(snapshot) as src, zipfile.ZipFile(old, "w") as out:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "manifest.json":
                manifest = json.loads(data)
                del manifest["secrets"]
                data = json.dumps(manifest).encode()
            out.writestr(item, data)
    assert cli("import", str(old), "--replace", "--root", str(target)).exit_code == 0
    status = cli("status", "--root", str(target))
    assert "unknown" in status.output and "--rebuild" not in status.output
    assert json.loads(cli("status", "--json", "--root", str(target)).stdout)["secrets"]["checked"] is None


def test_prune_missing_roots_drops_an_imported_index_on_purpose(source, tmp_path, monkeypatch):
    cli = _cli_with_fake_model(monkeypatch, source.embedder)
    _, target = _exported_and_imported(source, tmp_path, cli)
    run = cli("index", "--prune-missing-roots", "--root", str(target))
    assert run.exit_code == 0 and "dropped its" in run.stderr
    with KnowledgeBase(load_settings(target), embedder=source.embedder) as kb:
        assert kb.stats()["documents"] == 0
