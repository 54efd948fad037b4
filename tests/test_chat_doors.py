"""Conversations through every door (issue 48): `ragstead chat` (piped questions, `--json` as JSON Lines, `/new`),
`POST /v1/chat` (kept conversations, a client's own history, streaming, GET and DELETE), MCP's `ask` with the
previous turns; and in each, a turn never sees another user's documents, nor another scope than its
conversation's. The real terminal is tests/test_chat_terminal.py; the web page is tests/test_web_page.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client, MCPError

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase
from ragstead.mcp_server import McpScope, build_server

FILES = {
    "ragstead.toml": '[ragstead]\nroots = ["kb", "docs"]\nowner = "alice"\n',
    "kb/users/alice/lease.md": "# Lease – flat on Elm Street\n\nThe lease ends on 31 March 2027.\n\nThe deposit is "
                               "2,400 euros, paid into a deposit account.\n\nThe landlord is Mrs. Novak; call her "
                               "about repairs.\n",
    "kb/users/alice/reading.md": "# Reading list\n\nNext up: The Overstory by Richard Powers, recommended by Lena.\n",
    "kb/users/bob/lease.md": "# Lease – Bob's flat on Elm Street\n\nBob's deposit is 9,999 euros and his lease ends "
                             "in 2030.\n",
    "docs/faq.md": "# FAQ\n\nThe public FAQ: the survey app's lease of the server ends in 2031.\n",
}
BOB = ("kb/users/bob", "9,999")


@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder) -> Path:
    root = tmp_path_factory.mktemp("doors")
    write_files(root, FILES)
    with KnowledgeBase(load_settings(root), embedder=real_embedder) as kb:
        kb.index()
    return root


def no_bob(text: str) -> bool:
    return not any(mark in text for mark in BOB)


# -- the terminal loop, in a pipe -----------------------------------------------------------------------------------

def chat(project: Path, lines: str, *args: str) -> Any:
    return run_ragstead("chat", "--root", str(project), "--extractive", *args, input=lines, env=OFFLINE_ENV)


def test_piped_questions_are_answered_turn_by_turn_with_citations(project):
    result = chat(project, "When does the lease end?\n\nAnd how much is the deposit?\n", "--user", "alice")
    assert result.returncode == 0, result.stderr
    turns = result.stdout.split("\n\n")
    assert turns[0].startswith("> When does the lease end?\n") and "[1] kb/users/alice/lease.md" in turns[0]
    assert turns[1].startswith("> And how much is the deposit?\n")
    assert "asked as: How much is the deposit? (Lease – flat on Elm Street)" in turns[1]
    assert "answered by extractive" in turns[1] and "2,400" in turns[1] and no_bob(result.stdout)


def test_json_prints_one_object_per_turn_and_new_starts_over(project):
    result = chat(project, "When does the lease end?\nAnd the deposit?\n/new\nAnd the deposit?\n", "--json",
                  "--user", "alice")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]  # JSON Lines: every line one object
    assert [line["turn"] for line in lines] == [1, 2, 1]
    assert lines[1]["rewrite"]["method"] == "carried" and lines[1]["answer"]["question"] == lines[1]["rewritten"]
    assert lines[2]["rewrite"] == {"method": "none", "carried": [], "reason": "the first question"}
    assert all(c["source"].startswith("kb/users/alice/") for line in lines for c in line["answer"]["citations"])


def test_the_loop_shares_asks_flags_and_their_errors(project):
    bad = chat(project, "When does the lease end?\n", "--k", "0")
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.startswith("error: --k must be")
    remember = chat(project, "remember that I prefer tea\n", "--remember")
    assert remember.returncode == 2 and remember.stderr == "error: --remember needs --user in a team project: " \
                                                           "memory belongs to one person\n"
    long = chat(project, "x" * 5000 + "\nWhen does the lease end?\n", "--user", "alice")
    assert long.returncode == 2 and "error: the question is 5000 characters" in long.stderr
    assert "> When does the lease end?" in long.stdout  # one turn's error; the conversation went on
    public = chat(project, "When does the lease end?\nAnd the deposit?\n", "--public-only", "--json")
    assert public.returncode == 0 and no_bob(public.stdout) and "kb/users/alice" not in public.stdout


class LoopbackLLM:
    """An OpenAI-compatible server on 127.0.0.1 (a local answerer: no consent needed, nothing leaves the machine):
    the condensing prompt gets REWRITTEN, any other prompt ANSWER, streamed in pieces."""

    REWRITTEN = "How much is the deposit of the flat on Elm Street?"
    ANSWER = ("The deposit is ", "2,400 euros ", "[1].")

    def __init__(self) -> None:
        import http.server
        import threading

        prompts = self.prompts = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompts.append(body["messages"])
                condensing = "standalone question" in body["messages"][0]["content"]
                pieces = (LoopbackLLM.REWRITTEN,) if condensing else LoopbackLLM.ANSWER
                events = "".join(f"data: {json.dumps({'choices': [{'delta': {'content': p}}]})}\n\n" for p in pieces)
                data = (events + "data: [DONE]\n\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.env = {**OFFLINE_ENV, "RAGSTEAD_OPENAI_BASE_URL": f"http://127.0.0.1:{self.server.server_port}/v1",
                    "RAGSTEAD_OPENAI_MODEL": "local-model"}


def test_with_an_llm_the_condensing_prompts_output_is_what_json_shows_and_the_answer_streams(project, monkeypatch):
    from ragstead.cli import _output as cli_output

    llm = LoopbackLLM()
    try:
        lines = "When does the lease end?\nAnd the deposit?\n"
        result = run_ragstead("chat", "--root", str(project), "--user", "alice", "--json", input=lines, env=llm.env)
        assert result.returncode == 0, result.stderr
        first, second = (json.loads(line) for line in result.stdout.splitlines())
        assert first["rewrite"]["method"] == "none" and first["answer"]["provider"] == "openai-compatible:local-model"
        assert second["rewritten"] == LoopbackLLM.REWRITTEN == second["answer"]["question"]
        assert second["rewrite"] == {"method": "llm", "carried": [], "reason": "a condensing prompt rewrote it",
                                     "model": "openai-compatible:local-model"}
        condensing = llm.prompts[1][-1]["content"]  # the first turn's answer, the condensing prompt, the answer
        assert "When does the lease end?" in condensing and "And the deposit?" in condensing
        assert all("When does the lease end?" not in m["content"] for m in llm.prompts[2])  # no history to answer
        monkeypatch.setattr(cli_output, "on_terminal", lambda: True)
        shown = run_ragstead("chat", "--root", str(project), "--user", "alice", input=lines, env=llm.env)
        assert "The deposit is 2,400 euros [1]." in shown.stdout  # streamed piece by piece, wrapped as it came
        assert f"asked as: {LoopbackLLM.REWRITTEN}" in shown.stdout
    finally:
        llm.server.shutdown()


def test_remember_that_in_the_loop_is_the_memory_rule_not_a_question(project, tmp_path):
    write_files(tmp_path, FILES)
    assert run_ragstead("index", "-q", "--root", str(tmp_path), env=OFFLINE_ENV).returncode == 0
    result = chat(tmp_path, "remember that I prefer tea over coffee\n", "--user", "alice", "--remember")
    assert result.returncode == 0, result.stderr
    assert "Remembered in kb/users/alice/memory/USER_MEMORY.md: " in result.stdout
    assert "tea over coffee" in (tmp_path / "kb/users/alice/memory/USER_MEMORY.md").read_text(encoding="utf-8")


# -- POST /v1/chat --------------------------------------------------------------------------------------------------

@pytest.fixture
def api(project, real_embedder):
    keys = KeyFile(load_settings(project).db_file.parent / "api_keys.json")
    tokens = {"alice": keys.add("alice")[0], "bob": keys.add("bob")[0],
              "alice-read": keys.add("alice", ["query"])[0], "alice-ask": keys.add("alice", ["query", "ask"])[0]}
    kb = KnowledgeBase(load_settings(project), embedder=real_embedder, providers=[ExtractiveAnswerer()])
    with TestClient(create_app(kb, ApiConfig())) as client:
        yield client, {name: {"Authorization": f"Bearer {token}"} for name, token in tokens.items()}
    for key in keys.list():
        keys.revoke(key.key_id)


def test_a_kept_conversation_over_http(api, project):
    client, keys = api
    first = client.post("/v1/chat", json={"query": "When does the lease end?"}, headers=keys["alice"]).json()
    conversation = first["conversation_id"]
    assert conversation.startswith("c_") and first["turns"] == 1 and first["turn"]["rewrite"]["method"] == "none"
    second = client.post("/v1/chat", json={"query": "And the deposit?", "conversation_id": conversation},
                         headers=keys["alice"])
    assert second.status_code == 200, second.text
    turn = second.json()["turn"]
    assert turn["rewritten"] == "When does the deposit? (Lease – flat on Elm Street)"  # the last question's frame
    assert [c["source"] for c in turn["answer"]["citations"]] == ["kb/users/alice/lease.md"]
    kept = client.get(f"/v1/chat/{conversation}", headers=keys["alice"]).json()
    assert [t["question"] for t in kept["turns"]] == ["When does the lease end?", "And the deposit?"]
    assert kept["scope"]["user"] == "alice" and kept["owner"] == "alice"
    path = project / "kb/rag/conversations/alice" / f"{conversation}.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert client.delete(f"/v1/chat/{conversation}", headers=keys["alice"]).json() == {"deleted": conversation}
    assert not path.exists() and client.get(f"/v1/chat/{conversation}", headers=keys["alice"]).status_code == 404


def test_another_users_conversation_reads_like_a_missing_one(api):
    client, keys = api
    conversation = client.post("/v1/chat", json={"query": "When does the lease end?"},
                               headers=keys["alice"]).json()["conversation_id"]
    for call in (lambda h: client.get(f"/v1/chat/{conversation}", headers=h),
                 lambda h: client.post("/v1/chat", json={"query": "And the deposit?", "conversation_id": conversation,
                                                          "stream": True}, headers=h),
                 lambda h: client.delete(f"/v1/chat/{conversation}", headers=h)):
        refused = call(keys["bob"])
        assert refused.status_code == 404 and refused.json()["error"] == {"code": "not_found",
                                                                          "message": "no such conversation"}
    missing = client.get("/v1/chat/c_00000000000000000000", headers=keys["alice"]).json()
    assert missing["error"]["message"] == "no such conversation"
    assert client.get("/v1/chat/../keys", headers=keys["alice"]).status_code == 404
    assert client.post("/v1/chat", json={"query": "x", "conversation_id": "../../x"},
                       headers=keys["alice"]).status_code == 422
    assert client.post("/v1/chat", json={"query": "x"}, headers=keys["alice-read"]).status_code == 403


def test_every_turn_stays_in_the_keys_scope_and_the_conversations(api):
    client, keys = api
    conversation = None
    for question in ("When does the lease end?", "And the deposit?", "What about Bob's deposit?"):
        body = {"query": question, **({"conversation_id": conversation} if conversation else {})}
        answered = client.post("/v1/chat", json=body, headers=keys["alice"]).json()
        conversation = answered["conversation_id"]
        assert no_bob(json.dumps(answered))
    public = client.post("/v1/chat", json={"query": "And the deposit?", "conversation_id": conversation,
                                           "scope": "public"}, headers=keys["alice"])
    assert public.status_code == 400 and "keeps the scope of its first question" in public.json()["error"]["message"]
    fresh = client.post("/v1/chat", json={"query": "When does the lease end?", "scope": "public"},
                        headers=keys["alice"]).json()
    assert fresh["turn"]["answer"]["citations"] == [] or all(
        c["source"].startswith("docs/") for c in fresh["turn"]["answer"]["citations"])
    history = [{"question": "How much is Bob's deposit?", "answer": "Bob's deposit is 9,999 euros."}]
    told = client.post("/v1/chat", json={"query": "And his lease?", "history": history}, headers=keys["alice"]).json()
    assert told["conversation_id"] is None and told["turn"]["rewrite"]["method"] == "carried"
    assert all(c["source"].startswith("kb/users/alice/") for c in told["turn"]["answer"]["citations"])


def test_a_clients_own_history_keeps_nothing_on_the_server(api, project):
    client, keys = api
    before = set((project / "kb/rag/conversations").rglob("*.json"))
    first = client.post("/v1/chat", json={"query": "When does the lease end?", "history": []},
                        headers=keys["alice"]).json()
    history = [first["turn"]]  # the turn as the route returned it, sent back whole
    second = client.post("/v1/chat", json={"query": "And the deposit?", "history": history},
                         headers=keys["alice"]).json()
    assert second["turn"]["rewritten"] == "When does the deposit? (Lease – flat on Elm Street)"
    assert set((project / "kb/rag/conversations").rglob("*.json")) == before
    both = client.post("/v1/chat", json={"query": "x", "history": [], "conversation_id": "c_00000000000000000000"},
                       headers=keys["alice"])
    assert both.status_code == 422
    bad = client.post("/v1/chat", json={"query": "x", "history": [{"answer": "no question"}]}, headers=keys["alice"])
    assert bad.status_code == 400 and "history" in bad.json()["error"]["message"]


def test_a_streamed_turn_ends_with_the_chat_object(api):
    client, keys = api
    with client.stream("POST", "/v1/chat", json={"query": "When does the lease end?", "stream": True},
                       headers=keys["alice"]) as response:
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert [line["type"] for line in lines] == ["text", "chat"]
    assert lines[-1]["chat"]["conversation_id"].startswith("c_") and lines[-1]["chat"]["turn"]["answer"]["citations"]


def test_remember_over_http_needs_a_key_that_may_write(api, project):
    client, keys = api
    refused = client.post("/v1/chat", json={"query": "remember that I prefer tea", "remember": True},
                          headers=keys["alice-ask"])
    assert refused.status_code == 403
    dry = client.post("/v1/chat", json={"query": "remember that I prefer tea"}, headers=keys["alice"]).json()
    assert dry["turn"]["answer"]["kind"] == "memory"
    assert dry["turn"]["answer"]["answer"].startswith("Not remembered: this conversation may not write to memory")
    assert not (project / "kb/users/alice/memory").exists()


# -- MCP: one question per call, the previous turns only to resolve it ----------------------------------------------

def mcp_ask(project: Path, embedder: Any, scope: McpScope, arguments: dict[str, Any]) -> dict[str, Any]:
    async def call() -> dict[str, Any]:
        with KnowledgeBase(load_settings(project), embedder=embedder, providers=[ExtractiveAnswerer()]) as kb:
            async with Client(build_server(kb, scope)) as client:
                result = await client.call_tool("ask", arguments)
                assert not result.is_error, result.content
                return result.structured_content

    return anyio.run(call)


def test_mcp_ask_takes_the_previous_turns_and_keeps_the_servers_scope(project, real_embedder):
    history = [{"question": "When does the lease end?", "answer": "The lease ends on 31 March 2027. [1]"}]
    data = mcp_ask(project, real_embedder, McpScope("alice"), {"question": "And the deposit?", "history": history,
                                                              "extractive": True})
    assert data["rewrite"]["question"] == "And the deposit?" and data["rewrite"]["method"] == "carried"
    assert data["question"] == data["rewrite"]["rewritten"] == "When does the deposit? (lease end)"
    assert [c["source"] for c in data["citations"]] == ["kb/users/alice/lease.md"] and no_bob(json.dumps(data))
    bobs = [{"question": "How much is Bob's deposit?", "answer": "Bob's deposit is 9,999 euros."}]
    told = mcp_ask(project, real_embedder, McpScope("alice"), {"question": "And his lease?", "history": bobs,
                                                              "extractive": True})
    assert no_bob(json.dumps(told["citations"]))
    public = mcp_ask(project, real_embedder, McpScope("alice", public_only=True),
                     {"question": "And the deposit?", "history": history, "extractive": True})
    assert all(c["source"].startswith("docs/") for c in public["citations"])
    alone = mcp_ask(project, real_embedder, McpScope("alice"), {"question": "When does the lease end?"})
    assert "rewrite" not in alone  # without history: `ask` as before, one question


def test_mcp_history_is_strictly_typed(project, real_embedder):
    async def call() -> None:
        with KnowledgeBase(load_settings(project), embedder=real_embedder) as kb:
            async with Client(build_server(kb, McpScope("alice"))) as client:
                schema = {t.name: t for t in (await client.list_tools()).tools}["ask"].input_schema
                assert schema["properties"]["history"]["type"] == "array"
                for history in ([{"question": "q", "user": "bob"}], [{"answer": "no question"}], ["text"]):
                    with pytest.raises(MCPError, match="invalid arguments"):
                        await client.call_tool("ask", {"question": "And the deposit?", "history": history})

    anyio.run(call)
