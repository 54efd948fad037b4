"""`ragstead ingest bookmarks.html` (#39): a browser's Netscape bookmark export is ingested as its pages, each
tagged with its folders; the server's clients cannot make it read a local export."""

from __future__ import annotations

import json

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


def rss(links: list[str]) -> bytes:
    items = "".join(f"<item><title>Entry {n}</title><link>{link}</link></item>" for n, link in enumerate(links))
    return (f'<?xml version="1.0"?><rss version="2.0"><channel><title>News</title><link>http://x/</link>'
            f"{items}</channel></rss>").encode()


def test_a_feed_ingests_its_entries_and_later_only_the_new_ones(tmp_path, web, fake_embedder):
    base, routes = web
    routes.pages["/feed.xml"] = ("application/rss+xml", rss([f"{base}/article.html", "javascript:void(0)"]))
    (tmp_path / "kb").mkdir()
    with ragstead.open(tmp_path, embedder=fake_embedder, owner="ana", auto_tags=False) as kb:
        first = kb.ingest([f"{base}/feed.xml"])
        assert [(r.url, r.line) for r in first.results] == [(f"{base}/article.html", "added")]
        routes.pages["/feed.xml"] = ("application/rss+xml", rss([f"{base}/paper.pdf", f"{base}/article.html"]))
        second = kb.ingest([f"{base}/feed.xml"])
        assert [(r.url, r.line) for r in second.results] == [(f"{base}/paper.pdf", "added"),
                                                             (f"{base}/article.html", "duplicate")]


def test_freshness_urls_picks_up_a_feeds_new_entries_and_apply_ingests_them(tmp_path, web, fake_embedder):
    base, routes = web
    routes.pages["/feed.xml"] = ("application/rss+xml", rss([f"{base}/article.html"]))
    (tmp_path / "kb").mkdir()
    with ragstead.open(tmp_path, embedder=fake_embedder, owner="ana", auto_tags=False) as kb:
        kb.ingest([f"{base}/feed.xml"], tags=["news"], user="ana")
        [doc] = [d for d in kb.documents(user="ana") if (d.get("source") or {}).get("url")]
        assert doc["source"]["feed"] == f"{base}/feed.xml"
        assert kb.freshness(urls=True).outcome == "fresh"

        routes.pages["/feed.xml"] = ("application/rss+xml", rss([f"{base}/paper.pdf", f"{base}/article.html"]))
        stale = kb.freshness(urls=True)
        assert stale.outcome == "planned" and [e.to_dict() for e in stale.entries] == [
            {"url": f"{base}/paper.pdf", "status": "new", "old_checksum": None, "new_checksum": None, "chunks": 0,
             "doc_id": None}]

        applied = kb.freshness(urls=True, apply=True)
        assert [(u["url"], u["status"]) for u in applied.applied["urls"]] == [(f"{base}/paper.pdf", "added")]
        paper = kb.document(path=applied.applied["urls"][0]["file_path"])
        assert paper["source"]["feed"] == f"{base}/feed.xml" and "news" in paper["tags"]
        assert paper["user_slug"] == "ana"
        assert kb.freshness(urls=True).outcome == "fresh"

        del routes.pages["/feed.xml"]
        gone = kb.freshness(urls=True)
        assert {"url": f"{base}/feed.xml", "reason": "HTTP 404"} in gone.skipped


def test_a_feed_looking_url_that_is_a_page_is_ingested_as_the_page(tmp_path, web, fake_embedder):
    base, routes = web
    routes.pages["/news/feed"] = routes.pages["/article.html"]
    (tmp_path / "kb").mkdir()
    with ragstead.open(tmp_path, embedder=fake_embedder, owner="ana", auto_tags=False) as kb:
        report = kb.ingest([f"{base}/news/feed"])
        assert [(r.url, r.line) for r in report.results] == [(f"{base}/news/feed", "added")]


def test_chromes_json_and_firefoxs_places_are_read_too(tmp_path):
    import json
    import sqlite3

    chrome = tmp_path / "Bookmarks"
    chrome.write_text(json.dumps({"checksum": "x", "version": 1, "roots": {
        "bookmark_bar": {"type": "folder", "name": "Bookmarks bar", "children": [
            {"type": "url", "name": "A", "url": "https://a.example/"},
            {"type": "folder", "name": "Recipes", "children": [
                {"type": "url", "name": "Soup", "url": "https://b.example/soup"}]}]},
        "other": {"type": "folder", "name": "Other bookmarks", "children": []}}}))
    assert read_bookmarks(chrome) == [("https://a.example/", ["bookmarks-bar"]),
                                      ("https://b.example/soup", ["bookmarks-bar", "recipes"])]

    places = tmp_path / "places.sqlite"
    with sqlite3.connect(places) as db:
        db.executescript("""
            CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT);
            CREATE TABLE moz_bookmarks (id INTEGER PRIMARY KEY, type INTEGER, fk INTEGER, parent INTEGER,
                                        title TEXT, guid TEXT);
            INSERT INTO moz_places VALUES (1, 'https://c.example/'), (2, 'https://d.example/tagged');
            INSERT INTO moz_bookmarks VALUES (1, 2, NULL, 0, '', 'root________'),
                (2, 2, NULL, 1, 'toolbar', 'toolbar_____'), (3, 2, NULL, 2, 'Travel', 'f1'),
                (4, 2, NULL, 1, 'tags', 'tags________'), (5, 2, NULL, 4, 'later', 't1'),
                (6, 1, 1, 3, 'C', 'b1'), (7, 1, 2, 5, NULL, 'b2');
        """)
    from ragstead.ingest.bookmarks import bookmarks_file

    assert bookmarks_file(str(places), None) == places and bookmarks_file(str(chrome), None) == chrome
    assert read_bookmarks(places) == [("https://c.example/", ["toolbar", "travel"])]


def test_a_bookmarks_file_nested_thousands_deep_fails_alone(tmp_path, web, fake_embedder):
    """#45: Chrome's `Bookmarks` nested 2,000 deep raised RecursionError out of ingest, with a traceback, and the
    other sources were lost."""
    base, _ = web
    (tmp_path / "kb").mkdir()
    deep = '{"type": "folder", "name": "f", "children": [' * 3000 + \
        f'{{"type": "url", "url": "{base}/paper.pdf"}}' + "]}" * 3000
    (tmp_path / "Bookmarks").write_text(f'{{"roots": {{"bookmark_bar": {deep}}}}}')
    wide = {"type": "folder", "name": "top", "children": [
        {"type": "folder", "name": f"f{i}", "children": [{"type": "url", "url": f"{base}/article.html?{i}"}]}
        for i in range(2)]}
    (tmp_path / "Wide").mkdir()
    (tmp_path / "Wide" / "Bookmarks").write_text(json.dumps({"roots": {"bookmark_bar": wide}}))
    assert [tags for _, tags in read_bookmarks(tmp_path / "Wide" / "Bookmarks")] == [["top", "f0"], ["top", "f1"]]
    with ragstead.open(tmp_path, embedder=fake_embedder, owner="ana", auto_tags=False) as kb:
        report = kb.ingest([str(tmp_path / "Bookmarks"), f"{base}/article.html"])
    assert [r.status for r in report.results] == ["failed", "added"]  # the page is ingested all the same
    assert report.results[0].reason
