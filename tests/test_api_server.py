"""A real `ragstead serve` (uvicorn) process on 127.0.0.1, driven over HTTP like any client."""

import contextlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files

ENV = OFFLINE_ENV


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragstead", *args, "--root", str(root)],
                          capture_output=True, text=True, env=ENV, timeout=120)


@dataclass
class Served:
    """A running `ragstead serve`: its URL, keys (and their ids), project root and the stderr lines so far."""

    base: str
    port: int
    keys: dict[str, str]
    key_ids: dict[str, str]
    root: Path
    pid: int
    stderr: list[str] = field(default_factory=list)

    def wait_for(self, predicate: Callable[[list[str]], bool], timeout: float = 10.0) -> list[str]:
        """The stderr lines once predicate(lines) holds (stderr is read by a thread, so it may lag a little)."""
        deadline = time.time() + timeout
        while not predicate(list(self.stderr)) and time.time() < deadline:
            time.sleep(0.05)
        return list(self.stderr)


def serve(root: Path) -> Iterator[Served]:
    """A `ragstead serve` of two users' notes in `root`, with three keys, until the generator is closed."""
    write_files(root, {
        "kb/users/alice/plan.md": "Alice plans the heron survey for April.",
        "kb/users/bob/plan.md": "Bob plans the kestrel survey for May.",
    })
    # The index and the keys in this process (helpers/cli_runner.py): the server is the process under test.
    assert run_ragstead("index", "--quiet", "--root", str(root), env=ENV).returncode == 0
    records = {name: json.loads(run_ragstead("keys", "add", "--user", user, "--json", "--root", str(root),
                                             env=ENV).stdout)
               for name, user in (("alice", "alice"), ("bob", "bob"), ("alice-2", "alice"))}
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ragstead", "serve", "--port", str(port), "--root", str(root),
                             "--rate-per-minute", "6", "--burst", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    served = Served(f"http://127.0.0.1:{port}", port, {n: r["key"] for n, r in records.items()},
                    {n: r["key_id"] for n, r in records.items()}, root, proc.pid)
    # Drain stderr as it comes (the access log would otherwise fill the pipe and block the server).
    reader = threading.Thread(target=lambda: served.stderr.extend(line.rstrip("\n") for line in proc.stderr),
                              daemon=True)
    reader.start()
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{served.base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            if proc.poll() is not None:
                reader.join(timeout=5)
                pytest.fail("server exited: " + "\n".join(served.stderr))
            time.sleep(0.2)
    yield served
    proc.terminate()
    proc.wait(timeout=20)
    reader.join(timeout=5)


@pytest.fixture
def server(tmp_path):
    """A server of its own, for a test that changes what it serves, spends its rate limit or stops it."""
    yield from serve(tmp_path)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One server for the tests that only read from it (its banner, its docs, its port): each start indexes, adds
    keys and boots a process."""
    yield from serve(tmp_path_factory.mktemp("served"))


def test_real_server_isolates_users_rate_limits_and_deletes(server):
    base, keys, root = server.base, server.keys, server.root
    with httpx.Client(base_url=base, timeout=30) as http:
        assert http.get("/readyz").json()["status"] == "ready"
        assert http.get("/docs").status_code == 200
        alice = {"Authorization": f"Bearer {keys['alice']}"}
        out = http.post("/v1/query", json={"query": "kestrel survey"}, headers=alice).json()
        assert {r["file_path"] for r in out["results"]} == {"kb/users/alice/plan.md"}  # never bob's
        codes = [http.post("/v1/query", json={"query": "heron"}, headers=alice).status_code for _ in range(8)]
        assert codes == [200] * 5 + [429] * 3  # 6 per minute per key, the first query included
        alice = {"Authorization": f"Bearer {keys['alice-2']}"}  # alice's second key has its own budget
        answer = http.post("/v1/ask", json={"query": "when is the survey planned", "extractive": True},
                           headers=alice).json()
        assert not answer["refused"] and {c["source"] for c in answer["citations"]} == {"kb/users/alice/plan.md"}
        upload = http.post("/v1/documents", files={"file": ("n.md", b"osprey nest count: 4", "text/markdown")},
                           headers=alice)
        assert upload.status_code == 201, upload.text
        doc_id = upload.json()["document"]["doc_id"]
        bob = {"Authorization": f"Bearer {keys['bob']}"}
        assert http.delete(f"/v1/documents/{doc_id}", headers=bob).status_code == 404
        assert http.delete(f"/v1/documents/{doc_id}", headers=alice).status_code == 200
        assert not (root / "kb/users/alice/uploads/n.md").exists()
    status = json.loads(run_ragstead("status", "--json", "--root", str(root), env=ENV).stdout)  # a reader, in-process
    assert status["integrity"] == "ok" and status["documents"] == 2


def test_no_auth_is_refused_off_loopback(tmp_path):
    result = cli(tmp_path, "serve", "--host", "0.0.0.0", "--no-auth", "--as-user", "alice")
    assert result.returncode == 2 and "loopback" in result.stderr


def test_killing_the_server_during_an_upload_loses_nothing(server):
    import os
    import signal
    import threading

    base, keys, root = server.base, server.keys, server.root
    target = root / "kb/users/alice/uploads/survey.txt"
    with httpx.Client(base_url=base, timeout=30) as http:
        old = b"The heron survey counted forty nests in April."
        assert http.post("/v1/documents", files={"file": ("survey.txt", old)},
                         headers={"Authorization": f"Bearer {keys['alice']}"}).status_code == 201
    pid = server.pid

    def slow_body():  # a big replacement that trickles in, so the kill lands mid-upload
        for _ in range(400):
            yield b"replacement text " * 1000
            time.sleep(0.01)

    def upload() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server dies mid-upload: expected
            httpx.post(f"{base}/v1/documents", headers={"Authorization": f"Bearer {keys['alice']}",
                                                        "Content-Type": "multipart/form-data; boundary=B"},
                       content=_multipart(slow_body()), timeout=30)

    thread = threading.Thread(target=upload)
    thread.start()
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=60)
    assert target.read_bytes() == old  # the file on disk is the old one, whole
    out = run_ragstead("query", "heron survey nests", "--user", "alice", "--lexical-only", "--root", str(root), env=ENV)
    assert "kb/users/alice/uploads/survey.txt" in out.stdout  # the index the killed server left, read in-process


def _multipart(body):  # type: ignore[no-untyped-def]
    yield b'--B\r\nContent-Disposition: form-data; name="file"; filename="survey.txt"\r\n\r\n'
    yield from body
    yield b"\r\n--B--\r\n"


ACCESS_LINE = re.compile(r"^\S+ \S+ INFO (GET|POST|DELETE) (\S+) (\d{3}) \d+\.\dms key=(\S+)$")


def test_the_banner_says_where_the_server_is_once_it_is_up(shared_server):
    lines = shared_server.wait_for(lambda lines: any("Ctrl+C" in line for line in lines))
    end = next(i for i, line in enumerate(lines) if "Ctrl+C" in line)
    banner = "\n".join(lines[:end + 1])
    assert f"ragstead is serving http://127.0.0.1:{shared_server.port}\n" in banner
    assert f"http://127.0.0.1:{shared_server.port}/docs" in banner
    assert "2 documents, 2 chunks" in banner
    assert str(shared_server.root / "kb/rag/ragstead.db") in banner
    assert "all-MiniLM-L6-v2-onnx-int8" in banner and "auth      on" in banner
    assert not any(ACCESS_LINE.match(line) for line in lines[:end])  # up before any request was answered


def test_one_access_line_per_request_with_the_key_id_never_the_key(server):
    server.wait_for(lambda lines: any(ACCESS_LINE.match(line) for line in lines))  # the fixture's /healthz
    before = len([line for line in server.stderr if ACCESS_LINE.match(line)])
    alice = {"Authorization": f"Bearer {server.keys['alice']}"}
    secret_question = "where is the osprey nest"
    with httpx.Client(base_url=server.base, timeout=30) as http:
        assert http.get("/healthz").status_code == 200
        assert http.post("/v1/query", json={"query": secret_question}, headers=alice).status_code == 200
        assert http.post("/v1/query", json={"query": "x"},
                         headers={"Authorization": "Bearer rsk_wrong"}).status_code == 401
        assert http.get("/no/such/path?token=abc").status_code == 404
    lines = server.wait_for(lambda lines: len([x for x in lines if ACCESS_LINE.match(x)]) >= before + 4)
    access = [m.groups() for m in map(ACCESS_LINE.match, lines) if m][before:]
    assert access == [("GET", "/healthz", "200", "-"),
                      ("POST", "/v1/query", "200", server.key_ids["alice"]),
                      ("POST", "/v1/query", "401", "-"),
                      ("GET", "/no/such/path", "404", "-")]
    log = "\n".join(lines)
    assert all(key not in log for key in server.keys.values())  # key ids only, never a key
    assert secret_question not in log and "token=abc" not in log  # no bodies, no query strings


def test_a_second_server_on_the_same_port_is_one_error_line(shared_server):
    result = cli(shared_server.root, "serve", "--port", str(shared_server.port))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: port {shared_server.port} on 127.0.0.1 is in use; pass --port N or stop the other server"]


def test_an_invalid_host_is_one_error_line(tmp_path):
    result = cli(tmp_path, "serve", "--host", "no-such-host.invalid")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "no-such-host.invalid" in lines[0]


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_docs_load_their_assets_from_the_server_itself(shared_server, page):
    with httpx.Client(base_url=shared_server.base, timeout=30) as http:
        html = http.get(page)
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]
        assets = (re.findall(r"<script[^>]*\ssrc=[\"']([^\"']+)", html.text)
                  + re.findall(r"<link[^>]*\shref=[\"']([^\"']+)", html.text))
        assert any(a.endswith(".js") for a in assets), html.text
        for asset in assets:
            local = asset.startswith("/") and not asset.startswith("//")
            assert local or asset.startswith("http://127.0.0.1:"), f"{page} loads {asset} from elsewhere"
            fetched = http.get(asset)
            assert fetched.status_code == 200 and len(fetched.content) > 1000, asset
        missing = http.get("/static-offline-docs/no-such-file.js")
        assert missing.status_code == 404 and set(missing.json()) == {"error"}  # still the JSON error shape
