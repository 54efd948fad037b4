"""The tantivy lexical index stays in step with SQLite through failures, crashes and other writers."""

import shutil

import pytest

from helpers.library import search
from ragstead.errors import LexicalIndexBusyError
from ragstead.filters import QueryFilters
from ragstead.retrieval.search import SearchOptions
from ragstead.stores import lexical_index, sqlite
from ragstead.stores.lexical_index import LexicalIndex
from ragstead.stores.sqlite import SqliteStore


def lexical_paths(project, question, store=None, **filters):
    out = search(question, store or project.store, project.embedder, QueryFilters.build(**filters),
                 SearchOptions(mode="lexical", k=20), project.settings.path_rules)
    return [r["file_path"] for r in out["results"]]


def test_a_failure_between_the_two_commits_is_repaired_on_the_next_search(make_project, monkeypatch):
    project = make_project({"kb/users/ann/a.md": "notes on the heron migration"})
    project.index()
    project.write({"kb/users/ann/b.md": "the osprey nest survived the storm"})

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash after the SQLite commit")

    monkeypatch.setattr(LexicalIndex, "write", crash)
    with pytest.raises(RuntimeError):
        project.index()
    monkeypatch.undo()
    assert project.store.stats()["chunks"] == 2  # SQLite has b.md ...
    fresh = SqliteStore(project.settings.db_file)  # ... and a new reader rebuilds the lexical side
    try:
        assert lexical_paths(project, "osprey storm", store=fresh) == ["kb/users/ann/b.md"]
        assert fresh.integrity_check() == "ok"
    finally:
        fresh.close()


def test_a_write_after_a_missed_one_rebuilds_instead_of_building_on_a_gap(make_project, monkeypatch):
    project = make_project({"kb/a.md": "alpha heron"})
    project.index()
    project.write({"kb/b.md": "bravo osprey"})
    monkeypatch.setattr(LexicalIndex, "write", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        project.index()
    monkeypatch.undo()
    project.write({"kb/c.md": "charlie kestrel"})
    project.index()  # generation is two ahead of the lexical index: it must rebuild, not apply c alone
    assert lexical_paths(project, "osprey") == ["kb/b.md"]
    assert lexical_paths(project, "kestrel") == ["kb/c.md"]
    assert project.store.integrity_check() == "ok"


def test_a_deleted_lexical_folder_is_rebuilt(make_project):
    project = make_project({"kb/a.md": "alpha heron", "docs/b.md": "public osprey"})
    project.index()
    project.store.close()
    shutil.rmtree(project.settings.db_file.with_suffix(".tantivy"))
    project.store = SqliteStore(project.settings.db_file)
    assert lexical_paths(project, "osprey", public_only=True) == ["docs/b.md"]
    assert project.store.stats()["lexical_rows"] == 2


def test_a_reader_searches_the_last_commit_while_a_writer_holds_the_lock(make_project, monkeypatch):
    project = make_project({"kb/a.md": "alpha heron"})
    project.index()
    other = SqliteStore(project.settings.db_file)  # plays a second process
    try:
        other._lexical.acquire()
        # SQLite moves ahead while the lexical writer is held elsewhere: no rebuild, no error.
        project.store._db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'lexical_generation'")
        assert lexical_paths(project, "heron") == ["kb/a.md"]
        # A write that cannot get the lock fails before it touches SQLite.
        project.write({"kb/b.md": "bravo osprey"})
        before = project.store.stats()["chunks"]
        monkeypatch.setattr(lexical_index, "WRITER_WAIT_SECONDS", 0.2)
        with pytest.raises(LexicalIndexBusyError, match="nothing was written"):
            project.index()
        assert project.store._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == before
    finally:
        other.close()
    # Lock released: the next search sees the generation gap with nobody writing and repairs it.
    assert lexical_paths(project, "heron") == ["kb/a.md"]
    assert project.store.integrity_check() == "ok"


def test_stemming_and_diacritics_match_like_the_text_reads(make_project):
    project = make_project({"kb/a.md": "The Café's running experiments on mitochondrial cells."})
    project.index()
    for question in ("cafe", "run experiment", "CELL", "Cafés"):
        assert lexical_paths(project, question) == ["kb/a.md"], question


def test_a_scratch_index_uses_the_analyzer_it_is_given():
    # The seam `bench lexical` compares analyzers through: without stemming, "cells" no longer finds "cell".
    import tantivy

    from ragstead.stores.lexical_index import LexicalRow

    plain = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.lowercase()).build()
    for analyzer, expected in ((None, [1]), (plain, [])):
        index = LexicalIndex(None, analyzer)
        index.acquire()
        index.replace_all(1, iter([LexicalRow(1, "one living cell", "note", True, None, None, ())]))
        index.release()
        assert [key for key, _ in index.search(["cells"], QueryFilters(), 5)] == expected


def test_many_small_writes_get_merged_into_few_segments(make_project, monkeypatch):
    # Each index run is its own tantivy commit; a writer that cancels its merges would leave one segment
    # per run (it did: 200 segments after a 1M-chunk build, until release() stopped rolling back). Sized as a
    # large index, where runs are not settled into one segment by a rebuild, so the merges are what is tested.
    monkeypatch.setattr(sqlite, "EXACT_LEXICAL_ROWS", 0)
    project = make_project({})
    for i in range(12):
        project.write({f"kb/n{i}.md": f"note {i} about herons"})
        project.index()
    stats = project.store.stats()
    assert stats["lexical_rows"] == 12 and stats["lexical_segments"] < 8


def _damage(folder, how: str) -> None:
    segments = [p for p in folder.iterdir() if p.suffix in (".idx", ".term", ".store", ".pos")]
    assert segments or how == "meta"
    if how == "meta":
        (folder / "meta.json").write_text("garbage{")
    for segment in segments:
        if how == "truncated":
            with segment.open("r+b") as handle:
                handle.truncate(10)
        elif how == "missing":
            segment.unlink()


@pytest.mark.parametrize("how", ["meta", "truncated", "missing"])
def test_a_damaged_lexical_index_is_set_aside_and_rebuilt_with_one_warning(make_project, how, cli_process):
    from ragstead.errors import RagsteadWarning

    project = make_project({"kb/users/ann/a.md": "notes on the heron migration",
                            "kb/users/ann/b.md": "the osprey nest survived the storm"})
    project.index()
    expected = lexical_paths(project, "osprey heron")
    project.store.close()
    folder = project.settings.db_file.with_suffix(".tantivy")
    _damage(folder, how)
    with pytest.warns(RagsteadWarning, match="damaged"):
        project.store = SqliteStore(project.settings.db_file)
    assert lexical_paths(project, "osprey heron") == expected
    assert project.store.integrity_check() == "ok"
    assert [p for p in folder.parent.iterdir() if ".damaged-" in p.name]  # kept aside, not deleted
    # Through the CLI: every command works, with exactly one warning line. In its own process: the folder set
    # aside is named by second and process id, so a second one in this process and second would collide.
    project.store.close()
    _damage(folder, how)
    out = cli_process(project, "query", "osprey", "--lexical-only", "--json")
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "Traceback" not in out.stderr
    assert "kb/users/ann/b.md" in out.stdout
    project.store = SqliteStore(project.settings.db_file)


def test_keyword_results_equal_a_clean_builds_after_updates_and_deletes(make_project, tmp_path, monkeypatch,
                                                                      fake_embedder):
    """Deleted chunks count in tantivy's BM25 statistics until a rebuild: the store settles them. The clean
    build commits in its default batches (a small first one), so it also has deleted generation markers.
    Keyword results only: the model-free embedder writes the vectors (conftest.py)."""
    import random

    from ragstead import KnowledgeBase
    from ragstead.config import load_settings

    rng = random.Random(4)
    words = "heron osprey kestrel survey nest migration billing ledger invoice storm river marsh".split()
    files = {f"kb/users/ann/n{i}.md": " ".join(rng.choice(words) for _ in range(rng.randint(20, 120)))
             for i in range(60)}
    project = make_project(files)
    project.embedder = fake_embedder
    kb = KnowledgeBase(project.settings, embedder=project.embedder)
    kb.index(["kb"])
    for round_ in range(3):  # rewrite a few notes, delete a few, add a few
        for i in rng.sample(range(60), 8):
            path = project.root / f"kb/users/ann/n{i}.md"
            if path.exists():
                path.write_text(" ".join(rng.choice(words) for _ in range(rng.randint(20, 120))))
        for i in rng.sample(range(60), 3):
            (project.root / f"kb/users/ann/n{i}.md").unlink(missing_ok=True)
        project.write({f"kb/users/ann/new{round_}.md": "heron heron marsh survey"})
        kb.index(["kb"])
    queries = ["heron survey", "osprey nest", "billing ledger invoice", "storm river", "marsh kestrel migration"]
    incremental = {q: lexical_paths(project, q, store=kb.store, user_slug="ann")[:8] for q in queries}
    clean_root = tmp_path / "clean"
    for path in (project.root / "kb").rglob("*.md"):
        target = clean_root / path.relative_to(project.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text())
    clean = KnowledgeBase(load_settings(clean_root), embedder=project.embedder)
    clean.index(["kb"])
    rebuilt = {q: lexical_paths(project, q, store=clean.store, user_slug="ann")[:8] for q in queries}
    assert incremental == rebuilt
    kb.close()
    clean.close()


def test_a_damaged_embedded_chroma_store_is_set_aside_and_refilled_with_one_warning(make_project, cli):
    project = make_project({"kb/users/ann/a.md": "notes on the heron migration",
                            "kb/users/ann/b.md": "the osprey nest survived the storm"},
                           store="chroma:kb/rag/chroma?exact_rows=0")
    project.index()
    project.store.close()
    folder = project.root / "kb/rag/chroma"
    (folder / "chroma.sqlite3").write_bytes(b"not a database at all")
    out = cli(project, "query", "osprey storm", "--vector", "--json", "--user", "ann",
              "--store", "chroma:kb/rag/chroma?exact_rows=0")
    assert [line for line in out.stderr.splitlines() if line.startswith("warning:")], out.stderr
    assert "Traceback" not in out.stderr and "kb/users/ann/b.md" in out.stdout
    assert (folder / "ragstead.db").exists()  # ragstead's SQLite side stayed where it was
    assert [p for p in folder.parent.iterdir() if p.name.startswith("chroma.damaged-")]
    status = cli(project, "status", "--json", "--store", "chroma:kb/rag/chroma?exact_rows=0")
    assert '"integrity": "ok"' in status.stdout
    project.store = project.settings.store_spec().open()
