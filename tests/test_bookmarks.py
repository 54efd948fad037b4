"""`ragstead ingest bookmarks.html` (#39): a browser's Netscape bookmark export is ingested as its pages, each
tagged with its folders; the server's clients cannot make it read a local export."""

from __future__ import annotations

import pytest

import ragstead
from helpers.web_server import serve
from ragstead.ingest.bookmarks import read_bookmarks


def export(base: str) -> str:
    return f"""<!DOCTYPE NETSCAPE-Bookmark-file-1>
<META HTTP-EQUIV="Content-Type" CONTENT="text/html; charset=UTF-8">
<TITLE>Bookmarks</TITLE><H1>Bookmarks</H1>
<DL><p>
<DT><H3 ADD_DATE="1">Bookmarks Bar</H3>
<DL><p>
  <DT><H3>Reading List</H3>
  <DL><p>
    <DT><A HREF="{base}/article.html" ADD_DATE="1">FaceTime</A>
    <DT><A HREF="javascript:alert(1)">not a page</A>
  </DL><p>
  <DT><A HREF="{base}/paper.pdf">Paper</A>
</DL><p>
<DT><A HREF="{base}/article.html">the same page again</A>
</DL><p>"""


@pytest.fixture
def web():
    with serve() as (base, routes):
        yield base, routes


def test_folders_become_tags_and_only_web_links_count(tmp_path):
    path = tmp_path / "bookmarks.html"
    path.write_text(export("http://127.0.0.1:9"))
    assert read_bookmarks(path) == [("http://127.0.0.1:9/article.html", ["bookmarks-bar", "reading-list"]),
                                    ("http://127.0.0.1:9/paper.pdf", ["bookmarks-bar"])]


def test_a_bookmark_export_ingests_its_pages_with_folder_tags(tmp_path, web, fake_embedder):
    base, _ = web
    (tmp_path / "kb").mkdir()
    (tmp_path / "bookmarks.html").write_text(export(base))
    with ragstead.open(tmp_path, embedder=fake_embedder, owner="ana", auto_tags=False) as kb:
        report = kb.ingest([str(tmp_path / "bookmarks.html")], tags=["saved"])
        lines = {r.url: r for r in report.results}
        assert {r.line for r in report.results} == {"added"} and len(report.results) == 2
        assert set(lines[f"{base}/article.html"].tags) == {"saved", "bookmarks-bar", "reading-list"}
        assert set(lines[f"{base}/paper.pdf"].tags) == {"saved", "bookmarks-bar"}
        hits = kb.search("FaceTime eye contact", user="ana", tags=["reading-list"]).hits
        assert hits and hits[0].source_url == f"{base}/article.html"
