import io
import os
import random
import zipfile
import zlib

import docx
import pytest

from helpers.pdf_writer import make_pdf
from ragstead.documents.loaders import load_document
from ragstead.errors import LoadError, UnsupportedFileError


def test_pdf_text_per_page_with_page_lookup(tmp_path):
    path = tmp_path / "r.pdf"
    path.write_bytes(make_pdf(["first page about apples", "second page about pears"], title="Fruit"))
    doc = load_document(path)
    assert doc.title == "Fruit"
    assert len(doc.page_starts) == 2
    assert doc.page_starts[0] <= doc.text.index("apples") < doc.page_starts[1] <= doc.text.index("pears")


@pytest.mark.parametrize(
    "payload",
    [b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog", b"not a pdf at all", b"%PDF-1.7\n" + bytes(range(256)) * 20, b""],
)
def test_corrupt_pdf_is_a_load_error(tmp_path, payload):
    path = tmp_path / "broken.pdf"
    path.write_bytes(payload)
    with pytest.raises(LoadError):
        load_document(path)


def test_html_main_text_without_boilerplate_or_hidden_text(tmp_path):
    path = tmp_path / "p.html"
    path.write_text(
        "<html><head><title>T</title><script>var x='SCRIPTTEXT'</script></head><body>"
        "<nav>NAVTEXT</nav><main><p>Real content here.</p><div hidden>HIDDENTEXT</div></main>"
        "<footer>FOOTERTEXT</footer></body></html>"
    )
    doc = load_document(path)
    assert doc.title == "T"
    assert "Real content here." in doc.text
    for noise in ("SCRIPTTEXT", "NAVTEXT", "HIDDENTEXT", "FOOTERTEXT"):
        assert noise not in doc.text


def test_docx_paragraphs_and_tables(tmp_path):
    document = docx.Document()
    document.add_paragraph("Paragraph about budgets.")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Owner", "Dana"
    path = tmp_path / "d.docx"
    document.save(path)
    text = load_document(path).text
    assert "Paragraph about budgets." in text and "Owner | Dana" in text


def test_corrupt_docx(tmp_path):
    path = tmp_path / "bad.docx"
    path.write_bytes(b"PK\x03\x04 definitely not a zip")
    with pytest.raises(LoadError):
        load_document(path)


def test_binary_text_file_and_unsupported_type(tmp_path):
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(LoadError, match="binary"):
        load_document(binary)
    image = tmp_path / "clip.mp4"  # .png is read with OCR now (#39): a type no loader reads
    image.write_bytes(b"\x89PNG")
    with pytest.raises(UnsupportedFileError):
        load_document(image)


def test_markdown_front_matter_tags_and_cp1252_text(tmp_path):
    md = tmp_path / "n.md"
    md.write_text("---\ntags: [Ops, 'billing']\n---\n# Title\nbody\n")
    doc = load_document(md)
    assert doc.tags == ["ops", "billing"] and doc.title == "Title" and not doc.text.startswith("---")
    legacy = tmp_path / "old.txt"
    legacy.write_bytes("caf\xe9 cr\xe8me".encode("cp1252"))
    assert load_document(legacy).text == "café crème"


def _load_bytes(tmp_path, data: bytes, name: str = "f.txt"):
    path = tmp_path / name
    path.write_bytes(data)
    return load_document(path)


@pytest.mark.parametrize(
    "data",
    [bytes(b or 1 for b in random.Random(5).randbytes(20_000)),  # random bytes, no NUL
     bytes(random.Random(6).randrange(1, 32) for _ in range(5_000)),  # control characters, valid ASCII
     zlib.compress(b"compressed text " * 5000).replace(b"\x00", b"\x01")],
    ids=["random", "controls", "zlib"],
)
def test_binary_without_nul_bytes_is_refused(tmp_path, data):
    with pytest.raises(LoadError, match="binary"):
        _load_bytes(tmp_path, data)


@pytest.mark.parametrize(
    ("data", "expected"),
    [("Сегодня утром мы обсудили бюджет на следующий год. Павел предложил сократить расходы на поездки. " * 3,
      "cp1251"),
     ("Zażółć gęślą jaźń, to jest tekst po polsku. " * 5, "cp1250"),
     ("hello “quoted” world — a dash", "cp1252"),
     ("utf-16 text with a BOM", "utf-16"),
     ("\x1b[32mINFO\x1b[0m service started on port 8080 after the migration ran\n" * 20, "utf-8")],
)
def test_text_in_other_encodings_is_decoded(tmp_path, data, expected):
    assert _load_bytes(tmp_path, data.encode(expected)).text.lstrip("\ufeff") == data


def test_utf8_with_a_stray_byte_keeps_its_accents(tmp_path):
    text = "Le café crème était très bon, à côté de la fenêtre. " * 20
    raw = text.encode()
    loaded = _load_bytes(tmp_path, raw[:300] + b"\xff" + raw[300:])
    assert loaded.text.count("\ufffd") == 1 and "café crème" in loaded.text


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.md")
    with pytest.raises(LoadError, match="not a regular file"):
        load_document(tmp_path / "pipe.md")


@pytest.mark.parametrize("kind", ["pdf", "docx"])
def test_any_parser_exception_becomes_a_load_error(tmp_path, kind):
    # Inputs the fuzzer found: pypdf and python-docx raise far more than their own error types on these.
    pdf = make_pdf(["text"])
    payloads = {
        "pdf": [pdf.replace(b"/Type /Pages", b"/Type /Page"), pdf.replace(b"/Count 1", b"/Count (x)"),
                pdf.replace(b"/Kids [4 0 R]", b"/Kids [1 0 R]")],
        "docx": [b"PK\x05\x06" + b"\x00" * 18, _docx_with({"word/document.xml": b"<a/>"}),
                 _docx_with({"word/_rels/document.xml.rels": b"<Relationships><Relationship/></Relationships>"})],
    }[kind]
    for number, payload in enumerate(payloads):
        path = tmp_path / f"case{number}.{kind}"
        path.write_bytes(payload)
        try:
            load_document(path)
        except LoadError as exc:
            assert "\n" not in str(exc)


def _docx_with(replace: dict[str, bytes]) -> bytes:
    document = docx.Document()
    document.add_paragraph("text")
    src, out = io.BytesIO(), io.BytesIO()
    document.save(src)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, replace.get(info.filename, zin.read(info.filename)))
    return out.getvalue()


def test_ingest_sidecars_are_read_with_their_file_and_never_listed_as_skipped(make_project):
    import json

    sidecar = {"url": "https://example.org/paper.pdf", "type": "PDF", "title": "The paper", "tags": ["papers"]}
    project = make_project({"kb/users/alice/archive/paper.pdf": make_pdf(["Rivers and bridges of the north."]),
                            "kb/users/alice/archive/paper.pdf.source.json": json.dumps(sidecar),
                            "kb/users/alice/stray.source.json": "{}"})  # no file beside it: an ordinary .json
    report = project.index()
    assert report.added == ["kb/users/alice/archive/paper.pdf"]
    assert [s["path"] for s in report.skipped] == ["kb/users/alice/stray.source.json"]
    again = project.index()
    assert [s["path"] for s in again.skipped] == ["kb/users/alice/stray.source.json"] and again.unchanged == 1
