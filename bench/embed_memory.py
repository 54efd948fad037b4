"""Peak RSS and speed of embedding while indexing, by ONNX batch size and session options.

Indexing 205 small notes peaked at 1.58 GB with batches of 32 chunks: the attention activations of a
32 x 256-token batch and onnxruntime's arena, which keeps its high-water mark. Each configuration runs in
its own process over the chunks of the same synthetic notes (205 notes of 50-900 words, fixed seed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.common import write_results

CONFIGS = [(32, True), (16, True), (8, True), (8, False), (4, True), (4, False)]  # (batch, memory pattern)

PROBE = r"""
import json, random, resource, sys, time
import onnxruntime as ort
batch, pattern = int(sys.argv[1]), sys.argv[2] == "1"
original = ort.SessionOptions
class Options(original):
    def __init__(self):
        super().__init__()
        self.enable_mem_pattern = pattern
ort.SessionOptions = Options
from ragstead.documents.chunking import ChunkingOptions, chunk_text
from ragstead.embeddings.onnx_minilm import MiniLMOnnxEmbedder
random.seed(1)
words = "alpha beta gamma delta billing database heron survey migration invoice pelican census ledger".split()
notes = [" ".join(random.choice(words) for _ in range(random.randint(50, 900))) for _ in range(205)]
texts = [c.text for note in notes for c in chunk_text(note, ChunkingOptions())]
embedder = MiniLMOnnxEmbedder(batch_size=batch)
embedder.embed_query("warm up")
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
embedder.embed_documents(texts)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"chunks": len(texts), "chunks_per_s": round(len(texts) / seconds, 1),
                  "loaded_mb": round(loaded), "peak_mb": round(peak)}))
"""


def main() -> None:
    rows = [["batch", "memory pattern", "chunks/s", "RSS after load MB", "peak RSS MB"]]
    runs = {}
    for batch, pattern in CONFIGS:
        out = subprocess.run([sys.executable, "-c", PROBE, str(batch), "1" if pattern else "0"], check=True,
                             capture_output=True, text=True, cwd=Path(__file__).parents[1]).stdout
        result = json.loads(out.strip().splitlines()[-1])
        runs[f"batch {batch}, pattern {pattern}"] = result
        rows.append([str(batch), "on" if pattern else "off", f"{result['chunks_per_s']:.1f}",
                     str(result["loaded_mb"]), str(result["peak_mb"])])
    write_results("embed_memory", {"runs": runs}, rows)
