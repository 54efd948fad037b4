"""Mutation fuzzing of every loader through the indexer's own per-file step (`prepare_file`).

Each format starts from a valid small file; a fixed-seed random mutator flips bytes, truncates, inserts random
bytes or format tokens, and (for .docx) also mutates the XML inside the zip so the parsers, not just the zip
reader, see the damage. Whatever comes out, the file is indexed or skipped with a one-line reason: no
exception ever reaches the run. A few hundred files here; thousands under `-m slow`.
"""

from __future__ import annotations

import hashlib
import io
import random
import re
import zipfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import docx
import pytest

from helpers.format_files import (
    make_epub,
    make_mbox,
    make_message,
    make_msg,
    make_ods,
    make_png,
    make_pptx,
    make_xlsx,
)
from helpers.pdf_writer import make_pdf
from ragstead.documents.metadata import DEFAULT_PATH_RULES
from ragstead.indexing.build import FileCandidate, IndexingOptions, Skip, prepare_file
from ragstead.stores.base import DocumentWrite

TOKENS = {
    "pdf": [b"<<", b">>", b"/Type", b"/Pages", b"/Kids [", b"]", b" 0 R", b"999999999", b"-1", b"obj", b"endobj",
            b"stream\n", b"endstream", b"(", b")", b"\\", b"/Length 99999", b"/Filter /FlateDecode", b"xref",
            b"trailer", b"%%EOF", b"/Count 4000000"],
    "xml": [b"<", b">", b"</w:p>", b"<w:p>", b"<w:t>", b"</w:t>", b"<w:tbl><w:tr><w:tc>", b"w:gridSpan w:val=\"999\"",
            b"&", b"&#0;", b"&#xD800;", b"]]>", b"<!DOCTYPE x [<!ENTITY a \"aaaa\">]>", b"r:id=\"rId999\"", b"\"",
            b"xmlns:w=\"urn:nope\""],
    "html": [b"<", b">", b"</main>", b"<main>", b"<script>", b"<!--", b"-->", b"&#0;", b"&#xD800;", b"<svg>",
             b"<div hidden>", b"\xff\xfe", b"<title>"],
    "mail": [b"\nFrom: ", b"\nDate: ", b"Mon, 99 Foo 20245 25:61:00 +9999", b"\nContent-Type: multipart/mixed; "
             b"boundary=\"b\"\n", b"\n--b\n", b"\n--b--\n", b"=?utf-8?b?////?=", b"Content-Transfer-Encoding: "
             b"base64\n", b"\nFrom x\n", b"filename=\"a.pdf\"", b"\x00", b"\xff"],
    # OLE (Outlook .msg): free/end-of-chain/FAT sector marks, sector numbers past the end, sizes, a stream name.
    "ole": [b"\xff\xff\xff\xff", b"\xfe\xff\xff\xff", b"\xfd\xff\xff\xff", b"\xff\xff\xff\x7f", b"\x00\x10\x00\x00",
            b"\x00\x00\x00\x00", b"\x01\x00\x00\x00", "__substg1.0_0037001F".encode("utf-16-le"), b"\xd0\xcf\x11\xe0"],
    "text": [b"\x00", b"\xff", b"\xfe\xff", b"\xef\xbb\xbf", b"\r\n", b"---\n", b"# ", b"tags: [a, b]\n", b"\x1b[31m",
             b"\xed\xa0\x80"],
}


def seed_files() -> dict[str, bytes]:
    document = docx.Document()
    document.core_properties.title = "Seed"
    document.add_heading("Budget review", level=1)
    document.add_paragraph("We cut the travel budget by a tenth and moved it to training.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text, table.cell(1, 0).text = "Owner", "Dana", "Due"
    out = io.BytesIO()
    document.save(out)
    return {
        "docx": out.getvalue(),
        "pdf": make_pdf(["First page about rivers and bridges.", "Second page about mountains."], title="Seed"),
        "html": (b"<html><head><title>Seed</title><script>var x=1</script></head><body><nav>menu</nav>"
                 b"<main><h1>Heading</h1><p>Real content about lighthouses.</p><div hidden>secret</div></main>"
                 b"<footer>foot</footer></body></html>"),
        "md": "---\ntags: [ops, billing]\n---\n# Title\n\n## Section\n\nBody text about caf\u00e9s.\n".encode(),
        "txt": "Plain notes about harbours.\nSecond line with caf\u00e9 cr\u00e8me.\n".encode(),
        "epub": make_epub([("Dawn", "Boats at sea."), ("Dusk", "Lamps on shore.")]),
        "pptx": make_pptx([("Plan", "first slide"), ("Budget", "costs")], notes="notes"),
        "xlsx": make_xlsx({"Inventory": [["Item", "Qty"], ["lamp", 4], ["chair", 2]]}),
        "ods": make_ods({"Stock": [["Item", "Qty"], ["lamp", "2"]]}),
        "csv": "Item,Qty\nlamp,4\ncaf\u00e9,2\n".encode(),
        "eml": make_message("Review", "Meet about the plan.", "Tue, 05 Mar 2024 10:00:00 +0100",
                            {"r.csv": b"a,b\n1,2\n"}).as_bytes(),
        "mbox": make_mbox([make_message("one", "first", "Mon, 01 Jan 2024 09:00:00 +0000"),
                           make_message("two", "second", "Mon, 01 Apr 2024 09:00:00 +0000")]),
        "msg": make_msg("Review", "Meet about the plan.", datetime(2024, 3, 5, 9, tzinfo=UTC),
                        {"r.csv": b"a,b\n1,2\n"}),
        "png": make_png("Harbour notes"),  # read with OCR: each mutant that still decodes costs a Tesseract run
    }


def mutate(data: bytes, rng: random.Random, tokens: list[bytes]) -> bytes:
    """1-8 random edits: flip bits, overwrite, truncate, insert random bytes or a format token, duplicate or
    delete a slice."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not out:
            out += rng.randbytes(rng.randint(1, 64))
            continue
        at = rng.randrange(len(out))
        op = rng.randrange(7)
        if op == 0:
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[at] = rng.randrange(256)
        elif op == 2:
            del out[rng.randrange(len(out)) :]
        elif op == 3:
            out[at:at] = rng.randbytes(rng.randint(1, 32))
        elif op == 4:
            out[at:at] = rng.choice(tokens) * rng.choice((1, 1, 1, 50))
        elif op == 5:
            end = min(len(out), at + rng.randint(1, 200))
            out[at:at] = out[at:end] * rng.randint(1, 20)
        else:
            del out[at : at + rng.randint(1, 64)]
    return bytes(out)


def mutate_docx(data: bytes, rng: random.Random) -> bytes:
    """Either the zip's raw bytes, or one XML member's content (re-zipped, so the XML parsers see it)."""
    if rng.random() < 0.4:
        return mutate(data, rng, TOKENS["xml"])
    out = io.BytesIO()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as src:
            members = [(i.filename, src.read(i.filename)) for i in src.infolist()]
    except Exception:  # a mutant that is no zip any more: mutate its bytes instead
        return mutate(data, rng, TOKENS["xml"])
    victims = [name for name, _ in members if name.endswith((".xml", ".rels"))] or [name for name, _ in members]
    victim = rng.choice(victims) if victims else None
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for name, member in members:
            if name == victim:
                member = mutate(member, rng, TOKENS["xml"])
            if rng.random() < 0.03:
                continue  # a missing part
            dst.writestr(name, member)
    return out.getvalue()


ZIPPED = {"docx", "epub", "pptx", "xlsx", "ods"}  # their XML members are mutated too


def mutants(kind: str, count: int, seed: int) -> list[bytes]:
    rng = random.Random(f"{kind}-{seed}")
    base = seed_files()[kind]
    tokens = {"pdf": TOKENS["pdf"], "html": TOKENS["html"], "eml": TOKENS["mail"],
              "mbox": TOKENS["mail"], "msg": TOKENS["ole"]}.get(kind, TOKENS["text"])
    zipped = kind in ZIPPED
    out = []
    for _ in range(count):
        data = mutate_docx(base, rng) if zipped else mutate(base, rng, tokens)
        if rng.random() < 0.2:  # mutants of mutants reach further
            data = mutate_docx(data, rng) if zipped else mutate(data, rng, tokens)
        out.append(data)
    return out


OPTIONS = IndexingOptions(root=Path("."), path_rules=DEFAULT_PATH_RULES, file_seconds=20.0)


def run_one(path: Path, data: bytes) -> list[DocumentWrite] | Skip:
    path.write_bytes(data)
    candidate = FileCandidate(rel_path=f"kb/{path.name}", root="kb", path=path, size=len(data), mtime=0.0,
                              file_hash=hashlib.sha256(data).hexdigest(), is_new=True)
    return prepare_file(candidate, OPTIONS)


def check(outcome: list[DocumentWrite] | Skip, data: bytes) -> str:
    """The outcome is indexable writes (one per document of the file) or a one-line skip; returns a label for the
    summary."""
    if isinstance(outcome, Skip):
        assert outcome.reason.strip() and "\n" not in outcome.reason, outcome
        assert "Traceback" not in outcome.reason
        return outcome.reason.split(":")[0][:60]
    assert outcome and len({write.document.file_path for write in outcome}) == len(outcome), outcome
    for write in outcome:
        assert isinstance(write, DocumentWrite), write
        assert write.chunks, "a write without chunks would have been skipped"
        for chunk in write.chunks:
            chunk.text.encode("utf-8")  # no lone surrogate
            assert "\x00" not in chunk.text and 0 < len(chunk.text) <= OPTIONS.chunking.max_chunk_chars
        (write.document.title or "").encode("utf-8")
    return "indexed"


def fuzz(tmp_path: Path, kind: str, count: int, seed: int) -> Counter[str]:
    seen: Counter[str] = Counter()
    path = tmp_path / f"mutant.{kind}"
    for number, data in enumerate(mutants(kind, count, seed)):
        try:
            seen[check(run_one(path, data), data)] += 1
        except BaseException:
            (tmp_path / f"failing-{number}.{kind}").write_bytes(data)  # kept for a reproduction
            raise
    return seen


KINDS = ["docx", "pdf", "html", "md", "txt", "epub", "pptx", "xlsx", "ods", "csv", "eml", "mbox", "msg", "png"]


def test_the_seeds_are_valid_and_indexed(tmp_path):
    for kind, data in seed_files().items():
        assert check(run_one(tmp_path / f"seed.{kind}", data), data) == "indexed", kind


@pytest.mark.parametrize("kind", KINDS)
def test_mutated_files_are_indexed_or_skipped_never_raise(tmp_path, kind):
    seen = fuzz(tmp_path, kind, {"docx": 150, "pdf": 150, "png": 50}.get(kind, 80), seed=1)
    print(kind, dict(seen))
    assert sum(seen.values()) >= 50


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_many_mutated_files_are_indexed_or_skipped_never_raise(tmp_path, kind):
    seen = fuzz(tmp_path, kind, 500, seed=2)  # with the test above: 550-650 mutants a kind a run
    print(kind, dict(seen))


def nested(kind: str, rng: random.Random) -> bytes:
    """A seed with a deep run of nesting spliced in at a random place: tree building that grows with the
    square of the depth is what a byte mutator never reaches."""
    data = seed_files()[kind]
    if kind == "html":
        opener = rng.choice([b"<div>", b"<span><div>", b"<b><div></b>", b"<section><article>", b"<table><div>"])
        splice = opener * rng.randrange(50_000, 150_000)
    else:  # docx: deep XML inside document.xml
        splice = b"<w:sdt><w:sdtContent>" * rng.randrange(1_000, 50_000)
    if kind == "docx":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = {info.filename: archive.read(info.filename) for info in archive.infolist()}
        xml = members["word/document.xml"]
        members["word/document.xml"] = xml.replace(b"<w:body>", b"<w:body>" + splice)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, member in members.items():
                archive.writestr(name, member)
        return out.getvalue()
    at = rng.choice([m.end() for m in re.finditer(rb"<(?:main|body|p|h1)>", data)])  # where markup is parsed
    return data[:at] + splice + data[at:]


@pytest.mark.parametrize("kind", ["html", "docx"])
def test_deeply_nested_files_are_refused_with_a_reason(tmp_path, kind):
    rng = random.Random(3)
    for number in range(6):
        data = nested(kind, rng)
        outcome = run_one(tmp_path / f"nested{number}.{kind}", data)
        assert isinstance(outcome, Skip), (kind, number)
        assert "max_html_depth" in outcome.reason or "corrupt or unreadable DOCX" in outcome.reason \
            or "max_zip_ratio" in outcome.reason, outcome.reason


@pytest.mark.parametrize("kind", ["epub", "pptx", "xlsx", "ods", "docx"])
def test_a_zip_based_file_that_is_no_zip_names_its_own_format(tmp_path, kind):
    outcome = run_one(tmp_path / f"broken.{kind}", b"PK\x03\x04 not really a zip" * 4)
    assert isinstance(outcome, Skip) and f"corrupt or unreadable {kind.upper()} (not a zip" in outcome.reason
    assert kind == "docx" or "DOCX" not in outcome.reason
