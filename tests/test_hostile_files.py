"""Hostile files: one bad file never stops an index run, and no file can make a run hang or blow up.

Real files and real processes: broken .docx/.pdf, symlink loops, a non-UTF-8 name, a FIFO, a zip bomb, a
20 MB token, binary without NUL bytes; symlinks across users; deleted files under an interrupted run; and
one test per limit (docs/design.md, "Hostile files").
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from dataclasses import replace
from pathlib import Path

import docx
import pytest

from helpers.cli_runner import run_ragstead
from helpers.library import search
from helpers.pdf_writer import make_pdf
from helpers.project import OFFLINE_ENV, write_files
from ragstead.config import load_settings
from ragstead.documents.ids import fs_path, storable_path
from ragstead.documents.loaders import LoadLimits, load_document
from ragstead.errors import ConfigError, LoadError
from ragstead.filters import QueryFilters
from ragstead.indexing.build import OUTSIDE_SCOPE, index_paths, index_roots
from ragstead.retrieval.search import SearchOptions
from ragstead.stores.sqlite import SqliteStore

MIB = 1 << 20
NOTES = {f"kb/notes/note{i}.md": f"# Note {i}\n\nThis note is about garden topic {i}: tomatoes and bees.\n"
         for i in range(5)}


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


def docx_bytes(*paragraphs: str) -> bytes:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def rezip(data: bytes, replace: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """The zip `data` with some members' bytes replaced."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", method) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, replace.get(info.filename, src.read(info.filename)))
    return out.getvalue()


def write_zip_bomb(path: Path, unpacked: int) -> None:
    """A .docx-named zip whose one member inflates to `unpacked` bytes of zeros, streamed in 1 MiB pieces."""
    piece = bytes(MIB)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("word/document.xml", "w") as out:
        for _ in range(unpacked // MIB):
            out.write(piece)


def binary_without_nul(size: int = 65536, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    return bytes(rng.randrange(1, 256) for _ in range(size))


def make_hostile_folder(root: Path) -> dict[str, str]:
    """Write the 5 notes and the hostile files under `root`; return {shown path: what the reason must say}."""
    write_files(root, NOTES)
    folder = root / "kb" / "hostile"
    folder.mkdir(parents=True)
    good = docx_bytes("A fine paragraph about budgets.")
    pdf = make_pdf(["page one about rivers", "page two about mountains"])
    files = {
        "truncated.docx": good[: len(good) // 2],
        "bad-xml.docx": rezip(good, {"word/document.xml": b"<w:document xmlns:w='x'><w:body><unclosed"}),
        "no-document.docx": rezip(good, {"[Content_Types].xml": b"<Types/>"}),
        "truncated.pdf": pdf[: len(pdf) // 2],
        "bad-xref.pdf": pdf.replace(b"xref", b"xrex").replace(b"/Root 1 0 R", b"/Root 9 0 R"),
        "binary.txt": binary_without_nul(),
        "nested.html": nested_html(200_000),  # 2.2 MB: minutes of lexbor tree building, were it parsed
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    write_zip_bomb(folder / "bomb.docx", 1 << 30)
    with (folder / "token.txt").open("wb") as out:  # one 20 MB "word"
        for _ in range(20):
            out.write(b"z" * MIB)
    os.symlink("loop.md", folder / "loop.md")
    os.symlink("pong.md", folder / "ping.md")
    os.symlink("ping.md", folder / "pong.md")
    os.mkfifo(folder / "pipe.md")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.md"), "wb") as out:
        out.write(b"A note whose name is Latin-1, about espresso.")
    expected = {f"kb/hostile/{name}": "" for name in files}
    expected.update({
        "kb/hostile/bomb.docx": "max_",  # max_zip_ratio or max_unzipped_mb, read from the central directory
        "kb/hostile/token.txt": "max_file_chars",
        "kb/hostile/binary.txt": "binary",
        "kb/hostile/nested.html": "max_html_depth",
        "kb/hostile/loop.md": "symbolic links", "kb/hostile/ping.md": "symbolic links",
        "kb/hostile/pong.md": "symbolic links",
        "kb/hostile/pipe.md": "not a regular file",
    })
    return expected


def nested_html(depth: int, open_tag: str = "<div>", close_tag: str = "</div>") -> bytes:
    return f"<html><body>{open_tag * depth}deep text{close_tag * depth}</body></html>".encode()


def _limit_memory() -> None:
    limit = int(2.5 * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def index_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ragstead index` in a real process under a 2.5 GB address-space limit, so a blow-up fails."""
    return subprocess.run([sys.executable, "-m", "ragstead", "index", "--root", str(root), "--quiet", *args],
                          capture_output=True, text=True, env=OFFLINE_ENV, timeout=240, preexec_fn=_limit_memory)


@pytest.mark.slow
def test_a_folder_of_hostile_files_is_indexed_around_them(tmp_path, record_property):
    expected = make_hostile_folder(tmp_path)
    result = index_cli(tmp_path)
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    record_property("peak_rss_kib", peak_kib)
    print(f"peak RSS of the hostile-folder run (RUSAGE_CHILDREN ru_maxrss): {peak_kib} KiB")
    assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr
    assert result.returncode == 3, result.stdout + result.stderr  # completed, with files that failed
    added = [line[4:] for line in result.stdout.splitlines() if line.startswith("  + ")]
    assert sorted(added) == sorted([*NOTES, "kb/hostile/caf\\xe9.md"])
    skipped = dict(line[len("  skipped "):].split(": ", 1) for line in result.stderr.splitlines()
                   if line.startswith("  skipped "))
    assert set(skipped) == set(expected), result.stderr
    for path, needle in expected.items():
        assert skipped[path] and needle in skipped[path], (path, skipped[path])
    assert "max_zip_ratio" in skipped["kb/hostile/bomb.docx"] or "max_unzipped_mb" in skipped["kb/hostile/bomb.docx"]

    # The next run is not stopped either: the notes are unchanged, the hostile files reported again.
    again = index_cli(tmp_path, "--format", "json")
    assert again.returncode == 3 and "Traceback" not in again.stderr, again.stderr
    report = json.loads(again.stdout)
    assert report["unchanged"] == 6 and report["added"] == []
    assert {s["path"] for s in report["skipped"]} == set(expected)
    assert set(report["failed"]) <= set(expected) and "kb/hostile/bomb.docx" in report["failed"]
    assert all("\n" not in s["reason"] for s in report["skipped"])


def index_here(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`ragstead index` in this process (helpers/cli_runner.py): its exit code and output, where no limit on the
    process is under test."""
    return run_ragstead("index", "--root", str(root), "--quiet", *args, env=OFFLINE_ENV)


def test_exit_codes_unsupported_types_alone_are_success(tmp_path):
    write_files(tmp_path, {"kb/a.md": "alpha notes about apples", "kb/clip.mp4": b"\x00\x00\x00\x18ftypmp42"})
    ok = index_here(tmp_path, "-v")  # -v names each file left out (by default one line sums them up by type)
    assert ok.returncode == 0, ok.stderr
    assert "skipped kb/clip.mp4: unsupported file type '.mp4'" in ok.stderr
    write_files(tmp_path, {"kb/broken.pdf": b"%PDF-1.4 not really"})
    assert index_here(tmp_path).returncode == 3
    assert index_here(tmp_path, "--format", "yaml").returncode == 2


# -- symlinks ------------------------------------------------------------------------------------------------

def lexical(project, words: str, **filters) -> list[dict]:
    out = search(words, project.store, project.embedder, QueryFilters.build(**filters),
                 SearchOptions(mode="lexical"), project.settings.indexing().path_rules)
    return out["results"]


def test_a_symlink_into_another_users_folder_is_not_followed(make_project):
    project = make_project({
        "kb/users/alice/secret.md": "alice private zebra migration plan",
        "kb/users/bob/own.md": "bob notes about walruses",
    })
    os.symlink("../alice/secret.md", project.root / "kb/users/bob/link.md")
    os.symlink("own.md", project.root / "kb/users/bob/alias.md")  # same user: followed
    report = project.index()
    assert {"path": "kb/users/bob/link.md", "reason": OUTSIDE_SCOPE} in report.skipped
    assert "kb/users/bob/link.md" not in report.failed
    assert "kb/users/bob/alias.md" in report.added
    for mode in ("lexical", "vector", "hybrid"):
        out = search("zebra migration plan", project.store, project.embedder, QueryFilters.build(user_slug="bob"),
                     SearchOptions(mode=mode), project.settings.indexing().path_rules)
        assert all("zebra" not in hit.get("text", "") for hit in out["results"]), mode
        assert all(hit["file_path"].startswith("kb/users/bob/") for hit in out["results"])
    assert [hit["file_path"] for hit in lexical(project, "zebra", user_slug="alice")] == ["kb/users/alice/secret.md"]


def test_symlinks_leaving_the_root_are_listed_and_project_mode_allows_more(make_project):
    project = make_project({"kb/a.md": "alpha about apples", "docs/shared.md": "shared text about otters"})
    os.symlink("../docs/shared.md", project.root / "kb/shared.md")
    report = project.index(roots=("kb",))
    assert {"path": "kb/shared.md", "reason": OUTSIDE_SCOPE} in report.skipped

    options = project.settings.with_overrides(follow_symlinks="project").indexing(("kb",))
    report = index_roots(options, project.store, project.embedder, ("kb",))
    assert report.added == ["kb/shared.md"]
    # Back to the default: the link that was indexed under the looser setting loses its chunks.
    report = project.index(roots=("kb",))
    assert report.removed == ["kb/shared.md"] and lexical(project, "otters") == []


def test_a_symlinked_folder_is_listed_not_followed(make_project):
    project = make_project({"kb/users/alice/deep/x.md": "alice text about lynxes", "kb/b.md": "b"})
    os.symlink("users/alice", project.root / "kb/alias-of-alice", target_is_directory=True)
    os.symlink(".", project.root / "kb/users/alice/deep/self", target_is_directory=True)  # a loop
    report = project.index(roots=("kb",))
    reasons = {s["path"]: s["reason"] for s in report.skipped}
    assert "not followed" in reasons["kb/alias-of-alice"] and "not followed" in reasons["kb/users/alice/deep/self"]
    assert sorted(report.added) == ["kb/b.md", "kb/users/alice/deep/x.md"] and report.failed == []


def test_a_fifo_is_never_opened(make_project):
    project = make_project({"kb/a.md": "alpha about apples"})
    os.mkfifo(project.root / "kb/pipe.md")

    def hung(*_):
        raise AssertionError("the indexer opened a FIFO and blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        report = project.index()
        single = index_paths(project.settings.indexing(), project.store, project.embedder, ["kb/pipe.md"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert report.added == ["kb/a.md"] and report.failed == ["kb/pipe.md"]
    assert single.skipped == [{"path": "kb/pipe.md", "reason": "not a regular file"}]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_folder_is_reported_and_the_walk_goes_on(make_project):
    project = make_project({"kb/a.md": "alpha", "kb/locked/b.md": "bravo"})
    (project.root / "kb/locked").chmod(0)
    try:
        report = project.index()
    finally:
        (project.root / "kb/locked").chmod(0o755)
    assert report.added == ["kb/a.md"] and "kb/locked" in report.failed


# -- names that are not UTF-8 ----------------------------------------------------------------------------------

def test_a_name_that_is_not_utf8_is_indexed_under_an_escaped_path(make_project):
    project = make_project({"kb/plain.md": "plain"})
    real = os.path.join(os.fsencode(project.root), b"kb", b"caf\xe9.md")
    with open(real, "wb") as out:
        out.write(b"notes about espresso machines")
    report = project.index()
    shown = "kb/caf\\xe9.md"
    assert sorted(report.added) == [shown, "kb/plain.md"]
    json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")  # no lone surrogate anywhere
    document = project.store.get_document(file_path=shown)
    file_hash = hashlib.sha256(b"notes about espresso machines").hexdigest()
    assert document["doc_id"] == hashlib.sha256(b"kb/caf\xe9.md\x00" + file_hash.encode()).hexdigest()
    assert os.fsencode(fs_path(project.root, shown)) == real  # the stored path leads back to the file
    assert storable_path(os.fsdecode(b"kb/caf\xe9.md")) == shown

    assert project.index().unchanged == 2
    with open(real, "ab") as out:
        out.write(b" and grinders")
    again = index_paths(project.settings.indexing(), project.store, project.embedder, [shown])
    assert again.updated == [shown] and lexical(project, "grinders")[0]["file_path"] == shown
    os.remove(real)
    assert project.index().removed == [shown] and lexical(project, "espresso") == []


# -- deleted files go first ----------------------------------------------------------------------------------

def test_deleted_files_are_removed_in_the_first_transaction_of_an_interrupted_run(tmp_path, real_embedder):
    write_files(tmp_path, {"kb/gone.md": "the quokka protocol for rotating keys"})
    first = index_here(tmp_path)  # the interrupted run below is the real process
    assert first.returncode == 0, first.stderr
    (tmp_path / "kb/gone.md").unlink()
    write_files(tmp_path, {f"kb/bulk/f{i:03d}.md": " ".join(f"file{i} word{j} topic{(i * j) % 89}" for j in range(60))
                           for i in range(400)})
    db = tmp_path / "kb/rag/ragstead.db"
    proc = subprocess.Popen([sys.executable, "-m", "ragstead", "index", "--root", str(tmp_path), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=OFFLINE_ENV)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            with sqlite3.connect(db) as conn:
                left = conn.execute("SELECT COUNT(*) FROM documents WHERE file_path = 'kb/gone.md'").fetchone()[0]
            if not left:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before the deleted file left the index: removals came last"
    finally:
        proc.kill()
        proc.wait()
    with sqlite3.connect(db) as conn:
        indexed = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    assert indexed < 400  # interrupted well before the end
    store = SqliteStore(db)
    try:
        for mode in ("lexical", "vector"):
            out = search("quokka protocol rotating keys", store, real_embedder, QueryFilters(),
                         SearchOptions(mode=mode), load_settings(tmp_path).indexing().path_rules)
            assert all(hit["file_path"] != "kb/gone.md" for hit in out["results"]), mode
    finally:
        store.close()


# -- one test per limit --------------------------------------------------------------------------------------

def test_limit_file_size(tmp_path, make_project):
    path = tmp_path / "big.md"
    path.write_text("word " * 100)
    with pytest.raises(LoadError, match="max_file_mb"):
        load_document(path, LoadLimits(max_file_bytes=100))
    project = make_project({"kb/big.md": "word " * 100, "kb/small.md": "small"})
    options = replace(project.settings.indexing(), max_file_bytes=100)
    report = index_roots(options, project.store, project.embedder, ("kb",))
    assert report.added == ["kb/small.md"] and report.failed == ["kb/big.md"]


def test_limit_unzipped_size(tmp_path):
    path = tmp_path / "d.docx"
    path.write_bytes(docx_bytes("a paragraph"))
    assert load_document(path).text == "a paragraph"
    with pytest.raises(LoadError, match="max_unzipped_mb"):
        load_document(path, LoadLimits(max_unzipped_bytes=10_000))


def test_limit_zip_ratio_from_the_central_directory(tmp_path):
    bomb = tmp_path / "bomb.docx"
    write_zip_bomb(bomb, 4 * MIB)  # 4 MiB of zeros: far under the size cap, ~1000:1
    with pytest.raises(LoadError, match="max_zip_ratio"):
        load_document(bomb)
    with pytest.raises(LoadError) as past_the_check:  # a looser limit lets it through to python-docx
        load_document(bomb, LoadLimits(max_zip_ratio=5000))
    assert "max_zip_ratio" not in str(past_the_check.value)
    bz = tmp_path / "bz.docx"
    bz.write_bytes(rezip(docx_bytes("text"), {}, method=zipfile.ZIP_BZIP2))
    with pytest.raises(LoadError, match="compression method"):
        load_document(bz)


def test_limit_pdf_pages(tmp_path):
    path = tmp_path / "r.pdf"
    path.write_bytes(make_pdf(["one", "two", "three"]))
    assert len(load_document(path).page_starts) == 3
    with pytest.raises(LoadError, match="max_pdf_pages"):
        load_document(path, LoadLimits(max_pdf_pages=2))


@pytest.mark.parametrize("kind", ["md", "pdf", "docx", "html"])
def test_limit_extracted_characters_skips_not_truncates(tmp_path, kind):
    text = "lorem ipsum " * 100
    path = tmp_path / f"f.{kind}"
    data = {"md": text.encode(), "pdf": make_pdf([text, text]), "docx": docx_bytes(text, text),
            "html": f"<html><body><main><p>{text}</p></main></body></html>".encode()}[kind]
    path.write_bytes(data)
    assert len(load_document(path).text) >= 1000
    with pytest.raises(LoadError, match="max_file_chars"):
        load_document(path, LoadLimits(max_chars=1000))


@pytest.mark.parametrize("kind", ["pdf", "docx", "html"])
def test_limit_time_budget(tmp_path, kind):
    path = tmp_path / f"f.{kind}"
    path.write_bytes({"pdf": make_pdf(["one", "two"]), "docx": docx_bytes("one", "two"),
                      "html": b"<p>one</p>"}[kind])
    with pytest.raises(LoadError, match="file_seconds"):
        load_document(path, LoadLimits(seconds=1e-9))  # spent before the first page or paragraph


@pytest.mark.parametrize("pattern", [("<div>", "</div>"), ("<span><div>", ""), ("<b><div></b>", "")])
def test_limit_html_depth_refuses_before_parsing(tmp_path, pattern):
    path = tmp_path / "nested.html"
    path.write_bytes(nested_html(200_000, *pattern))
    with pytest.raises(LoadError, match="max_html_depth"):
        load_document(path, LoadLimits(seconds=5))
    path.write_bytes(nested_html(100, *pattern))
    assert "deep text" in load_document(path).text
    with pytest.raises(LoadError, match="max_html_depth"):
        load_document(path, LoadLimits(max_html_depth=50))
    (tmp_path / "ragstead.toml").write_text("[ragstead]\nmax_html_depth = 50\n")
    assert load_settings(tmp_path).indexing().load_limits.max_html_depth == 50


def test_limit_html_depth_counts_as_a_browser_nests(tmp_path):
    """Void elements, optional end tags, self-closing SVG elements, comments and scripts do not add depth (a
    self-closing `<div/>` does: the parser opens a div, #45)."""
    page = ("<p>para <img src=x><br/><input type=text><li>item<td>cell<svg><path d='M0 0'/><g /></svg>"
            "<!-- <div><div> --><script>'<div>'.repeat(9)</script><div><span>x</div>") * 5000
    path = tmp_path / "sloppy.html"
    path.write_bytes(f"<html><body><main>{page}</main></body></html>".encode())
    assert "para" in load_document(path, LoadLimits(max_html_depth=10)).text


def test_deep_docx_xml_is_refused_by_the_xml_parser(tmp_path):
    """lxml stops at 256 levels (python-docx never asks for XML_PARSE_HUGE): deep Word XML costs nothing."""
    good = docx_bytes("text")
    with zipfile.ZipFile(io.BytesIO(good)) as archive:
        xml = archive.read("word/document.xml")
    deep = xml.replace(b"<w:body>", b"<w:body>" + b"<w:sdt><w:sdtContent>" * 100_000
                       + b"</w:sdtContent></w:sdt>" * 100_000)
    path = tmp_path / "deep.docx"
    path.write_bytes(rezip(good, {"word/document.xml": deep}))
    with pytest.raises(LoadError, match="corrupt or unreadable DOCX"):
        load_document(path, LoadLimits(seconds=5, max_zip_ratio=1e6))


def test_a_nested_html_file_is_given_up_and_the_rest_indexed(tmp_path):
    """The issue's case: 2 MB of nested <div>s beside normal files, file_seconds = 5."""
    write_files(tmp_path, {**NOTES, "ragstead.toml": "[ragstead]\nfile_seconds = 5\n",
                           "kb/page.html": "<html><body><main><p>A page about herons.</p></main></body></html>"})
    (tmp_path / "kb" / "nested.html").write_bytes(nested_html(200_000))
    result = index_cli(tmp_path, "--format", "json")
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)
    assert sorted(report["added"]) == sorted([*NOTES, "kb/page.html"])
    assert report["failed"] == ["kb/nested.html"]
    assert "max_html_depth" in report["skipped"][0]["reason"]


def test_limit_chunk_length_through_the_indexer(make_project):
    project = make_project({"kb/token.txt": "y" * 50_000 + " tail words"})
    report = project.index()
    assert report.added == ["kb/token.txt"]
    rows = project.store._db.execute("SELECT length(text) FROM chunks").fetchall()
    assert len(rows) >= 13 and max(n for (n,) in rows) <= 4000


def test_limits_are_settings(tmp_path):
    (tmp_path / "ragstead.toml").write_text(
        "[ragstead]\nmax_file_mb = 3\nmax_unzipped_mb = 7\nmax_zip_ratio = 20\nmax_pdf_pages = 9\n"
        "max_file_chars = 1234\nmax_chunk_chars = 500\nfile_seconds = 2.5\nfollow_symlinks = \"project\"\n")
    options = load_settings(tmp_path).indexing()
    assert (options.max_file_bytes, options.max_unzipped_bytes, options.max_zip_ratio, options.max_pdf_pages,
            options.max_file_chars, options.file_seconds, options.follow_symlinks,
            options.chunking.max_chunk_chars) == (3 * MIB, 7 * MIB, 20, 9, 1234, 2.5, "project", 500)
    assert options.load_limits == LoadLimits(3 * MIB, 7 * MIB, 20, 9, 1234, 2.5)
    (tmp_path / "ragstead.toml").write_text('[ragstead]\nfollow_symlinks = "everywhere"\n')
    with pytest.raises(ConfigError, match="follow_symlinks"):
        load_settings(tmp_path)
    (tmp_path / "ragstead.toml").write_text("[ragstead]\nfile_seconds = 0\n")
    with pytest.raises(ConfigError, match="file_seconds"):
        load_settings(tmp_path)
