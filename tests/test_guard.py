"""The guard on real git: a repository in a temp dir with a bare remote, the hook `ragstead guard install`
writes, and real `git push` attempts. Private paths and secret-like files or contents are blocked and named
with the reason; a clean push goes through; the guard reads nothing outside the repository and copes with
binary and huge files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-proj-" + "Zq3xW9vLk2Rt7YbN4mPc8HsD1fGj6Ua0"  # pragma: allowlist secret (a made-up key)


def environment(home: Path) -> dict[str, str]:
    return {**OFFLINE_ENV, "HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / "gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Ana", "GIT_AUTHOR_EMAIL": "ana@example.org",
            "GIT_COMMITTER_NAME": "Ana", "GIT_COMMITTER_EMAIL": "ana@example.org"}


class Repo:
    """A work tree with a bare remote `origin`, and helpers to run git and ragstead in it."""

    def __init__(self, base: Path, copied: bool = False) -> None:
        """A new pair in `base`; `copied`: the pair another Repo made, copied to `base` (origin pointed at the copy)."""
        self.root = base / "work"
        self.remote = base / "remote.git"
        self.env = environment(base)
        if copied:
            self.git("remote", "set-url", "origin", str(self.remote))
            return
        (base / "gitconfig").write_text("")
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(self.remote)], check=True, env=self.env)
        self.root.mkdir()
        self.git("init", "-q", "-b", "main")
        self.git("remote", "add", "origin", str(self.remote))

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["git", *args], cwd=self.root, capture_output=True, text=True, env=self.env,
                                timeout=300)
        assert not check or result.returncode == 0, result.stdout + result.stderr
        return result

    def ragstead(self, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        result = run_ragstead(*args, env=self.env, cwd=self.root)
        assert expect is None or result.returncode == expect, result.stdout + result.stderr
        return result

    def commit(self, files: dict[str, str | bytes], message: str = "change") -> None:
        write_files(self.root, files)
        self.git("add", "-A", "--", *files)
        self.git("commit", "-q", "-m", message)

    def push(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return self.git("push", "origin", "HEAD:main", *extra, check=False)

    def remote_head(self) -> str | None:
        result = subprocess.run(["git", "--git-dir", str(self.remote), "rev-parse", "--verify", "-q", "main"],
                                capture_output=True, text=True, env=self.env)
        return result.stdout.strip() or None

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").stdout.strip()


@pytest.fixture(scope="module")
def pushed_once(tmp_path_factory) -> Path:
    """A repository with the guard installed and a first commit pushed through it, made once: its push runs the
    hook, a `python -m ragstead` process. Each test works on a copy (`repo`)."""
    base = tmp_path_factory.mktemp("guarded")
    made = Repo(base)
    made.commit({"docs/intro.md": "# Intro\n\nHow to use this repository."}, "intro")
    made.ragstead("guard", "install")
    assert made.push().returncode == 0
    return base


@pytest.fixture
def repo(tmp_path, pushed_once):
    shutil.copytree(pushed_once, tmp_path, symlinks=True, dirs_exist_ok=True)
    return Repo(tmp_path, copied=True)


def test_a_push_that_adds_a_private_note_is_blocked_and_names_it(repo):
    published = repo.remote_head()
    repo.commit({"kb/users/a/note.md": "Ana's private note: the heron survey moves to May."}, "note")
    pushed = repo.push()
    assert pushed.returncode != 0
    assert "blocked kb/users/a/note.md: kb/ holds private data" in pushed.stderr
    assert "git push --no-verify" in pushed.stderr
    assert repo.remote_head() == published  # nothing reached the remote


def test_a_push_that_adds_an_env_file_with_a_key_is_blocked_without_printing_the_key(repo):
    published = repo.remote_head()
    repo.commit({".env": f"OPENAI_API_KEY={KEY}\n"}, "env")
    pushed = repo.push()
    assert pushed.returncode != 0 and "blocked .env: a secret-like file name (.env)" in pushed.stderr
    assert KEY not in pushed.stderr + pushed.stdout
    assert repo.remote_head() == published


def test_a_push_that_adds_a_guide_goes_through(repo):
    repo.commit({"docs/guide.md": "# Guide\n\nInstall with pip, then run `ragstead init`."}, "guide")
    pushed = repo.push()
    assert pushed.returncode == 0, pushed.stderr
    assert repo.remote_head() == repo.head()
    assert "ok: 1 file in the push to origin" in pushed.stderr


def test_no_verify_is_the_escape_hatch(repo):
    repo.commit({"kb/README.md": "# kb\n", "kb/team/plan.md": "Team plan."}, "kb")
    assert repo.push().returncode != 0
    assert repo.push("--no-verify").returncode == 0 and repo.remote_head() == repo.head()


def test_a_secret_added_and_removed_within_the_push_is_still_blocked(repo):
    repo.commit({"src/settings.py": f'API_TOKEN = "{KEY}"\n'}, "oops")
    (repo.root / "src/settings.py").write_text('API_TOKEN = os.environ["API_TOKEN"]\n')
    repo.git("commit", "-q", "-am", "fix")
    pushed = repo.push()
    assert pushed.returncode != 0
    assert re.search(r"blocked src/settings\.py: secret-like content: .*\(line 1\)", pushed.stderr)
    assert KEY not in pushed.stderr


def test_the_allow_list_and_a_new_branch_push_only_what_the_remote_lacks(repo):
    repo.commit({"kb/README.md": "# kb: private data, never committed\n", "kb/.gitkeep": ""}, "markers")
    assert repo.push().returncode == 0  # the two marker files may be published
    repo.git("checkout", "-q", "-b", "feature")
    repo.commit({"docs/feature.md": "A feature."}, "feature")
    pushed = repo.git("push", "origin", "feature", check=False)
    assert pushed.returncode == 0, pushed.stderr
    assert "ok: 1 file in the push to origin" in pushed.stderr  # the commits main already has are not sent


def test_check_modes_for_ci(repo):
    write_files(repo.root, {".env.production": "DB_PASSWORD=hunter2-but-longer\n", "docs/ok.md": "fine"})
    repo.git("add", ".env.production", "docs/ok.md")
    staged = repo.ragstead("guard", "check", "--staged", "--json", expect=1)
    report = __import__("json").loads(staged.stdout)
    assert report["what"] == "the staged changes" and report["checked"] == 2 and not report["ok"]
    assert report["blocked"] == [{"path": ".env.production", "rule": "secret-file",
                                  "reason": "a secret-like file name (.env.*)", "commit": None}]
    repo.git("commit", "-q", "-m", "env")
    ranged = repo.ragstead("guard", "check", "--range", "HEAD~1..HEAD", expect=1)
    assert "blocked .env.production" in ranged.stdout and "the commits HEAD~1..HEAD" in ranged.stdout
    assert "blocked .env.production" in repo.ragstead("guard", "check", expect=1).stdout  # every tracked file
    assert repo.ragstead("guard", "check", "docs", "--json").stdout.count('"ok": true') == 1
    assert repo.ragstead("guard", "check", "--range", "--oops", expect=2).stderr.startswith("error: --range")
    both = repo.ragstead("guard", "check", "--staged", "docs", expect=2)
    assert "choose one of" in both.stderr


def test_binary_and_huge_files(repo):
    binary = b"\x89PNG\r\n\x1a\n\x00\x00" + KEY.encode() + bytes(2 << 20)  # a key inside a 2 MiB binary
    write_files(repo.root, {"docs/diagram.png": binary, "docs/big.txt": "plain words\n" * 200_000,
                            "docs/small.txt": "small and harmless\n"})
    repo.git("add", "docs")
    report = repo.ragstead("guard", "check", "--staged", "--max-scan-mb", "1", expect=1).stdout
    assert "blocked docs/big.txt: too large to scan for secrets (2.3 MiB, over --max-scan-mb 1)" in report
    assert "diagram.png" not in report and "small.txt" not in report  # binary: its name is checked, not its bytes
    assert repo.ragstead("guard", "check", "docs/diagram.png", "docs/small.txt", "--max-scan-mb", "1").returncode == 0


def test_it_never_reads_outside_the_repository(repo, tmp_path):
    outside = tmp_path / "outside-secret.txt"
    outside.write_text(f"OPENAI_API_KEY={KEY}\n")
    error = repo.ragstead("guard", "check", str(outside), expect=2)
    assert "is outside the repository" in error.stderr
    os.symlink(outside, repo.root / "docs" / "link.txt")
    # The link is checked as a link (its name), never followed: the secret behind it is not read.
    assert repo.ragstead("guard", "check", "docs/link.txt").returncode == 0
    repo.git("add", "docs/link.txt")
    assert repo.ragstead("guard", "check", "--staged").returncode == 0


def test_a_marked_line_or_a_baseline_accepts_a_known_finding(repo):
    write_files(repo.root, {"docs/example.md": f"Set it like this: OPENAI_API_KEY={KEY}\n"})
    assert repo.ragstead("guard", "check", "docs/example.md", expect=1).returncode == 1
    write_files(repo.root, {"docs/example.md": f"Set it like this: OPENAI_API_KEY={KEY}  <!-- pragma: allowlist "
                                               "secret -->\n"})
    assert repo.ragstead("guard", "check", "docs/example.md").returncode == 0


def test_install_keeps_a_hook_of_your_own_and_runs_it_after_the_guard(tmp_path):
    repo = Repo(tmp_path)
    hook = repo.root / ".git" / "hooks" / "pre-push"
    marker = tmp_path / "own-hook-ran"
    hook.write_text(f"#!/bin/sh\ncat > /dev/null\ntouch {marker}\n")
    hook.chmod(0o755)
    refused = repo.ragstead("guard", "install", expect=2)
    assert "--force" in refused.stderr and "ragstead" not in hook.read_text()
    installed = repo.ragstead("guard", "install", "--force")
    assert "pre-push.local" in installed.stdout and (hook.parent / "pre-push.local").exists()
    repo.commit({"docs/a.md": "A."})
    assert repo.push().returncode == 0 and marker.exists()
    assert repo.ragstead("guard", "install").returncode == 0  # installing again replaces our own hook


def test_a_pre_commit_hook_blocks_the_commit(tmp_path):
    repo = Repo(tmp_path)
    repo.ragstead("guard", "install", "--hook", "pre-commit")
    write_files(repo.root, {"id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA=\n"})
    repo.git("add", "id_rsa")
    committed = repo.git("commit", "-q", "-m", "key", check=False)
    assert committed.returncode != 0 and "blocked id_rsa: a secret-like file name (id_rsa*)" in committed.stderr
    assert repo.git("rev-parse", "--verify", "-q", "HEAD", check=False).returncode != 0  # no commit was made


def test_personal_mode_roots_are_private_but_the_project_files_are_not(tmp_path):
    repo = Repo(tmp_path)
    write_files(repo.root, {"ragstead.toml": '[ragstead]\nowner = "sam"\nroots = ["."]\n',
                            "journal/2025-03-01.md": "Dear diary.", ".gitignore": "/kb/rag/\n"})
    repo.git("add", "-A")
    report = repo.ragstead("guard", "check", "--staged", expect=1).stdout
    assert "blocked journal/2025-03-01.md: private by the project's path rules" in report
    assert "ragstead.toml" not in report and ".gitignore" not in report


def test_the_pre_commit_framework_entry_runs_as_the_framework_runs_it(repo):
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    [hook] = [h for h in hooks if h["id"] == "ragstead-guard"]
    assert hook["pass_filenames"] is True and "pre-push" in hook["stages"]
    entry = hook["entry"].split()
    assert entry[:1] == ["ragstead"]
    write_files(repo.root, {"kb/users/a/x.md": "private", "docs/y.md": "public"})

    def framework(*files: str) -> int:  # the framework runs `entry FILES...` at the top of the work tree
        return repo.ragstead(*entry[1:], *files, expect=None).returncode

    assert framework("docs/y.md") == 0 and framework("docs/y.md", "kb/users/a/x.md") == 1


def test_init_writes_the_boundary_git_then_ignores(tmp_path):
    repo = Repo(tmp_path)
    repo.ragstead("init", ".", "--layout", "team", "--owner", "alice")
    ignored = ["kb/users/alice/x.md", "kb/rag/ragstead.db", "kb/team/plan.md", "artifacts/dossiers/a.md", ".env",
               ".env.local", "certs/server.pem", "id_rsa", "config/secrets.json"]
    kept = ["kb/README.md", "kb/.gitkeep", "docs/guide.md", ".env.example", "id_rsa.pub", "ragstead.toml"]
    assert check_ignore(repo.root, ignored + kept) == set(ignored)


def test_the_repositorys_own_gitignore_keeps_private_data_and_secrets_out():
    ignored = ["kb/users/a/note.md", "kb/rag/ragstead.db", "artifacts/sanity_output.json", ".env", ".env.local",
               "secrets.json", "id_rsa", "deploy/key.pem", "tls/server.key"]
    kept = ["kb/README.md", "kb/.gitkeep", ".env.example", "docs/guide.md", "id_rsa.pub"]
    assert check_ignore(REPO, ignored + kept) == set(ignored)


def check_ignore(root: Path, paths: list[str]) -> set[str]:
    result = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=root, input="\n".join(paths),
                            capture_output=True, text=True, env={**OFFLINE_ENV, "GIT_CONFIG_NOSYSTEM": "1"})
    return set(result.stdout.split())


@pytest.mark.slow
def test_the_readme_scenario_runs(tmp_path):
    """The README's "Keep it fresh and private" block, run as written (bash -e), in a scratch folder."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Keep it fresh and private", 1)[1].split("\n## ", 1)[0]
    script = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    env = environment(tmp_path) | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    (tmp_path / "gitconfig").write_text("")
    result = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "blocked kb/users/alice/note.md" in out and "blocked .env" in out
    assert "stale: 1 new, 1 changed, 1 deleted" in out and "fresh: 0 new" in out
