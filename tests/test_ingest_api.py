"""POST /v1/ingest: scoped to the key's user, SSRF-guarded, URLs only, and never a door into another user's
documents or the server's own files."""

from __future__ import annotations

import socket

import httpx
import pytest
from fastapi.testclient import TestClient

from helpers.web_server import serve
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.knowledge_base import KnowledgeBase

ARTICLE_HTML = (b"<html><head><title>Otter census 2026</title></head><body><article><h1>Otter census 2026</h1>"
                + b"<p>The river otter census counted 412 otters along the upper valley this spring. " * 6
                + b"</p></article></body></html>")


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


@pytest.fixture
def api(make_project):
    project = make_project({"kb/users/bob/secret.md": "Bob's otter notes: the den is behind the old mill."})
    project.index()
    keys = KeyFile(project.settings.db_file.parent / "api_keys.json")
    tokens = {"alice": keys.add("alice")[0], "bob": keys.add("bob")[0], "alice-read": keys.add("alice", ["query"])[0]}

    def client(transport=None, **settings) -> TestClient:
        kb = KnowledgeBase(project.settings.with_overrides(auto_tags=False, **settings), embedder=project.embedder,
                           providers=[ExtractiveAnswerer()], transport=transport)
        return TestClient(create_app(kb, ApiConfig()))

    return project, tokens, client


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def public_dns(monkeypatch) -> None:
    """news.example resolves to a public address (no DNS here): the guard's resolver, answered locally."""
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "news.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", 443))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)


def test_ingest_goes_to_the_callers_tree_and_only_they_find_it(api, monkeypatch):
    _, tokens, client = api
    public_dns(monkeypatch)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=ARTICLE_HTML,
                                                                   headers={"content-type": "text/html"}))
    with client(transport) as c:
        response = c.post("/v1/ingest", json={"sources": ["https://news.example/otters"], "tags": ["wildlife"]},
                          headers=auth(tokens["alice"]))
        assert response.status_code == 200, response.text
        result = response.json()["results"][0]
        assert result["status"] == "added", result
        assert result["file_path"].startswith("kb/users/alice/ingested/Article/")
        found = c.post("/v1/query", json={"query": "river otter census upper valley"}, headers=auth(tokens["alice"]))
        assert found.json()["results"][0]["source_url"] == "https://news.example/otters"
        theirs = c.post("/v1/query", json={"query": "river otter census upper valley"}, headers=auth(tokens["bob"]))
        assert all("alice" not in r["file_path"] for r in theirs.json()["results"])
        mine = c.post("/v1/query", json={"query": "otter den old mill"}, headers=auth(tokens["alice"]))
        assert all("bob" not in r["file_path"] for r in mine.json()["results"])
        # Bob ingesting the same URL gets his own copy, not a "duplicate" pointing into Alice's tree.
        bobs = c.post("/v1/ingest", json={"sources": ["https://news.example/otters"]}, headers=auth(tokens["bob"]))
        assert bobs.json()["results"][0]["status"] == "added"
        assert "alice" not in str(bobs.json())


def test_the_ssrf_guard_refuses_private_addresses_before_any_request(api, web_base):
    _, tokens, client = api
    with client() as c:
        body = {"sources": [f"{web_base}/notes.txt", "http://localhost/admin", "http://169.254.169.254/latest/",
                            "http://[::1]/", "http://10.0.0.7/", "http://0x7f000001/"]}
        results = c.post("/v1/ingest", json=body, headers=auth(tokens["alice"])).json()["results"]
        assert [r["status"] for r in results] == ["failed"] * 6
        assert all(r["reason"].startswith(("refused: ", "DNS lookup failed", "malformed")) for r in results), results
    with client(allow_private_urls=True) as c:
        ok = c.post("/v1/ingest", json={"sources": [f"{web_base}/notes.txt"]}, headers=auth(tokens["alice"]))
        assert ok.json()["results"][0]["status"] == "added"


def test_a_redirect_to_a_private_address_is_refused(api, monkeypatch):
    _, tokens, client = api
    public_dns(monkeypatch)
    transport = httpx.MockTransport(lambda request: httpx.Response(302, headers={"location": "http://127.0.0.1/x"}))
    with client(transport) as c:
        result = c.post("/v1/ingest", json={"sources": ["https://news.example/r"]},
                        headers=auth(tokens["alice"])).json()["results"][0]
        assert result["status"] == "failed" and result["reason"].startswith("refused: 127.0.0.1")


@pytest.mark.parametrize("source", ["/etc/passwd", "kb/users/bob/secret.md", "file:///etc/passwd",
                                    "sqlite:///kb/rag/ragstead.db", "../bob/secret.md"])
def test_the_server_never_reads_its_own_files_or_databases(api, source):
    _, tokens, client = api
    with client(allow_private_urls=True) as c:
        result = c.post("/v1/ingest", json={"sources": [source]}, headers=auth(tokens["alice"])).json()["results"][0]
        assert result["status"] == "failed" and "bob" not in str(result.get("title"))
        assert result["reason"] == "only http(s) URLs can be ingested through the server"


def test_ingest_needs_the_upload_scope_and_a_valid_body(api):
    _, tokens, client = api
    with client() as c:
        assert c.post("/v1/ingest", json={"sources": ["https://a.example"]},
                      headers=auth(tokens["alice-read"])).status_code == 403
        assert c.post("/v1/ingest", json={"sources": []}, headers=auth(tokens["alice"])).status_code == 422
        assert c.post("/v1/ingest", json={"sources": ["x"] * 21}, headers=auth(tokens["alice"])).status_code == 422
        assert c.post("/v1/ingest", json={"sources": ["https://a.example"], "user": "bob"},
                      headers=auth(tokens["alice"])).status_code == 422


@pytest.fixture(scope="module")
def web_base():
    with serve() as (base, _):
        yield base


def test_odd_host_spellings_fail_one_line_each_and_the_batch_is_ingested(api, monkeypatch):
    _, tokens, client = api
    public_dns(monkeypatch)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=ARTICLE_HTML,
                                                                   headers={"content-type": "text/html"}))
    odd = ["http://0177.0.0.1/", "http://127.000.000.001/", "http://xn--zz.com/", "http://\u2603.com/"]
    with client(transport) as c:
        response = c.post("/v1/ingest", json={"sources": [*odd, "https://news.example/otters"]},
                          headers=auth(tokens["alice"]))
    assert response.status_code == 200, response.text  # was 500, and the whole batch lost
    results = response.json()["results"]
    assert all(r["status"] == "failed" and r["reason"].startswith("malformed URL") for r in results[:-1]), results
    assert results[-1]["status"] == "added"
