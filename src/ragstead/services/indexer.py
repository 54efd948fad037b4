"""The index service: every write that brings a project's index in line with its files.

Index runs (incremental or a rebuild into a scratch index that is swapped in), single files, deletions,
in-memory records, memory facts and store migrations. Each write passes the settings guard first (an index
is cut one way) and settles the lexical statistics after. It stands above `Runtime` (it reads `Settings`),
so it lives beside it rather than in `ragstead.indexing`, which holds the pipeline below the config layer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragstead.core.atomic import make_private_folder
from ragstead.documents.chunking import ChunkingOptions
from ragstead.documents.ids import file_of, fs_path
from ragstead.documents.loaders import LOADERS, is_supported
from ragstead.documents.metadata import derive_metadata
from ragstead.documents.secrets import MASKING_IMPROVED
from ragstead.embeddings.base import Embedder
from ragstead.errors import ConfigError, DocumentNotFoundError, InvalidQueryError, RagsteadError
from ragstead.filters import clean_text
from ragstead.indexing.build import (
    IndexReport,
    ProgressHook,
    TextRecord,
    Within,
    index_paths,
    index_records,
    index_roots,
    restore_secrets_record,
    secrets_record,
    tell_masking_improved,
)
from ragstead.indexing.languages import forget_languages
from ragstead.indexing.lock import index_lock, interrupts_deferred, scratch_index_folder
from ragstead.indexing.roots import missing_roots
from ragstead.indexing.textless import forget_all as forget_textless
from ragstead.memory.files import RememberResult
from ragstead.memory.files import remember as remember_fact
from ragstead.retrieval.rerank import fill_sentence_vectors
from ragstead.services.runtime import Runtime
from ragstead.stores.base import SentenceVectors, Store
from ragstead.stores.factory import StoreSpec
from ragstead.stores.migrate import MigrationReport, copy_store

SUPPORTED_SUFFIXES = tuple(sorted(LOADERS))


class Indexer:
    """Writes to the index of one `Runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def index(self, paths: Sequence[str | Path] | None = None, *, rebuild: bool = False, wait: float = 0.0,
              progress: ProgressHook | None = None, prune_missing_roots: bool = False,
              remask: bool = False) -> IndexReport:
        """Bring the index in line with the files under `paths` (folders inside the project; default: the
        configured roots). Incremental: only new or changed files are embedded. `rebuild` re-embeds all.
        `remask` reads every file again and masks it with this detector; only chunks whose text changed are
        embedded (the others keep their vectors, cached by text).
        The documents of a root this machine cannot re-read (a missing folder, an imported root whose files are
        elsewhere) are kept and named in `report.missing_roots`, unless `prune_missing_roots`."""
        roots = self.existing_roots(paths)
        if rebuild:
            return self._rebuild(roots, wait, progress, prune_missing_roots)
        rt = self.runtime
        with rt.writer() as store, self.guarded(store):
            report = index_roots(rt.settings.indexing(roots), store, rt.load_embedder(store), roots, False,
                                 wait, progress, prune_missing_roots=prune_missing_roots, remask=remask)
            self.fill_sentence_vectors(store, report, progress)
        return report

    def masking_notice(self) -> str | None:
        """`index`'s note, once, for an index masked by an older detector (status says it until applied)."""
        options = self.runtime.settings.indexing()
        return MASKING_IMPROVED if tell_masking_improved(options) else None

    def sync(self, roots: tuple[str, ...], within: Within | None, wait: float) -> IndexReport:
        """An incremental run over `roots`, narrowed to `within` (the paths a file watcher saw change)."""
        rt = self.runtime
        with rt.writer() as store, self.guarded(store):
            return index_roots(rt.settings.indexing(roots), store, rt.load_embedder(store), roots, False, wait,
                               within=within)

    def fill_sentence_vectors(self, store: Store, report: IndexReport, progress: ProgressHook | None = None) -> None:
        """With `sentence_vectors` on: embed the sentences of every chunk that has none stored yet (the
        re-ranker's, retrieval/rerank.py), timed apart from the index run; `progress` counts those chunks. A store
        without the capability (a plugin's) stores none: the re-ranker embeds sentences when it reads them."""
        if not self.runtime.settings.sentence_vectors or not isinstance(store, SentenceVectors):
            return
        started = time.perf_counter()
        report.sentence_vector_chunks = fill_sentence_vectors(store, self.runtime.load_embedder(store), progress)
        report.sentence_vector_seconds = time.perf_counter() - started

    @contextmanager
    def guarded(self, store: Store) -> Iterator[None]:
        """Every write: the settings guard before it; after it, the chunking recorded (a new index) and the
        lexical statistics settled (deleted chunks no longer count in BM25)."""
        self._check_chunking(store)
        yield
        if store.chunking() is None:
            store.record_chunking(self.runtime.settings.chunking.describe())
        store.settle_lexical()
        self.fill_sentence_vectors(store, IndexReport())  # the chunks this write added (index() did its own)

    def _check_chunking(self, store: Store) -> None:
        """The settings guard: an index is cut one way. New chunking settings on an existing index are refused
        with the command that applies them, never mixed in silently."""
        recorded, wanted = store.chunking(), self.runtime.settings.chunking.describe()
        if recorded is None and store.embed_model() is not None:
            # Written before the index recorded its chunking: by the defaults, unless someone passed flags.
            recorded = ChunkingOptions().describe()
            store.record_chunking(recorded)
        if recorded is not None and recorded != wanted:
            raise ConfigError(f"the index was cut with {recorded}, but the settings now say {wanted}; run "
                              "`ragstead index --rebuild` to re-cut every document that way, or set them back")

    def existing_roots(self, paths: Sequence[str | Path] | None) -> tuple[str, ...]:
        """The folders an index run walks, checked before anything is created: folders named in `paths` must
        exist; of the configured roots, those that exist. No supported file under any of them, and no index
        yet, is an error that says where it looked."""
        rt = self.runtime
        if paths:
            roots = []
            for path in paths:
                full = Path(path) if Path(path).is_absolute() else rt.root / path
                if not full.is_dir():
                    raise InvalidQueryError(f"{path} is not a folder" if full.exists() else
                                            f"no such folder: {path}; check the path (folders are relative to "
                                            f"the project root {rt.root})")
                roots.append(rt.relative_path(full))
            found = tuple(dict.fromkeys(roots))
        else:
            found = tuple(r for r in rt.settings.roots if (rt.root / r).is_dir())
        if not rt.exists() and not any(self._has_supported_file(rt.root / r) for r in found):
            looked = ", ".join(found or rt.settings.roots)
            raise InvalidQueryError(
                f"no supported files under {looked} (looked for {', '.join(SUPPORTED_SUFFIXES)}); "
                f"pass the folder of your documents: `ragstead index PATH`")
        return found

    def _has_supported_file(self, folder: Path) -> bool:
        own = self.runtime.settings.db_file.parent.resolve()
        for current, folders, names in os.walk(folder):
            folders[:] = [d for d in folders if not d.startswith(".") and (Path(current) / d).resolve() != own]
            if any(not name.startswith(".") and is_supported(Path(name)) for name in names):
                return True
        return False

    def _rebuild(self, roots: tuple[str, ...], wait: float, progress: ProgressHook | None,
                 prune_missing_roots: bool = False) -> IndexReport:
        """Re-embed everything with the configured model into a scratch index beside the real one, then swap
        its documents in. A failure or Ctrl-C while embedding leaves the old index as it was, and every root
        the old index holds is rebuilt too, so a rebuild never drops a root. The documents of a root this
        machine cannot re-read are carried over as they are (same model and chunking), or, when they could not
        be, the old index is kept whole and nothing is rebuilt; `prune_missing_roots` drops them instead."""
        rt, settings = self.runtime, self.runtime.settings
        with index_lock(settings.lock_file, wait), rt.writer() as store:
            manifest = store.manifest()
            known = {entry.root for entry in manifest.values()}
            missing = missing_roots(rt.root, settings.lock_file.parent, manifest)
            carried = {m.root for m in missing} if not prune_missing_roots else set()
            roots = tuple(dict.fromkeys((*roots, *settings.roots, *sorted(known))))
            roots = tuple(r for r in roots if (rt.root / r).is_dir() and r not in carried)
            embedder = rt.load_embedder(None)  # the configured model, whatever the old index holds
            if carried and not self._can_carry(store, embedder):
                # New vectors or chunks next to the old ones would mix two indexes: keep the old one whole.
                return IndexReport(missing_roots=missing)
            old_secrets = secrets_record(settings.indexing())
            forget_textless(settings.lock_file.parent)  # a rebuild reads every file again, photos without text too
            forget_languages(settings.lock_file.parent)  # and writes every document again
            folder = settings.db_file.parent
            make_private_folder(folder)
            with scratch_index_folder(folder, ".rebuild-") as scratch:
                aside = StoreSpec.parse(f"sqlite:{scratch}/ragstead.db", root=rt.root, default_db=Path()).open()
                try:
                    report = index_roots(settings.indexing(roots), aside, embedder, roots, False,
                                         progress=progress, take_lock=False)
                    kept: set[str] = set()
                    for batch in _batches((w for w in store.export_documents() if w.document.root in carried), 50):
                        aside.apply(batch, [], [])
                        kept.update(w.document.file_path for w in batch)
                    with interrupts_deferred():  # the swap runs to its end once it has begun
                        store.reset()
                        store.ensure_model(embedder.name, embedder.dim)
                        store.record_chunking(settings.chunking.describe())
                        for batch in _batches(aside.export_documents(), 50):
                            store.apply(batch, [], [])
                finally:
                    aside.close()
            if kept:
                restore_secrets_record(settings.indexing(), old_secrets, kept)
            self.fill_sentence_vectors(store, report, progress)
        report.rebuild = True
        report.missing_roots, report.pruned = missing, bool(missing) and prune_missing_roots
        return report

    def _can_carry(self, store: Store, embedder: Embedder) -> bool:
        """Whether the old index's documents fit the rebuilt one as they are: same model, same chunking."""
        recorded = store.chunking() or ChunkingOptions().describe()  # none recorded: cut by the defaults
        return store.embed_model() == embedder.name and recorded == self.runtime.settings.chunking.describe()

    def index_files(self, rels: list[str], wait: float, embedder: Embedder | None = None,
                    *, roots: tuple[str, ...] | None = None) -> IndexReport:
        """Index exactly these project-relative files (under `roots`, default the configured ones); `embedder`
        replaces the runtime's (an ingest that embeds once for every target)."""
        rt = self.runtime
        with rt.writer() as store, self.guarded(store):
            return index_paths(rt.settings.indexing(roots), store, embedder or rt.load_embedder(store), rels, wait)

    def add(self, path: str | Path, *, wait: float = 30.0) -> IndexReport:
        """Index (or re-index) exactly this file, a path inside one of the configured roots."""
        return self.index_files([self.runtime.relative_path(path)], wait)

    def delete(self, path: str | Path | None = None, *, doc_id: str | None = None, user: str | None = None,
               wait: float = 30.0) -> dict[str, Any]:
        """Delete a document (by path or id): its file and its chunks in the index. With `user`, only that
        user's own private document can be deleted; anything else answers exactly like a missing one."""
        rt = self.runtime
        if (path is None) == (doc_id is None):
            raise InvalidQueryError("give a path or a doc_id")
        doc = rt.document(doc_id) if doc_id is not None else rt.document(path=rt.relative_path(path or ""))
        if doc is None or (user is not None and not self._owns(user, doc)):
            raise DocumentNotFoundError("no such document")
        if file_of(doc["file_path"]) != doc["file_path"]:  # unlinking would take every other message with it
            raise InvalidQueryError(f"{doc['file_path']} is a message or attachment inside "
                                    f"{file_of(doc['file_path'])}: delete it there, or delete that file")
        fs_path(rt.root, doc["file_path"]).unlink(missing_ok=True)  # stored paths escape non-UTF-8 bytes
        self.index_files([doc["file_path"]], wait)
        return {"deleted": doc["doc_id"], "file_path": doc["file_path"]}

    def _owns(self, user: str, doc: dict[str, Any]) -> bool:
        """The document is `user`'s own private document, by its stored scope and by where its file is."""
        if not doc["is_private"] or doc["user_slug"] != user:
            return False
        root = self.runtime.root
        derived = derive_metadata(doc["file_path"], None, self.runtime.settings.scope_rules)
        inside = (root / doc["file_path"]).resolve().is_relative_to(root.resolve())
        return derived.is_private and derived.user_slug == user and inside

    def index_records(self, records: list[TextRecord], *, root: str = "kb/corpus",
                      progress: ProgressHook | None = None) -> IndexReport:
        """Index in-memory texts under `<root>/<key>`, incrementally (records missing from `records` go)."""
        rt = self.runtime
        with rt.writer() as store:
            return index_records(rt.settings.indexing((root,)), store, rt.load_embedder(store), records, root,
                                 progress)

    def remember(self, text: str, *, user: str | None = None, dry_run: bool = False, index: bool = True,
                 wait: float = 30.0) -> RememberResult:
        """Remember a high-signal fact or preference in the user's memory file (never secrets or PII), and
        index that file unless `index` is False. `user` defaults to the owner of a personal project; a team
        project needs it."""
        rt = self.runtime
        settings = rt.settings
        user = self.memory_user(user)
        return remember_fact(clean_text(text), user, rt.root, lock_dir=settings.db_file.parent,
                             index=(lambda rels: self.index_files(rels, wait)) if index else None,
                             dry_run=dry_run, wait_seconds=wait, folder=settings.user_folder(user))

    def memory_user(self, user: str | None) -> str:
        """Whose memory a write goes to: `user`, or a personal project's owner; a team project needs a user (an
        error naming the `remember` field, before anything is answered or written)."""
        if user:
            return user
        if not self.runtime.settings.personal:
            raise InvalidQueryError("remember needs a user in a team project (--user SLUG): memory belongs to one "
                                    "person", fields=("remember",))
        return self.runtime.settings.owner_slug

    def migrate(self, target: str, *, replace_target: bool = False,
                progress: ProgressHook | None = None) -> MigrationReport:
        """Copy this index, vectors included, into the (empty) store `target` names."""
        rt = self.runtime
        to_spec = rt.settings.with_overrides(store=target).store_spec()
        if rt.spec.same_place(to_spec):
            raise RagsteadError("--from and --to name the same store (or share its index file)")
        with index_lock(rt.settings.lock_file):  # no `ragstead index` of this project while the copy runs
            to_store = to_spec.open()
            try:
                return copy_store(rt.store, to_store, replace=replace_target, progress=progress)
            finally:
                to_store.close()


def _batches(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
