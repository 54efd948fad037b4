"""The layers run in pipeline order and the shells stand on the library: import-linter's contracts hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    result = subprocess.run([lint, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout, result.stdout


def test_a_broken_layer_is_caught(tmp_path):
    """The contracts can fail: a copy of the package where the store layer imports the CLI breaks them."""
    shutil.copytree(REPO / "src" / "ragstead", tmp_path / "ragstead", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    sqlite = tmp_path / "ragstead" / "stores" / "sqlite.py"
    sqlite.write_text(sqlite.read_text(encoding="utf-8") + "\nimport ragstead.cli  # noqa\n", encoding="utf-8")
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    result = subprocess.run([lint, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0
    assert "BROKEN" in result.stdout


def test_the_knowledge_base_stays_a_thin_facade():
    """The work lives in the services (runtime, indexer, landing, ingest, freshness, watch, health, evaluation,
    project, conversations); knowledge_base.py keeps the public methods, each a line or two over them."""
    lines = (REPO / "src" / "ragstead" / "knowledge_base.py").read_text(encoding="utf-8").splitlines()
    # 326: 320, plus the conversation service's import, construction and three one-line delegations (issue 48), and
    # the project's refusal sentence handed to the answering half (issue 47). 345: the services built on first use
    # and the exported names imported on first use (issue 51: `ls` and `status` load none of the services' code).
    assert len(lines) <= 345, f"knowledge_base.py has {len(lines)} lines; move the work into a service"
