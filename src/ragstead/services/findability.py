"""The findability check (`ragstead doctor --findability`): can each indexed document be found by its own words?

For every document a query is made from its distinctive words (its title, its headings, and its rarest terms
by inverse document frequency) and run as a lexical (BM25) search in its owner's scope. A document is
findable when it comes back in the top `top` documents and no near-duplicate of it ranks above it. No labels
are needed, and lexical search keeps it to seconds for thousands of documents (no model is loaded).

What cannot be found is listed with why: shadowed by a near-duplicate, empty after extraction, too short, or
outranked; the files under the roots that never made it into the index are listed too, with the reason the
index run gives (unsupported type, empty, a limit, unreadable). Each run is saved beside the index
(`findability.json`, 0600), and the next one compares with it: a document findable then and not now is a
regression.

A scoped run (`filters`: what the HTTP API and the MCP server pass, a caller's scope) is the check of an index
that held only the documents of that scope: they alone are read, counted, ranked against each other (so a
near-duplicate outside the scope can neither shadow nor be named), and their words alone make the queries; a
left-out file is listed only when its path falls in the scope. It neither reads nor writes the last run
(that file holds the whole index), so it has no regressions.
"""

from __future__ import annotations

import heapq
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ragstead.core.atomic import make_private_folder, write_text_atomically
from ragstead.documents.ids import file_of
from ragstead.filters import QueryFilters
from ragstead.indexing.build import IndexReport, Skip, diff_roots, prepare_file
from ragstead.retrieval.lexical_query import STOP_WORDS
from ragstead.services.runtime import Runtime
from ragstead.stores.base import DocumentRecord

TOP = 5  # "findable": among the first TOP documents
CANDIDATE_CHUNKS = 40  # chunks a query asks for, enough to rank TOP distinct documents
QUERY_TERMS = 12  # words a document's query holds at most
TITLE_TERMS = 6  # of which from its title and headings at most
MIN_WORDS = 12  # fewer words than this, and an unfindable document is "too short"
NEAR_DUPLICATE = 0.8  # Jaccard similarity of two documents' word sets above which one can shadow the other
FETCH_BATCH = 500  # chunk row ids resolved to documents per store call
T = TypeVar("T")
SCOPE_SHARE = 4  # a scope under a quarter of the index reads its documents' chunks one document at a time
LAST_RUN = "findability.json"
_TOKEN = re.compile(r"\w+", re.UNICODE)


@dataclass
class Unfindable:
    """An indexed document its own words do not find, or a file under the roots that is not in the index."""

    path: str
    kind: str  # shadowed | empty | too_short | outranked | unsupported | skipped | not_indexed_yet
    reason: str
    doc_id: str | None = None
    rank: int | None = None  # where its own query ranked it (None: not in the candidates)
    query: str | None = None
    shadowed_by: str | None = None


@dataclass
class FindabilityReport:
    """`to_dict()` is the `doctor --findability --json` contract."""

    documents: int
    findable: int
    top: int
    not_findable: list[Unfindable]
    left_out: list[Unfindable]
    regressions: list[dict[str, str]]
    previous: dict[str, Any] | None
    seconds: float
    generated_at: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def to_dict(self) -> dict[str, Any]:
        return {"documents": self.documents, "findable": self.findable, "top": self.top,
                "not_findable": [_compact(asdict(u)) for u in self.not_findable],
                "left_out": [_compact(asdict(u)) for u in self.left_out],
                "regressions": self.regressions, "previous": self.previous,
                "seconds": round(self.seconds, 3), "generated_at": self.generated_at}


def _compact(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if value is not None}


def words(text: str) -> list[str]:
    """The lexical terms of `text` as the query side spells them: lower-cased word tokens, stop words out."""
    out = []
    for token in _TOKEN.findall(text.lower()):
        token = token.strip("_")
        if token and token not in STOP_WORDS:
            out.append(token)
    return out


@dataclass
class _Doc:
    doc_id: str
    path: str
    title: str | None
    scope: QueryFilters  # where its query runs: its owner's scope, or the caller's in a scoped run
    counts: Counter[str]
    headings: list[str]
    query: list[str] = field(default_factory=list)


class Findability:
    """The findability check over the index of one `Runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @property
    def last_run_file(self) -> Path:
        return self.runtime.settings.db_file.parent / LAST_RUN

    def findability(self, *, top: int = TOP, save: bool = True,
                    filters: QueryFilters | None = None) -> FindabilityReport:
        """Check that every indexed document is found in the top `top` by a query of its own distinctive
        words, in its owner's scope; list those that are not and the files left out of the index, each with
        why, and the regressions since the last run (saved beside the index unless `save` is False).

        With `filters` (a caller's scope) only the documents and left-out files of that scope take part, and
        the run is not compared with nor saved as the last run."""
        started = time.perf_counter()
        # The store's read connection is shared by a server's threads: held per batch of documents and per query,
        # never across the run (other callers' searches wait for a query, not the run).
        docs = self._read_documents() if filters is None else self._read_scope(filters)
        ranked = self._rank(docs, top)
        left_out = self._left_out(filters)
        not_findable = [u for u in (self._judge(doc, ranked[doc.doc_id], docs, top) for doc in docs.values())
                        if u is not None]
        previous = self._load_last_run() if filters is None else None
        now_missing = {u.path for u in not_findable}
        regressions = [{"path": path, "reason": next(u.reason for u in not_findable if u.path == path)}
                       for path in sorted(now_missing)
                       if previous is not None and previous["documents"].get(path) is True]
        report = FindabilityReport(len(docs), len(docs) - len(not_findable), top,
                                   sorted(not_findable, key=lambda u: u.path), left_out, regressions,
                                   None if previous is None else {"generated_at": previous.get("generated_at"),
                                                                  "findable": previous.get("findable")},
                                   time.perf_counter() - started)
        if save and filters is None:
            self._save(report, docs)
        return report

    # -- the steps --------------------------------------------------------------------------------------

    def _read_documents(self) -> dict[str, _Doc]:
        """Every document with its word counts and headings (one pass over the store, in batches)."""
        docs: dict[str, _Doc] = {}
        for write in _locked(self.runtime.store.export_documents(), self.runtime.lock):
            record = write.document
            docs[record.doc_id] = _doc(record.doc_id, record.file_path, record.title, _owner_scope(record),
                                       ((chunk.text, chunk.section_path) for chunk in write.chunks))
        return _with_queries(docs)

    def _read_scope(self, filters: QueryFilters) -> dict[str, _Doc]:
        """The documents `filters` admit, by the store's own filters (the WHERE of every search) and checked
        against their paths as searches are, each with its chunks; each ranks in `filters`. Only the scope is
        read (#45: a key owning nothing made the server read every document of the index)."""
        store, rules, lock = self.runtime.store, self.runtime.settings.scope_rules, self.runtime.lock
        admitted: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            with lock:
                page = store.list_documents(filters, FETCH_BATCH, offset)
            # A row whose stored metadata disagrees with its path is left out, as a search leaves it out.
            admitted.update((row["doc_id"], row) for row in page if filters.admits(row["file_path"], rules))
            if len(page) < FETCH_BATCH:
                break
            offset += FETCH_BATCH
        docs: dict[str, _Doc] = {}
        with lock:
            total = store.count_documents(QueryFilters())
        if len(admitted) * SCOPE_SHARE < total:  # a small scope: its documents' chunks, one query each
            for doc_id, row in admitted.items():
                with lock:
                    chunks = store.document_chunks(filters, doc_id=doc_id)
                docs[doc_id] = _doc(doc_id, row["file_path"], row.get("title"), filters,
                                    ((chunk["text"], chunk.get("section_path")) for chunk in chunks))
            return _with_queries(docs)
        # Most of the index: one batched pass, as the whole-index run reads it (a query per document was 3x
        # slower for 900 notes in SQLite), skipping the documents outside the scope.
        for write in _locked(store.export_documents(), lock):
            record = write.document
            if record.doc_id in admitted:
                docs[record.doc_id] = _doc(record.doc_id, record.file_path, record.title, filters,
                                           ((chunk.text, chunk.section_path) for chunk in write.chunks))
        return _with_queries(docs)

    def _rank(self, docs: dict[str, _Doc], top: int) -> dict[str, list[str]]:
        """doc_id -> the doc ids its query finds, best first (up to `top` and beyond, as candidates allow).

        Queries run one by one (BM25 in the store); their chunk row ids are resolved to documents in batches,
        one store call per scope and FETCH_BATCH rows."""
        store = self.runtime.store
        hits: dict[str, list[int]] = {}
        by_scope: dict[QueryFilters, list[str]] = {}
        for doc_id, doc in docs.items():
            by_scope.setdefault(doc.scope, []).append(doc_id)
            if not doc.query:
                hits[doc_id] = []
                continue
            with self.runtime.lock:
                hits[doc_id] = [rowid for rowid, _ in store.lexical_search(doc.query, doc.scope, CANDIDATE_CHUNKS)]
        ranked: dict[str, list[str]] = {}
        for filters, members in by_scope.items():
            rowids = sorted({rowid for doc_id in members for rowid in hits[doc_id]})
            owner: dict[int, str] = {}
            for start in range(0, len(rowids), FETCH_BATCH):
                with self.runtime.lock:
                    rows = store.fetch_chunks(rowids[start : start + FETCH_BATCH], filters)
                owner.update({rowid: row["doc_id"] for rowid, row in rows.items()})
            for doc_id in members:
                found: dict[str, None] = {}
                for rowid in hits[doc_id]:
                    if owner.get(rowid) in docs:  # only the documents read: nothing else can rank, shadow or be named
                        found.setdefault(owner[rowid], None)
                ranked[doc_id] = list(found)
        return ranked

    def _judge(self, doc: _Doc, found: list[str], docs: dict[str, _Doc], top: int) -> Unfindable | None:
        doc_id, path, query = doc.doc_id, doc.path, " ".join(doc.query)
        rank = found.index(doc_id) + 1 if doc_id in found else None
        ahead = found[: (rank - 1) if rank else top]
        twin = next((other for other in ahead if _similar(doc.counts, docs[other].counts) >= NEAR_DUPLICATE), None)
        if rank is not None and rank <= top and twin is None:
            return None
        if not doc.counts:
            return Unfindable(path, "empty", "empty after extraction: no words to search by", doc_id)
        if twin is not None:
            by = docs[twin].path
            return Unfindable(path, "shadowed", f"shadowed by a near-duplicate: {by} ranks above it", doc_id,
                              rank, query, by)
        total = sum(doc.counts.values())
        if total < MIN_WORDS:
            return Unfindable(path, "too_short", f"too short: {total} words to search by", doc_id, rank, query)
        where = f"ranked {rank}" if rank else f"not in the first {len(found)} documents"
        return Unfindable(path, "outranked", f"its own words find other documents first ({where})", doc_id,
                          rank, query)

    def _left_out(self, filters: QueryFilters | None = None) -> list[Unfindable]:
        """Files under the configured roots that are not in the index, with the reason an index run gives;
        with `filters`, only those whose path falls in that scope (whose they are, private or public, type)."""
        rt = self.runtime
        roots = tuple(r for r in rt.settings.roots if (rt.root / r).is_dir())
        if not roots:
            return []
        options = rt.settings.indexing(roots)
        rules = rt.settings.scope_rules

        def in_scope(path: str) -> bool:
            return filters is None or filters.admits(path, rules)

        report = IndexReport()
        with rt.lock:
            manifest = rt.store.manifest()
        # Reading the new files (extraction, OCR) runs without the store's lock; a scoped run hashes and reads
        # only the files of its scope (another user's changed files are not its business, nor its cost).
        diff = diff_roots(options, roots, manifest, report, None if filters is None else _InScope(in_scope))
        out = [Unfindable(item["path"], _kind(item["reason"]), item["reason"]) for item in report.skipped
               if in_scope(item["path"])]
        for candidate in diff.todo:
            # Changed since the last run: its older version is in the index and was checked. Out of scope: not
            # this caller's, and not even read.
            if not candidate.is_new or not in_scope(candidate.rel_path):
                continue
            prepared = prepare_file(candidate, options)
            if isinstance(prepared, Skip):
                out.append(Unfindable(candidate.rel_path, _kind(prepared.reason), prepared.reason))
            else:
                out.append(Unfindable(candidate.rel_path, "not_indexed_yet",
                                      "not indexed yet: run `ragstead index`"))
        return sorted(out, key=lambda u: u.path)

    # -- the last run -------------------------------------------------------------------------------------

    def _load_last_run(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.last_run_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # no run yet (or a damaged file): nothing to compare with
        return data if isinstance(data, dict) and isinstance(data.get("documents"), dict) else None

    def _save(self, report: FindabilityReport, docs: dict[str, _Doc]) -> None:
        missing = {u.path for u in report.not_findable}
        record = {"generated_at": report.generated_at, "findable": report.findable, "top": report.top,
                  "documents": {d.path: d.path not in missing for d in docs.values()}}
        make_private_folder(self.last_run_file.parent)
        write_text_atomically(self.last_run_file, json.dumps(record, indent=1, sort_keys=True))


class _InScope:
    """The files of a caller's scope, for the walk of `diff_roots` (in place of a `Within`): every folder is
    walked (a scope is a rule on paths, not a folder), only the files the scope admits are stat'ed and hashed."""

    def __init__(self, admits: Callable[[str], bool]) -> None:
        self.admits = admits

    def holds(self, rel: str) -> bool:
        return self.admits(file_of(rel))

    def leads_to(self, folder: str) -> bool:
        return True


def _locked(items: Iterator[T], lock: AbstractContextManager[Any]) -> Iterator[T]:
    """`items`, each one taken from the (store's) iterator under `lock`, which is released between them."""
    while True:
        with lock:
            item = next(items, None)
        if item is None:
            return
        yield item


def _doc(doc_id: str, path: str, title: str | None, scope: QueryFilters,
         chunks: Iterable[tuple[str, str | None]]) -> _Doc:
    """A document's word counts and headings from its chunks' (text, section path)."""
    counts: Counter[str] = Counter()
    headings: dict[str, None] = {}
    for text, section_path in chunks:
        counts.update(words(text))
        for heading in (section_path or "").split(" > "):
            if heading.strip():
                headings.setdefault(heading.strip(), None)
    return _Doc(doc_id, path, title, scope, counts, list(headings))


def _with_queries(docs: dict[str, _Doc]) -> dict[str, _Doc]:
    """Each document's query, by the rarity of its words among `docs` (and no other document)."""
    frequency: Counter[str] = Counter()
    for doc in docs.values():
        frequency.update(doc.counts.keys())
    for doc in docs.values():
        doc.query = _distinctive(doc, frequency)
    return docs


def _distinctive(doc: _Doc, frequency: Counter[str]) -> list[str]:
    """The document's query: words of its title and headings first, then its rarest words (highest IDF,
    then most frequent in it), QUERY_TERMS at most."""
    chosen: dict[str, None] = {}
    for text in (doc.title or "", *doc.headings):
        for word in words(text):
            if len(chosen) < TITLE_TERMS and word in doc.counts:
                chosen.setdefault(word, None)
    # Highest IDF first is fewest documents first; then the words it repeats. Only the first few are needed.
    candidates = (w for w in doc.counts if len(w) > 1 and not w.isdigit() and w not in chosen)
    for word in heapq.nsmallest(QUERY_TERMS - len(chosen), candidates,
                                key=lambda w: (frequency[w], -doc.counts[w], w)):
        chosen.setdefault(word, None)
    return list(chosen)


def _owner_scope(record: DocumentRecord) -> QueryFilters:
    """The scope its owner searches in: that user's private documents, or the public ones; archive included."""
    if record.is_private:
        return QueryFilters(user_slug=record.user_slug, include_archive=True)
    return QueryFilters(public_only=True, include_archive=True)


def _similar(a: Counter[str], b: Counter[str]) -> float:
    """Jaccard similarity of two documents' word sets."""
    if not a or not b:
        return 0.0
    keys_a, keys_b = a.keys(), b.keys()
    return len(keys_a & keys_b) / len(keys_a | keys_b)


def _kind(reason: str) -> str:
    if reason.startswith("unsupported file type"):
        return "unsupported"
    if reason.startswith("no text to index"):
        return "empty"
    return "skipped"
