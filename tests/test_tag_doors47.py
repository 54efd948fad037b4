"""Tags in every door (#47.4): `ls --tag`, `query --tag`, `ask --tag`, the HTTP API (/v1/documents, /v1/query,
/v1/ask) and the MCP tools (list_documents, search, ask) filter by tag the same way: any of the tags given (a
repeated or comma-separated tag, as `query --tag` always read it), inside the store's filter, within the
caller's scope. A tag never reaches another user's documents or the public ones from a private scope (and the
other way round). The page's tag filter is tested in a browser (test_web_page.py).

alice holds three notes that mention the landlord (tagged housing, work, garden); bob's note and a public page
mention him too, both tagged housing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import MCPError, types

from helpers.cli_runner import run_ragstead
from helpers.project import write_files
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase
from ragstead.mcp_server import McpScope, RagsteadMcp

FILES = {
    "ragstead.toml": '[ragstead]\nroots = ["kb", "docs"]\n',
    "kb/users/alice/lease.md": "---\ntags: [housing]\n---\n# Lease\n\nThe landlord raised the rent to 950 euros "
                               "from June.",
    "kb/users/alice/standup.md": "---\ntags: [work]\n---\n# Standup\n\nThe landlord of the office called about "
                                 "the heating.",
    "kb/users/alice/garden.md": "---\ntags: [Garden]\n---\n# Garden\n\nThe landlord lets us plant tomatoes by "
                                "the back wall.",
    "kb/users/bob/flat.md": "---\ntags: [housing]\n---\n# Flat\n\nBob's landlord is slow to fix the sink.",
    "docs/faq.md": "---\ntags: [housing]\n---\n# FAQ\n\nA landlord must give two months' notice.",
}
LEASE, STANDUP, GARDEN = "kb/users/alice/lease.md", "kb/users/alice/standup.md", "kb/users/alice/garden.md"
FLAT, FAQ = "kb/users/bob/flat.md", "docs/faq.md"
LIST_QUESTION = "which notes mention the landlord"


@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder) -> tuple[Path, dict[str, str]]:
    # The real model: the CLI opens the index with its own model.
    root = tmp_path_factory.mktemp("tags")
    write_files(root, FILES)
    with KnowledgeBase(load_settings(root), embedder=real_embedder) as kb:
        kb.index()
        keys = KeyFile(kb.api_keys_file)
        return root, {"alice": keys.add("alice")[0], "bob": keys.add("bob")[0]}


@pytest.fixture(scope="module")
def kb(project, real_embedder) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(load_settings(project[0]), embedder=real_embedder) as opened:
        yield opened


def cli(project: tuple[Path, dict[str, str]], *args: str) -> dict[str, Any]:
    out = run_ragstead(*args, "--json", "--root", str(project[0]))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def listed(data: dict[str, Any]) -> set[str]:
    return {doc["file_path"] for doc in data["documents"]}


def cited(answer: dict[str, Any]) -> set[str]:
    return {citation["source"] for citation in answer["citations"]}


# -- the CLI -------------------------------------------------------------------------------------------------------


def test_ls_lists_by_tag_as_query_reads_the_tags(project):
    assert listed(cli(project, "ls", "--tag", "housing", "--user", "alice")) == {LEASE}
    # The CLI's private scope is every user's private documents: the tag narrows it, never adds the public page.
    assert listed(cli(project, "ls", "--tag", "housing")) == {LEASE, FLAT}
    assert listed(cli(project, "ls", "--tag", "housing", "--public-only")) == {FAQ}
    # Any of the tags, repeated or comma-separated, case as indexed (tags are stored lower-case): as `query --tag`.
    both = listed(cli(project, "ls", "--tag", "housing", "--tag", "GARDEN", "--user", "alice"))
    assert both == listed(cli(project, "ls", "--tag", "housing,garden", "--user", "alice")) == {LEASE, GARDEN}
    found = cli(project, "query", "landlord", "--lexical-only", "--tag", "housing", "--tag", "GARDEN", "--user",
                "alice")["results"]
    assert {hit["file_path"] for hit in found} == both
    assert listed(cli(project, "ls", "--tag", "nobody-uses-it")) == set()


def test_ls_says_which_tags_it_listed(project):
    out = run_ragstead("ls", "--tag", "housing", "--tag", "work", "--user", "alice", "--root", str(project[0]))
    assert out.returncode == 0, out.stderr
    assert "# 2 documents (private scope, tagged housing or work, showing 1-2" in out.stdout


def test_ask_reads_the_tag_in_the_scope_of_a_list_answer(project):
    answer = cli(project, "ask", LIST_QUESTION, "--tag", "housing", "--user", "alice")
    assert answer["kind"] == "list" and cited(answer) == {LEASE}
    assert answer["examined"] == 1  # the scope the store counted: the tag is in its filter, not applied after
    both = cli(project, "ask", LIST_QUESTION, "--tag", "housing", "--tag", "garden", "--user", "alice")
    assert cited(both) == {LEASE, GARDEN} and both["examined"] == 2
    public = cli(project, "ask", LIST_QUESTION, "--tag", "housing", "--public-only")
    assert cited(public) == {FAQ}


# -- the HTTP API --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http(kb) -> Iterator[TestClient]:
    with TestClient(create_app(kb, ApiConfig())) as client:
        yield client


def as_user(project: tuple[Path, dict[str, str]], user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {project[1][user]}"}


def test_the_api_lists_a_keys_documents_by_tag(project, http):
    alice, bob = as_user(project, "alice"), as_user(project, "bob")
    assert listed(http.get("/v1/documents", params={"tags": "housing"}, headers=alice).json()) == {LEASE}
    assert listed(http.get("/v1/documents", params={"tags": "housing"}, headers=bob).json()) == {FLAT}
    both = http.get("/v1/documents", params=[("tags", "housing"), ("tags", "Garden")], headers=alice).json()
    assert listed(both) == {LEASE, GARDEN}
    assert listed(http.get("/v1/documents", headers=alice).json()) == {LEASE, STANDUP, GARDEN}
    too_many = http.get("/v1/documents", params=[("tags", f"t{n}") for n in range(21)], headers=alice)
    assert too_many.status_code == 400 and too_many.json()["error"]["code"] == "invalid_query"


def test_the_api_searches_and_answers_by_tag_within_the_keys_scope(project, http):
    alice = as_user(project, "alice")
    found = http.post("/v1/query", json={"query": "landlord", "mode": "lexical", "tags": ["housing"]}, headers=alice)
    assert {hit["file_path"] for hit in found.json()["results"]} == {LEASE}
    answer = http.post("/v1/ask", json={"query": LIST_QUESTION, "tags": ["housing"]}, headers=alice).json()
    assert cited(answer) == {LEASE} and answer["examined"] == 1
    public = http.post("/v1/ask", json={"query": LIST_QUESTION, "tags": ["housing"], "scope": "public"},
                       headers=alice).json()
    assert cited(public) == {FAQ}  # the public scope: no private note of anyone's, alice's own included
    bobs = http.post("/v1/ask", json={"query": LIST_QUESTION, "tags": ["housing", "garden"]},
                     headers=as_user(project, "bob")).json()
    assert cited(bobs) == {FLAT}


# -- the MCP server ------------------------------------------------------------------------------------------------


def mcp_call(kb: KnowledgeBase, scope: McpScope, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    server = RagsteadMcp(kb, scope)
    result = anyio.run(server.call_tool, None, types.CallToolRequestParams(name=tool, arguments=arguments))
    assert not result.is_error, result.content
    return result.structured_content


def test_the_mcp_tools_filter_by_tag_within_the_servers_scope(kb):
    alice = McpScope("alice")
    assert listed(mcp_call(kb, alice, "list_documents", {"tags": ["housing"]})) == {LEASE}
    assert listed(mcp_call(kb, alice, "list_documents", {"tags": ["housing", "garden"]})) == {LEASE, GARDEN}
    assert listed(mcp_call(kb, McpScope("bob"), "list_documents", {"tags": ["housing"]})) == {FLAT}
    assert listed(mcp_call(kb, McpScope("alice", public_only=True), "list_documents", {"tags": ["housing"]})) == {FAQ}
    found = mcp_call(kb, alice, "search", {"query": "landlord", "mode": "lexical", "tags": ["housing"]})
    assert {hit["file_path"] for hit in found["results"]} == {LEASE}
    assert cited(mcp_call(kb, alice, "ask", {"question": LIST_QUESTION, "tags": ["housing"]})) == {LEASE}
    with pytest.raises(MCPError, match="invalid arguments"):  # a tag is a list of strings, as in search
        mcp_call(kb, alice, "list_documents", {"tags": "housing"})
