"""The guard's gaps of issue #45 (item 9), closed: each push here passed before. In-process `guard.check` over a
real git repository in a temp dir (test_guard_gaps.py's), nothing pushed anywhere."""

from __future__ import annotations

import base64
import bz2
import io
import lzma
import tarfile
import zipfile
from pathlib import Path

import docx
import numpy as np
import pytest

from test_guard_gaps import KEY, _blocked, _git, repo  # noqa: F401 - the repository fixture

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfi" + "CYzEXAMPLEKEY"  # pragma: allowlist secret (AWS's documented example)
PEM = ("-----BEGIN RSA PRIVATE KEY-----\n"  # pragma: allowlist secret
       "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"  # pragma: allowlist secret
       "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"  # pragma: allowlist secret
       "-----END RSA PRIVATE KEY-----\n")


def _docx(text: str, split: int) -> bytes:
    """A Word file whose text holds `text`, split over two runs at `split` (as Word does on an edit)."""
    document = docx.Document()
    paragraph = document.add_paragraph()
    paragraph.add_run(text[:split])
    paragraph.add_run(text[split:])
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _tar(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


GAPS = [
    ("tls.yaml", f"tls.key: {base64.b64encode(PEM.encode()).decode()}\n".encode()),  # a PEM base64'd on one line
    ("aws.txt", base64.b64encode(f"aws_secret_access_key = {AWS_SECRET}\n".encode()) + b"\n"),
    ("cache.md", b"The cache is redis://:pw%21s3cret@cache.example.com:6379/0\n"),
    ("utf32.txt", f"key = {KEY}\n".encode("utf-32")),
    ("utf32be.txt", f"key = {KEY}\n".encode("utf-32-be")),
    ("logins.md", b"| user | password |\n|---|---|\n| bob | Tr0ub4dor&3x |\n"),
    ("logins.csv", b"site,user,password\nshop.example,bob,Tr0ub4dor&3x\n"),
    ("notes.txt.xz", lzma.compress(f"my key {KEY}\n".encode())),
    ("notes.txt.bz2", bz2.compress(f"my key {KEY}\n".encode())),
    ("report.docx", _docx(f"the key is {KEY} here", 20)),  # the key itself split over two runs
    ("bundle.tar.gz", _tar({"app/.env": b"A=1\n"})),
    ("bundle.tar", _tar({"notes.txt": f"my key {KEY}\n".encode()}, "w")),
    ("zero-width.md", f"token {KEY[:10]}\u200b{KEY[10:]}\n".encode()),
]


@pytest.mark.parametrize(("name", "data"), GAPS, ids=[name for name, _ in GAPS])
def test_each_gap_is_blocked(repo: Path, name: str, data: bytes) -> None:  # noqa: F811 - the fixture
    blocked = _blocked(repo, {name: data})
    assert [f.path for f in blocked] == [name], blocked


def test_what_holds_no_secret_still_passes(repo: Path) -> None:  # noqa: F811 - the fixture
    image = base64.b64encode(bytes(range(256)) * 3).decode()  # base64 of binary: nothing to read in it
    files = {
        "config.md": b"| key | what it sets |\n|---|---|\n| `password_file` | where the password is read from |\n",
        "template.md": b"| name | password |\n|---|---|\n| db | `${DB_PASSWORD}` |\n| cache | *** |\n",
        "code.py": b"from x import (secret, token,\n    Tr0ub4dor3, other)\n",
        "example.env.md": b"API_TOKEN=your-token-here\n",
        "pixel.html": f'<img src="data:image/png;base64,{image}">\n'.encode(),
        "notes.md": "A note with a soft\u00adhyphen and nothing secret.\n".encode(),
        "docs.tar.gz": _tar({"docs/readme.md": b"# Readme\n\nHow to install.\n"}),
        "plain.docx": _docx("Minutes of the Tuesday meeting about the garden.", 10),
        "readme.txt.xz": lzma.compress(b"Nothing secret here.\n"),
    }
    assert _blocked(repo, files) == []


def _zipped(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name, data)
    return out.getvalue()


def _index_bytes(tmp_path: Path, text: str) -> bytes:
    """A ragstead SQLite index holding one private note's chunk, as `ragstead index` writes one."""
    from ragstead.stores import ChunkRecord, DocumentRecord, DocumentWrite, StoreSpec

    store = StoreSpec.parse(f"sqlite:{tmp_path}/scratch/ragstead.db", root=tmp_path, default_db=Path()).open()
    try:
        store.ensure_model("test-model", 4)
        document = DocumentRecord("d" * 64, "kb/users/alice/diary.md", "kb", "h" * 64, len(text), 0.0, "user_kb",
                                  True, "alice", None, "2026-01-01T00:00:00+00:00", "Diary", [], None)
        chunk = ChunkRecord("c" * 64, 0, text, "t" * 64, 0, 3, 0, len(text), None, "Diary", 4)
        store.apply([DocumentWrite(document, [chunk], np.ones((1, 4), dtype=np.float32))], [], [])
    finally:
        store.close()
    return (tmp_path / "scratch" / "ragstead.db").read_bytes()


def test_a_copy_of_the_index_is_blocked_under_any_name(repo: Path, tmp_path_factory) -> None:  # noqa: F811
    # A re-probe of #45: the index (every indexed document's text) passed as backup.db, notes.sqlite or
    # anything.bin, since only kb/rag/ragstead.db is private by its path and a binary's content was not read.
    index = _index_bytes(tmp_path_factory.mktemp("index"), "Alice's private diary: the surgery is on Monday.")
    files = {"backup.db": index, "old/notes.sqlite": index, "anything.bin": index,
             "archive.zip": _zipped("ragstead.db", index)}
    blocked = {f.path: f for f in _blocked(repo, files)}
    assert sorted(blocked) == sorted(files)  # was: none of them
    assert {f.rule for f in blocked.values()} == {"private-index"}
    assert "index" in blocked["backup.db"].reason
    # Over --max-scan-mb only its first bytes are read, as for any binary: enough to know an index; committed, its
    # blob is read the same way.
    from ragstead.services import guard

    assert [f.rule for f in guard.check(repo, paths=[repo / "backup.db"], max_scan_mb=0.001).blocked] == [
        "private-index"]
    _git(repo, "add", "backup.db")
    _git(repo, "commit", "-q", "-m", "a backup")
    assert [f.rule for f in guard.check(repo, rev_range="HEAD~1..HEAD", max_scan_mb=0.001).blocked] == [
        "private-index"]


def test_a_password_split_over_runs_of_a_pretty_printed_office_part_is_blocked(repo: Path) -> None:  # noqa: F811
    # An Office part written with one element a line (as LibreOffice or a formatter leaves it): the blanks between
    # tags are layout, so the runs read as one text, and the part no longer costs detect-secrets a pass per line.
    pieces = ("password = Tr0u", "b4dor&amp;3horsebattery!")
    runs = "".join(f"\n    <w:r>\n      <w:t>{piece}</w:t>\n    </w:r>" for piece in pieces)
    part = f'<?xml version="1.0"?>\n<w:document xmlns:w="urn:w">\n  <w:p>{runs}\n  </w:p>\n</w:document>\n'
    blocked = _blocked(repo, {"minutes.docx": _zipped("word/document.xml", part.encode())})
    assert [finding.path for finding in blocked] == ["minutes.docx"]
