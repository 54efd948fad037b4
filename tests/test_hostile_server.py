"""Hostile clients of a real `ragstead serve --no-auth` on 127.0.0.1: sockets held idle or fed a byte at a time
must not starve real requests, and a web page on another origin (or a rebinding DNS name) gets nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress

import httpx
import pytest
from fastapi.testclient import TestClient

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.knowledge_base import KnowledgeBase


@pytest.fixture
def embedder(fake_embedder):
    return fake_embedder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    write_files(root, {"kb/users/alice/plan.md": "Alice plans the heron survey for April."})
    # The index in this process (helpers/cli_runner.py): the server is the process under test.
    assert run_ragstead("index", "--quiet", "--root", str(root), env=OFFLINE_ENV).returncode == 0
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ragstead", "serve", "--no-auth", "--as-user", "alice",
                             "--port", str(port), "--root", str(root), "--head-timeout", "2", "--body-timeout", "3",
                             "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=OFFLINE_ENV)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            assert proc.poll() is None, "the server exited"
            time.sleep(0.2)
    yield base, port
    proc.terminate()
    proc.wait(timeout=20)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


# --- idle and slow sockets (#36.3) ---------------------------------------------------------------------------

def test_eighty_idle_sockets_do_not_turn_a_real_request_away(served):
    base, port = served
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(80)]
    try:
        time.sleep(0.3)  # all accepted by the server
        answer = httpx.get(f"{base}/v1/documents", timeout=30)
        assert answer.status_code == 200  # was 503: uvicorn's concurrency limit counted the idle sockets
        assert _closed_within(idle[0], 20)  # and each idle socket is let go after the head timeout
    finally:
        for sock in idle:
            sock.close()


def test_a_request_head_sent_a_byte_at_a_time_is_cut_off(served):
    _, port = served
    sock = socket.create_connection(("127.0.0.1", port))
    stop = threading.Event()

    def drip() -> None:
        with suppress(OSError):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            while not stop.is_set():
                sock.sendall(b"X")
                time.sleep(0.3)

    threading.Thread(target=drip, daemon=True).start()
    try:
        assert _closed_within(sock, 20)
    finally:
        stop.set()
        sock.close()


def test_a_body_that_trickles_in_is_cut_off(served):
    _, port = served
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.sendall(b"POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{")
        started = time.monotonic()
        answer = b""
        sock.settimeout(20)
        with suppress(TimeoutError, OSError):
            while piece := sock.recv(4096):
                answer += piece
                sock.sendall(b" ")
        assert time.monotonic() - started < 20  # closed (or answered) at the body timeout, not held
    finally:
        sock.close()


# --- another origin, another Host (#36.4) --------------------------------------------------------------------

def test_a_rebinding_host_name_gets_nothing(served):
    base, port = served
    answer = httpx.get(f"{base}/v1/documents", headers={"Host": f"attacker.example:{port}"}, timeout=30)
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden_host"
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "127.0.0.1"):
        assert httpx.get(f"{base}/v1/documents", headers={"Host": host}, timeout=30).status_code == 200


def test_a_page_on_another_origin_cannot_upload_or_read(served):
    base, port = served
    files = {"file": ("evil.md", b"planted by another origin", "text/markdown")}
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}):
        answer = httpx.post(f"{base}/v1/documents", files=files, headers=headers, timeout=30)
        assert answer.status_code == 403, headers
    read = httpx.get(f"{base}/v1/documents", headers={"Origin": "http://evil.example"}, timeout=30)
    assert read.status_code == 403
    listed = httpx.get(f"{base}/v1/documents", headers={"Origin": f"http://127.0.0.1:{port}"}, timeout=30)
    assert listed.status_code == 200 and "evil" not in listed.text  # the same origin (the web page) is served


def test_a_page_of_another_local_server_is_another_origin(served):
    """#45: the listen address is an allowed host, and any port of an allowed host passed the Origin check, so a
    page served by another program on 127.0.0.1 could read and write through the browser."""
    base, port = served
    other = f"http://127.0.0.1:{port + 1 if port < 65535 else port - 1}"
    files = {"file": ("evil.md", b"planted by another local server", "text/markdown")}
    assert httpx.post(f"{base}/v1/documents", files=files, headers={"Origin": other}, timeout=30).status_code == 403
    assert httpx.get(f"{base}/v1/documents", headers={"Origin": other}, timeout=30).status_code == 403
    assert httpx.get(f"{base}/v1/documents", headers={"Origin": f"http://localhost:{port}"},
                     timeout=30).status_code == 403  # another name for this server is another origin too
    assert httpx.get(f"{base}/v1/documents", headers={"Origin": base}, timeout=30).status_code == 200


def test_with_keys_too_every_route_checks_host_and_origin_and_allowed_hosts_let_a_name_in(make_project):
    project = make_project({"kb/users/alice/notes.md": "Alice's notes on the heron survey."})
    project.index()
    token = KeyFile(project.settings.db_file.parent / "api_keys.json").add("alice")[0]
    kb = KnowledgeBase(project.settings.with_overrides(allowed_hosts=("kb.lan",)), embedder=project.embedder,
                       providers=[ExtractiveAnswerer()])
    client = TestClient(create_app(kb, ApiConfig()))
    auth = {"Authorization": f"Bearer {token}"}
    query = {"query": "heron survey"}
    assert client.get("/healthz", headers={"Host": "attacker.example"}).status_code == 403
    assert client.get("/v1/documents", headers={**auth, "Host": "attacker.example"}).status_code == 403
    assert client.get("/v1/documents", headers={**auth, "Host": "kb.lan:8000"}).status_code == 200
    assert client.get("/v1/documents", headers={**auth, "Host": "[::1]:8000"}).status_code == 200
    assert client.post("/v1/query", json=query, headers={**auth, "Origin": "http://evil.example"}).status_code == 403
    assert client.post("/v1/query", json=query, headers={**auth, "Origin": "https://kb.lan"}).status_code == 200
    assert client.post("/v1/query", json=query, headers={**auth, "Origin": "https://kb.lan:8443"}).status_code == 403
    assert client.post("/v1/query", json=query, headers=auth).status_code == 200
