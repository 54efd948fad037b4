"""The answerer registry (answer/registry.py): another package adds an answerer with one entry point in
"ragstead.answerers"; it is remote (consent before egress, local-only documents withheld, each call in the egress
log) unless it declares itself local; it cannot take a built-in's name; an unknown name is one error line."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import ragstead
from helpers.plugin_package import install
from ragstead.answer import registry
from ragstead.cli import app
from ragstead.core import egress
from ragstead.errors import ConfigError
from ragstead.plugins import Registry

# A third-party package as pip would install it: its module and a dist-info whose entry_points.txt names two
# answerers, a remote one (it says nothing about where its text goes) and one that declares itself local, and
# tries to take the built-in "openai" name.
PLUGIN_MODULE = '''
from ragstead.answer.registry import AnswererKind

HANDED = []


class Echo:
    def __init__(self, name):
        self.name = name

    def answer(self, question, contexts, on_text=None):
        HANDED.append((self.name, [c.source for c in contexts]))
        return contexts[0].text.split(".")[0] + ". [1]"


ECHO = AnswererKind(lambda setup: Echo("echo"))
NEARBY = AnswererKind(lambda setup: Echo("nearby"), local=True)
'''

ENTRY_POINTS = """[ragstead.answerers]
echo = ragstead_echo_answerer:ECHO
nearby = ragstead_echo_answerer:NEARBY
openai = ragstead_echo_answerer:ECHO
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The plugin installed on sys.path, a registry that has not read the entry points yet, no LLM keys."""
    site = install(tmp_path / "site", "ragstead-echo-answerer", ENTRY_POINTS, {"ragstead_echo_answerer": PLUGIN_MODULE})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "ANSWERERS", Registry("ragstead.answerers", registry.ANSWERERS.builtins))
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "RAGSTEAD_OPENAI_BASE_URL", "RAGSTEAD_ANSWERERS",
                 "RAGSTEAD_ANSWERER"):
        monkeypatch.delenv(name, raising=False)
    yield
    sys.modules.pop("ragstead_echo_answerer", None)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "kb").mkdir(parents=True)
    (root / "kb" / "tides.md").write_text("# Tides\n\nSpring tides follow the new and the full moon.\n")
    (root / "kb" / "diary.md").write_text("---\nlocal_only: true\n---\n# Diary\n\nSpring tides flooded the "
                                          "garden after the full moon.\n")
    return root


def _handed() -> list[tuple[str, list[str]]]:
    return sys.modules["ragstead_echo_answerer"].HANDED if "ragstead_echo_answerer" in sys.modules else []


@pytest.mark.usefixtures("plugin")
def test_a_plugin_answerer_without_consent_is_never_called(project, fake_embedder, monkeypatch):
    """Installed and even first in the environment's order, it sends nothing until the user names it."""
    monkeypatch.setenv("RAGSTEAD_ANSWERERS", "echo,extractive")  # the environment only orders the chain
    with ragstead.open(project, embedder=fake_embedder) as kb:
        assert [p.name for p in kb.providers()] == ["extractive"]
        kb.index()
        result = kb.ask("when do spring tides come", min_similarity=-1)
        hint = kb.consent_hint()
    assert result.provider == "extractive"
    assert _handed() == []
    assert hint is not None and "--llm echo" in hint
    assert not kb.egress_file.exists()


@pytest.mark.usefixtures("plugin")
def test_a_consented_plugin_answerer_is_remote_and_logged(project, fake_embedder):
    (project / "ragstead.toml").write_text('[ragstead]\nanswerers = ["echo", "extractive"]\n')
    with ragstead.open(project, embedder=fake_embedder) as kb:
        kb.index()
        result = kb.ask("when do spring tides come", min_similarity=-1)
        log = egress.read(kb.egress_file)
    assert result.provider == "echo"
    assert _handed() == [("echo", ["kb/tides.md"])]  # the local-only diary stays on the machine
    assert result.withheld == ("kb/diary.md",)
    assert [(r["host"], r["purpose"], r["documents"]) for r in log] == [
        ("plugin:echo", "llm prompt: echo", ["kb/tides.md"])]
    assert log[0]["bytes_sent"] > 0 and len(log[0]["payload_sha256"]) == 64


@pytest.mark.usefixtures("plugin")
def test_ask_llm_consents_to_a_plugin_for_one_question(project):
    runner = CliRunner()
    assert runner.invoke(app, ["index", "--root", str(project), "-q"]).exit_code == 0
    result = runner.invoke(app, ["ask", "when do spring tides come", "--root", str(project), "--llm", "echo",
                                 "--min-similarity", "-1", "--json"])
    assert result.exit_code == 0, result.output
    assert '"provider": "echo"' in result.output
    assert [name for name, _ in _handed()] == ["echo"]


@pytest.mark.usefixtures("plugin")
def test_a_plugin_that_declares_itself_local_needs_no_consent(project, fake_embedder, monkeypatch):
    monkeypatch.setenv("RAGSTEAD_ANSWERERS", "nearby,extractive")
    with ragstead.open(project, embedder=fake_embedder) as kb:
        kb.index()
        result = kb.ask("when do spring tides come", min_similarity=-1)
    assert result.provider == "nearby"
    assert sorted(_handed()[0][1]) == ["kb/diary.md", "kb/tides.md"]  # local: it may read local-only notes
    assert not kb.egress_file.exists()


@pytest.mark.usefixtures("plugin")
def test_a_plugin_cannot_replace_a_built_in_answerer(project, fake_embedder):
    with ragstead.open(project, embedder=fake_embedder, answerers=("openai", "extractive")) as kb:
        assert [p.name for p in kb.providers()] == ["extractive"]  # no key: the real openai is not set up
    from ragstead.answer import providers

    assert registry.kind_of("openai") is providers.OPENAI
    assert "ragstead_echo_answerer" not in sys.modules


@pytest.mark.usefixtures("plugin")
def test_an_unknown_answerer_is_one_line_naming_the_known_ones(project):
    (project / "ragstead.toml").write_text('[ragstead]\nanswerers = ["nosuch"]\n')
    with pytest.raises(ConfigError) as caught:
        ragstead.open(project)
    message = str(caught.value)
    assert "\n" not in message
    assert message == "unknown answerer nosuch; use openai, gemini, extractive, or a plugin's: echo, nearby"
    result = CliRunner().invoke(app, ["ask", "tides", "--root", str(project.parent), "--llm", "nosuch"])
    assert result.exit_code != 0
    assert "error: unknown answerer nosuch; use local, openai, gemini, extractive, or a plugin's: echo, nearby" \
        in result.output


def test_the_built_in_answerers_resolve_without_reading_installed_metadata(tmp_path, monkeypatch):
    def no_metadata(**_: object) -> None:
        raise AssertionError("read the installed entry points for a built-in answerer")

    monkeypatch.setattr(importlib.metadata, "entry_points", no_metadata)
    monkeypatch.setattr(registry, "ANSWERERS", Registry("ragstead.answerers", registry.ANSWERERS.builtins))
    env = {"OPENAI_API_KEY": "sk-x", "GEMINI_API_KEY": "g"}
    chain = registry.answerer_chain(registry.AnswererSetup(env), ("gemini", "openai"), ("openai", "gemini"))
    assert [p.name.split(":")[0] for p in chain] == ["gemini", "openai-compatible", "extractive"]


def test_a_plugin_named_in_capitals_is_consented_to_by_its_name(tmp_path, plugin, project, monkeypatch):
    # consent reads names folded ("--llm Echo" is echo): a plugin whose entry point is "Loud" was never reachable
    site = tmp_path / "site"
    (site / "ragstead_echo_answerer-0.1.dist-info" / "entry_points.txt").write_text(
        "[ragstead.answerers]\nLoud = ragstead_echo_answerer:ECHO\n")
    monkeypatch.setattr(registry, "ANSWERERS", Registry("ragstead.answerers", registry.ANSWERERS.builtins))
    runner = CliRunner()
    assert runner.invoke(app, ["index", "--root", str(project), "-q"]).exit_code == 0
    result = runner.invoke(app, ["ask", "when do spring tides come", "--root", str(project), "--llm", "Loud",
                                 "--min-similarity", "-1", "--json"])
    assert result.exit_code == 0, result.output
    assert '"provider": "loud"' in result.output and [name for name, _ in _handed()] == ["echo"]
