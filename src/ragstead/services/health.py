"""Health of one project: readiness for a server, the index's status, and the privacy of its files (doctor)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragstead.documents.secrets import DETECTOR_VERSION
from ragstead.errors import RagsteadError, one_line_reason
from ragstead.indexing.languages import language_counts, model_advice
from ragstead.indexing.secrets_record import secret_counts, secrets_checked, secrets_detector, secrets_imported
from ragstead.indexing.unfinished import unfinished_import
from ragstead.memory.files import FILES as MEMORY_FILES
from ragstead.services.runtime import Runtime
from ragstead.stores import permissions

if TYPE_CHECKING:
    from ragstead.embeddings.base import Embedder


class Health:
    """Checks on the index and files of one `Runtime`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def status(self) -> dict[str, Any]:
        """`stats()` plus the integrity check, `permissions`: the index files and folders others could read
        (looser than 0600 / 0700; empty when all is private), and `unfinished_import` when an import into this
        store stopped part-way."""
        rt = self.runtime
        with rt.lock:
            stats = rt.store.stats() | {"integrity": rt.store.integrity_check()}
        options = rt.settings.indexing()  # privacy: files whose secrets the index masks
        secrets = secret_counts(options)
        checked = secrets_checked(options)  # None: imported from a snapshot that does not say
        stats |= {"secrets": {"files": len(secrets), "masked": sum(secrets.values()),
                              "checked": True if not stats.get("documents") else checked}}
        if secrets_imported(options):  # the files are on the machine the snapshot came from
            stats["secrets"]["imported"] = True
        elif stats.get("documents") and checked and secrets_detector(options) < DETECTOR_VERSION:
            stats["secrets"]["outdated"] = True  # masked by an older detector: `index --remask` applies this one
        stats |= self.languages(stats.get("embed_model"))
        unfinished = unfinished_import(rt.settings.lock_file.parent, rt.spec.describe())
        if unfinished is not None:  # a SIGKILLed import: the index holds part of a snapshot, not an index
            stats["unfinished_import"] = unfinished.to_dict()
        return stats | {"permissions": [p.to_dict() for p in permissions.find_loose(self.private_paths())]}

    def languages(self, index_model: str | None) -> dict[str, Any]:
        """The documents' languages as the index runs detected them (#47.1), and `model_advice` when most are not in
        English and the index's model (else the configured one) was trained on English only."""
        counts = language_counts(self.runtime.settings.lock_file.parent)
        advice = model_advice(counts, index_model or self.runtime.settings.model)
        return ({"languages": counts} if counts else {}) | ({"model_advice": advice} if advice else {})

    def doctor(self, fix: bool = False) -> dict[str, Any]:
        """Check that the index, its lock files, the API key file and the memory files are private (files 0600,
        folders 0700); with `fix`, take group and other permissions off those that are not.
        Returns {ok, loose, fixed, remaining} (each a list of {path, kind, mode, wanted})."""
        return permissions.doctor(self.private_paths(), fix=fix, folders=self.private_folders())

    def private_folders(self) -> list[Path]:
        """The folders of private data `init` makes 0700, checked themselves (not walked): kb/, kb/users/ and
        each user's folder, artifacts/ and its dossiers."""
        root = self.runtime.root
        folders = [root / "kb", root / "kb" / "users", *sorted((root / "kb" / "users").glob("*/")),
                   root / "artifacts", root / "artifacts" / "dossiers"]
        return [f for f in folders if f.is_dir() and not f.is_symlink()]

    def private_paths(self) -> list[Path]:
        """What `status` and `doctor` check: the index's folder (or its files), the folder of the configured
        index file (API keys, memory lock), the index lock and every user's memory files."""
        rt, settings = self.runtime, self.runtime.settings
        indexes = [f for f in (rt.spec.sqlite_file, settings.db_file) if f is not None]
        memory = sorted(p for name in MEMORY_FILES.values()  # memory/ itself: a personal project's owner's
                        for pattern in (f"kb/users/*/memory/{name}", f"memory/{name}") for p in rt.root.glob(pattern))
        files = [settings.lock_file, rt.api_keys_file, settings.db_file.parent / "memory.lock", *memory]
        return permissions.private_paths(rt.root, indexes, files)

    def readiness(self) -> dict[str, Any]:
        """Each check a server needs before it can answer: the store reachable (a real round trip), the
        embedder loaded (a real embedding) and the model the index was built with. Never raises: `status` is
        "ready" when every check passes, else "not_ready", and each failed check says why."""
        rt = self.runtime
        checks: dict[str, dict[str, Any]] = {}
        stats: dict[str, Any] = {}
        embedder: Embedder | None = None
        with rt.lock:
            try:
                stats = rt.store.stats()
                checks["store"] = {"ok": True, "backend": rt.spec.kind}
            except Exception as exc:  # an unreachable server, a damaged file: reported, not raised
                checks["store"] = {"ok": False, "error": one_line_reason(exc)}
            try:
                embedder = rt.embedder if checks["store"]["ok"] else rt.load_embedder(None)
                vector = embedder.embed_query("readiness")
                checks["embedder"] = {"ok": len(vector) == embedder.dim, "model": embedder.name, "dim": embedder.dim}
            except Exception as exc:  # a model that fails to load or run: reported, not raised
                checks["embedder"] = {"ok": False, "error": one_line_reason(exc)}
            if checks["store"]["ok"] and embedder is not None:
                try:
                    rt.store.check_model(embedder.name, embedder.dim)
                    checks["model_guard"] = {"ok": True, "index_model": rt.store.embed_model() or embedder.name}
                except RagsteadError as exc:
                    checks["model_guard"] = {"ok": False, "error": one_line_reason(exc)}
        ready = all(check["ok"] for check in checks.values()) and len(checks) == 3
        return {"status": "ready" if ready else "not_ready", "checks": checks,
                "model": embedder.name if embedder is not None else None,
                "documents": stats.get("documents"), "chunks": stats.get("chunks")}
