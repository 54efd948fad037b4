import os
import time

import pytest

from helpers.library import search
from helpers.pdf_writer import make_pdf
from ragstead.embeddings import MiniLMOnnxEmbedder
from ragstead.errors import IndexLockedError, ModelMismatchError
from ragstead.filters import QueryFilters
from ragstead.indexing.lock import index_lock
from ragstead.retrieval.search import SearchOptions
from ragstead.stores.sqlite import SqliteStore


@pytest.fixture
def embedder(fake_embedder):
    """Stores, filters and wiring, not ranking quality: the deterministic fake embedder stands in for the model."""
    return fake_embedder


def long_text(topic: str, n: int = 900) -> str:
    return " ".join(f"{topic}{i % 50}" for i in range(n))


def chunk_rows(store):
    sql = "SELECT file_path, chunk_id, text_hash FROM chunks ORDER BY file_path, chunk_index"
    return store._db.execute(sql).fetchall()


def test_reindex_embeds_only_changed_and_removes_stale(make_project):
    project = make_project({
        "kb/a.md": long_text("alpha"),
        "kb/b.md": "bravo file about boats",
        "kb/c.md": "charlie file about cars",
    })
    first = project.index()
    assert sorted(first.added) == ["kb/a.md", "kb/b.md", "kb/c.md"] and first.chunks_embedded == 5
    project.embedder.reset()

    again = project.index()
    assert again.unchanged == 3 and project.embedder.document_calls == 0  # nothing re-embedded

    # Modify b, delete c, touch a without changing its content.
    time.sleep(0.01)
    (project.root / "kb/b.md").write_text("bravo file about bicycles now")
    (project.root / "kb/c.md").unlink()
    os.utime(project.root / "kb/a.md", (time.time() + 5, time.time() + 5))
    report = project.index()
    assert report.updated == ["kb/b.md"] and report.removed == ["kb/c.md"] and report.unchanged == 1
    assert project.embedder.texts_embedded == ["bravo file about bicycles now"]

    rows = chunk_rows(project.store)
    assert {r[0] for r in rows} == {"kb/a.md", "kb/b.md"}
    hits = search("cars", project.store, project.embedder, QueryFilters(), SearchOptions(mode="lexical"))
    assert hits["results"] == []  # the deleted file's chunks are gone from FTS too
    stats = project.store.stats()
    assert stats["chunks"] == stats["lexical_rows"] == 4


def test_unchanged_chunks_of_a_changed_file_are_not_reembedded(make_project):
    text = long_text("delta", 800)
    project = make_project({"kb/d.md": text})
    project.index()
    project.embedder.reset()
    (project.root / "kb/d.md").write_text(text + " epilogue words")
    report = project.index()
    assert report.updated == ["kb/d.md"]
    # 800 words -> windows [0,400) [320,720) [640,800); only the last window's text changed.
    assert report.chunks_reused == 2 and report.chunks_embedded == 1
    assert project.embedder.document_calls == 1 and len(project.embedder.texts_embedded) == 1


def test_renamed_file_reuses_vectors(make_project):
    project = make_project({"kb/old-name.md": "echo file about eagles"})
    project.index()
    project.embedder.reset()
    (project.root / "kb/old-name.md").rename(project.root / "kb/new-name.md")
    report = project.index()
    assert report.added == ["kb/new-name.md"] and report.removed == ["kb/old-name.md"]
    assert project.embedder.document_calls == 0


def test_bad_files_are_skipped_and_the_rest_indexed(make_project):
    project = make_project({
        "kb/good.md": "good content about gardens",
        "kb/corrupt.pdf": b"%PDF-1.4 garbage that is not a pdf",
        "kb/binary.txt": b"\x00\x01\x02\x03",
        "kb/empty.md": "",
        "kb/clip.mp4": b"\x89PNG\r\n",
        "kb/report.pdf": make_pdf(["page one text about rivers", "page two text about mountains"]),
    })
    report = project.index()
    assert sorted(report.added) == ["kb/good.md", "kb/report.pdf"]
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert set(reasons) == {"kb/corrupt.pdf", "kb/binary.txt", "kb/empty.md", "kb/clip.mp4"}
    assert "PDF" in reasons["kb/corrupt.pdf"] and "binary" in reasons["kb/binary.txt"]
    assert "unsupported" in reasons["kb/clip.mp4"] and "no text" in reasons["kb/empty.md"]
    out = search("mountains", project.store, project.embedder, QueryFilters(), SearchOptions(mode="lexical"))
    assert out["results"][0]["page"] == 2


def test_a_file_that_turns_corrupt_loses_its_stale_chunks(make_project):
    project = make_project({"kb/r.pdf": make_pdf(["fine text about rivers"])})
    project.index()
    (project.root / "kb/r.pdf").write_bytes(b"%PDF-1.4 truncated")
    report = project.index()
    assert report.removed == ["kb/r.pdf"] and project.store.stats()["chunks"] == 0


def test_roots_outside_the_project_are_refused(make_project):
    from ragstead.errors import RagsteadError

    project = make_project({"kb/a.md": "a"})
    for bad in ("../elsewhere", "/etc"):
        with pytest.raises(RagsteadError):
            project.index(roots=(bad,))


def test_a_symlinked_root_leaving_the_project_is_refused_before_rebuild_wipes_anything(make_project, tmp_path):
    from ragstead.errors import RagsteadError

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("someone else's notes")
    project = make_project({"kb/a.md": "alpha notes"})
    project.index()
    (project.root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RagsteadError, match="inside the project root"):
        project.index(roots=("kb", "link"), rebuild=True)
    assert project.store.stats()["documents"] == 1  # the index is as it was, not emptied by --rebuild


def test_index_only_touches_its_own_roots(make_project):
    project = make_project({"kb/a.md": "alpha", "docs/b.md": "bravo"})
    project.index(roots=("kb", "docs"))
    report = project.index(roots=("docs",))
    assert report.removed == [] and project.store.stats()["documents"] == 2


def test_second_index_run_fails_clearly_while_locked(make_project):
    project = make_project({"kb/a.md": "alpha"})
    with index_lock(project.settings.lock_file), pytest.raises(IndexLockedError, match="another"):
        project.index(wait_seconds=0.2)
    assert project.index().added == ["kb/a.md"]  # released: the next run works


class OtherModel:
    name, dim = "some-other-model", 384

    def __init__(self, inner: MiniLMOnnxEmbedder) -> None:
        self.inner = inner

    def embed_documents(self, texts):
        return self.inner.embed_documents(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_model_mismatch_is_refused_and_rebuild_switches(make_project, real_embedder):
    from ragstead.indexing.build import index_roots

    project = make_project({"kb/a.md": "alpha about apples"})
    project.index()
    other = OtherModel(real_embedder)
    with pytest.raises(ModelMismatchError, match="--rebuild"):
        index_roots(project.settings.indexing(), project.store, other, ("kb",))
    with pytest.raises(ModelMismatchError):
        search("apples", project.store, other, QueryFilters(), SearchOptions(mode="vector"))
    # lexical queries need no model and still work
    assert search("apples", project.store, other, QueryFilters(), SearchOptions(mode="lexical"))["results"]
    report = index_roots(project.settings.indexing(), project.store, other, ("kb",), rebuild=True)
    assert report.added == ["kb/a.md"] and project.store.stats()["embed_model"] == "some-other-model"


def test_store_reopens_with_same_content(make_project):
    project = make_project({"kb/a.md": "alpha about apples", "kb/b.md": "bravo about bananas"})
    project.index()
    before = chunk_rows(project.store)
    project.store.close()
    reopened = SqliteStore(project.settings.db_file)
    assert chunk_rows(reopened) == before and reopened.integrity_check() == "ok"
    project.store = reopened


def test_a_rename_and_a_delete_in_one_run(make_project):
    project = make_project({"kb/old.md": "foxtrot file about foxes", "kb/doomed.md": "golf file about golf"})
    project.index()
    project.embedder.reset()
    (project.root / "kb/old.md").rename(project.root / "kb/new.md")
    (project.root / "kb/doomed.md").unlink()
    (project.root / "kb/fresh.md").write_text("hotel file about hotels")
    report = project.index()
    assert sorted(report.added) == ["kb/fresh.md", "kb/new.md"]
    assert report.removed == ["kb/doomed.md", "kb/old.md"]
    assert project.embedder.texts_embedded == ["hotel file about hotels"]  # the rename re-embedded nothing
    assert {r[0] for r in chunk_rows(project.store)} == {"kb/fresh.md", "kb/new.md"}


def test_one_bad_file_of_any_kind_never_stops_the_run(make_project):
    project = make_project({"kb/good.md": "good content about gardens", "kb/loop-target.md": "x"})
    (project.root / "kb/loop-target.md").unlink()
    os.symlink("loop.md", project.root / "kb/loop.md")
    os.symlink("loop-target.md", project.root / "kb/dangling.md")
    (project.root / "kb/bad.docx").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    report = project.index()
    assert report.added == ["kb/good.md"]
    assert sorted(report.failed) == ["kb/bad.docx", "kb/dangling.md", "kb/loop.md"]
    assert all(s["reason"] and "\n" not in s["reason"] for s in report.skipped)
    assert set(report.to_dict()) >= {"added", "updated", "removed", "unchanged", "skipped", "failed",
                                     "chunks_written", "chunks_embedded", "chunks_reused", "seconds", "rebuild"}


def test_new_chunking_settings_on_an_existing_index_are_refused_with_the_command_that_applies_them(make_project):
    from ragstead import ConfigError, KnowledgeBase

    project = make_project({"kb/a.md": " ".join(f"word{i}" for i in range(900)), "kb/b.md": "short note"})
    KnowledgeBase(project.settings, embedder=project.embedder).index(["kb"])
    smaller = KnowledgeBase(project.settings.with_overrides(chunk_size=200, overlap=40), embedder=project.embedder)
    project.write({"kb/c.md": "a new note written after the settings changed"})
    with pytest.raises(ConfigError, match=r"index --rebuild"):
        smaller.index(["kb"])
    with pytest.raises(ConfigError, match=r"index --rebuild"):
        smaller.add("kb/c.md")
    assert project.store.stats()["documents"] == 2  # nothing was written the new way
    report = smaller.index(["kb"], rebuild=True)
    assert report.rebuild and project.store.stats()["documents"] == 3
    assert project.store.stats()["chunks"] > 3  # a.md is cut in 200-word windows now
    with pytest.raises(ConfigError):
        KnowledgeBase(project.settings, embedder=project.embedder).index(["kb"])  # and the old settings refused


def test_progress_counts_chunks_and_ends_at_the_total(make_project):
    from ragstead import KnowledgeBase

    files = {f"kb/n{i}.md": " ".join(f"w{i}x{j}" for j in range(60 + 400 * (i % 3))) for i in range(45)}
    project = make_project(files)
    calls: list[tuple[int, int]] = []
    kb = KnowledgeBase(project.settings, embedder=project.embedder)
    report = kb.index(["kb"], progress=lambda done, total: calls.append((done, total)))
    assert calls, "no progress reported"
    done = [d for d, _ in calls]
    assert done == sorted(done) and all(d <= t for d, t in calls)
    assert calls[-1] == (report.chunks_written, report.chunks_written)  # the estimate is exact at the end
    assert len({d for d in done}) > 2  # it moves while the run embeds, not only at the end


def test_the_first_commit_comes_early_and_later_batches_follow_the_embedders_pace(tmp_path, fake_embedder,
                                                                                  monkeypatch):
    """A batch is bounded by time as well as size: the first holds FIRST_BATCH_CHUNKS chunks, so a long run's
    first commit comes within seconds (Ctrl-C keeps it); a fast embedder then gets full batches."""
    import ragstead
    from ragstead.indexing.build import BATCH_CHUNKS, FIRST_BATCH_CHUNKS

    for i in range(400):
        (tmp_path / "notes").mkdir(exist_ok=True)
        (tmp_path / "notes" / f"n{i:03}.md").write_text(f"Note {i} about the harbour ledger and its tides.")
    committed: list[int] = []
    apply = SqliteStore.apply

    def counting(self, writes, removed, touches):  # type: ignore[no-untyped-def]
        if writes:
            committed.append(sum(len(w.chunks) for w in writes))
        return apply(self, writes, removed, touches)

    monkeypatch.setattr(SqliteStore, "apply", counting)
    with ragstead.open(tmp_path, embedder=fake_embedder, roots=("notes",)) as kb:
        assert len(kb.index().added) == 400
    assert committed[0] == FIRST_BATCH_CHUNKS and committed[1] == BATCH_CHUNKS and sum(committed) == 400


def test_a_missing_root_keeps_its_documents_and_a_present_root_loses_a_deleted_file(make_project):
    from ragstead import KnowledgeBase

    project = make_project({"kb/a.md": "alpha note about boats", "kb/gone.md": "a note deleted later",
                            "drive/b.md": "beta note about trains", "drive/c.md": "gamma note about planes"})
    project.index(roots=("kb", "drive"))
    (project.root / "kb/gone.md").unlink()
    (project.root / "drive").rename(project.root / "drive-unmounted")
    settings = project.settings.with_overrides(roots=("kb", "drive"))
    with KnowledgeBase(settings, embedder=project.embedder) as kb:
        report = kb.index()
        assert report.removed == ["kb/gone.md"]  # present root, deleted file: removed as always
        assert [m.to_dict() for m in report.missing_roots] == [{"root": "drive", "documents": 2, "reason": "missing"}]
        assert report.to_dict()["missing_roots"][0]["kept"] is True
        rebuilt = kb.index(rebuild=True)
        assert rebuilt.rebuild and rebuilt.missing_roots and kb.stats()["documents"] == 3
        assert {d.file_path for d in kb.documents()} >= {"drive/b.md", "drive/c.md"}
        pruned = kb.index(prune_missing_roots=True)
        assert pruned.removed == ["drive/b.md", "drive/c.md"] and kb.stats()["documents"] == 1


def test_a_rebuild_that_cannot_carry_a_missing_roots_documents_keeps_the_old_index_whole(make_project):
    from ragstead import KnowledgeBase

    project = make_project({"kb/a.md": "alpha note about boats", "drive/b.md": "beta note about trains"})
    project.index(roots=("kb", "drive"))
    (project.root / "drive").rename(project.root / "elsewhere")
    recut = project.settings.with_overrides(roots=("kb", "drive"), chunk_size=50, overlap=10)
    with KnowledgeBase(recut, embedder=project.embedder) as kb:
        report = kb.index(rebuild=True)
        assert not report.rebuild and report.missing_roots and kb.stats()["documents"] == 2


def test_a_snapshot_in_a_root_is_never_read_nor_reported(make_project, tmp_path):
    from ragstead import KnowledgeBase
    from ragstead.indexing.ignore import STARTER

    project = make_project({"kb/a.md": "alpha note about boats"})
    with KnowledgeBase(project.settings, embedder=project.embedder) as kb:
        kb.index(["kb"])
        kb.export_snapshot(project.root / "kb" / "backup.ragsnap")
        report = kb.index(["kb"])
    assert report.skipped == [] and report.excluded == 0 and report.unchanged == 1
    assert any(line.startswith("# *.ragsnap ") for line in STARTER.splitlines())  # commented: left out anyway


def test_the_cli_warns_once_per_missing_root_and_a_rebuild_it_cannot_do_records_nothing(make_project, embedder,
                                                                                     monkeypatch):
    from typer.testing import CliRunner

    from ragstead import cli as cli_module

    monkeypatch.setattr("ragstead.services.runtime.embedder_for", lambda *args, **kwargs: embedder)
    project = make_project({"kb/a.md": "alpha note about boats", "drive/b.md": "beta note about trains",
                            "ragstead.toml": '[ragstead]\nroots = ["kb", "drive"]\n'})

    def cli(*args):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(cli_module.app, [*args, "-q", "--root", str(project.root)])

    assert cli("index").exit_code == 0
    (project.root / "drive").rename(project.root / "drive-old")
    for args in (("index",), ("index", "--rebuild"), ("index", "--rebuild", "--chunk-size", "50", "--overlap", "5")):
        run = cli(*args)
        assert run.exit_code == 0, run.output
        warnings = [line for line in run.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and "root 'drive' is missing: kept its 1 document" in warnings[0], run.stderr
        assert "(2 documents" in run.stdout and "removed 0" in run.stdout
    assert "not rebuilt" in warnings[0] and "chunk_size" not in (project.root / "ragstead.toml").read_text()
