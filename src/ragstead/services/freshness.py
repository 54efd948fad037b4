"""The freshness job: what would re-embedding change, written down before anything is done about it.

A run compares the files under the roots with the manifest of the last index run (size and mtime, then
SHA-256: the very comparison `index` makes, `indexing.build.diff_roots`), writes the refresh plan (one
JSON line per new, changed or deleted document) and appends its decisions and its outcome to the ledger.
Then it stops (a dry run), re-indexes exactly the planned files (`--apply`), or hands the plan to a hook
(`--exec`). `FreshnessService` (at the end) runs the job on a project: it holds the index lock around the
plan and the apply; the rest of the module does the comparing, the writing down and the hook.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from ragstead.core import egress
from ragstead.core.atomic import PRIVATE_FILE_MODE, make_private_folder, write_text_atomically
from ragstead.documents.ids import file_of, make_doc_id
from ragstead.errors import InvalidQueryError, RagsteadError, require_extra
from ragstead.filters import QueryFilters
from ragstead.indexing.build import (
    FileCandidate,
    IndexingOptions,
    IndexReport,
    ProgressHook,
    RootsDiff,
    diff_roots,
    index_paths,
)
from ragstead.indexing.lock import index_lock
from ragstead.indexing.roots import missing_roots
from ragstead.ingest.archive import content_hash
from ragstead.ingest.base import SourceError
from ragstead.ingest.feeds import feed_entries
from ragstead.ingest.fetch import FetchOptions, fetch, make_client
from ragstead.ingest.web import extract
from ragstead.services.indexer import Indexer
from ragstead.stores.base import DocumentRecord, ManifestEntry

# The files' freshness is the core's; the pages' (`--urls`) needs the ingest extra, so what parses and fetches a
# source is imported where a page is checked, after require_extra (#51.4).
if TYPE_CHECKING:
    from ragstead.services.ingest import IngestService

PLAN_FILE = "refresh_plan.jsonl"
LEDGER_FILE = "embedding_ledger.jsonl"
VALIDATORS_FILE = "url_validators.json"  # ETags kept between `--urls` runs
STATUSES = ("new", "changed", "deleted")
DEFAULT_EXEC_TIMEOUT = 3600.0
# After the timeout the hook's process group gets SIGTERM, then this long to exit before SIGKILL.
_TERM_GRACE = 5.0


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class PlanEntry:
    """One document that needs re-embedding. `path` for a file, `url` for an ingested page; `reason` when the
    file cannot be read (its stale chunks then go)."""

    status: str  # new | changed | deleted
    path: str | None = None
    url: str | None = None
    old_checksum: str | None = None  # SHA-256 hex of what the index holds (None for new)
    new_checksum: str | None = None  # SHA-256 hex of what is there now (None for deleted or unreadable)
    chunks: int = 0  # chunks the index holds for it now (0 for new)
    doc_id: str | None = None  # its id in the index; for a new file, the id it will get
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        where = {"url": self.url} if self.url is not None else {"path": self.path}
        out = {**where, "status": self.status, "old_checksum": self.old_checksum, "new_checksum": self.new_checksum,
               "chunks": self.chunks, "doc_id": self.doc_id}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class HookResult:
    """What the `--exec` hook did: its exit code (None if it never ran to an end), and why not."""

    command: str
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "exit_code": self.exit_code, "timed_out": self.timed_out,
                "seconds": round(self.seconds, 3), "error": self.error}


@dataclass
class FreshnessReport:
    """One freshness run. `to_dict()` is what `ragstead freshness --json` prints; `exit_code` is the cron
    contract: 0 fresh or brought up to date, 1 stale and left so (the plan is written), 2 an error."""

    run_id: str
    started_at: str
    roots: list[str]
    plan_path: str
    ledger_path: str
    full: bool = False
    entries: list[PlanEntry] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)  # unreadable files and folders, not documents
    missing_roots: list[str] = field(default_factory=list)
    outcome: str = "planned"  # fresh | planned | applied | exec | exec failed | error
    applied: dict[str, Any] | None = None
    hook: HookResult | None = None
    error: str | None = None
    finished_at: str | None = None

    @property
    def stale(self) -> bool:
        return bool(self.entries)

    @property
    def counts(self) -> dict[str, int]:
        counts = {status: sum(e.status == status for e in self.entries) for status in STATUSES}
        return counts | {"unchanged": self.unchanged}

    @property
    def exit_code(self) -> int:
        return {"fresh": 0, "applied": 0, "exec": 0, "planned": 1}.get(self.outcome, 2)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "started_at": self.started_at, "finished_at": self.finished_at,
                "roots": self.roots, "missing_roots": self.missing_roots, "full": self.full,
                "plan": self.plan_path, "ledger": self.ledger_path, "counts": self.counts,
                "outcome": self.outcome, "exit_code": self.exit_code,
                "entries": [e.to_dict() for e in self.entries], "skipped": self.skipped,
                "applied": self.applied, "exec": self.hook.to_dict() if self.hook else None, "error": self.error}


def _todo_entry(candidate: FileCandidate, known: dict[str, ManifestEntry],
                chunk_count: Callable[[str], int]) -> PlanEntry:
    """The plan entry of a file to index: new, or changed when the manifest knows it (under its path or one of
    the paths its chunks are stored under); a changed one counts the chunks it replaces."""
    entry = known.get(candidate.rel_path) or next((known[p] for p in candidate.stored if p in known), None)
    if entry is None:
        return PlanEntry("new", path=candidate.rel_path, new_checksum=candidate.file_hash,
                         doc_id=make_doc_id(candidate.id_path or candidate.rel_path, candidate.file_hash))
    return PlanEntry("changed", path=candidate.rel_path, old_checksum=entry.file_hash,
                     new_checksum=candidate.file_hash, doc_id=entry.doc_id,
                     chunks=sum(chunk_count(p) for p in candidate.stored or (candidate.rel_path,)))


def _removed_entry(path: str, entry: ManifestEntry, reasons: dict[str, str],
                   chunk_count: Callable[[str], int]) -> PlanEntry:
    """The plan entry of a manifest file the walk no longer indexes: deleted, or changed with the reason when it
    is still there but no longer readable (or now left out); its stale chunks go either way."""
    reason = reasons.get(file_of(path))  # a message of an mbox: its file's reason
    return PlanEntry("changed" if reason else "deleted", path=path, old_checksum=entry.file_hash,
                     chunks=chunk_count(path), doc_id=entry.doc_id, reason=reason)


class FreshnessRun:
    """One run's bookkeeping: the plan, the ledger lines and the outcome. Use `recorded()` around the work so
    that a run that fails still leaves its line in the ledger."""

    def __init__(self, plan_path: Path, ledger_path: Path, roots: Iterable[str], *, full: bool = False,
                 missing_roots: Iterable[str] = ()) -> None:
        self.report = FreshnessReport(run_id=f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}",
                                      started_at=_now(), roots=list(roots), plan_path=str(plan_path),
                                      ledger_path=str(ledger_path), full=full, missing_roots=list(missing_roots))
        self.plan_path = plan_path
        self.ledger_path = ledger_path
        self.diff: RootsDiff | None = None

    # -- planning ------------------------------------------------------------------------------------

    def plan_files(self, options: IndexingOptions, roots: tuple[str, ...], manifest: dict[str, ManifestEntry] | None,
                   chunk_count: Callable[[str], int]) -> None:
        """Compare the files under `roots` with `manifest` (None: no usable manifest, every file is new) and
        record one entry per document that needs re-embedding."""
        walk = IndexReport()
        # An imported root whose files are elsewhere is not a root of deleted files (indexing/roots.py).
        kept = [m.root for m in missing_roots(options.root, options.lock_file.parent, manifest or {})]
        self.report.missing_roots += [r for r in kept if r not in self.report.missing_roots]
        self.diff = diff_roots(options, roots, manifest or {}, walk, keep=frozenset(kept))
        known = manifest or {}
        reasons = {item["path"]: item["reason"] for item in walk.skipped}
        self.report.entries += [_todo_entry(candidate, known, chunk_count) for candidate in self.diff.todo]
        self.report.entries += [_removed_entry(path, known[path], reasons, chunk_count) for path in self.diff.removed]
        planned = {e.path for e in self.report.entries}
        self.report.skipped += [item for item in walk.skipped if item["path"] in walk.failed
                                and item["path"] not in planned]
        self.report.unchanged += walk.unchanged
        self.report.entries.sort(key=lambda e: (e.path or e.url or ""))

    def add_urls(self, plan: UrlPlan) -> None:
        """The entries `plan_urls` found (ingested pages that changed)."""
        self.report.entries.extend(plan.entries)
        self.report.unchanged += plan.unchanged
        self.report.skipped += plan.skipped

    @property
    def paths(self) -> list[str]:
        """The files `--apply` re-indexes: exactly those of the plan."""
        return [e.path for e in self.report.entries if e.path is not None]

    @property
    def urls(self) -> list[PlanEntry]:
        """The ingested pages `--apply` ingests again (a refresh)."""
        return [e for e in self.report.entries if e.url is not None]

    @property
    def touches(self) -> list[DocumentRecord]:
        """Manifest entries whose file has the same bytes and a new mtime: refreshed on `--apply` (nothing read)."""
        return list(self.diff.touches) if self.diff else []

    def write_plan(self) -> None:
        """Write the plan (empty when fresh, so a reader never acts on a stale one) and the decisions."""
        try:
            make_private_folder(self.plan_path.parent)
            write_text_atomically(self.plan_path, "".join(json.dumps(e.to_dict(), ensure_ascii=False) + "\n"
                                                          for e in self.report.entries))
        except OSError as exc:
            raise RagsteadError(f"cannot write the plan {self.plan_path}: {exc.strerror or exc}; "
                                "pass --plan PATH in a folder you can write") from None
        stamp = _now()
        self._append([{"type": "decision", "run_id": self.report.run_id, "time": stamp, **e.to_dict(),
                       "outcome": "planned"} for e in self.report.entries])
        self.report.outcome = "planned" if self.report.entries else "fresh"

    # -- acting on it ----------------------------------------------------------------------------------

    def applied(self, report: IndexReport | None = None, urls: list[dict[str, Any]] | None = None,
                page_chunks: tuple[int, int] = (0, 0)) -> None:
        """Record what `--apply` did: the index run over the planned files, and each page ingested again (its
        chunks, `page_chunks` (embedded, reused), count with the files')."""
        done = self.report.applied or {"added": [], "updated": [], "removed": [], "skipped": [], "urls": [],
                                       "chunks_embedded": 0, "chunks_reused": 0, "seconds": 0.0}
        if report is not None:
            done |= {"added": report.added, "updated": report.updated, "removed": report.removed,
                     "skipped": report.skipped, "chunks_embedded": report.chunks_embedded,
                     "chunks_reused": report.chunks_reused, "seconds": round(report.seconds, 3)}
        if urls is not None:
            done["urls"] = urls
        done["chunks_embedded"] += page_chunks[0]
        done["chunks_reused"] += page_chunks[1]
        self.report.applied = done
        self.report.outcome = "applied"

    def run_hook(self, command: str, timeout: float, root: Path) -> HookResult:
        """Run `command` with the plan's path in $RAGSTEAD_PLAN, bounded by `timeout` seconds; its output goes to
        stderr (stdout stays for --json)."""
        result = run_hook(command, timeout, root, {"RAGSTEAD_PLAN": str(self.plan_path),
                                                   "RAGSTEAD_RUN_ID": self.report.run_id,
                                                   "RAGSTEAD_ROOT": str(root)})
        self.report.hook = result
        self.report.outcome = "exec" if result.ok else "exec failed"
        return result

    @contextmanager
    def recorded(self) -> Iterator[FreshnessReport]:
        """Around a run's work: its line goes to the ledger however it ends (an error or Ctrl-C included)."""
        try:
            yield self.report
        except BaseException as exc:
            self.report.outcome = "error"
            message = "interrupted" if isinstance(exc, KeyboardInterrupt) else " ".join(str(exc).split())
            self.report.error = message or type(exc).__name__
            with contextlib.suppress(RagsteadError):  # the error being raised says more than a ledger failure
                self.finish()
            raise
        self.finish()

    def finish(self) -> FreshnessReport:
        """Append the run's line to the ledger."""
        report = self.report
        report.finished_at = _now()
        self._append([{"type": "run", "run_id": report.run_id, "started_at": report.started_at,
                       "finished_at": report.finished_at, "roots": report.roots, "full": report.full,
                       "plan": report.plan_path, "counts": report.counts, "outcome": report.outcome,
                       "exit_code": report.exit_code,
                       "applied": None if report.applied is None else {k: (len(v) if isinstance(v, list) else v)
                                                                       for k, v in report.applied.items()},
                       "exec": report.hook.to_dict() if report.hook else None, "error": report.error}])
        return report

    def _append(self, lines: list[dict[str, Any]]) -> None:
        """Append whole lines in one write to a private file (the ledger names private documents)."""
        if not lines:
            return
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
        try:
            make_private_folder(self.ledger_path.parent)
            fd = os.open(self.ledger_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            raise RagsteadError(f"cannot append to the ledger {self.ledger_path}: {exc.strerror or exc}; "
                                "pass --ledger PATH in a folder you can write") from None


@dataclass
class UrlPlan:
    """What `--urls` found: an entry per ingested document whose page changed, the documents unchanged, the
    URLs that could not be checked (with why), and the validators to keep for the next run."""

    entries: list[PlanEntry] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    validators: dict[str, dict[str, str]] = field(default_factory=dict)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)  # doc_id -> the document (for --apply)
    feeds: dict[str, IngestedFeed] = field(default_factory=dict)  # a new entry's URL -> its feed (for --apply)


@dataclass(frozen=True)
class IngestedFeed:
    """An RSS/Atom feed `ingest` took entries from, for one user: `--apply` ingests it again, with the tags all
    of its entries share (the ones given to `ingest`, not one entry's own topics)."""

    url: str
    user: str | None
    tags: tuple[str, ...]


def ingested_remote(document: dict[str, Any]) -> bool:
    """A document ingested from a web URL (pages, PDFs, videos, posts; not files or databases)."""
    url = (document.get("source") or {}).get("url") or ""
    return url.startswith(("http://", "https://"))


def plan_urls(documents: Iterable[dict[str, Any]], client: httpx.Client, options: FetchOptions,
              validators: dict[str, dict[str, str]]) -> UrlPlan:
    """Re-check each ingested URL once: a conditional GET for web pages (`If-None-Match` with the ETag kept from
    the last check of the same content, `If-Modified-Since` the time it was fetched), so an unchanged page costs
    a 304; otherwise the page is extracted as `ingest` extracts it and its content hash compared with the
    one the index holds. A fetch that fails is skipped with its reason: an archived copy outlives its page."""
    plan = UrlPlan()
    by_url: dict[str, list[dict[str, Any]]] = {}
    for doc in documents:
        by_url.setdefault(doc["source"]["url"], []).append(doc)
    for url, docs in sorted(by_url.items()):
        held = {d["source"].get("content_hash") for d in docs}
        try:
            fresh_hash, kept = _current_hash(url, docs[0]["source"], client, options,
                                             validators.get(url) if len(held) == 1 else None)
        except SourceError as exc:
            plan.skipped.append({"url": url, "reason": str(exc)})
            continue
        if kept:
            plan.validators[url] = kept
        for doc in docs:
            old = doc["source"].get("content_hash")
            if fresh_hash is None or fresh_hash == old:
                plan.unchanged += 1
                continue
            plan.documents[doc["doc_id"]] = doc
            plan.entries.append(PlanEntry("changed", url=url, old_checksum=old, new_checksum=fresh_hash,
                                          chunks=int(doc.get("chunks") or 0), doc_id=doc["doc_id"]))
    return plan


def plan_feeds(documents: Iterable[dict[str, Any]], client: httpx.Client, options: FetchOptions, plan: UrlPlan) -> None:
    """Fetch each feed ingested entries came from (`source.feed`) once per user, and plan every entry whose page
    that user has not ingested (by the same dedup key `ingest` uses) as new. A feed that cannot be fetched or
    read is skipped with its reason."""
    from ragstead.ingest.urls import parse_source

    have: dict[str | None, set[str]] = {}
    feeds: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for doc in documents:
        source, user = doc.get("source") or {}, doc.get("user_slug") or None
        have.setdefault(user, set()).add(str(source.get("key") or ""))
        if source.get("feed"):
            feeds.setdefault((source["feed"], user), []).append(doc)
    for (url, user), docs in sorted(feeds.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        try:
            links = feed_entries(fetch(client, url, options).data)
        except SourceError as exc:
            plan.skipped.append({"url": url, "reason": str(exc)})
            continue
        if links is None:
            plan.skipped.append({"url": url, "reason": "no longer an RSS or Atom feed"})
            continue
        shared = set.intersection(*(set(d.get("tags") or ()) for d in docs))
        ingested = IngestedFeed(url, user, tuple(sorted(shared)))
        for link in links:
            try:
                key = parse_source(link).key
            except SourceError:
                continue  # a link ingest would refuse too
            if key not in have.get(user, set()) and link not in plan.feeds:
                plan.feeds[link] = ingested
                plan.entries.append(PlanEntry("new", url=link))


def _current_hash(url: str, source: dict[str, Any], client: httpx.Client, options: FetchOptions,
                  kept: dict[str, str] | None) -> tuple[str | None, dict[str, str] | None]:
    """(the content hash of the page now, or None for "not modified"; the validators to keep, or None)."""
    from ragstead.ingest.pipeline import fetch_extracted
    from ragstead.ingest.urls import parse_source

    parsed = parse_source(url)
    if parsed.kind != "web":  # videos and posts come through their own APIs: fetched again, hashes compared
        extracted = fetch_extracted(parsed, client, options)
        return content_hash(extracted), None
    headers = {}
    if kept and kept.get("content_hash") == source.get("content_hash"):  # validators of the indexed content
        if kept.get("etag"):
            headers["If-None-Match"] = kept["etag"]
        if kept.get("last_modified"):
            headers["If-Modified-Since"] = kept["last_modified"]
    if "If-Modified-Since" not in headers and source.get("fetched_at"):
        with contextlib.suppress(ValueError):
            fetched_at = datetime.fromisoformat(source["fetched_at"].replace("Z", "+00:00"))
            headers["If-Modified-Since"] = format_datetime(fetched_at.astimezone(UTC), usegmt=True)
    fetched = fetch(client, parsed.url, options, headers=headers)
    if fetched.status == 304:
        return None, kept
    fresh = content_hash(extract(fetched, parsed.url, parsed.source_id))
    response = {k.lower(): v for k, v in fetched.headers.items()}
    validators = {"content_hash": fresh, "etag": response.get("etag", ""),
                  "last_modified": response.get("last-modified", "")}
    return fresh, validators if validators["etag"] or validators["last_modified"] else None


def read_validators(path: Path) -> dict[str, dict[str, str]]:
    """The ETags and Last-Modified dates kept from the last `--urls` run (a damaged file: start over)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_validators(path: Path, validators: dict[str, dict[str, str]]) -> None:
    make_private_folder(path.parent)
    write_text_atomically(path, json.dumps(validators, indent=1, sort_keys=True))


def check_hook_command(command: str) -> list[str]:
    """The hook's argv, split as a shell would (no pipes: wrap those in `sh -c '...'`)."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise InvalidQueryError(f"--exec {command!r} cannot be split into a command: {exc}") from None
    if not argv:
        raise InvalidQueryError("--exec needs a command, e.g. --exec 'python embed.py'")
    return argv


def run_hook(command: str, timeout: float, cwd: Path, env: dict[str, str]) -> HookResult:
    """Run the hook in a process group of its own; past `timeout` the whole group is stopped (SIGTERM, then
    SIGKILL), so a hook that hangs, and whatever it started, never outlives the run."""
    argv = check_hook_command(command)
    result = HookResult(command)
    started = time.monotonic()
    try:
        process = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                   stdout=_stderr_fd(), start_new_session=True)
    except OSError as exc:
        result.error = f"cannot run {argv[0]!r}: {exc.strerror or exc}"
        return result
    try:
        result.exit_code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        result.timed_out = True
        result.error = f"still running after {timeout:g}s (--exec-timeout); stopped"
        _stop_group(process)
    except BaseException:  # Ctrl-C: the hook goes too, then the interrupt carries on
        _stop_group(process)
        raise
    finally:
        result.seconds = time.monotonic() - started
    if result.exit_code not in (0, None) and result.error is None:
        result.error = f"exited with code {result.exit_code}"
    return result


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, _TERM_GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _stderr_fd() -> int | None:
    """Our stderr's file descriptor for the hook's stdout, or None (inherit) when stderr has none (captured)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _check_actions(apply: bool, exec_command: str | None, exec_timeout: float) -> None:
    """Refuse a `freshness` call whose actions cannot run: both --apply and --exec, a hook that does not split
    into a command, a timeout not above zero."""
    if apply and exec_command is not None:
        raise InvalidQueryError("--apply and --exec exclude each other: ragstead re-indexes the plan, or the "
                                "hook does")
    if exec_command is not None:
        check_hook_command(exec_command)
    if not exec_timeout > 0:
        raise InvalidQueryError(f"--exec-timeout must be above 0 seconds, got {exec_timeout:g}")


class FreshnessService:
    """The freshness job on one project: plan, ledger, then nothing, `apply` or a hook."""

    def __init__(self, indexer: Indexer, ingester: Callable[[], IngestService]) -> None:
        """`ingester`: the ingest service, built when pages are ingested again (it needs the ingest extra)."""
        self.indexer = indexer
        self._ingester = ingester
        self.runtime = indexer.runtime

    @property
    def ingester(self) -> IngestService:
        return self._ingester()

    def freshness(self, paths: Sequence[str | Path] | None = None, *, plan: str | Path | None = None,
                  ledger: str | Path | None = None, apply: bool = False, exec_command: str | None = None,
                  exec_timeout: float = DEFAULT_EXEC_TIMEOUT, full: bool = False, urls: bool = False,
                  wait: float = 0.0, progress: ProgressHook | None = None,
                  transport: httpx.BaseTransport | None = None) -> FreshnessReport:
        """Compare the files under `paths` (default: the configured roots) with the manifest of the last index
        run, write the refresh plan (`plan`, default `kb/rag/refresh_plan.jsonl`) and append the decisions
        and the run to the ledger (`ledger`, default `kb/rag/embedding_ledger.jsonl`). Then: nothing (a dry
        run), `apply` (re-index exactly the planned files), or `exec_command` (a hook, with the plan's path in
        $RAGSTEAD_PLAN, stopped after `exec_timeout` seconds). `full`: no previous manifest, every file is new.
        `urls`: also re-check the pages `ingest` fetched (conditional GET through `transport`, default the
        network), and `apply` ingests the changed ones again. The plan and the apply of files hold the index
        lock (`wait` seconds for it, like `index`); the network is used outside it."""
        _check_actions(apply, exec_command, exec_timeout)
        rt, settings = self.runtime, self.runtime.settings
        roots, missing = self._roots(paths)
        folder = settings.db_file.parent
        run = FreshnessRun(settings.resolve(str(plan)) if plan else folder / PLAN_FILE,
                           settings.resolve(str(ledger)) if ledger else folder / LEDGER_FILE, roots,
                           full=full, missing_roots=missing)
        options = settings.indexing(roots)
        transport = transport or rt.transport
        with run.recorded():
            with egress.recording(self.runtime.egress_file):
                pages = self._plan_urls(transport) if urls else None
            if pages is not None:
                run.add_urls(pages)
            self._plan_and_apply_files(run, options, roots, full=full, apply=apply, wait=wait, progress=progress)
            if apply and pages is not None and run.urls:
                refreshed, chunks = self._refresh_pages(run, pages, wait, transport)
                run.applied(urls=refreshed, page_chunks=chunks)
            if exec_command is not None and run.report.entries:
                run.run_hook(exec_command, exec_timeout, rt.root)
        return run.report

    def _roots(self, paths: Sequence[str | Path] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The roots to compare (`paths`, else the configured roots that exist) and the configured ones missing."""
        if paths:
            return self.indexer.existing_roots(paths), ()
        settings = self.runtime.settings
        roots = tuple(r for r in settings.roots if (self.runtime.root / r).is_dir())
        return roots, tuple(r for r in settings.roots if r not in roots)

    def _plan_and_apply_files(self, run: FreshnessRun, options: IndexingOptions, roots: tuple[str, ...], *,
                              full: bool, apply: bool, wait: float, progress: ProgressHook | None) -> None:
        """Plan the files under the index lock (the manifest of a completed run, not one mid-way) and write the
        plan; with `apply`, re-index exactly the planned files and refresh the touched ones in the same hold."""
        rt = self.runtime
        with index_lock(rt.settings.lock_file, wait):
            run.plan_files(options, roots, None if full else self._previous_manifest(), self._chunk_count)
            run.write_plan()
            if apply and (run.paths or run.touches):
                with rt.writer() as store, self.indexer.guarded(store):
                    if run.paths:  # exactly the plan: no other file is read
                        run.applied(index_paths(options, store, rt.load_embedder(store), run.paths,
                                                take_lock=False, progress=progress))
                    if run.touches:  # same bytes, new mtime: the manifest learns it, nothing is read
                        store.apply([], [], run.touches)

    def _previous_manifest(self) -> dict[str, ManifestEntry]:
        """The manifest of the last index run, or a clear error when there is none or it cannot be read."""
        rt = self.runtime
        if not rt.exists():
            raise RagsteadError(f"no previous manifest: there is no index at {rt.location} yet; run "
                                "`ragstead index` first, or plan every file as new with --full")
        try:
            with rt.lock:
                return rt.store.manifest()
        except Exception as exc:  # a damaged file: the store's own error, or the driver's
            raise RagsteadError(f"the manifest of the last index run cannot be read ({' '.join(str(exc).split())}); "
                                "rebuild the index with `ragstead index --rebuild`, or plan every file as new "
                                "with --full") from exc

    def _plan_urls(self, transport: httpx.BaseTransport | None) -> UrlPlan:
        """`freshness --urls`: every document ingested from a web URL, checked again (`plan_urls`)."""
        require_extra("ingest")
        if not self.runtime.exists():
            return UrlPlan()
        pages = [d for d in self._all_documents() if ingested_remote(d)]
        settings = self.runtime.settings
        options = FetchOptions(connect_seconds=settings.fetch_connect_seconds,
                               read_seconds=settings.fetch_read_seconds, max_bytes=settings.fetch_max_mb << 20,
                               deadline_seconds=settings.fetch_deadline_seconds)
        kept_file = settings.db_file.parent / VALIDATORS_FILE  # private: it names the pages users ingested
        kept = read_validators(kept_file)
        with make_client(options, transport) as client, egress.purpose("freshness check"):
            plan = plan_urls(pages, client, options, kept)
            plan_feeds(pages, client, options, plan)
        if plan.validators:
            write_validators(kept_file, kept | plan.validators)
        return plan

    def _refresh_pages(self, run: FreshnessRun, pages: UrlPlan, wait: float,
                       transport: httpx.BaseTransport | None) -> tuple[list[dict[str, Any]], tuple[int, int]]:
        """`--apply` for pages: each changed one ingested again (`ingest --refresh`) for the user who has it, with
        the tags it had. Returns a line per page and the chunks (embedded, reused) it took."""
        done = []
        landing = self.ingester.landing
        embedded, reused = landing.chunks_embedded, landing.chunks_reused
        from_feeds: dict[IngestedFeed, dict[str, Any]] = {}  # a feed ingested again: its entries' results by URL
        for entry in run.urls:
            feed = pages.feeds.get(entry.url or "") if entry.status == "new" else None
            if feed is not None:  # the feed again, so its new entries remember it; the old ones are duplicates
                if feed not in from_feeds:
                    report = self.ingester.ingest([feed.url], user=feed.user, tags=feed.tags, wait=wait,
                                                  transport=transport)
                    from_feeds[feed] = {url: r for r in report.results for url in (r.source, r.url) if url}
                result = from_feeds[feed].get(entry.url)
                done.append({"url": entry.url, "doc_id": result.doc_id if result else None,
                             "status": result.status if result else "failed",
                             "reason": result.reason if result else "no longer in its feed",
                             "file_path": result.file_path if result else None})
                continue
            doc = pages.documents[entry.doc_id or ""]
            result = self.ingester.ingest([entry.url or ""], refresh=True, user=doc.get("user_slug") or None,
                                          tags=doc.get("tags") or (), wait=wait, transport=transport).results[0]
            done.append({"url": entry.url, "doc_id": entry.doc_id, "status": result.status, "reason": result.reason,
                         "file_path": result.file_path})
        return done, (landing.chunks_embedded - embedded, landing.chunks_reused - reused)

    def _all_documents(self) -> list[dict[str, Any]]:
        """Every document of the index, private and public, in pages of a thousand."""
        rt = self.runtime
        found: dict[str, dict[str, Any]] = {}
        for public in (False, True):
            scope = QueryFilters.build(public_only=public, include_archive=True)
            offset = 0
            while True:
                with rt.lock:
                    page = rt.store.list_documents(scope, 1000, offset)
                found.update((d["doc_id"], d) for d in page)
                if len(page) < 1000:
                    break
                offset += 1000
        return list(found.values())

    def _chunk_count(self, path: str) -> int:
        doc = self.runtime.document(path=path)
        return int(doc.get("chunks") or 0) if doc else 0
