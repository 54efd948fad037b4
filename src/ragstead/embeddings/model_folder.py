"""Where a bring-your-own model lives and how to run it: `onnx:DIR` (a folder on disk) or `hf:ORG/NAME` (the local
Hugging Face cache; a download only with `allow_download`, ragstead's one network use).

A folder is a sentence-transformers-style ONNX export: `model.onnx` (or `onnx/model.onnx`), `tokenizer.json`, and
optionally `ragstead-model.toml` or the sentence-transformers config files. Design: docs/design.md,
"Bring-your-own models".
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragstead.errors import ConfigError

MODEL_TOML = "ragstead-model.toml"
TOML_KEYS = {"pooling", "max_tokens", "query_prefix", "passage_prefix", "output"}
POOLINGS = ("mean", "cls")
# What `--allow-download` fetches from the hub: the graph, the tokenizer and the small config files.
DOWNLOAD_PATTERNS = ["*.json", "model.onnx", "onnx/model.onnx", MODEL_TOML, "1_Pooling/*"]


@dataclass(frozen=True)
class ModelFolder:
    """A located model folder and what its config files say (defaults where they say nothing)."""

    label: str  # what the index records before the digest: the folder name, or ORG/NAME for hf:
    kind: str  # "onnx" | "hf"
    graph: Path
    tokenizer: Path
    pooling: str = "mean"
    max_tokens: int | None = None  # the model's own maximum (sentence_bert_config.json / the toml)
    query_prefix: str = ""
    passage_prefix: str = ""
    output: str | None = None  # the graph output holding token embeddings (or logits); None: pick one

    def digest(self) -> str:
        """SHA-256 of the graph, the tokenizer and every setting that changes a vector: 12 hex digits."""
        h = hashlib.sha256()
        for path in (self.graph, self.tokenizer):
            h.update(_file_sha256(path).encode())
        h.update(f"{self.pooling}|{self.query_prefix}|{self.passage_prefix}|{self.output or ''}".encode())
        return h.hexdigest()[:12]

    def identity(self) -> str:
        """The model name an index records, e.g. `onnx:bge-base-en-v1.5@3f2a9c01d4e7:cls`."""
        return f"{self.kind}:{self.label}@{self.digest()}:{self.pooling}"


_HASHES: dict[tuple[str, int, int], str] = {}


def _file_sha256(path: Path) -> str:
    """The file's SHA-256, computed once per process for a (path, size, mtime): a 400 MB graph takes ~1 s."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def is_byo(spec: str) -> bool:
    """Whether a `model` / `reranker` value names a bring-your-own model rather than a catalog id."""
    return spec.startswith(("onnx:", "hf:"))


def locate(spec: str, *, allow_download: bool = False) -> ModelFolder:
    """The folder of `onnx:DIR` or `hf:ORG/NAME`, read; a ConfigError that says what to do when it is not there."""
    kind, _, rest = spec.partition(":")
    if kind == "onnx":
        folder = Path(rest).expanduser()
        if not rest or not folder.is_dir():
            raise ConfigError(f"model folder {rest!r} not found: --model onnx:DIR takes a folder holding "
                              "model.onnx and tokenizer.json")
        return read_model_folder(folder, folder.resolve().name, "onnx")
    if kind == "hf":
        repo = rest.strip("/")
        if repo.count("/") != 1 or not all(repo.split("/")):
            raise ConfigError(f"hf:{rest} is not a Hugging Face model id: use hf:ORG/NAME")
        snapshot = hf_snapshot(repo)
        if snapshot is None:
            snapshot = _download(repo, allow_download)
        return read_model_folder(snapshot, repo, "hf")
    raise ConfigError(f"{spec!r} is not a model location: use onnx:DIR or hf:ORG/NAME")


def hf_hub_cache() -> Path:
    """The hub cache folder, as huggingface_hub finds it: $HF_HUB_CACHE, else $HF_HOME/hub, else
    ~/.cache/huggingface/hub ($XDG_CACHE_HOME respected)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "huggingface" / "hub"


def hf_snapshot(repo: str) -> Path | None:
    """The cached snapshot of `repo` that holds an ONNX graph: the one refs/main points to, else the newest."""
    root = hf_hub_cache() / f"models--{repo.replace('/', '--')}"
    snapshots = root / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    ref = root / "refs" / "main"
    if ref.is_file():
        main = snapshots / ref.read_text().strip()
        candidates = [main, *(c for c in candidates if c != main)]
    return next((c for c in candidates if _graph_in(c) is not None), None)


def _download(repo: str, allow_download: bool) -> Path:
    if not allow_download:
        raise ConfigError(f"hf:{repo} is not in the Hugging Face cache ({hf_hub_cache()}); pass --allow-download "
                          "(or set allow_download = true) to fetch it once, or use onnx:DIR with a local export")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ConfigError(f"hf:{repo} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: unset it to "
                          "allow the download, or use onnx:DIR with a local export")
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(repo, allow_patterns=DOWNLOAD_PATTERNS, cache_dir=hf_hub_cache()))
    except Exception as exc:  # network, auth and hub errors all become one clear line
        raise ConfigError(f"could not download hf:{repo}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}; "
                          "check the name and the network, or use onnx:DIR") from exc
    if _graph_in(path) is None:
        raise ConfigError(f"hf:{repo} has no model.onnx (nor onnx/model.onnx): it has no ONNX export to run")
    return path


def _graph_in(folder: Path) -> Path | None:
    return next((p for p in (folder / "model.onnx", folder / "onnx" / "model.onnx") if p.is_file()), None)


def _json(path: Path, kind: type = dict) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    return data if isinstance(data, kind) else kind()


def read_model_folder(folder: Path, label: str, kind: str) -> ModelFolder:
    """Read a model folder: the sentence-transformers files first, then ragstead-model.toml over them."""
    graph = _graph_in(folder)
    if graph is None:
        raise ConfigError(f"{folder} has no model.onnx (nor onnx/model.onnx)")
    tokenizer = next((p for p in (folder / "tokenizer.json", graph.parent / "tokenizer.json") if p.is_file()), None)
    if tokenizer is None:
        raise ConfigError(f"{folder} has no tokenizer.json")
    values = _sentence_transformers_values(folder)
    if (folder / MODEL_TOML).is_file():
        values.update(_read_toml(folder / MODEL_TOML))
    return ModelFolder(label, kind, graph, tokenizer, **values)


def _sentence_transformers_values(folder: Path) -> dict[str, Any]:
    """The settings a sentence-transformers export states: its pooling, its max_seq_length and its query and
    passage prompts, each only when its file says it."""
    values: dict[str, Any] = {}
    pooling = folder / _pooling_folder(folder) / "config.json"
    if pooling.is_file():
        values["pooling"] = _st_pooling(_json(pooling), folder)
    if (folder / "sentence_bert_config.json").is_file():
        length = _json(folder / "sentence_bert_config.json").get("max_seq_length")
        if isinstance(length, int) and length > 0:
            values["max_tokens"] = length
    if (folder / "config_sentence_transformers.json").is_file():
        values.update(_st_prefixes(_json(folder / "config_sentence_transformers.json")))
    return values


def _pooling_folder(folder: Path) -> str:
    """The Pooling module's folder that modules.json names, else sentence-transformers' usual 1_Pooling."""
    modules = _json(folder / "modules.json", list) if (folder / "modules.json").is_file() else []
    return next((m.get("path") for m in modules
                 if isinstance(m, dict) and str(m.get("type", "")).endswith("Pooling")), None) or "1_Pooling"


def _st_prefixes(config: dict[str, Any]) -> dict[str, str]:
    """The query and passage prefixes of config_sentence_transformers.json's prompts (passage, document or
    corpus: the first one set); none when it has no prompts table."""
    prompts = config.get("prompts") or {}
    if not isinstance(prompts, dict):
        return {}
    return {"query_prefix": str(prompts.get("query") or ""),
            "passage_prefix": str(next((prompts[k] for k in ("passage", "document", "corpus") if prompts.get(k)), ""))}


def _st_pooling(config: dict[str, Any], folder: Path) -> str:
    modes = [k.removeprefix("pooling_mode_").removesuffix("_tokens").removesuffix("_token")
             for k, v in config.items() if k.startswith("pooling_mode_") and v is True]
    if modes == ["mean"] or modes == ["cls"]:
        return modes[0]
    raise ConfigError(f"{folder}: pooling {'+'.join(modes) or 'none'} is not supported (mean or cls); set "
                      f"pooling in {MODEL_TOML}")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    unknown = sorted(set(data) - TOML_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(TOML_KEYS))}")
    if "pooling" in data and data["pooling"] not in POOLINGS:
        raise ConfigError(f"{path}: pooling must be mean or cls, got {data['pooling']!r}")
    if "max_tokens" in data and not (isinstance(data["max_tokens"], int) and 8 <= data["max_tokens"] <= 8192):
        raise ConfigError(f"{path}: max_tokens must be an integer from 8 to 8192, got {data['max_tokens']!r}")
    for key in ("query_prefix", "passage_prefix", "output"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: {key} must be a string")
    return data
