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

The part before the first ':' (and before a '+') names the backend in the "ragstead.stores" registry
(ragstead/plugins.py): the built-ins below, or a store another package adds with one entry point whose value is
a `StoreBackend`. A name nobody registered is one ConfigError line listing the known ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ragstead.errors import ConfigError, RagsteadError
from ragstead.plugins import Registry
from ragstead.stores.base import Store
from ragstead.stores.redaction import redact

__all__ = ["STORES", "STORE_KINDS", "StoreBackend", "StoreSpec", "is_chroma_spec", "is_milvus_spec",
           "is_postgres_url", "open_store", "redact"]

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
class StoreBackend:
    """What a store setting's name resolves to: a built-in below, or a plugin's entry point in "ragstead.stores".

    `locate(raw, root, default_db)` checks the setting (a ConfigError if malformed) and returns the backend's
    SQLite file, or None when it keeps everything on a server; `describe(spec)` is the place, safe to print;
    `open(spec)` returns the `Store`. Import the driver inside `open`: the registry imports this module when the
    name is first used, and parsing a setting should not load a driver.
    """

    kind: str  # what StoreSpec.kind reports (postgres:// and postgresql:// are one kind)
    open: Callable[[StoreSpec], Store]
    locate: Callable[[str, Path, Path], Path | None] = lambda raw, root, default_db: None
    describe: Callable[[StoreSpec], str] = lambda spec: redact(spec.raw)


@dataclass(frozen=True)
class StoreSpec:
    """A parsed store setting: which backend, where its SQLite file is (if it has one), and the raw spec.

    `raw` may hold a password: print `describe()`, never `raw`. Anything else that embeds a setting or a
    driver's message about one goes through `redact()` (stores/redaction.py, the one place that masks).
    """

    kind: str  # sqlite | postgresql | chroma | milvus | a plugin's StoreBackend.kind
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
        backend = _backend(spec)
        return cls(backend.kind, spec, backend.locate(spec, root, default_db), root, folder)

    def describe(self) -> str:
        """Where the index lives, safe to print (no password, no secret parameter)."""
        return _backend(self.raw).describe(self)

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
        return _backend(self.raw).open(self)


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


def _locate_sqlite(raw: str, root: Path, default_db: Path) -> Path:
    if raw in ("", "sqlite"):
        return default_db
    path = raw.removeprefix("sqlite:").strip()
    if not raw.startswith("sqlite:") or not path:
        raise _unknown(raw)
    return _resolve(root, path)


def _locate_postgres(raw: str, root: Path, default_db: Path) -> None:
    if not is_postgres_url(raw):
        raise _unknown(raw)


def _locate_chroma(raw: str, root: Path, default_db: Path) -> Path | None:
    if not is_chroma_spec(raw):
        raise _unknown(raw)
    return _chroma_location(raw, root, default_db).sqlite_file


def _locate_milvus(raw: str, root: Path, default_db: Path) -> Path | None:
    if not is_milvus_spec(raw):
        raise _unknown(raw)
    return _milvus_location(raw, root, default_db).sqlite_file


SQLITE = StoreBackend("sqlite", _open_sqlite, _locate_sqlite, lambda spec: redact(str(spec.sqlite_file)))
POSTGRES = StoreBackend("postgresql", _open_postgres, _locate_postgres)
CHROMA = StoreBackend("chroma", _open_chroma, _locate_chroma, lambda spec: redact(
    _chroma_location(spec.raw, spec.root, spec.sqlite_file or Path()).describe()))
MILVUS = StoreBackend("milvus", _open_milvus, _locate_milvus, lambda spec: redact(
    _milvus_location(spec.raw, spec.root, spec.sqlite_file or Path()).describe()))

# The store names: the built-ins here, other packages' through the "ragstead.stores" entry points.
STORES = Registry("ragstead.stores", {
    "sqlite": "ragstead.stores.factory:SQLITE",
    "postgresql": "ragstead.stores.factory:POSTGRES",
    "postgres": "ragstead.stores.factory:POSTGRES",
    "chroma": "ragstead.stores.factory:CHROMA",
    "milvus": "ragstead.stores.factory:MILVUS",
})


def _backend(raw: str) -> StoreBackend:
    """The backend a setting names: the part before its first ':' and '+' ("" is the embedded default)."""
    name = raw.split(":", 1)[0].split("+", 1)[0] if raw else "sqlite"
    backend = STORES.get(name)
    if not isinstance(backend, StoreBackend):
        raise _unknown(raw)
    return backend


def _unknown(raw: str) -> ConfigError:
    plugins = STORES.plugin_names()
    more = f", or a plugin's: {', '.join(plugins)}" if plugins else ""
    return ConfigError(f"unknown store {redact(raw)!r}; use {STORE_KINDS}{more}")


def open_store(spec: StoreSpec, *, must_exist: bool = False) -> Store:
    """Open the store a parsed spec names (see `StoreSpec.open`)."""
    return spec.open(must_exist=must_exist)
