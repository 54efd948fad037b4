"""The evaluation service: retrieval quality of a project's index, or of a BEIR corpus in a store of its own."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragstead.evaluation.cases import EvalCase, load_beir, load_jsonl_cases
from ragstead.evaluation.runner import BEIR_ROOT, EvalSettings, run_eval
from ragstead.filters import QueryFilters
from ragstead.indexing.build import ProgressHook, TextRecord
from ragstead.services.indexer import Indexer
from ragstead.services.runtime import Runtime
from ragstead.stores.factory import is_chroma_spec, is_milvus_spec, is_postgres_url


class Evaluation:
    """Measures the index of one `Runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def evaluate(self, cases: Path | list[EvalCase], *, settings: EvalSettings | None = None,
                 filters: QueryFilters | None = None, rerank: bool = False,
                 progress: ProgressHook | None = None) -> dict[str, Any]:
        """Recall@k, MRR@k, hit rate@k and nDCG@10 of JSONL cases (a path) or cases, on this index."""
        rt = self.runtime
        case_list = load_jsonl_cases(cases) if isinstance(cases, Path) else cases
        settings = settings or EvalSettings(search=rt.settings.search_options())
        with rt.lock:
            report = run_eval(case_list, rt.store, rt.embedder, settings, filters or QueryFilters.build(),
                              rt.settings.scope_rules, progress, rt.load_reranker() if rerank else None)
            report["run"] = {"model": rt.embedder.name, "index": rt.store.stats(),
                             "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
        return report

    def evaluate_beir(self, folder: Path, *, split: str = "test", index_store: str | None = None,
                      settings: EvalSettings | None = None, rerank: bool = False,
                      progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
        """Index a BEIR corpus into a store of its own (`index_store`: a file to keep and reuse, or a store
        spec; default a scratch file) and evaluate the split's queries on it. Never touches this index."""
        own = self.runtime.settings
        data = load_beir(folder, split)
        with tempfile.TemporaryDirectory(prefix="ragstead-eval-") as scratch:
            spec = index_store or f"{scratch}/beir.db"
            if not is_server_or_chroma(spec):  # a plain file (or sqlite:PATH) of its own
                path = Path(spec.removeprefix("sqlite:")).resolve()
                corpus_settings = own.with_overrides(store="", db_path=str(path), lock_path=f"{path}.lock")
            else:
                corpus_settings = own.with_overrides(store=spec, lock_path=f"{scratch}/beir.lock")
            corpus = Runtime(corpus_settings)
            try:
                records = [TextRecord(doc_id, text, title or None) for doc_id, (title, text) in data.corpus.items()]
                indexed = Indexer(corpus).index_records(records, root=BEIR_ROOT,
                                                        progress=_stage(progress, "indexing corpus"))
                report = Evaluation(corpus).evaluate(data.cases, settings=settings, rerank=rerank,
                                                     progress=_stage(progress, "evaluating"))
            finally:
                corpus.close()
        report["run"] |= {"dataset": str(folder), "split": split, "corpus_docs": len(records),
                          "index_seconds": round(indexed.seconds, 2), "chunks_embedded": indexed.chunks_embedded,
                          "chunker": own.chunker, "chunk_size": own.chunk_size, "overlap": own.overlap}
        return report


def is_server_or_chroma(spec: str) -> bool:
    """Whether a store spec names a server (PostgreSQL), Chroma or Milvus, rather than a file."""
    return is_postgres_url(spec) or is_chroma_spec(spec) or is_milvus_spec(spec)


def _stage(progress: Callable[[str, int, int], None] | None, label: str) -> ProgressHook | None:
    if progress is None:
        return None
    return lambda done, total: progress(label, done, total)
