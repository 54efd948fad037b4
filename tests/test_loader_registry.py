"""The loader registry (documents/loaders.py): another package adds a file type with one entry point in
"ragstead.loaders" and `index` reads it (in the reader's worker process too); a built-in suffix stays the
built-in's; the built-ins resolve without reading installed metadata, and a format's parser is imported with its
first file, so indexing markdown imports none of the PDF, office or mail readers."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ragstead
from helpers.plugin_package import install
from helpers.project import OFFLINE_ENV
from ragstead.documents import loaders, sandbox
from ragstead.documents.loaders import LOADERS, load_document
from ragstead.plugins import Registry

# A third-party package as pip would install it: a reader of Emacs org files (`* Heading` lines) and a dist-info
# whose entry_points.txt names it for .org, and tries to take .md as well.
PLUGIN_MODULE = '''
from ragstead.documents.loaders import LoadedDocument


def load_org(data, budget):
    text = data.decode("utf-8")
    budget.add_chars(len(text))
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("* ")), None)
    return LoadedDocument(text="\\n".join(line.lstrip("* ") for line in text.splitlines()), title=title,
                          tags=["org"])
'''

ENTRY_POINTS = """[ragstead.loaders]
org = ragstead_org_loader:load_org
md = ragstead_org_loader:load_org
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The plugin installed where this process and the reader's worker processes find it, and a registry that
    has not read the entry points yet."""
    site = install(tmp_path / "site", "ragstead-org-loader", ENTRY_POINTS, {"ragstead_org_loader": PLUGIN_MODULE})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH")))))
    monkeypatch.setattr(LOADERS, "registry", Registry("ragstead.loaders", LOADERS.registry.builtins))
    # An idle reader worker from an earlier test has neither this PYTHONPATH nor this registry: none is reused.
    sandbox._POOL.close()
    yield
    sandbox._POOL.close()
    sys.modules.pop("ragstead_org_loader", None)


@pytest.mark.usefixtures("plugin")
def test_a_file_type_from_another_package_is_indexed_and_found(tmp_path, fake_embedder):
    project = tmp_path / "project"
    (project / "kb").mkdir(parents=True)
    (project / "kb" / "tides.org").write_text("* Tides\nSpring tides follow the new and the full moon.\n")
    (project / "kb" / "notes.md").write_text("# Notes\n\nNothing about the sea.\n")
    with ragstead.open(project, embedder=fake_embedder) as kb:  # read in the worker process (max_reader_mb)
        report = kb.index()
        hits = kb.search("spring tides moon", mode="lexical")
    assert report.skipped == []
    assert [hit.file_path for hit in hits.hits][:1] == ["kb/tides.org"]
    assert ".org" in LOADERS and ".org" in sorted(LOADERS)


@pytest.mark.usefixtures("plugin")
def test_a_plugin_cannot_replace_a_built_in_loader(tmp_path):
    note = tmp_path / "note.md"
    note.write_text("---\ntags: [sea]\n---\n# Tides\n\nSpring tides.\n")
    loaded = load_document(note)
    assert loaded.markdown and loaded.tags == ["sea"]
    assert "ragstead_org_loader" not in sys.modules


def test_the_built_in_loaders_resolve_without_reading_installed_metadata(monkeypatch):
    def no_metadata(**_: object) -> None:
        raise AssertionError("read the installed entry points for a built-in loader")

    monkeypatch.setattr(importlib.metadata, "entry_points", no_metadata)
    monkeypatch.setattr(LOADERS, "registry", Registry("ragstead.loaders", LOADERS.registry.builtins))
    suffixes = [".txt", ".md", ".pdf", ".html", ".docx", ".epub", ".pptx", ".xlsx", ".ods", ".csv", ".eml", ".mbox",
                ".msg", ".png", ".jpg"]
    assert all(callable(LOADERS[suffix]) for suffix in suffixes)
    assert LOADERS[".MD"] is loaders.load_markdown
    assert LOADERS.get("") is None and LOADERS.get(".") is None  # no suffix: no metadata read either


def test_indexing_markdown_imports_no_other_format_reader(tmp_path):
    """A fresh interpreter indexes a folder of markdown (read in-process, max_reader_mb = 0, so its imports are
    this process's): none of the PDF, HTML, office, e-book, mail or image readers, nor their parsers, loads."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "ragstead.toml").write_text('[ragstead]\nroots = ["."]\nmax_reader_mb = 0\n')
    for i in range(3):
        (root / f"note{i}.md").write_text(f"# Note {i}\n\nThe billing database {i}.\n")
    script = (f"import json, sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
              "import ragstead\nfrom helpers.fake_embedder import HashingEmbedder\n"
              f"with ragstead.open({str(root)!r}, embedder=HashingEmbedder()) as kb:\n"
              "    indexed = len(kb.index().added)\n"
              "print(json.dumps({'indexed': indexed, 'modules': sorted(sys.modules)}))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=OFFLINE_ENV,
                            timeout=120, check=True)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["indexed"] == 3
    readers = (*(f"ragstead.documents.formats.{name}" for name in ("epub", "mail", "sheets", "slides", "outlook")),
               "pypdf", "docx", "selectolax", "openpyxl", "extract_msg")
    assert [m for m in report["modules"] if m.startswith(readers)] == []
