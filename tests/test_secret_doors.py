"""Every field through the masker, at every door (issue #50, item 0): a secret planted in the text, a markdown
heading (section_path), a front-matter title, subject and tag, an e-mail's subject and a file's name never
reaches `index`, `query`, `ask`, `ls`, `tags`, `status`, `freshness`, `export`, the HTTP API (/v1/query,
/v1/ask and its stream, /v1/chunks, /v1/documents, /v1/findability), MCP (search, ask, get_document), a remote
LLM's prompt or the egress log; while each document is still found by a question about it. Also: a file that
is mostly credentials is cited, never quoted, at every door; a masked value reads `Key: [secret]`, also in the
answer line."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from ragstead.cli import app
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase

TRIP = """---
title: Cabin trip, gate code 48213
subject: wifi password Larch-Otter-19
tags: [travel, "pin 7731"]
---
# Cabin trip

## Door code: 90417

We drive up on Friday and take the ferry at 8:15. The cabin has a wood stove and a view of the lake.
The wifi password is Heron!Sky42 and the router sits by the stairs.
"""
MAIL = """From: Facilities <facilities@example.com>
To: ana@example.com
Subject: New alarm code 5813 for the office
Date: Mon, 3 Jun 2024 09:00:00 +0000
Message-ID: <alarm-1@example.com>
Content-Type: text/plain; charset=utf-8

Hi Ana, the office alarm was replaced over the weekend. The new panel is by the back entrance.
"""
LOGINS = ("amazon: ana@example.com / cobalt+Fennel19\ndropbox: ana@example.com / 8hRq2vWx\n"
          "library: A2938441 / tulip-moon\n")
NAMED = "Notes about the old router, kept for the warranty claim.\n"
VALUES = ("48213", "Larch-Otter-19", "7731", "90417", "Heron!Sky42", "5813", "cobalt+Fennel19", "8hRq2vWx",
          "tulip-moon", "Tr0ub4dor&3")
QUESTIONS = ("cabin trip ferry", "what is the wifi password at the cabin", "cabin door code",
             "office alarm code", "what is my amazon password")
FOLDER = "kb/users/ana"


class Remote:
    """An OpenAI-compatible endpoint as an httpx transport: keeps each prompt, answers "[1]"."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.prompts.append(request.content.decode())
        event = {"choices": [{"index": 0, "delta": {"content": "See [1]."}}]}
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / FOLDER
    folder.mkdir(parents=True)
    for name, text in (("trip.md", TRIP), ("alarm.eml", MAIL), ("logins.txt", LOGINS),
                       ("wifi password Tr0ub4dor&3.txt", NAMED)):
        (folder / name).write_text(text, encoding="utf-8")
    return tmp_path


def _cli(project: Path, *args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--root", str(project)])
    assert result.exit_code in (0, 3), result.output
    return result.output


def test_no_door_shows_a_secret_from_any_field(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from ragstead.api import ApiConfig, create_app
    from ragstead.mcp_server import AskArgs, GetDocumentArgs, McpScope, RagsteadMcp, SearchArgs

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000000000")
    outputs = {"index": _cli(project, "index", "-v")}
    for command in (["ls"], ["ls", "--json"], ["tags", "--json"], ["status"], ["status", "--json"], ["freshness"],
                    ["freshness", "--json"]):
        outputs[" ".join(command)] = _cli(project, *command)
    snapshot = project / "backup.ragsnap"
    _cli(project, "export", str(snapshot))
    with zipfile.ZipFile(snapshot) as archive:
        outputs["export"] = "\n".join(archive.read(n).decode("utf-8", "replace") for n in archive.namelist()
                                      if not n.endswith(".f32"))
    remote = Remote()
    settings = load_settings(project).with_overrides(auto_tags=False)
    found: dict[str, list[str]] = {}
    with KnowledgeBase(settings, transport=remote.transport) as kb:  # the CLI's model: one index, many doors
        client = TestClient(create_app(kb, ApiConfig(auth=False, as_user="ana")))
        mcp = RagsteadMcp(kb, McpScope("ana"))
        outputs["/v1/documents"] = client.get("/v1/documents").text
        outputs["/v1/findability"] = client.get("/v1/findability").text
        outputs["kb.tags"] = json.dumps(kb.tags())
        for question in QUESTIONS:
            hits = kb.search(question, mode="lexical").to_dict(include_text=True)
            found[question] = [hit["file_path"] for hit in hits["results"]]
            outputs |= {
                f"query {question}": _cli(project, "query", question),
                f"query --json {question}": _cli(project, "query", question, "--json"),
                f"ask {question}": _cli(project, "ask", question, "--extractive"),
                f"ask --json {question}": _cli(project, "ask", question, "--extractive", "--json"),
                f"/v1/query {question}": client.post("/v1/query", json={"query": question}).text,
                f"/v1/ask {question}": client.post("/v1/ask", json={"query": question}).text,
                f"/v1/ask stream {question}": client.post("/v1/ask", json={"query": question, "stream": True}).text,
                f"mcp search {question}": json.dumps(mcp._search(SearchArgs(query=question))),
                f"mcp ask {question}": json.dumps(mcp._ask(AskArgs(question=question, extractive=True))),
            }
            for hit in hits["results"]:
                outputs[f"/v1/chunks {hit['chunk_id']}"] = client.get(f"/v1/chunks/{hit['chunk_id']}").text
                outputs[f"mcp get_document {hit['doc_id']}"] = json.dumps(
                    mcp._get_document(GetDocumentArgs(doc_id=hit["doc_id"])))
            kb.ask(question, llm=["openai"], min_similarity=-1)
    outputs["remote prompts"] = "\n".join(remote.prompts)
    outputs["egress"] = (project / "kb" / "rag" / "egress.jsonl").read_text(encoding="utf-8")
    outputs["egress command"] = _cli(project, "egress", "--json")
    assert remote.prompts and any("Cabin trip" in p for p in remote.prompts)  # the prompt did carry the documents
    for door, output in outputs.items():
        shown = [value for value in VALUES if value in output]
        assert not shown, f"{door} shows {shown}: {output[:2000]}"
    assert f"skipped {FOLDER}/wifi password [secret]: its name holds a secret" in outputs["index"], outputs["index"]
    assert f"{FOLDER}/trip.md" in found["cabin trip ferry"] and f"{FOLDER}/alarm.eml" in found["office alarm code"]
    assert f"{FOLDER}/logins.txt" in found["what is my amazon password"]


def test_a_file_of_credentials_is_cited_never_quoted_and_revealed_only_when_asked(project: Path) -> None:
    _cli(project, "index")
    for command in (["query", "amazon password", "--json"], ["ask", "what is my amazon password", "--extractive"]):
        hidden = _cli(project, *command)
        assert "logins.txt holds 3 secrets (amazon; dropbox; library)" in hidden, hidden
        assert "A2938441" not in hidden  # the file's other words (a username, a card number) are not quoted either
        shown = _cli(project, *command, "--reveal-secrets")
        assert "cobalt+Fennel19" in shown, shown


def test_the_answer_line_keeps_the_label_and_the_mask(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "cabin.md").write_text("# Cabin\n\nWe drive up on Friday and take the ferry at 8:15.\n"
                                              "The wifi password is Heron!Sky42 and the router sits by the stairs.\n",
                                              encoding="utf-8")
    _cli(tmp_path, "index")
    answer = _cli(tmp_path, "ask", "what is the wifi password at the cabin", "--extractive")
    # `***` read `*` here once the answer's markdown was stripped; the label and the mask stay.
    assert "The wifi password is [secret]" in answer.splitlines()[0], answer
    revealed = _cli(tmp_path, "ask", "what is the wifi password at the cabin", "--extractive", "--reveal-secrets")
    assert "The wifi password is Heron!Sky42" in revealed.splitlines()[0], revealed
