"""Index throughput on BEIR SciFact, in ONE run, against baselines on the same chunks and machine:

- raw embedder: the model alone over exactly the chunks ragstead writes (so the ratio is pipeline overhead)
- ragstead: files on disk -> load -> chunk -> embed (cached) -> one SQLite file (FTS5 + vectors)
- JSONL + BM25 baseline: 800-char chunks into chunks.jsonl, BM25 (rank-bm25) built at query time, no vectors
- Chroma pipeline: the reference layout (Chroma PersistentClient for vectors + SQLite FTS5 mirror), same model
Then: re-index after modifying 1 % of the files, as a fraction of the full index time.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import ragstead
from bench.common import DEFAULT_SCIFACT, Timer, peak_rss_mb, write_results
from ragstead.documents.chunking import chunk_text
from ragstead.embeddings import MiniLMOnnxEmbedder
from ragstead.evaluation.cases import load_beir


def _write_corpus(root: Path, corpus: dict[str, tuple[str, str]]) -> list[Path]:
    folder = root / "kb" / "corpus"
    folder.mkdir(parents=True)
    paths = []
    for doc_id, (title, text) in corpus.items():
        path = folder / f"{doc_id}.txt"
        path.write_text(f"{title}\n\n{text}" if title else text, encoding="utf-8")
        paths.append(path)
    return paths


def _jsonl_bm25_baseline(paths: list[Path], work: Path) -> dict[str, Any]:
    """Baseline: fixed 800-char chunks with offsets into data/chunks.jsonl; BM25 built at query time."""
    out = work / "chunks.jsonl"
    with Timer() as index_time, out.open("w") as handle:
        n = 0
        for path in paths:
            text = path.read_text(encoding="utf-8")
            for start in range(0, len(text), 800):
                handle.write(json.dumps({"chunk_id": f"{path.stem}:{start}", "source_path": str(path),
                                         "char_start": start, "text": text[start : start + 800]}) + "\n")
                n += 1
    result: dict[str, Any] = {"chunks": n, "seconds": round(index_time.seconds, 3),
                              "chunks_per_s": round(n / index_time.seconds, 1)}
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        result["bm25_build_s"] = None
        return result
    with Timer() as build:
        rows = [json.loads(line) for line in out.open()]
        BM25Okapi([r["text"].lower().split() for r in rows])
    result["bm25_build_s_per_query"] = round(build.seconds, 3)  # paid on every query by this baseline
    return result


def _chroma_pipeline(paths: list[Path], embedder: MiniLMOnnxEmbedder, work: Path) -> dict[str, Any] | None:
    try:
        import chromadb
    except ImportError:
        return None
    client = chromadb.PersistentClient(path=str(work / "chroma"))
    collection = client.get_or_create_collection("bench", metadata={"hnsw:space": "cosine"})
    lexical = sqlite3.connect(work / "lexical.sqlite3")
    lexical.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(chunk_id UNINDEXED, text)")
    n = 0
    with Timer() as total:
        for start in range(0, len(paths), 64):
            ids, texts, metas = [], [], []
            for path in paths[start : start + 64]:
                for piece in chunk_text(path.read_text(encoding="utf-8")):
                    ids.append(f"{path.stem}:{piece.index}")
                    texts.append(piece.text)
                    metas.append({"file_path": str(path), "doc_type": "kb", "is_private": True})
            vectors = embedder.embed_documents(texts)
            for b in range(0, len(ids), 100):  # 100 vectors per Chroma insert, as the reference pipeline does
                collection.add(ids=ids[b : b + 100], embeddings=vectors[b : b + 100].tolist(),
                               documents=texts[b : b + 100], metadatas=metas[b : b + 100])
            with lexical:
                lexical.executemany("INSERT INTO chunks_fts VALUES (?, ?)", zip(ids, texts, strict=True))
            n += len(ids)
    return {"chunks": n, "seconds": round(total.seconds, 2), "chunks_per_s": round(n / total.seconds, 2)}


def run(dataset: Path = DEFAULT_SCIFACT, limit: int | None = None, skip_chroma: bool = False) -> dict[str, Any]:
    corpus = load_beir(dataset, "test").corpus
    if limit:
        corpus = dict(list(corpus.items())[:limit])
    embedder = MiniLMOnnxEmbedder()
    work = Path(tempfile.mkdtemp(prefix="ragstead-bench-"))
    try:
        paths = _write_corpus(work / "project", corpus)
        kb = ragstead.open(work / "project", embedder=embedder)
        settings = kb.settings

        # Raw embedder over exactly the chunk texts ragstead will write.
        texts = [p.text for path in paths for p in chunk_text(path.read_text(encoding="utf-8"), settings.chunking)]
        with Timer() as raw:
            embedder.embed_documents(texts)

        with Timer() as full:
            report = kb.index(["kb"])
        assert report.chunks_written == len(texts), (report.chunks_written, len(texts))

        with Timer() as noop:
            unchanged = kb.index(["kb"])
        changed = random.Random(7).sample(paths, max(1, len(paths) // 100))
        for path in changed:
            path.write_text(path.read_text(encoding="utf-8") + " Revised after review.", encoding="utf-8")
        with Timer() as partial:
            reindex = kb.index(["kb"])
        kb.close()

        baseline = _jsonl_bm25_baseline(paths, work)
        chroma = None if skip_chroma else _chroma_pipeline(paths, embedder, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = len(texts)
    return {
        "dataset": str(dataset), "documents": len(corpus), "chunks": n,
        "raw_embedder": {"seconds": round(raw.seconds, 2), "chunks_per_s": round(n / raw.seconds, 2)},
        "ragstead": {"seconds": round(full.seconds, 2), "chunks_per_s": round(n / full.seconds, 2),
                     "overhead_vs_raw": round(full.seconds / raw.seconds - 1, 4)},
        "reindex_unchanged": {"seconds": round(noop.seconds, 3), "unchanged": unchanged.unchanged},
        "reindex_1pct": {"files_changed": len(changed), "seconds": round(partial.seconds, 3),
                         "fraction_of_full": round(partial.seconds / full.seconds, 4),
                         "chunks_embedded": reindex.chunks_embedded, "chunks_reused": reindex.chunks_reused},
        "jsonl_bm25_baseline": baseline,
        "chroma_pipeline": chroma,
        "knowledge_rag": "not run: it embeds with fastembed, which downloads its model from a hub at run time "
                         "(no network here), and its embedder cannot be swapped without patching its internals",
        "peak_rss_mb": peak_rss_mb(),
    }


def table(r: dict[str, Any]) -> list[list[str]]:
    rows = [["pipeline", "chunks", "seconds", "chunks/s", "vs raw embedder"]]
    raw = r["raw_embedder"]["seconds"]
    rows.append(["raw embedder (MiniLM int8 ONNX)", str(r["chunks"]), f"{raw:.1f}",
                 f"{r['raw_embedder']['chunks_per_s']:.1f}", "1.00x"])
    rows.append(["ragstead index (files -> SQLite)", str(r["chunks"]), f"{r['ragstead']['seconds']:.1f}",
                 f"{r['ragstead']['chunks_per_s']:.1f}", f"{r['ragstead']['seconds'] / raw:.2f}x"])
    if r["chroma_pipeline"]:
        c = r["chroma_pipeline"]
        rows.append(["Chroma + FTS5 (reference layout, same model)", str(c["chunks"]), f"{c['seconds']:.1f}",
                     f"{c['chunks_per_s']:.1f}", f"{c['seconds'] / raw:.2f}x"])
    b = r["jsonl_bm25_baseline"]
    rows.append(["baseline: chunks.jsonl + rank-bm25 (no vectors)", str(b["chunks"]), f"{b['seconds']:.2f}",
                 f"{b['chunks_per_s']:.0f}", "n/a (no embedding)"])
    p = r["reindex_1pct"]
    rows.append([f"ragstead re-index, {p['files_changed']} files (1 %) changed", str(p["chunks_embedded"]),
                 f"{p['seconds']:.2f}", "", f"{p['fraction_of_full'] * 100:.2f} % of full index"])
    rows.append(["ragstead re-index, nothing changed", "0", f"{r['reindex_unchanged']['seconds']:.2f}", "", ""])
    return rows


def main(dataset: Path, limit: int | None, skip_chroma: bool) -> None:
    result = run(dataset, limit, skip_chroma)
    write_results("index_throughput", result, table(result))
