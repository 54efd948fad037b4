"""`KnowledgeBase`: the one composition root. The CLI, the HTTP API, `sanity`, `eval` and the benches call it.

It reads the project's `Settings` and hands each layer its own narrow options: the store it opens from the
store setting, one embedder (the index's model) behind one query-vector cache, the project's path rules
for every scope check, and the answerer chain. Reads share one store connection and take turns (a lock),
so one KnowledgeBase can serve many threads; writes open a store of their own, as another process would,
so a long index run never holds up searches.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import tempfile
import threading
import time
import tomllib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from ragstead import egress
from ragstead.answer.ask import (
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MIN_SIMILARITY,
    Answer,
    AskOptions,
    UnitVectorCache,
    answer,
    gather,
)
from ragstead.answer.ask import providers_from_env as _providers_from_env
from ragstead.answer.base import AnswerProvider, Context
from ragstead.answer.consent import consent_hint, remote_names
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.prompt import catalog as template_catalog
from ragstead.answer.prompt import load_template
from ragstead.answer.tools import ToolRegistry
from ragstead.atomic import PRIVATE_FILE_MODE, make_private_folder
from ragstead.chunking import ChunkingOptions
from ragstead.config import CONFIG_FILE, Settings, default_owner, load_settings, save_settings
from ragstead.documents.ids import fs_path
from ragstead.documents.loaders import LOADERS, is_supported, load_document
from ragstead.documents.metadata import derive_metadata
from ragstead.documents.secrets import reveal as reveal_secrets
from ragstead.documents.sources import sidecar_path
from ragstead.embeddings.base import Embedder
from ragstead.embeddings.cache import PassageMemo, QueryVectorCache
from ragstead.embeddings.catalog import DEFAULT_MODEL, catalog_rows, cross_encoder_for, embedder_for
from ragstead.errors import (
    ConfigError,
    DocumentNotFoundError,
    InvalidQueryError,
    LoadError,
    RagsteadError,
    UnsupportedFileError,
    one_line_reason,
)
from ragstead.evaluation.cases import EvalCase, load_beir, load_jsonl_cases
from ragstead.evaluation.runner import BEIR_ROOT, EvalSettings, format_table, run_eval
from ragstead.filters import QueryFilters, clean_text
from ragstead.freshness import (
    DEFAULT_EXEC_TIMEOUT,
    LEDGER_FILE,
    PLAN_FILE,
    VALIDATORS_FILE,
    FreshnessReport,
    FreshnessRun,
    UrlPlan,
    check_hook_command,
    ingested_remote,
    plan_urls,
    read_validators,
    write_validators,
)
from ragstead.guard import SECRET_FILE_PATTERNS
from ragstead.indexing.build import (
    IndexingOptions,
    IndexReport,
    ProgressHook,
    TextRecord,
    Within,
    index_paths,
    index_records,
    index_roots,
    secret_counts,
    secrets_checked,
)
from ragstead.indexing.ignore import IGNORE_FILE, IgnoreRules
from ragstead.indexing.ignore import STARTER as IGNORE_STARTER
from ragstead.indexing.lock import index_lock
from ragstead.ingest.archive import archive_path, write_archive
from ragstead.ingest.base import Extracted
from ragstead.ingest.dossiers import render_dossiers
from ragstead.ingest.fetch import FetchOptions, make_client
from ragstead.ingest.pipeline import IngestReport, SourceResult, ingest_sources
from ragstead.ingest.tagging import Tagging
from ragstead.ingest.tagging import auto_tags as auto_tag
from ragstead.ingest.urls import Source
from ragstead.memory.files import FILES as MEMORY_FILES
from ragstead.memory.files import RememberResult
from ragstead.memory.files import remember as remember_fact
from ragstead.retrieval.passages import MAX_CHUNKS as MAX_PASSAGE_CHUNKS
from ragstead.retrieval.passages import Passage, read_passage
from ragstead.retrieval.rerank import (
    CrossEncoderReranker,
    Reranker,
    SentenceMaxSimReranker,
    fill_sentence_vectors,
)
from ragstead.retrieval.search import MAX_QUERY_CHARS, MODES, SearchOptions, SearchResult, choose_fusion, search
from ragstead.stores import permissions
from ragstead.stores.base import ManifestEntry, Store
from ragstead.stores.factory import StoreSpec, is_chroma_spec, is_postgres_url
from ragstead.stores.migrate import MigrationReport, copy_store
from ragstead.watch import DEFAULT_DEBOUNCE, FolderFollower, WatchBatch

Progress = ProgressHook
UPLOAD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,119}$")
SUPPORTED_SUFFIXES = tuple(sorted(LOADERS))


class KnowledgeBase:
    """A project's index and everything that reads or writes it. Use as a context manager, or `close()` it."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: Store | None = None,
        embedder: Embedder | None = None,
        providers: Sequence[AnswerProvider] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`store`, `embedder` and `providers` replace what the settings would build (tests, embedding hosts);
        `transport` is the HTTP transport the LLM answerers use (default: the network)."""
        self.settings = settings
        self._spec = settings.store_spec()
        self._given_store = store
        self._store = store
        self._embedder = QueryVectorCache(embedder, settings.embed_cache_size) if embedder is not None else None
        self._given_embedder = embedder  # also the embedder of the ingest targets this one opens
        self._providers = list(providers) if providers is not None else None
        self._transport = transport
        self._reranker: Reranker | None = None
        self._unit_vectors: UnitVectorCache | None = None  # ask's sentence vectors (answer/gate.py)
        self._lock = threading.RLock()
        self._ingest_embedder: Embedder | None = None  # set for one ingest call: embeds once for all targets

    # -- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the store (a given store stays open: its owner closes it)."""
        with self._lock:
            if self._store is not None and self._store is not self._given_store:
                self._store.close()
            self._store = None if self._given_store is None else self._given_store

    @property
    def root(self) -> Path:
        return self.settings.root

    @property
    def api_keys_file(self) -> Path:
        """Where `ragstead keys` keeps the HTTP API's key hashes (beside the index)."""
        return self.settings.db_file.parent / "api_keys.json"

    @property
    def location(self) -> str:
        """Where the index lives, safe to print (no password)."""
        return self._spec.describe()

    def exists(self) -> bool:
        """Whether the index is there already (a server store is taken to exist)."""
        return self._given_store is not None or self._spec.exists()

    def create(self) -> None:
        """Create the index, empty, if there is none yet."""
        with self._writer():
            pass

    @property
    def store(self) -> Store:
        """The read store, opened on first use; a missing index is an error that says to run `index`."""
        with self._lock:
            if self._store is None:
                self._store = self._spec.open(must_exist=True)
            return self._store

    @property
    def embedder(self) -> Embedder:
        """The one embedder of this knowledge base (the index's model unless `model` is set), with its
        query-vector cache. Loaded on first use."""
        return self._load_embedder(self.store if self.exists() else None)

    def _load_embedder(self, store: Store | None) -> Embedder:
        """Load the model once: the configured one, else the one the index in `store` was built with, else
        the default."""
        with self._lock:
            if self._embedder is None:
                inner = embedder_for(self.settings.model, store, max_tokens=self.settings.max_tokens,
                                     batch_size=self.settings.embed_batch_size,
                                     allow_download=self.settings.allow_download)
                self._embedder = QueryVectorCache(inner, self.settings.embed_cache_size)
            return self._embedder

    @contextmanager
    def _writer(self) -> Iterator[Store]:
        """A store for one write: the given store, else a connection of its own (created if missing)."""
        if self._given_store is not None:
            with self._lock:
                yield self._given_store
            return
        store = self._spec.open()
        try:
            yield store
        finally:
            store.close()

    # -- writing -------------------------------------------------------------------------------------

    def index(self, paths: Sequence[str | Path] | None = None, *, rebuild: bool = False, wait: float = 0.0,
              progress: Progress | None = None) -> IndexReport:
        """Bring the index in line with the files under `paths` (folders inside the project; default: the
        configured roots). Incremental: only new or changed files are embedded. `rebuild` re-embeds all."""
        roots = self._existing_roots(paths)
        if rebuild:
            return self._rebuild(roots, wait, progress)
        with self._writer() as store, self._guarded(store):
            report = index_roots(self.settings.indexing(roots), store, self._load_embedder(store), roots, False,
                                 wait, progress)
            self._fill_sentence_vectors(store, report, progress)
        return report

    def _fill_sentence_vectors(self, store: Store, report: IndexReport, progress: Progress | None = None) -> None:
        """With `sentence_vectors` on: embed the sentences of every chunk that has none stored yet (the
        re-ranker's, retrieval/rerank.py), timed apart from the index run; `progress` counts those chunks."""
        if not self.settings.sentence_vectors:
            return
        started = time.perf_counter()
        report.sentence_vector_chunks = fill_sentence_vectors(store, self._load_embedder(store), progress)
        report.sentence_vector_seconds = time.perf_counter() - started

    @contextmanager
    def _guarded(self, store: Store) -> Iterator[None]:
        """Every write: the settings guard before it; after it, the chunking recorded (a new index) and the
        lexical statistics settled (deleted chunks no longer count in BM25)."""
        self._check_chunking(store)
        yield
        if store.chunking() is None:
            store.record_chunking(self.settings.chunking.describe())
        store.settle_lexical()
        self._fill_sentence_vectors(store, IndexReport())  # the chunks this write added (index() did its own)

    def _check_chunking(self, store: Store) -> None:
        """The settings guard: an index is cut one way. New chunking settings on an existing index are refused
        with the command that applies them, never mixed in silently."""
        recorded, wanted = store.chunking(), self.settings.chunking.describe()
        if recorded is None and store.embed_model() is not None:
            # Written before the index recorded its chunking: by the defaults, unless someone passed flags.
            recorded = ChunkingOptions().describe()
            store.record_chunking(recorded)
        if recorded is not None and recorded != wanted:
            raise ConfigError(f"the index was cut with {recorded}, but the settings now say {wanted}; run "
                              "`ragstead index --rebuild` to re-cut every document that way, or set them back")

    def _existing_roots(self, paths: Sequence[str | Path] | None) -> tuple[str, ...]:
        """The folders an index run walks, checked before anything is created: folders named in `paths` must
        exist; of the configured roots, those that exist. No supported file under any of them, and no index
        yet, is an error that says where it looked."""
        if paths:
            roots = []
            for path in paths:
                full = Path(path) if Path(path).is_absolute() else self.root / path
                if not full.is_dir():
                    raise InvalidQueryError(f"{path} is not a folder" if full.exists() else
                                            f"no such folder: {path}; check the path (folders are relative to "
                                            f"the project root {self.root})")
                roots.append(self.relative_path(full))
            found = tuple(dict.fromkeys(roots))
        else:
            found = tuple(r for r in self.settings.roots if (self.root / r).is_dir())
        if not self.exists() and not any(self._has_supported_file(self.root / r) for r in found):
            looked = ", ".join(found or self.settings.roots)
            raise InvalidQueryError(
                f"no supported files under {looked} (looked for {', '.join(SUPPORTED_SUFFIXES)}); "
                f"pass the folder of your documents: `ragstead index PATH`")
        return found

    def _has_supported_file(self, folder: Path) -> bool:
        own = self.settings.db_file.parent.resolve()
        for current, folders, names in os.walk(folder):
            folders[:] = [d for d in folders if not d.startswith(".") and (Path(current) / d).resolve() != own]
            if any(not name.startswith(".") and is_supported(Path(name)) for name in names):
                return True
        return False

    def _saved_settings(self) -> dict[str, Any]:
        """The `[ragstead]` table of the project's config file as written (no defaults, no environment); empty
        when there is none or it cannot be read."""
        config = self.root / CONFIG_FILE
        if config.exists():
            with contextlib.suppress(OSError, UnicodeError, tomllib.TOMLDecodeError):
                return dict(tomllib.loads(config.read_text(encoding="utf-8")).get("ragstead", {}))
        return {}

    def record_roots(self, roots: Sequence[str]) -> tuple[str, ...] | None:
        """Add these folders to the roots the project's config names (creating the config if there is none),
        so a later plain `index` walks them too. Returns the new roots, or None if nothing changed."""
        named = tuple(self._saved_settings().get("roots", ()))
        wanted = tuple(dict.fromkeys((*named, *roots)))
        if wanted == named:
            return None
        save_settings(self.root, {"roots": wanted})
        self.settings = self.settings.with_overrides(roots=wanted)
        return wanted

    def keep_sentence_vectors(self) -> bool:
        """Record `sentence_vectors = true` in the project's config, so every later write keeps the re-ranker's
        sentence vectors current. Returns whether the config changed."""
        if self._saved_settings().get("sentence_vectors"):
            return False
        save_settings(self.root, {"sentence_vectors": True})
        self.settings = self.settings.with_overrides(sentence_vectors=True)
        return True

    def _rebuild(self, roots: tuple[str, ...], wait: float, progress: Progress | None) -> IndexReport:
        """Re-embed everything with the configured model into a scratch index beside the real one, then swap
        its documents in. A failure or Ctrl-C while embedding leaves the old index as it was, and every root
        the old index holds is rebuilt too, so a rebuild never drops a root."""
        with index_lock(self.settings.lock_file, wait), self._writer() as store:
            known = {entry.root for entry in store.manifest().values()}
            roots = tuple(dict.fromkeys((*roots, *self.settings.roots, *sorted(known))))
            roots = tuple(r for r in roots if (self.root / r).is_dir())
            folder = self.settings.db_file.parent
            make_private_folder(folder)
            with tempfile.TemporaryDirectory(dir=folder, prefix=".rebuild-") as scratch:
                aside = StoreSpec.parse(f"sqlite:{scratch}/ragstead.db", root=self.root, default_db=Path()).open()
                try:
                    embedder = self._load_embedder(None)  # the configured model, whatever the old index holds
                    report = index_roots(self.settings.indexing(roots), aside, embedder, roots, False,
                                         progress=progress, take_lock=False)
                    with _interrupts_deferred():  # the swap runs to its end once it has begun
                        store.reset()
                        store.ensure_model(embedder.name, embedder.dim)
                        store.record_chunking(self.settings.chunking.describe())
                        for batch in _batches(aside.export_documents(), 50):
                            store.apply(batch, [], [])
                finally:
                    aside.close()
            self._fill_sentence_vectors(store, report, progress)
        report.rebuild = True
        return report

    def add(self, path: str | Path, *, wait: float = 30.0) -> IndexReport:
        """Index (or re-index) exactly this file, a path inside one of the configured roots."""
        return self._index_files([self.relative_path(path)], wait)

    def upload(self, name: str, data: BinaryIO | bytes, *, user: str, wait: float = 30.0) -> tuple[str, dict[str, Any]]:
        """Store a file as `kb/users/<user>/uploads/<name>` and index it, all or nothing: the bytes are parsed
        before they replace anything, and if indexing fails the previous file and document come back.
        Returns ("added" | "updated" | "unchanged", the document)."""
        QueryFilters.build(user_slug=user)  # a valid slug, or InvalidQueryError
        if not UPLOAD_NAME.match(name or ""):
            raise InvalidQueryError("the file name must be 1-120 letters, digits, spaces, '.', '_' or '-', "
                                    "without a path")
        if not is_supported(Path(name)):
            raise UnsupportedFileError(f"unsupported file type {Path(name).suffix!r}; send one of "
                                       f"{sorted(LOADERS)}")
        folder = self.root / "kb" / "users" / user / "uploads"
        target = folder / name
        if not target.resolve().is_relative_to((self.root / "kb" / "users" / user).resolve()):
            raise InvalidQueryError("the file name leaves the user's folder")
        rel = target.relative_to(self.root).as_posix()
        options = self.settings.indexing()
        if IgnoreRules(self.root, options.exclude).ignored(rel):
            raise InvalidQueryError(f"{rel} is ignored (.ragsteadignore or the exclude setting); not stored")
        # A hidden staging folder: the indexer never picks up a half-written upload or a backup.
        staged = folder / f".upload-{uuid.uuid4().hex}"
        make_private_folder(staged)
        tmp = staged / name
        try:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE_MODE), "wb") as out:
                if isinstance(data, bytes):
                    out.write(data)
                else:
                    shutil.copyfileobj(data, out, 1 << 20)
            try:
                # Unreadable content is refused before it replaces anything, under the project's limits.
                load_document(tmp, options.load_limits)
            except LoadError as exc:
                raise LoadError(str(exc).replace(str(tmp), name)) from None
            report = self._install([(tmp, target)], [], staged, [rel], options, wait)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        status = "added" if report.added else "updated" if report.updated else "unchanged"
        return status, self.document(path=rel) or {}

    # -- ingest ------------------------------------------------------------------------------------

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
        only_user = user
        user = user or self.settings.owner_slug
        QueryFilters.build(user_slug=user)  # a valid slug, or InvalidQueryError
        kbs = self._targets(targets)
        embedder = PassageMemo(self._load_embedder(self.store if self.exists() else None))
        broken: dict[str, str] = {}  # targets that cannot be opened: each source fails there, nowhere else
        for name, kb in kbs.items():  # one embedding per passage for every target on the same model
            try:
                own = kb._load_embedder(kb.store if kb.exists() else None)
            except RagsteadError as exc:
                broken[name] = one_line_reason(exc)
                continue
            kb._ingest_embedder = embedder if own.name == embedder.name and own.dim == embedder.dim else None
        use_tags = self.settings.auto_tags if auto_tags is None else auto_tags
        providers = [p for p in self.providers() if p.name != "extractive"] if use_tags else []

        def tagger(text: str, existing: list[str]) -> Tagging:
            return auto_tag(text, existing, embedder, providers)

        settings = self.settings
        options = FetchOptions(connect_seconds=settings.fetch_connect_seconds, read_seconds=settings.fetch_read_seconds,
                               max_bytes=settings.fetch_max_mb << 20,
                               allow_private=allow_private or settings.allow_private_urls)
        try:
            with egress.recording(self.egress_file):  # privacy: every fetch that leaves the machine is logged
                return ingest_sources(
                    sources, [_IngestTarget(kb, name, user, wait, broken.get(name)) for name, kb in kbs.items()],
                    tags=tags, refresh=refresh, fetch_options=options, transport=transport or self._transport,
                    tagger=tagger if use_tags else None, root=self.root, on_result=on_result,
                    database=(lambda source, result: self._ingest_dossiers(
                        kbs, source, result, query, template, group_by, only_user, wait)) if query else None,
                    urls_only=urls_only)
        finally:
            for name, kb in kbs.items():
                kb._ingest_embedder = None
                if name != "default":
                    kb.close()

    def _ingest_dossiers(self, kbs: dict[str, KnowledgeBase], source: Source, result: SourceResult, query: str,
                         template: str | Path | None, group_by: str | None, user: str | None, wait: float) -> None:
        """Render the query's rows as dossiers in each target and index them (ingest/dossiers.py). `template`:
        Jinja2 text, or a file (a Path)."""
        for name, kb in kbs.items():
            try:
                run = render_dossiers(source.url, query=query, root=kb.root, template=template, group_by=group_by,
                                      user=user, connect_timeout=kb.settings.fetch_connect_seconds)
                result.url = run.source  # without the password
                with kb._writer() as store, kb._guarded(store):
                    report = index_paths(kb.settings.indexing((*kb.settings.roots, "artifacts")), store,
                                         kb._ingest_embedder or kb._load_embedder(store), run.paths, wait)
            except RagsteadError as exc:
                result.targets[name] = {"status": "failed", "reason": one_line_reason(exc)}
                continue
            status = "updated" if report.updated else "added" if report.added else "unchanged"
            result.targets[name] = {"status": status, "rows": run.rows, "dossiers": run.paths,
                                    "skipped": [{"row": s.row, "reason": s.reason} for s in run.skipped]}
        ok = [t for t in result.targets.values() if t["status"] != "failed"]
        if ok:
            result.status = ok[0]["status"]
            result.title = f"{len(ok[0]['dossiers'])} dossiers from {ok[0]['rows']} rows"
        else:
            result.reason = "; ".join(t["reason"] for t in result.targets.values())

    def _targets(self, names: Sequence[str]) -> dict[str, KnowledgeBase]:
        """The knowledge bases an ingest writes to: this one ("default") and the configured `[targets.NAME]`."""
        wanted = list(dict.fromkeys(n.strip() for n in names if n.strip())) or ["default"]
        known = {t.name: t for t in self.settings.targets}
        out: dict[str, KnowledgeBase] = {}
        for name in wanted:
            if name == "default":
                out[name] = self
                continue
            target = known.get(name)
            if target is None:
                raise ConfigError(f"no target {name!r}; define it in ragstead.toml as [targets.{name}] with root = "
                                  f"\"path\" (known: {', '.join(['default', *known]) })")
            root = self.settings.resolve(target.root)
            if not root.is_dir():
                raise ConfigError(f"target {name}: its root {root} is not a folder")
            out[name] = open(root, store=target.store or None, transport=self._transport,
                             embedder=self._given_embedder)
        return out

    def _store_extracted(self, extracted: Extracted, source: dict[str, Any], tags: list[str],
                         replaces: list[dict[str, Any]], user: str, wait: float) -> dict[str, Any]:
        """Archive one extracted source under `kb/users/<user>/ingested/` and index it, all or nothing: the
        archive is checked by the loader before it lands, and if indexing fails the files are put back as they
        were (the old archive, or none). Documents it replaces (a refresh) are removed in the same run."""
        folder = self.root / "kb" / "users" / user / "ingested"
        target = archive_path(folder, extracted)
        options = self.settings.indexing((*self.settings.roots, "kb"))
        staged = folder / f".ingest-{uuid.uuid4().hex}"
        make_private_folder(staged)
        try:
            written = write_archive(staged / target.name, extracted, source, tags)
            try:
                load_document(staged / target.name, options.load_limits)  # unreadable content never lands
            except LoadError as exc:
                raise LoadError(str(exc).replace(f"{staged / target.name}", target.name)) from None
            old = [p for d in replaces for p in (fs_path(self.root, d["file_path"]),
                                                 sidecar_path(fs_path(self.root, d["file_path"])))]
            make_private_folder(target.parent)
            moves = [(path, target.parent / path.name) for path in written]
            rels = list(dict.fromkeys([self.relative_path(target), *(d["file_path"] for d in replaces)]))
            self._install(moves, [p for p in old if p not in {to for _, to in moves}], staged, rels, options, wait)
        finally:
            shutil.rmtree(staged, ignore_errors=True)
        return self.document(path=self.relative_path(target)) or {}

    def _install(self, moves: list[tuple[Path, Path]], removals: list[Path], staging: Path, rels: list[str],
                 options: IndexingOptions, wait: float) -> IndexReport:
        """Move checked files into place (and `removals` aside) and index `rels`, all or nothing, under the
        index lock: the files they replace are kept as hard links in `staging`, so a crash at any point leaves
        the old file or the new one, never neither; if indexing fails (Ctrl-C included) every file goes back
        and the index is brought back in line with them. Uploads and ingest both land this way."""
        with self._writer() as store, index_lock(self.settings.lock_file, wait), self._guarded(store):
            swap = _swap_files(moves, removals, staging)
            embedder = self._ingest_embedder or self._load_embedder(store)
            try:
                report = index_paths(options, store, embedder, rels, take_lock=False)
                if report.skipped:  # reasons name files by absolute path: never show the server's
                    raise LoadError(report.skipped[0]["reason"].replace(f"{self.root.resolve()}/", ""))
            except BaseException:
                swap.undo()
                index_paths(options, store, embedder, rels, take_lock=False)
                raise
        return report

    def delete(self, path: str | Path | None = None, *, doc_id: str | None = None, user: str | None = None,
               wait: float = 30.0) -> dict[str, Any]:
        """Delete a document (by path or id): its file and its chunks in the index. With `user`, only that
        user's own private document can be deleted; anything else answers exactly like a missing one."""
        if (path is None) == (doc_id is None):
            raise InvalidQueryError("give a path or a doc_id")
        doc = self.document(doc_id) if doc_id is not None else self.document(path=self.relative_path(path or ""))
        if doc is None or (user is not None and not self._owns(user, doc)):
            raise DocumentNotFoundError("no such document")
        fs_path(self.root, doc["file_path"]).unlink(missing_ok=True)  # stored paths escape non-UTF-8 bytes
        self._index_files([doc["file_path"]], wait)
        return {"deleted": doc["doc_id"], "file_path": doc["file_path"]}

    def _owns(self, user: str, doc: dict[str, Any]) -> bool:
        """The document is `user`'s own private document, by its stored scope and by where its file is."""
        if not doc["is_private"] or doc["user_slug"] != user:
            return False
        derived = derive_metadata(doc["file_path"], None, self.settings.scope_rules)
        inside = (self.root / doc["file_path"]).resolve().is_relative_to(self.root.resolve())
        return derived.is_private and derived.user_slug == user and inside

    def relative_path(self, path: str | Path) -> str:
        """`path` relative to the project root (an absolute path must lie inside it)."""
        base = self.root.resolve()
        full = Path(path) if Path(path).is_absolute() else base / path
        try:
            return full.resolve().relative_to(base).as_posix()
        except ValueError:
            raise RagsteadError(f"{path} is not inside the project root {base}") from None

    def _index_files(self, rels: list[str], wait: float) -> IndexReport:
        with self._writer() as store, self._guarded(store):
            return index_paths(self.settings.indexing(), store, self._load_embedder(store), rels, wait)

    def remember(self, text: str, *, user: str, dry_run: bool = False, index: bool = True,
                 wait: float = 30.0) -> RememberResult:
        """Remember a high-signal fact or preference in the user's memory file (never secrets or PII), and
        index that file unless `index` is False."""
        return remember_fact(clean_text(text), user, self.root, lock_dir=self.settings.db_file.parent,
                             index=(lambda rels: self._index_files(rels, wait)) if index else None,
                             dry_run=dry_run, wait_seconds=wait)

    def migrate(self, target: str, *, replace_target: bool = False,
                progress: Progress | None = None) -> MigrationReport:
        """Copy this index, vectors included, into the (empty) store `target` names."""
        to_spec = self.settings.with_overrides(store=target).store_spec()
        if self._spec.same_place(to_spec):
            raise RagsteadError("--from and --to name the same store (or share its index file)")
        with index_lock(self.settings.lock_file):  # no `ragstead index` of this project while the copy runs
            to_store = to_spec.open()
            try:
                return copy_store(self.store, to_store, replace=replace_target, progress=progress)
            finally:
                to_store.close()

    # -- reading -------------------------------------------------------------------------------------

    def scope(self, *, user: str | None = None, doc_types: Sequence[str] = (), public_only: bool = False,
              include_archive: bool = False, date_from: str | None = None, date_to: str | None = None,
              tags: Sequence[str] = ()) -> QueryFilters:
        """Validated filters: private-only unless `public_only`, archive excluded unless asked for."""
        return QueryFilters.build(user, list(doc_types), public_only, date_from, date_to, include_archive, list(tags))

    def search_options(self, *, k: int = 8, mode: str | None = None, top_k_vector: int | None = None,
                       top_k_lexical: int | None = None, fusion: str | None = None,
                       fusion_weight: float | None = None, rrf_k: int | None = None,
                       rerank_top_n: int | None = None, dedup_sources: bool | None = None,
                       feedback_k: int | None = None, feedback_weight: float | None = None) -> SearchOptions:
        """Search options from the configured defaults (hybrid, convex fusion, feedback from the 2 best chunks),
        validated. `dedup_sources`: the best chunk of each document only. `feedback_k` 0: no query feedback."""
        fusion = choose_fusion(fusion, rrf_k, fusion_weight)
        options = self.settings.search_options(mode, k=k, top_k_vector=top_k_vector, top_k_lexical=top_k_lexical,
                                               fusion=fusion, fusion_weight=fusion_weight, rrf_k=rrf_k,
                                               rerank_top_n=rerank_top_n, dedup_sources=dedup_sources,
                                               feedback_k=feedback_k, feedback_weight=feedback_weight)
        options.validate()
        return options

    def reranker(self) -> Reranker:
        """What `rerank=True` uses: the `reranker` setting's cross-encoder, else sentence max-sim. Loaded once."""
        with self._lock:
            if self._reranker is None:
                if self.settings.reranker:
                    self._reranker = CrossEncoderReranker(
                        cross_encoder_for(self.settings.reranker, allow_download=self.settings.allow_download))
                else:
                    self._reranker = SentenceMaxSimReranker(
                        self.embedder, sentence_budget=self.settings.rerank_sentences or None)
            return self._reranker

    def search(self, query: str, *, k: int = 8, mode: str | None = None, user: str | None = None,
               doc_types: Sequence[str] = (), public_only: bool = False, include_archive: bool = False,
               date_from: str | None = None, date_to: str | None = None, tags: Sequence[str] = (),
               rerank: bool = False, filters: QueryFilters | None = None, options: SearchOptions | None = None,
               **knobs: Any) -> SearchResult:
        """Search the index inside a scope (see `scope`); `knobs` are `search_options`' fusion settings.
        `filters` and `options`, when given, replace the scope and option arguments."""
        filters = filters or self.scope(user=user, doc_types=doc_types, public_only=public_only,
                                        include_archive=include_archive, date_from=date_from, date_to=date_to,
                                        tags=tags)
        options = options or self.search_options(k=k, mode=mode, **knobs)
        needs_model = options.mode != "lexical" or rerank
        with self._lock:
            return search(query, self.store, self.embedder if needs_model else None, filters, options,
                          self.settings.scope_rules, self.reranker() if rerank else None)

    def providers(self, *, extractive: bool = False, template: str | None = None,
                  llm: Sequence[str] | None = None) -> list[AnswerProvider]:
        """The answerer chain: the configured LLMs (environment), the extractive answerer always last. A remote
        LLM only with consent: `llm` (`ask --llm`), else the `answerer` setting (answer/consent.py)."""
        if extractive:
            return [ExtractiveAnswerer()]
        prompt = load_template(template or self.settings.template_spec)  # validated even when unused
        if self._providers is not None:
            return list(self._providers)
        return _providers_from_env(template=prompt, transport=self._transport,
                                   remote=remote_names(self.settings.answerer if llm is None else llm))

    def revealer(self, sources: Iterable[str]) -> Callable[[str], str]:
        """For the owner's own terminal only (`query`/`ask --reveal-secrets`; never a server or an agent): a
        function that gives back the secret values masked in text quoted from `sources` (project-relative
        paths), read again from the files on disk."""
        originals = []
        for source in dict.fromkeys(sources):
            path = self.root / source
            if path.is_file() and path.resolve().is_relative_to(self.root.resolve()):
                try:
                    originals.append(load_document(path).text)
                except (LoadError, OSError):
                    continue

        def reveal(text: str) -> str:
            for original in originals:
                text = reveal_secrets(text, original)
            return text

        return reveal

    @property
    def egress_file(self) -> Path:
        """The private log of every request that left the machine (egress.py)."""
        return self.settings.db_file.parent / egress.EGRESS_FILE

    def egress_log(self) -> list[dict[str, Any]]:
        """What left the machine, oldest first: time, host, purpose, bytes, documents, payload hash."""
        return egress.read(self.egress_file)

    def consent_hint(self, llm: Sequence[str] | None = None) -> str | None:
        """A line for the person when an LLM key is set but unused for want of consent, else None."""
        return consent_hint(os.environ, remote_names(self.settings.answerer if llm is None else llm))

    def tool_registry(self, tools: Sequence[str] | None = None) -> ToolRegistry | None:
        """The allow-listed tools `ask` offers an LLM answerer (`tools`, else the `tools` setting), over this
        knowledge base's HTTP transport; None when there are none. Unknown names raise ConfigError."""
        names = tuple(self.settings.tools if tools is None else tools)
        return ToolRegistry(names, transport=self._transport) if names else None

    def ask(self, question: str, *, k: int = 8, mode: str | None = None, user: str | None = None,
            doc_types: Sequence[str] = (), public_only: bool = False, include_archive: bool = False,
            date_from: str | None = None, date_to: str | None = None, tags: Sequence[str] = (),
            rerank: bool = False, min_similarity: float | None = None, min_confidence: float | None = None,
            max_context_tokens: int = DEFAULT_MAX_CONTEXT_TOKENS, extractive: bool = False,
            template: str | None = None, remember: bool = False, on_text: Callable[[str], None] | None = None,
            filters: QueryFilters | None = None, options: SearchOptions | None = None,
            answerers: Sequence[AnswerProvider] | None = None, tools: Sequence[str] | None = None,
            llm: Sequence[str] | None = None, **knobs: Any) -> Answer:
        """Answer from the documents in scope with citations, or the exact refusal sentence.

        `remember`: if the question states a lasting fact or preference, write it to `user`'s memory.
        `answerers`: a chain built once by `providers()` (a server reuses it); `extractive` overrides it.
        `tools`: the allow-listed tools an LLM answerer may call (`("weather",)`; None: the `tools` setting,
        off by default); results are cited like documents. The extractive answerer never calls tools.
        `min_confidence`: the relevance gate's threshold (default: the calibrated model's). `min_similarity`:
        a cosine threshold per chunk that replaces the gate (as `ask` decided before it; -1 hands over all).
        """
        if remember and not user:
            raise InvalidQueryError("remember needs a user: memory belongs to one person")
        filters = filters or self.scope(user=user, doc_types=doc_types, public_only=public_only,
                                        include_archive=include_archive, date_from=date_from, date_to=date_to,
                                        tags=tags)
        chain = list(answerers) if answerers is not None and not extractive else self.providers(
            extractive=extractive, template=template, llm=llm)
        ask_options = AskOptions(options or self.search_options(k=k, mode=mode, **knobs), min_similarity,
                                 max_context_tokens, self.reranker() if rerank else None, min_confidence,
                                 local_only=self.settings.local_only)
        registry = self.tool_registry(tools)  # unknown tool names fail here, before any work
        with self._lock:  # the store-side half; the answerers below do not hold up other readers
            if self._unit_vectors is None or self._unit_vectors.embedder is not self.embedder:
                self._unit_vectors = UnitVectorCache(self.embedder)  # sentence vectors, kept between questions
            found, contexts = gather(question, self.store, self.embedder, filters, ask_options,
                                     self.settings.scope_rules, self._unit_vectors)
        with egress.recording(self.egress_file):  # privacy: a remote LLM's prompt or a tool call is logged
            result = answer(found, contexts, ask_options.min_similarity, chain, on_text, registry)
        if remember and user:
            result = replace(result, memory_write=self.remember(question, user=user).to_dict())
        return result

    def tags(self, *, user: str | None = None, public_only: bool = False,
             include_archive: bool = True) -> dict[str, int]:
        """Every tag of the documents in scope, with how many documents carry it, most used first."""
        filters = self.scope(user=user, public_only=public_only, include_archive=include_archive)
        with self._lock:
            return self.store.tag_counts(filters)

    def stats(self) -> dict[str, Any]:
        """Counts, the model and where the index lives."""
        with self._lock:
            return self.store.stats()

    def status(self) -> dict[str, Any]:
        """`stats()` plus the integrity check, and `permissions`: the index files and folders others could
        read (looser than 0600 / 0700; empty when all is private)."""
        with self._lock:
            stats = self.store.stats() | {"integrity": self.store.integrity_check()}
        options = self.settings.indexing()  # privacy: files whose secrets the index masks
        secrets = secret_counts(options)
        stats |= {"secrets": {"files": len(secrets), "masked": sum(secrets.values()),
                              "checked": secrets_checked(options) or not stats.get("documents")}}
        return stats | {"permissions": [p.to_dict() for p in permissions.find_loose(self._private_paths())]}

    def doctor(self, fix: bool = False) -> dict[str, Any]:
        """Check that the index, its lock files, the API key file and the memory files are private (files 0600,
        folders 0700); with `fix`, take group and other permissions off those that are not.
        Returns {ok, loose, fixed, remaining} (each a list of {path, kind, mode, wanted})."""
        return permissions.doctor(self._private_paths(), fix=fix, folders=self._private_folders())

    def _private_folders(self) -> list[Path]:
        """The folders of private data `init` makes 0700, checked themselves (not walked): kb/, kb/users/ and
        each user's folder, artifacts/ and its dossiers."""
        folders = [self.root / "kb", self.root / "kb" / "users", *sorted((self.root / "kb" / "users").glob("*/")),
                   self.root / "artifacts", self.root / "artifacts" / "dossiers"]
        return [f for f in folders if f.is_dir() and not f.is_symlink()]

    def _private_paths(self) -> list[Path]:
        """What `status` and `doctor` check: the index's folder (or its files), the folder of the configured
        index file (API keys, memory lock), the index lock and every user's memory files."""
        indexes = [f for f in (self._spec.sqlite_file, self.settings.db_file) if f is not None]
        memory = sorted(p for name in MEMORY_FILES.values() for p in self.root.glob(f"kb/users/*/memory/{name}"))
        files = [self.settings.lock_file, self.api_keys_file, self.settings.db_file.parent / "memory.lock", *memory]
        return permissions.private_paths(self.root, indexes, files)

    def documents(self, *, user: str | None = None, public_only: bool = False, include_archive: bool = True,
                  doc_types: Sequence[str] = (), limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        """Indexed documents in a scope, by path."""
        filters = self.scope(user=user, public_only=public_only, include_archive=include_archive, doc_types=doc_types)
        with self._lock:
            return self.store.list_documents(filters, limit, offset)

    def document(self, doc_id: str | None = None, *, path: str | None = None) -> dict[str, Any] | None:
        """One document by id or project-relative path, or None."""
        with self._lock:
            return self.store.get_document(doc_id, file_path=path)

    def read(self, doc_id: str, *, offset: int = 0, limit: int = MAX_PASSAGE_CHUNKS, user: str | None = None,
             public_only: bool = False, include_archive: bool = True) -> Passage:
        """A document's indexed text in a scope: up to `limit` chunks from `offset`, in order, with its metadata.
        A document out of scope raises DocumentNotFoundError, exactly like a missing one."""
        return self._passage(self.scope(user=user, public_only=public_only, include_archive=include_archive),
                             doc_id=doc_id, offset=max(0, offset), limit=limit)

    def passage(self, chunk_id: str, *, around: int = 1, user: str | None = None, public_only: bool = False,
                include_archive: bool = True) -> Passage:
        """What a citation `[n]` opens: the chunk `chunk_id` with up to `around` chunks on each side and its
        document's metadata, in a scope. Out of scope raises DocumentNotFoundError, like a missing chunk."""
        return self._passage(self.scope(user=user, public_only=public_only, include_archive=include_archive),
                             chunk_id=chunk_id, around=max(0, min(around, 10)))

    def _passage(self, filters: QueryFilters, **where: Any) -> Passage:
        key = where.get("doc_id") or where.get("chunk_id")
        if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{64}", key):
            raise DocumentNotFoundError("no such document")  # a malformed id reads like a missing one
        with self._lock:
            found = read_passage(self.store, filters, self.settings.scope_rules, **where)
        if found is None:
            raise DocumentNotFoundError("no such document")
        return found

    def readiness(self) -> dict[str, Any]:
        """Each check a server needs before it can answer: the store reachable (a real round trip), the
        embedder loaded (a real embedding) and the model the index was built with. Never raises: `status` is
        "ready" when every check passes, else "not_ready", and each failed check says why."""
        checks: dict[str, dict[str, Any]] = {}
        stats: dict[str, Any] = {}
        embedder: Embedder | None = None
        with self._lock:
            try:
                stats = self.store.stats()
                checks["store"] = {"ok": True, "backend": self._spec.kind}
            except Exception as exc:  # an unreachable server, a damaged file: reported, not raised
                checks["store"] = {"ok": False, "error": one_line_reason(exc)}
            try:
                embedder = self.embedder if checks["store"]["ok"] else self._load_embedder(None)
                vector = embedder.embed_query("readiness")
                checks["embedder"] = {"ok": len(vector) == embedder.dim, "model": embedder.name, "dim": embedder.dim}
            except Exception as exc:  # a model that fails to load or run: reported, not raised
                checks["embedder"] = {"ok": False, "error": one_line_reason(exc)}
            if checks["store"]["ok"] and embedder is not None:
                try:
                    self.store.check_model(embedder.name, embedder.dim)
                    checks["model_guard"] = {"ok": True, "index_model": self.store.embed_model() or embedder.name}
                except RagsteadError as exc:
                    checks["model_guard"] = {"ok": False, "error": one_line_reason(exc)}
        ready = all(check["ok"] for check in checks.values()) and len(checks) == 3
        return {"status": "ready" if ready else "not_ready", "checks": checks,
                "model": embedder.name if embedder is not None else None,
                "documents": stats.get("documents"), "chunks": stats.get("chunks")}

    # -- measuring -----------------------------------------------------------------------------------

    def evaluate(self, cases: Path | list[EvalCase], *, settings: EvalSettings | None = None,
                 filters: QueryFilters | None = None, rerank: bool = False,
                 progress: Progress | None = None) -> dict[str, Any]:
        """Recall@k, MRR@k, hit rate@k and nDCG@10 of JSONL cases (a path) or cases, on this index."""
        case_list = load_jsonl_cases(cases) if isinstance(cases, Path) else cases
        settings = settings or EvalSettings(search=self.settings.search_options())
        with self._lock:
            report = run_eval(case_list, self.store, self.embedder, settings, filters or self.scope(),
                              self.settings.scope_rules, progress, self.reranker() if rerank else None)
            report["run"] = {"model": self.embedder.name, "index": self.store.stats(),
                             "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
        return report

    def evaluate_beir(self, folder: Path, *, split: str = "test", index_store: str | None = None,
                      settings: EvalSettings | None = None, rerank: bool = False,
                      progress: Callable[[str, int, int], None] | None = None) -> dict[str, Any]:
        """Index a BEIR corpus into a store of its own (`index_store`: a file to keep and reuse, or a store
        spec; default a scratch file) and evaluate the split's queries on it. Never touches this index."""
        data = load_beir(folder, split)
        with tempfile.TemporaryDirectory(prefix="ragstead-eval-") as scratch:
            spec = index_store or f"{scratch}/beir.db"
            if not is_server_or_chroma(spec):  # a plain file (or sqlite:PATH) of its own
                path = Path(spec.removeprefix("sqlite:")).resolve()
                corpus_settings = self.settings.with_overrides(store="", db_path=str(path),
                                                               lock_path=f"{path}.lock")
            else:
                corpus_settings = self.settings.with_overrides(store=spec, lock_path=f"{scratch}/beir.lock")
            with KnowledgeBase(corpus_settings) as corpus:
                records = [TextRecord(doc_id, text, title or None) for doc_id, (title, text) in data.corpus.items()]
                indexed = corpus.index_records(records, root=BEIR_ROOT,
                                               progress=_stage(progress, "indexing corpus"))
                report = corpus.evaluate(data.cases, settings=settings, rerank=rerank,
                                         progress=_stage(progress, "evaluating"))
        report["run"] |= {"dataset": str(folder), "split": split, "corpus_docs": len(records),
                          "index_seconds": round(indexed.seconds, 2), "chunks_embedded": indexed.chunks_embedded,
                          "chunker": self.settings.chunker, "chunk_size": self.settings.chunk_size,
                          "overlap": self.settings.overlap}
        return report

    def index_records(self, records: list[TextRecord], *, root: str = "kb/corpus",
                      progress: Progress | None = None) -> IndexReport:
        """Index in-memory texts under `<root>/<key>`, incrementally (records missing from `records` go)."""
        with self._writer() as store:
            return index_records(self.settings.indexing((root,)), store, self._load_embedder(store), records,
                                 root, progress)

    def last_indexed(self) -> str | None:
        """When a document was last written to the index (the latest `indexed_at`, ISO 8601 UTC), or None
        for an empty index. A run that changed nothing leaves it as it was."""
        with self._lock:
            return self.store.last_indexed_at()

    # -- keeping it fresh ----------------------------------------------------------------------------

    def freshness(self, paths: Sequence[str | Path] | None = None, *, plan: str | Path | None = None,
                  ledger: str | Path | None = None, apply: bool = False, exec_command: str | None = None,
                  exec_timeout: float = DEFAULT_EXEC_TIMEOUT, full: bool = False, urls: bool = False,
                  wait: float = 0.0, progress: Progress | None = None,
                  transport: httpx.BaseTransport | None = None) -> FreshnessReport:
        """Compare the files under `paths` (default: the configured roots) with the manifest of the last index
        run, write the refresh plan (`plan`, default `kb/rag/refresh_plan.jsonl`) and append the decisions
        and the run to the ledger (`ledger`, default `kb/rag/embedding_ledger.jsonl`). Then: nothing (a dry
        run), `apply` (re-index exactly the planned files), or `exec_command` (a hook, with the plan's path in
        $RAGSTEAD_PLAN, stopped after `exec_timeout` seconds). `full`: no previous manifest, every file is new.
        `urls`: also re-check the pages `ingest` fetched (conditional GET through `transport`, default the
        network), and `apply` ingests the changed ones again. The plan and the apply of files hold the index
        lock (`wait` seconds for it, like `index`); the network is used outside it."""
        if apply and exec_command is not None:
            raise InvalidQueryError("--apply and --exec exclude each other: ragstead re-indexes the plan, or the "
                                    "hook does")
        if exec_command is not None:
            check_hook_command(exec_command)
        if not exec_timeout > 0:
            raise InvalidQueryError(f"--exec-timeout must be above 0 seconds, got {exec_timeout:g}")
        if paths:
            roots, missing = self._existing_roots(paths), ()
        else:
            roots = tuple(r for r in self.settings.roots if (self.root / r).is_dir())
            missing = tuple(r for r in self.settings.roots if r not in roots)
        folder = self.settings.db_file.parent
        run = FreshnessRun(self.settings.resolve(str(plan)) if plan else folder / PLAN_FILE,
                           self.settings.resolve(str(ledger)) if ledger else folder / LEDGER_FILE, roots,
                           full=full, missing_roots=missing)
        options = self.settings.indexing(roots)
        transport = transport or self._transport
        with run.recorded():
            with egress.recording(self.egress_file):
                pages = self._plan_urls(transport) if urls else None
            if pages is not None:
                run.add_urls(pages)
            with index_lock(self.settings.lock_file, wait):  # the manifest of a completed run, not one mid-way
                run.plan_files(options, roots, None if full else self._previous_manifest(), self._chunk_count)
                run.write_plan()
                if apply and (run.paths or run.touches):
                    with self._writer() as store, self._guarded(store):
                        if run.paths:  # exactly the plan: no other file is read
                            run.applied(index_paths(options, store, self._load_embedder(store), run.paths,
                                                    take_lock=False, progress=progress))
                        if run.touches:  # same bytes, new mtime: the manifest learns it, nothing is read
                            store.apply([], [], run.touches)
            if apply and pages is not None and run.urls:
                run.applied(urls=self._refresh_pages(run, pages, wait, transport))
            if exec_command is not None and run.report.entries:
                run.run_hook(exec_command, exec_timeout, self.root)
        return run.report

    def _previous_manifest(self) -> dict[str, ManifestEntry]:
        """The manifest of the last index run, or a clear error when there is none or it cannot be read."""
        if not self.exists():
            raise RagsteadError(f"no previous manifest: there is no index at {self.location} yet; run "
                                "`ragstead index` first, or plan every file as new with --full")
        try:
            with self._lock:
                return self.store.manifest()
        except Exception as exc:  # a damaged file: the store's own error, or the driver's
            raise RagsteadError(f"the manifest of the last index run cannot be read ({' '.join(str(exc).split())}); "
                                "rebuild the index with `ragstead index --rebuild`, or plan every file as new "
                                "with --full") from exc

    def _plan_urls(self, transport: httpx.BaseTransport | None) -> UrlPlan:
        """`freshness --urls`: every document ingested from a web URL, checked again (freshness.plan_urls)."""
        if not self.exists():
            return UrlPlan()
        pages = [d for d in self._all_documents() if ingested_remote(d)]
        settings = self.settings
        options = FetchOptions(connect_seconds=settings.fetch_connect_seconds,
                               read_seconds=settings.fetch_read_seconds, max_bytes=settings.fetch_max_mb << 20)
        kept_file = settings.db_file.parent / VALIDATORS_FILE  # private: it names the pages users ingested
        kept = read_validators(kept_file)
        with make_client(options, transport) as client:
            plan = plan_urls(pages, client, options, kept)
        if plan.validators:
            write_validators(kept_file, kept | plan.validators)
        return plan

    def _refresh_pages(self, run: FreshnessRun, pages: UrlPlan, wait: float,
                       transport: httpx.BaseTransport | None) -> list[dict[str, Any]]:
        """`--apply` for pages: each changed one ingested again (`ingest --refresh`) for the user who has it, with
        the tags it had."""
        done = []
        for entry in run.urls:
            doc = pages.documents[entry.doc_id or ""]
            result = self.ingest([entry.url or ""], refresh=True, user=doc.get("user_slug") or None,
                                 tags=doc.get("tags") or (), wait=wait, transport=transport).results[0]
            done.append({"url": entry.url, "doc_id": entry.doc_id, "status": result.status, "reason": result.reason,
                         "file_path": result.file_path})
        return done

    def _all_documents(self) -> list[dict[str, Any]]:
        """Every document of the index, private and public, in pages of a thousand."""
        found: dict[str, dict[str, Any]] = {}
        for public in (False, True):
            scope = self.scope(public_only=public, include_archive=True)
            offset = 0
            while True:
                with self._lock:
                    page = self.store.list_documents(scope, 1000, offset)
                found.update((d["doc_id"], d) for d in page)
                if len(page) < 1000:
                    break
                offset += 1000
        return list(found.values())

    def _chunk_count(self, path: str) -> int:
        with self._lock:
            doc = self.store.get_document(file_path=path)
        return int(doc.get("chunks") or 0) if doc else 0

    def watch(self, paths: Sequence[str | Path] | None = None, *, debounce: float = DEFAULT_DEBOUNCE,
              wait: float = 30.0, on_batch: Callable[[WatchBatch], None] | None = None,
              stop: threading.Event | None = None) -> None:
        """Keep the index in line with the folders under `paths` (default: the configured roots) until `stop` is
        set or Ctrl-C: first an incremental index (what changed while nobody watched), then, for each burst of
        file events (quiet for `debounce` seconds), an index run narrowed to the changed paths. `on_batch`
        hears of each batch. In the main thread the first Ctrl-C lets the batch in flight finish."""
        if paths:
            roots = []
            for path in paths:
                full = Path(path) if Path(path).is_absolute() else self.root / path
                if not full.is_dir():
                    raise InvalidQueryError(f"{path} is not a folder" if full.exists() else f"no such folder: {path}")
                roots.append(self.relative_path(full))
            watched = tuple(dict.fromkeys(roots))
        else:
            watched = tuple(self.settings.roots)

        def sync(roots: tuple[str, ...], within: Within | None) -> IndexReport:
            with self._writer() as store, self._guarded(store):
                return index_roots(self.settings.indexing(roots), store, self._load_embedder(store), roots, False,
                                   wait, within=within)

        FolderFollower(self.settings.indexing(watched), watched, sync, debounce=debounce, on_batch=on_batch,
                       stop=stop).run()


class _IngestTarget:
    """A KnowledgeBase as one target of an ingest call (ingest/pipeline.py's IngestTarget)."""

    def __init__(self, kb: KnowledgeBase, name: str, user: str, wait: float, broken: str | None = None) -> None:
        self.kb, self.name, self.user, self.wait, self.broken = kb, name, user, wait, broken

    def documents_from_source(self, key: str) -> list[dict[str, Any]]:
        """This user's own copies only: dedup is per user, so another user's copy (its path, its title, even
        that it exists) never shows through an ingest."""
        if self.broken or not self.kb.exists():
            return []
        with self.kb._lock:
            found = self.kb.store.documents_from_source(key)
        return [d for d in found if d["user_slug"] == self.user and d["is_private"]
                and d["file_path"].startswith(f"kb/users/{self.user}/")]

    def existing_tags(self) -> list[str]:
        return list(self.kb.tags()) if not self.broken and self.kb.exists() else []

    def store_extracted(self, extracted: Extracted, source: dict[str, Any], tags: list[str],
                        replaces: list[dict[str, Any]]) -> dict[str, Any]:
        if self.broken:
            raise RagsteadError(self.broken)
        return self.kb._store_extracted(extracted, source, tags, replaces, self.user, self.wait)


class _FileSwap:
    """Files moved into place (and old ones moved aside) so that `undo` puts everything back as it was. The
    backups live in the staging folder, which the caller removes once the install has landed."""

    def __init__(self) -> None:
        self.placed: list[tuple[Path, Path | None]] = []  # (target, backup of what it replaced)
        self.removed: list[tuple[Path, Path]] = []  # (old path, where it waits)

    def undo(self) -> None:
        for target, backup in reversed(self.placed):
            if backup is not None:
                os.replace(backup, target)
            else:
                target.unlink(missing_ok=True)
        for old, aside in reversed(self.removed):
            os.replace(aside, old)


def _swap_files(moves: list[tuple[Path, Path]], removals: list[Path], staging: Path) -> _FileSwap:
    """Move each staged file onto its target and each of `removals` into `staging`, keeping what it takes
    the place of (a hard link, so the target is never missing) for `undo`."""
    swap = _FileSwap()
    try:
        for source, target in moves:
            backup = None
            if target.exists():
                backup = staging / f".previous-{uuid.uuid4().hex}"
                os.link(target, backup)
            os.replace(source, target)
            swap.placed.append((target, backup))
        for old in removals:
            if old.exists():
                aside = staging / f".removed-{uuid.uuid4().hex}"
                os.replace(old, aside)
                swap.removed.append((old, aside))
    except BaseException:
        swap.undo()
        raise
    return swap


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) until the block ends, then raise it: for the few seconds of an index swap."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def _batches(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def is_server_or_chroma(spec: str) -> bool:
    return is_postgres_url(spec) or is_chroma_spec(spec)


def _stage(progress: Callable[[str, int, int], None] | None, label: str) -> Progress | None:
    if progress is None:
        return None
    return lambda done, total: progress(label, done, total)


def open(path: str | Path | None = None, *, embedder: Embedder | None = None,
         providers: Sequence[AnswerProvider] | None = None, config: str | Path | None = None,
         **overrides: Any) -> KnowledgeBase:
    """Open the knowledge base of the project at `path` (default: $RAGSTEAD_ROOT, else the current folder):
    its `ragstead.toml`, then `RAGSTEAD_*` variables, then `overrides` (any `Settings` field, e.g.
    `roots=("notes",)`, `store="postgresql://..."`; None keeps the configured value)."""
    settings = load_settings(Path(path) if path else None, Path(config) if config else None)
    return KnowledgeBase(settings.with_overrides(**overrides), embedder=embedder, providers=providers)


TEAM_ROOTS = ("kb", "artifacts", "docs")


def init(path: str | Path = ".", *, layout: str = "personal", owner: str | None = None,
         roots: Sequence[str] | None = None, model: str | None = None, chunker: str | None = None) -> dict[str, Any]:
    """Make `path` (created if missing) a ragstead project: its `ragstead.toml` (roots, owner, model, chunker),
    the `.gitignore` lines that keep the index and the private folders out of git, and for the team layout
    its folders. An existing config keeps every value not given here. Returns what was written."""
    if layout not in ("personal", "team"):
        raise ConfigError(f"layout must be personal or team, got {layout!r}")
    root = Path(path).expanduser()
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    existing = (root / CONFIG_FILE).exists()
    current = load_settings(root)
    values: dict[str, Any] = {"owner": owner or current.owner or default_owner()}
    if roots is not None or not existing:
        values["roots"] = tuple(roots) if roots else (TEAM_ROOTS if layout == "team" else (".",))
    if model:
        values["model"] = model
    if chunker:
        values["chunker"] = chunker
    settings = current.with_overrides(**values)
    settings.chunking  # noqa: B018 - validates the chunker before anything is written
    config = save_settings(root, values)
    created = []
    if layout == "team":
        for folder in (f"kb/users/{settings.owner_slug}", "artifacts/dossiers", "docs/archive"):
            if not (root / folder).exists():
                if folder.startswith("docs/"):
                    (root / folder).mkdir(parents=True)
                else:  # private data: 0700 from the first command, every folder on the way (kb/, kb/users/)
                    make_private_folder(root / folder)
                created.append(folder + "/")
    if not (root / IGNORE_FILE).exists():  # a commented starter: nothing is ignored until a line says so
        (root / IGNORE_FILE).write_text(IGNORE_STARTER, encoding="utf-8")
        created.append(IGNORE_FILE)
    ignored = _gitignore_boundary(root, settings, layout)
    return {"root": str(root), "config": str(config), "settings": {k: list(v) if isinstance(v, tuple) else v
                                                                   for k, v in values.items()},
            "gitignore": ignored, "created": created}


def _gitignore_boundary(root: Path, settings: Settings, layout: str) -> list[str]:
    """Add the lines that keep the index (and the team layout's private folders) out of git, and the
    secret-like file names `ragstead guard` blocks; returns the lines added."""
    index_dir = settings.db_file.parent.resolve()
    lines = [f"/{index_dir.relative_to(root).as_posix()}/"] if index_dir.is_relative_to(root) else []
    if layout == "team":  # private by layout: everything under kb/ and artifacts/ but the two marker files
        lines += ["/kb/*", "!/kb/README.md", "!/kb/.gitkeep", "/artifacts/"]
    lines += SECRET_FILE_PATTERNS
    path = root / ".gitignore"
    present = set(path.read_text(encoding="utf-8").splitlines()) if path.exists() else set()
    added = [line for line in lines if line not in present]
    if added:
        with path.open("a", encoding="utf-8") as out:
            out.write(("" if not present else "\n") + "# ragstead: the index, private folders and secret-like files "
                      "stay out of git\n")
            out.write("\n".join(added) + "\n")
    return added


def model_catalog() -> list[dict[str, Any]]:
    """The embedding models `model` takes: id, name, description, package, installed."""
    return catalog_rows()


def prompt_templates() -> list[dict[str, Any]]:
    """The built-in prompt templates: name, description and number of few-shot examples."""
    rows = []
    for name in sorted(template_catalog()):
        found = load_template(name)
        rows.append({"name": name, "description": found.description, "examples": len(found.examples)})
    return rows


def template_preview(name: str) -> list[dict[str, str]]:
    """The messages a template makes for a demo question and chunk (to see what a model is sent)."""
    demo = [Context(1, "We decided to migrate the billing database to PostgreSQL 16 in March.",
                    "kb/users/alice/db.md", {"page": None, "section_path": "Billing > Decision",
                                             "chunk_id": "0" * 64}, 0.71)]
    return load_template(name).messages("Which database did we choose for billing?", demo)


__all__ = ["DEFAULT_MAX_CONTEXT_TOKENS", "DEFAULT_MIN_SIMILARITY", "DEFAULT_MODEL", "MAX_QUERY_CHARS", "MODES",
           "EvalSettings", "KnowledgeBase", "format_table", "init", "model_catalog", "open", "prompt_templates",
           "template_preview"]
