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
"""

from __future__ import annotations

import heapq
import json
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragstead.atomic import make_private_folder, write_text_atomically
from ragstead.filters import QueryFilters
from ragstead.indexing.build import IndexReport, Skip, diff_roots, prepare_file
from ragstead.retrieval.lexical_query import STOP_WORDS
from ragstead.runtime import Runtime
from ragstead.stores.base import DocumentRecord

TOP = 5  # "findable": among the first TOP documents
CANDIDATE_CHUNKS = 40  # chunks a query asks for, enough to rank TOP distinct documents
QUERY_TERMS = 12  # words a document's query holds at most
TITLE_TERMS = 6  # of which from its title and headings at most
MIN_WORDS = 12  # fewer words than this, and an unfindable document is "too short"
NEAR_DUPLICATE = 0.8  # Jaccard similarity of two documents' word sets above which one can shadow the other
FETCH_BATCH = 500  # chunk row ids resolved to documents per store call
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
    record: DocumentRecord
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

    def findability(self, *, top: int = TOP, save: bool = True) -> FindabilityReport:
        """Check that every indexed document is found in the top `top` by a query of its own distinctive
        words, in its owner's scope; list those that are not and the files left out of the index, each with
        why, and the regressions since the last run (saved beside the index unless `save` is False)."""
        started = time.perf_counter()
        rt = self.runtime
        with rt.lock:
            docs = self._read_documents()
            ranked = self._rank(docs, top)
            left_out = self._left_out()
        not_findable = [u for u in (self._judge(doc, ranked[doc.record.doc_id], docs, top) for doc in docs.values())
                        if u is not None]
        previous = self._load_last_run()
        now_missing = {u.path for u in not_findable}
        regressions = [{"path": path, "reason": next(u.reason for u in not_findable if u.path == path)}
                       for path in sorted(now_missing)
                       if previous is not None and previous["documents"].get(path) is True]
        report = FindabilityReport(len(docs), len(docs) - len(not_findable), top,
                                   sorted(not_findable, key=lambda u: u.path), left_out, regressions,
                                   None if previous is None else {"generated_at": previous.get("generated_at"),
                                                                  "findable": previous.get("findable")},
                                   time.perf_counter() - started)
        if save:
            self._save(report, docs)
        return report

    # -- the steps --------------------------------------------------------------------------------------

    def _read_documents(self) -> dict[str, _Doc]:
        """Every document with its word counts and headings (one pass over the store, in batches)."""
        docs: dict[str, _Doc] = {}
        for write in self.runtime.store.export_documents():
            counts: Counter[str] = Counter()
            headings: dict[str, None] = {}
            for chunk in write.chunks:
                counts.update(words(chunk.text))
                for heading in (chunk.section_path or "").split(" > "):
                    if heading.strip():
                        headings.setdefault(heading.strip(), None)
            docs[write.document.doc_id] = _Doc(write.document, counts, list(headings))
        frequency: Counter[str] = Counter()
        for doc in docs.values():
            frequency.update(doc.counts.keys())
        for doc in docs.values():
            doc.query = _distinctive(doc, frequency)
        return docs

    def _rank(self, docs: dict[str, _Doc], top: int) -> dict[str, list[str]]:
        """doc_id -> the doc ids its query finds, best first (up to `top` and beyond, as candidates allow).

        Queries run one by one (BM25 in the store); their chunk row ids are resolved to documents in batches,
        one store call per scope and FETCH_BATCH rows."""
        store = self.runtime.store
        hits: dict[str, list[int]] = {}
        by_scope: dict[QueryFilters, list[str]] = {}
        for doc_id, doc in docs.items():
            filters = _owner_scope(doc.record)
            by_scope.setdefault(filters, []).append(doc_id)
            hits[doc_id] = [rowid for rowid, _ in store.lexical_search(doc.query, filters, CANDIDATE_CHUNKS)] \
                if doc.query else []
        ranked: dict[str, list[str]] = {}
        for filters, members in by_scope.items():
            rowids = sorted({rowid for doc_id in members for rowid in hits[doc_id]})
            owner: dict[int, str] = {}
            for start in range(0, len(rowids), FETCH_BATCH):
                rows = store.fetch_chunks(rowids[start : start + FETCH_BATCH], filters)
                owner.update({rowid: row["doc_id"] for rowid, row in rows.items()})
            for doc_id in members:
                found: dict[str, None] = {}
                for rowid in hits[doc_id]:
                    if rowid in owner:
                        found.setdefault(owner[rowid], None)
                ranked[doc_id] = list(found)
        return ranked

    def _judge(self, doc: _Doc, found: list[str], docs: dict[str, _Doc], top: int) -> Unfindable | None:
        record, query = doc.record, " ".join(doc.query)
        rank = found.index(record.doc_id) + 1 if record.doc_id in found else None
        ahead = found[: (rank - 1) if rank else top]
        twin = next((other for other in ahead if _similar(doc.counts, docs[other].counts) >= NEAR_DUPLICATE), None)
        if rank is not None and rank <= top and twin is None:
            return None
        path = record.file_path
        if not doc.counts:
            return Unfindable(path, "empty", "empty after extraction: no words to search by", record.doc_id)
        if twin is not None:
            by = docs[twin].record.file_path
            return Unfindable(path, "shadowed", f"shadowed by a near-duplicate: {by} ranks above it", record.doc_id,
                              rank, query, by)
        total = sum(doc.counts.values())
        if total < MIN_WORDS:
            return Unfindable(path, "too_short", f"too short: {total} words to search by", record.doc_id, rank, query)
        where = f"ranked {rank}" if rank else f"not in the first {len(found)} documents"
        return Unfindable(path, "outranked", f"its own words find other documents first ({where})", record.doc_id,
                          rank, query)

    def _left_out(self) -> list[Unfindable]:
        """Files under the configured roots that are not in the index, with the reason an index run gives."""
        rt = self.runtime
        roots = tuple(r for r in rt.settings.roots if (rt.root / r).is_dir())
        if not roots:
            return []
        options = rt.settings.indexing(roots)
        report = IndexReport()
        diff = diff_roots(options, roots, rt.store.manifest(), report)
        out = [Unfindable(item["path"], _kind(item["reason"]), item["reason"]) for item in report.skipped]
        for candidate in diff.todo:
            if not candidate.is_new:
                continue  # changed since the last run: its older version is in the index and was checked
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
                  "documents": {d.record.file_path: d.record.file_path not in missing for d in docs.values()}}
        make_private_folder(self.last_run_file.parent)
        write_text_atomically(self.last_run_file, json.dumps(record, indent=1, sort_keys=True))


def _distinctive(doc: _Doc, frequency: Counter[str]) -> list[str]:
    """The document's query: words of its title and headings first, then its rarest words (highest IDF,
    then most frequent in it), QUERY_TERMS at most."""
    chosen: dict[str, None] = {}
    for text in (doc.record.title or "", *doc.headings):
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
