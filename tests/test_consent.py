"""Consent before egress: an LLM key in the environment alone sends nothing off the machine; a remote answerer
is used only when the config or a flag names it, and local-only documents never go into its prompt
(issue #35, item 3)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragstead
from ragstead.answer.base import Context
from ragstead.answer.consent import consent_hint, is_loopback_url
from ragstead.cli import app

KEYS = {"OPENAI_API_KEY": "sk-test-not-a-real-key-000000000000", "GEMINI_API_KEY": "gm-test"}
_CONNECTIONS: list[tuple[str, object]] = []
_WATCHING = [False]


def _audit(event: str, args: tuple) -> None:  # type: ignore[type-arg]
    if _WATCHING[0] and event in ("socket.getaddrinfo", "socket.connect"):
        _CONNECTIONS.append((event, args[0] if event == "socket.getaddrinfo" else args[1]))


sys.addaudithook(_audit)  # an audit hook cannot be removed; it only records while a test watches


def _non_loopback() -> list[tuple[str, object]]:
    def local(target: object) -> bool:
        host = target[0] if isinstance(target, tuple) else target
        return host in (None, "localhost") or (isinstance(host, str) and is_loopback_url(f"http://[{host}]/")
                                               if ":" in str(host) else is_loopback_url(f"http://{host}/"))
    return [c for c in _CONNECTIONS if not local(c[1])]


@pytest.fixture
def embedder(fake_embedder):  # type: ignore[no-untyped-def]
    return fake_embedder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kb" / "personal").mkdir(parents=True)
    (tmp_path / "kb" / "personal" / "health.md").write_text("# Health\nMy blood type is AB negative.\n",
                                                            encoding="utf-8")
    (tmp_path / "kb" / "diary.md").write_text("---\nlocal_only: true\n---\n# Diary\nMy blood type is AB "
                                              "negative, said the nurse.\n", encoding="utf-8")
    (tmp_path / "kb" / "garden.md").write_text("# Garden\nMy blood type is noted in the garden diary too.\n",
                                               encoding="utf-8")
    return tmp_path


class RemoteRecorder:
    """A remote answerer that records what it was handed and answers from its first context."""

    name = "remote-recorder"
    remote = True

    def __init__(self) -> None:
        self.sources: list[str] = []

    def answer(self, question: str, contexts: list[Context], on_text=None) -> str:  # type: ignore[no-untyped-def]
        self.sources = [c.source for c in contexts]
        return f"{contexts[0].text.split('.')[0]}. [1]"  # a sentence of its source: the citation check keeps it


def test_a_key_alone_never_makes_a_remote_answerer(project: Path, embedder, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    with ragstead.open(project, embedder=embedder) as kb:
        assert [p.name for p in kb.providers()] == ["extractive"]
        assert "answerer = \"openai\"" in (kb.consent_hint() or "")
        assert (kb.consent_hint() or "").startswith("answered on this machine: openai and gemini are set up")
        kb.index()
        _CONNECTIONS.clear()
        _WATCHING[0] = True
        try:
            kb.ask("what is my blood type")
            kb.search("what is my blood type")
        finally:
            _WATCHING[0] = False
    assert _non_loopback() == []


def test_config_or_flag_names_the_remote_answerer(project: Path, embedder, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["OPENAI_API_KEY"])
    with ragstead.open(project, embedder=embedder) as kb:
        assert kb.providers(llm=["openai"])[0].name == "openai-compatible:gpt-4o-mini"
    (project / "ragstead.toml").write_text('[ragstead]\nanswerer = "openai"\n', encoding="utf-8")
    with ragstead.open(project, embedder=embedder) as kb:
        assert kb.providers()[0].remote and kb.consent_hint() is None
    assert consent_hint({"RAGSTEAD_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, ()) is None  # loopback: local


@pytest.mark.parametrize("url", ["http://models.localhost:11434/v1", "http://ollama.localhost./v1",
                                 "http://localhost.example.com/v1", "http://127.0.0.1.nip.io/v1"])
def test_a_name_that_only_looks_local_is_remote(url: str) -> None:
    # *.localhost goes to DNS on many machines (this one included): an endpoint there needs consent, is logged
    assert not is_loopback_url(url)
    assert consent_hint({"RAGSTEAD_OPENAI_BASE_URL": url}, ()) is not None


@pytest.mark.parametrize("url", ["http://localhost:11434/v1", "http://LOCALHOST./v1", "http://127.0.0.2:8080/v1",
                                 "http://[::1]:11434/v1"])
def test_loopback_endpoints_stay_local(url: str) -> None:
    assert is_loopback_url(url)


def test_local_only_documents_are_withheld_from_a_remote_answerer(project: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    (project / "ragstead.toml").write_text('[ragstead]\nlocal_only = ["kb/personal/**"]\n', encoding="utf-8")
    recorder = RemoteRecorder()
    with ragstead.open(project, embedder=embedder) as kb:
        kb.index()
        result = kb.ask("what is my blood type", answerers=[recorder], min_similarity=-1)
    assert recorder.sources == ["kb/garden.md"]
    assert set(result.withheld) == {"kb/personal/health.md", "kb/diary.md"}
    assert set(result.to_dict()["withheld"]) == set(result.withheld)


def test_cli_ask_prints_the_opt_in_hint(project: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["OPENAI_API_KEY"])
    runner = CliRunner()
    assert runner.invoke(app, ["index", "--root", str(project), "-q"]).exit_code == 0
    _CONNECTIONS.clear()
    _WATCHING[0] = True
    try:
        result = runner.invoke(app, ["ask", "what is my blood type", "--root", str(project)])
    finally:
        _WATCHING[0] = False
    assert result.exit_code == 0, result.output
    assert "--llm openai" in result.output
    assert _non_loopback() == []



def test_one_answerers_list_orders_the_chain_and_consents_only_where_the_user_wrote_it(
        project: Path, embedder, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from helpers.project import LLM_ENV

    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    config = project / "ragstead.toml"
    # Written in the project's config: the order, and consent to the remote names in it.
    config.write_text('[ragstead]\nanswerers = ["gemini", "extractive"]\n', encoding="utf-8")
    with ragstead.open(project, embedder=embedder) as kb:
        assert [p.name.split(":")[0] for p in kb.providers()] == ["gemini", "extractive"]
        assert kb.consent_hint() is None
        # --llm consents for one question, and an answerer the order leaves out is tried first.
        assert [p.name.split(":")[0] for p in kb.providers(llm=["openai"])] == ["openai-compatible", "extractive"]
    # The same keys in the environment only order the chain: no consent, nothing remote.
    config.unlink()
    monkeypatch.setenv("RAGSTEAD_ANSWERERS", "gemini,openai,extractive")
    monkeypatch.setenv("RAGSTEAD_ANSWERER", "openai")
    with ragstead.open(project, embedder=embedder) as kb:
        assert [p.name for p in kb.providers()] == ["extractive"] and kb.consent_hint()
    monkeypatch.delenv("RAGSTEAD_ANSWERERS")
    monkeypatch.delenv("RAGSTEAD_ANSWERER")
    # The older `answerer = "x"`: x first, then the defaults; consent to x only.
    config.write_text('[ragstead]\nanswerer = "gemini"\n', encoding="utf-8")
    with ragstead.open(project, embedder=embedder) as kb:
        assert kb.settings.answer_order == ("gemini", "openai", "extractive")
        assert [p.name.split(":")[0] for p in kb.providers()] == ["gemini", "extractive"]
    # A library caller writes them too: consent, like the config file.
    config.unlink()
    with ragstead.open(project, embedder=embedder, answerers=("openai", "extractive")) as kb:
        assert [p.name.split(":")[0] for p in kb.providers()] == ["openai-compatible", "extractive"]
