"""Photos read once (#47.2): a file whose reading found no text (a photo OCR finds nothing in) is remembered by its
checksum and not read again until it changes; files are read on every core, and the progress bar moves while OCR
works. OCR calls are counted here (read in this process, where the count is seen), not timed."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from helpers.format_files import make_photo, make_png
from ragstead.documents.formats import ocr
from ragstead.documents.loaders import LoadedDocument, load_document
from ragstead.indexing import build
from ragstead.indexing.textless import NO_TEXT, TEXTLESS_FILE

pytest.importorskip("pytesseract")


@pytest.fixture
def ocr_calls(monkeypatch):
    """Every Tesseract call, counted: files are read in this process (a reader process would not be seen)."""
    calls: list[int] = []
    recognise = ocr.recognise

    def counted(image, budget):  # type: ignore[no-untyped-def]
        calls.append(1)
        return recognise(image, budget)

    monkeypatch.setattr(ocr, "recognise", counted)
    monkeypatch.setattr(build, "load_isolated", lambda path, budget: load_document(path, budget=budget))
    return calls


def photos(count: int) -> dict[str, bytes]:
    return {f"kb/photos/p{i}.jpg": make_photo() for i in range(count)}


def no_text(report) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(s["path"] for s in report.skipped if s["reason"] == NO_TEXT)


def test_a_photo_without_text_is_read_once_until_it_changes(make_project, ocr_calls):
    project = make_project({**photos(3), "kb/note.md": "The harbour ledger."})
    first = project.index(("kb",))
    assert len(ocr_calls) == 3 and no_text(first) == [f"kb/photos/p{i}.jpg" for i in range(3)]

    again = project.index(("kb",))
    assert len(ocr_calls) == 3  # nothing read again
    assert no_text(again) == no_text(first) and again.unchanged == 1 and not again.added  # still said, one line
    record = project.settings.lock_file.parent / TEXTLESS_FILE
    assert stat.S_IMODE(record.stat().st_mode) == 0o600

    photo = project.root / "kb/photos/p0.jpg"
    os.utime(photo, (1_600_000_000, 1_600_000_000))  # touched, same bytes: known by its checksum
    project.index(("kb",))
    assert len(ocr_calls) == 3
    project.index(("kb",))
    assert len(ocr_calls) == 3  # and its new mtime kept: not even hashed again

    photo.write_bytes(make_png("The receipt says quinoapocalypse"))  # changed: read again, and now indexed
    changed = project.index(("kb",))
    assert len(ocr_calls) == 4 and changed.added == ["kb/photos/p0.jpg"]
    assert "kb/photos/p0.jpg" not in record.read_text()

    (project.root / "kb/photos/p1.jpg").unlink()  # gone: it leaves the record with the run
    project.index(("kb",))
    assert "kb/photos/p1.jpg" not in record.read_text() and "kb/photos/p2.jpg" in record.read_text()
    assert len(ocr_calls) == 4


def test_remask_and_rebuild_read_textless_photos_again(make_project, ocr_calls):
    from ragstead import KnowledgeBase

    project = make_project({**photos(2), "kb/note.md": "The harbour ledger."})
    kb = KnowledgeBase(project.settings, embedder=project.embedder)
    kb.index(["kb"])
    assert len(ocr_calls) == 2
    kb.index(["kb"], remask=True)
    assert len(ocr_calls) == 4
    kb.index(["kb"], rebuild=True)
    assert len(ocr_calls) == 6
    kb.index(["kb"])
    assert len(ocr_calls) == 6


def test_files_are_read_on_every_core(make_project, monkeypatch):
    """Two files can only both be read if they are read at the same time: each waits for the other."""
    both = threading.Barrier(2, timeout=10)

    def read(path, budget):  # type: ignore[no-untyped-def]
        both.wait()
        return LoadedDocument(text=f"The text of {path.name}.")

    monkeypatch.setattr(build, "READERS", 2, raising=False)
    monkeypatch.setattr(build, "load_isolated", read)
    project = make_project({"kb/a.txt": "a", "kb/b.txt": "b"})
    report = project.index(("kb",))
    assert sorted(report.added) == ["kb/a.txt", "kb/b.txt"] and not report.skipped


def test_progress_moves_while_photos_are_read(make_project, ocr_calls):
    project = make_project(photos(3))
    calls: list[tuple[int, int]] = []
    project.index(("kb",), progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (3, 3)  # one unit an image, counted as each is read
    assert [done for done, _ in calls] == sorted(done for done, _ in calls) and len({d for d, _ in calls}) == 3
    assert all(total >= 3 for _, total in calls)
