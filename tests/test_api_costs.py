"""What one key can make the server spend (#45.4, #45.6): a findability check reads only the caller's scope (a key
owning nothing reads nothing, hashes and parses no one else's files) and never holds the shared read connection
across its run; one key runs one findability check and one ingest at a time; the bytes concurrent fetches may hold
are one server-wide budget."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.indexing import build
from ragstead.knowledge_base import KnowledgeBase
from ragstead.services import findability

ALICE = {f"kb/users/alice/note{i}.md": f"# Alice {i}\n\nAlice's note {i} on herons, kestrels and the ferry {i}.\n"
         for i in range(3)}
CAROL = {f"kb/users/carol/note{i}.md": f"# Carol {i}\n\nCarol's note {i} about the budget line {i} and tides.\n"
         for i in range(30)}


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


@pytest.fixture
def served(make_project):  # type: ignore[no-untyped-def]
    project = make_project({**ALICE, **CAROL})
    project.index()
    keys = KeyFile(project.settings.db_file.parent / "api_keys.json")
    tokens = {user: keys.add(user)[0] for user in ("alice", "bob", "carol")}  # bob owns nothing
    kb = KnowledgeBase(project.settings, embedder=project.embedder, providers=[ExtractiveAnswerer()])

    def client(**config: Any) -> TestClient:
        return TestClient(create_app(kb, ApiConfig(rate_per_minute=0, burst=0, **config)))

    yield project, kb, tokens, client
    kb.close()


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _count_calls(monkeypatch, target: Any, name: str, calls: list[str]) -> None:  # type: ignore[no-untyped-def]
    real = getattr(target, name)
    monkeypatch.setattr(target, name, lambda *a, **k: calls.append(name) or real(*a, **k))


def test_a_key_owning_nothing_makes_the_check_read_and_hash_nothing(served, monkeypatch):
    project, kb, tokens, client = served
    for i in range(5):  # carol's files changed and added since the run: a whole-project check hashes and reads them
        (project.root / f"kb/users/carol/note{i}.md").write_text(f"# Carol {i}\n\nRewritten {i}.\n")
        (project.root / f"kb/users/carol/new{i}.md").write_text(f"# New {i}\n\nNot indexed yet {i}.\n")
    calls: list[str] = []
    _count_calls(monkeypatch, kb.runtime.store, "export_documents", calls)
    _count_calls(monkeypatch, kb.runtime.store, "document_chunks", calls)
    hashed: list[str] = []
    real_hash = build.file_sha256
    monkeypatch.setattr(build, "file_sha256", lambda path: hashed.append(str(path)) or real_hash(path))
    prepared: list[str] = []
    real_prepare = build.prepare_file
    monkeypatch.setattr("ragstead.services.findability.prepare_file",
                        lambda candidate, options: prepared.append(candidate.rel_path) or real_prepare(candidate,
                                                                                                      options))
    answer = client().get("/v1/findability", headers=auth(tokens["bob"]))
    assert answer.status_code == 200 and answer.json()["documents"] == 0
    assert calls == [] and hashed == [] and prepared == []  # was: every document of the index read, carol's files
    answer = client().get("/v1/findability", headers=auth(tokens["alice"]))
    assert answer.json()["documents"] == 3
    assert calls == ["document_chunks"] * 3 and hashed == [] and prepared == []  # her 3, not carol's 30


def test_the_check_never_holds_the_read_connection_across_its_run(served, monkeypatch):
    _, _, tokens, client = served
    events: list[str] = []
    real = findability._doc

    def slow(*args: Any, **kwargs: Any) -> Any:  # the work on each document read (its words), made slow
        events.append("read")
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(findability, "_doc", slow)
    http = client()
    checker = threading.Thread(target=lambda: http.get("/v1/findability", headers=auth(tokens["alice"])))
    checker.start()
    while "read" not in events:
        time.sleep(0.01)
    found = http.post("/v1/query", json={"query": "budget tides"}, headers=auth(tokens["carol"]))
    events.append("carol answered")
    checker.join(timeout=60)
    assert found.status_code == 200
    assert events.index("carol answered") < len(events) - 1  # was: carol's query waited for alice's whole read


def _held(monkeypatch, kb: KnowledgeBase, method: str) -> tuple[threading.Event, threading.Event]:  # type: ignore[no-untyped-def]
    """`kb.<method>` made to wait on its first call (the one `_first` starts), until released: (started, release).
    Later calls run at once: another key's request answers while the first one is held (one held too sat out the
    30 s timeout before it answered)."""
    started, release = threading.Event(), threading.Event()
    real = getattr(kb, method)

    def waiting(*args: Any, **kwargs: Any) -> Any:
        if not started.is_set():
            started.set()
            release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(kb, method, waiting)
    return started, release


def _first(started: threading.Event, call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """`call` started on a thread of its own and reached the held method: (the thread, [its response] once done)."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()))
    thread.start()
    assert started.wait(30)
    return thread, out


def test_one_key_runs_one_findability_check_at_a_time(served, monkeypatch):
    _, kb, tokens, client = served
    started, release = _held(monkeypatch, kb, "findability")
    http = client()
    thread, first = _first(started, lambda: http.get("/v1/findability", headers=auth(tokens["alice"])))
    second = http.get("/v1/findability", headers=auth(tokens["alice"]))
    release.set()
    thread.join(timeout=60)
    assert second.status_code == 429 and second.json()["error"]["code"] == "busy_key"  # was: both ran
    assert first[0].status_code == 200
    assert http.get("/v1/findability", headers=auth(tokens["alice"])).status_code == 200  # once it ended


def test_concurrent_fetches_share_one_byte_budget(served, monkeypatch):
    project, kb, tokens, client = served
    started, release = _held(monkeypatch, kb, "ingest")
    cap = project.settings.fetch_max_mb << 20
    http = client(fetch_bytes_held=cap + cap // 2)  # room for one response's cap, not two
    body = {"sources": ["http://127.0.0.1:9/a"]}  # loopback: the first fetch fails at once, never leaves the machine
    thread, first = _first(started, lambda: http.post("/v1/ingest", json=body, headers=auth(tokens["alice"])))
    same_key = http.post("/v1/ingest", json=body, headers=auth(tokens["alice"]))
    other_key = http.post("/v1/ingest", json=body, headers=auth(tokens["carol"]))
    release.set()
    thread.join(timeout=120)
    assert same_key.status_code == 429 and same_key.json()["error"]["code"] == "busy_key"
    assert other_key.status_code == 503 and other_key.json()["error"]["code"] == "busy"  # was: 40 fetches, 2.1 GB
    assert "Retry-After" in other_key.headers
    assert first[0].status_code == 200  # the first one ran (its fetch fails: a result, not an error)


def test_one_key_runs_one_list_answer_at_a_time(served, monkeypatch):
    # A list answer reads every matching document of the scope: a key's second one waits its turn (429), while its
    # plain questions, and another key's list, still answer.
    _, kb, tokens, client = served
    started, release = _held(monkeypatch, kb, "ask")
    http = client()
    listing = {"query": "which notes mention herons?"}
    thread, first = _first(started, lambda: http.post("/v1/ask", json=listing, headers=auth(tokens["alice"])))
    second = http.post("/v1/ask", json=listing, headers=auth(tokens["alice"]))
    streamed = http.post("/v1/ask", json={**listing, "stream": True}, headers=auth(tokens["alice"]))
    other_key = http.post("/v1/ask", json={"query": "which notes mention the budget?"}, headers=auth(tokens["carol"]))
    release.set()
    thread.join(timeout=60)
    assert second.status_code == 429 and second.json()["error"]["code"] == "busy_key"  # was: both ran
    assert streamed.status_code == 429  # refused before a stream starts, not as an error line inside one
    assert other_key.status_code == 200 and first[0].status_code == 200
    assert first[0].json()["kind"] == "list" and first[0].json()["matched"] == 3
    plain = http.post("/v1/ask", json={"query": "what is on the ferry?", "stream": True},
                      headers=auth(tokens["alice"]))
    assert plain.status_code == 200
    again = http.post("/v1/ask", json=listing, headers=auth(tokens["alice"]))  # the place was given back
    assert again.status_code == 200 and again.json()["matched"] == 3
    streamed = http.post("/v1/ask", json={**listing, "stream": True}, headers=auth(tokens["alice"]))
    assert streamed.status_code == 200 and [json.loads(line)["type"] for line in streamed.text.splitlines()][-1] == (
        "answer")
    assert http.post("/v1/ask", json=listing, headers=auth(tokens["alice"])).status_code == 200  # and again


def test_a_list_answer_never_holds_the_read_connection_across_its_scan(served, monkeypatch):
    # A list answer reads every matching document of the scope: another key's query answers while it is mid-scan
    # (#45.4), as it does during a findability check.
    from ragstead.answer import listing

    _, _, tokens, client = served
    scanning, release = threading.Event(), threading.Event()
    events: list[str] = []
    real = listing.held_stems

    def held_up(*args: Any, **kwargs: Any) -> Any:  # the work on each candidate document, after it was read
        if not scanning.is_set():
            scanning.set()
            release.wait(10)  # before the fix this times out: carol's query waits for the lock the scan held
            events.append("scan resumed")
        return real(*args, **kwargs)

    monkeypatch.setattr(listing, "held_stems", held_up)
    http = client()
    out: list[Any] = []
    lister = threading.Thread(target=lambda: out.append(
        http.post("/v1/ask", json={"query": "which notes mention herons?"}, headers=auth(tokens["alice"]))))
    lister.start()
    assert scanning.wait(30)
    found = http.post("/v1/query", json={"query": "budget tides"}, headers=auth(tokens["carol"]))
    events.append("carol answered")
    release.set()
    lister.join(timeout=60)
    assert found.status_code == 200 and found.json()["results"]
    assert events == ["carol answered", "scan resumed"]  # was: carol's query waited for alice's whole scan
    assert out[0].status_code == 200 and out[0].json()["matched"] == 3
