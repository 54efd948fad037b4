"""`ragstead mcp`: a real server process, driven by the official SDK's own clients (stdio and streamable HTTP).

The scope is fixed at start-up: a client of alice's server cannot read bob's chunks by any tool or resource,
and arguments that try to widen the scope are MCP errors. Unknown tools, wrong types and 10 MB arguments are
MCP errors too, and the server keeps answering. Write tools exist only with --allow-write."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from helpers.project import OFFLINE_ENV, write_files
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase

FILES = {
    "ragstead.toml": '[ragstead]\nroots = ["kb", "docs"]\n',
    "kb/users/alice/plan.md": "# Survey plan\n\nAlice plans the heron survey for April at the north lake.",
    "kb/users/alice/notes.md": "# Notes\n\nAlice's notes: the osprey nest count was nine this spring.",
    "kb/users/bob/plan.md": "# Kestrel plan\n\nBob plans the kestrel survey for May; his budget is 4711 euros.",
    "docs/archive/old.md": "# Old count\n\nArchived: the 2019 heron count at the north lake was twelve.",
    "docs/faq.md": "# FAQ\n\nPublic FAQ: the survey app installs with pip.",
}
READ_TOOLS = ["search", "ask", "list_documents", "get_document", "status", "findability"]
ENV = {k: v for k, v in OFFLINE_ENV.items() if k in ("PATH", "HOME", "PYTHONPATH", "VIRTUAL_ENV")}


def make_project(root: Path, embedder: Any) -> Path:
    write_files(root, FILES)
    with KnowledgeBase(load_settings(root), embedder=embedder) as kb:
        kb.index()
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder) -> Path:
    # The real model: the server process loads the index's own model, so the index must be built with it.
    return make_project(tmp_path_factory.mktemp("mcp"), real_embedder)


@pytest.fixture(scope="module")
def ids(project) -> dict[str, str]:
    """doc_id by path, read from the index directly (the test's knowledge, not the client's)."""
    with KnowledgeBase(load_settings(project)) as kb:
        docs = kb.store.list_documents(kb.scope(include_archive=True), 100) + kb.documents(public_only=True)
    return {d["file_path"]: d["doc_id"] for d in docs}


class Client:
    """A ClientSession on a portal's event loop, called from plain (sync) tests."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal, self.session = portal, session

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.portal.call(lambda: self.session.call_tool(name, arguments))

    def data(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.call(name, arguments)
        assert not result.is_error, result.content
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content

    def refused(self, name: str, arguments: Any) -> MCPError:
        with pytest.raises(MCPError) as caught:
            self.call(name, arguments)
        assert caught.value.error.code == -32602  # invalid params
        return caught.value

    def __getattr__(self, method: str) -> Any:
        return lambda *args: self.portal.call(lambda: getattr(self.session, method)(*args))


@asynccontextmanager
async def stdio_session(root: Path, *args: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "ragstead", "mcp", "--root", str(root), *args],
                                   env=ENV)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def served(root: Path, *args: str) -> Iterator[Client]:
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(stdio_session(root, *args)) as session:
        yield Client(portal, session)


@pytest.fixture(scope="module")
def alice(project) -> Iterator[Client]:
    """One `ragstead mcp --user alice` for the module (stdio)."""
    yield from served(project, "--user", "alice")


def test_the_tools_have_strict_schemas_written_for_a_model(alice):
    tools = alice.list_tools().tools
    assert [tool.name for tool in tools] == READ_TOOLS  # no write tools without --allow-write
    for tool in tools:
        assert len(tool.description) > 40 and tool.annotations.read_only_hint
        assert tool.input_schema["type"] == "object" and tool.input_schema["additionalProperties"] is False
        assert all(prop.get("description") for prop in tool.input_schema["properties"].values())
    search = next(tool for tool in tools if tool.name == "search")
    assert search.input_schema["required"] == ["query"]
    assert "user" not in search.input_schema["properties"]
    assert "gate.confidence 'tentative'" in next(tool for tool in tools if tool.name == "ask").description


def test_search_gets_the_right_document_in_scope(alice):
    found = alice.data("search", {"query": "when is the heron survey planned", "k": 3})
    assert found["results"][0]["file_path"] == "kb/users/alice/plan.md"
    assert "heron survey for April" in found["results"][0]["text"]
    assert {r["file_path"] for r in found["results"]} <= {"kb/users/alice/plan.md", "kb/users/alice/notes.md"}
    assert found["filters"]["user_slug"] == "alice" and found["filters"]["private_only"]


def test_ask_quotes_the_sentence_each_citation_rests_on(alice):
    answer = alice.data("ask", {"question": "When does Alice plan the heron survey?", "extractive": True})
    cited = answer["citations"][0]
    assert cited["quote"] == "Alice plans the heron survey for April at the north lake."
    assert cited["char_end"] - cited["char_start"] == len(cited["quote"])


def test_a_client_cannot_read_another_users_chunks(alice, ids):
    bob = ids["kb/users/bob/plan.md"]
    found = alice.data("search", {"query": "kestrel survey budget euros", "k": 10})
    assert all(r["file_path"].startswith("kb/users/alice/") for r in found["results"])
    answer = alice.data("ask", {"question": "what is the kestrel survey budget", "extractive": True})
    assert "4711" not in json.dumps(answer)
    gate = answer["gate"]  # the confidence reaches an agent too, consistent with the verdict
    assert gate["confidence"] in {"likely", "tentative", "refused"}
    assert (gate["confidence"] == "refused") == (not gate["passed"])
    listed = alice.data("list_documents", {})
    assert sorted(d["file_path"] for d in listed["documents"]) == ["kb/users/alice/notes.md",
                                                                   "kb/users/alice/plan.md"]
    missing = alice.call("get_document", {"doc_id": bob})
    assert missing.is_error and missing.content[0].text == "no such document"  # exactly like a missing one
    assert alice.call("get_document", {"doc_id": "0" * 64}).content[0].text == "no such document"
    with pytest.raises(MCPError, match="no such document"):
        alice.read_resource(f"ragstead://doc/{bob}")
    resources = alice.list_resources().resources
    assert sorted(r.name for r in resources) == ["kb/users/alice/notes.md", "kb/users/alice/plan.md"]
    archived = alice.data("search", {"query": "2019 heron count at the north lake", "k": 10})
    assert all(r["doc_type"] != "archive" for r in archived["results"])  # started without the archive


def test_the_findability_check_is_of_the_servers_scope_alone(alice):
    report = alice.data("findability", {})
    assert report["documents"] == 2 and "bob" not in json.dumps(report) and "kestrel" not in json.dumps(report)
    assert all(item["path"].startswith("kb/users/alice/") for item in report["not_findable"] + report["left_out"])
    assert report["regressions"] == [] and report["previous"] is None  # no last-run state over MCP


@pytest.mark.parametrize("arguments", [
    {"query": "kestrel", "user": "bob"},
    {"query": "kestrel", "user_slug": "bob"},
    {"query": "kestrel", "public_only": True},
    {"query": "kestrel", "scope": "public"},
    {"query": "heron count", "include_archive": True},
], ids=["user", "user_slug", "public_only", "scope", "archive"])
def test_scope_widening_arguments_are_refused(alice, arguments):
    error = alice.refused("search", arguments)
    assert "scope is fixed when the server starts" in error.error.message
    narrowed = alice.data("search", {"query": "heron", "include_archive": False, "doc_types": ["user_kb"]})
    assert all(r["file_path"].startswith("kb/users/alice/") for r in narrowed["results"])


@pytest.mark.parametrize("server_args", [("--user", "alice"), ("--public-only",)], ids=["private", "public-only"])
def test_the_archive_asked_for_by_doc_type_is_refused_without_it(project, server_args):
    """One rule for the archive: `doc_types: ["archive"]` asks for it as `include_archive: true` does."""
    with contextmanager(served)(project, *server_args) as client:
        for tool, arguments in (("search", {"query": "2019 heron count at the north lake", "doc_types": ["archive"]}),
                                ("ask", {"question": "2019 heron count", "doc_types": ["archive"], "extractive": True}),
                                ("list_documents", {"doc_types": ["archive"]})):
            result = client.call(tool, arguments)
            assert result.is_error, (tool, result.structured_content)
            assert "archive is outside this scope" in result.content[0].text
            assert "Archived" not in result.content[0].text
        listed = client.data("list_documents", {})
        assert all(d["doc_type"] != "archive" for d in listed["documents"])


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("drop_index", {}, "unknown tool 'drop_index'"),
    ("search", {"query": 123}, "query: Input should be a valid string"),
    ("search", {"query": "heron", "k": "5"}, "k: Input should be a valid integer"),
    ("search", {"query": "heron", "k": 5000}, "k: Input should be less than or equal to 100"),
    ("search", {"query": "heron", "mode": "magic"}, "mode: Input should be"),
    ("search", {"query": "heron", "doc_types": "user_kb"}, "doc_types: Input should be a valid list"),
    ("search", {}, "query: Field required"),
    ("get_document", {"doc_id": "../../etc/passwd"}, "doc_id: String should match pattern"),
    ("search", {"query": "a" * 10_000_000}, "the limit is 65536"),
    ("ask", {"question": "heron", "notes": ["x"] * 2_000_000}, "the limit is 65536"),
], ids=["unknown", "int-query", "str-k", "big-k", "bad-mode", "str-list", "missing", "path-id", "10MB", "10MB-list"])
def test_bad_calls_are_mcp_errors_and_the_server_keeps_running(alice, name, arguments, message):
    error = alice.refused(name, arguments)
    assert message in error.error.message
    assert alice.data("status", {})["documents"] == 2  # still serving, and counting alice's scope only


def test_a_bad_value_the_library_refuses_is_a_tool_error(alice):
    result = alice.call("search", {"query": "heron", "date_from": "2025-13-45"})
    assert result.is_error and "must be a date as YYYY-MM-DD, got '2025-13-45'" in result.content[0].text


def test_documents_are_resources(alice, ids):
    templates = alice.list_resource_templates().resource_templates
    assert [t.uri_template for t in templates] == ["ragstead://doc/{doc_id}"]
    plan = ids["kb/users/alice/plan.md"]
    text = alice.read_resource(f"ragstead://doc/{plan}").contents[0].text
    assert text.startswith("# Survey plan") and "heron survey for April" in text
    read = alice.data("get_document", {"doc_id": plan})
    assert read["document"]["file_path"] == "kb/users/alice/plan.md" and read["total_chunks"] == 1


def test_write_tools_are_off_unless_allowed(alice, tmp_path, real_embedder):
    for name, arguments in (("remember", {"text": "I prefer tea"}), ("ingest", {"urls": ["https://example.org"]})):
        assert "--allow-write" in alice.refused(name, arguments).error.message
    root = make_project(tmp_path / "w", real_embedder)
    for writer in served(root, "--user", "alice", "--allow-write"):
        assert [t.name for t in writer.list_tools().tools] == [*READ_TOOLS, "ingest", "remember"]
        remembered = writer.data("remember", {"text": "I prefer the CLI over the web UI"})
        assert remembered["written"] and remembered["file"] == "kb/users/alice/memory/USER_MEMORY.md"
        assert "CLI over the web UI" in (root / remembered["file"]).read_text(encoding="utf-8")
        found = writer.data("search", {"query": "prefer the CLI over the web UI"})
        assert found["results"][0]["file_path"] == "kb/users/alice/memory/USER_MEMORY.md"
        local = writer.refused("ingest", {"urls": [str(root / "kb/users/bob/plan.md")]})
        assert "http(s) URLs only" in local.error.message  # never the machine's own files
        private = writer.data("ingest", {"urls": ["http://127.0.0.1:9/internal"]})
        assert private["results"][0]["status"] == "failed"  # no SSRF: loopback is refused


def test_stdout_carries_only_the_protocol(project):
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search",
                                                                      "arguments": {"query": "osprey nest"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
    ]
    process = subprocess.Popen([sys.executable, "-m", "ragstead", "mcp", "--user", "alice", "--root", str(project),
                                "--log-level", "debug"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=OFFLINE_ENV)
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(process.stderr), daemon=True).start()
    process.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    process.stdin.flush()
    lines = [process.stdout.readline() for _ in range(3)]  # the replies; stdin stays open until they are in
    process.stdin.close()  # the client's way to end a stdio session
    assert process.wait(timeout=30) == 0, "".join(errors)
    assert process.stdout.read() == ""  # nothing else was ever written to stdout
    replies = sorted((json.loads(line) for line in lines), key=lambda r: r["id"])  # every line is JSON-RPC
    assert [r["id"] for r in replies] == [1, 2, 3] and all(r["jsonrpc"] == "2.0" for r in replies)
    assert "osprey nest count" in replies[1]["result"]["content"][0]["text"]
    assert replies[2]["error"]["code"] == -32602
    assert "DEBUG" in "".join(errors)  # the logs went to stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_streamable_http(project):
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "ragstead", "mcp", "--user", "alice", "--http", "--port",
                                str(port), "--head-timeout", "2", "--root", str(project)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=OFFLINE_ENV)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not any("serving" in line for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.1)
        assert f"at http://127.0.0.1:{port}/mcp" in "".join(lines)
        # A peer that sends half a request head and stalls is let go (the head timeout, as `serve` has: 2 s here).
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        opened = time.monotonic()

        @asynccontextmanager
        async def session() -> AsyncIterator[ClientSession]:
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                    ClientSession(read, write) as client:
                await client.initialize()
                yield client

        with start_blocking_portal() as portal, portal.wrap_async_context_manager(session()) as client:
            http = Client(portal, client)
            assert [t.name for t in http.list_tools().tools] == READ_TOOLS
            found = http.data("search", {"query": "when is the heron survey planned", "k": 2})
            assert found["results"][0]["file_path"] == "kb/users/alice/plan.md"
            http.refused("search", {"query": "kestrel", "user": "bob"})
        # A page on another origin cannot drive it (DNS rebinding): the Host header must be loopback.
        rebound = httpx.post(f"http://127.0.0.1:{port}/mcp", headers={"Host": "evil.example"}, json={})
        assert rebound.status_code in (403, 421)
        stalled.settimeout(20)
        assert stalled.recv(1024) == b"" and time.monotonic() - opened < 8  # closed, with no response
        stalled.close()
    finally:
        process.terminate()
        process.wait(timeout=20)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def test_http_refuses_a_rebinding_name_and_another_origin_as_serve_does(project):
    from starlette.testclient import TestClient

    from ragstead.mcp_server import McpScope, http_app

    with KnowledgeBase(load_settings(project)) as kb, \
            TestClient(http_app(kb, McpScope("alice"), "127.0.0.1"), base_url="http://127.0.0.1:8765") as client:
        rebound = client.post("/mcp", headers={**MCP_HEADERS, "Host": "attacker.example"}, json=INITIALIZE)
        assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "forbidden_host"
        for origin in ("https://attacker.example", "http://127.0.0.1:9"):  # another site; another local port
            crossed = client.post("/mcp", headers={**MCP_HEADERS, "Origin": origin}, json=INITIALIZE)
            assert crossed.status_code == 403 and crossed.json()["error"]["code"] == "cross_origin", origin
        blind = client.post("/mcp", headers={**MCP_HEADERS, "Sec-Fetch-Site": "cross-site"}, json=INITIALIZE)
        assert blind.status_code == 403  # a cross-site write without an Origin header
        own = client.post("/mcp", headers={**MCP_HEADERS, "Origin": "http://127.0.0.1:8765"}, json=INITIALIZE)
        assert own.status_code == 200 and '"serverInfo"' in own.text  # the server's own origin gets through


def test_http_off_loopback_and_a_missing_index_are_one_error_line(tmp_path, project):
    result = subprocess.run([sys.executable, "-m", "ragstead", "mcp", "--http", "--host", "0.0.0.0", "--root",
                             str(project)], capture_output=True, text=True, env=OFFLINE_ENV, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == ["error: --http serves without authentication, so only on loopback "
                                          "(127.0.0.1, ::1, localhost), not '0.0.0.0'"]
    empty = subprocess.run([sys.executable, "-m", "ragstead", "mcp", "--root", str(tmp_path)], capture_output=True,
                           text=True, env=OFFLINE_ENV, timeout=60)
    assert empty.returncode == 2 and empty.stdout == ""
    assert empty.stderr.startswith("error: no index at ") and "run `ragstead index` first" in empty.stderr


@pytest.mark.parametrize("cursor", ["abc", "\u00b2", "9" * 5000, "-1", "1e9"])
def test_a_bad_resource_cursor_is_a_clean_error(alice, cursor):
    from mcp import types

    with pytest.raises(MCPError) as caught:
        alice.portal.call(lambda: alice.session.list_resources(params=types.PaginatedRequestParams(cursor=cursor)))
    assert caught.value.error.code == -32602
    assert caught.value.error.message.startswith("invalid cursor: pass the nextCursor")
    first = alice.portal.call(lambda: alice.session.list_resources(params=types.PaginatedRequestParams(cursor="0")))
    assert [r.name for r in first.resources] == ["kb/users/alice/notes.md", "kb/users/alice/plan.md"]
