"""`ragstead chat` in a real terminal: tmux (Debian's package, which .ci/run installs) runs the command in a
pseudo-terminal, the test types into it (`send-keys`) and reads the screen (`capture-pane`), as a person would.

The loop prompts, answers with citations, carries the conversation's subject into a follow-up (and says what it
asked), recalls earlier questions with the up arrow, starts over with /new, and leaves with /quit (exit 0) or
Ctrl-D. The tmux server is the test's own (a socket in a temporary folder), never the developer's."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.project import OFFLINE_ENV, write_files
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase

pytestmark = pytest.mark.terminal

TMUX = shutil.which("tmux") or "/usr/bin/tmux"
WIDTH, HEIGHT = 100, 60
FILES = {
    "ragstead.toml": '[ragstead]\nroots = ["kb"]\nowner = "alice"\n',
    "kb/users/alice/lease.md": "# Lease – flat on Elm Street\n\nThe lease ends on 31 March 2027.\n\nThe deposit is "
                               "2,400 euros, paid into a deposit account.\n\nThe landlord is Mrs. Novak; call her "
                               "about repairs.\n",
    "kb/users/bob/lease.md": "# Lease – Bob's flat\n\nBob's deposit is 9,999 euros.\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder) -> Path:
    root = tmp_path_factory.mktemp("terminal-chat")
    write_files(root, FILES)
    with KnowledgeBase(load_settings(root), embedder=real_embedder) as kb:
        kb.index()
    return root


class Terminal:
    """One tmux session on a private server, WIDTH x HEIGHT, running `command`, then printing its exit code."""

    def __init__(self, socket: Path, command: list[str]) -> None:
        self.socket = socket
        shell = f"{shlex.join(command)}; echo \"[exit $?]\"; sleep 60"
        self.tmux("new-session", "-d", "-s", "chat", "-x", str(WIDTH), "-y", str(HEIGHT), shell)

    def tmux(self, *args: str) -> str:
        done = subprocess.run([TMUX, "-S", str(self.socket), *args], capture_output=True, text=True,
                              env={**OFFLINE_ENV, "TERM": "xterm-256color"}, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "chat", "-l", text)
        self.tmux("send-keys", "-t", "chat", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "chat", "-S", "-500")

    def wait_for(self, text: str, count: int = 1, seconds: float = 90) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} (x{count}) never showed; the screen:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run([TMUX, "-S", str(self.socket), "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def terminal(project, tmp_path) -> Iterator[Terminal]:
    if not Path(TMUX).is_file():
        pytest.fail(f"no tmux at {TMUX}: install Debian's package (`apt-get install -y tmux`, as .ci/run does)")
    command = [sys.executable, "-m", "ragstead", "chat", "--root", str(project), "--user", "alice", "--extractive"]
    session = Terminal(tmp_path / "tmux.sock", command)
    yield session
    session.close()


def test_a_conversation_in_a_real_terminal(terminal):
    terminal.wait_for("you> ")
    assert "Ask about your documents; /new starts a new conversation, /quit (or Ctrl-D) leaves." in terminal.screen()
    terminal.type("When does the lease end?")
    screen = terminal.wait_for("answered by extractive")
    assert "[1] kb/users/alice/lease.md (Lease – flat on Elm Street):" in screen
    assert "31 March 2027" in screen

    terminal.type("And how much is the deposit?")
    screen = terminal.wait_for("answered by extractive", count=2)
    assert "asked as: How much is the deposit? (Lease – flat on Elm Street)" in screen
    assert "2,400 euros" in screen and "9,999" not in screen and "kb/users/bob" not in screen
    assert max(len(line) for line in screen.splitlines()) <= WIDTH  # wrapped to the terminal

    terminal.tmux("send-keys", "-t", "chat", "Up")  # this session's history: the last question comes back
    terminal.wait_for("you> And how much is the deposit?", count=2)
    terminal.tmux("send-keys", "-t", "chat", "C-u")

    terminal.type("/new")
    terminal.wait_for("(a new conversation)")
    terminal.type("And the deposit?")
    screen = terminal.wait_for("answered by extractive", count=3)
    assert screen.count("asked as:") == 1  # a new conversation: nothing to lean on, asked as typed

    terminal.type("/quit")
    terminal.wait_for("[exit 0]")


def test_ctrl_d_leaves_and_a_bad_turn_does_not_end_the_loop(terminal):
    terminal.wait_for("you> ")
    terminal.type("/frobnicate")
    terminal.wait_for("unknown command /frobnicate: /new starts a new conversation")
    terminal.type("x" * 5000)
    terminal.wait_for("error: the question is 5000 characters")
    terminal.type("When does the lease end?")
    terminal.wait_for("answered by extractive")
    terminal.tmux("send-keys", "-t", "chat", "C-d")
    terminal.wait_for("[exit 2]")  # one turn failed: the loop went on, and the exit code says so
