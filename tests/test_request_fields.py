"""The field table (ragstead.request.fields) is every door's search and ask model: a field added to it is a CLI
option, an API body field, an MCP argument and a line of GET /v1/limits, each with the table's spelling, words
and limits, and a door that does not show it has none of it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import typer
from fastapi.testclient import TestClient
from pydantic import ValidationError
from typer.testing import CliRunner

from ragstead.answer.base import DEFAULT_MIN_SIMILARITY
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api import app as api_module
from ragstead.cli._flags import AskFlags, SearchFlags, with_ask_flags, with_search_flags
from ragstead.errors import InvalidQueryError
from ragstead.knowledge_base import KnowledgeBase
from ragstead.mcp_server import argument_models, strict_schema
from ragstead.request import fields as request_fields
from ragstead.request.fields import Door, RequestField
from ragstead.request.model import AskRequest, Scope, SearchRequest

# A search knob every door shows, spelt otherwise in the CLI and the API, and an ask knob only the API shows.
PROBE = RequestField("probe_depth", int, 3, "How deep the probe goes.", low=1, high=9,
                     cli=Door("--probe", None, aliases=("-P",)), api=Door("depth"), mcp=Door("probe_depth"))
ASK_PROBE = RequestField("probe_words", bool, False, "Whether the answer names its probe.", request="ask",
                         api=Door("probe_words"))


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(request_fields, "FIELDS", (*request_fields.FIELDS, PROBE, ASK_PROBE))


def _cli_given(*args: str) -> dict[str, Any]:
    """What a command with the table's search and ask options collects from `args`."""
    seen: dict[str, Any] = {}
    app = typer.Typer()

    @app.command()
    @with_search_flags
    @with_ask_flags
    def probe(question: str, flags: SearchFlags, answer_flags: AskFlags) -> None:
        seen.update(flags.given, asked=dict(answer_flags.given))

    result = CliRunner().invoke(app, ["what", *args])
    assert result.exit_code == 0, result.output
    return seen


def test_a_field_added_to_the_table_is_a_cli_option(probed):
    assert _cli_given("--probe", "5")["probe_depth"] == 5
    assert _cli_given("-P", "7")["probe_depth"] == 7
    assert _cli_given()["probe_depth"] == 3  # the table's default
    assert "probe_words" not in _cli_given()["asked"]  # not a CLI option: the table says so
    assert _cli_given("--extractive")["asked"]["extractive"] is True


def test_a_field_added_to_the_table_is_an_api_body_field(probed):
    query, ask = api_module.body_models()
    assert query.model_validate({"query": "x", "depth": 9}).depth == 9  # type: ignore[attr-defined]
    for refused in (0, 10, "deep"):
        with pytest.raises(ValidationError):
            query.model_validate({"query": "x", "depth": refused})
    assert "probe_words" not in query.model_fields  # an ask field: in the ask body only
    assert ask.model_validate({"query": "x", "probe_words": True}).probe_words is True  # type: ignore[attr-defined]
    assert ask.model_fields["depth"].description == "How deep the probe goes."


def test_a_field_added_to_the_table_is_an_mcp_argument(probed):
    search, ask = argument_models()
    for model in (search, ask):
        found = strict_schema(model)["properties"]["probe_depth"]
        assert (found["minimum"], found["maximum"], found["default"]) == (1, 9, 3)
        assert found["description"] == "How deep the probe goes."
        with pytest.raises(ValidationError):
            model.model_validate({"query" if model is search else "question": "x", "probe_depth": 10})
    assert "probe_words" not in strict_schema(ask)["properties"]  # not shown to MCP


@pytest.fixture
def client(make_project):
    project = make_project({"kb/users/alice/a.md": "Alice's note."})
    kb = KnowledgeBase(project.settings, embedder=project.embedder, providers=[ExtractiveAnswerer()])
    with TestClient(create_app(kb, ApiConfig())) as c:  # keys on: the limits need none
        yield c


def test_a_field_added_to_the_table_is_in_v1_limits(probed, client):
    fields = client.get("/v1/limits").json()["fields"]
    assert fields["depth"] == {"field": "probe_depth", "type": "int", "default": 3, "min": 1, "max": 9,
                               "doc": "How deep the probe goes.", "requests": ["search", "ask"]}
    assert fields["probe_words"]["requests"] == ["ask"]


def test_v1_limits_are_the_bodies_limits_without_a_key(client):
    response = client.get("/v1/limits")
    assert response.status_code == 200
    assert client.post("/v1/query", json={"query": "x"}).status_code == 401  # every other /v1/ route needs one
    fields = response.json()["fields"]
    assert fields["query"] == {"field": "query", "type": "str", "required": True, "max_chars": 4096,
                               "doc": "What to look for, in plain words.", "requests": ["search", "ask"]}
    assert fields["top_k"]["max"] == 100 and fields["top_k"]["default"] == 8
    assert fields["scope"]["choices"] == ["private", "public"] and fields["scope"]["default"] == "private"
    assert "user" not in fields and "template" not in fields  # the key decides the user; the server, the template
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    for name, spec in fields.items():
        body = schema["AskRequest"]["properties"][name]
        bounds = {key: body.get(key) for key in ("minimum", "maximum") if key in body} or {
            key: option.get(key) for option in body.get("anyOf", []) for key in ("minimum", "maximum") if key in option}
        assert bounds == {key: spec[limit] for key, limit in (("minimum", "min"), ("maximum", "max"))
                          if limit in spec}, name


def test_the_table_is_the_request_models_defaults():
    defaults = {f.name: f.default for f in (*dataclasses.fields(AskRequest), *dataclasses.fields(Scope))}
    for item in request_fields.FIELDS:
        if not item.required:
            assert defaults[item.name] == item.default, item.name
    assert request_fields.MIN_SIMILARITY_RULE == DEFAULT_MIN_SIMILARITY  # the --min-similarity help quotes it


@pytest.mark.parametrize("door", request_fields.DOORS)
def test_each_door_shows_what_the_table_says(door):
    search_args, ask_args = argument_models()
    models = {"api": (api_module.QueryRequest, api_module.AskRequest), "mcp": (search_args, ask_args)}
    for request in ("search", "ask"):
        shown = [spelt.name for _, spelt in request_fields.exposed(door, request)]
        if door == "cli":
            given = _cli_given()
            assert set(given) - {"asked"} == {i.name for i, _ in request_fields.exposed("cli", "search")}
            assert set(given["asked"]) == {i.name for i, _ in request_fields.exposed("cli", "ask", only="ask")}
            continue
        model = models[door][request == "ask"]
        fields = [("query" if name == "question" else name) for name in model.model_fields]
        assert [name for name in fields if name not in ("max_tokens", "stream", "history")] == shown


def test_the_request_model_checks_the_tables_limits(monkeypatch):
    narrower = {"k": {"high": 5}, "limit": {"low": 10}}
    monkeypatch.setattr(request_fields, "FIELDS", tuple(dataclasses.replace(row, **narrower.get(row.name, {}))
                                                        for row in request_fields.FIELDS))
    assert SearchRequest("x", k=5).k == 5
    with pytest.raises(InvalidQueryError, match="k must be a whole number between 1 and 5") as refused:
        SearchRequest("x", k=6)
    assert refused.value.fields == ("k",)
    with pytest.raises(InvalidQueryError, match="limit must be a whole number between 10 and 500"):
        AskRequest("x", k=3, limit=9)
