"""Load from clients that pay nothing (#45.1): slow bodies without a key, clients that pipeline requests and never
read the answers, and more idle sockets than the server keeps must not turn an authenticated query away. The
connection limits are tested on a small ASGI app under the doors' uvicorn set-up, then all at once on a real
`ragstead serve` with keys; every socket is on 127.0.0.1 and every count is bounded."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import httpx
import pytest
import uvicorn

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.httpguard import connections


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _app(scope, receive, send):
    """/big answers 2 MB; /body reads its body and answers its length; anything else answers "ok"."""
    if scope["type"] != "http":
        return
    if scope["path"] == "/body":
        size, more = 0, True
        while more:
            message = await receive()
            size += len(message.get("body", b""))
            more = message.get("more_body", False) and message["type"] == "http.request"
        body = str(size).encode()
    else:
        body = b"x" * (2 << 20) if scope["path"] == "/big" else b"ok"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    for at in range(0, len(body), 65536):
        await send({"type": "http.response.body", "body": body[at:at + 65536], "more_body": True})
    await send({"type": "http.response.body", "body": b""})


@contextmanager
def _guarded_server(**limits) -> Iterator[tuple[int, connections.InFlightLimit]]:
    """The tiny app on the doors' uvicorn set-up (connections.server_config), in a thread, on 127.0.0.1."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = connections.server_config(_app, host="127.0.0.1", port=sock.getsockname()[1], log_level="critical",
                                       **limits)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield sock.getsockname()[1], config.app
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def _wait_until(predicate, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.1)
    return predicate()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


def _non_reader(port: int, path: str, requests: int, headers: str = "") -> socket.socket:
    """A client that pipelines `requests` GETs of `path` and never reads an answer."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server's writes stall soon
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode() * requests)
    return sock


def test_a_client_that_never_reads_its_answers_is_dropped_at_the_write_timeout():
    with _guarded_server(write_seconds=1) as (port, limit):
        sock = _non_reader(port, "/big", 3)
        try:
            assert _wait_until(lambda: limit.active == 1)  # the app is stuck writing to it
            # It was held for as long as the client stayed (no write timeout): the request slot never came back.
            assert _wait_until(lambda: limit.active == 0)
            assert _closed_within(sock, 10)
        finally:
            sock.close()


def test_a_body_slower_than_the_minimum_rate_is_cut_off_long_before_the_body_timeout():
    with _guarded_server(body_seconds=600, min_body_rate=1024) as (port, _):
        sock = socket.create_connection(("127.0.0.1", port))
        stop = threading.Event()

        def drip() -> None:
            with suppress(OSError):
                sock.sendall(b"POST /body HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n")
                while not stop.is_set():
                    sock.sendall(b"x" * 100)  # 200 bytes a second
                    time.sleep(0.5)

        threading.Thread(target=drip, daemon=True).start()
        try:
            assert _closed_within(sock, 30)  # the body timeout alone held it for 600 s
        finally:
            stop.set()
            sock.close()
        fast = httpx.post(f"http://127.0.0.1:{port}/body", content=b"y" * 3_000_000, timeout=30)
        assert fast.status_code == 200 and fast.text == "3000000"  # a body at a normal rate is read whole


def test_at_the_socket_cap_the_longest_idle_socket_makes_room_for_a_new_request():
    with _guarded_server(max_connections=8, head_seconds=600) as (port, _):
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
        try:
            time.sleep(0.3)  # all accepted
            answer = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
            assert answer.status_code == 200  # was: closed at once, the cap full of sockets that send nothing
            assert _closed_within(idle[0], 10)  # the oldest idle one was let go for it
            idle[-1].sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            idle[-1].settimeout(10)
            assert idle[-1].recv(1024).startswith(b"HTTP/1.1 200")  # the newest is still served
        finally:
            for sock in idle:
                sock.close()


def test_only_requests_the_door_counts_hold_the_in_flight_limit():
    seen: list[str] = []

    async def slow(scope, receive, send):
        seen.append(scope["path"])
        await asyncio.sleep(0.2)

    async def run() -> None:
        limit = connections.InFlightLimit(slow, max_requests=1, counts=lambda scope: scope["path"] == "/counted")
        answers: list[dict] = []

        async def send(message):
            answers.append(message)

        async def receive():
            return {"type": "http.request", "body": b""}

        calls = [limit({"type": "http", "path": path}, receive, send)
                 for path in ("/counted", "/free", "/free", "/counted")]
        await asyncio.gather(*calls)
        assert [a["status"] for a in answers if a["type"] == "http.response.start"] == [503]

    asyncio.run(run())
    assert seen == ["/counted", "/free", "/free"]  # only the second counted one found the limit full


# --- a real `ragstead serve` with keys -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def served_with_keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("load")
    write_files(root, {"kb/users/alice/plan.md": "Alice plans the heron survey for April."})

    def cli(*args: str) -> subprocess.CompletedProcess:  # the set-up, in this process: the server is under test
        return run_ragstead(*args, "--root", str(root), env=OFFLINE_ENV)

    assert cli("index", "--quiet").returncode == 0
    key = json.loads(cli("keys", "add", "--user", "alice", "--json").stdout)["key"]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ragstead", "serve", "--port", str(port), "--root", str(root),
                             "--rate-per-minute", "0", "--burst", "0", "--log-level", "warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=OFFLINE_ENV)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            assert proc.poll() is None, "the server exited"
            time.sleep(0.2)
    yield base, port, key
    proc.terminate()
    proc.wait(timeout=20)


def test_an_unauthenticated_body_is_refused_from_its_head(served_with_keys):
    _, port, _ = served_with_keys
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.sendall(b"POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000\r\n\r\n{")
        sock.settimeout(30)
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 401")  # was: the body read first, for up to the body timeout
        assert b"connection: close" in answer.lower()
    finally:
        sock.close()


def test_slow_bodies_non_readers_and_idle_sockets_do_not_stop_an_authenticated_query(served_with_keys):
    base, port, key = served_with_keys
    held: list[socket.socket] = []
    stop = threading.Event()
    try:
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        held += slow
        for sock in slow:  # 100 bodies without a key, a byte a second: each held a request slot for 60 s
            sock.sendall(b"POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100000\r\n\r\n{")

        def drip() -> None:
            while not stop.wait(1.0):
                for sock in slow:
                    with suppress(OSError):
                        sock.send(b" ")

        threading.Thread(target=drip, daemon=True).start()
        # 100 clients that ask for a 1.5 MB file twice and read nothing: each held a slot while it stayed.
        held += [_non_reader(port, "/static-offline-docs/swagger-ui-bundle.js", 2) for _ in range(100)]
        held += [socket.create_connection(("127.0.0.1", port)) for _ in range(1100)]  # past the 1,024 cap
        auth = {"Authorization": f"Bearer {key}"}
        for _ in range(10):
            with httpx.Client(base_url=base, timeout=30) as http:  # a new connection each round
                found = http.post("/v1/query", json={"query": "heron survey"}, headers=auth)
                assert found.status_code == 200, found.text
                assert found.json()["results"][0]["file_path"] == "kb/users/alice/plan.md"
                assert http.get("/livez").status_code == 200
            time.sleep(0.5)
    finally:
        stop.set()
        for sock in held:
            sock.close()
