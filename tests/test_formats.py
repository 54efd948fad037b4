"""The files people keep (#39): EPUB, PPTX, XLSX/ODS/CSV, .eml and .mbox. Each is made here, indexed with
`ragstead index DIR` offline, found by its distinctive word, and cited by its chapter, slide, sheet rows or
message; an e-mail's date is the document's date."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from typer.testing import CliRunner

from helpers.format_files import (
    make_epub,
    make_heic,
    make_mbox,
    make_message,
    make_msg,
    make_ods,
    make_photo,
    make_png,
    make_pptx,
    make_scanned_pdf,
    make_xlsx,
)
from helpers.pdf_writer import make_pdf
from ragstead.cli import app
from ragstead.documents.ids import file_of
from ragstead.documents.loaders import load_document
from ragstead.errors import LoadError

# file name -> (its bytes, its distinctive word, the section path its chunk with that word must carry)
FILES = {
    "book.epub": (make_epub([("Prologue", "A quiet harbour."), ("The Keeper", "The zephyrine lamp burned.")]),
                  "zephyrine", "The Keeper"),
    "deck.pptx": (make_pptx([("Plan", "first slide"), ("Budget", "quokkanomics costs money"), ("End", "bye")]),
                  "quokkanomics", "slide 2"),
    "stock.xlsx": (make_xlsx({"Inventory": [["Item", "Qty"], ["walrusite", 7]], "Other": [["a"], ["b"]]}),
                   "walrusite", "sheet Inventory, row 2"),
    "stock.ods": (make_ods({"Stock": [["Item", "Qty"], ["lamp", "2"], ["narwhalic", "9"]]}), "narwhalic",
                  "sheet Stock, rows 2-3"),
    "list.csv": (b"Item,Qty\nlamp,4\npangolite,3\n", "pangolite", "sheet 1, rows 2-3"),
    "review.eml": (make_message("Quarterly review", "Let us meet about the axolotlian plan.",
                                "Tue, 05 Mar 2024 10:00:00 +0100",
                                {"report.pdf": make_pdf(["The attached report mentions capybarism."])}).as_bytes(),
                   "axolotlian", "message: Quarterly review"),
    "archive.mbox": (make_mbox([make_message("Old news", "first body about ibexology", "Mon, 01 Jan 2024 09:00 +0000"),
                                make_message("Tapir trip", "second body about tapirology",
                                             "Mon, 01 Apr 2024 09:00:00 +0000")]),
                     "tapirology", "message 2: Tapir trip"),
    "memo.msg": (make_msg("Outlook memo", "The memo speaks of gerenukery.", datetime(2024, 3, 7, 8, 30, tzinfo=UTC),
                          {"plan.txt": b"The attached plan names okapiform."}),
                 "gerenukery", "message: Outlook memo"),
    "whiteboard.png": (make_png("The whiteboard says quinoapocalypse"), "quinoapocalypse", "image"),
    "phone.heic": (make_heic("A phone photo of zanzibarite"), "zanzibarite", "image"),
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    (root / "kept").mkdir()
    for name, (data, _, _) in FILES.items():
        (root / "kept" / name).write_bytes(data)
    (root / "kept" / "note.md").write_text("# Plans\n\nThe #gardening list: plant leeks.\n")
    (root / "kept" / "letter.pdf").write_bytes(make_scanned_pdf("A scanned letter about marmaladeum"))
    (root / "kept" / "cat.jpg").write_bytes(make_photo())
    (root / "kept" / "dog.jpg").write_bytes(make_photo())
    result = CliRunner().invoke(app, ["index", str(root / "kept"), "--root", str(root)])
    assert result.exit_code == 0, result.output
    return root, result.output


def hits(indexed, *args: str) -> list[dict]:
    root = indexed[0]
    result = CliRunner().invoke(app, ["query", *args, "--root", str(root), "--json", "--lexical-only", "-k", "20"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["results"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_each_file_is_found_by_its_word_and_cited_by_its_part(indexed, name):
    _, word, section = FILES[name]
    found = hits(indexed, word)
    # an mbox's messages are documents inside it: `kept/archive.mbox#msg-n2` (no Message-ID: by number)
    assert found and file_of(found[0]["file_path"]) == f"kept/{name}", found
    assert found[0]["section_path"] == section and found[0]["page"] is None


def test_an_attachment_is_a_document_of_its_own_linked_to_its_message(indexed):
    found = hits(indexed, "capybarism")
    assert found[0]["file_path"] == "kept/review.eml#att-1" and file_of(found[0]["file_path"]) == "kept/review.eml"
    assert found[0]["section_path"] == "attachment report.pdf of message: Quarterly review"
    assert found[0]["title"] == "report.pdf"
    assert [h["file_path"] for h in hits(indexed, "axolotlian")] == ["kept/review.eml"]  # not in the attachment


def test_an_outlook_message_is_dated_and_its_attachment_a_document_of_its_own(indexed):
    assert [h["file_path"] for h in hits(indexed, "gerenukery", "--date-from", "2024-03-07")] == ["kept/memo.msg"]
    assert hits(indexed, "gerenukery", "--date-from", "2024-03-08") == []
    found = hits(indexed, "okapiform")
    assert found[0]["file_path"] == "kept/memo.msg#att-1"
    assert found[0]["section_path"] == "attachment plan.txt of message: Outlook memo"


def test_an_outlook_message_carries_its_headers_and_an_html_body_reads_as_text(tmp_path):
    path = tmp_path / "m.msg"
    path.write_bytes(make_msg("Web memo", "Only <b>markup</b> here", datetime(2024, 1, 2, tzinfo=UTC), html=True))
    doc = load_document(path)
    assert doc.title == "Web memo" and doc.created_at == "2024-01-02T00:00:00+00:00"
    assert "From: Dana <dana@example.org>" in doc.text and "To: Sam <sam@example.org>" in doc.text
    assert "Only\nmarkup\nhere" in doc.text and "<b>" not in doc.text


def test_without_extract_msg_an_outlook_message_is_skipped_naming_the_extra(tmp_path, monkeypatch):
    import sys

    from ragstead.errors import UnsupportedFileError

    monkeypatch.setitem(sys.modules, "extract_msg", None)
    path = tmp_path / "m.msg"
    path.write_bytes(FILES["memo.msg"][0])
    with pytest.raises(UnsupportedFileError, match=r"pip install 'ragstead\[mail\]'"):
        load_document(path)


def test_each_message_of_an_mbox_is_a_document_dated_by_its_message(indexed):
    assert [h["file_path"] for h in hits(indexed, "tapirology")] == ["kept/archive.mbox#msg-n2"]
    assert [h["file_path"] for h in hits(indexed, "ibexology")] == ["kept/archive.mbox#msg-n1"]
    assert hits(indexed, "ibexology", "--date-from", "2024-03-01") == []
    assert [h["title"] for h in hits(indexed, "tapirology", "--date-from", "2024-03-01")] == ["Tapir trip"]


def test_an_emails_date_filters(indexed):
    assert [h["file_path"] for h in hits(indexed, "axolotlian", "--date-from", "2024-03-01")] == ["kept/review.eml"]
    assert hits(indexed, "axolotlian", "--date-from", "2024-03-06") == []
    assert hits(indexed, "axolotlian", "--date-to", "2024-03-04") == []


def test_an_emails_sender_and_recipients_filter_as_tags_and_its_attachment_carries_them(indexed):
    from_dana = [h["file_path"] for h in hits(indexed, "axolotlian OR capybarism OR gerenukery OR okapiform",
                                                "--tag", "from:dana@example.org")]
    assert sorted(from_dana) == ["kept/memo.msg", "kept/memo.msg#att-1", "kept/review.eml", "kept/review.eml#att-1"]
    assert [h["file_path"] for h in hits(indexed, "axolotlian", "--tag", "to:sam@example.org")] == ["kept/review.eml"]
    assert hits(indexed, "axolotlian", "--tag", "to:dana@example.org") == []  # Dana sent it, she did not receive it


def test_an_email_carries_its_headers_and_subject(tmp_path):
    path = tmp_path / "m.eml"
    path.write_bytes(FILES["review.eml"][0])
    doc = load_document(path)
    assert doc.title == "Quarterly review" and doc.created_at == "2024-03-05T09:00:00+00:00"
    assert "From: Dana <dana@example.org>" in doc.text and "To: Sam <sam@example.org>" in doc.text


def test_a_sheet_row_reads_on_its_own_with_its_header(tmp_path):
    path = tmp_path / "s.xlsx"
    path.write_bytes(make_xlsx({"Inventory": [["Item", "Qty", ""], ["lamp", 4, "spare"]]}))
    doc = load_document(path)
    assert doc.text == "Item: lamp; Qty: 4; column C: spare"
    assert doc.part_labels == ["sheet Inventory, row 2"]


def test_slides_carry_their_notes_and_tables_of_chapters_their_headings(tmp_path):
    deck = tmp_path / "d.pptx"
    deck.write_bytes(make_pptx([("One", "alpha"), ("Two", "beta")], notes="remember the gamma"))
    doc = load_document(deck)
    assert doc.part_labels == ["slide 1", "slide 2"] and "remember the gamma" in doc.text
    book = tmp_path / "b.epub"
    book.write_bytes(make_epub([("Dawn", "x"), ("Dusk", "y")], title="Days"))
    doc = load_document(book)
    assert doc.title == "Days" and doc.part_labels == ["Dawn", "Dusk"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_corrupt_file_of_each_kind_is_a_load_error(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(FILES[name][0][:40] + b"\x00\xff" * 30)
    try:
        load_document(path)
    except LoadError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize("suffix", [".epub", ".pptx", ".xlsx", ".ods"])
def test_a_zip_bomb_is_refused_before_unpacking(tmp_path, suffix):
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("content.xml", b" " * (300 << 20))
    path = tmp_path / f"bomb{suffix}"
    path.write_bytes(out.getvalue())
    with pytest.raises(LoadError, match=r"max_unzipped_mb|max_zip_ratio"):
        load_document(path)


VAULT_NOTE = """---
title: Garden plan
tags:
  - Outdoors
  - seasonal
aliases: [Allotment, Veg patch]
date: 2024-02-10
---
# Garden plan

Plant leeks after the #frost-free date; see [[Seed list]] and [[Calendar#March|the March page]].
Also [[projects/Soil tests#pH]]. Not a tag: `#include`, page#anchor, or a heading.

```
#notatag
```
"""


def test_a_vault_note_reads_its_tags_aliases_date_and_links(tmp_path):
    path = tmp_path / "garden.md"
    path.write_text(VAULT_NOTE)
    doc = load_document(path)
    assert set(doc.tags) == {"outdoors", "seasonal", "frost-free"}
    assert doc.created_at == "2024-02-10T00:00:00+00:00" and doc.title == "Garden plan"
    assert "see Seed list and the March page." in doc.text and "Soil tests > pH" in doc.text
    assert "Aliases: Allotment, Veg patch" in doc.text and "[[" not in doc.text


def test_logseq_properties_are_tags_too(tmp_path):
    path = tmp_path / "page.md"
    path.write_text("tags:: reading, [[books]]\nalias:: Library\n\n- a block about #scifi\n")
    assert set(load_document(path).tags) == {"reading", "books", "scifi"}


def test_an_inline_tag_is_a_tag_filter(indexed):
    assert [h["file_path"] for h in hits(indexed, "leeks", "--tag", "gardening")] == ["kept/note.md"]
    assert hits(indexed, "leeks", "--tag", "plans") == []


def test_a_scanned_pdf_page_is_read_with_ocr_and_cited_by_page(indexed):
    found = hits(indexed, "marmaladeum")
    assert found[0]["file_path"] == "kept/letter.pdf" and found[0]["page"] == 1


def test_photos_without_text_are_skipped_in_one_line(indexed):
    output = indexed[1]
    assert "skipped 2 images with no text: kept/cat.jpg, kept/dog.jpg" in output
    assert "skipped kept/cat.jpg" not in output


def test_ocr_off_skips_images_and_leaves_scans_empty(tmp_path):
    from ragstead.documents.loaders import LoadLimits

    (tmp_path / "w.png").write_bytes(make_png("quinoapocalypse"))
    with pytest.raises(LoadError, match=r"OCR is off \(ocr = false\)"):
        load_document(tmp_path / "w.png", LoadLimits(ocr=False))
    (tmp_path / "s.pdf").write_bytes(make_scanned_pdf("marmaladeum"))
    assert load_document(tmp_path / "s.pdf", LoadLimits(ocr=False)).text == ""


def test_an_image_over_the_pixel_limit_is_refused_before_decoding(tmp_path):
    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (9000, 9000)).save(out, "PNG")
    (tmp_path / "huge.png").write_bytes(out.getvalue())
    with pytest.raises(LoadError, match="pixel OCR limit"):
        load_document(tmp_path / "huge.png")


def test_a_scanned_page_declaring_a_giant_image_is_refused_before_decoding(tmp_path):
    data = make_scanned_pdf("marmaladeum")
    assert b"/Width 1100" in data and b"/Height 160" in data
    (tmp_path / "bomb.pdf").write_bytes(data.replace(b"/Width 1100", b"/Width 99999")
                                        .replace(b"/Height 160", b"/Height 99999"))
    with pytest.raises(LoadError, match="pixel OCR limit"):
        load_document(tmp_path / "bomb.pdf")


@pytest.mark.parametrize(("missing", "names", "not_named"), [
    ("extra", "pip install 'ragstead[ocr]'", "tesseract-ocr"),
    ("program", "apt-get install tesseract-ocr", "pip install"),
])
def test_without_tesseract_an_image_is_skipped_naming_what_is_missing_not_failed(tmp_path, monkeypatch, missing,
                                                                                  names, not_named):
    import hashlib
    import sys

    from ragstead.indexing.build import FileCandidate, IndexingOptions, Skip, prepare_file

    if missing == "extra":
        monkeypatch.setitem(sys.modules, "pytesseract", None)  # `import pytesseract` raises ImportError
    else:
        pytesseract = pytest.importorskip("pytesseract")
        monkeypatch.setattr(pytesseract.pytesseract, "tesseract_cmd", str(tmp_path / "no-tesseract"))
    path = tmp_path / "w.png"
    data = make_png("quinoapocalypse")
    path.write_bytes(data)
    candidate = FileCandidate(rel_path="kb/w.png", root="kb", path=path, size=len(data), mtime=0.0,
                              file_hash=hashlib.sha256(data).hexdigest(), is_new=True)
    # Read in this process (max_reader_bytes=0), where the patch above holds; a worker process would not see it.
    outcome = prepare_file(candidate, IndexingOptions(root=tmp_path, max_reader_bytes=0))
    assert isinstance(outcome, Skip) and not outcome.failed
    assert names in outcome.reason and not_named not in outcome.reason, outcome.reason


def test_a_message_gone_from_an_mbox_leaves_the_index_and_the_others_keep_their_paths(tmp_path):
    messages = [make_message(subject, f"a body about {word}", "Mon, 01 Apr 2024 09:00:00 +0000")
                for subject, word in (("One", "okapism"), ("Two", "dugongery"), ("Three", "kinkajoulish"))]
    for number, message in enumerate(messages):
        message["Message-ID"] = f"<m{number}@example.org>"
    box = tmp_path / "kept" / "box.mbox"
    box.parent.mkdir()
    box.write_bytes(make_mbox(messages))
    runner = CliRunner()
    first = runner.invoke(app, ["index", str(box.parent), "--root", str(tmp_path), "--json"])
    assert first.exit_code == 0, first.output
    assert len(json.loads(first.output)["added"]) == 3
    root = (tmp_path, "")
    paths = {word: hits(root, word)[0]["file_path"] for word in ("okapism", "dugongery", "kinkajoulish")}
    assert all(p.startswith("kept/box.mbox#msg-") and "-n" not in p for p in paths.values()), paths
    box.write_bytes(make_mbox([messages[0], messages[2]]))
    second = runner.invoke(app, ["index", str(box.parent), "--root", str(tmp_path), "--json"])
    assert second.exit_code == 0, second.output
    assert json.loads(second.output)["removed"] == [paths["dugongery"]]
    assert hits(root, "dugongery") == []
    assert hits(root, "okapism")[0]["file_path"] == paths["okapism"]
    assert hits(root, "kinkajoulish")[0]["file_path"] == paths["kinkajoulish"]
    box.unlink()
    third = runner.invoke(app, ["index", str(box.parent), "--root", str(tmp_path), "--json"])
    assert sorted(json.loads(third.output)["removed"]) == sorted([paths["okapism"], paths["kinkajoulish"]])
    assert hits(root, "okapism") == []


def test_a_wikilink_reads_as_the_linked_notes_title_and_is_kept_as_a_link(tmp_path):
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "deep" / "er").mkdir(parents=True)
    (vault / "Seed list.md").write_text("---\ntitle: Seeds to buy in spring\n---\n# Seed list\n")
    (vault / "deep" / "er" / "Calendar.md").write_text("---\ntitle: 'The garden calendar'\n---\nMarch.\n")
    (vault / "Untitled.md").write_text("No front matter here.\n")
    (tmp_path / "Outside.md").write_text("---\ntitle: not to be read\n---\n")
    note = vault / "deep" / "plan.md"
    note.write_text("See [[Seed list]], [[Calendar#March]], [[Untitled]], [[Missing]], [[../Outside]] "
                    "and [[Seed list|my seeds]].\n")
    doc = load_document(note)
    assert doc.text.strip() == ("See Seeds to buy in spring, The garden calendar > March, Untitled, Missing, "
                                "Outside and my seeds.")
    assert doc.links == ["Seed list", "Calendar", "Untitled", "Missing", "../Outside"]


def test_an_mbox_indexed_whole_by_an_older_version_is_split_at_the_next_run(tmp_path, monkeypatch):
    from ragstead.documents import loaders
    from ragstead.plugins import Registry

    box = tmp_path / "kept" / "box.mbox"
    box.parent.mkdir()
    box.write_bytes(FILES["archive.mbox"][0])
    runner = CliRunner()
    with monkeypatch.context() as old:
        # One document for the whole mailbox, as before.
        old.setattr(loaders.LOADERS, "registry", Registry("ragstead.loaders", {
            **loaders.LOADERS.registry.builtins, "mbox": "ragstead.documents.loaders:load_text"}))
        old.setenv("RAGSTEAD_MAX_READER_MB", "0")  # read in this process, where the loader is patched
        runner.invoke(app, ["index", str(box.parent), "--root", str(tmp_path)])
    assert [h["file_path"] for h in hits((tmp_path, ""), "tapirology")] == ["kept/box.mbox"]
    again = runner.invoke(app, ["index", str(box.parent), "--root", str(tmp_path), "--json"])
    assert json.loads(again.output)["removed"] == ["kept/box.mbox"]
    assert [h["file_path"] for h in hits((tmp_path, ""), "tapirology")] == ["kept/box.mbox#msg-n2"]


def test_deleting_a_message_inside_an_mbox_is_refused_and_the_mailbox_kept(tmp_path, fake_embedder):
    import ragstead
    from ragstead.errors import InvalidQueryError

    (tmp_path / "kb").mkdir()
    box = tmp_path / "kb" / "box.mbox"
    box.write_bytes(FILES["archive.mbox"][0])
    with ragstead.open(tmp_path, embedder=fake_embedder, auto_tags=False) as kb:
        kb.index()
        with pytest.raises(InvalidQueryError, match=r"inside kb/box.mbox"):
            kb.delete("kb/box.mbox#msg-n1")
        assert box.exists()
        kb.add("kb/box.mbox#msg-n2")  # a message's path stands for its file: read again, nothing lost
        assert kb.document(path="kb/box.mbox#msg-n1") is not None
