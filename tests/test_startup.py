"""Start-up: `ragstead --version` and the help screens load none of the heavy modules. The process is the subject,
so each case runs in a fresh interpreter and reports which of them ended up in its `sys.modules`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.project import OFFLINE_ENV, CountingEmbedder, Project

# What a command loads when it needs it: the search engine, the model runtime, the servers, the ingest stack and
# the optional stores. pydantic comes with fastapi and with typer's own value coercion, never with a help screen.
HEAVY = ("tantivy", "numpy", "onnxruntime", "pydantic", "httpx", "fastapi", "jinja2", "trafilatura", "watchfiles",
         "youtube_transcript_api", "psycopg", "chromadb")

# Runs the CLI as `python -m ragstead ARGS` does, then prints the heavy modules it loaded as JSON on stderr's last
# line (stdout is the command's).
PROBE = """
import json, runpy, sys
heavy = json.loads(sys.argv[1])
sys.argv = ["ragstead", *sys.argv[2:]]
try:
    runpy.run_module("ragstead", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "loaded": sorted(m for m in heavy if m in sys.modules),
                  "ragstead": sorted(m for m in sys.modules if m.startswith("ragstead."))}), file=sys.stderr)
"""


def loaded_by(*args: str) -> tuple[int, list[str], str]:
    report, stdout = _probe(*args)
    return report["code"], report["loaded"], stdout


def _probe(*args: str, cwd: Path | None = None) -> tuple[dict[str, Any], str]:
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), *args],
                            capture_output=True, text=True, env=OFFLINE_ENV, timeout=120, cwd=cwd)
    return json.loads(result.stderr.strip().splitlines()[-1]), result.stdout


@pytest.mark.parametrize("args", [("--version",), ("-h",), ("query", "-h"), ("ask", "-h"), ("ingest", "-h"),
                                  ("serve", "-h"), ("guard", "check", "-h")])
def test_version_and_help_load_no_heavy_module(args):
    code, loaded, stdout = loaded_by(*args)
    assert code in (0, None)
    assert stdout.strip(), "printed nothing"
    assert loaded == [], f"ragstead {' '.join(args)} imported {loaded}"


def test_version_prints_the_package_version_before_the_cli_loads():
    """`ragstead --version` alone answers in __main__.py, without typer and rich; with other arguments the app's
    own --version prints the same line."""
    import ragstead

    expected = f"ragstead {ragstead.__version__}"
    code, _, stdout = loaded_by("--version")
    assert code in (0, None)
    assert stdout.strip() == expected
    result = subprocess.run([sys.executable, "-c", "import sys, ragstead.__main__ as m; m.main();"
                             "print(sorted(n for n in ('typer', 'rich', 'ragstead.cli') if n in sys.modules))",
                             "--version"], capture_output=True, text=True, env=OFFLINE_ENV, timeout=120, check=True)
    assert result.stdout.splitlines() == [expected, "[]"]
    from typer.testing import CliRunner

    from ragstead.cli import app

    assert CliRunner().invoke(app, ["--version"]).stdout.strip() == expected


def test_import_ragstead_is_light_and_its_names_still_resolve():
    """`import ragstead` loads nothing heavy; a public name imports its module on first use."""
    script = ("import json, sys, ragstead\n"
              f"heavy = {HEAVY!r}\n"
              "before = sorted(m for m in heavy if m in sys.modules)\n"
              "names = {n: getattr(ragstead, n).__module__ for n in ragstead.__all__ if n != '__version__'}\n"
              "missing = sorted(set(ragstead.__all__) - set(dir(ragstead)))\n"
              "print(json.dumps({'before': before, 'names': names, 'dir': missing}))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=OFFLINE_ENV,
                            timeout=120, check=True)
    report = json.loads(result.stdout)
    assert report["before"] == []
    assert report["names"]["open"] == "ragstead.knowledge_base"
    assert report["names"]["KnowledgeBase"] == "ragstead.knowledge_base"
    assert report["dir"] == []


def test_an_unknown_name_is_an_attribute_error():
    import ragstead

    with pytest.raises(AttributeError, match="no_such_name"):
        ragstead.no_such_name  # noqa: B018


# The code a command that only reads the index never needs (#51): the answer, ingest, evaluation and
# conversation packages (the settings take their refusal default from request_fields.py), the index run, the
# search stages and the file-format readers (imported with their first file: documents/loaders.py).
NOT_FOR_READING = ("ragstead.answer", "ragstead.ingest", *(f"ragstead.documents.formats.{name}" for name in (
                       "epub", "mail", "outlook", "sheets", "slides")), "ragstead.evaluation", "ragstead.conversation",
                   "ragstead.services.indexer", "ragstead.indexing.build", "ragstead.retrieval.search",
                   "ragstead.retrieval.rerank", "ragstead.services.landing", "ragstead.services.freshness",
                   "ragstead.services.watch", "ragstead.services.snapshots", "ragstead.services.ingest",
                   "ragstead.services.evaluation", "ragstead.services.conversation", "ragstead.memory.decision")


@pytest.fixture(scope="module")
def small_project(tmp_path_factory: pytest.TempPathFactory, hashing_embedder: Any) -> Path:
    """A personal project of three tagged notes, indexed (with the model-free embedder: no model is loaded by
    the commands under test, whichever built the index)."""
    root = tmp_path_factory.mktemp("small")
    (root / "ragstead.toml").write_text('[ragstead]\nowner = "me"\nroots = ["."]\n', encoding="utf-8")
    project = Project(root, CountingEmbedder(hashing_embedder))
    project.write({f"note{i}.md": f"---\ntags: [demo, n{i}]\n---\n# Note {i}\n\nBilling database {i}.\n"
                   for i in range(3)})
    project.index(roots=(".",))
    project.store.close()
    return root


@pytest.mark.parametrize("args", [("ls",), ("tags",), ("status",)])
def test_commands_that_read_the_index_load_no_answer_ingest_or_search_code(small_project, args):
    """`ls`, `tags` and `status`, run in the project's folder, open the project, its settings and its store, and
    nothing more: no service they do not call, no pydantic (typer coerces a default without it; a value typed in,
    such as --root, still goes through it), no httpx, no model runtime, no numpy (`status` checks the vector files
    by their state and sizes); of the heavy modules only tantivy, the lexical index the store opens."""
    report, stdout = _probe(*args, cwd=small_project)
    assert report["code"] in (0, None) and stdout.strip()
    assert report["loaded"] == ["tantivy"], f"ragstead {args[0]} imported {report['loaded']}"
    needless = [m for m in report["ragstead"] if m.startswith(NOT_FOR_READING)]
    assert needless == [], f"ragstead {args[0]} imported {needless}"


def test_an_option_given_on_the_command_line_is_still_checked(small_project):
    """The coercion typer builds on demand still runs for a value typed in: `--limit 0` is refused, `--limit 2`
    lists two documents."""
    report, _ = _probe("ls", "--limit", "0", cwd=small_project)
    assert report["code"] == 2
    report, stdout = _probe("ls", "--limit", "2", "--root", str(small_project))
    assert report["code"] in (0, None)
    assert "showing 1-2" in stdout
