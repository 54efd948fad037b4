"""The vector side of the embedded store: flat files beside the SQLite file (`<name>.vectors/`), searched in
place instead of being loaded.

- `ids`: chunk ids (SQLite rowids, ascending: AUTOINCREMENT only grows), int64;
- `int8`: each vector quantized with one scale per dimension, memory-mapped and scanned on every core;
- `f32`: the exact vectors, read with pread for the rows a query scores exactly (page cache, not this
  process's memory).

SQLite stays the source of truth: the folder records the SQLite generation it reflects and is rebuilt from
SQLite whenever it lags (a crash between the two commits), like the lexical index. Deleted chunks stay in
the files until a rebuild; the SQL filter never admits them. Design and measurements: docs/design.md,
"Vector search at a million chunks".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ragstead.core.atomic import PRIVATE_FILE_MODE, write_text_atomically
from ragstead.stores.permissions import make_private_folder

# numpy and numkong are imported where vectors are read, written or scanned: counting the rows and checking the
# files against SQLite (`status`) reads only the state and the files' sizes (docs/benchmarks.md, "Start-up").
if TYPE_CHECKING:
    import numpy as np

# Scopes of at most this many rows are scored exactly, all of them in float32: a personal collection and a
# small user scope never see quantization. Larger scopes scan int8 and re-score the best RESCORE_DEPTH
# rows exactly (recall@10 against exact search: docs/benchmarks.md).
EXACT_ROWS = 10_000
RESCORE_DEPTH = 200
# int8 scans of fewer rows than this run in one thread (a thread hop costs more than it saves).
PARALLEL_FROM = 100_000
# The best rows of a scan this large are picked from those at or above a threshold read off every SAMPLE_STRIDE-th
# score, not by partitioning them all: selecting from 500k scores cost a third of a shard's scan (docs/benchmarks.md).
SAMPLE_FROM = 65_536
SAMPLE_STRIDE = 16
# Rebuild instead of appending once this share of the rows are deleted chunks.
DEAD_SHARE = 0.2
# Scales leave this much room above the largest magnitude seen, so that the vectors of later writes fit.
HEADROOM = 1.25
# While the index is smaller than this, an append whose vectors exceed the room rebuilds it (new scales,
# < 1 s); larger indexes clip, and the exact re-scoring absorbs it. With the room, a bulk load of random
# vectors rebuilds a handful of times, not once per write (measured: 100k chunks built in 20 s without it).
REQUANTIZE_BELOW = 200_000
STATE = "state.json"
FORMAT = 1

_pool: ThreadPoolExecutor | None = None


def _threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="ragstead-scan")
    return _pool


def best_positions(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k highest scores, best first."""
    import numpy as np

    top = min(k, scores.size)
    if top <= 0:
        return np.zeros(0, dtype=np.int64)
    best = np.argpartition(-scores, top - 1)[:top]
    return best[np.argsort(-scores[best], kind="stable")]


def top_positions(scores: np.ndarray, k: int, admitted: np.ndarray | None = None) -> np.ndarray:
    """Positions of the k highest scores among those `admitted` (booleans, None: all), best first, equal scores
    in position order, so the choice never depends on how a scan was split. From SAMPLE_FROM scores on, only
    those at or above a threshold are sorted: one that an every SAMPLE_STRIDE-th sample puts about 4k admitted
    scores above (when fewer than k pass it, all are)."""
    import numpy as np

    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    share = 1.0 if admitted is None else np.count_nonzero(admitted) / max(1, admitted.size)
    picked = None
    if scores.size >= SAMPLE_FROM and share > 0:
        sample = scores[::SAMPLE_STRIDE]
        above = min(sample.size, math.ceil(4 * k / (SAMPLE_STRIDE * share)))
        threshold = np.partition(sample, sample.size - above)[sample.size - above]
        picked = np.flatnonzero(scores >= threshold)
        if admitted is not None:
            picked = picked[admitted[picked]]
        if picked.size < k:
            picked = None
    if picked is None:
        picked = np.arange(scores.size) if admitted is None else np.flatnonzero(admitted)
    if picked.size > k:  # the k-th best score, then every position at or above it (ties included)
        kth = np.partition(scores[picked], picked.size - k)[picked.size - k]
        picked = picked[scores[picked] >= kth]
    return picked[np.argsort(-scores[picked], kind="stable")[:k]]


def quantization_scale(peak: np.ndarray) -> np.ndarray:
    """One scale per dimension from the largest magnitudes seen: HEADROOM times that maps to 127."""
    import numpy as np

    return (np.where(peak > 0, peak * HEADROOM, 1.0) / 127).astype(np.float32)


def quantize(vectors: np.ndarray, scale: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.clip(np.rint(vectors / scale), -127, 127).astype(np.int8)


def _private_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), PRIVATE_FILE_MODE)


class VectorIndex:
    """The files of one store's vectors (`directory=None`: kept in memory, for `:memory:` stores)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._state: dict | None = None
        # The state's (ids, int8 codes, scales), mapped on first use (`_arrays()`); until then the state's ids and
        # int8 files are held open, so a rebuild that removes them cannot take them away, as a mapping would not.
        self._mapped: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._held: tuple[BinaryIO, BinaryIO] | None = None
        self._float_fd: int | None = None
        self._floats: np.ndarray | None = None  # in-memory mode only
        if directory is None:
            import numpy as np

            self._mapped = (np.zeros(0, np.int64), np.zeros((0, 0), np.int8), np.zeros(0, np.float32))
            self._floats = np.zeros((0, 0), np.float32)

    # -- reading ----------------------------------------------------------------------------------

    def refresh(self) -> int | None:
        """Map the latest state (another process may have written) and return its generation, or None when
        the index was never built."""
        if self.directory is None:
            return None if self._state is None else self._state["generation"]
        for _ in range(3):  # a rebuild may switch the state and remove the files it named between two reads
            try:
                state = json.loads((self.directory / STATE).read_text())
            except (FileNotFoundError, ValueError):
                state = None
            if state is not None and state.get("format") != FORMAT:
                state = None
            if state == self._state:
                break
            try:
                self._map(state)
                break
            except (OSError, ValueError):  # files missing or short: rebuilt from SQLite by the caller
                self._map(None)
                state = None
        return None if state is None else state["generation"]

    def _map(self, state: dict | None) -> None:
        """Take `state` as the one read: its ids and int8 files opened (mapped when first read) and its float32
        file, each checked to hold the rows the state says (ValueError if not; OSError if one is missing)."""
        if self._float_fd is not None:
            os.close(self._float_fd)
            self._float_fd = None
        self._release()
        self._state, self._mapped = state, None
        if state is None or not state["rows"]:
            return
        assert self.directory is not None
        rows, dim, stamp = state["rows"], state["dim"], state["stamp"]
        # Rows past `rows` are an append that did not finish (its state was never written): not mapped.
        ids = open(self.directory / f"ids.{stamp}", "rb")  # noqa: SIM115 (held until mapped or released)
        try:
            codes = open(self.directory / f"int8.{stamp}", "rb")  # noqa: SIM115
        except BaseException:
            ids.close()
            raise
        self._held = (ids, codes)
        for handle, size in ((ids, rows * 8), (codes, rows * dim)):
            if os.fstat(handle.fileno()).st_size < size:
                raise ValueError(f"{self.directory}: a vector file is shorter than its state says")
        self._float_fd = os.open(self.directory / f"f32.{stamp}", os.O_RDONLY)
        if os.fstat(self._float_fd).st_size < rows * dim * 4:
            raise ValueError(f"{self.directory}: the float32 file is shorter than its state says")

    def _release(self) -> None:
        if self._held is not None:
            for handle in self._held:
                handle.close()
            self._held = None

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The state's ids, int8 codes and scales, mapped from the held files on first use."""
        if self._mapped is None:
            import numpy as np

            state = self._state
            if state is None or self._held is None:  # no state, no rows, or closed
                dim = 0 if state is None else state["dim"]
                scale = np.zeros(dim, np.float32) if state is None else np.asarray(state["scale"], np.float32)
                self._mapped = (np.zeros(0, np.int64), np.zeros((0, dim), np.int8), scale)
            else:
                rows, dim = state["rows"], state["dim"]
                ids, codes = self._held
                self._mapped = (np.memmap(ids, np.int64, "r", shape=(rows,)),
                                np.memmap(codes, np.int8, "r", shape=(rows, dim)),
                                np.asarray(state["scale"], np.float32))
                self._release()  # the mappings keep the files
        return self._mapped

    @property
    def _ids(self) -> np.ndarray:
        return self._arrays()[0]

    @property
    def _codes(self) -> np.ndarray:
        return self._arrays()[1]

    @property
    def _scale(self) -> np.ndarray:
        return self._arrays()[2]

    @property
    def ids(self) -> np.ndarray:
        """Chunk ids in file order (ascending)."""
        return self._ids

    @property
    def mapping(self) -> tuple[str, int]:
        """What is mapped now (files, rows): changes whenever a write lands."""
        return ("", 0) if self._state is None else (self._state["stamp"], self._state["rows"])

    @property
    def rows(self) -> int:
        if self._mapped is None:  # not mapped yet: the rows the checked state holds (none without files)
            return 0 if self._state is None or self._held is None else int(self._state["rows"])
        return int(self._mapped[0].size)

    @property
    def generation(self) -> int | None:
        """The generation of the mapped state (what `refresh` last read), or None."""
        return None if self._state is None else int(self._state["generation"])

    def dead(self) -> int:
        return 0 if self._state is None else int(self._state["dead"])

    def _float_rows(self, positions: np.ndarray) -> np.ndarray:
        """The exact vectors at these (ascending) positions: one pread per run of neighbouring rows."""
        import numpy as np

        dim = self._codes.shape[1]
        out = np.empty((positions.size, dim), np.float32)
        if self._float_fd is None:
            out[:] = self._floats[positions]  # type: ignore[index]
            return out
        if positions.size == 0:
            return out
        row_bytes = dim * 4
        # Plain ints from here: numpy scalars made one at a time cost more than the reads (0.6 ms per 200 rows).
        at = positions.tolist()
        breaks = (np.flatnonzero(np.diff(positions) != 1) + 1).tolist()
        runs = [(at[start] * row_bytes, start * row_bytes, (end - start) * row_bytes)
                for start, end in zip([0, *breaks], [*breaks, len(at)], strict=True)]
        view = memoryview(out).cast("B")
        if len(runs) > 1 and hasattr(os, "posix_fadvise"):
            # Announce every run first, so rows not in the page cache are read from disk in parallel rather
            # than one after another; it costs 0.13 ms per 200 rows when they are cached (measured).
            for offset, _, size in runs:
                os.posix_fadvise(self._float_fd, offset, size, os.POSIX_FADV_WILLNEED)
        for offset, start, size in runs:
            if os.preadv(self._float_fd, [view[start : start + size]], offset) != size:
                raise OSError(f"short read from {self.directory}: the vector files are damaged")
        return out

    def search(self, query: np.ndarray, positions: np.ndarray, mask: np.ndarray | None, k: int,
               *, exact_rows: int = EXACT_ROWS) -> list[tuple[int, float]]:
        """The k best (chunk id, cosine) among `positions` (ascending file positions of the eligible rows;
        `mask`, the same rows as booleans, when they are most of the index). Scopes up to `exact_rows` are
        scored exactly; larger ones through the int8 scan and an exact re-score of its best rows."""
        import numpy as np

        if positions.size == 0 or k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32)
        if positions.size <= max(exact_rows, k):
            candidates = positions
        else:
            candidates = np.sort(self._scan(q, positions, mask, max(RESCORE_DEPTH, k)))
        scores = self._float_rows(candidates) @ q
        best = best_positions(scores, k)
        return list(zip(self._ids[candidates[best]].tolist(), scores[best].tolist(), strict=True))

    def _scan(self, q: np.ndarray, positions: np.ndarray, mask: np.ndarray | None, depth: int) -> np.ndarray:
        """Positions of the `depth` best int8 scores in the scope (equal scores: the lower position first)."""
        import numkong
        import numpy as np

        weighted = q * self._scale  # dot(q, code * scale) = dot(q * scale, code)
        peak = float(np.abs(weighted).max()) or 1.0
        q8 = np.rint(weighted * (127 / peak)).astype(np.int8)[None, :]
        if mask is None:  # a gathered scope: one copy of its codes, then one scan
            scores = np.asarray(numkong.cdist(q8, self._codes[positions], metric="inner", out_dtype="float32"))[0]
            return positions[top_positions(scores, depth)]
        everything = positions.size == self.rows
        shards = max(1, min(os.cpu_count() or 1, self.rows // PARALLEL_FROM))
        bounds = np.linspace(0, self.rows, shards + 1).astype(np.int64)

        def shard(i: int) -> tuple[np.ndarray, np.ndarray]:
            lo, hi = int(bounds[i]), int(bounds[i + 1])
            scores = np.asarray(numkong.cdist(q8, self._codes[lo:hi], metric="inner", out_dtype="float32"))[0]
            best = top_positions(scores, depth, None if everything else mask[lo:hi])
            return best + lo, scores[best]

        parts = list(_threads().map(shard, range(shards))) if shards > 1 else [shard(0)]
        found = np.concatenate([p for p, _ in parts])
        scores = np.concatenate([s for _, s in parts])
        return found[np.lexsort((found, -scores))[:depth]]

    # -- writing (the caller holds the store's writer lock) ---------------------------------------

    def append(self, generation: int, ids: np.ndarray, vectors: np.ndarray, deleted: int) -> bool:
        """Add rows written after the current ones and count `deleted` dead rows; False when the caller
        should rebuild instead (too many dead rows, or a small index whose scale the new vectors exceed)."""
        import numpy as np

        state = self._state
        if state is None:
            return False
        rows, dead = state["rows"], state["dead"] + deleted
        scale = np.asarray(state["scale"], np.float32)
        if rows + len(ids) and dead > DEAD_SHARE * (rows + len(ids)):
            return False
        if len(ids) and (rows == 0 or vectors.shape[1] != state["dim"]):
            return False
        if len(ids) and rows < REQUANTIZE_BELOW and np.any(np.abs(vectors).max(axis=0) > scale * 127):
            return False
        if self.directory is None:
            if len(ids):
                codes = np.concatenate([self._codes, quantize(vectors, scale)])
                self._mapped = (np.concatenate([self._ids, ids]), codes, self._scale)
                self._floats = np.concatenate([self._floats, vectors])
            self._state = {**state, "generation": generation, "rows": rows + len(ids), "dead": dead}
            return True
        stamp = state["stamp"]
        if len(ids):
            blobs = {"ids": np.ascontiguousarray(ids, np.int64), "int8": quantize(vectors, scale),
                     "f32": np.ascontiguousarray(vectors, np.float32)}
            for name, array in blobs.items():
                path = self.directory / f"{name}.{stamp}"
                width = array.itemsize * (array.shape[1] if array.ndim == 2 else 1)
                with open(path, "r+b") as handle:  # drop the tail of an append that never recorded its state
                    handle.truncate(rows * width)
                fd = _private_append(path)
                try:
                    os.write(fd, array.tobytes())
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self._write_state({**state, "generation": generation, "rows": rows + len(ids), "dead": dead})
        return True

    def replace_all(self, generation: int, dim: int, batches: Iterator[tuple[np.ndarray, np.ndarray]]) -> None:
        """Rebuild from (ids, vectors) batches in id order: new files under a new stamp, then the state
        switches to them in one rename, then the old files go."""
        import numpy as np

        if self.directory is None:
            ids = [np.zeros(0, np.int64)]
            floats = [np.zeros((0, dim), np.float32)]
            for batch_ids, vectors in batches:
                ids.append(batch_ids)
                floats.append(vectors)
            all_ids, self._floats = np.concatenate(ids), np.concatenate(floats)
            scale = quantization_scale(np.abs(self._floats).max(axis=0) if len(self._floats) else np.zeros(dim))
            self._mapped = (all_ids, quantize(self._floats, scale), scale)
            self._state = {"format": FORMAT, "generation": generation, "rows": int(all_ids.size), "dim": dim,
                           "dead": 0, "scale": scale.tolist(), "stamp": ""}
            return
        make_private_folder(self.directory)
        stamp = secrets.token_hex(4)
        paths = {name: self.directory / f"{name}.{stamp}" for name in ("ids", "int8", "f32")}
        fds = {name: _private_append(path) for name, path in paths.items()}
        rows = 0
        peak = np.zeros(dim, np.float32)
        try:
            for batch_ids, vectors in batches:
                os.write(fds["ids"], np.ascontiguousarray(batch_ids, np.int64).tobytes())
                os.write(fds["f32"], np.ascontiguousarray(vectors, np.float32).tobytes())
                if len(vectors):
                    peak = np.maximum(peak, np.abs(vectors).max(axis=0))
                rows += len(batch_ids)
            scale = quantization_scale(peak)
            # A second pass in blocks, read with pread: neither the matrix nor its pages are ever this process's.
            block = np.empty((65_536, dim), np.float32)
            with open(paths["f32"], "rb", buffering=0) as floats:
                for start in range(0, rows, len(block)):
                    part = block[: min(len(block), rows - start)]
                    if floats.readinto(memoryview(part).cast("B")) != part.nbytes:
                        raise OSError(f"short read while rebuilding {self.directory}")
                    os.write(fds["int8"], quantize(part, scale).tobytes())
            for fd in fds.values():
                os.fsync(fd)
        except BaseException:
            for path in paths.values():
                path.unlink(missing_ok=True)
            raise
        finally:
            for fd in fds.values():
                os.close(fd)
        self._write_state({"format": FORMAT, "generation": generation, "rows": rows, "dim": dim, "dead": 0,
                           "scale": scale.tolist(), "stamp": stamp})
        # Readers that mapped the old files keep them until they look again (Linux keeps unlinked inodes).
        for entry in self.directory.iterdir():
            if entry.name != STATE and entry.suffix != f".{stamp}":  # a crash's stray temporary state goes too
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()

    def _write_state(self, state: dict) -> None:
        if self.directory is None:
            self._state = state
            return
        write_text_atomically(self.directory / STATE, json.dumps(state))
        self._map(state)

    def close(self) -> None:
        if self._float_fd is not None:
            os.close(self._float_fd)
            self._float_fd = None
        self._release()
        if self._mapped is not None:  # numpy is loaded: the mappings go, the scales stay
            import numpy as np

            self._mapped = (np.zeros(0, np.int64), np.zeros((0, 0), np.int8), self._mapped[2])
