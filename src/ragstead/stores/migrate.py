"""Copy an index from one store to another (`ragstead migrate`), vectors included: nothing is re-embedded.

The target must be empty (or emptied with `--replace`): a migration that merged into a live index could
mix two models or two versions of one document. The copy goes in batches, each one transaction of the
target, and the counts are checked at the end; an interrupted copy leaves a partial target, which
`--replace` empties on the next run. The source is only read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ragstead.errors import RagsteadError
from ragstead.stores.base import BulkLoad, DocumentWrite, Store


@dataclass
class MigrationReport:
    """What was copied, and how fast."""

    documents: int
    chunks: int
    seconds: float
    source: dict[str, Any]
    target: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"documents": self.documents, "chunks": self.chunks, "seconds": round(self.seconds, 2),
                "chunks_per_second": round(self.chunks / self.seconds, 1) if self.seconds else None,
                "source": self.source, "target": self.target}


def copy_store(
    source: Store, target: Store, *, replace: bool = False, batch_size: int = 200,
    progress: Callable[[int, int], None] | None = None,
) -> MigrationReport:
    """Copy every document, chunk and vector of `source` into the empty `target`."""
    started = time.perf_counter()
    before = source.stats()
    model, dim = before["embed_model"], before["embed_dim"]
    if model is None:
        raise RagsteadError(f"the source index {before['path']} is empty: nothing to migrate")
    existing = target.stats()
    if existing["documents"] and not replace:
        raise RagsteadError(
            f"the target {existing['path']} already holds documents; pass --replace to empty it first"
        )
    if replace:
        target.reset()
    target.ensure_model(model, dim)
    documents = chunks = 0
    batch: list[DocumentWrite] = []

    def flush() -> None:
        nonlocal documents, chunks
        if batch:
            target.apply(batch, [], [])
            documents, chunks = documents + len(batch), chunks + sum(len(w.chunks) for w in batch)
            batch.clear()
        if progress:
            progress(documents, before["documents"])

    # A store that can defer its ANN index (PostgreSQL) builds it once, after the last row.
    with target.bulk_load() if isinstance(target, BulkLoad) else nullcontext():
        for write in source.export_documents(batch_size):
            batch.append(write)
            if len(batch) >= batch_size:
                flush()
        flush()
    after = target.stats()
    if (after["documents"], after["chunks"]) != (before["documents"], before["chunks"]):
        raise RagsteadError(
            f"copied {after['documents']} documents / {after['chunks']} chunks, but the source has "
            f"{before['documents']} / {before['chunks']}: was it written to during the migration? Run it again "
            "with --replace"
        )
    return MigrationReport(documents, chunks, time.perf_counter() - started, before, after)
