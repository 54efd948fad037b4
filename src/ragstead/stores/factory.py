"""One place that reads a store setting and opens the backend it names.

    ""  or "sqlite"          the embedded default: SQLite + tantivy at the project's index file
    "sqlite:PATH"            the embedded store in another file (relative to the project root)
    "postgresql://..."       PostgreSQL + pgvector (also "postgres://"); "?partition=user" partitions a new index's
                             chunks by user (stores/postgres_partitions.py)
    "chroma:PATH"            Chroma (embedded) for vectors, with the SQLite side in PATH
    "chroma+http://host:port[?db=PATH]"   a Chroma server for vectors, the SQLite side at the index file (or PATH)
    "milvus:PATH.db"         Milvus Lite for vectors, the SQLite side beside it (PATH.sqlite)
    "milvus://host:19530[/db][?db=PATH]"  a Milvus server for vectors, the SQLite side at the index file (or PATH)

Backends are imported only when opened, so a CLI command never pays for a driver it does not use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ragstead.errors import ConfigError, RagsteadError
from ragstead.stores.base import Store
from ragstead.stores.redaction import redact

__all__ = ["STORE_KINDS", "StoreSpec", "is_chroma_spec", "is_milvus_spec", "is_postgres_url", "open_store", "redact"]

STORE_KINDS = ("'sqlite', 'sqlite:PATH', 'postgresql://user@host:port/dbname', 'chroma:PATH' or "
               "'chroma+http://host:port', 'milvus:PATH.db' or 'milvus://host:19530'")


def is_postgres_url(spec: str) -> bool:
    """True for postgresql:// and postgres:// connection URLs."""
    return spec.startswith(("postgresql://", "postgres://"))


def is_chroma_spec(spec: str) -> bool:
    """True for chroma:PATH, chroma+http:// and chroma+https:// store settings."""
    return spec.startswith(("chroma:", "chroma+http://", "chroma+https://"))


def is_milvus_spec(spec: str) -> bool:
    """True for milvus:PATH.db (Milvus Lite), milvus:// and milvus+https:// store settings."""
    return spec.startswith(("milvus:", "milvus+https://"))


@dataclass(frozen=True)
class StoreSpec:
    """A parsed store setting: which backend, where its SQLite file is (if it has one), and the raw spec.

    `raw` may hold a password: print `describe()`, never `raw`. Anything else that embeds a setting or a
    driver's message about one goes through `redact()` (stores/redaction.py, the one place that masks).
    """

    kind: str  # sqlite | postgresql | chroma | milvus
    raw: str
    sqlite_file: Path | None
    root: Path
    # The folder of the configured index file (`--db`): the project's lock files and API keys live there,
    # so a store that writes on disk keeps it private too (stores/permissions.py).
    index_folder: Path | None = None

    @classmethod
    def parse(cls, spec: str, *, root: Path, default_db: Path) -> StoreSpec:
        """Parse a store setting; relative paths resolve against `root`. A malformed one is a ConfigError."""
        spec = (spec or "").strip()
        folder = default_db.parent if default_db.name else None
        if is_postgres_url(spec):
            return cls("postgresql", spec, None, root, folder)
        if is_chroma_spec(spec):
            location = _chroma_location(spec, root, default_db)
            return cls("chroma", spec, location.sqlite_file, root, folder)
        if is_milvus_spec(spec):
            return cls("milvus", spec, _milvus_location(spec, root, default_db).sqlite_file, root, folder)
        if spec in ("", "sqlite"):
            return cls("sqlite", spec, default_db, root, folder)
        if spec.startswith("sqlite:") and spec.removeprefix("sqlite:").strip():
            return cls("sqlite", spec, _resolve(root, spec.removeprefix("sqlite:").strip()), root, folder)
        raise ConfigError(f"unknown store {redact(spec)!r}; use {STORE_KINDS}")

    def describe(self) -> str:
        """Where the index lives, safe to print (no password, no secret parameter)."""
        if self.kind == "postgresql":
            return redact(self.raw)
        if self.kind == "chroma":
            return redact(_chroma_location(self.raw, self.root, self.sqlite_file or Path()).describe())
        if self.kind == "milvus":
            return redact(_milvus_location(self.raw, self.root, self.sqlite_file or Path()).describe())
        return redact(str(self.sqlite_file))

    def same_place(self, other: StoreSpec) -> bool:
        """Both name one store, or share its SQLite file."""
        return self.describe() == other.describe() or (
            self.sqlite_file is not None and self.sqlite_file == other.sqlite_file
        )

    def exists(self) -> bool:
        """Whether an index is already there (a server store is taken to exist: opening it says otherwise)."""
        return self.sqlite_file is None or self.sqlite_file.exists()

    def open(self, *, must_exist: bool = False) -> Store:
        """Open the store. `must_exist`: a missing index file is an error (read-only commands), not a new index."""
        if must_exist and not self.exists():
            raise RagsteadError(f"no index at {self.sqlite_file}; run `ragstead index` first")
        return _BACKENDS[self.kind](self)


def _resolve(root: Path, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else root / path


def _chroma_location(spec: str, root: Path, default_db: Path):  # type: ignore[no-untyped-def]
    from ragstead.stores.chroma import ChromaLocation

    return ChromaLocation.parse(spec, lambda value: _resolve(root, value), default_db)


def _milvus_location(spec: str, root: Path, default_db: Path):  # type: ignore[no-untyped-def]
    from ragstead.stores.milvus import MilvusLocation

    return MilvusLocation.parse(spec, lambda value: _resolve(root, value), default_db)


def _open_sqlite(spec: StoreSpec) -> Store:
    from ragstead.stores.sqlite import SqliteStore

    assert spec.sqlite_file is not None
    return SqliteStore(spec.sqlite_file, project_root=spec.root, private_folders=_private_folders(spec))


def _open_postgres(spec: StoreSpec) -> Store:
    from ragstead.stores.postgres import PostgresStore

    return PostgresStore(spec.raw)


def _open_chroma(spec: StoreSpec) -> Store:
    from ragstead.stores.chroma import open_chroma_store

    return open_chroma_store(_chroma_location(spec.raw, spec.root, spec.sqlite_file or Path()),
                             project_root=spec.root, private_folders=_private_folders(spec))


def _open_milvus(spec: StoreSpec) -> Store:
    from ragstead.stores.milvus import open_milvus_store

    return open_milvus_store(_milvus_location(spec.raw, spec.root, spec.sqlite_file or Path()),
                             project_root=spec.root, private_folders=_private_folders(spec))


def _private_folders(spec: StoreSpec) -> tuple[Path, ...]:
    return () if spec.index_folder is None else (spec.index_folder,)


_BACKENDS: dict[str, Callable[[StoreSpec], Store]] = {
    "sqlite": _open_sqlite,
    "postgresql": _open_postgres,
    "chroma": _open_chroma,
    "milvus": _open_milvus,
}


def open_store(spec: StoreSpec, *, must_exist: bool = False) -> Store:
    """Open the store a parsed spec names (see `StoreSpec.open`)."""
    return spec.open(must_exist=must_exist)
