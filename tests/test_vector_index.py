"""The embedded store's vector files (stores/vector_index.py): exact where the design says exact, the int8
scan against brute force for every filter combination, and the files kept in step with SQLite through
crashes, other processes' writes, deletions and an index built before they existed."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from ragstead.filters import QueryFilters
from ragstead.stores import vector_index
from ragstead.stores.base import ChunkRecord, DocumentRecord, DocumentWrite
from ragstead.stores.sqlite import SqliteStore
from ragstead.stores.vector_index import VectorIndex

DIM = 32
USERS = ("ana", "ben", "chloe")
TYPES = ("user_kb", "dossier", "docs", "archive")


def _document(n: int, rng: np.random.Generator, chunks: int = 6) -> DocumentWrite:
    user = USERS[n % len(USERS)]
    doc_type = TYPES[(n // 3) % len(TYPES)]
    private = doc_type in ("user_kb", "dossier")
    doc_id = f"{n:064x}"
    doc = DocumentRecord(doc_id, f"{doc_type}/{user}/d{n}.md", "kb", doc_id, 0, 0.0, doc_type, private,
                         user if private else None, None, f"2025-{1 + n % 12:02d}-{1 + n % 27:02d}T00:00:00+00:00",
                         f"doc {n}", ["red"] if n % 2 else ["blue"])
    vectors = rng.standard_normal((chunks, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    records = [ChunkRecord(f"{n:056x}{i:08x}", i, f"words of doc {n} part {i}", f"{n:056x}{i:08x}", 0, 5, 0, 0,
                           None, None, 8) for i in range(chunks)]
    return DocumentWrite(doc, records, vectors)


def _store(path: Path, documents: int = 400, seed: int = 3) -> SqliteStore:
    rng = np.random.default_rng(seed)
    store = SqliteStore(path)
    store.ensure_model("random", DIM)
    writes = [_document(n, rng) for n in range(documents)]
    for start in range(0, len(writes), 50):  # many writes: the files grow by appends
        store.apply(writes[start : start + 50], [], [])
    return store


def _brute_force(store: SqliteStore, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]]:
    """Cosine over every row SQLite's WHERE admits, straight from the SQLite blobs."""
    where, params = filters.to_sql("c")
    rows = store._db.execute(f"SELECT c.id, c.embedding FROM chunks c WHERE {where}", params).fetchall()
    if not rows:
        return []
    ids = np.array([r[0] for r in rows])
    scores = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), -1) @ query
    order = np.lexsort((ids, -scores))[:k]
    return [(int(ids[i]), float(scores[i])) for i in order]


FILTERS = [
    QueryFilters.build(user_slug=user, doc_types=types, public_only=public, include_archive=archive,
                       date_from=date_from, tags=tags)
    for user, types, public, archive, date_from, tags in itertools.product(
        (None, "ana"), ((), ("dossier",), ("docs", "archive")), (False, True), (False, True), (None, "2025-06-01"),
        ((), ("red",)),
    )
]


def _queries(n: int = 12, seed: int = 9) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> SqliteStore:
    return _store(tmp_path_factory.mktemp("vectors") / "index.db")


def _same(found: list[tuple[int, float]], wanted: list[tuple[int, float]]) -> None:
    assert [i for i, _ in found] == [i for i, _ in wanted]
    assert np.allclose([s for _, s in found], [s for _, s in wanted], atol=1e-5)


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: repr(f)[12:80])
def test_small_scopes_are_exact_for_every_filter_combination(store: SqliteStore, filters: QueryFilters) -> None:
    store.vectors.exact_rows = 10_000
    store.vectors._eligible_cache.clear()  # cached scopes carry the path the limit chose
    for q in _queries():
        _same(store.vector_search(q, filters, 10), _brute_force(store, q, filters, 10))


@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: repr(f)[12:80])
def test_the_int8_scan_finds_the_exact_top_ten_for_every_filter_combination(store: SqliteStore,
                                                                            filters: QueryFilters) -> None:
    # Every scope through the quantized path (exact_rows 0): its candidates, re-scored exactly, must hold the
    # exact top 10 on this data (2,400 rows, scopes of up to 1,600), and the scores are the exact cosines.
    store.vectors.exact_rows = 0
    store.vectors._eligible_cache.clear()  # scopes over a third of the rows now take the masked whole-index scan
    try:
        for q in _queries():
            _same(store.vector_search(q, filters, 10), _brute_force(store, q, filters, 10))
    finally:
        store.vectors.exact_rows = 10_000


def test_the_int8_scan_of_a_large_scope_keeps_recall_on_random_vectors(tmp_path: Path) -> None:
    """30,000 random unit vectors (the hardest case for quantization: no clusters), no filter: the top 10
    after the int8 scan and exact re-scoring matches brute force for every query."""
    rng = np.random.default_rng(1)
    index = VectorIndex(tmp_path / "v")
    vectors = rng.standard_normal((30_000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.replace_all(1, 384, iter([(np.arange(1, 30_001), vectors)]))
    positions = np.arange(30_000)
    mask = np.ones(30_000, bool)
    overlap = []
    for q in vectors[rng.integers(0, 30_000, 20)] + 0.05 * rng.standard_normal((20, 384)).astype(np.float32):
        q = (q / np.linalg.norm(q)).astype(np.float32)
        exact = np.argsort(-(vectors @ q))[:10] + 1
        found = [i for i, _ in index.search(q, positions, mask, 10, exact_rows=0)]
        overlap.append(len(set(found) & set(exact.tolist())) / 10)
    assert np.mean(overlap) >= 0.99


def test_the_best_of_a_large_scan_are_found_exactly_with_equal_scores_in_position_order() -> None:
    """The threshold read off a sample loses nothing: on 200k integer scores full of ties, with no mask, a
    scattered one, a sparse one and one that admits only low scores (too few pass the threshold: all are
    sorted), the k best are what sorting every admitted score gives, equal scores by position."""
    rng = np.random.default_rng(4)
    scores = rng.integers(-300, 300, 200_000).astype(np.float32)
    for admitted in (None, rng.random(scores.size) < 0.4, rng.random(scores.size) < 0.001, scores < -250):
        positions = np.arange(scores.size) if admitted is None else np.flatnonzero(admitted)
        for k in (1, 10, 200):
            wanted = positions[np.lexsort((positions, -scores[positions]))[:k]]
            assert np.array_equal(vector_index.top_positions(scores, k, admitted), wanted)


def test_the_int8_scan_picks_the_same_rows_however_it_is_split(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal int8 scores are taken in position order, so a scan in one part and one in four hand the same rows
    to the exact re-score (argpartition's pick among ties depended on the split)."""
    rng = np.random.default_rng(2)
    vectors = np.repeat(rng.standard_normal((3_000, 8)).astype(np.float32), 40, axis=0)  # each row 40 times
    index = VectorIndex(tmp_path / "v")
    index.replace_all(1, 8, iter([(np.arange(1, vectors.shape[0] + 1), vectors)]))
    everything, mask = np.arange(index.rows), np.ones(index.rows, bool)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    for q in rng.standard_normal((5, 8)).astype(np.float32):
        monkeypatch.setattr(vector_index, "PARALLEL_FROM", 10**9)
        whole = index._scan(q, everything, mask, 200)
        monkeypatch.setattr(vector_index, "PARALLEL_FROM", 30_000)
        assert np.array_equal(index._scan(q, everything, mask, 200), whole)



def test_an_index_kept_in_memory_scans_int8_like_one_on_disk(tmp_path: Path) -> None:
    """A `:memory:` store's vector index takes the int8 path with the scales its rebuild computed (it kept the
    empty scales it was made with: the scan failed on the shapes) and finds what the files find."""
    rng = np.random.default_rng(6)
    vectors = rng.standard_normal((3_000, 16)).astype(np.float32)
    in_memory, on_disk = VectorIndex(None), VectorIndex(tmp_path / "v")
    for index in (in_memory, on_disk):
        index.replace_all(1, 16, iter([(np.arange(1, 3_001), vectors)]))
    everything, mask = np.arange(3_000), np.ones(3_000, bool)
    for q in rng.standard_normal((5, 16)).astype(np.float32):
        assert in_memory.search(q, everything, mask, 10, exact_rows=0) == on_disk.search(q, everything, mask, 10,
                                                                                          exact_rows=0)


def test_deleted_chunks_are_never_returned_and_enough_of_them_compact_the_files(tmp_path: Path) -> None:
    store = _store(tmp_path / "index.db", documents=60)
    gone = [f"user_kb/ana/d{n}.md" for n in range(0, 60, 3) if TYPES[(n // 3) % 4] == "user_kb"][:4]
    rows_before = store.vectors.index.rows
    store.apply([], gone, [])
    assert store.vectors.index.rows == rows_before and store.vectors.index.dead() == 24
    left = store._db.execute(f"SELECT COUNT(*) FROM chunks WHERE file_path IN ({','.join('?' * len(gone))})", gone)
    assert left.fetchone()[0] == 0  # they are gone from SQLite...
    for exact_rows in (10_000, 0):
        store.vectors.exact_rows = exact_rows
        for q in _queries():
            found = store.vector_search(q, QueryFilters(user_slug="ana"), 50)
            _same(found, _brute_force(store, q, QueryFilters(user_slug="ana"), 50))  # ...and from the search
    # Deleting a fifth of the rows rebuilds the files without them.
    many = [f"{t}/{u}/d{n}.md" for n in range(60) for u in USERS for t in TYPES][:200]
    store.apply([], many, [])
    live = store._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    assert store.vectors.index.rows == live and store.vectors.index.dead() == 0


def test_a_write_that_died_before_the_vector_files_is_repaired_by_the_next_search(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    store = _store(tmp_path / "index.db", documents=30)
    rng = np.random.default_rng(7)
    late = _document(1000, rng)

    def crash(*args, **kwargs):  # the process dies after SQLite and tantivy committed
        raise KeyboardInterrupt

    monkeypatch.setattr(VectorIndex, "append", crash)
    with pytest.raises(KeyboardInterrupt):
        store.apply([late], [], [])
    monkeypatch.undo()
    store.close()
    again = SqliteStore(tmp_path / "index.db")
    q = late.vectors[0]
    filters = QueryFilters(user_slug=late.document.user_slug)
    assert again.vector_search(q, filters, 1)[0][1] == pytest.approx(1.0, abs=1e-5)
    _same(again.vector_search(q, filters, 10), _brute_force(again, q, filters, 10))


def test_a_torn_append_and_damaged_files_are_rebuilt_from_sqlite(tmp_path: Path) -> None:
    store = _store(tmp_path / "index.db", documents=30)
    folder = tmp_path / "index.vectors"
    state = json.loads((folder / "state.json").read_text())
    with open(folder / f"int8.{state['stamp']}", "ab") as handle:  # an append whose state was never written
        handle.write(b"\x7f" * DIM * 5)
    store.apply([_document(500, np.random.default_rng(2))], [], [])
    q = _queries()[0]
    _same(store.vector_search(q, QueryFilters(), 10), _brute_force(store, q, QueryFilters(), 10))
    store.close()
    state = json.loads((folder / "state.json").read_text())
    (folder / f"f32.{state['stamp']}").write_bytes(b"short")  # damaged: a reader must not trust it
    reopened = SqliteStore(tmp_path / "index.db")
    _same(reopened.vector_search(q, QueryFilters(), 10), _brute_force(reopened, q, QueryFilters(), 10))


def test_an_index_from_before_the_vector_files_builds_them_on_first_search(tmp_path: Path) -> None:
    store = _store(tmp_path / "index.db", documents=30)
    store.close()
    shutil.rmtree(tmp_path / "index.vectors")
    reopened = SqliteStore(tmp_path / "index.db")
    q = _queries()[1]
    _same(reopened.vector_search(q, QueryFilters(), 10), _brute_force(reopened, q, QueryFilters(), 10))
    assert (tmp_path / "index.vectors" / "state.json").exists()
    stats = reopened.stats()
    assert stats["vector_rows"] == stats["chunks"] == 180
    assert stats["vector_generation"] == stats["lexical_generation"]
    assert reopened.integrity_check() == "ok"


def test_another_processs_write_is_seen_by_an_open_reader(tmp_path: Path) -> None:
    writer = _store(tmp_path / "index.db", documents=30)
    reader = SqliteStore(tmp_path / "index.db")
    q = _queries()[2]
    reader.vector_search(q, QueryFilters(), 10)
    late = _document(2004, np.random.default_rng(4))  # a private user_kb document of ana's
    writer.apply([late], [], [])
    filters = QueryFilters(user_slug=late.document.user_slug)
    assert reader.vector_search(late.vectors[2], filters, 1)[0][1] == pytest.approx(1.0, abs=1e-5)


def test_the_vector_files_are_private(tmp_path: Path) -> None:
    _store(tmp_path / "index.db", documents=10)
    folder = tmp_path / "index.vectors"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for entry in folder.iterdir():
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600, entry


def _vectors(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    vectors = np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)
    return np.arange(1, rows + 1, dtype=np.int64), vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_reader_that_counted_the_rows_still_reads_files_a_rebuild_removed_since(tmp_path: Path) -> None:
    """Counting the rows (`status`) maps nothing but holds the state's files, so a rebuild that removes them
    before the first read cannot take them away: the reader sees the state it counted, as a mapping would."""
    writer = VectorIndex(tmp_path / "v")
    writer.replace_all(1, DIM, iter([_vectors(40, 1)]))
    reader = VectorIndex(tmp_path / "v")
    assert reader.refresh() == 1 and reader.rows == 40 and reader._mapped is None
    writer.replace_all(2, DIM, iter([_vectors(25, 2)]))
    assert not list((tmp_path / "v").glob(f"ids.{reader.mapping[0]}"))  # its files are gone from the folder
    assert reader.ids.tolist() == list(range(1, 41))
    assert reader.refresh() == 2 and reader.ids.tolist() == list(range(1, 26))
    reader.close()
    writer.close()


def test_a_short_vector_file_is_found_by_the_check_without_reading_it(tmp_path: Path) -> None:
    """The sizes `status` checks stand for the mapping it no longer makes: a cut int8 file makes the files
    disagree with SQLite, and the next search rebuilds them."""
    store = _store(tmp_path / "index.db", documents=10)
    store.close()
    folder = tmp_path / "index.vectors"
    state = json.loads((folder / "state.json").read_text())
    (folder / f"int8.{state['stamp']}").write_bytes(b"\x01" * DIM)  # one row of the 60 the state says
    reopened = SqliteStore(tmp_path / "index.db")
    assert reopened.vectors.index.refresh() is None  # taken as never built
    q = _queries()[0]
    _same(reopened.vector_search(q, QueryFilters(), 10), _brute_force(reopened, q, QueryFilters(), 10))
    assert reopened.integrity_check() == "ok"
