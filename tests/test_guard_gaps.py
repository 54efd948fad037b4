"""The guard's gaps of issue #35 (item 7), closed: each case here was let through before. In-process
`guard.check` over a real git repository in a temp dir; nothing is pushed anywhere."""

from __future__ import annotations

import gzip
import io
import subprocess
import zipfile
from pathlib import Path

import pytest

from ragstead.services import guard

KEY = "sk-proj-" + "Zq3xW9vLk2Rt7YbN4mPc8HsD1fGj6Ua0"  # pragma: allowlist secret (a made-up key)
PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF"  # pragma: allowlist secret
WRAPPED = ("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"  # pragma: allowlist secret
           "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"  # pragma: allowlist secret
           "NMoSfm76oqFvAp8Gy0iz5sxjZmSnXyCdPEovGhLa0VzMaQ8s+CLOyS56YyCFGeJZ\n")  # pragma: allowlist secret


def _git(root: Path, *args: str) -> str:
    env = {"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Ana",
           "GIT_AUTHOR_EMAIL": "ana@example.org", "GIT_COMMITTER_NAME": "Ana", "GIT_COMMITTER_EMAIL": "ana@example.org",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "README.md").write_text("hello\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "start")
    return tmp_path


def _blocked(repo: Path, files: dict[str, bytes]) -> list[guard.Finding]:
    for rel, data in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    return guard.check(repo, paths=[repo / rel for rel in files]).blocked


def _zip(members: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return out.getvalue()


GAPS = [
    ("utf16.txt", f"key = {KEY}\n".encode("utf-16")),
    ("utf16le.txt", f"key = {KEY}\n".encode("utf-16-le")),
    ("nul.txt", b"\0" + f"the key is {KEY}\n".encode()),
    ("bundle.zip", _zip({"app/.env": "A=1\n"})),
    ("notes.zip", _zip({"notes.txt": f"my key {KEY}\n"})),
    ("notes.txt.gz", gzip.compress(f"my key {KEY}\n".encode(), mtime=0)),
    ("prose.md", f"Use the token {PAT} for the CI.\n".encode()),
    ("key.txt", WRAPPED.encode()),
    ("db.md", b"Connect to postgresql://bob:p4ss!w0rd&x#y@db.example.com/app\n"),
    ("db2.md", b"Connect to postgresql://bob:p4ss%21w0rd@db.example.com/app\n"),
    ("pgpass.txt", b"db.example.com:5432:app:bob:hunter2\n"),
    ("KB/users/ana/note.md", b"a private note\n"),
]


# Ids are the names: an id made of the bytes changes with the zip/gzip clock, and xdist workers
# that collect at different seconds then refuse to run (CI failed on that once).
@pytest.mark.parametrize(("name", "data"), GAPS, ids=[name for name, _ in GAPS])
def test_each_gap_is_blocked(repo: Path, name: str, data: bytes) -> None:
    blocked = _blocked(repo, {name: data})
    assert [f.path for f in blocked] == [name], blocked


def test_a_plain_binary_and_a_clean_text_still_pass(repo: Path) -> None:
    assert _blocked(repo, {"image.bin": bytes(range(256)) * 4, "notes.md": b"Nothing secret here.\n"}) == []


def test_secrets_in_commit_and_tag_messages_are_blocked(repo: Path) -> None:
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "a.md").write_text("a\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"add a\n\nthe deploy key is {KEY}")
    report = guard.check(repo, rev_range=f"{base}..HEAD")
    assert [f.rule for f in report.blocked] == ["secret-message"] and KEY not in str(report.to_dict())
    _git(repo, "tag", "-a", "v1", "-m", f"release; token {PAT}")
    tag = _git(repo, "rev-parse", "v1").strip()
    head = _git(repo, "rev-parse", "HEAD").strip()
    pushed = guard.check(repo, pre_push=[f"refs/tags/v1 {tag} refs/tags/v1 {'0' * 40}",
                                         f"refs/heads/main {head} refs/heads/main {base}"], remote="origin")
    assert {f.path for f in pushed.blocked} >= {"the message of tag v1"}
