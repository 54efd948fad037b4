"""A SQLite store's vector side kept in another engine (Chroma, Milvus): what the two share.

SQLite stays the source of truth; the engine holds each chunk's vector and filter fields under the chunk's row
id, stamped with the SQLite generation it reflects. After each commit the store hands it the write; before a
search it is reconciled if it lags (another process's write, a crash between the commits, rows lost behind
ragstead's back). A small scope is scored exactly from SQLite, and so is a search the engine answers short.
Each engine says how to talk to it: the hooks below.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import date
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ragstead.filters import QueryFilters
from ragstead.stores.sqlite import SqliteStore


def day_number(value: str | None) -> int | None:
    """YYYYMMDD of an ISO date or timestamp (None when there is none): dates as integers the engines compare."""
    try:
        day = date.fromisoformat((value or "")[:10])
    except ValueError:
        return None
    return day.year * 10000 + day.month * 100 + day.day


class RemoteVectors(ABC):
    """The shared half of a vector side in another engine (sqlite.VectorSide): keeping it in step with SQLite,
    the search around the engine's own, and the reporting. Subclasses implement the engine's hooks."""

    LABEL: ClassVar[str]  # the engine's name in messages: "Chroma"
    COLLECTION_PREFIX: ClassVar[str]  # the index's collection is this and the index's id
    BATCH: ClassVar[int] = 1000  # rows per SQLite read and per engine write

    def __init__(self, store: SqliteStore, location: Any) -> None:
        self._store = store
        self.location = location
        self._checked: tuple[int, int] | None = None
        self._name = f"{self.COLLECTION_PREFIX}{store.index_id()}"

    # -- the engine's hooks ---------------------------------------------------------------------

    @abstractmethod
    def _engine(self, action: str) -> AbstractContextManager[None]:
        """Turn the engine's failures into one clear RagsteadError naming the store (no credential)."""

    @abstractmethod
    def _engine_generation(self) -> int | None:
        """The SQLite generation the engine reflects (None: no collection, or another model's or layout's)."""

    @abstractmethod
    def _set_generation(self, generation: int) -> None:
        """Stamp the collection with the SQLite generation (and the model) it now reflects."""

    @abstractmethod
    def _drop(self) -> None:
        """Remove the collection (the next write or reconcile starts a new one)."""

    @abstractmethod
    def _count(self) -> int:
        """How many rows the engine holds."""

    @abstractmethod
    def _engine_ids(self) -> Iterator[int]:
        """Every row id the engine holds."""

    @abstractmethod
    def _delete(self, rowids: list[int]) -> None:
        """Remove these row ids (absent ones are no error)."""

    @abstractmethod
    def _send(self, rows: list[tuple[Any, ...]], vectors: np.ndarray) -> None:
        """Upsert these chunks (SqliteStore.vector_rows' rows and their vectors): idempotent by row id."""

    @abstractmethod
    def _engine_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]] | None:
        """The engine's top k under the scope's filter, or None when it has nothing to search."""

    @abstractmethod
    def _engine_stats(self) -> dict[str, Any]:
        """The store's own fields of `stats()` (its kind, where it is, its collection)."""

    def _sends_text(self) -> bool:
        """Whether the engine is sent each chunk's text too (for a lexical index of its own)."""
        return False

    def _appends_to(self, generation: int) -> bool:
        """Whether write `generation` can be applied as it is: the engine holds the one before."""
        return self._engine_generation() == generation - 1

    # -- keeping the engine in step with SQLite -----------------------------------------------------

    def written(self, generation: int, deleted: list[int] | None, added: list[int],
                vectors: np.ndarray | None) -> None:
        """After a SQLite commit: apply its deletions and additions to the engine, or reconcile if the engine
        missed an earlier write. The lexical writer lock (held) keeps other writers out meanwhile."""
        with self._engine("write to"):
            if deleted is None:
                self._drop()
            elif self._appends_to(generation):
                self._delete(deleted)
                self._upsert(added)
            else:
                self._reconcile()
                return
            self._set_generation(generation)

    def _reconcile(self) -> None:
        """Make the engine hold exactly SQLite's chunks: drop ids SQLite no longer has, add the missing ones."""
        generation = self._store.generation()
        if self._engine_generation() is None:  # unknown state or another model's vectors: start over
            self._drop()
        have = set(self._engine_ids())
        want = self._store.chunk_ids()
        self._delete(sorted(have - want))
        self._upsert(sorted(want - have))
        self._set_generation(generation)

    def _upsert(self, rowids: list[int]) -> None:
        """Send these chunks' vectors and filter fields from SQLite to the engine."""
        for start in range(0, len(rowids), self.BATCH):
            rows = self._store.vector_rows(rowids[start : start + self.BATCH], with_text=self._sends_text())
            if rows:
                self._send(rows, np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows]))

    def _lags(self) -> bool:
        """The engine missed a write, or lost or gained rows behind ragstead's back (the count says so)."""
        if not self._store.meta("embed_model"):
            return False
        if self._engine_generation() != self._store.generation():
            return True
        return self._count() != self._store.chunk_count()

    def _in_step(self) -> None:
        """Before a search: reconcile the engine if it lags SQLite, as the lexical index is kept in step."""
        with self._engine("read"):
            self._checked = self._store.keep_in_step(self._checked, self._lags, self._reconcile)

    # -- search -------------------------------------------------------------------------------------

    def search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """A small scope exactly from SQLite; a larger one by the engine's search under the scope's filter,
        and exactly again if the engine comes back short (the scope holds fewer than k rows, or it missed some)."""
        if self._store.meta("embed_model") is None:
            return []
        if self._store.scope_is_small(filters, self.location.exact_scope_rows):
            return self._store.exact_vector_search(query, filters, k)
        self._in_step()
        with self._engine("search"):
            hits = self._engine_search(query, filters, k)
        return self._store.exact_vector_search(query, filters, k) if hits is None or len(hits) < k else hits

    # -- reporting ----------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The engine's side of the store's stats: `vector_rows == chunks` when in step."""
        self._in_step()
        with self._engine("read"):
            rows = self._count() if self._store.meta("embed_model") else 0
            generation = self._engine_generation()
        return {**self._engine_stats(), "vector_rows": rows, "vector_generation": generation}

    def check(self, chunks: int, generation: int) -> str:
        """The engine against SQLite: as many vectors as chunks, at SQLite's generation."""
        stats = self.stats()
        if self._store.meta("embed_model") and (stats["vector_rows"], stats["vector_generation"]) != (chunks,
                                                                                                    generation):
            return (f"{self.LABEL} collection {self._name} at generation {stats['vector_generation']} with "
                    f"{stats['vector_rows']} vectors; SQLite at {generation} with {chunks} chunks")
        return "ok"

    @abstractmethod
    def private_paths(self) -> list[Path]:
        """The engine's own files that the store keeps private (none for a server)."""

    @abstractmethod
    def close(self) -> None:
        """Let go of the client."""
