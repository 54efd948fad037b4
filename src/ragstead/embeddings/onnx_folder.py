"""Bring-your-own ONNX models, from a folder `model_folder.locate` found: a sentence encoder (`--model`) and a
cross-encoder (`--reranker`). Both reuse the packaged models' tokenizer and session code (onnx_minilm.py)."""

from __future__ import annotations

import numpy as np

from ragstead.embeddings.model_folder import ModelFolder
from ragstead.embeddings.onnx_minilm import OnnxSentenceEmbedder, load_tokenizer, onnx_session, pad_batch
from ragstead.errors import ConfigError

# Output names of token embeddings in optimum / sentence-transformers exports, preferred over the first output.
TOKEN_OUTPUTS = ("last_hidden_state", "token_embeddings")


class OnnxFolderEmbedder(OnnxSentenceEmbedder):
    """A sentence-transformers-style ONNX export: its pooling, its prefixes, at most its own max length.

    Rows are always L2-normalised: every store ranks by inner product as cosine (docs/design.md)."""

    def __init__(self, folder: ModelFolder, max_tokens: int = 256, batch_size: int = 4,
                 threads: int | None = None) -> None:
        self.folder = folder
        limit = min(max_tokens, folder.max_tokens or max_tokens)
        super().__init__(folder.graph, folder.identity(), 0, limit, batch_size, threads, folder.tokenizer,
                         pooling=folder.pooling)
        outputs = {o.name: o for o in self._session.get_outputs()}
        chosen = folder.output or next((n for n in TOKEN_OUTPUTS if n in outputs), next(iter(outputs)))
        if chosen not in outputs:
            raise ConfigError(f"{folder.graph} has no output {chosen!r}; it has {', '.join(outputs)}")
        self._outputs = [chosen]
        shape = outputs[chosen].shape
        # A static last dimension is the vector size; a symbolic one is measured on one short text.
        self.dim = shape[-1] if isinstance(shape[-1], int) else int(self._embed_batch(
            self._tokenizer.encode_batch(["dimension"])).shape[1])

    def _embed_batch(self, encodings: list) -> np.ndarray:
        ids, mask = pad_batch(encodings)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        out = self._session.run(self._outputs, feeds)[0]
        if out.ndim == 2:  # an export that pools inside the graph (a `sentence_embedding` output)
            return (out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)
        return self._pool(out, mask)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        prefix = self.folder.passage_prefix
        return super().embed_documents([prefix + t for t in texts] if prefix else texts)

    def embed_query(self, text: str) -> np.ndarray:
        return super().embed_documents([self.folder.query_prefix + text])[0]


class OnnxCrossEncoder:
    """A cross-encoder (sequence-classification head): one relevance score per (question, passage) pair.

    Pairs are encoded as the tokenizer's pair template ([CLS] q [SEP] p [SEP], segment ids 0/1), sorted by length
    and run in batches. One logit is the score; two logits score as logit(relevant) - logit(not)."""

    def __init__(self, folder: ModelFolder, max_tokens: int = 512, batch_size: int = 16,
                 threads: int | None = None) -> None:
        self.folder = folder
        self.name = f"{folder.kind}:{folder.label}@{folder.digest()}"
        self.batch_size = batch_size
        self._tokenizer = load_tokenizer(folder.tokenizer, min(max_tokens, folder.max_tokens or max_tokens))
        self._session = onnx_session(folder.graph, threads)
        self._input_names = {i.name for i in self._session.get_inputs()}
        outputs = [o.name for o in self._session.get_outputs()]
        chosen = folder.output or ("logits" if "logits" in outputs else outputs[0])
        if chosen not in outputs:
            raise ConfigError(f"{folder.graph} has no output {chosen!r}; it has {', '.join(outputs)}")
        self._outputs = [chosen]

    def score(self, question: str, texts: list[str]) -> np.ndarray:
        """One score per text, in the order of `texts` (higher is more relevant)."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        encodings = self._tokenizer.encode_batch([(question, t) for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty(len(texts), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._score_batch([encodings[i] for i in idx])
        return out

    def _score_batch(self, encodings: list) -> np.ndarray:
        ids, mask = pad_batch(encodings)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            types = np.zeros_like(ids)
            for row, enc in enumerate(encodings):
                types[row, : len(enc.type_ids)] = enc.type_ids
            feeds["token_type_ids"] = types
        logits = np.asarray(self._session.run(self._outputs, feeds)[0], dtype=np.float32)
        if logits.ndim == 1:
            return logits
        if logits.ndim == 2 and logits.shape[1] == 1:
            return logits[:, 0]
        if logits.ndim == 2 and logits.shape[1] == 2:
            return logits[:, 1] - logits[:, 0]
        raise ConfigError(f"{self.folder.graph}: a cross-encoder returns one or two logits per pair, "
                          f"not shape {logits.shape}")
