"""The egress log (issue #35, item 4): every request that leaves the machine is a line in a private
kb/rag/egress.jsonl (host, purpose, bytes, documents, payload hash; never the text), `ragstead egress` shows
it, and a default index/query/ask leaves nothing. A Python audit hook on `socket.getaddrinfo` and
`socket.connect` proves no real non-loopback socket is opened: the network is an httpx.MockTransport whose
every request counts as a connection attempt, and each attempt must be in the log."""

from __future__ import annotations

import json
import socket
import stat
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from ragstead.cli import app
from ragstead.config import load_settings
from ragstead.core.egress import is_local_host
from ragstead.knowledge_base import KnowledgeBase

_EVENTS: list[tuple[str, object]] = []
_WATCHING = [False]


def _audit(event: str, args: tuple) -> None:  # type: ignore[type-arg]
    if _WATCHING[0] and event in ("socket.getaddrinfo", "socket.connect"):
        _EVENTS.append((event, args[0] if event == "socket.getaddrinfo" else args[1]))


sys.addaudithook(_audit)  # cannot be removed; records only while a test watches


def _outside() -> list[tuple[str, object]]:
    def host(target: object) -> str:
        return str(target[0] if isinstance(target, tuple) else target)
    return [e for e in _EVENTS if not (isinstance(e[1], str | bytes | tuple) and is_local_host(host(e[1])))
            and host(e[1]) not in ("None", "")]


class Network:
    """The outside world as an httpx.MockTransport: an OpenAI-compatible endpoint and a web page."""

    def __init__(self) -> None:
        self.attempts: list[str] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.attempts.append(request.url.host)
        if request.url.path.endswith("/chat/completions"):
            event = {"choices": [{"index": 0, "delta": {"content": "It is sunny [1]."}}]}
            body = f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode()
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        return httpx.Response(200, headers={"content-type": "text/plain"}, content=b"A page about the weather.")


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "weather.md").write_text("# Weather\nThe weather in Lisbon is sunny in June.\n",
                                                encoding="utf-8")
    return tmp_path


def test_every_request_that_leaves_is_logged_and_nothing_else_leaves(project: Path, embedder,  # type: ignore[no-untyped-def]
                                                                    monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000000000")
    network = Network()
    _EVENTS.clear()
    _WATCHING[0] = True
    try:
        settings = load_settings(project).with_overrides(auto_tags=False)
        with KnowledgeBase(settings, embedder=embedder, transport=network.transport) as kb:
            kb.index()
            answer = kb.ask("what is the weather in Lisbon", llm=["openai"], min_similarity=-1)
            kb.ingest(["https://news.example.org/weather"], transport=network.transport, allow_private=True)
            log = kb.egress_log()
            log_file = kb.egress_file
    finally:
        _WATCHING[0] = False
    assert answer.provider.startswith("openai-compatible")
    assert _outside() == []  # nothing really left: every request went to the mock network
    assert network.attempts and set(network.attempts) <= {r["host"] for r in log}
    assert len(log) == len(network.attempts)
    prompt = next(r for r in log if r["purpose"].startswith("llm prompt"))
    assert prompt["host"] == "api.openai.com" and prompt["bytes_sent"] > 0 and prompt["documents"] == ["kb/weather.md"]
    assert len(prompt["payload_sha256"]) == 64
    assert any(r["purpose"] == "ingest fetch" and r["host"] == "news.example.org" for r in log)
    assert "Lisbon" not in log_file.read_text(encoding="utf-8")  # hashes and counts, never the text
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    shown = CliRunner().invoke(app, ["egress", "--root", str(project), "--json"])
    assert json.loads(shown.output) == log
    table = CliRunner().invoke(app, ["egress", "--root", str(project)])
    assert "api.openai.com" in table.output and "news.example.org" in table.output


def test_freshness_urls_checks_are_logged(project: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    """`freshness --urls` re-fetches every ingested page: each request is a line, as ingest's own are (#45: they
    were not)."""
    network = Network()
    settings = load_settings(project).with_overrides(auto_tags=False)
    with KnowledgeBase(settings, embedder=embedder, transport=network.transport) as kb:
        kb.index()
        kb.ingest(["https://news.example.org/weather"], transport=network.transport, allow_private=True)
        fetched = len(network.attempts)
        kb.freshness(urls=True, transport=network.transport)
        log = kb.egress_log()
    checks = [r for r in log if r["purpose"] == "freshness check"]
    assert len(network.attempts) > fetched and len(checks) == len(network.attempts) - fetched
    assert {r["host"] for r in checks} == {"news.example.org"}


def test_a_default_index_query_and_ask_make_no_outside_request(project: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000000000")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")
    runner = CliRunner()
    _EVENTS.clear()
    _WATCHING[0] = True
    try:
        for command in (["index"], ["query", "weather in Lisbon"], ["ask", "what is the weather in Lisbon"]):
            result = runner.invoke(app, [*command, "--root", str(project)])
            assert result.exit_code == 0, result.output
    finally:
        _WATCHING[0] = False
    assert _outside() == []
    assert "nothing has left" in runner.invoke(app, ["egress", "--root", str(project)]).output


def test_serve_and_the_mcp_server_make_no_outside_request(project: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The doors, in-process as `serve` and `mcp` build them (the real model, the default answerer), with provider
    keys in the environment: a health call, a query and an ask over HTTP; search and ask as MCP tools."""
    import anyio
    from fastapi.testclient import TestClient
    from mcp import Client

    from ragstead.api import ApiConfig, create_app
    from ragstead.mcp_server import McpScope, build_server

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000000000")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")

    async def mcp_calls(kb: KnowledgeBase) -> list[bool]:
        async with Client(build_server(kb, McpScope(kb.settings.owner_slug))) as client:
            found = await client.call_tool("search", {"query": "weather in Lisbon"})
            answer = await client.call_tool("ask", {"question": "what is the weather in Lisbon"})
        return [found.is_error, answer.is_error]

    _EVENTS.clear()
    _WATCHING[0] = True
    try:
        socket.getaddrinfo("localhost", None)  # a loopback lookup the hook must see
        assert CliRunner().invoke(app, ["index", "--root", str(project)]).exit_code == 0
        with KnowledgeBase(load_settings(project)) as kb:
            api = create_app(kb, ApiConfig(auth=False, as_user=kb.settings.owner_slug))
            with TestClient(api, base_url="http://127.0.0.1:8000") as client:
                statuses = [client.get("/healthz").status_code,
                            client.post("/v1/query", json={"query": "weather in Lisbon"}).status_code,
                            client.post("/v1/ask", json={"query": "what is the weather in Lisbon"}).status_code]
            tool_errors = anyio.run(mcp_calls, kb)
    finally:
        _WATCHING[0] = False
    assert statuses == [200, 200, 200] and tool_errors == [False, False]
    assert ("socket.getaddrinfo", "localhost") in _EVENTS  # the hook was listening (its own loopback probe)
    assert _outside() == []
