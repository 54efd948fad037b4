"""The findability check through the HTTP API (`GET /v1/findability`) and the MCP `findability` tool never leaks:
a key (or a server) sees the check of its own scope as if the index held nothing else. Bob's private notes are
never counted, ranked, named (not even as the near-duplicate that shadows one of alice's) nor listed as skipped
files; alice's own unfindable duplicate and her own skipped file are."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client, MCPError

from helpers.project import STORE_KINDS, spec_for
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.knowledge_base import KnowledgeBase
from ragstead.mcp_server import McpScope, build_server


def note(topic: str, number: int) -> str:
    return (f"# {topic.title()} notes\n\n## Plan\n\nThe {topic} plan: we meet about {topic} on Fridays, the {topic} "
            f"budget is shared and every {topic} decision goes in this note. Topic number {number}.\n")


ALICE_TOPICS = ["ferries", "harbour", "kayaks", "lighthouse", "tides"]
BOB_SECRET = "Bob's payroll note: the zanzibar bonus is 4711 euros, confidential. " * 3
FILES: dict[str, str | bytes] = {
    **{f"kb/users/alice/{topic}.md": note(topic, i) for i, topic in enumerate(ALICE_TOPICS)},
    "kb/users/alice/ferries copy.md": note("ferries", 0),  # alice's own duplicate: one of the two is shadowed
    "kb/users/alice/clip.mp4": b"\x00\x01 alice's clip",  # her own skipped file
    # Bob's copy of alice's harbour note: ranked with hers it would shadow it (or be named as its twin).
    "kb/users/bob/harbour (bob).md": note("harbour", 1),
    "kb/users/bob/payroll-zanzibar.md": f"# Payroll zanzibar\n\n{BOB_SECRET}\n",
    "kb/users/bob/payroll-zanzibar copy.md": f"# Payroll zanzibar\n\n{BOB_SECRET}\n",
    "kb/users/bob/zanzibar-bonus.mp4": b"\x00\x01 bob's video",  # bob's skipped files, by name
    "kb/users/bob/zanzibar-empty.md": "",
    # A public archive copy of alice's tides note: outside a private scope without the archive.
    "docs/archive/tides-archived.md": note("tides", 4),
    "docs/faq.md": "# FAQ\n\nPublic FAQ: the ferry app installs with pip and runs offline on every laptop.\n",
    "docs/broken.mp4": b"\x00\x01 public video",
}
BOB_WORDS = ("bob", "zanzibar", "payroll", "4711")


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder  # scope, not ranking quality: the check is lexical and loads no model


def indexed(make_project, spec: str = ""):  # type: ignore[no-untyped-def]
    project = make_project(FILES, store=spec)
    project.settings = project.settings.with_overrides(roots=("kb", "docs"))  # docs/ too: public left-out files
    project.index()
    return project


@pytest.fixture
def project(make_project):  # type: ignore[no-untyped-def]
    return indexed(make_project)


def kb_of(project) -> KnowledgeBase:  # type: ignore[no-untyped-def]
    return KnowledgeBase(project.settings, embedder=project.embedder, providers=[ExtractiveAnswerer()])


def named(report: dict[str, Any]) -> set[str]:
    """Every path the report names: checked documents, their twins, left-out files."""
    items = report["not_findable"] + report["left_out"]
    return {item["path"] for item in items} | {item["shadowed_by"] for item in items if "shadowed_by" in item}


def assert_nothing_of_bobs(report: dict[str, Any]) -> None:
    text = json.dumps(report).lower()
    assert not [word for word in BOB_WORDS if word in text], text


def test_the_unscoped_check_does_see_bobs_notes(project):
    """The control: the CLI's whole-index check names bob's duplicate and skipped files, so the scoped runs
    below leave them out because of the scope, not because there is nothing to find."""
    with kb_of(project) as kb:
        report = kb.findability(save=False).to_dict()
    assert {"kb/users/bob/zanzibar-bonus.mp4", "kb/users/bob/zanzibar-empty.md"} <= named(report)
    assert named(report) & {"kb/users/bob/payroll-zanzibar.md", "kb/users/bob/payroll-zanzibar copy.md"}


def test_alices_key_never_sees_bobs_notes_in_the_findability_check(project):
    keys = KeyFile(project.settings.db_file.parent / "api_keys.json")
    alice, bob = keys.add("alice")[0], keys.add("bob")[0]
    with TestClient(create_app(kb_of(project), ApiConfig())) as client:
        response = client.get("/v1/findability", headers={"Authorization": f"Bearer {alice}"})
        assert response.status_code == 200, response.text
        report = response.json()
        bobs = client.get("/v1/findability", headers={"Authorization": f"Bearer {bob}"}).json()
        public = client.get("/v1/findability", params={"scope": "public", "include_archive": True},
                            headers={"Authorization": f"Bearer {alice}"}).json()
        assert client.get("/v1/findability").status_code == 401
    assert_nothing_of_bobs(report)
    # Counted: alice's six notes only (not bob's three, not the public or archived ones).
    assert report["documents"] == len(ALICE_TOPICS) + 1
    assert all(path.startswith("kb/users/alice/") for path in named(report))
    # Her own duplicate is found and named; her harbour and tides notes are not shadowed by copies outside her scope.
    [shadowed] = report["not_findable"]
    assert shadowed["kind"] == "shadowed"
    assert {shadowed["path"], shadowed["shadowed_by"]} == {"kb/users/alice/ferries.md",
                                                           "kb/users/alice/ferries copy.md"}
    assert report["findable"] == report["documents"] - 1
    assert [item["path"] for item in report["left_out"]] == ["kb/users/alice/clip.mp4"]
    assert report["left_out"][0]["kind"] == "unsupported"
    # No last-run state over HTTP: nothing to compare with, nothing saved for the whole index.
    assert report["regressions"] == [] and report["previous"] is None
    assert not (project.settings.db_file.parent / "findability.json").exists()
    assert set(report) == {"documents", "findable", "top", "not_findable", "left_out", "regressions", "previous",
                           "seconds", "generated_at"}  # the `doctor --findability --json` shape

    # Bob's key: his own duplicate and skipped files, and not a word of alice's.
    assert all(path.startswith("kb/users/bob/") for path in named(bobs))
    assert bobs["documents"] == 3
    assert {"kb/users/bob/zanzibar-bonus.mp4", "kb/users/bob/zanzibar-empty.md"} <= named(bobs)

    # The public scope: public documents and public left-out files, nobody's private ones.
    assert_nothing_of_bobs(public)
    assert all(path.startswith("docs/") for path in named(public)), named(public)
    assert public["documents"] == 2 and "docs/broken.mp4" in named(public)


def test_the_scope_parameter_takes_only_the_querys_values(project):
    keys = KeyFile(project.settings.db_file.parent / "api_keys.json")
    alice = keys.add("alice")[0]
    with TestClient(create_app(kb_of(project), ApiConfig())) as client:
        for params in ({"scope": "bob"}, {"user": "bob"}, {"include_archive": "sometimes"}):
            response = client.get("/v1/findability", params=params, headers={"Authorization": f"Bearer {alice}"})
            if "user" in params:  # an unknown query parameter is ignored, as on every GET: the key decides
                assert response.status_code == 200 and response.json()["documents"] == len(ALICE_TOPICS) + 1
            else:
                assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
        with_archive = client.get("/v1/findability", params={"include_archive": True},
                                  headers={"Authorization": f"Bearer {alice}"}).json()
    # The archive has no user: a key's private scope never holds it, with include_archive or not (as /v1/query).
    assert with_archive["documents"] == len(ALICE_TOPICS) + 1
    assert_nothing_of_bobs(with_archive)
    assert all(path.startswith("kb/users/alice/") for path in named(with_archive))


def test_the_mcp_tool_never_leaks_bobs_notes(project):
    async def call(scope: McpScope) -> dict[str, Any]:
        with kb_of(project) as kb:
            async with Client(build_server(kb, scope)) as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert tools["findability"].annotations.read_only_hint
                result = await client.call_tool("findability", {})
                assert not result.is_error, result.content
                for widening in ({"user": "bob"}, {"public_only": True}, {"include_archive": True}):
                    with pytest.raises(MCPError, match=r"refused|invalid arguments"):  # the scope is the server's
                        await client.call_tool("findability", widening)
                return result.structured_content

    report = anyio.run(call, McpScope("alice"))
    assert_nothing_of_bobs(report)
    assert report["documents"] == len(ALICE_TOPICS) + 1
    assert all(path.startswith("kb/users/alice/") for path in named(report))
    assert [item["kind"] for item in report["not_findable"]] == ["shadowed"]
    assert [item["path"] for item in report["left_out"]] == ["kb/users/alice/clip.mp4"]

    public = anyio.run(call, McpScope("alice", public_only=True))
    assert_nothing_of_bobs(public)
    assert public["documents"] == 1 and all(path.startswith("docs/") for path in named(public))


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_every_store_reads_the_scoped_check_through_its_own_filters(kind, make_project, request):
    """The library's scoped run, in each store: the documents come from the store's filtered listing and
    chunks, the queries rank in the scope; the same report whichever store holds the index."""
    project = indexed(make_project, spec_for(kind, request))
    with kb_of(project) as kb:
        report = kb.findability(filters=kb.scope(user="alice")).to_dict()
        public = kb.findability(filters=kb.scope(public_only=True, include_archive=True)).to_dict()
    assert_nothing_of_bobs(report)
    assert report["documents"] == len(ALICE_TOPICS) + 1
    assert [(item["kind"], item["path"][:15]) for item in report["not_findable"]] == [("shadowed", "kb/users/alice/")]
    assert [item["path"] for item in report["left_out"]] == ["kb/users/alice/clip.mp4"]
    assert_nothing_of_bobs(public)
    assert public["documents"] == 2 and all(path.startswith("docs/") for path in named(public))
