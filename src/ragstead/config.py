"""Settings: defaults, then `ragstead.toml`, then `RAGSTEAD_*` env vars, then CLI flags or `ragstead.open()`
overrides. Only the KnowledgeBase reads them; it hands each layer its own narrow options.

All paths are relative to the project root (`--root`, `RAGSTEAD_ROOT`, default: the current dir).
"""

from __future__ import annotations

import getpass
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ragstead.core.atomic import write_text_atomically
from ragstead.documents.chunking import ChunkingOptions
from ragstead.documents.metadata import DEFAULT_PATH_RULES, PathRule, owner_rule
from ragstead.errors import ConfigError
from ragstead.filters import USER_SLUG
from ragstead.indexing.ignore import IGNORE_FILE as _IGNORE_FILE
from ragstead.indexing.options import IndexingOptions
from ragstead.request.fields import REFUSAL
from ragstead.retrieval.options import SearchOptions
from ragstead.stores.factory import StoreSpec

CONFIG_FILE = "ragstead.toml"
IGNORE_FILE = _IGNORE_FILE  # gitignore syntax, in any folder (indexing/ignore.py)


@dataclass(frozen=True)
class Target:
    """A named knowledge base `ragstead ingest --targets NAME` writes to: its project root and store spec."""

    name: str
    root: str
    store: str = ""


@dataclass(frozen=True)
class Settings:
    """Every tunable in one place. Field names are the config-file keys (`[ragstead]` table)."""

    root: Path = Path(".")
    roots: tuple[str, ...] = ("kb", "artifacts")
    db_path: str = "kb/rag/ragstead.db"
    # Where the index lives (stores/factory.py). A URL with a password belongs in RAGSTEAD_STORE, not in a
    # committed file.
    store: str = ""
    lock_path: str = "kb/rag/index.lock"
    chunker: str = "words"
    chunk_size: int = 400
    overlap: int = 80
    # An id of embeddings/catalog.py (minilm-l6-int8, minilm-l6-fp32, ...), onnx:DIR or hf:ORG/NAME; "" = the
    # index's own model, or the default for a new index.
    model: str = ""
    # What `--rerank` uses: "" = sentence max-sim with the embedder; onnx:DIR or hf:ORG/NAME = a cross-encoder.
    reranker: str = ""
    # Sentence max-sim: at most this many uncached sentences through the model per query (0: all). 16 keeps
    # the exhaustive re-ranker's gain on SciFact train at a sixth of its cost (docs/benchmarks.md,
    # "A faster sentence re-ranker").
    rerank_sentences: int = 16
    # Index runs also embed every sentence of each chunk into the store, so `--rerank` runs no model at query
    # time (~5 ms instead of ~150-500 ms) for an index-time cost; docs/benchmarks.md, "Stored sentence vectors".
    sentence_vectors: bool = False
    # hf:ORG/NAME may be fetched from the hub when not in the local cache: ragstead's one network use, off.
    allow_download: bool = False
    embed_batch_size: int = 4  # faster and 4x smaller than 32 on 2 cores (docs/design.md, "Memory while indexing")
    max_tokens: int = 256
    embed_cache_size: int = 1024  # query vectors kept in the KnowledgeBase's LRU cache (0: off)
    # Retrieval knobs default to SearchOptions' values (where the measurements behind them are noted).
    top_k_vector: int = SearchOptions.top_k_vector
    top_k_lexical: int = SearchOptions.top_k_lexical
    rrf_k: int = SearchOptions.rrf_k
    fusion: str = SearchOptions.fusion  # convex | rrf
    fusion_weight: float = SearchOptions.fusion_weight
    rerank_top_n: int = SearchOptions.rerank_top_n
    rerank_weight: float = SearchOptions.rerank_weight
    feedback_k: int = SearchOptions.feedback_k  # Rocchio feedback on the vector side of hybrid (0: off)
    feedback_weight: float = SearchOptions.feedback_weight
    default_mode: str = "hybrid"
    # Who owns the files outside the team layout (personal mode): a user slug; "" = the OS user name.
    owner: str = ""
    # Files `index` leaves out: gitignore-style patterns relative to the root, with those of .ragsteadignore.
    exclude: tuple[str, ...] = ()
    # The sentence `ask` says when the documents do not answer (every door: CLI, API, MCP, page): one line.
    refusal: str = REFUSAL
    answer_template: str = "grounded"  # a built-in prompt template name, or a .toml path (relative: to root)
    # Deprecated alias of `answerers`: `answerer = "x"` means `answerers = ["x", ...the default order]`.
    answerer: tuple[str, ...] = ()
    # Documents whose text never goes into a remote LLM's prompt (gitignore-style patterns, project-relative).
    local_only: tuple[str, ...] = ()
    # Tools an LLM answerer of `ask` may call (answer/tools.py's allow-list, e.g. "weather"); none by default.
    tools: tuple[str, ...] = ()
    # The answerers `ask` tries, in this order (empty: openai, gemini, extractive), by their names in the
    # "ragstead.answerers" registry (answer/registry.py: the built-ins and plugins); each LLM joins only when its
    # key or endpoint is set (the environment or the project's .env); the offline extractive one ends it. A remote
    # one named here in the project's config is also consent to send it text; the defaults and RAGSTEAD_ANSWERERS
    # in the environment never are (answer/consent.py, docs/privacy.md).
    answerers: tuple[str, ...] = ()
    # The remote answerers the user named (`answerers`/`answerer` in the config file, or a library override):
    # what `ask` may send text to without `--llm`. Not a config key: load_settings and with_overrides set it.
    consented: tuple[str, ...] = ()
    path_rules: tuple[PathRule, ...] = field(default=DEFAULT_PATH_RULES)
    # What one file may cost an index run (docs/design.md, "Hostile files"); over a limit it is skipped.
    max_file_mb: int = IndexingOptions.max_file_bytes >> 20
    max_unzipped_mb: int = IndexingOptions.max_unzipped_bytes >> 20  # a .docx unpacked (zip central directory)
    max_zip_ratio: float = IndexingOptions.max_zip_ratio
    max_pdf_pages: int = IndexingOptions.max_pdf_pages
    max_file_chars: int = IndexingOptions.max_file_chars
    max_html_depth: int = IndexingOptions.max_html_depth
    max_chunk_chars: int = ChunkingOptions.max_chunk_chars
    file_seconds: float = IndexingOptions.file_seconds
    follow_symlinks: str = IndexingOptions.follow_symlinks  # scope | project
    ocr: bool = IndexingOptions.ocr  # read images and scanned PDF pages with Tesseract (false: skip images)
    max_reader_mb: int = IndexingOptions.max_reader_bytes >> 20  # the file reader process's memory (0: no sandbox)
    # `ragstead ingest`: network limits per source, and the server's SSRF guard (docs/ingest.md).
    fetch_connect_seconds: float = 10.0
    fetch_read_seconds: float = 30.0
    fetch_max_mb: int = 50
    fetch_deadline_seconds: float = 60.0  # one source's wall-clock budget: DNS, connect, redirects, body (0: none)
    allow_private_urls: bool = False  # POST /v1/ingest may fetch loopback/private addresses (the CLI always may)
    # /v1/query and /v1/ask may re-rank (`rerank`): on, as the default re-ranker (sentence max-sim over the
    # embedder) ships with the core; false refuses it, for a server whose CPU should not run one per request.
    api_rerank: bool = True
    # Host names `serve` answers to besides localhost, IP addresses and the one it listens on (docs/http-api.md)
    allowed_hosts: tuple[str, ...] = ()
    auto_tags: bool = True  # tag ingested sources (an LLM provider if configured, else local keyphrases)
    # Conversations the server keeps (`POST /v1/chat`, conversation/history.py): days after a conversation's last
    # turn before it is deleted (0: kept until deleted).
    chat_retention_days: int = 30
    # Other knowledge bases `ingest --targets` writes to: `[targets.NAME]` tables with `root` and `store`.
    targets: tuple[Target, ...] = ()
    # Not a config key: whether `root` is a project (given, or a ragstead.toml or an index found at or above the
    # current folder). False: nothing was found and the root is just where the command ran.
    project_found: bool = True

    @property
    def answer_order(self) -> tuple[str, ...]:
        """The answerers `ask` tries, in order: `answerers`, else the deprecated `answerer` before the defaults."""
        if self.answerers:
            return self.answerers
        from ragstead.answer.registry import DEFAULT_ORDER

        return tuple(n for n in dict.fromkeys((*self.answerer, *DEFAULT_ORDER)) if n != "local")  # --llm's word

    def consented_for(self, llm: Sequence[str] | None) -> tuple[str, ...]:
        """The remote answerers text may go to: `llm` for this question (`ask --llm`), else what the config wrote."""
        return self.consented if llm is None else _remote_names(llm)

    @property
    def owner_slug(self) -> str:
        """The project owner as a user slug: `owner`, else the OS user name made a slug, else "me"."""
        return self.owner or default_owner()

    @property
    def personal(self) -> bool:
        """A personal project: its roots name none of the team folders (kb, artifacts, docs), as `init` writes
        them for the personal layout. The owner's uploads and ingests then land in the folder itself."""
        return not any(Path(r).parts[:1] in (("kb",), ("artifacts",), ("docs",)) for r in self.roots)

    def user_folder(self, user: str) -> str:
        """Where a user's own files (uploads, ingested sources) land, relative to the root: the folder itself
        for the owner of a personal project, else `kb/users/<user>`."""
        return "" if self.personal and user == self.owner_slug else f"kb/users/{user}"

    @property
    def scope_rules(self) -> tuple[PathRule, ...]:
        """The path rules every scope decision uses: the configured ones, then the owner's (personal mode: their
        uploads and ingested sources by plain type names, every other file a note of theirs)."""
        owner = self.owner_slug
        landed = (PathRule(r"^uploads/", "upload", True, user_slug=owner),
                  PathRule(r"^ingested/", "ingested", True, user_slug=owner)) if self.personal else ()
        return (*self.path_rules, *landed, owner_rule(owner))

    @property
    def db_file(self) -> Path:
        return self.resolve(self.db_path)

    @property
    def lock_file(self) -> Path:
        return self.resolve(self.lock_path)

    def resolve(self, value: str) -> Path:
        """A configured path, relative to the project root unless absolute."""
        path = Path(value)
        return path if path.is_absolute() else self.root / path

    @property
    def template_spec(self) -> str:
        """`answer_template` as `load_template` takes it: a name, or a path resolved against the root."""
        if self.answer_template.endswith(".toml"):
            return str(self.resolve(self.answer_template))
        return self.answer_template

    @property
    def chunking(self) -> ChunkingOptions:
        return ChunkingOptions(strategy=self.chunker, chunk_size=self.chunk_size, overlap=self.overlap,
                               max_chunk_chars=self.max_chunk_chars)

    def search_options(self, mode: str | None = None, **overrides: Any) -> SearchOptions:
        """Search options from the configured defaults; a None override keeps the configured value."""
        values: dict[str, Any] = {
            "mode": mode or self.default_mode, "top_k_vector": self.top_k_vector,
            "top_k_lexical": self.top_k_lexical, "rrf_k": self.rrf_k, "fusion": self.fusion,
            "fusion_weight": self.fusion_weight, "rerank_top_n": self.rerank_top_n, "rerank_weight": self.rerank_weight,
            "feedback_k": self.feedback_k, "feedback_weight": self.feedback_weight,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return SearchOptions(**values)

    def indexing(self, roots: tuple[str, ...] | None = None) -> IndexingOptions:
        """What `index` reads and how it chunks it."""
        return IndexingOptions(root=self.root, roots=tuple(roots or self.roots), lock_file=self.lock_file,
                               chunking=self.chunking, path_rules=self.scope_rules,
                               skip_dirs=(self.db_file.parent,), skip_files=(self.root / CONFIG_FILE,),
                               max_file_bytes=self.max_file_mb << 20,
                               max_unzipped_bytes=self.max_unzipped_mb << 20, max_zip_ratio=self.max_zip_ratio,
                               max_pdf_pages=self.max_pdf_pages, max_file_chars=self.max_file_chars,
                               max_html_depth=self.max_html_depth, file_seconds=self.file_seconds,
                               follow_symlinks=self.follow_symlinks, ocr=self.ocr,
                               max_reader_bytes=self.max_reader_mb << 20,
                               exclude=(*self.exclude, *self.ignore_file_patterns()))

    def ignore_file_patterns(self) -> tuple[str, ...]:
        """The patterns of `<root>/.ragsteadignore` (gitignore syntax), if the file exists."""
        path = self.root / IGNORE_FILE
        try:
            lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        except (OSError, UnicodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from exc
        return tuple(line for line in lines if line.strip() and not line.lstrip().startswith("#"))

    def store_spec(self) -> StoreSpec:
        """The parsed `store` setting."""
        return StoreSpec.parse(self.store, root=self.root, default_db=self.db_file)

    def with_overrides(self, **overrides: Any) -> Settings:
        """Apply non-None overrides (CLI flags, `ragstead.open(...)`): answerers named there are written by the
        user, so a remote one among them is consent, as in the config file."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        named = (*changes.get("answerers", ()), *changes.get("answerer", ()))
        if named:
            _check_answerers(changes.get("answerers", ()))
            changes["consented"] = tuple(dict.fromkeys((*self.consented, *_remote_names(named))))
        return replace(self, **changes)


_NOT_KEYS = ("root", "path_rules", "targets", "project_found", "consented")  # set by load_settings, not config keys
_SIMPLE = {f.name: f for f in fields(Settings) if f.name not in _NOT_KEYS}
_TARGET_NAME = USER_SLUG


def default_owner() -> str:
    """The OS user name as a user slug (letters, digits, '.', '_', '-'), or "me"."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = ""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:64]
    return slug if USER_SLUG.match(slug) else "me"


def _coerce(name: str, value: Any) -> Any:
    default = getattr(Settings, name)
    try:
        if isinstance(default, tuple):
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(v).strip() for v in items if str(v).strip())
        if isinstance(default, bool):
            return str(value).lower() in ("1", "true", "yes", "on")
        if isinstance(default, float):
            return float(value)
        if isinstance(default, int):
            return int(value)
        return str(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config value {name}={value!r} is not a valid {type(default).__name__}") from exc


def _check_answerers(names: tuple[str, ...]) -> None:
    """Names of the answerer registry only (answer/registry.py), imported only when there are names: a project
    that orders none opens without the answer package."""
    if names:
        from ragstead.answer.registry import check_names

        check_names(names)


def provider_env(root: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The answerers' settings (keys, endpoints, models): the project's `.env` file, under the process
    environment (a variable set in the shell wins). The file is never committed: `init` writes `.env` into
    .gitignore and the guard blocks it. A key here only makes an answerer available; it does not choose one."""
    from dotenv import dotenv_values

    file = root / ".env"
    values = {k: v for k, v in dotenv_values(file).items() if v is not None} if file.is_file() else {}
    return {**values, **(os.environ if environ is None else environ)}


def find_project(start: Path) -> Path:
    """The nearest folder at or above `start` with a `ragstead.toml` or an index (as git finds its
    repository), else `start` itself."""
    start = start.resolve()
    return next((folder for folder in (start, *start.parents) if _is_project(folder)), start)


def _is_project(folder: Path) -> bool:
    return (folder / CONFIG_FILE).is_file() or (folder / Settings.db_path).is_file()


def load_settings(root: Path | None = None, config_file: Path | None = None) -> Settings:
    """Build settings from defaults, the config file (if any) and the environment. The project root is
    `root`, else $RAGSTEAD_ROOT, else the nearest project at or above the current folder."""
    given = root or os.environ.get("RAGSTEAD_ROOT")
    root = _project_root(given)
    path = config_file or Path(os.environ.get("RAGSTEAD_CONFIG", root / CONFIG_FILE))
    if config_file is not None and not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    values, rules = _file_values(path) if path.exists() else ({}, DEFAULT_PATH_RULES)
    values.update(_environment_values())
    settings = Settings(root=root, path_rules=rules, project_found=bool(given) or _is_project(root), **values)
    _check_settings(settings)
    return settings


def _project_root(given: Path | str | None) -> Path:
    """The root as given (`~/notes` as a shell reads it; it must be a folder), else the nearest project."""
    if not given:
        return find_project(Path.cwd())
    root = Path(given).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"the project root {root} is not a folder; create it, or pass an existing --root")
    return root


def _remote_names(names: Sequence[str]) -> tuple[str, ...]:
    """The remote answerers `names` consents to (answer/consent.py), that module imported only when there are names:
    a project that names no answerer opens without the answer package's consent rules."""
    if not any(name.strip() for name in names):
        return ()
    from ragstead.answer.consent import remote_names

    return remote_names(names)


def _file_values(path: Path) -> tuple[dict[str, Any], tuple[PathRule, ...]]:
    """The settings the config file at `path` sets (its `[ragstead]` table, the consent it gives and its
    `[targets]`), and the path rules: its `[[path_rules]]` ahead of the defaults."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if data and "ragstead" not in data and "path_rules" not in data:
        raise ConfigError(f"{path} has no [ragstead] table; put the settings under a line `[ragstead]`")
    section = data.get("ragstead", {})
    unknown = set(section) - set(_SIMPLE)
    if unknown:
        raise ConfigError(f"unknown key(s) {sorted(unknown)} in {path}; known: {sorted(_SIMPLE)}")
    values = {k: _coerce(k, v) for k, v in section.items()}
    # Consent is what the user wrote here; the same keys from the environment only order the chain.
    _check_answerers(values.get("answerers", ()))
    values["consented"] = _remote_names((*values.get("answerers", ()), *values.get("answerer", ())))
    rules = _path_rules(data.get("path_rules", []), path) + DEFAULT_PATH_RULES
    values["targets"] = _targets(data.get("targets", {}), path)
    return values, rules


def _path_rules(entries: Any, path: Path) -> tuple[PathRule, ...]:
    """The config file's `[[path_rules]]` entries as rules (each needs a pattern, doc_type and is_private)."""
    try:
        return tuple(
            PathRule(r["pattern"], r["doc_type"], bool(r["is_private"]), tuple(r.get("tags", ()))) for r in entries
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"bad [[path_rules]] entry in {path}: {exc}") from exc


def _environment_values() -> dict[str, Any]:
    """The settings set as $RAGSTEAD_<NAME> variables (they win over the config file)."""
    values: dict[str, Any] = {}
    for name in _SIMPLE:
        env = os.environ.get(f"RAGSTEAD_{name.upper()}")
        if env is not None:
            values[name] = _coerce(name, env)
    return values


def _check_settings(settings: Settings) -> None:
    """Refuse settings that would only fail later: chunker sizes, per-file limits, answerer names, the refusal
    line and the owner's slug."""
    settings.chunking  # validates chunker sizes early  # noqa: B018
    settings.indexing()  # and the per-file limits
    _check_answerers(settings.answerers)
    _remote_names(settings.answerer)  # the alias's names, checked (unknown ones are an error)
    if not settings.refusal.strip() or "\n" in settings.refusal.strip():
        raise ConfigError(f"refusal must be one line of text, got {settings.refusal!r}")
    if settings.owner and not USER_SLUG.match(settings.owner):
        raise ConfigError(f"owner must be a user slug (letters, digits, '.', '_', '-'), got {settings.owner!r}")


def _targets(table: Any, path: Path) -> tuple[Target, ...]:
    """The `[targets.NAME]` tables: each needs a `root` (relative paths: to the project root); `store` optional."""
    if not isinstance(table, dict):
        raise ConfigError(f"[targets] in {path} must be tables: [targets.NAME] with root = \"...\"")
    out = []
    for name, entry in table.items():
        if not _TARGET_NAME.match(name) or not isinstance(entry, dict) or not isinstance(entry.get("root"), str):
            raise ConfigError(f"bad [targets.{name}] in {path}: a target needs a name of letters, digits, '.', '_', "
                              "'-' and a root = \"path\"")
        unknown = set(entry) - {"root", "store"}
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)} in [targets.{name}] of {path}; known: root, store")
        out.append(Target(name, entry["root"], str(entry.get("store", ""))))
    return tuple(out)


def save_settings(root: Path, values: dict[str, Any], config_file: Path | None = None) -> Path:
    """Write `values` into the `[ragstead]` table of the project's config file, keeping everything else in the
    file as it was (comments and order included). Returns the file's path."""
    import tomlkit

    unknown = set(values) - set(_SIMPLE)
    if unknown:
        raise ConfigError(f"unknown setting(s) {sorted(unknown)}; known: {sorted(_SIMPLE)}")
    path = config_file or root / CONFIG_FILE
    try:
        document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    except (OSError, UnicodeError, tomlkit.exceptions.ParseError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    table = document.get("ragstead")
    if table is None:
        table = tomlkit.table()
        document["ragstead"] = table
    for key, value in values.items():
        table[key] = list(value) if isinstance(value, tuple) else value
    write_text_atomically(path, tomlkit.dumps(document))
    return path
