"""Portable snapshots of one project's index: `export` writes it to one file (stores/snapshot.py has the format),
`import` restores one into any store without parsing or embedding, unless told to re-embed for another model."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ragstead.core.atomic import make_private_folder
from ragstead.indexing.build import record_imported_secrets
from ragstead.indexing.lock import index_lock, interrupts_deferred, scratch_index_folder
from ragstead.indexing.roots import record_import
from ragstead.indexing.secrets_record import secret_counts, secrets_checked
from ragstead.indexing.unfinished import UnfinishedImport, clear_unfinished, mark_unfinished, unfinished_import
from ragstead.services.runtime import Runtime
from ragstead.stores.base import Store
from ragstead.stores.factory import StoreSpec
from ragstead.stores.migrate import copy_store
from ragstead.stores.snapshot import (
    DocumentEmbedder,
    ExportReport,
    ImportReport,
    SnapshotManifest,
    check_snapshot_model,
    read_manifest,
    restore_snapshot,
    snapshot_path,
    write_snapshot,
)


class Snapshots:
    """Export and import of the index of one `Runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def export_snapshot(self, path: str | Path) -> ExportReport:
        """Write the index (documents, chunks, vectors, metadata, sources, tags, scopes, the model's name and
        dimension) to one private file (0600), `path` with `.ragsnap` added unless it ends so. Nothing is
        embedded; the index is only read."""
        rt = self.runtime
        options = rt.settings.indexing()
        with rt.lock:
            return write_snapshot(rt.store, snapshot_path(path), secrets={
                "checked": secrets_checked(options), "files": secret_counts(options)})

    def import_snapshot(self, path: str | Path, *, store: str | None = None, replace: bool = False,
                        reembed: bool = False) -> ImportReport:
        """Restore the snapshot `path` into this project's store (or the store `store` names), which must be
        empty unless `replace`. Nothing is parsed or embedded (`report.embedded == 0`), unless `reembed`: then
        every chunk is embedded again with the project's model. A snapshot of another model than the project's
        is refused without `reembed`; a damaged one (a bad sum, a malformed record, a duplicate id) is refused
        whole, before anything is written.

        With `replace`, a target that holds documents keeps them until the snapshot is in a scratch index beside
        it (embedded there with `reembed`), then the scratch index is swapped in, as `index --rebuild` does. A
        marker beside the index lock says an import is under way until the target holds all of it: after a
        SIGKILL `status` reports it, and the next import of the same snapshot finishes it (another snapshot
        replaces the part)."""
        rt = self.runtime
        path = Path(path)
        manifest = read_manifest(path)  # a damaged file fails here, before any store is opened
        settings = rt.settings if store is None else rt.settings.with_overrides(store=store)
        spec = settings.store_spec()
        folder = rt.settings.lock_file.parent
        with index_lock(rt.settings.lock_file):  # no `ragstead index` of this project while it is filled
            target = rt.given_store if store is None and rt.given_store is not None else spec.open()
            try:
                unfinished = unfinished_import(folder, spec.describe())
                embedder = rt.load_embedder(target) if reembed else None
                if embedder is None:  # an unfinished import's part is no index of the project's
                    check_snapshot_model(manifest, *self._project_model(settings.model, target,
                                                                        replace or unfinished is not None))
                entry = UnfinishedImport(str(path.resolve()), manifest.sha256, spec.describe(), manifest.documents,
                                         datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
                report = self._restore(path, manifest, target, entry, replace=replace, embedder=embedder,
                                       unfinished=unfinished)
                if store is None:  # the project's own index: what later runs and `status` must know of it
                    self._record_import(target, manifest)
                clear_unfinished(folder)
                return report
            finally:
                if target is not rt.given_store:
                    target.close()

    def _restore(self, path: Path, manifest: SnapshotManifest, target: Store, entry: UnfinishedImport, *,
                 replace: bool, embedder: DocumentEmbedder | None,
                 unfinished: UnfinishedImport | None) -> ImportReport:
        """Write the (checked) snapshot into `target` with the marker set: finishing an unfinished import of the
        same snapshot, replacing one of another, swapping a scratch index in for a `replace` of documents, or
        straight into an empty target (which a failure leaves empty, and unmarked)."""
        folder = self.runtime.settings.lock_file.parent
        if unfinished is not None:
            resume = unfinished.sums == manifest.sha256
            mark_unfinished(folder, entry)
            return restore_snapshot(path, target, replace=not resume, resume=resume, embedder=embedder,
                                    manifest=manifest)
        if replace and target.stats()["documents"]:
            return self._swap_in(path, manifest, target, entry, embedder)
        mark_unfinished(folder, entry)
        try:
            return restore_snapshot(path, target, replace=replace, embedder=embedder, manifest=manifest)
        except BaseException:
            clear_unfinished(folder)  # restore_snapshot emptied the target again: nothing is half there
            raise

    def _swap_in(self, path: Path, manifest: SnapshotManifest, target: Store, entry: UnfinishedImport,
                 embedder: DocumentEmbedder | None) -> ImportReport:
        """`import --replace` over an index: the snapshot goes into a scratch SQLite index beside the real one
        first (a failure or Ctrl-C there leaves the real one as it was), then replaces the target's documents,
        Ctrl-C held until the swap ends; a SIGKILL inside it leaves the marker for the next import."""
        rt = self.runtime
        folder = rt.settings.db_file.parent
        make_private_folder(folder)
        with scratch_index_folder(folder, ".import-") as scratch:
            aside = StoreSpec.parse(f"sqlite:{scratch}/ragstead.db", root=rt.root, default_db=Path()).open()
            try:
                report = restore_snapshot(path, aside, embedder=embedder, manifest=manifest)
                mark_unfinished(rt.settings.lock_file.parent, entry)
                with interrupts_deferred():
                    copy_store(aside, target, replace=True)
                    if manifest.chunking:
                        target.record_chunking(manifest.chunking)
                    target.settle_lexical()
            finally:
                aside.close()
        report.target = target.stats()["path"]
        return report

    def _record_import(self, target: Store, manifest: SnapshotManifest) -> None:
        """The snapshot's secrets state (unknown when it does not say: never the false "predates masking"),
        and its roots, whose files may be on another machine: index runs keep their documents then."""
        options = self.runtime.settings.indexing()
        secrets = manifest.secrets or {"checked": None, "files": {}}
        record_imported_secrets(options, secrets["checked"], secrets["files"])
        record_import(options.lock_file.parent, [entry.root for entry in target.manifest().values()])

    def _project_model(self, configured: str, target: Store, replace: bool) -> tuple[str | None, int | None]:
        """The project's model (name, dimension): the embedder given or configured, else the one the target
        index was built with (unless it is replaced); (None, None) for a project without one yet."""
        rt = self.runtime
        if rt.given_embedder is not None or configured:
            embedder = rt.load_embedder(target)
            return embedder.name, embedder.dim
        stats = target.stats() if not replace else {}
        if stats.get("embed_model"):
            return stats["embed_model"], int(stats["embed_dim"] or 0)
        return None, None
