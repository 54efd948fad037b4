"""The ingest service: sources fetched, extracted, archived and landed in one or more knowledge bases.

It stands on a `Runtime` (this project) and opens a runtime of its own for each configured `[targets.NAME]`
an ingest names, closed when the call ends. The embedder shared by the targets of one call is a local of
that call, handed to each target, never state on a shared object.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from ragstead.answer.base import AnswerProvider
from ragstead.config import load_settings
from ragstead.core import egress
from ragstead.core.atomic import make_private_folder
from ragstead.documents.formats.mail import ADDRESS_TAG_PREFIXES
from ragstead.documents.ids import fs_path
from ragstead.documents.sandbox import load_isolated
from ragstead.documents.sources import sidecar_path
from ragstead.embeddings.base import Embedder
from ragstead.embeddings.cache import PassageMemo
from ragstead.errors import ConfigError, LoadError, RagsteadError, one_line_reason
from ragstead.filters import QueryFilters
from ragstead.indexing.ignore import IgnoreRules
from ragstead.ingest.archive import archive_path, write_archive
from ragstead.ingest.base import Extracted
from ragstead.ingest.dossiers import render_dossiers
from ragstead.ingest.fetch import FetchOptions
from ragstead.ingest.pipeline import IngestReport, SourceResult, ingest_sources
from ragstead.ingest.tagging import Tagging
from ragstead.ingest.tagging import auto_tags as auto_tag
from ragstead.ingest.urls import Source
from ragstead.services.indexer import Indexer
from ragstead.services.landing import Landing
from ragstead.services.runtime import Runtime


class IngestService:
    """Ingests into the project of `landing` and its configured targets. `providers` gives the answerer
    chain (the LLMs that suggest tags)."""

    def __init__(self, landing: Landing, providers: Callable[[], list[AnswerProvider]]) -> None:
        self.landing = landing
        self.runtime = landing.runtime
        self.providers = providers

    def ingest(self, sources: Sequence[str], *, tags: Sequence[str] = (), targets: Sequence[str] = (),
               user: str | None = None, refresh: bool = False, allow_private: bool = True,
               auto_tags: bool | None = None, transport: httpx.BaseTransport | None = None, wait: float = 30.0,
               on_result: Callable[[SourceResult], None] | None = None, query: str | None = None,
               template: str | Path | None = None, group_by: str | None = None,
               urls_only: bool = False) -> IngestReport:
        """Fetch, extract, archive and index each source (web page, PDF or text URL, YouTube video, tweet, local
        file) into this knowledge base and/or the named `targets` ("default" = this one). A source already
        ingested is a `duplicate` without network or embedding work; `refresh` re-fetches and replaces the
        stored copy only if its content changed. Failures are per source (and per target); the rest go on.
        `allow_private=False` refuses URLs on loopback/private addresses (the HTTP API's SSRF guard), and
        `urls_only` anything but http(s) URLs (the API never reads the server's own files for a client).

        An analytics source (clickhouse://, postgresql://, sqlite:///) with `query` renders its rows as
        dossiers under `artifacts/dossiers/<user>/` (one per row, or per `group_by` value; `template`: Jinja2)
        and indexes them; with `user`, only that user's rows."""
        rt = self.runtime
        only_user = user
        user = user or rt.settings.owner_slug
        QueryFilters.build(user_slug=user)  # a valid slug, or InvalidQueryError
        landings = self._targets(targets)
        embedder = PassageMemo(rt.load_embedder(rt.store if rt.exists() else None))
        chosen: list[IngestTarget] = []
        for name, landing in landings.items():  # one embedding per passage for every target on the same model
            target = IngestTarget(landing, name, user, wait, scoped=only_user is not None)
            chosen.append(target)
            try:
                own = landing.runtime.load_embedder(landing.runtime.store if landing.runtime.exists() else None)
            except RagsteadError as exc:  # a target that cannot be opened: each source fails there, nowhere else
                target.broken = one_line_reason(exc)
                continue
            target.embedder = embedder if own.name == embedder.name and own.dim == embedder.dim else None
        use_tags = rt.settings.auto_tags if auto_tags is None else auto_tags
        providers = [p for p in self.providers() if p.name != "extractive"] if use_tags else []

        def tagger(text: str, existing: list[str]) -> Tagging:
            return auto_tag(text, existing, embedder, providers)

        settings = rt.settings
        options = FetchOptions(connect_seconds=settings.fetch_connect_seconds, read_seconds=settings.fetch_read_seconds,
                               max_bytes=settings.fetch_max_mb << 20, deadline_seconds=settings.fetch_deadline_seconds,
                               allow_private=allow_private or settings.allow_private_urls)
        try:
            with egress.recording(rt.egress_file):  # privacy: every fetch that leaves the machine is logged
                return ingest_sources(
                    sources, chosen, tags=tags, refresh=refresh, fetch_options=options,
                    transport=transport or rt.transport, tagger=tagger if use_tags else None, root=rt.root,
                    on_result=on_result,
                    database=(lambda source, result: _ingest_dossiers(chosen, source, result, query, template,
                                                                      group_by, only_user, wait)) if query else None,
                    urls_only=urls_only, ignored=self._ignored)
        finally:
            for name, landing in landings.items():
                if name != "default":
                    landing.runtime.close()

    def _ignored(self, path: Path) -> bool:
        """Whether a local file is one this project leaves out: by its own path, or (a symlink) by where it
        leads, when either is inside the project."""
        rt = self.runtime
        root = rt.root.resolve()
        rules = IgnoreRules(root, rt.settings.indexing().exclude)
        for candidate in {Path(os.path.abspath(path)), Path(os.path.realpath(path))}:
            if candidate.is_relative_to(root) and rules.ignored(candidate.relative_to(root).as_posix()):
                return True
        return False

    def _targets(self, names: Sequence[str]) -> dict[str, Landing]:
        """Where an ingest writes: this project ("default") and the configured `[targets.NAME]`, each opened
        with this runtime's transport and given embedder."""
        rt = self.runtime
        wanted = list(dict.fromkeys(n.strip() for n in names if n.strip())) or ["default"]
        known = {t.name: t for t in rt.settings.targets}
        out: dict[str, Landing] = {}
        for name in wanted:
            if name == "default":
                out[name] = self.landing
                continue
            target = known.get(name)
            if target is None:
                raise ConfigError(f"no target {name!r}; define it in ragstead.toml as [targets.{name}] with root = "
                                  f"\"path\" (known: {', '.join(['default', *known]) })")
            root = rt.settings.resolve(target.root)
            if not root.is_dir():
                raise ConfigError(f"target {name}: its root {root} is not a folder")
            settings = load_settings(root).with_overrides(store=target.store or None)
            out[name] = Landing(Indexer(Runtime(settings, transport=rt.transport, embedder=rt.given_embedder)))
        return out


class IngestTarget:
    """One knowledge base an ingest call writes to (ingest/pipeline.py's IngestTarget), for that call only:
    `embedder` is the call's shared one (None: the target's own model), `broken` why it cannot be opened."""

    def __init__(self, landing: Landing, name: str, user: str, wait: float, scoped: bool = False) -> None:
        self.landing, self.runtime, self.name, self.user, self.wait = landing, landing.runtime, name, user, wait
        self.scoped = scoped  # a call for one user (an API key's): it sees that user's scope, not the whole index
        self.broken: str | None = None
        self.embedder: Embedder | None = None

    def documents_from_source(self, key: str) -> list[dict[str, Any]]:
        """This user's own copies only: dedup is per user, so another user's copy (its path, its title, even
        that it exists) never shows through an ingest."""
        if self.broken or not self.runtime.exists():
            return []
        with self.runtime.lock:
            found = self.runtime.store.documents_from_source(key)
        home = self.runtime.settings.user_folder(self.user)
        return [d for d in found if d["user_slug"] == self.user and d["is_private"]
                and d["file_path"].startswith(f"{home}/" if home else "")]

    def existing_tags(self) -> list[str]:
        """The tags an auto-tagger may pick from (and an LLM tagger is shown): every tag of the index for the
        operator's own call; for one user's call, that user's private tags and the public ones only, so another
        user's private tags never reach this user's document or a remote model. The e-mail address tags
        (`from:…`, `to:…`) are facets of a message, not topics: never offered."""
        if self.broken or not self.runtime.exists():
            return []
        private = QueryFilters.build(self.user) if self.scoped else QueryFilters.build(include_archive=True)
        scopes = [private, QueryFilters.build(public_only=True, include_archive=True)]
        with self.runtime.lock:
            tags = dict.fromkeys(tag for scope in scopes for tag in self.runtime.store.tag_counts(scope))
        return [tag for tag in tags if not tag.startswith(ADDRESS_TAG_PREFIXES)]

    def store_extracted(self, extracted: Extracted, source: dict[str, Any], tags: list[str],
                        replaces: list[dict[str, Any]]) -> dict[str, Any]:
        """Archive one extracted source under `kb/users/<user>/ingested/` (the owner of a personal project:
        `ingested/`) and index it, all or nothing: the
        archive is checked by the loader before it lands, and if indexing fails the files are put back as they
        were (the old archive, or none). Documents it replaces (a refresh) are removed in the same run."""
        if self.broken:
            raise RagsteadError(self.broken)
        rt = self.runtime
        folder = rt.root / rt.settings.user_folder(self.user) / "ingested"  # personal: <root>/ingested
        target = archive_path(folder, extracted)
        options = rt.settings.indexing((*rt.settings.roots, "kb"))
        staged = folder / f".ingest-{uuid.uuid4().hex}"
        make_private_folder(staged)
        try:
            written = write_archive(staged / target.name, extracted, source, tags)
            try:
                load_isolated(staged / target.name, options.load_limits)  # unreadable content never lands
            except LoadError as exc:
                raise LoadError(str(exc).replace(f"{staged / target.name}", target.name)) from None
            old = [p for d in replaces for p in (fs_path(rt.root, d["file_path"]),
                                                 sidecar_path(fs_path(rt.root, d["file_path"])))]
            make_private_folder(target.parent)
            moves = [(path, target.parent / path.name) for path in written]
            rels = list(dict.fromkeys([rt.relative_path(target), *(d["file_path"] for d in replaces)]))
            self.landing.install(moves, [p for p in old if p not in {to for _, to in moves}], staged, rels, options,
                                 self.wait, self.embedder)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        return rt.document(path=rt.relative_path(target)) or {}


def _ingest_dossiers(targets: list[IngestTarget], source: Source, result: SourceResult, query: str,
                     template: str | Path | None, group_by: str | None, user: str | None, wait: float) -> None:
    """Render the query's rows as dossiers in each target and index them (ingest/dossiers.py). `template`:
    Jinja2 text, or a file (a Path)."""
    for target in targets:
        rt = target.runtime
        try:
            run = render_dossiers(source.url, query=query, root=rt.root, template=template, group_by=group_by,
                                  user=user, connect_timeout=rt.settings.fetch_connect_seconds)
            result.url = run.source  # without the password
            report = target.landing.indexer.index_files(run.paths, wait, target.embedder,
                                                        roots=(*rt.settings.roots, "artifacts"))
        except RagsteadError as exc:
            result.targets[target.name] = {"status": "failed", "reason": one_line_reason(exc)}
            continue
        status = "updated" if report.updated else "added" if report.added else "unchanged"
        result.targets[target.name] = {"status": status, "rows": run.rows, "dossiers": run.paths,
                                       "skipped": [{"row": s.row, "reason": s.reason} for s in run.skipped]}
    ok = [t for t in result.targets.values() if t["status"] != "failed"]
    if ok:
        result.status = ok[0]["status"]
        result.title = f"{len(ok[0]['dossiers'])} dossiers from {ok[0]['rows']} rows"
    else:
        result.reason = "; ".join(t["reason"] for t in result.targets.values())
