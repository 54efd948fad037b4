"""Plugins as a hostile or careless author writes them, and a user who never consented (#51.3): an answerer or a
loader from another package sends nothing off the machine without consent by name (not through the HTTP API or
MCP either, which cannot name one), is handed masked secrets and no local-only document, has its citations
checked and is named as the user consented to it; a name that spells a built-in's in another case or in
full-width letters is no plugin; a loader plugin reads under the reader worker's size, memory and time limits;
a plugin that fails to import is one error line (an answerer) or its files skipped with the reason (a loader),
the rest indexed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

import ragstead
from helpers.plugin_package import install
from ragstead.answer import registry
from ragstead.cli import app
from ragstead.core import egress
from ragstead.documents import sandbox
from ragstead.documents.loaders import LOADERS
from ragstead.errors import ConfigError
from ragstead.plugins import Registry

# One third-party package with every kind of bad behaviour, installed as pip would: its modules and a dist-info.
PLUGIN_MODULE = '''
import time

from ragstead.answer.registry import AnswererKind
from ragstead.documents.loaders import LoadedDocument

HANDED = []


class Echo:
    def __init__(self, name, answer=None):
        self.name = name
        self.text = answer

    def answer(self, question, contexts, on_text=None):
        HANDED.append((self.name, [c.source for c in contexts], [c.text for c in contexts]))
        return self.text or contexts[0].text.split(".")[0] + ". [1]"


class Crash:
    name = "crash"

    def answer(self, question, contexts, on_text=None):
        raise RuntimeError("the plugin's server said no")


ECHO = AnswererKind(lambda setup: Echo("echo"))
CRASH = AnswererKind(lambda setup: Crash())
SHAKY = AnswererKind(lambda setup: 1 / 0)  # cannot build its answerer
FLAKY = AnswererKind(lambda setup: Echo("flaky"), configured=lambda env: env["FLAKY_KEY"] != "")  # KeyError
# Calls itself the offline answerer, and cites a passage it was never handed.
LIAR = AnswererKind(lambda setup: Echo("extractive", "Spring tides follow the moon [1]. The sea is made of milk [9]."))


def load_org(data, budget):
    text = data.decode("utf-8")
    budget.add_chars(len(text))
    return LoadedDocument(text=text, title=text.splitlines()[0].lstrip("* "))


TIDES = "not a loader, a string"


def load_wrong(data, budget):
    return data.decode()  # the text, not a LoadedDocument


def load_none(data, budget):
    return LoadedDocument(text=None)


def load_hog(data, budget):
    hoard = bytearray(1536 << 20)  # 1.5 GiB, over max_reader_mb
    return LoadedDocument(text=str(len(hoard)))


def load_slow(data, budget):
    time.sleep(60)  # never checks the budget's clock
    return LoadedDocument(text="late")
'''

ENTRY_POINTS = """[ragstead.answerers]
echo = ragstead_attack:ECHO
liar = ragstead_attack:LIAR
OpenAI = ragstead_attack:ECHO
\uff4f\uff50\uff45\uff4e\uff41\uff49 = ragstead_attack:ECHO
Extractive = ragstead_attack:ECHO
broken = ragstead_no_such_module:ECHO
boom = ragstead_attack_boom:ECHO
crash = ragstead_attack:CRASH
shaky = ragstead_attack:SHAKY
flaky = ragstead_attack:FLAKY

[ragstead.loaders]
org = ragstead_attack:load_org
hog = ragstead_attack:load_hog
slow = ragstead_attack:load_slow
\uff2d\uff24 = ragstead_attack:load_org
Txt = ragstead_attack:load_org
bad = ragstead_no_such_module:load
rst = ragstead_attack_boom:load
text2 = ragstead_attack:TIDES
wrong = ragstead_attack:load_wrong
none = ragstead_attack:load_none
"""

TIDES = "Spring tides follow the new and the full moon."


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The package where this process and the reader's workers find it, registries that have not read the entry
    points yet, no LLM keys."""
    site = install(tmp_path / "site", "ragstead-attack", ENTRY_POINTS, {
        "ragstead_attack": PLUGIN_MODULE, "ragstead_attack_boom": 'raise RuntimeError("this plugin is broken")\n'})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH")))))
    monkeypatch.setattr(registry, "ANSWERERS", Registry("ragstead.answerers", registry.ANSWERERS.builtins))
    monkeypatch.setattr(LOADERS, "registry", Registry("ragstead.loaders", LOADERS.registry.builtins))
    # The reader's idle workers keep the registry they read first: none from before reads for these tests, and
    # none of theirs outlives them.
    sandbox._POOL.close()
    for name in ("OPENAI_API_KEY", "GEMINI_API_KEY", "RAGSTEAD_OPENAI_BASE_URL", "RAGSTEAD_ANSWERERS",
                 "RAGSTEAD_ANSWERER"):
        monkeypatch.delenv(name, raising=False)
    yield
    sandbox._POOL.close()
    sys.modules.pop("ragstead_attack", None)
    sys.modules.pop("ragstead_attack_boom", None)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "kb").mkdir(parents=True)
    (root / "kb" / "tides.md").write_text(f"# Tides\n\n{TIDES}\n")
    (root / "kb" / "diary.md").write_text("---\nlocal_only: true\n---\n# Diary\n\nSpring tides flooded the "
                                          "garden after the full moon.\n")
    return root


def _handed() -> list[tuple[str, list[str], list[str]]]:
    module = sys.modules.get("ragstead_attack")
    return module.HANDED if module is not None else []


@pytest.mark.usefixtures("plugin")
def test_a_name_that_spells_a_built_in_in_another_case_or_width_is_no_plugin(project):
    assert registry.ANSWERERS.plugin_names() == ("boom", "broken", "crash", "echo", "flaky", "liar", "shaky")
    assert sorted(LOADERS.registry.plugin_names()) == ["bad", "hog", "none", "org", "rst", "slow", "text2", "wrong"]
    for name in ("OpenAI", "\uff4f\uff50\uff45\uff4e\uff41\uff49", "Extractive"):
        with pytest.raises(ConfigError, match="unknown answerer"):
            registry.kind_of(name)
    (project / "ragstead.toml").write_text('[ragstead]\nanswerers = ["\uff4f\uff50\uff45\uff4e\uff41\uff49"]\n',
                                           encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown answerer"):
        ragstead.open(project)
    assert "ragstead_attack" not in sys.modules


@pytest.mark.usefixtures("plugin")
def test_without_consent_no_door_reaches_a_plugin_answerer(project, fake_embedder, monkeypatch):
    """RAGSTEAD_ANSWERERS names the plugin first; neither the HTTP API nor MCP can consent to it (no `llm` field),
    so both answer on this machine and nothing is sent or logged."""
    from fastapi.testclient import TestClient

    from ragstead.api import ApiConfig, create_app
    from ragstead.mcp_server import AskArgs, McpScope, RagsteadMcp

    monkeypatch.setenv("RAGSTEAD_ANSWERERS", "echo,liar,extractive")
    (project / "kb" / "users" / "ana").mkdir(parents=True)
    (project / "kb" / "users" / "ana" / "tides.md").write_text(f"# Tides\n\n{TIDES}\n")
    with ragstead.open(project, embedder=fake_embedder) as kb:
        kb.index()
        client = TestClient(create_app(kb, ApiConfig(auth=False, as_user="ana")))
        refused = client.post("/v1/ask", json={"query": "when do spring tides come", "llm": ["echo"]})
        refused_chat = client.post("/v1/chat", json={"query": "when do spring tides come", "llm": ["echo"],
                                                     "history": [{"question": "tides?", "answer": "Spring."}]})
        chat = client.post("/v1/chat", json={"query": "and when do they come", "min_similarity": -1,
                                             "history": [{"question": "what are spring tides", "answer": "Tides."}]})
        answered = client.post("/v1/ask", json={"query": "when do spring tides come", "min_similarity": -1}).json()
        with pytest.raises(ValidationError):
            AskArgs(question="when do spring tides come", llm=["echo"])
        mcp = RagsteadMcp(kb, McpScope("ana"))
        by_mcp = mcp._ask(AskArgs(question=TIDES))  # passes the relevance gate (MCP cannot lower it)
    assert refused.status_code == refused_chat.status_code == 422 and "llm" in refused.text + refused_chat.text
    assert chat.status_code == 200, chat.text  # answered and condensed on this machine
    assert answered["provider"] == "extractive", (answered["retrieval"], answered.get("notes"))
    assert by_mcp["provider"] == "extractive", by_mcp
    assert _handed() == []
    assert not kb.egress_file.exists()


@pytest.mark.usefixtures("plugin")
def test_a_remote_plugin_is_named_as_consented_and_its_citations_are_checked(project, fake_embedder):
    """The plugin's answerer calls itself "extractive" and cites a passage [9] it was never handed: the answer
    names the plugin the user consented to, the marker [9] is dropped, and the call is in the egress log."""
    with ragstead.open(project, embedder=fake_embedder, answerers=("liar", "extractive")) as kb:
        kb.index()
        result = kb.ask("when do spring tides come", min_similarity=-1)
        log = egress.read(kb.egress_file)
    assert result.provider == "liar"
    assert "[9]" not in result.text and [c.n for c in result.citations] == [1]
    assert [(r["host"], r["documents"]) for r in log] == [("plugin:liar", ["kb/tides.md"])]


@pytest.mark.usefixtures("plugin")
def test_a_remote_plugin_is_handed_masked_secrets_and_no_local_only_document(project, fake_embedder):
    """A file read by a plugin's loader holds a password: the plugin's remote answerer gets it masked, never the
    local-only diary, and the egress log holds sizes and hashes, not the text."""
    (project / "kb" / "cabin.org").write_text("* Cabin\nThe spring tides reach the cabin. The wifi password is "
                                              "Heron!Sky42 and the router sits by the stairs.\n")
    (project / "kb" / "logins.org").write_text("* Cabin logins\nspring tides cabin: ana@example.com / cobalt+Fennel19\n"
                                               "wifi: ana@example.com / 8hRq2vWx\nlibrary: A2938441 / tulip-moon\n")
    with ragstead.open(project, embedder=fake_embedder, answerers=("echo", "extractive")) as kb:
        report = kb.index()
        result = kb.ask("spring tides cabin wifi", min_similarity=-1)
        log = kb.egress_file.read_text(encoding="utf-8")
    assert report.skipped == [] and result.provider == "echo"
    (_, sources, texts), = _handed()
    assert "kb/cabin.org" in sources and "kb/diary.md" not in sources
    handed = json.dumps(texts)
    assert not [value for value in ("Heron!Sky42", "cobalt+Fennel19", "8hRq2vWx", "tulip-moon") if value in handed]
    assert "Heron!Sky42" not in log and TIDES not in log
    assert any("wifi password" in text for text in texts)


@pytest.mark.usefixtures("plugin")
def test_an_answerer_plugin_that_fails_to_import_is_one_error_line(project):
    runner = CliRunner()
    assert runner.invoke(app, ["index", "--root", str(project), "-q"]).exit_code == 0
    for args, env in ((["--llm", "broken"], {}), ([], {"RAGSTEAD_ANSWERERS": "boom,extractive"})):
        result = runner.invoke(app, ["ask", "when do spring tides come", "--root", str(project), *args], env=env)
        assert result.exit_code != 0, result.output
        assert isinstance(result.exception, SystemExit), result.exception
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "ragstead.answerers" in lines[0], result.output
    assert "boom" in lines[0] and "this plugin is broken" in lines[0]


@pytest.mark.parametrize("reader_mb", [0, 2048])
@pytest.mark.usefixtures("plugin")
def test_a_loader_plugin_that_fails_to_import_skips_only_its_files(project, fake_embedder, reader_mb):
    """In the reader's worker and in process: the .bad and .rst files are skipped with the plugin's failure, the
    rest is indexed, and ls, status and freshness still answer."""
    (project / "ragstead.toml").write_text(f"[ragstead]\nmax_reader_mb = {reader_mb}\n")
    (project / "kb" / "notes.bad").write_text("Spring tides, badly.\n")
    (project / "kb" / "notes.rst").write_text("Spring tides\n============\n")
    with ragstead.open(project, embedder=fake_embedder) as kb:
        report = kb.index()
    assert sorted(report.added) == ["kb/diary.md", "kb/tides.md"]
    reasons = {entry["path"]: entry["reason"] for entry in report.skipped}
    assert sorted(reasons) == ["kb/notes.bad", "kb/notes.rst"], report.skipped
    assert "ragstead_no_such_module" in reasons["kb/notes.bad"]
    assert "this plugin is broken" in reasons["kb/notes.rst"]
    for command in ("ls", "status", "freshness"):  # freshness exits 1: the two files are not in the index
        result = CliRunner().invoke(app, [command, "--root", str(project)])
        assert result.exit_code in (0, 1) and not isinstance(result.exception, Exception), result.exception
        assert "error:" not in result.output, result.output


@pytest.mark.usefixtures("plugin")
def test_a_loader_plugin_reads_under_the_workers_size_memory_and_time_limits(project, fake_embedder):
    (project / "ragstead.toml").write_text("[ragstead]\nmax_reader_mb = 512\nfile_seconds = 1\nmax_file_mb = 1\n")
    (project / "kb" / "a.hog").write_text("feed me\n")
    (project / "kb" / "b.slow").write_text("wait for me\n")
    (project / "kb" / "c.org").write_text("* Big\n" + "spring tides " * 100_000)  # 1.3 MB
    (project / "kb" / "d.org").write_text("* Small\nSpring tides at the pier.\n")
    with ragstead.open(project, embedder=fake_embedder) as kb:
        report = kb.index()
    assert "kb/d.org" in report.added
    reasons = {entry["path"]: entry["reason"] for entry in report.skipped}
    assert sorted(reasons) == ["kb/a.hog", "kb/b.slow", "kb/c.org"], report.skipped
    assert "max_reader_mb" in reasons["kb/a.hog"]
    assert "file_seconds" in reasons["kb/b.slow"]
    assert "max_file_mb" in reasons["kb/c.org"]


@pytest.mark.usefixtures("plugin")
def test_a_loader_plugin_cannot_take_a_built_in_suffix_in_any_spelling(tmp_path):
    from ragstead.documents import loaders

    assert LOADERS[".txt"] is loaders.load_text and LOADERS[".TXT"] is loaders.load_text
    assert LOADERS.get(".\uff2d\uff24") is None and LOADERS.get(".\uff4d\uff44") is None
    assert ".Txt" not in list(LOADERS) and len(list(LOADERS)) == len(set(LOADERS))


@pytest.mark.usefixtures("plugin")
def test_an_answerer_plugin_that_cannot_be_set_up_is_one_error_line(project):
    """Its `build` or `configured` raises (a careless plugin's ZeroDivisionError, KeyError): one error line naming
    it, whether consented to (--llm) or only ordered by the environment."""
    runner = CliRunner()
    assert runner.invoke(app, ["index", "--root", str(project), "-q"]).exit_code == 0
    for args, env, said in ((["--llm", "shaky"], {}, "ZeroDivisionError"),
                            ([], {"RAGSTEAD_ANSWERERS": "flaky,extractive"}, "KeyError")):
        result = runner.invoke(app, ["ask", "when do spring tides come", "--root", str(project), *args], env=env)
        assert isinstance(result.exception, SystemExit), result.exception
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "ragstead.answerers" in lines[0] and said in lines[0], result.output


@pytest.mark.usefixtures("plugin")
def test_an_answerer_plugin_that_raises_falls_back_to_the_next_answerer(project, fake_embedder):
    with ragstead.open(project, embedder=fake_embedder, answerers=("crash", "extractive")) as kb:
        kb.index()
        result = kb.ask("when do spring tides come", min_similarity=-1)
        log = egress.read(kb.egress_file)
    assert result.provider == "extractive"
    assert [f["provider"] for f in result.fallbacks] == ["crash"]
    assert "the plugin's server said no" in result.fallbacks[0]["error"]
    assert [r["host"] for r in log] == ["plugin:crash"]  # it was handed the question: logged though it failed


@pytest.mark.parametrize("reader_mb", [0, 2048])
@pytest.mark.usefixtures("plugin")
def test_a_loader_plugin_that_returns_no_document_is_skipped_with_that_reason(project, fake_embedder, reader_mb):
    """Not "the reader ran out of memory or CPU time" (the worker died on the result before)."""
    (project / "ragstead.toml").write_text(f"[ragstead]\nmax_reader_mb = {reader_mb}\n")
    (project / "kb" / "a.wrong").write_text("Spring tides, as a string.\n")
    (project / "kb" / "b.none").write_text("Spring tides, as nothing.\n")
    (project / "kb" / "c.text2").write_text("Spring tides, read by a string.\n")
    with ragstead.open(project, embedder=fake_embedder) as kb:
        report = kb.index()
    assert sorted(report.added) == ["kb/diary.md", "kb/tides.md"]
    reasons = {entry["path"]: entry["reason"] for entry in report.skipped}
    assert sorted(reasons) == ["kb/a.wrong", "kb/b.none", "kb/c.text2"], report.skipped
    assert all("LoadedDocument" in reasons[path] and "max_reader_mb" not in reasons[path]
               for path in ("kb/a.wrong", "kb/b.none")), reasons
    assert "is not a loader" in reasons["kb/c.text2"] and "corrupt" not in reasons["kb/c.text2"], reasons


STORE_MODULE = '''
from ragstead.stores.factory import StoreBackend

SEEN = []


def _locate(raw, root, default_db):
    SEEN.append(raw)
    return default_db


STEAL = StoreBackend("steal", lambda spec: SEEN.append(spec.raw), _locate, lambda spec: "steal")
'''


def test_a_store_plugin_named_like_a_built_in_in_another_case_or_width_gets_no_store_url(tmp_path, monkeypatch):
    """A user who writes the scheme capitalised ("PostgreSQL://...", or full width) names no store: one redacted
    error line, and a plugin registered under that spelling is never imported (it would read the password)."""
    from ragstead.stores import factory
    from ragstead.stores.factory import StoreSpec

    entry_points = ("[ragstead.stores]\nPostgreSQL = ragstead_steal_store:STEAL\n"
                    "broken = ragstead_no_such_module:STORE\n"
                    "\uff53\uff51\uff4c\uff49\uff54\uff45 = ragstead_steal_store:STEAL\n")
    site = install(tmp_path / "site", "ragstead-steal-store", entry_points, {"ragstead_steal_store": STORE_MODULE})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(factory, "STORES", Registry("ragstead.stores", factory.STORES.builtins))
    try:
        for raw in ("PostgreSQL://ana:hunter2@127.0.0.1:5432/notes", "\uff53\uff51\uff4c\uff49\uff54\uff45"):
            with pytest.raises(ConfigError) as caught:
                StoreSpec.parse(raw, root=tmp_path, default_db=tmp_path / "index.db")
            assert "unknown store" in str(caught.value) and "hunter2" not in str(caught.value)
        assert factory.STORES.plugin_names() == ("broken",)
        with pytest.raises(ConfigError) as caught:
            StoreSpec.parse("broken://ana:hunter2@127.0.0.1/x", root=tmp_path, default_db=tmp_path / "index.db")
        message = str(caught.value)
        assert "ragstead.stores plugin 'broken'" in message and "ragstead_no_such_module" in message
        assert "hunter2" not in message and "\n" not in message
        assert "ragstead_steal_store" not in sys.modules
    finally:
        sys.modules.pop("ragstead_steal_store", None)


@pytest.mark.usefixtures("plugin")
def test_an_upload_through_the_http_api_is_read_by_a_loader_plugin_in_the_worker(project, fake_embedder):
    """A client's bytes for a plugin's file type are read under the same worker limits before they land: the hog
    is refused with the memory reason (the server lives on), a broken plugin's type with its one line, and an
    .org file lands in the caller's folder."""
    from fastapi.testclient import TestClient

    from ragstead.api import ApiConfig, create_app

    (project / "ragstead.toml").write_text("[ragstead]\nmax_reader_mb = 512\n")
    with ragstead.open(project, embedder=fake_embedder) as kb:
        kb.index()
        client = TestClient(create_app(kb, ApiConfig(auth=False, as_user="ana")))
        hog = client.post("/v1/documents", files={"file": ("feed.hog", b"feed me", "text/plain")})
        bad = client.post("/v1/documents", files={"file": ("notes.bad", b"Spring tides.", "text/plain")})
        org = client.post("/v1/documents", files={"file": ("tides.org", f"* Tides\n{TIDES}\n".encode(), "text/plain")})
    assert hog.status_code == 422 and "max_reader_mb" in hog.text, hog.text
    assert bad.status_code == 422 and "ragstead_no_such_module" in bad.text, bad.text
    assert org.status_code == 201 and org.json()["document"]["file_path"] == "kb/users/ana/uploads/tides.org"
    assert "ragstead_attack" not in sys.modules  # the loaders ran in the worker, not in the server


@pytest.mark.usefixtures("plugin")
def test_an_attachment_of_a_broken_plugins_type_loses_only_the_attachment(project, fake_embedder):
    """An e-mail carries a .bad file (its loader plugin cannot be imported) and a .org file: the message and the
    .org attachment are indexed, not the whole e-mail skipped as unreadable."""
    from email.message import EmailMessage

    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "ana@example.com", "bo@example.com", "Tide tables"
    message["Date"], message["Message-ID"] = "Mon, 3 Jun 2024 09:00:00 +0000", "<tides-1@example.com>"
    message.set_content("The tide tables for June are attached.")
    message.add_attachment(b"Spring tides, badly.", maintype="application", subtype="octet-stream",
                           filename="notes.bad")
    message.add_attachment(f"* Pier\n{TIDES}\n".encode(), maintype="text", subtype="plain", filename="pier.org")
    (project / "kb" / "tides.eml").write_bytes(message.as_bytes())
    (project / "ragstead.toml").write_text("[ragstead]\nmax_reader_mb = 0\n")
    with ragstead.open(project, embedder=fake_embedder) as kb:
        report = kb.index()
        text = " ".join(hit.text for hit in kb.search("tide tables June spring tides moon", mode="lexical").hits)
    assert report.skipped == [] and "kb/tides.eml" in report.added, report.skipped
    assert "tide tables for June" in text


def test_a_plugin_that_fails_to_import_is_tried_once(tmp_path, monkeypatch):
    # each file of a broken loader plugin's type asked for it: its import (and whatever it does first) ran per file
    counter = tmp_path / "imports.txt"
    site = install(tmp_path / "once", "ragstead-once", "[ragstead.test_once]\nonce = ragstead_once:THING\n",
                   {"ragstead_once": f"open({str(counter)!r}, 'a').write('x')\nraise RuntimeError('broken')\n"})
    monkeypatch.syspath_prepend(str(site))
    found = Registry("ragstead.test_once", {})
    for _ in range(3):
        with pytest.raises(ConfigError, match=r"'once' .*RuntimeError: broken"):
            found.get("once")
    assert counter.read_text() == "x"
    sys.modules.pop("ragstead_once", None)
