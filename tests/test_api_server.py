"""A real `ragstead serve` (uvicorn) process on 127.0.0.1, driven over HTTP like any client."""

import json
import socket
import subprocess
import sys
import time

import httpx
import pytest

from helpers.project import OFFLINE_ENV, write_files

ENV = OFFLINE_ENV


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(root, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragstead", *args, "--root", str(root)],
                          capture_output=True, text=True, env=ENV, timeout=120)


@pytest.fixture
def server(tmp_path):
    write_files(tmp_path, {
        "kb/users/alice/plan.md": "Alice plans the heron survey for April.",
        "kb/users/bob/plan.md": "Bob plans the kestrel survey for May.",
    })
    assert cli(tmp_path, "index", "--quiet").returncode == 0
    keys = {name: json.loads(cli(tmp_path, "keys", "add", "--user", user).stdout)["key"]
            for name, user in (("alice", "alice"), ("bob", "bob"), ("alice-2", "alice"))}
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "ragstead", "serve", "--port", str(port), "--root", str(tmp_path),
                             "--rate-per-minute", "6", "--burst", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {proc.stderr.read()}")
            time.sleep(0.2)
    yield base, keys, tmp_path
    proc.terminate()
    proc.wait(timeout=20)


def test_real_server_isolates_users_rate_limits_and_deletes(server):
    base, keys, root = server
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
    status = json.loads(cli(root, "status").stdout)
    assert status["integrity"] == "ok" and status["documents"] == 2


def test_no_auth_is_refused_off_loopback(tmp_path):
    result = cli(tmp_path, "serve", "--host", "0.0.0.0", "--no-auth", "--as-user", "alice")
    assert result.returncode == 2 and "loopback" in result.stderr


def test_killing_the_server_during_an_upload_loses_nothing(server):
    import os
    import signal
    import threading

    base, keys, root = server
    target = root / "kb/users/alice/uploads/survey.txt"
    with httpx.Client(base_url=base, timeout=30) as http:
        old = b"The heron survey counted forty nests in April."
        assert http.post("/v1/documents", files={"file": ("survey.txt", old)},
                         headers={"Authorization": f"Bearer {keys['alice']}"}).status_code == 201
    pid = int(subprocess.run(["pgrep", "-f", f"ragstead serve --port {base.rsplit(':', 1)[1]}"],
                             capture_output=True, text=True).stdout.split()[0])

    def slow_body():  # a big replacement that trickles in, so the kill lands mid-upload
        for _ in range(400):
            yield b"replacement text " * 1000
            time.sleep(0.01)

    def upload() -> None:
        try:
            httpx.post(f"{base}/v1/documents", headers={"Authorization": f"Bearer {keys['alice']}",
                                                        "Content-Type": "multipart/form-data; boundary=B"},
                       content=_multipart(slow_body()), timeout=30)
        except httpx.HTTPError:
            pass  # the server died: expected

    thread = threading.Thread(target=upload)
    thread.start()
    time.sleep(1.0)
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=60)
    assert target.read_bytes() == old  # the file on disk is the old one, whole
    out = cli(root, "query", "heron survey nests", "--user", "alice", "--lexical-only")
    assert "kb/users/alice/uploads/survey.txt" in out.stdout


def _multipart(body):  # type: ignore[no-untyped-def]
    yield b'--B\r\nContent-Disposition: form-data; name="file"; filename="survey.txt"\r\n\r\n'
    yield from body
    yield b"\r\n--B--\r\n"
