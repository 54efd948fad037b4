"""What the index says about its masking (issue #50): a first run killed part-way still says its chunks are masked
(it said for good that the index predated masking, and `export` carried that on); an index masked by an older
detector is told once by `index`, and always by `status`, that masking improved, and `index --remask` applies
it without embedding again the chunks whose text did not change. And Milvus Lite's files are private as soon as
`index` exits."""

from __future__ import annotations

import json
import os
import stat
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragstead
from ragstead.cli import app
from ragstead.indexing import build


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


def _notes(root: Path, count: int) -> Path:
    (root / "kb").mkdir(parents=True)
    for n in range(count):
        (root / "kb" / f"note{n:02d}.md").write_text(f"# Note {n}\n\nThe greenhouse needs water on day {n}.\n",
                                                     encoding="utf-8")
    (root / "kb" / "wifi.md").write_text("# Wifi\n\nThe wifi password is Heron!Sky42.\n", encoding="utf-8")
    return root


def test_a_first_run_killed_after_a_batch_still_says_it_is_masked(tmp_path: Path, embedder, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    real, calls = build._embed, []

    def embed_then_die(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 2:  # the first batch is committed: the process dies here (kill -9 runs no cleanup)
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(build, "_embed", embed_then_die)
    kb = ragstead.open(_notes(tmp_path, build.FIRST_BATCH_CHUNKS + 10), embedder=embedder)
    with pytest.raises(KeyboardInterrupt):
        kb.index()
    assert 0 < kb.stats()["documents"] < build.FIRST_BATCH_CHUNKS + 11
    assert kb.status()["secrets"]["checked"] is True  # was False: "predates secret masking... run --rebuild"
    monkeypatch.setattr(build, "_embed", real)
    kb.index()
    assert kb.status()["secrets"] == {"files": 1, "masked": 1, "checked": True}
    report = kb.export_snapshot(tmp_path / "backup.ragsnap")
    with zipfile.ZipFile(report.path) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert manifest["secrets"]["checked"] is True
    kb.close()


def test_an_index_masked_by_an_older_detector_is_told_once_and_remasked_without_re_embedding(tmp_path: Path) -> None:
    root = _notes(tmp_path, 3)
    runner = CliRunner()
    at = ["--root", str(root)]
    assert runner.invoke(app, ["index", *at]).exit_code == 0
    record_file = root / "kb" / "rag" / build.SECRETS_FILE
    record = json.loads(record_file.read_text())
    assert record["detector"] == build.DETECTOR_VERSION
    record_file.write_text(json.dumps({k: v for k, v in record.items() if k != "detector"}))  # as before #50
    status = json.loads(runner.invoke(app, ["status", "--json", *at]).stdout)
    assert status["secrets"]["outdated"] is True
    assert "index --remask" in runner.invoke(app, ["status", *at]).output
    first = runner.invoke(app, ["index", *at])
    assert "secret masking has improved" in first.output and "index --remask" in first.output
    assert "secret masking has improved" not in runner.invoke(app, ["index", *at]).output  # once
    remasked = runner.invoke(app, ["index", "--remask", "--json", *at])
    report = json.loads(remasked.stdout)
    assert len(report["updated"]) == 4 and report["chunks_embedded"] == 0  # read again; nothing changed: no embedding
    assert "outdated" not in json.loads(runner.invoke(app, ["status", "--json", *at]).stdout)["secrets"]
    assert "masked in every output" in runner.invoke(app, ["status", *at]).output


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_milvus_lite_files_are_private_when_index_exits(tmp_path: Path, cli_process) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("pymilvus")
    from helpers.project import Project

    project = Project(tmp_path / "p", None, "")
    project.write({"kb/users/ana/note.md": "# Note\n\nThe billing database moved to Postgres in May.\n"})
    cli_process(project, "index", "--store", "milvus:kb/rag/milvus.db?lexical=milvus")
    loose = [f"{oct(stat.S_IMODE(p.stat().st_mode))} {p}" for p in (project.root / "kb" / "rag").rglob("*")
             if stat.S_IMODE(p.stat().st_mode) & 0o077]
    assert not loose, loose  # was: the parquet file of ana's note 0644 until the next command opened the store
