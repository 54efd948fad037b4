"""`kb.ingest`: real pages from a real HTTP server on 127.0.0.1, archived, indexed, deduplicated, refreshed,
and every bad source a one-line reason while the others go on."""

from __future__ import annotations

import json
import re

import pytest

import ragstead
from helpers.web_server import serve
from ragstead.ingest.urls import normalize_url, parse_source


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


@pytest.fixture(scope="module")
def web():
    with serve() as (base, routes):
        yield base, routes


@pytest.fixture
def kb(tmp_path, embedder):
    (tmp_path / "kb").mkdir()
    with ragstead.open(tmp_path, embedder=embedder, owner="ana", auto_tags=False) as kb:
        yield kb


def test_a_page_is_added_then_a_duplicate_without_network_or_embedding(kb, web, embedder):
    base, routes = web
    report = kb.ingest([f"{base}/article.html"], tags=["demo"])
    result = report.results[0]
    assert result.line == "added", result.to_dict()
    assert result.title == "iOS 13 will fix the FaceTime eye contact problem"
    assert re.fullmatch(r"kb/users/ana/ingested/Article/\d{4}-\d{2}/[0-9a-f]{12}-ios-13-will-fix-the-facetime-eye"
                        r"-contact-problem\.md", result.file_path)
    archived = (kb.root / result.file_path).read_text(encoding="utf-8")
    assert archived.startswith("---\ntitle: \"iOS 13 will fix")
    assert 'author: "Jon Porter"' in archived and 'published_at: "2019-07-03"' in archived
    assert "FaceTime Attention Correction" in archived
    assert "Subscribe" not in archived  # boilerplate dropped by the main-text extraction

    hits = kb.search("FaceTime attention correction eye contact", user="ana").hits
    assert hits and hits[0].file_path == result.file_path
    assert hits[0].source_url == f"{base}/article.html"
    assert hits[0].source["type"] == "Article" and hits[0].source["author"] == "Jon Porter"
    assert "demo" in hits[0].tags
    assert hits[0].to_dict()["source_url"] == f"{base}/article.html"

    fetched, embedded = routes.hits.get("/article.html", 0), len(embedder.texts_embedded)
    again = kb.ingest([f"{base}/article.html?utm_source=newsletter#comments"]).results[0]
    assert again.line == "duplicate" and again.doc_id == result.doc_id
    assert routes.hits["/article.html"] == fetched  # no network
    assert len(embedder.texts_embedded) == embedded  # no embedding


def test_refresh_replaces_only_when_the_content_changed(kb, web):
    base, routes = web
    routes.pages["/changing.txt"] = ("text/plain", b"Version one of the changing note about lighthouse keepers.\n")
    assert kb.ingest([f"{base}/changing.txt"]).results[0].status == "added"
    assert kb.ingest([f"{base}/changing.txt"], refresh=True).results[0].status == "unchanged"
    routes.pages["/changing.txt"] = ("text/plain", b"Version two: lighthouse keepers now work in pairs.\n")
    refreshed = kb.ingest([f"{base}/changing.txt"], refresh=True).results[0]
    assert refreshed.status == "updated"
    docs = kb.documents(user="ana")
    assert [d["file_path"] for d in docs].count(refreshed.file_path) == 1
    assert len([d for d in docs if (d.get("source") or {}).get("url") == f"{base}/changing.txt"]) == 1
    assert "pairs" in (kb.root / refreshed.file_path).read_text()
    assert kb.search("lighthouse keepers pairs", user="ana").hits[0].file_path == refreshed.file_path


def test_a_pdf_and_a_text_file_are_archived_as_fetched_with_a_sidecar(kb, web):
    base, _ = web
    results = kb.ingest([f"{base}/paper.pdf", f"{base}/notes.txt"]).results
    assert [r.line for r in results] == ["added", "added"]
    pdf = kb.root / results[0].file_path
    assert "/ingested/PDF/" in results[0].file_path and pdf.read_bytes().startswith(b"%PDF-")
    sidecar = json.loads(pdf.with_name(pdf.name + ".source.json").read_text())
    assert sidecar["url"] == f"{base}/paper.pdf" and sidecar["type"] == "PDF"
    hit = kb.search("adaptive optics atmospheric turbulence", user="ana").hits[0]
    assert hit.file_path == results[0].file_path and hit.page == 2 and hit.source_url == f"{base}/paper.pdf"


def test_bad_sources_each_fail_with_one_line_and_the_others_are_ingested(kb, web, tmp_path):
    base, routes = web
    routes.slow_seconds = 2.5
    kb.settings = kb.settings.with_overrides(fetch_read_seconds=1.0, fetch_max_mb=1)
    sources = [f"{base}/missing", f"{base}/blog.python.org.html", f"{base}/loop-a", f"{base}/slow", f"{base}/huge",
               f"{base}/image.png", f"{base}/app.html", "ftp://example.org/file", "file:///etc/passwd", "http://",
               "http://127.0.0.1:1/refused", str(tmp_path / "nope.pdf")]
    report = kb.ingest(sources)
    lines = {r.source: r.line for r in report.results}
    assert lines[f"{base}/missing"] == "failed: HTTP 404"
    assert lines[f"{base}/blog.python.org.html"] == "added"
    assert lines[f"{base}/loop-a"].startswith("failed: more than 10 redirects")
    assert lines[f"{base}/slow"] == "failed: 127.0.0.1 sent no data for 1 s (read timeout)"
    assert lines[f"{base}/huge"] == "failed: response over the 1 MB cap (fetch_max_mb)"
    assert lines[f"{base}/image.png"].startswith("failed: binary content (image/png)")
    assert lines[f"{base}/app.html"].startswith("failed: no main text found")
    assert lines["ftp://example.org/file"].startswith("failed: unsupported scheme ftp://")
    assert lines["file:///etc/passwd"].startswith("failed: unsupported scheme file://")
    assert lines["http://"].startswith("failed: malformed URL")
    assert lines["http://127.0.0.1:1/refused"] == "failed: connection refused by 127.0.0.1"
    assert lines[str(tmp_path / "nope.pdf")].startswith("failed: no such file")
    assert all("\n" not in line for line in lines.values())
    assert [d["title"] for d in kb.documents(user="ana")] == ["Python 3.6.0 is now available!"]
    assert not list(kb.root.glob("kb/users/ana/ingested/**/.ingest-*"))  # nothing half-written


def test_a_redirect_chain_is_followed_and_keyed_by_what_was_asked(kb, web):
    base, _ = web
    result = kb.ingest([f"{base}/old"]).results[0]
    assert result.status == "added" and result.url == f"{base}/old"
    assert kb.ingest([f"{base}/old/"]).results[0].status == "duplicate"


def test_the_server_guard_refuses_loopback_unless_allowed(kb, web):
    base, routes = web
    before = routes.hits.get("/notes.txt", 0)
    refused = kb.ingest([f"{base}/notes.txt", "http://localhost:9/x", "http://169.254.169.254/latest/meta-data/"],
                        allow_private=False).results
    assert all(r.status == "failed" and r.reason.startswith("refused: ") for r in refused), [r.line for r in refused]
    assert routes.hits.get("/notes.txt", 0) == before  # refused before any request was sent
    kb.settings = kb.settings.with_overrides(allow_private_urls=True)
    assert kb.ingest([f"{base}/notes.txt"], allow_private=False).results[0].status == "added"


@pytest.mark.parametrize(("a", "b"), [
    ("https://Example.com/a/?utm_source=x&id=3#top", "https://example.com/a?id=3"),
    ("https://example.com/a?fbclid=1&gclid=2", "https://example.com/a"),
    ("https://youtu.be/dQw4w9WgXcQ?si=abc", "https://www.youtube.com/watch?v=dQw4w9WgXcQ&feature=share"),
    ("https://x.com/jack/status/20", "https://twitter.com/jack/status/20?s=20"),
    ("http://example.com/page", "https://example.com/page/"),
])
def test_one_document_however_its_url_is_spelled(a, b):
    assert parse_source(a).key == parse_source(b).key


def test_normalize_keeps_what_identifies_a_page():
    assert normalize_url("https://example.com/search?q=a&page=2#r") == "https://example.com/search?q=a&page=2"
    assert parse_source("https://example.com/a").key != parse_source("https://example.com/b").key


def test_the_cli_scenario_of_the_issue(tmp_path, web, cli):
    """`ragstead ingest URL --tags demo` → added; again → duplicate; query finds it with source_url; the
    archive is under ingested/Article/YYYY-MM/; a 404 in the same call fails alone (exit code 3)."""
    from helpers.project import Project

    base, _ = web
    project = Project.__new__(Project)  # only .root is used by the cli fixture
    project.root = tmp_path
    (tmp_path / "kb").mkdir()
    first = cli(project, "ingest", f"{base}/article.html", "--tags", "demo")
    assert first.stdout.splitlines()[0] == (f"added  {base}/article.html  (iOS 13 will fix the FaceTime eye contact "
                                            "problem)")
    again = cli(project, "ingest", f"{base}/article.html", f"{base}/nothing-here.html", expect=3)
    lines = again.stdout.splitlines()
    assert lines[0].startswith(f"duplicate  {base}/article.html")
    assert lines[1] == f"failed: HTTP 404  {base}/nothing-here.html"
    assert lines[2] == "1 duplicate, 1 failed"
    found = json.loads(cli(project, "query", "FaceTime eye contact correction", "--json").stdout)
    top = found["results"][0]
    assert top["source_url"] == f"{base}/article.html" and "demo" in top["tags"]
    assert re.fullmatch(r"kb/users/[^/]+/ingested/Article/\d{4}-\d{2}/.+\.md", top["file_path"])
    assert (tmp_path / top["file_path"]).is_file()
    tags = json.loads(cli(project, "tags", "--json").stdout)["tags"]
    assert {"tag": "demo", "documents": 1} in tags


def test_dedup_sources_keeps_the_best_chunk_of_each_document(tmp_path, embedder):
    long_note = "\n\n".join(f"Section {i}: the harbour crane maintenance log, crane number {i}, greased and "
                            f"inspected. " * 8 for i in range(6))
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "cranes.md").write_text(long_note)
    (tmp_path / "kb" / "other.md").write_text("The harbour crane schedule for the winter season.")
    with ragstead.open(tmp_path, embedder=embedder, chunk_size=40, overlap=5) as kb:
        kb.index()
        plain = kb.search("harbour crane maintenance", k=5).hits
        assert len({h.doc_id for h in plain}) < len(plain)  # several chunks of one note
        deduped = kb.search("harbour crane maintenance", k=5, dedup_sources=True).hits
        assert len({h.doc_id for h in deduped}) == len(deduped) == 2
        assert deduped[0].chunk_id == plain[0].chunk_id  # the best chunk is the one kept
        reranked = kb.search("harbour crane maintenance", k=5, dedup_sources=True, rerank=True).hits
        assert len({h.doc_id for h in reranked}) == len(reranked) == 2


def test_targets_store_once_each_embed_once_and_a_failing_target_undoes_nothing(tmp_path, web, embedder):
    base, _ = web
    main, reading = tmp_path / "main", tmp_path / "reading"
    main.mkdir()
    reading.mkdir()
    (main / "ragstead.toml").write_text('[ragstead]\nowner = "ana"\n\n[targets.reading]\nroot = "../reading"\n\n'
                                        '[targets.broken]\nroot = "../reading"\nstore = "postgresql://x@127.0.0.1:1/db"\n')
    with ragstead.open(main, embedder=embedder, auto_tags=False) as kb:
        embedder.reset()
        result = kb.ingest([f"{base}/github.blog.spiceland.html"], targets=["default", "reading", "broken"]).results[0]
        assert result.status == "added"
        assert result.targets["default"]["status"] == result.targets["reading"]["status"] == "added"
        assert result.targets["broken"]["status"] == "failed" and result.targets["broken"]["reason"]
        chunks = kb.stats()["chunks"]
        assert len(embedder.texts_embedded) == chunks  # embedded once for both targets
    with ragstead.open(reading, embedder=embedder) as other:
        hits = other.search("Erin Spiceland leader spotlight", user="ana").hits
        assert hits and hits[0].source_url == f"{base}/github.blog.spiceland.html"
    with ragstead.open(main, embedder=embedder, auto_tags=False) as kb:
        again = kb.ingest([f"{base}/github.blog.spiceland.html"], targets=["default", "reading"]).results[0]
        assert again.status == "duplicate"
        with pytest.raises(ragstead.ConfigError, match="no target 'nope'"):
            kb.ingest([f"{base}/x"], targets=["nope"])


class InterruptingEmbedder:
    """Ctrl-C, once, while the model embeds an ingested page (the clean-up after it runs uninterrupted)."""

    def __init__(self, inner):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.interrupted = False

    def embed_query(self, text):
        return self.inner.embed_query(text)

    def embed_documents(self, texts):
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        return self.inner.embed_documents(texts)


def test_an_interrupted_or_failed_index_leaves_neither_archive_nor_row(tmp_path, web, embedder):
    base, _ = web
    with ragstead.open(tmp_path, embedder=InterruptingEmbedder(embedder), owner="ana", auto_tags=False) as kb:
        with pytest.raises(KeyboardInterrupt):
            kb.ingest([f"{base}/lemire.me.json.html"])
        assert not [p for p in (tmp_path / "kb" / "users").rglob("*") if p.is_file()]
        assert kb.documents(user="ana") == []
    with ragstead.open(tmp_path, embedder=embedder, owner="ana", auto_tags=False) as kb:
        first = kb.ingest([f"{base}/lemire.me.json.html"]).results[0]
        assert first.status == "added"
        archived = (tmp_path / first.file_path).read_bytes()
    # A refresh whose indexing is interrupted puts the previous archive back, and its row stays.
    _, routes = web
    routes.pages["/lemire.me.json.html"] = ("text/html", routes.pages["/lemire.me.json.html"][1].replace(
        b"simdjson", b"simdjson-next"))
    with ragstead.open(tmp_path, embedder=InterruptingEmbedder(embedder), owner="ana", auto_tags=False) as kb:
        with pytest.raises(KeyboardInterrupt):
            kb.ingest([f"{base}/lemire.me.json.html"], refresh=True)
        assert (tmp_path / first.file_path).read_bytes() == archived
        assert [d["doc_id"] for d in kb.documents(user="ana")] == [first.doc_id]
        assert not list(tmp_path.rglob(".ingest-*"))


def test_ingest_waits_for_the_index_lock_like_index(tmp_path, web, embedder):
    from ragstead.indexing.lock import index_lock

    base, _ = web
    with ragstead.open(tmp_path, embedder=embedder, owner="ana", auto_tags=False) as kb, \
            index_lock(kb.settings.lock_file):
        result = kb.ingest([f"{base}/notes.txt"], wait=0).results[0]
        assert result.status == "failed" and "another `ragstead index` run holds" in result.reason
        assert not [p for p in (tmp_path / "kb").rglob("*.txt")]


def sse(text: str) -> bytes:
    event = json.dumps({"choices": [{"delta": {"content": text}}]})
    return f"data: {event}\n\ndata: [DONE]\n\n".encode()


def test_llm_tags_are_validated_and_a_bad_reply_falls_back_to_the_local_tagger(tmp_path, web, embedder):
    import httpx

    from ragstead.answer.providers import OpenAICompatibleAnswerer

    base, _ = web
    good = {"tags": ["python", "not-existing"], "new_tags": ["Release Notes", "../etc", "x" * 80],
            "reasoning": "a Python release"}
    replies = [sse("```json\n" + json.dumps(good) + "\n```"), sse("Sure! Here are some tags: python, release")]
    seen = []

    def llm(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=replies.pop(0), headers={"content-type": "text/event-stream"})

    provider = OpenAICompatibleAnswerer("http://llm.test/v1", "m", transport=httpx.MockTransport(llm))
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("---\ntags: [python, cooking]\n---\nA note.")
    with ragstead.open(tmp_path, embedder=embedder, providers=[provider], owner="ana") as kb:
        kb.index()
        tagged = kb.ingest([f"{base}/blog.python.org.html"], tags=["reading"]).results[0]
        assert tagged.tagging["method"] == "llm", tagged.tagging
        assert tagged.tagging["reasoning"] == "a Python release"
        assert tagged.tags == ["reading", "python", "release-notes"]  # unknown "existing" and bad new tags dropped
        prompt = json.dumps(seen[0])
        assert "cooking" in prompt and "Python 3.6.0" in prompt  # existing tags and the text went to the model
        local = kb.ingest([f"{base}/theverge.com.ios13.html"]).results[0]
        assert local.tagging, local.to_dict()
        assert local.tagging["method"] == "local" and "bad JSON" in local.tagging["fallback"]
        assert local.status == "added"


def test_one_users_ingest_offers_the_tagger_only_that_users_and_public_tags_and_never_address_tags(tmp_path, web,
                                                                                                  embedder):
    """The API ingests for a key's user: another user's private tags, and the e-mail addresses a message's tags
    carry, must never reach that user's document or the remote tagger's prompt."""
    import httpx

    from ragstead.answer.providers import OpenAICompatibleAnswerer

    base, _ = web
    prompts: list[str] = []

    def llm(request: httpx.Request) -> httpx.Response:
        prompts.append(json.dumps(json.loads(request.content)))
        reply = {"tags": [], "new_tags": [], "reasoning": "none apply"}
        return httpx.Response(200, content=sse(json.dumps(reply)), headers={"content-type": "text/event-stream"})

    provider = OpenAICompatibleAnswerer("http://llm.test/v1", "m", transport=httpx.MockTransport(llm))
    mail = ("From: Dana <dana@example.org>\nTo: Bob <bob@example.org>\nSubject: Lawyer\n"
            "Date: Tue, 05 Mar 2024 10:00:00 +0100\n\nAbout the settlement.\n")
    files = {"kb/users/bob/private.md": "---\ntags: [bobsecrettag]\n---\nBob's note.",
             "kb/users/bob/lawyer.eml": mail,
             "kb/users/alice/mine.md": "---\ntags: [alicetag]\n---\nAlice's note.",
             "docs/public.md": "---\ntags: [publictag]\n---\nA public page."}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    with ragstead.open(tmp_path, embedder=embedder, providers=[provider], roots=("kb", "docs")) as kb:
        kb.index()
        assert "from:dana@example.org" in kb.tags()  # the operator's own view has the message's tags
        kb.ingest([f"{base}/blog.python.org.html"], user="alice")
        alices = prompts.pop()
        assert "alicetag" in alices and "publictag" in alices
        assert "bobsecrettag" not in alices and "example.org" not in alices
        kb.ingest([f"{base}/theverge.com.ios13.html"])  # the operator's own ingest: every topic tag
        operators = prompts.pop()
        assert "bobsecrettag" in operators and "publictag" in operators and "example.org" not in operators
