"""Parse budgets that hold during the parse, not after it (#45.3): files are read in a worker process under an
address-space and a CPU-time limit and killed when the file's time is up; the HTML depth scan keeps the parser's
stack (`<div/>`, `<div></x>` and `<!-->` no longer slip past it); an XLSX's declared size and its missing rows
cost nothing; one huge message of a mailbox is read for its headers only."""

from __future__ import annotations

import email
import io
import re
import zipfile
from email import policy
from pathlib import Path

import pytest
from openpyxl import Workbook
from selectolax.lexbor import LexborHTMLParser

from helpers.project import write_files
from ragstead.config import load_settings
from ragstead.documents import sandbox
from ragstead.documents.formats import mail, sheets
from ragstead.documents.loaders import Budget, LoadLimits, check_html_depth, load_document
from ragstead.errors import LoadError
from ragstead.indexing.build import index_roots

N = 2000  # past the default max_html_depth (512) in every hostile pattern


def _tree_depth(html: str) -> int:
    """How deep lexbor really nests `html` (what the scan must never count shallower than)."""
    best, todo = 0, [(LexborHTMLParser(html).root, 0)]
    while todo:
        node, depth = todo.pop()
        best = max(best, depth)
        child = node.child if node is not None else None
        while child is not None:
            todo.append((child, depth + 1))
            child = child.next
    return best


HOSTILE = {  # each nests N deep in the parser; the old scan counted each at most 2 deep
    "self-closing div": "<div/>" * N,
    "end tag of nothing open": "<div></x>" * N,
    "empty comment": "<!-->" + "<div>" * N,
    "dashed empty comment": "<!--->" + "<div>" * N,
    "comment ended by --!>": "<!-- a --!>" + "<div>" * N,
    "end tag with attributes ends a script": "<script></script x>" + "<div>" * N,
    "style inside svg is no raw text": "<svg><style>" + "<div>" * N,
    "end tag stopped by a special element": "<x><div></x>" * N,
    "form end tag takes the form only": "<form><div></form>" * N,
    "unquoted slash is an attribute value": "<svg>" + "<g a=/>" * N,
    "breakout then unknown elements": "<svg><div/>" + "<path/>" * N,
}
HONEST = {  # sloppy or foreign but shallow in the parser: never refused
    "self-closing SVG": "<svg>" + '<path d="M0 0"/><g />' * N + "</svg>",
    "MathML": "<math>" + "<mi/>" * N + "</math>",
    "unclosed list items and paragraphs": "<ul>" + "<li><p>x" * N + "</ul>",
    "inline closed by its block": "<div><span>x</div>" * N,
    "headings closed by another": "<h1><div></h2>" * N,
    "table cells": "<table>" + "<tr><td>x" * N + "</table>",
    "markup inside a script": "<script>" + "<div>" * N + "</script>",
    "markup inside comments": "<!-- <div> -->" * N,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_depth_scan_refuses_what_the_parser_nests_deep(name):
    html = HOSTILE[name]
    assert _tree_depth(html) > N // 2  # the pattern really nests in lexbor
    with pytest.raises(LoadError, match="max_html_depth"):
        check_html_depth(html, Budget(LoadLimits(), "page.html"))


@pytest.mark.parametrize("name", sorted(HONEST))
def test_the_depth_scan_lets_shallow_sloppy_markup_through(name):
    html = HONEST[name]
    assert _tree_depth(html) < 10
    check_html_depth(html, Budget(LoadLimits(), "page.html"))


def _xlsx(edit=None) -> bytes:  # type: ignore[no-untyped-def]
    book = Workbook()
    sheet = book.active
    sheet.append(["Item", "Qty"])
    sheet.append(["lamp", 4])
    sheet.cell(row=1_048_576, column=1, value="last")  # a million rows, all but three missing
    buffer = io.BytesIO()
    book.save(buffer)
    if edit is None:
        return buffer.getvalue()
    out = io.BytesIO()
    with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info.filename, edit(data) if info.filename.endswith("sheet1.xml") else data)
    return out.getvalue()


@pytest.mark.parametrize("declared", [False, True], ids=["missing-rows", "declared-A1:XFD1048576"])
def test_an_xlsx_costs_its_cells_not_its_declared_size(declared, tmp_path, monkeypatch):
    edit = (lambda xml: re.sub(rb'<dimension ref="[^"]*"', b'<dimension ref="A1:XFD1048576"', xml)) if declared \
        else None
    path = tmp_path / "sheet.xlsx"
    path.write_bytes(_xlsx(edit))
    cells = []
    real = sheets._cell
    monkeypatch.setattr(sheets, "_cell", lambda value: cells.append(1) or real(value))
    text = load_document(path, LoadLimits(max_reader_bytes=0)).text
    assert "Item: lamp; Qty: 4" in text and "Item: last" in text
    assert len(cells) < 100  # was a billion: every missing row padded to 1,000 cells


def test_a_message_over_the_bound_is_read_for_its_headers_only(tmp_path, monkeypatch):
    monkeypatch.setattr(mail, "MAX_MESSAGE_BYTES", 64 << 10)
    parsed: list[int] = []
    real = email.parser.BytesParser.parsebytes

    def parsebytes(self, data, headersonly=False):  # type: ignore[no-untyped-def]
        if not headersonly:
            parsed.append(len(data))
        return real(self, data, headersonly)

    monkeypatch.setattr(email.parser.BytesParser, "parsebytes", parsebytes)
    small = "From: ana@example.org\nSubject: lunch\nMessage-ID: <a@x>\n\nSoup at noon.\n"
    huge = ("From: bob@example.org\nSubject: the scans\nMessage-ID: <b@x>\nContent-Type: text/plain\n\n"
            + "zebrafish " * 20_000 + "\n")
    path = tmp_path / "box.mbox"
    path.write_text(f"From ana\n{small}From bob\n{huge}", encoding="utf-8")
    loaded = load_document(path, LoadLimits(max_reader_bytes=0))
    texts = {key: document.text for key, document in loaded.inside}
    assert any("Soup at noon" in text for text in texts.values())
    big = next(text for text in texts.values() if "the scans" in text)
    assert "zebrafish" not in big and "only its headers were read" in big
    assert max(parsed) <= 64 << 10  # the parser never read the huge message's body
    assert email.message_from_string(small, policy=policy.default)["Subject"] == "lunch"


# --- the worker ------------------------------------------------------------------------------------------------


def test_the_worker_reads_every_format_as_the_process_itself_does(tmp_path):
    write_files(tmp_path, {
        "a.md": "---\ntags: [x]\n---\n# Title\n\nSome *markdown* with [[a link]].\n",
        "b.html": "<html><head><title>Page</title></head><body><main><p>Body text</p></main></body></html>",
        "c.mbox": "From a\nFrom: a@example.org\nSubject: one\n\nFirst.\nFrom b\nFrom: b@example.org\nSubject: two\n\n"
                  "Second.\n",
        "d.csv": "name,qty\nlamp,4\n",
    })
    (tmp_path / "e.xlsx").write_bytes(_xlsx())
    for name in ("a.md", "b.html", "c.mbox", "d.csv", "e.xlsx"):
        assert sandbox.load_isolated(tmp_path / name) == load_document(tmp_path / name), name


def test_the_worker_runs_under_the_memory_and_cpu_limits(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\nnote\n")
    sandbox.load_isolated(tmp_path / "a.md", LoadLimits(max_reader_bytes=1500 << 20, seconds=30))
    workers = list(sandbox._POOL.idle)
    assert workers
    limits = Path(f"/proc/{workers[-1].process.pid}/limits").read_text()
    assert re.search(r"Max address space\s+1572864000\s", limits)
    cpu = int(re.search(r"Max cpu time\s+(\d+)\s", limits).group(1))  # type: ignore[union-attr]
    assert 30 < cpu < 3600  # what it used, plus the file's seconds: a budget, not unlimited


def test_a_file_that_needs_more_memory_is_skipped_and_the_rest_indexed(tmp_path, fake_embedder):
    write_files(tmp_path, {"kb/notes/a.md": "# A\n\nThe heron note.\n",
                           "ragstead.toml": "[ragstead]\nmax_reader_mb = 256\nmax_file_mb = 600\n"})
    with open(tmp_path / "kb/notes/zeros.txt", "wb") as sparse:
        sparse.truncate(500 << 20)  # 500 MiB read into memory, and no disk used
    settings = load_settings(tmp_path)
    store = settings.store_spec().open()
    try:
        report = index_roots(settings.indexing(("kb",)), store, fake_embedder, ("kb",))
    finally:
        store.close()
    reasons = {skip["path"]: skip["reason"] for skip in report.skipped}
    assert report.added == ["kb/notes/a.md"], reasons
    assert "max_reader_mb" in reasons["kb/notes/zeros.txt"]  # in this process: a 500 MiB read, then refused


def test_a_parse_past_the_files_time_is_killed_and_the_rest_indexed(tmp_path, fake_embedder):
    """200,000 nested <div>s with the depth scan turned off: lexbor's one C call would take minutes."""
    write_files(tmp_path, {"kb/notes/a.md": "# A\n\nThe heron note.\n",
                           "kb/notes/deep.html": "<div>" * 200_000 + "deep",
                           "ragstead.toml": "[ragstead]\nfile_seconds = 2\nmax_html_depth = 1000000000\n"})
    settings = load_settings(tmp_path)
    store = settings.store_spec().open()
    try:
        report = index_roots(settings.indexing(("kb",)), store, fake_embedder, ("kb",))
    finally:
        store.close()
    assert report.added == ["kb/notes/a.md"]
    reasons = {skip["path"]: skip["reason"] for skip in report.skipped}
    assert "the reader was stopped" in reasons["kb/notes/deep.html"]
    assert all(worker.process.poll() is None for worker in sandbox._POOL.idle)  # the killed one is not kept
