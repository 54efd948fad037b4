"""The model catalog: every model runs offline from its package, the fp32 numpy BERT matches the int8 ONNX
graph, pooling ignores padding, and the model guard refuses to mix models while reads follow the index."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.embeddings import MODELS, MiniLMOnnxEmbedder, make_embedder
from ragstead.embeddings.bert_numpy import NumpyBertEmbedder, _erf
from ragstead.errors import ConfigError

SENTENCES = [
    "Vitamin D deficiency is associated with loss of bone mineral density in older adults.",
    "The cat slept on the warm windowsill all afternoon.",
    "Short.",
    "Insulin resistance in type 2 diabetes impairs glucose uptake by skeletal muscle, " * 8,
]


@pytest.fixture(scope="module")
def models() -> dict[str, object]:
    return {model: make_embedder(model) for model in MODELS}


def test_erf_matches_math_erf_to_float32_precision() -> None:
    import math

    xs = np.linspace(-6, 6, 2001, dtype=np.float32)
    expected = np.array([math.erf(float(x)) for x in xs])
    assert np.max(np.abs(_erf(xs) - expected)) < 5e-7  # 1.5e-7 of the formula + float32 rounding


def test_fp32_numpy_bert_agrees_with_the_int8_onnx_graph(models: dict[str, object],
                                                         real_embedder: MiniLMOnnxEmbedder) -> None:
    # Two implementations of one model (a numpy forward pass over fp32 weights; onnxruntime over int8):
    # a wrong layer, GELU or mask would take the cosine far below the quantisation error (~0.9994).
    fp32 = models["minilm-l6-fp32"].embed_documents(SENTENCES)  # type: ignore[attr-defined]
    int8 = real_embedder.embed_documents(SENTENCES)
    cosines = (fp32 * int8).sum(axis=1)
    assert cosines.min() > 0.998, cosines
    assert fp32.shape == (4, 384) and np.allclose(np.linalg.norm(fp32, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("model", list(MODELS))
def test_each_model_is_batch_invariant_and_ranks_the_relevant_passage_first(models: dict[str, object],
                                                                            model: str) -> None:
    embedder = models[model]
    batch = embedder.embed_documents(SENTENCES)  # type: ignore[attr-defined]
    # Alone or beside a 100-token neighbour: padding must not enter the mean.
    alone = embedder.embed_documents([SENTENCES[2]])[0]  # type: ignore[attr-defined]
    assert np.allclose(batch[2], alone, atol=1e-4)
    assert batch.shape == (4, embedder.dim) and batch.dtype == np.float32  # type: ignore[attr-defined]
    query = embedder.embed_query("low vitamin D and osteoporosis")  # type: ignore[attr-defined]
    scores = batch @ query
    assert int(np.argmax(scores)) == 0, scores


def test_e5_embeds_queries_and_passages_with_their_own_prefixes(models: dict[str, object]) -> None:
    # E5 was trained with "query: " / "passage: " prefixes: the same text must embed differently as a query
    # than as a passage (the engine adds them), and a symmetric model must not.
    e5, minilm = models["e5-small-q4"], models["minilm-l6-int8"]
    text = SENTENCES[0]
    as_query, as_passage = e5.embed_query(text), e5.embed_documents([text])[0]  # type: ignore[attr-defined]
    assert 0.8 < float(as_query @ as_passage) < 0.999
    assert np.allclose(minilm.embed_query(text), minilm.embed_documents([text])[0], atol=1e-5)  # type: ignore
    # Past 512 tokens the engine windows the passage instead of cutting it: the tail still counts.
    long_text = SENTENCES[3] * 4 + " Penguins nest on the Antarctic coast."
    tail = e5.embed_documents([long_text, SENTENCES[3] * 4])  # type: ignore[attr-defined]
    assert not np.allclose(tail[0], tail[1], atol=1e-3)


def test_unknown_model_and_wrong_checkpoint_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown model 'bge-huge'"):
        make_embedder("bge-huge")
    fake = tmp_path / "model.safetensors"
    fake.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(ConfigError, match="not the expected checkpoint"):
        NumpyBertEmbedder(fake, "all-MiniLM-L6-v2-fp32", heads=12, sha256="0" * 64)


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_ragstead(*args, "--root", str(root), env=OFFLINE_ENV)


def test_models_command_lists_the_catalog() -> None:
    result = run_ragstead("models", "--format", "json", env=OFFLINE_ENV)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == list(MODELS)
    assert all(r["installed"] for r in rows)


def test_the_index_keeps_its_model_and_the_guard_refuses_another(tmp_path: Path) -> None:
    write_files(tmp_path, {
        "kb/users/alice/bones.md": "Vitamin D deficiency is linked to bone loss in older adults.",
        "kb/users/alice/cats.md": "The cat slept on the warm windowsill.",
    })
    built = _cli(tmp_path, "index", "--model", "wordllama-256", "--format", "json", "--quiet")
    assert built.returncode == 0, built.stderr
    status = json.loads(_cli(tmp_path, "status", "--json").stdout)
    assert status["embed_model"] == "wordllama-l2-supercat-256" and status["embed_dim"] == 256

    # Reads and incremental runs follow the index's model without a flag.
    found = _cli(tmp_path, "query", "vitamin D bones", "--user", "alice", "--vector", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["file_path"].endswith("bones.md")
    write_files(tmp_path, {"kb/users/alice/sleep.md": "Sleep duration and memory consolidation."})
    again = _cli(tmp_path, "index", "--format", "json", "--quiet")
    assert again.returncode == 0, again.stderr

    # Another model, asked for explicitly, is refused for writes and reads: vectors would not compare.
    for args in (("index", "--model", "minilm-l6-int8"), ("query", "bones", "--user", "alice", "--model",
                                                         "paraphrase-minilm-l3")):
        refused = _cli(tmp_path, *args)
        assert refused.returncode == 2 and "error:" in refused.stderr and "Traceback" not in refused.stderr
        assert "wordllama-l2-supercat-256" in refused.stderr
    unknown = _cli(tmp_path, "query", "bones", "--model", "bge-huge")
    assert unknown.returncode == 2 and "unknown model 'bge-huge'" in unknown.stderr

    # --rebuild switches models and re-embeds every chunk.
    rebuilt = _cli(tmp_path, "index", "--rebuild", "--model", "minilm-l6-int8", "--format", "json", "--quiet")
    assert rebuilt.returncode == 0, rebuilt.stderr
    status = json.loads(_cli(tmp_path, "status", "--json").stdout)
    assert status["embed_model"] == "all-MiniLM-L6-v2-onnx-int8" and status["chunks"] == 3
