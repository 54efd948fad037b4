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
    image = tmp_path / "pic.png"
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
