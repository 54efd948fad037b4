"""Project setup: `init` (the config file, the `.gitignore` boundary, the team folders), the values a project's
config file records as it is used (roots, sentence vectors), and the catalogs `init` and `config` offer
(embedding models, prompt templates).

It stands above `ragstead.services.guard` (the secret-like file names the `.gitignore` lines block).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragstead.answer.base import Context
from ragstead.answer.prompt import catalog as template_catalog
from ragstead.answer.prompt import load_template
from ragstead.config import CONFIG_FILE, Settings, default_owner, load_settings, save_settings
from ragstead.core.atomic import make_private_folder
from ragstead.embeddings.catalog import catalog_rows
from ragstead.errors import ConfigError
from ragstead.indexing.ignore import IGNORE_FILE
from ragstead.indexing.ignore import STARTER as IGNORE_STARTER
from ragstead.indexing.languages import model_advice, sample_languages
from ragstead.services.guard import SECRET_FILE_PATTERNS
from ragstead.services.runtime import Runtime


def saved_settings(root: Path) -> dict[str, Any]:
    """The `[ragstead]` table of the project's config file as written (no defaults, no environment); empty
    when there is none or it cannot be read."""
    config = root / CONFIG_FILE
    if config.exists():
        with contextlib.suppress(OSError, UnicodeError, tomllib.TOMLDecodeError):
            return dict(tomllib.loads(config.read_text(encoding="utf-8")).get("ragstead", {}))
    return {}


def record_roots(runtime: Runtime, roots: Sequence[str]) -> tuple[str, ...] | None:
    """Add these folders to the roots the project's config names (creating the config if there is none),
    so a later plain `index` walks them too. Returns the new roots, or None if nothing changed."""
    named = tuple(saved_settings(runtime.root).get("roots", ()))
    # A folder inside a root already named is walked with it: recording it too would only walk it twice.
    inside = [r for r in roots if any(n in (".", r) or r.startswith(n.rstrip("/") + "/") for n in named)]
    wanted = tuple(dict.fromkeys((*named, *(r for r in roots if r not in inside))))
    if wanted == named:
        return None
    save_settings(runtime.root, {"roots": wanted})
    runtime.settings = runtime.settings.with_overrides(roots=wanted)
    return wanted


def keep_sentence_vectors(runtime: Runtime) -> bool:
    """Record `sentence_vectors = true` in the project's config, so every later write keeps the re-ranker's
    sentence vectors current. Returns whether the config changed."""
    if saved_settings(runtime.root).get("sentence_vectors"):
        return False
    save_settings(runtime.root, {"sentence_vectors": True})
    runtime.settings = runtime.settings.with_overrides(sentence_vectors=True)
    return True


def keep_chunking(runtime: Runtime, given: dict[str, Any]) -> dict[str, Any]:
    """Record the chunking settings an `index --rebuild` was given (chunker, chunk_size, overlap) in the project's
    config, so the next plain `index` cuts the same way instead of refusing a mismatch. Returns what changed."""
    saved = saved_settings(runtime.root)
    changed = {name: value for name, value in given.items() if value is not None and saved.get(name) != value}
    if changed:
        save_settings(runtime.root, changed)
        runtime.settings = runtime.settings.with_overrides(**changed)
    return changed


TEAM_ROOTS = ("kb", "artifacts", "docs")


def index_home(root: Path) -> Path:
    """Where `init --index-home` keeps a project's index, outside its folder (#47.6: a folder synced to a cloud
    drive would sync the index too): `$XDG_DATA_HOME/ragstead/<name>-<hash of the folder's path>/`, by default under
    ~/.local/share. The key is chosen once, at init, and the config records the path: a moved folder keeps it."""
    data_home = os.environ.get("XDG_DATA_HOME", "")
    base = Path(data_home) if os.path.isabs(data_home) else Path.home() / ".local" / "share"  # the spec: absolute only
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", root.name).strip("-.")[:40] or "project"
    return base / "ragstead" / f"{name}-{hashlib.sha256(os.fsencode(root)).hexdigest()[:12]}"


def eval_reports_folder(settings: Settings) -> Path:
    """Where `eval` writes its reports when not told: beside an index that lives outside the folder (the index
    home of #47.6, or any `db_path` outside it), so a synced folder holds nothing of ragstead's; otherwise
    `kb/rag/eval/reports/` in the folder, as always."""
    root = settings.root.resolve()
    index_folder = settings.db_file.parent.resolve()
    if index_folder.is_relative_to(root):
        return root / "kb" / "rag" / "eval" / "reports"
    return index_folder / "eval" / "reports"


def _index_home_values(root: Path, current: Settings) -> dict[str, str]:
    """The config values that put the index in `index_home(root)` (made 0700 now), or none when it is there
    already. An index the folder holds already is not left behind silently: init refuses."""
    folder = index_home(root)
    if current.db_file.parent.resolve() == folder.resolve():
        return {}
    if current.db_file.exists():
        raise ConfigError(f"an index exists at {current.db_file}; --index-home starts a new one in {folder}: move "
                          "or delete the old one first (or `ragstead export` it, then `import` it after init)")
    make_private_folder(folder)
    return {"db_path": str(folder / "ragstead.db"), "lock_path": str(folder / "index.lock")}


def init(path: str | Path = ".", *, layout: str = "personal", owner: str | None = None,
         roots: Sequence[str] | None = None, model: str | None = None, chunker: str | None = None,
         index_outside: bool = False) -> dict[str, Any]:
    """Make `path` (created if missing) a ragstead project: its `ragstead.toml` (roots, owner, model, chunker),
    the `.gitignore` lines that keep the index and the private folders out of git, and for the team layout
    its folders. An existing config keeps every value not given here. `index_outside`: the index lives in
    `index_home(root)`, outside the folder, its paths recorded in the config (`db_path`, `lock_path`) so every
    command finds it. Returns what was written."""
    if layout not in ("personal", "team"):
        raise ConfigError(f"layout must be personal or team, got {layout!r}")
    root = Path(path).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    existing = (root / CONFIG_FILE).exists()
    current = load_settings(root)
    values: dict[str, Any] = {"owner": owner or current.owner or (default_owner() if existing else _new_owner())}
    if roots is not None or not existing:
        values["roots"] = tuple(roots) if roots else (TEAM_ROOTS if layout == "team" else (".",))
    if model:
        values["model"] = model
    if chunker:
        values["chunker"] = chunker
    settings = current.with_overrides(**values)
    settings.chunking  # noqa: B018 - validates the chunker before anything is written
    if index_outside:
        values |= _index_home_values(root, current)
        settings = settings.with_overrides(**values)
    config = save_settings(root, values)
    created = []
    if layout == "team":
        for folder in (f"kb/users/{settings.owner_slug}", "artifacts/dossiers", "docs/archive"):
            if not (root / folder).exists():
                if folder.startswith("docs/"):
                    (root / folder).mkdir(parents=True)
                else:  # private data: 0700 from the first command, every folder on the way (kb/, kb/users/)
                    make_private_folder(root / folder)
                created.append(folder + "/")
    if not (root / IGNORE_FILE).exists():  # a commented starter: nothing is ignored until a line says so
        (root / IGNORE_FILE).write_text(IGNORE_STARTER, encoding="utf-8")
        created.append(IGNORE_FILE)
    ignored = _gitignore_boundary(root, settings, layout)
    languages = sample_languages(root, settings.roots)  # #47.1: a folder mostly not in English hears of the model
    return {"root": str(root), "config": str(config), "settings": {k: list(v) if isinstance(v, tuple) else v
                                                                   for k, v in values.items()},
            "gitignore": ignored, "created": created, "languages": languages,
            "model_advice": model_advice(languages, settings.model)}


def _new_owner() -> str:
    """The owner a new project's config names: the login name, but "me" for root (an account, not a person: a
    container or sudo session). A config that exists keeps what its files were indexed under."""
    name = default_owner()
    return "me" if name == "root" else name


def _gitignore_boundary(root: Path, settings: Settings, layout: str) -> list[str]:
    """Add the lines that keep the index (and the team layout's private folders) out of git, and the
    secret-like file names `ragstead guard` blocks; returns the lines added."""
    index_dir = settings.db_file.parent.resolve()
    lines = [f"/{index_dir.relative_to(root).as_posix()}/"] if index_dir.is_relative_to(root) else []
    if layout == "team":  # private by layout: everything under kb/ and artifacts/ but the two marker files
        lines += ["/kb/*", "!/kb/README.md", "!/kb/.gitkeep", "/artifacts/"]
    lines += SECRET_FILE_PATTERNS
    path = root / ".gitignore"
    present = set(path.read_text(encoding="utf-8").splitlines()) if path.exists() else set()
    added = [line for line in lines if line not in present]
    if added:
        with path.open("a", encoding="utf-8") as out:
            out.write(("" if not present else "\n") + "# ragstead: the index, private folders and secret-like files "
                      "stay out of git\n")
            out.write("\n".join(added) + "\n")
    return added


def model_catalog() -> list[dict[str, Any]]:
    """The embedding models `model` takes: id, name, description, package, installed."""
    return catalog_rows()


def prompt_templates() -> list[dict[str, Any]]:
    """The built-in prompt templates: name, description and number of few-shot examples."""
    rows = []
    for name in sorted(template_catalog()):
        found = load_template(name)
        rows.append({"name": name, "description": found.description, "examples": len(found.examples)})
    return rows


def template_preview(name: str) -> list[dict[str, str]]:
    """The messages a template makes for a demo question and chunk (to see what a model is sent)."""
    demo = [Context(1, "We decided to migrate the billing database to PostgreSQL 16 in March.",
                    "kb/users/alice/db.md", {"page": None, "section_path": "Billing > Decision",
                                             "chunk_id": "0" * 64}, 0.71)]
    return load_template(name).messages("Which database did we choose for billing?", demo)
