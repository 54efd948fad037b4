"""One request model (ragstead.request.model): every door takes the same limits from it, so a request one door
accepts every door accepts, and a refused one is refused by each in its own spelling (the CLI's flags, the
API's JSON fields, MCP's arguments), while the library's error names the library's field."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest
from fastapi.testclient import TestClient
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

import ragstead.cli as cli_module
from helpers.project import write_files
from ragstead.answer.ask import DEFAULT_MAX_CONTEXT_TOKENS as ASK_DEFAULT_CONTEXT
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.app import AskRequest as AskBody
from ragstead.api.app import QueryRequest as QueryBody
from ragstead.cli._flags import ProjectFlags
from ragstead.config import load_settings
from ragstead.errors import InvalidQueryError
from ragstead.knowledge_base import KnowledgeBase
from ragstead.mcp_server import AskArgs, McpScope, RagsteadMcp, SearchArgs, strict_schema
from ragstead.request import model as requests
from ragstead.request.model import MAX_K, AskRequest, Scope, SearchRequest
from ragstead.retrieval import fusion, search

# Enough chunks for k=60 to return 60 of alice's.
FILES = {f"kb/users/alice/note-{i:02d}.md": f"Alice's note {i} about the billing ledger and heron {i}."
         for i in range(70)}
FILES["kb/users/bob/secret.md"] = "Bob's billing salary notes."


@pytest.fixture(scope="module")
def root(tmp_path_factory, hashing_embedder):
    folder = tmp_path_factory.mktemp("requests")
    write_files(folder, {"ragstead.toml": '[ragstead]\nroots = ["kb"]\n', **FILES})
    with KnowledgeBase(load_settings(folder), embedder=hashing_embedder) as kb:
        kb.index()
    return folder


@pytest.fixture
def kb(root, hashing_embedder):
    with KnowledgeBase(load_settings(root), embedder=hashing_embedder, providers=[ExtractiveAnswerer()]) as knowledge:
        yield knowledge


# -- the three doors, each driven in-process ---------------------------------------------------------------


@pytest.fixture
def run_cli(kb, monkeypatch):
    # The CLI would open the index with its own model; here it gets the fake-embedder knowledge base.
    monkeypatch.setattr(ProjectFlags, "open", lambda self, **overrides: kb)
    monkeypatch.setattr(KnowledgeBase, "__exit__", lambda self, *exc: None)  # the fixture closes it
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli_module.app, list(args))

    return run


@pytest.fixture
def api(kb):
    with TestClient(create_app(kb, ApiConfig(auth=False, as_user="alice"))) as client:
        yield client


@pytest.fixture
def mcp(kb):
    server = RagsteadMcp(kb, McpScope("alice"))

    def call(tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        params = types.CallToolRequestParams(name=tool, arguments=arguments)
        return anyio.run(server.call_tool, None, params)

    return call


def mcp_refusal(call: Any) -> str:
    """The message of an MCP refusal: a protocol error (schema) or a tool error (the library's check)."""
    try:
        result = call()
    except MCPError as exc:
        return str(exc)
    assert result.is_error, result
    return result.content[0].text


# -- one set of limits ---------------------------------------------------------------------------------------


def test_the_request_limits_are_the_engines():
    assert requests.MAX_QUERY_CHARS == search.MAX_QUERY_CHARS
    assert requests.MODES == search.MODES and set(requests.FUSIONS) == set(fusion.FUSIONS)
    assert requests.MAX_CANDIDATES == search.MAX_K and requests.MAX_K <= search.MAX_K
    assert requests.MAX_FEEDBACK_K == search.MAX_FEEDBACK_K
    assert search.SearchOptions.k == requests.DEFAULT_K
    assert requests.DEFAULT_MAX_CONTEXT_TOKENS == ASK_DEFAULT_CONTEXT


def test_every_door_declares_the_shared_limits():
    api_query, api_ask = QueryBody.model_json_schema()["properties"], AskBody.model_json_schema()["properties"]
    assert api_query["top_k"]["maximum"] == MAX_K and api_query["query"]["maxLength"] == requests.MAX_QUERY_CHARS
    assert api_query["tags"]["maxItems"] == requests.MAX_TAGS
    assert api_ask["max_context_tokens"]["maximum"] == requests.MAX_CONTEXT_TOKENS
    for model in (SearchArgs, AskArgs):
        schema = strict_schema(model)["properties"]
        assert schema["k"]["maximum"] == MAX_K and schema["tags"]["maxItems"] == requests.MAX_TAGS
    result = CliRunner().invoke(cli_module.app, ["query", "--help"], env={"COLUMNS": "200"})
    assert f"1-{MAX_K}" in result.output


@pytest.mark.parametrize("k", [60, MAX_K])
def test_a_k_one_door_accepts_every_door_accepts(run_cli, api, mcp, k):
    question = "billing ledger heron"
    out = run_cli("query", question, "--user", "alice", "-k", str(k), "--json")
    assert out.exit_code == 0, out.output
    by_cli = json.loads(out.output)
    response = api.post("/v1/query", json={"query": question, "top_k": k, "max_tokens": 200_000})
    assert response.status_code == 200, response.text
    result = mcp("search", {"query": question, "k": k})
    assert not result.is_error, result.content[0].text
    # The same request in each door: the same k, the same chunks. (Hybrid returns at most the union of its
    # top_k_vector and top_k_lexical candidates, 25 each by default, so fewer than k here.)
    found = [[hit["chunk_id"] for hit in data["results"]] for data in (by_cli, response.json(),
                                                                        result.structured_content)]
    assert by_cli["k"] == response.json()["k"] == result.structured_content["k"] == k
    assert found[0] and found[0] == found[1] == found[2]
    asked = mcp("ask", {"question": "what about the billing ledger?", "k": k, "extractive": True})
    assert not asked.is_error, asked.content[0].text
    answered = api.post("/v1/ask", json={"query": "what about the billing ledger?", "top_k": k, "extractive": True})
    assert answered.status_code == 200, answered.text
    assert run_cli("ask", "what about the billing ledger?", "--user", "alice", "-k", str(k), "--extractive",
                   "--json").exit_code == 0


@pytest.mark.parametrize("k", [0, MAX_K + 1, 1000])
def test_a_k_out_of_range_is_refused_by_every_door_in_its_own_spelling(run_cli, api, mcp, k):
    out = run_cli("query", "billing", "--user", "alice", "-k", str(k))
    assert out.exit_code == 2
    assert out.output.strip() == f"error: --k must be a whole number between 1 and {MAX_K}, got {k}"
    response = api.post("/v1/query", json={"query": "billing", "top_k": k})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
    assert response.json()["error"]["message"].startswith("top_k: ")
    assert "k: Input should be" in mcp_refusal(lambda: mcp("search", {"query": "billing", "k": k}))
    assert "k: Input should be" in mcp_refusal(lambda: mcp("ask", {"question": "billing", "k": k}))


def test_a_bad_date_is_named_as_each_door_names_it(run_cli, api, mcp):
    with pytest.raises(InvalidQueryError) as caught:
        SearchRequest("billing", scope=Scope("alice", date_from="2025-13-45"))
    assert str(caught.value) == "date_from must be a date as YYYY-MM-DD, got '2025-13-45'"
    assert caught.value.fields == ("date_from",)
    out = run_cli("query", "billing", "--user", "alice", "--date-from", "2025-13-45")
    assert out.exit_code == 2 and out.output.startswith("error: --date-from must be a date as YYYY-MM-DD")
    response = api.post("/v1/query", json={"query": "billing", "date_from": "2025-13-45"})
    assert response.status_code == 400 and response.json()["error"] == {
        "code": "invalid_query", "message": "date_from must be a date as YYYY-MM-DD, got '2025-13-45'"}
    assert mcp_refusal(lambda: mcp("search", {"query": "billing", "date_from": "2025-13-45"})).startswith(
        "date_from must be a date as YYYY-MM-DD")
    out = run_cli("query", "billing", "--date-from", "2025-05-01", "--date-to", "2025-01-01")
    assert out.output.strip() == "error: --date-from 2025-05-01 is after --date-to 2025-01-01"


def test_an_empty_question_is_named_as_each_door_names_it(run_cli, api, mcp):
    assert run_cli("query", "   ").output.strip() == "error: the question is empty"
    assert api.post("/v1/query", json={"query": "   "}).json()["error"]["message"] == "query is empty"
    assert mcp_refusal(lambda: mcp("ask", {"question": "   "})) == "question is empty"
    assert mcp_refusal(lambda: mcp("search", {"query": "   "})) == "query is empty"


# -- the library ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fields", "field", "start"), [
    ({"k": MAX_K + 1}, "k", "k must be a whole number between 1 and"),
    ({"k": True}, "k", "k must be a whole number"),
    ({"mode": "magic"}, "mode", "mode must be one of vector, lexical, hybrid"),
    ({"top_k_vector": 5000}, "top_k_vector", "top_k_vector must be"),
    ({"feedback_k": 21}, "feedback_k", "feedback_k must be"),
    ({"fusion_weight": 2.0}, "fusion_weight", "fusion_weight must be a number between 0 and 1"),
    ({"user": "../bob"}, "user", "user must be a slug"),
    ({"date_to": "yesterday"}, "date_to", "date_to must be a date"),
    ({"tags": [f"t{i}" for i in range(21)]}, "tags", "tags may hold at most 20"),
    ({"min_confidence": 1.5}, "min_confidence", "min_confidence must be"),
    ({"max_context_tokens": 10}, "max_context_tokens", "max_context_tokens must be"),
])
def test_the_library_error_names_the_library_field(kb, fields, field, start):
    with pytest.raises(InvalidQueryError) as caught:
        AskRequest.of("billing", **fields)
    assert caught.value.fields[0] == field and str(caught.value).startswith(start)
    assert "--" not in str(caught.value)
    with pytest.raises(InvalidQueryError, match=f"^{start}"):
        kb.ask("billing", extractive=True, **fields)


def test_remember_without_a_user_is_a_team_projects_error_naming_its_field(kb):
    # A personal project's owner needs no user (tests/test_personal_daily47.py); this one is a team project, so
    # the request is refused before anything is answered or written.
    assert AskRequest.of("billing", remember=True).remember  # the request alone is fine: the project decides
    with pytest.raises(InvalidQueryError) as caught:
        kb.ask("Lesson learned: test the billing restores.", extractive=True, remember=True)
    assert caught.value.fields == ("remember",) and str(caught.value).startswith("remember needs a user")


def test_the_keyword_form_builds_the_same_request(kb):
    by_keywords = kb.search("billing ledger", user="alice", k=5, tags=[], doc_types=["user_kb"])
    by_request = kb.search(SearchRequest("billing ledger", k=5, scope=Scope("alice", doc_types=("user_kb",))))
    assert [h.chunk_id for h in by_keywords.hits] == [h.chunk_id for h in by_request.hits]
    assert all(h.user_slug == "alice" for h in by_request.hits) and len(by_request.hits) == 5
    asked = kb.ask(AskRequest("what about the billing ledger?", scope=Scope("alice"), extractive=True))
    again = kb.ask("what about the billing ledger?", user="alice", extractive=True)
    assert (asked.text, asked.citations) == (again.text, again.citations)
    with pytest.raises(TypeError):
        kb.search(SearchRequest("billing"), k=3)  # a request or keywords, not both
    with pytest.raises(TypeError):
        kb.search("billing", kk=3)  # a misspelt keyword stays a TypeError


def test_a_scope_is_normalised_when_built():
    scope = Scope("alice", doc_types=("user_kb,kb", "kb"), tags=("Billing", "ledger,heron"), date_from="2025-01-01")
    assert scope.doc_types == ("user_kb", "kb") and scope.tags == ("billing", "ledger", "heron")
    assert scope.filters().user_slug == "alice" and scope.filters().private_only
