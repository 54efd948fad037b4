"""`.ragsteadignore` at any folder level (index, freshness, uploads; init writes a starter) and the team
layout's private folders at 0700 from the first command, checked by doctor (issue #35, items 2 and 6)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

import ragstead
from ragstead.indexing.ignore import IgnoreRules
from ragstead.knowledge_base import init


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


def _files(root: Path) -> None:
    for rel, text in {"kb/notes/keep.md": "kept note", "kb/notes/drafts/wip.md": "draft note",
                      "kb/deep/er/scratch.tmp.md": "scratch", "kb/deep/er/real.md": "real",
                      "kb/top-draft.md": "top"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    (root / ".ragsteadignore").write_text("# comment\ntop-draft.md\n", encoding="utf-8")
    (root / "kb" / "notes" / ".ragsteadignore").write_text("drafts/\n", encoding="utf-8")
    (root / "kb" / "deep" / ".ragsteadignore").write_text("*.tmp.md\n", encoding="utf-8")


def test_nested_ignore_files_are_honoured_by_index_and_freshness(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    _files(tmp_path)
    with ragstead.open(tmp_path, embedder=embedder, roots=("kb",)) as kb:
        report = kb.index()
        assert sorted(report.added) == ["kb/deep/er/real.md", "kb/notes/keep.md"]
        assert report.excluded == 2  # files; an ignored folder is not entered
        (tmp_path / "kb" / "notes" / "drafts" / "more.md").write_text("another draft", encoding="utf-8")
        assert kb.index().added == []  # the freshness walk is the same walk
        assert kb.add("kb/notes/drafts/more.md", wait=0).added == []  # the one-file path uploads and watch take


def test_ignore_rules_match_folders_and_files_by_their_own_level(tmp_path: Path) -> None:
    _files(tmp_path)
    rules = IgnoreRules(tmp_path, ("top-draft.md",))
    assert rules.ignored("kb/notes/drafts", folder=True)
    assert not rules.ignored("kb/drafts", folder=True)  # the pattern belongs to kb/notes/
    assert rules.ignored("kb/deep/er/scratch.tmp.md") and not rules.ignored("kb/deep/er/real.md")


def test_init_writes_a_commented_starter_and_private_team_folders(tmp_path: Path) -> None:
    init(tmp_path, layout="team", owner="alice")
    starter = (tmp_path / ".ragsteadignore").read_text(encoding="utf-8")
    assert all(not line.strip() or line.startswith("#") for line in starter.splitlines())
    for folder in ("kb", "kb/users", "kb/users/alice", "artifacts", "artifacts/dossiers"):
        assert stat.S_IMODE((tmp_path / folder).stat().st_mode) == 0o700, folder
    with ragstead.open(tmp_path) as kb:
        assert kb.doctor()["ok"]
        (tmp_path / "kb" / "users" / "alice").chmod(0o755)
        report = kb.doctor()
        assert not report["ok"] and any(r["path"].endswith("kb/users/alice") for r in report["loose"])
        assert kb.doctor(fix=True)["ok"]


def test_a_symlink_to_an_ignored_file_is_ignored_too(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """#45: `kb/notes/plan.md -> drafts/wip.md` read the ignored draft under another name."""
    _files(tmp_path)
    (tmp_path / "kb" / "notes" / "plan.md").symlink_to("drafts/wip.md")
    (tmp_path / "kb" / "notes" / "keep-link.md").symlink_to("keep.md")  # a symlink to a kept file still counts
    with ragstead.open(tmp_path, embedder=embedder, roots=("kb",)) as kb:
        report = kb.index()
        assert "kb/notes/plan.md" not in report.added and "kb/notes/keep-link.md" in report.added
        assert not any("draft note" in hit.snippet for hit in kb.search("draft note", k=5).hits)


def test_ingest_of_an_ignored_file_is_refused_unread(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """#45: `ragstead ingest kb/notes/drafts/wip.md` archived the ignored draft where the index reads it."""
    _files(tmp_path)
    (tmp_path / "outside-link.md").symlink_to("kb/notes/drafts/wip.md")
    with ragstead.open(tmp_path, embedder=embedder, roots=("kb",)) as kb:
        for given in ("kb/notes/drafts/wip.md", str(tmp_path / "kb/top-draft.md"), "outside-link.md"):
            result = kb.ingest([given]).results[0]
            assert result.status == "failed" and "ignores this file" in (result.reason or ""), given
        assert kb.ingest(["kb/notes/keep.md"]).results[0].status == "added"  # a kept file is ingested as before
        assert not any("draft note" in hit.snippet for hit in kb.search("draft note", k=5).hits)
