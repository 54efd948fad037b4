"""Portable snapshots of one project's index: `export` writes it to one file (stores/snapshot.py has the format),
`import` restores one into any store without parsing or embedding, unless told to re-embed for another model."""

from __future__ import annotations

from pathlib import Path

from ragstead.indexing.build import record_imported_secrets, secret_counts, secrets_checked
from ragstead.indexing.lock import index_lock
from ragstead.indexing.roots import record_import
from ragstead.runtime import Runtime
from ragstead.stores.base import Store
from ragstead.stores.snapshot import (
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
        is refused without `reembed`; a damaged one is refused whole, before anything is written."""
        rt = self.runtime
        path = Path(path)
        manifest = read_manifest(path)  # a damaged file fails here, before any store is opened
        settings = rt.settings if store is None else rt.settings.with_overrides(store=store)
        spec = settings.store_spec()
        with index_lock(rt.settings.lock_file):  # no `ragstead index` of this project while it is filled
            target = rt.given_store if store is None and rt.given_store is not None else spec.open()
            try:
                embedder = rt.load_embedder(target) if reembed else None
                if embedder is None:
                    check_snapshot_model(manifest, *self._project_model(settings.model, target, replace))
                report = restore_snapshot(path, target, replace=replace, embedder=embedder, manifest=manifest)
                if store is None:  # the project's own index: what later runs and `status` must know of it
                    self._record_import(target, manifest)
                return report
            finally:
                if target is not rt.given_store:
                    target.close()

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
