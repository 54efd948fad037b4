"""Loopback only (issue 49): every server the suite or ragstead starts listens and talks on loopback. While each
one runs, and while a client holds a connection to it, psutil lists the inet sockets of its whole process tree and
any listening or connected socket with an address outside 127.0.0.0/8 and ::1 fails the test (unix sockets are
not inet sockets: not listed). The servers: the run's Milvus server, PostgreSQL (primary and its streaming
replica), Chroma, ClickHouse, `ragstead serve` (uvicorn), `ragstead mcp --http`, the suite's own HTTP server,
and Chromium as Playwright drives it (remote debugging over a pipe, so no port at all).

The Milvus server runs in a network namespace whose one interface is loopback (tests/helpers/loopback.py says
why): its wildcard listeners there count as loopback, and only there.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

from helpers.loopback import InetSocket, inet_sockets, off_loopback
from helpers.project import OFFLINE_ENV, write_files


def _listening_pid(port: int) -> int:
    """The process listening on TCP `port` (the suite's servers pick free ports: one process has each)."""
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.laddr.port == port and conn.pid:
            return int(conn.pid)
    raise AssertionError(f"nothing listens on port {port}")


def assert_loopback_only(pid: int, server: str, *, listens: bool = True) -> list[InetSocket]:
    """Fail unless every inet socket of `pid` and its descendants is on loopback; return them (for more checks).
    `listens`: the server must have a listening socket, which proves its sockets were read at all."""
    sockets = inet_sockets(pid)
    print(f"{server}:", *sockets, sep="\n  ")  # what was checked (pytest -rP shows it)
    off = [f"  {s} (off loopback: {', '.join(dict.fromkeys(off_loopback(s)))})" for s in sockets if off_loopback(s)]
    assert not off, f"{server} has sockets that are not on loopback:\n" + "\n".join(off)
    if listens:
        assert any(s.status == psutil.CONN_LISTEN for s in sockets), f"{server}: no listening socket in {sockets}"
    return sockets


def _connected(sockets: list[InetSocket]) -> bool:
    return any(s.status == psutil.CONN_ESTABLISHED for s in sockets)


def test_the_milvus_server(milvus_server, milvus_server_pid):
    from pymilvus import MilvusClient

    port = int(urlsplit(milvus_server.replace("milvus://", "http://")).port or 0)
    client = MilvusClient(uri=f"http://127.0.0.1:{port}")
    try:
        client.list_collections()  # a live connection during the check, and every role at work behind it
        sockets = assert_loopback_only(milvus_server_pid, "the Milvus server")
    finally:
        client.close()
    assert _connected(sockets)
    # Milvus itself (whose listeners are wildcards) lives in a namespace with no address but loopback ...
    assert {s.loopback_only_namespace for s in sockets if s.name == "milvus"} == {True}, sockets
    # ... and the suite's side of it is the one port it reaches, on 127.0.0.1 in this (the host's) namespace.
    assert any(s.status == psutil.CONN_LISTEN and s.local == ("127.0.0.1", port) for s in sockets), sockets


def test_postgresql_primary_and_replica(pg_server, pg_replica):
    import psycopg

    with psycopg.connect(pg_server.url) as primary, psycopg.connect(pg_replica.url) as replica:
        assert replica.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        primary.execute("SELECT 1")
        on_primary = assert_loopback_only(_listening_pid(pg_server.port), "PostgreSQL (primary)")
        on_replica = assert_loopback_only(_listening_pid(pg_replica.port), "PostgreSQL (replica)")
    # The replica streams from the primary: that connection was among those checked, on both ends.
    assert any(s.remote and s.remote[1] == pg_server.port for s in on_replica), on_replica
    assert _connected(on_primary)


def test_chroma(chroma_server):
    base = chroma_server.replace("chroma+http://", "http://")
    with httpx.Client(base_url=base) as http:  # kept alive: a connected socket on the server's side
        assert http.get("/api/v2/heartbeat").status_code == 200
        sockets = assert_loopback_only(_listening_pid(int(urlsplit(base).port or 0)), "Chroma (chroma run)")
    assert _connected(sockets)


def test_clickhouse(clickhouse_server):
    with httpx.Client(base_url=f"http://127.0.0.1:{clickhouse_server['port']}") as http:
        assert http.get("/ping").text.startswith("Ok")
        sockets = assert_loopback_only(_listening_pid(clickhouse_server["port"]), "ClickHouse")
    assert _connected(sockets)


@contextmanager
def _process(*args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`python -m ragstead ARGS`, offline; yields it with its stdout lines so far (read by a thread)."""
    process = subprocess.Popen([sys.executable, "-m", "ragstead", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=OFFLINE_ENV)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True)
    reader.start()
    try:
        yield process, lines
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for(process: subprocess.Popen[str], lines: list[str], pattern: str) -> re.Match[str]:
    """The first match of `pattern` in the process's output, once it printed it (a failed start fails here; the
    deadline only keeps a hung start from hanging the run)."""
    deadline = time.monotonic() + 120
    while True:
        found = next((m for line in list(lines) if (m := re.search(pattern, line))), None)
        if found is not None:
            return found
        assert process.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.1)


def _notes(root: Path) -> Path:
    write_files(root, {"ragstead.toml": '[ragstead]\nroots = ["kb"]\n',
                       "kb/users/alice/heron.md": "# Heron\n\nThe heron count reached nine this spring."})
    return root


def test_ragstead_serve(tmp_path):
    with _process("serve", "--port", "0", "--json", "--no-auth", "--as-user", "alice", "--log-level", "warning",
                  "--root", str(_notes(tmp_path))) as (process, lines):
        banner = json.loads(_wait_for(process, lines, r'^\{.*"url".*\}$').group(0))
        assert banner["url"].startswith("http://127.0.0.1:")
        with httpx.Client(base_url=banner["url"]) as http:
            assert http.get("/healthz").status_code == 200
            sockets = assert_loopback_only(process.pid, "ragstead serve")
    assert _connected(sockets)


def test_ragstead_mcp_over_http(tmp_path):
    # --allow-write: it may start on a project with no index yet (this one), which it creates.
    with _process("mcp", "--user", "alice", "--http", "--port", "0", "--allow-write", "--root",
                  str(_notes(tmp_path))) as (process, lines):
        url = _wait_for(process, lines, r"http://\S+/mcp").group(0)
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client() as http:
            http.get(url)  # any answer: the connection is what counts
            sockets = assert_loopback_only(process.pid, "ragstead mcp --http")
    assert _connected(sockets)


def test_the_suites_http_server():
    from helpers.web_server import serve

    with serve() as (base, _routes):
        assert httpx.get(f"{base}/notes.txt").status_code == 200
        port = int(urlsplit(base).port or 0)
        # Held open during the check (the server closes each answered HTTP/1.0 connection itself).
        with socket.create_connection(("127.0.0.1", port)):
            # It runs in this process, beside whatever else the worker holds: its sockets are those on its port.
            own = [s for s in inet_sockets(os.getpid()) if port in (s.local[1], s.remote[1] if s.remote else 0)]
    assert any(s.status == psutil.CONN_LISTEN for s in own) and _connected(own), own
    assert not [s for s in own if off_loopback(s)], own


@pytest.mark.chromium
def test_chromium_as_playwright_drives_it():
    """Playwright talks to Chromium over a pipe (--remote-debugging-pipe), not a debugging port; the browser
    and every helper process it starts (network service, renderer) hold loopback sockets only."""
    from playwright.sync_api import sync_playwright

    from helpers.web_server import serve
    from test_web_page import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: install Debian's package (`apt-get install -y chromium`, as "
                    ".ci/run does) or point RAGSTEAD_CHROMIUM at one")
    before = {child.pid for child in psutil.Process().children()}
    # A port that accepts and never answers: a fetch to it keeps one of the browser's sockets connected.
    with serve() as (base, _routes), socket.create_server(("127.0.0.1", 0)) as silent, \
            sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.goto(f"{base}/notes.txt")
            assert "quarterly review" in page.content()
            # Not awaited (the function returns nothing): that fetch never ends.
            page.evaluate(f"() => {{ fetch('http://127.0.0.1:{silent.getsockname()[1]}/').catch(() => null); }}")
            driver = [child for child in psutil.Process().children() if child.pid not in before]
            assert driver, "Playwright's driver process was not found"
            deadline = time.monotonic() + 60  # only so that a fetch that never starts cannot hang the run
            while True:
                sockets = [s for d in driver for s in assert_loopback_only(d.pid, "Chromium", listens=False)]
                if any(s.remote and s.remote[1] == silent.getsockname()[1] for s in sockets):
                    break
                assert time.monotonic() < deadline, f"the browser's fetch never connected: {sockets}"
                time.sleep(0.2)
            names = {p.name() for d in driver for p in d.children(recursive=True)}
        finally:
            browser.close()
    assert any("chrom" in name for name in names), names  # the browser's processes were among those read
    assert not [s for s in sockets if s.status == psutil.CONN_LISTEN and "chrom" in s.name], sockets
