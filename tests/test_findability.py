"""`doctor --findability`: every indexed document is searched for by its own distinctive words; a duplicated
note (shadowed), an empty and an unsupported file (left out) are named with why, and the next run reports a
document that became unfindable as a regression."""

from __future__ import annotations

import json
import stat
import threading

import pytest
from typer.testing import CliRunner

from helpers.project import new_database
from ragstead import cli as cli_module
from ragstead.knowledge_base import KnowledgeBase

TOPICS = ["lisbon", "billing", "kubernetes", "gardening", "sourdough", "cycling", "invoices", "telescopes", "violin",
          "chess", "pottery", "astronomy"]
NOTES = {
    **{f"kb/notes/{word}.md": f"# {word.title()} notes\n\n## Plan\n\nThe {word} plan: we meet about {word} on "
       f"Fridays, the {word} budget is shared and every {word} decision goes in this note. Topic number {i}.\n"
       for i, word in enumerate(TOPICS)},
    "kb/notes/chess copy.md": "# Chess notes\n\n## Plan\n\nThe chess plan: we meet about chess on Fridays, the "
                              "chess budget is shared and every chess decision goes in this note. Topic number 9.\n",
    "kb/users/alice/diary.md": "# Diary\n\nAlice keeps her ferry timetable and harbour walks in this private diary.\n",
    "kb/notes/empty.md": "",
    "kb/notes/clip.mp4": b"\x00\x01 not a video we read",  # .heic is read with OCR now (#39)
}


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


@pytest.fixture
def project(make_project):  # type: ignore[no-untyped-def]
    project = make_project(NOTES)
    project.index()
    return project


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_the_duplicate_and_the_left_out_files_are_named_with_why(kind, make_project, request):
    spec = new_database(request.getfixturevalue("pg_server")) if kind == "postgresql" else ""
    project = make_project(NOTES, store=spec)
    project.index()
    with KnowledgeBase(project.settings, embedder=project.embedder) as kb:
        report = kb.findability().to_dict()
    assert project.embedder.query_calls == 0 and project.embedder.document_calls == 1  # the index run's only
    assert report["documents"] == len(TOPICS) + 2
    assert [item["kind"] for item in report["not_findable"]] == ["shadowed"]
    shadowed = report["not_findable"][0]
    assert {shadowed["path"], shadowed["shadowed_by"]} == {"kb/notes/chess.md", "kb/notes/chess copy.md"}
    assert "near-duplicate" in shadowed["reason"]
    left_out = {item["path"]: item for item in report["left_out"]}
    assert left_out["kb/notes/empty.md"]["kind"] == "empty"
    assert left_out["kb/notes/clip.mp4"]["kind"] == "unsupported"
    assert "unsupported file type" in left_out["kb/notes/clip.mp4"]["reason"]
    assert report["findable"] == report["documents"] - 1 and report["regressions"] == []
    assert report["previous"] is None


def test_the_next_run_compares_and_reports_a_regression(project):
    with KnowledgeBase(project.settings, embedder=project.embedder) as kb:
        first = kb.findability()
        saved = kb._findability.last_run_file
        assert stat.S_IMODE(saved.stat().st_mode) == 0o600
        shadowed = first.not_findable[0].path
        # Say the last run found it: this run's miss is then a regression.
        record = json.loads(saved.read_text())
        record["documents"][shadowed] = True
        saved.write_text(json.dumps(record))
        second = kb.findability()
    assert second.previous is not None and second.previous["findable"] == first.findable
    assert [r["path"] for r in second.regressions] == [shadowed]

    record["documents"][shadowed] = True
    saved.write_text(json.dumps(record))
    result = CliRunner().invoke(cli_module.app, ["doctor", "--findability", "--root", str(project.root)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert f"regression: {shadowed}" in result.output and "kb/notes/clip.mp4" in result.output


def test_the_cli_json_names_the_duplicate_and_the_skipped_file(project):
    result = CliRunner().invoke(cli_module.app, ["doctor", "--findability", "--json", "--root", str(project.root)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    named = {item["path"] for item in report["not_findable"] + report["left_out"]}
    assert {"kb/notes/empty.md", "kb/notes/clip.mp4"} <= named
    assert named & {"kb/notes/chess.md", "kb/notes/chess copy.md"}


def test_reading_new_files_leaves_the_store_to_other_callers(project, monkeypatch):
    """A server's threads share one read connection behind the runtime's lock: while the check reads a file that
    is not indexed yet (extraction, OCR: seconds for a scan), another caller's search must not wait for it."""
    from ragstead.services import findability

    (project.root / "kb/notes/new.md").write_text("# Ferries\n\nThe ferry leaves at nine from the harbour.\n")
    reading, go_on = threading.Event(), threading.Event()
    real_prepare = findability.prepare_file

    def slow_prepare(candidate, options):  # type: ignore[no-untyped-def]
        reading.set()
        go_on.wait(60)
        return real_prepare(candidate, options)

    monkeypatch.setattr(findability, "prepare_file", slow_prepare)
    with KnowledgeBase(project.settings, embedder=project.embedder) as kb:
        reports: list[dict] = []
        check = threading.Thread(target=lambda: reports.append(kb.findability(save=False).to_dict()))
        check.start()
        try:
            assert reading.wait(60), "the check never reached the new file"
            got_lock = kb.runtime.lock.acquire(timeout=30)  # a bound against a hang, not a timing check
            assert got_lock, "the check held the store's lock while it read a new file"
            kb.runtime.lock.release()
            assert kb.search("sourdough plan", mode="lexical").hits  # another caller's search, meanwhile
        finally:
            go_on.set()
            check.join(60)
    assert reports and {i["path"]: i["kind"] for i in reports[0]["left_out"]}["kb/notes/new.md"] == "not_indexed_yet"
