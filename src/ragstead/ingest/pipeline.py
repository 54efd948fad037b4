"""One `ingest` call: parse each source, skip what every target has already (no network, no embedding), fetch
and extract the rest once, tag once, and store in each target. A source that fails is reported with its
reason and the others go on; a target that fails does not undo the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from ragstead.core import egress
from ragstead.errors import RagsteadError, one_line_reason
from ragstead.ingest.archive import source_fields
from ragstead.ingest.base import Extracted, SourceError
from ragstead.ingest.bookmarks import bookmarks_file, read_bookmarks
from ragstead.ingest.deadline import source_deadline
from ragstead.ingest.feeds import feed_entries, looks_like_feed
from ragstead.ingest.fetch import Fetched, FetchOptions, fetch, make_client
from ragstead.ingest.posts import fetch_post
from ragstead.ingest.tagging import Tagging, normalize_tag
from ragstead.ingest.urls import Source, parse_source
from ragstead.ingest.web import as_download, extract, extract_html, sniff
from ragstead.ingest.youtube import fetch_youtube
from ragstead.stores.redaction import redact

STATUSES = ("added", "updated", "unchanged", "duplicate", "failed")
_LOCAL_KINDS = {".pdf": "pdf", ".txt": "text", ".text": "text", ".md": "text", ".markdown": "text",
                ".html": "html", ".htm": "html", ".docx": "docx"}


class IngestTarget(Protocol):
    """A knowledge base an ingest call writes to (KnowledgeBase implements it)."""

    name: str

    def documents_from_source(self, key: str) -> list[dict[str, Any]]: ...

    def existing_tags(self) -> list[str]: ...

    def store_extracted(self, extracted: Extracted, source: dict[str, Any], tags: list[str],
                        replaces: list[dict[str, Any]]) -> dict[str, Any]: ...


@dataclass
class SourceResult:
    """What happened to one source: a status per target, and the overall one (the best of them)."""

    source: str
    status: str
    reason: str | None = None
    kind: str | None = None
    url: str | None = None
    title: str | None = None
    doc_id: str | None = None
    file_path: str | None = None
    tags: list[str] = field(default_factory=list)
    tagging: dict[str, Any] | None = None
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def line(self) -> str:
        """The report line: `added`, `duplicate`, ... or `failed: reason`."""
        return f"failed: {self.reason}" if self.status == "failed" else self.status

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "status": self.status, "reason": self.reason, "kind": self.kind,
                "url": self.url, "title": self.title, "doc_id": self.doc_id, "file_path": self.file_path,
                "tags": self.tags, "tagging": self.tagging, "targets": self.targets}


@dataclass
class IngestReport:
    results: list[SourceResult] = field(default_factory=list)

    @property
    def failed(self) -> list[SourceResult]:
        return [r for r in self.results if r.status == "failed"]

    def counts(self) -> dict[str, int]:
        return {status: sum(r.status == status for r in self.results) for status in STATUSES}

    def to_dict(self) -> dict[str, Any]:
        return {"results": [r.to_dict() for r in self.results], "counts": self.counts(), "ok": not self.failed}


def read_local(source: Source, max_bytes: int) -> Extracted:
    """A local file as a source: PDFs, text and documents archived as they are, HTML extracted like a page."""
    path = Path(source.url)
    kind = _LOCAL_KINDS.get(path.suffix.lower())
    if kind is None:
        raise SourceError(f"unsupported file type {path.suffix or '(none)'!r} (ingest takes {', '.join(_LOCAL_KINDS)})")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise SourceError(f"file over the {max_bytes >> 20} MB cap (fetch_max_mb)")
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"cannot read the file ({exc.strerror or exc})") from None
    fetched = Fetched(path.as_uri(), 200, "", data)
    url = path.as_uri()
    if kind == "html":
        return extract_html(fetched, url, source.source_id)
    if kind == "pdf" and sniff(fetched) != "pdf":
        raise SourceError("not a PDF (the bytes do not start with %PDF-)")
    extracted = as_download(fetched, url, source.source_id, "pdf" if kind == "pdf" else "text")
    extracted.ext = path.suffix.lower().lstrip(".")
    extracted.title = path.stem
    return extracted


def fetch_extracted(source: Source, client: httpx.Client, options: FetchOptions) -> Extracted:
    """Fetch and extract one source (SourceError with the reason on any failure)."""
    if source.kind == "file":
        return read_local(source, options.max_bytes)
    if source.kind == "video":
        return fetch_youtube(source.url, client, max_bytes=options.max_bytes)
    if source.kind == "post":
        return fetch_post(source.url, client, max_bytes=options.max_bytes)
    return extract(fetch(client, source.url, options), source.url, source.source_id)


def merge_tags(given: Sequence[str], tagging: Tagging | None) -> list[str]:
    tags = [t for t in (normalize_tag(x) for x in given) if t]
    return list(dict.fromkeys([*tags, *(tagging.tags if tagging else [])]))


def ingest_sources(
    sources: Sequence[str],
    targets: Sequence[IngestTarget],
    *,
    tags: Sequence[str] = (),
    refresh: bool = False,
    fetch_options: FetchOptions | None = None,
    transport: httpx.BaseTransport | None = None,
    tagger: Callable[[str, list[str]], Tagging] | None = None,
    root: Path | None = None,
    on_result: Callable[[SourceResult], None] | None = None,
    database: Callable[[Source, SourceResult], None] | None = None,
    urls_only: bool = False,
    ignored: Callable[[Path], bool] | None = None,
) -> IngestReport:
    """Ingest each source into every target. `tagger(text, existing_tags)` auto-tags (None: only `tags`);
    `database(source, result)` handles an analytics source (rows rendered as dossiers) and fills `result`.
    `urls_only`: only http(s) URLs (a server never reads its own files or databases for a client). `ignored`:
    whether a local file is one the project leaves out (.ragsteadignore, `exclude`): it is refused, unread."""
    report = IngestReport()
    given_tags = [t for t in tags if t.strip()]
    bad = [t for t in given_tags if not normalize_tag(t)]
    fetch_options = fetch_options or FetchOptions()
    with make_client(fetch_options, transport) as client, egress.purpose("ingest fetch"):
        for given, folder_tags, feed in _expanded(sources, root, not urls_only, client, fetch_options, ignored):
            result = _refused_file(given, root, ignored) or _one(
                given, targets, client, [*given_tags, *folder_tags], bad, refresh, fetch_options, tagger,
                None if urls_only else root, database, urls_only, feed)
            report.results.append(result)
            if on_result is not None:
                on_result(result)
    return report


def _refused_file(given: str, root: Path | None, ignored: Callable[[Path], bool] | None) -> SourceResult | None:
    """A failed result for a local file the project ignores (`ingest PATH` read it and archived it where the
    index reads it, #45); None for anything else, which `_one` handles."""
    if ignored is None or given.strip().lower().startswith(("http://", "https://")):
        return None
    try:
        source = parse_source(given, root=root)
    except SourceError:
        return None  # `_one` says why
    if source.kind != "file" or not ignored(Path(source.url)):
        return None
    return SourceResult(source=redact(given), status="failed", kind="file", url=source.url,
                        reason="the project ignores this file (.ragsteadignore or the exclude setting): not ingested")


def _expanded(sources: Sequence[str], root: Path | None, local: bool, client: httpx.Client,
              options: FetchOptions, ignored: Callable[[Path], bool] | None = None
              ) -> list[tuple[str, list[str], str | None]]:
    """Each source with its own tags and the feed it came from: a bookmark export stands for its bookmarks,
    tagged with their folders (only where local files may be read: never for a server's client), a feed for
    its entries' pages (each remembering the feed, so `freshness --urls` can look for new entries)."""
    out: list[tuple[str, list[str], str | None]] = []
    for given in sources:
        export = bookmarks_file(given, root) if local else None
        if export is not None and ignored is not None and ignored(export):
            export = None  # an ignored bookmark export is refused as a file, below, not read for its links
        try:
            links = read_bookmarks(export) if export is not None else []
        except Exception:  # a malformed export: ingested (or refused, with the reason) as given, the rest go on
            links = []
        if links:  # a bookmark file without bookmarks (or not one after all) is ingested, or refused, as given
            out.extend((link, tags, None) for link, tags in links)
            continue
        entries = None
        if looks_like_feed(given):
            try:
                entries = feed_entries(fetch(client, given.strip(), options).data)
            except SourceError:
                entries = None  # ingested as given below, where the failure is reported
        out.extend([(link, [], given.strip()) for link in entries] if entries else [(given, [], None)])
    return out


def _one(given: str, targets: Sequence[IngestTarget], client: httpx.Client, tags: list[str], bad_tags: list[str],
         refresh: bool, options: FetchOptions, tagger: Callable[[str, list[str]], Tagging] | None,
         root: Path | None, database: Callable[[Source, SourceResult], None] | None,
         urls_only: bool, feed: str | None = None) -> SourceResult:
    # Shown as given, but with any password or token in it masked (a database URL, a URL with credentials).
    result = SourceResult(source=redact(given), status="failed")
    try:
        _check_given(given, bad_tags, urls_only)
        source = parse_source(given, root=root)
        result.kind, result.url = source.kind, source.url
        if source.kind == "database":
            _read_database(source, result, database)
            return result
        known = {target.name: target.documents_from_source(source.key) for target in targets}
        if not refresh and all(known.values()):
            _mark_duplicate(result, known)
            return result
        with source_deadline(options.deadline_seconds):  # one budget for all of a video's or post's requests
            extracted = fetch_extracted(source, client, options)
    except SourceError as exc:
        result.reason = str(exc)
        return result
    result.title = extracted.title
    fields = source_fields(extracted, source.key)
    # A feed entry ingested again on its own (`freshness --urls --apply`) keeps the feed it came from.
    feed = feed or _kept_feed(known)
    if feed:
        fields["feed"] = feed[:2000]
    new_hash = fields["content_hash"]  # hashed once, in source_fields
    extracted.tags = result.tags = _tags(extracted, result, tags, tagger, targets)
    for target in targets:
        result.targets[target.name] = _store_in(target, extracted, fields, result.tags, known[target.name],
                                                refresh=refresh, new_hash=new_hash)
    _settle(result)
    return result


def _check_given(given: str, bad_tags: list[str], urls_only: bool) -> None:
    """Refuse a source before anything is read: a bad tag, or anything but an http(s) URL for a server's client."""
    if bad_tags:
        raise SourceError(f"invalid tag {bad_tags[0]!r} (tags are 1-40 letters, digits, '-', '.', '_')")
    if urls_only and not given.strip().lower().startswith(("http://", "https://")):
        raise SourceError("only http(s) URLs can be ingested through the server")


def _read_database(source: Source, result: SourceResult,
                   database: Callable[[Source, SourceResult], None] | None) -> None:
    """An analytics source: `database` (the query's run) fills in the result, its URL without the password."""
    if database is None:
        raise SourceError("an analytics source needs --query (ragstead ingest clickhouse://… --query …)")
    result.url = None  # set by `database` to the URL without its password
    database(source, result)


def _mark_duplicate(result: SourceResult, known: dict[str, list[dict[str, Any]]]) -> None:
    """Every target has the source already (and no refresh was asked): the result names the first copy."""
    first = next(iter(known.values()))[0]
    result.status, result.doc_id, result.file_path = "duplicate", first["doc_id"], first["file_path"]
    result.title, result.tags = first.get("title"), list(first.get("tags") or [])
    result.targets = {name: {"status": "duplicate", "doc_id": docs[0]["doc_id"]} for name, docs in known.items()}


def _kept_feed(known: dict[str, list[dict[str, Any]]]) -> str | None:
    """The feed a stored copy of the source came from, if any copy remembers one."""
    return next((kept for docs in known.values() for doc in docs if (kept := (doc.get("source") or {}).get("feed"))),
                None)


def _tags(extracted: Extracted, result: SourceResult, tags: list[str],
          tagger: Callable[[str, list[str]], Tagging] | None, targets: Sequence[IngestTarget]) -> list[str]:
    """The tags the document gets: those given, merged with the tagger's suggestions (kept on the result), the
    first target's tags offered to it as the vocabulary."""
    tagging = None
    if tagger is not None:
        tagging = tagger(extracted.text(), targets[0].existing_tags() if targets else [])
        result.tagging = tagging.to_dict()
    return merge_tags(tags, tagging)


def _store_in(target: IngestTarget, extracted: Extracted, fields: dict[str, Any], tags: list[str],
              existing: list[dict[str, Any]], *, refresh: bool, new_hash: str) -> dict[str, Any]:
    """Store the document in one target, and what came of it there: a duplicate (kept, no refresh asked),
    unchanged (the same content), failed (with the reason), updated or added."""
    if existing and not refresh:
        return {"status": "duplicate", "doc_id": existing[0]["doc_id"]}
    if existing and all((d.get("source") or {}).get("content_hash") == new_hash for d in existing):
        return {"status": "unchanged", "doc_id": existing[0]["doc_id"]}
    try:
        doc = target.store_extracted(extracted, fields, tags, existing)
    except RagsteadError as exc:
        return {"status": "failed", "reason": one_line_reason(exc)}
    return {"status": "updated" if existing else "added", "doc_id": doc.get("doc_id"),
            "file_path": doc.get("file_path")}


def _settle(result: SourceResult) -> None:
    """The source's status from its targets': the strongest of those that did not fail (updated, added,
    unchanged, duplicate) with that target's document; when all failed, their reasons."""
    ok = [t for t in result.targets.values() if t["status"] != "failed"]
    if not ok:
        result.reason = "; ".join(f"{name}: {t['reason']}" for name, t in result.targets.items()) or "no target"
        return
    order = ("updated", "added", "unchanged", "duplicate")
    result.status = min((t["status"] for t in ok), key=order.index)
    best = next(t for t in ok if t["status"] == result.status)
    result.doc_id, result.file_path = best.get("doc_id"), best.get("file_path")

