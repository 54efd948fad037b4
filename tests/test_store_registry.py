"""The store registry (ragstead/plugins.py, stores/factory.py): another package adds a store with one entry point
in "ragstead.stores", without touching ragstead's files; an unknown name is one error line naming the known ones;
the built-ins open without reading any installed metadata."""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path

import pytest

import ragstead
from helpers.plugin_package import install
from ragstead.errors import ConfigError
from ragstead.plugins import Registry
from ragstead.stores import factory
from ragstead.stores.factory import StoreSpec

# A third-party package as pip would install it: its module and a dist-info whose entry_points.txt names the store.
# Its store keeps the embedded layout in a file of its own choosing ("notes:FOLDER" -> FOLDER/notes.db).
PLUGIN_MODULE = '''
from ragstead.stores.factory import StoreBackend
from ragstead.stores.sqlite import SqliteStore

OPENED = []


def _open(spec):
    OPENED.append(spec.describe())
    return SqliteStore(spec.sqlite_file, project_root=spec.root)


def _locate(raw, root, default_db):
    return root / raw.removeprefix("notes:") / "notes.db"


BACKEND = StoreBackend("notes", _open, _locate, lambda spec: f"notes in {spec.sqlite_file}")
'''

ENTRY_POINTS = """[ragstead.stores]
notes = ragstead_notes_store:BACKEND
sqlite = ragstead_notes_store:BACKEND
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The plugin installed on sys.path, and a registry that has not read the entry points yet."""
    site = install(tmp_path / "site", "ragstead-notes-store", ENTRY_POINTS, {"ragstead_notes_store": PLUGIN_MODULE})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(factory, "STORES", Registry("ragstead.stores", factory.STORES.builtins))
    yield
    sys.modules.pop("ragstead_notes_store", None)


@pytest.mark.usefixtures("plugin")
def test_a_store_from_another_package_opens_a_project(tmp_path, fake_embedder):
    project = tmp_path / "project"
    (project / "kb").mkdir(parents=True)
    (project / "kb" / "tides.md").write_text("# Tides\n\nSpring tides follow the new and the full moon.\n")
    with ragstead.open(project, store="notes:side", embedder=fake_embedder) as kb:
        kb.index()
        hits = kb.search("spring tides moon")
        assert kb.runtime.spec.kind == "notes"
    assert [hit.file_path for hit in hits.hits][:1] == ["kb/tides.md"]
    assert (project / "side" / "notes.db").is_file()
    assert not (project / "kb" / "rag" / "index.db").exists(), "the embedded store was opened instead"
    assert sys.modules["ragstead_notes_store"].OPENED[0] == f"notes in {project / 'side' / 'notes.db'}"


@pytest.mark.usefixtures("plugin")
def test_an_unknown_store_is_one_line_naming_the_known_ones(tmp_path):
    with pytest.raises(ConfigError) as caught:
        StoreSpec.parse("nosuch:x", root=tmp_path, default_db=tmp_path / "index.db")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("unknown store 'nosuch:x'; use 'sqlite'")
    assert message.endswith("or a plugin's: notes")  # the plugin's name; its "sqlite" does not count


@pytest.mark.usefixtures("plugin")
def test_a_plugin_cannot_replace_a_built_in_store(tmp_path):
    spec = StoreSpec.parse("sqlite", root=tmp_path, default_db=tmp_path / "index.db")
    assert spec.sqlite_file == tmp_path / "index.db"
    assert "ragstead_notes_store" not in sys.modules


def test_the_built_in_stores_resolve_without_reading_installed_metadata(tmp_path, monkeypatch):
    """A source tree, or an install whose metadata predates the code, still opens every built-in store."""
    def no_metadata(**_: object) -> None:
        raise AssertionError("read the installed entry points for a built-in store")

    monkeypatch.setattr(importlib.metadata, "entry_points", no_metadata)
    monkeypatch.setattr(factory, "STORES", Registry("ragstead.stores", factory.STORES.builtins))
    kinds = [StoreSpec.parse(raw, root=tmp_path, default_db=tmp_path / "index.db").kind
             for raw in ("", "sqlite:x.db", "postgres://host/db", "postgresql://host/db", "chroma:c",
                         "chroma+http://host:8000", "milvus:m.db", "milvus://host:19530")]
    assert kinds == ["sqlite", "sqlite", "postgresql", "postgresql", "chroma", "chroma", "milvus", "milvus"]
