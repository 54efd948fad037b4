"""Personal mode: any folder can be indexed and belongs to the project's owner; the team layout keeps its
rules; the project is found upward from a subfolder; wrong roots and configs are clear errors."""

from __future__ import annotations

import subprocess

import pytest
from fastapi.testclient import TestClient

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead import ConfigError, KnowledgeBase
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.config import default_owner, load_settings

NOTES = {
    "notes/atlas.md": "# Project Atlas\n\nWe chose PostgreSQL for Project Atlas after the load test.",
    "notes/trips/alta-via.md": "The huts on the Alta Via accept cards, but carry cash for the small ones.",
    "kb/users/alice/secret.md": "Alice's private plan: the heron survey moves to May.",
    "kb/team/glossary.md": "Ledger: the append-only table of billing events.",
    "docs/faq.md": "Public FAQ: install the client with pip.",
}


@pytest.fixture
def personal(tmp_path, fake_embedder):
    write_files(tmp_path, NOTES)
    (tmp_path / "ragstead.toml").write_text('[ragstead]\nowner = "sam"\nroots = ["notes", "kb", "docs"]\n')
    kb = KnowledgeBase(load_settings(tmp_path), embedder=fake_embedder)
    kb.index()
    yield kb
    kb.close()


def test_files_outside_the_team_layout_are_the_owners_private_notes(personal):
    docs = {d["file_path"]: d for d in personal.documents(include_archive=True)}
    atlas = docs["notes/atlas.md"]
    assert (atlas["user_slug"], atlas["is_private"], atlas["doc_type"]) == ("sam", True, "user_kb")
    assert docs["kb/team/glossary.md"]["user_slug"] is None  # the team layout keeps its rules
    assert docs["kb/users/alice/secret.md"]["user_slug"] == "alice"


def test_the_owner_sees_their_notes_and_nobody_else_does(personal):
    mine = {h.file_path for h in personal.search("Project Atlas PostgreSQL huts cards", user="sam", k=10).hits}
    assert mine == {"notes/atlas.md", "notes/trips/alta-via.md"}
    theirs = {h.file_path for h in personal.search("Project Atlas PostgreSQL huts cards heron", user="alice").hits}
    assert theirs <= {"kb/users/alice/secret.md"}
    public = {h.file_path for h in personal.search("Project Atlas PostgreSQL huts", public_only=True).hits}
    assert public <= {"docs/faq.md"}


def test_api_keys_follow_the_owner(personal):
    keys = KeyFile(personal.api_keys_file)
    sam, alice = keys.add("sam")[0], keys.add("alice")[0]
    with TestClient(create_app(personal, ApiConfig())) as client:
        def paths(token: str) -> set[str]:
            response = client.post("/v1/query", json={"query": "Project Atlas PostgreSQL huts"},
                                   headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 200, response.text
            return {row["file_path"] for row in response.json()["results"]}

        assert "notes/atlas.md" in paths(sam)
        assert not any(p.startswith("notes/") for p in paths(alice))


def test_the_default_owner_is_a_valid_slug():
    from ragstead.filters import USER_SLUG

    assert USER_SLUG.match(default_owner())


def test_a_bad_owner_and_a_config_without_its_table_are_errors(tmp_path):
    (tmp_path / "ragstead.toml").write_text('owner = "sam"\n')
    with pytest.raises(ConfigError, match=r"no \[ragstead\] table"):
        load_settings(tmp_path)
    (tmp_path / "ragstead.toml").write_text('[ragstead]\nowner = "../bob"\n')
    with pytest.raises(ConfigError, match="owner must be a user slug"):
        load_settings(tmp_path)


def _cli(cwd, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in OFFLINE_ENV.items() if k != "RAGSTEAD_ROOT"}
    return run_ragstead(*args, env=env, cwd=cwd)


def test_the_project_is_found_from_a_subfolder_and_a_missing_root_creates_nothing(tmp_path):
    write_files(tmp_path, NOTES)
    (tmp_path / "ragstead.toml").write_text('[ragstead]\nowner = "sam"\nroots = ["notes"]\n')
    assert _cli(tmp_path, "index", "-q").returncode == 0
    found = _cli(tmp_path / "notes" / "trips", "query", "huts accept cards", "--user", "sam", "--format", "table")
    assert found.returncode == 0, found.stderr
    assert "alta-via.md" in found.stdout
    missing = tmp_path / "nope"
    out = _cli(tmp_path, "index", "--root", str(missing))
    assert out.returncode == 2 and out.stderr.startswith("error:") and "Traceback" not in out.stderr
    assert not missing.exists()


def test_init_writes_the_config_and_the_gitignore_boundary_and_keeps_what_is_there(tmp_path):
    import ragstead

    project = tmp_path / "notes"
    report = ragstead.init(project, owner="sam")
    assert (project / "ragstead.toml").read_text().startswith("[ragstead]")
    assert load_settings(project).roots == (".",) and load_settings(project).owner == "sam"
    assert "/kb/rag/" in (project / ".gitignore").read_text().splitlines()
    assert report["gitignore"][0] == "/kb/rag/" and {".env", "*.pem", "id_rsa*"} <= set(report["gitignore"])
    # A second init keeps the user's own lines and comments, and adds nothing twice.
    (project / "ragstead.toml").write_text('# my notes\n[ragstead]\nowner = "sam"\nroots = ["."]\nchunk_size = 300\n')
    again = ragstead.init(project, roots=["journal"])
    text = (project / "ragstead.toml").read_text()
    assert "# my notes" in text and "chunk_size = 300" in text and load_settings(project).roots == ("journal",)
    assert again["gitignore"] == []
    team = ragstead.init(tmp_path / "team", layout="team", owner="alice")
    assert {"kb/users/alice/", "artifacts/dossiers/", "docs/archive/"} <= set(team["created"])
    assert {"/kb/*", "!/kb/README.md", "/artifacts/"} <= set((tmp_path / "team" / ".gitignore").read_text().split())
    with pytest.raises(ConfigError):
        ragstead.init(tmp_path / "x", chunker="nope")


def test_index_a_folder_records_it_and_wrong_paths_create_nothing(tmp_path):
    write_files(tmp_path, {"n/atlas.md": "We chose PostgreSQL for Project Atlas.",
                           "n/huts.txt": "The huts on the Alta Via accept cards.",
                           "pics/clip.mp4": "not text"})
    first = _cli(tmp_path, "index", "n", "-q")
    assert first.returncode == 0, first.stderr
    assert "roots: n" in first.stdout
    assert load_settings(tmp_path).roots == ("n",)
    again = _cli(tmp_path, "index", "-q", "--format", "json")  # a plain run walks the recorded root
    assert again.returncode == 0 and '"unchanged": 2' in again.stdout
    # From inside the folder, the project is found upward and answers.
    answer = _cli(tmp_path / "n", "ask", "Which database did we choose for Project Atlas?")
    assert answer.returncode == 0 and "PostgreSQL" in answer.stdout and "n/atlas.md" in answer.stdout
    for args, message in ((("index", "nope"), "no such folder"), (("index", "n/atlas.md"), "is not a folder")):
        out = _cli(tmp_path, *args)
        assert out.returncode == 2 and out.stderr.startswith("error:") and message in out.stderr, out.stderr
    bare = tmp_path.parent / f"{tmp_path.name}-bare"  # outside the project above
    (bare / "pics").mkdir(parents=True)
    (bare / "pics" / "clip.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    out = _cli(bare, "index", "pics")
    assert out.returncode == 2 and "no supported files under pics" in out.stderr
    assert sorted(p.name for p in bare.iterdir()) == ["pics"]  # no index, no config was created


def test_exclude_patterns_and_ragsteadignore_leave_files_out(tmp_path, fake_embedder):
    write_files(tmp_path, {"notes/keep.md": "keep this note about herons",
                           "notes/drafts/wip.md": "a draft about herons",
                           "notes/secret.md": "a note about herons never to index",
                           "notes/big.log.txt": "log lines about herons"})
    (tmp_path / "ragstead.toml").write_text('[ragstead]\nroots = ["notes"]\nexclude = ["*.log.txt"]\n')
    (tmp_path / ".ragsteadignore").write_text("# private drafts\nnotes/drafts/\nsecret.md\n")
    kb = KnowledgeBase(load_settings(tmp_path), embedder=fake_embedder)
    report = kb.index()
    assert report.added == ["notes/keep.md"] and report.excluded == 2  # the drafts folder is pruned unseen
    (tmp_path / ".ragsteadignore").write_text("notes/drafts/\n")
    kb = KnowledgeBase(load_settings(tmp_path), embedder=fake_embedder)
    assert kb.index().added == ["notes/secret.md"]
    (tmp_path / ".ragsteadignore").write_text("notes/keep.md\n")  # excluding an indexed file removes it
    kb = KnowledgeBase(load_settings(tmp_path), embedder=fake_embedder)
    assert "notes/keep.md" in kb.index().removed
    kb.close()


def test_init_then_index_then_ask_from_the_cli(tmp_path):
    out = _cli(tmp_path, "init", "notes", "--owner", "sam")
    assert out.returncode == 0, out.stderr
    notes = tmp_path / "notes"
    (notes / "deploys.md").write_text("# Deploys\n\nWe agreed: no Friday deploys.\n")
    indexed = _cli(notes, "index")
    assert indexed.returncode == 0 and "+ deploys.md" in indexed.stdout
    assert "ragstead.toml" not in indexed.stdout + indexed.stderr  # the project's own config is not a document
    answer = _cli(notes, "ask", "What did we decide about Friday deploys?", "--user", "sam")
    assert answer.returncode == 0 and "no Friday deploys" in answer.stdout and "deploys.md" in answer.stdout
    assert "[1] deploys.md (Deploys):" in answer.stdout  # the citation names the heading, not a chunk id


def test_a_personal_folder_keeps_uploads_and_ingests_in_itself_with_plain_types(tmp_path, fake_embedder):
    import ragstead
    from helpers.web_server import serve

    notes = tmp_path / "notes"
    ragstead.init(notes, owner="sam")
    write_files(notes, {"atlas.md": "# Atlas\n\nWe chose PostgreSQL for Project Atlas."})
    with serve() as (base, _routes), ragstead.open(notes, embedder=fake_embedder, auto_tags=False) as kb:
        kb.index()
        status, doc = kb.upload("trip.md", b"The huts accept cards.", user="sam")
        assert (status, doc["file_path"], doc["doc_type"], doc["user_slug"]) == ("added", "uploads/trip.md",
                                                                                  "upload", "sam")
        [page] = kb.ingest([f"{base}/notes.txt"]).results
        assert page.status == "added", page.reason
        assert page.file_path.startswith("ingested/") and not (notes / "kb/users").exists()
        stored = kb.document(path=page.file_path)
        assert (stored["doc_type"], stored["user_slug"], stored["is_private"]) == ("ingested", "sam", True)
        assert kb.ingest([f"{base}/notes.txt"]).results[0].status == "duplicate"  # dedup finds it there
        answer = kb.ask("When is the quarterly review?", user="sam", extractive=True, min_confidence=0)
        cited = [c.locator for c in answer.citations if c.locator.get("url")]
        assert cited and cited[0]["url"] == f"{base}/notes.txt" and "title" in cited[0]
        # Another user of the same folder (an API key of theirs) keeps the team path.
        _, theirs = kb.upload("x.md", b"Alice's note.", user="alice")
        assert theirs["file_path"] == "kb/users/alice/uploads/x.md"


def test_the_library_opens_a_tilde_path_and_returns_typed_results(tmp_path, fake_embedder, monkeypatch):
    import ragstead

    monkeypatch.setenv("HOME", str(tmp_path))
    ragstead.init("~/notes", owner="sam")
    write_files(tmp_path / "notes", {"atlas.md": "# Atlas\n\nWe chose PostgreSQL for Project Atlas."})
    with ragstead.open("~/notes", embedder=fake_embedder) as kb:
        assert kb.root == (tmp_path / "notes").resolve()
        kb.index()
        [doc] = kb.documents()
        assert isinstance(doc, ragstead.DocumentInfo) and (doc.file_path, doc.user_slug) == ("atlas.md", "sam")
        assert doc["file_path"] == "atlas.md" and doc.to_dict()["chunks"] == doc.chunks == 1
        found = kb.search("PostgreSQL Atlas", user="sam")
        assert isinstance(found.filters, ragstead.AppliedFilters) and found.filters.user_slug == "sam"
        assert found.to_dict()["filters"] == found.filters.to_dict() and found.filters["user_slug"] == "sam"
        answer = kb.ask("What did we choose for Atlas?", user="sam", extractive=True, min_confidence=0)
        assert isinstance(answer.gate, ragstead.Relevance) and answer.to_dict()["gate"] == answer.gate.to_dict()
        locator = answer.citations[0].locator
        assert isinstance(locator, ragstead.Locator) and locator.chunk_id == locator["chunk_id"]
        assert answer.to_dict()["citations"][0]["locator"] == {"page": None, "section_path": "Atlas",
                                                                "heading": "Atlas", "chunk_id": locator.chunk_id,
                                                                "title": locator.title}
