"""Settings: defaults, then `ragstead.toml`, then `RAGSTEAD_*` env vars, then CLI flags or `ragstead.open()`
overrides. Only the KnowledgeBase reads them; it hands each layer its own narrow options.

All paths are relative to the project root (`--root`, `RAGSTEAD_ROOT`, default: the current dir).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ragstead.chunking import ChunkingOptions
from ragstead.documents.metadata import DEFAULT_PATH_RULES, PathRule
from ragstead.errors import ConfigError
from ragstead.indexing.build import IndexingOptions
from ragstead.retrieval.search import SearchOptions
from ragstead.stores.factory import StoreSpec

CONFIG_FILE = "ragstead.toml"


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
    # An id of embeddings/catalog.py (minilm-l6-int8, minilm-l6-fp32, ...); "" = the index's own model, or
    # the default for a new index.
    model: str = ""
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
    default_mode: str = "hybrid"
    answer_template: str = "grounded"  # a built-in prompt template name, or a .toml path (relative: to root)
    path_rules: tuple[PathRule, ...] = field(default=DEFAULT_PATH_RULES)

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
        return ChunkingOptions(strategy=self.chunker, chunk_size=self.chunk_size, overlap=self.overlap)

    def search_options(self, mode: str | None = None, **overrides: Any) -> SearchOptions:
        """Search options from the configured defaults; a None override keeps the configured value."""
        values: dict[str, Any] = {
            "mode": mode or self.default_mode, "top_k_vector": self.top_k_vector,
            "top_k_lexical": self.top_k_lexical, "rrf_k": self.rrf_k, "fusion": self.fusion,
            "fusion_weight": self.fusion_weight, "rerank_top_n": self.rerank_top_n, "rerank_weight": self.rerank_weight,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return SearchOptions(**values)

    def indexing(self, roots: tuple[str, ...] | None = None) -> IndexingOptions:
        """What `index` reads and how it chunks it."""
        return IndexingOptions(root=self.root, roots=tuple(roots or self.roots), lock_file=self.lock_file,
                               chunking=self.chunking, path_rules=self.path_rules,
                               skip_dirs=(self.db_file.parent,))

    def store_spec(self) -> StoreSpec:
        """The parsed `store` setting."""
        return StoreSpec.parse(self.store, root=self.root, default_db=self.db_file)

    def with_overrides(self, **overrides: Any) -> Settings:
        """Apply non-None overrides (CLI flags)."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


_SIMPLE = {f.name: f for f in fields(Settings) if f.name not in ("root", "path_rules")}


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


def load_settings(root: Path | None = None, config_file: Path | None = None) -> Settings:
    """Build settings from defaults, the config file (if any) and the environment."""
    root = Path(root or os.environ.get("RAGSTEAD_ROOT") or ".").resolve()
    values: dict[str, Any] = {}
    rules = DEFAULT_PATH_RULES
    path = config_file or Path(os.environ.get("RAGSTEAD_CONFIG", root / CONFIG_FILE))
    if config_file is not None and not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    if path.exists():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, OSError, UnicodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        section = data.get("ragstead", {})
        unknown = set(section) - set(_SIMPLE)
        if unknown:
            raise ConfigError(f"unknown key(s) {sorted(unknown)} in {path}; known: {sorted(_SIMPLE)}")
        values.update({k: _coerce(k, v) for k, v in section.items()})
        try:
            custom = tuple(
                PathRule(r["pattern"], r["doc_type"], bool(r["is_private"]), tuple(r.get("tags", ())))
                for r in data.get("path_rules", [])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"bad [[path_rules]] entry in {path}: {exc}") from exc
        rules = custom + DEFAULT_PATH_RULES
    for name in _SIMPLE:
        env = os.environ.get(f"RAGSTEAD_{name.upper()}")
        if env is not None:
            values[name] = _coerce(name, env)
    settings = Settings(root=root, path_rules=rules, **values)
    settings.chunking  # validates chunker sizes early  # noqa: B018
    return settings
