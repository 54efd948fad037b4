"""Milvus as ragstead's vector index: `--store milvus:PATH.db` (Milvus Lite) or `--store milvus://host:19530[/db]`.

Milvus holds the dense vectors and the filter fields (one collection per index, the user slug its partition
key); SQLite (+ tantivy) stays the source of truth and keeps the text and the lexical index, as for Chroma:
the store is the embedded one with a Milvus collection as its vector side (docs/stores.md, "Milvus"). With
`?lexical=milvus` the collection also holds the chunk text and Milvus's BM25 function, and lexical search runs
in Milvus instead of tantivy. The same code serves Milvus Lite, Standalone and Distributed: pymilvus speaks one
API to all three.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np

from ragstead.errors import ConfigError, RagsteadError
from ragstead.filters import QueryFilters
from ragstead.stores.permissions import make_private_folder, tighten
from ragstead.stores.redaction import redact
from ragstead.stores.remote_vectors import RemoteVectors, day_number
from ragstead.stores.sqlite import SqliteStore

# Rows per SQLite IN-list read and per Milvus upsert or delete call.
WRITE_BATCH = 1000
# As for Chroma (SqliteStore.scope_is_small): a scope of at most 1/5 of the index and `exact_rows` rows is scored
# exactly from SQLite, which is faster than a round trip and never short.
EXACT_SCOPE_ROWS = 50_000
# Most tags a chunk carries into Milvus (an ARRAY field needs a capacity); a longer list is cut, and a search
# that comes back short for it is answered exactly from SQLite.
MAX_TAGS = 256
# Credentials come from the environment (or the URL's user-info), never from a printed setting.
TOKEN_ENV = "RAGSTEAD_MILVUS_TOKEN"
USER_ENV = "RAGSTEAD_MILVUS_USER"
PASSWORD_ENV = "RAGSTEAD_MILVUS_PASSWORD"
GENERATION_KEY = "ragstead.generation"
MODEL_KEY = "ragstead.model"
# Which engine answers lexical search; a collection built for the other one is rebuilt from SQLite.
LEXICAL_KEY = "ragstead.lexical"
LEXICAL_ENGINES = ("tantivy", "milvus")
# Milvus's VARCHAR limit, in bytes: a longer chunk's text is cut for Milvus's BM25 (SQLite keeps it whole).
MAX_TEXT_BYTES = 65_535
# Milvus Lite knows the "standard" and "jieba" tokenizers only (3.2.2: "unknown tokenizer type: 'english'"), so
# the one analyzer both Lite and a server run is "standard": word split and lowercase, no stemming.
BM25_ANALYZER = {"type": "standard"}


@dataclass(frozen=True)
class MilvusLocation:
    """Where a Milvus store's two halves live: Milvus (a Milvus Lite file or a server) and the SQLite file."""

    sqlite_file: Path
    lite_file: Path | None = None
    uri: str | None = None  # http://host:port, no credentials
    database: str | None = None
    user: str | None = None
    password: str | None = None
    exact_scope_rows: int = EXACT_SCOPE_ROWS
    lexical: str = "tantivy"  # or "milvus": BM25 by Milvus's own function over the collection's text

    @property
    def lexical_in_milvus(self) -> bool:
        return self.lexical == "milvus"

    @classmethod
    def parse(cls, spec: str, resolve: Any, default_db: Path) -> MilvusLocation:
        """From a store setting; `resolve` makes a relative path absolute against the project root.

        Options after `?`: `db=PATH` (the SQLite side), `exact_rows=N` (the most rows a scope scored exactly
        from SQLite may have; 0 sends every vector query to Milvus), `lexical=milvus` (BM25 by Milvus's own
        function instead of tantivy).
        """
        head, _, query = spec.partition("?")
        options = parse_qs(query)
        try:
            exact_rows = int(options.get("exact_rows", [EXACT_SCOPE_ROWS])[0])
        except ValueError:
            raise ConfigError(f"exact_rows in {redact(spec)!r} must be a whole number") from None
        lexical = options.get("lexical", ["tantivy"])[0]
        if lexical not in LEXICAL_ENGINES:
            raise ConfigError(f"lexical in {redact(spec)!r} must be one of {', '.join(LEXICAL_ENGINES)}")
        side = options.get("db")
        if head.startswith("milvus:") and not head.startswith("milvus://"):
            file = head.removeprefix("milvus:").strip()
            if not file.endswith(".db") or file == ".db":
                raise ConfigError("milvus:PATH needs a Milvus Lite file ending in .db, e.g. milvus:kb/rag/milvus.db")
            lite = Path(resolve(file))
            sqlite_file = Path(resolve(side[0])) if side else lite.with_suffix(".sqlite")
            return cls(sqlite_file=sqlite_file, lite_file=lite, exact_scope_rows=exact_rows, lexical=lexical)
        try:
            parts = urlsplit(head)
            port = parts.port or 19530
        except ValueError as exc:
            raise ConfigError(f"bad Milvus server URL {redact(spec)!r}: {redact(str(exc), spec)}") from None
        if not parts.hostname:
            raise ConfigError(f"bad Milvus server URL {redact(spec)!r}: use milvus://host:19530[/db]")
        scheme = "https" if parts.scheme == "milvus+https" else "http"
        return cls(sqlite_file=Path(resolve(side[0])) if side else default_db,
                   uri=f"{scheme}://{parts.hostname}:{port}", database=parts.path.strip("/") or None,
                   user=unquote(parts.username) if parts.username else None,
                   password=unquote(parts.password) if parts.password else None, exact_scope_rows=exact_rows,
                   lexical=lexical)

    def describe(self) -> str:
        """Both halves, safe to print (never a credential)."""
        bm25 = "BM25 in Milvus, text" if self.lexical_in_milvus else "text and BM25"
        if self.lite_file is not None:
            return f"milvus:{self.lite_file} (Milvus Lite; {bm25} in {self.sqlite_file})"
        database = f"/{self.database}" if self.database else ""
        return f"milvus {self.uri}{database} ({bm25} in {self.sqlite_file})"

    def client_arguments(self) -> dict[str, Any]:
        """pymilvus MilvusClient arguments: the Lite file, or the server with its credentials from the
        environment (a token, or a user and password), the URL's user-info as a fallback."""
        if self.lite_file is not None:
            return {"uri": str(self.lite_file)}
        arguments: dict[str, Any] = {"uri": self.uri}
        if self.database:
            arguments["db_name"] = self.database
        token = os.environ.get(TOKEN_ENV)
        user = os.environ.get(USER_ENV) or self.user
        password = os.environ.get(PASSWORD_ENV) or self.password
        if token:
            arguments["token"] = token
        elif user:
            arguments["user"], arguments["password"] = user, password or ""
        return arguments


def tag_key(tag: str) -> int:
    """A tag as a signed 63-bit integer: Milvus matches tags by these numbers, so no tag text is ever spliced
    into a filter expression (SQLite re-checks every fetched row's tags anyway)."""
    return int.from_bytes(hashlib.blake2b(tag.encode(), digest_size=8).digest(), "big") >> 1


def _literal(value: str) -> str:
    """A Milvus string literal: JSON's double-quoted form, whose escapes (\\" \\\\ \\t ...) Milvus reads the same
    way (checked on Milvus Lite with quotes, backslashes, tabs and non-ASCII)."""
    return json.dumps(value, ensure_ascii=False)


def milvus_filter(filters: QueryFilters) -> str:
    """The Milvus boolean expression admitting exactly the chunks `filters.to_sql` admits (by day for dates,
    as for Chroma). Every search carries it: the scope is never applied after the fact."""
    privacy = f"is_private == {str(not filters.public_only).lower()}"
    if filters.archive_beside_private:
        privacy = f'({privacy} or doc_type == "archive")'
    clauses = [privacy]
    if filters.user_slug is not None:
        clauses.append(f"user_slug == {_literal(filters.user_slug)}")
    if filters.doc_types:
        clauses.append(f"doc_type in [{', '.join(_literal(t) for t in filters.doc_types)}]")
    if not filters.wants_archive:
        clauses.append('doc_type != "archive"')
    if filters.date_from:
        clauses.append(f"created_day >= {day_number(filters.date_from) or 0}")
    if filters.date_to:
        clauses.append(f"(created_day > 0 and created_day <= {day_number(filters.date_to) or 0})")
    if filters.tags:
        clauses.append(f"array_contains_any(tag_keys, [{', '.join(str(tag_key(t)) for t in filters.tags)}])")
    return " and ".join(clauses)


def open_milvus_store(location: MilvusLocation, *, project_root: Path | None = None,
                      private_folders: Sequence[Path] = ()) -> SqliteStore:
    """The `Store` whose vector search runs in Milvus: the embedded store, with a MilvusVectors vector side
    (and with `lexical=milvus`, its lexical search too: MilvusTextStore)."""
    try:
        import pymilvus
    except ImportError as exc:
        raise RagsteadError(
            f"the Milvus store needs pymilvus ({exc.name} is missing): pip install 'ragstead[milvus]'"
        ) from exc
    kind = MilvusTextStore if location.lexical_in_milvus else SqliteStore
    return kind(location.sqlite_file, project_root=project_root, private_folders=private_folders,
                vectors=lambda store: MilvusVectors(store, location, pymilvus))


class MilvusTextStore(SqliteStore):
    """The Milvus store with `lexical=milvus`: lexical search is Milvus's BM25 over the collection's text, under
    the same filter expression as the vector search; hybrid fuses the two sides as for every store. SQLite
    still commits first and tantivy is still written (the source of truth, and `lexical=tantivy` needs no
    rebuild of it)."""

    vectors: MilvusVectors

    def lexical_search(self, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        return self.vectors.text_search(terms, filters, k) if terms and k > 0 else []


# Milvus Lite serves each data folder from a thread of this process and writes its last segments (a private note's
# text, with `lexical=milvus`) when that server stops, at the process's exit: after every close had tightened the
# folder, so they stayed 0644 until the next command opened the store.
_AT_EXIT: set[Path] = set()


def _tighten_at_exit(lite_file: Path) -> None:
    """At exit: stop Milvus Lite's server for `lite_file` (it writes what it holds), then tighten its folder."""
    if not _AT_EXIT:
        atexit.register(_release_and_tighten)
    _AT_EXIT.add(lite_file)


def _release_and_tighten() -> None:
    from milvus_lite import server_manager_instance

    for lite_file in sorted(_AT_EXIT):
        with suppress(Exception):  # at exit: a failure here must not hide the command's own outcome
            server_manager_instance.release_server(str(lite_file))
        if lite_file.exists():
            tighten([lite_file])


class MilvusVectors(RemoteVectors):
    """A SQLite store's vector side in a Milvus collection (remote_vectors.RemoteVectors): written after each
    SQLite commit (upserts and deletes keyed by the chunk's row id, so a repeated write changes nothing),
    reconciled with SQLite when it lags, and searched with the scope as a filter expression; a small scope is
    scored exactly from SQLite instead."""

    LABEL = "Milvus"
    COLLECTION_PREFIX = "ragstead_"
    BATCH = WRITE_BATCH

    def __init__(self, store: SqliteStore, location: MilvusLocation, pymilvus: Any) -> None:
        self.location = location
        self._pymilvus = pymilvus
        self._errors = (pymilvus.exceptions.MilvusException, OSError, ValueError)
        with self._engine("connect to"):
            if location.lite_file is not None:
                make_private_folder(location.lite_file.parent)
            self._client = pymilvus.MilvusClient(**location.client_arguments())
            if location.lite_file is not None:
                _tighten_at_exit(location.lite_file)
        super().__init__(store, location)
        self._loaded = False
        self._unflushed = False

    # -- plumbing ---------------------------------------------------------------------------------

    def private_paths(self) -> list[Path]:
        """Milvus Lite's data folder (a server keeps its own files)."""
        return [] if self.location.lite_file is None else [self.location.lite_file]

    def close(self) -> None:
        with suppress(self._errors):
            self._client.close()
        self._tighten()

    def _tighten(self) -> None:
        """Milvus Lite writes its segment and index files when it seals rows (at a flush, or later on its own
        threads), with the umask's mode: tighten its folder after those moments, as the store does after writes."""
        if self.location.lite_file is not None and self.location.lite_file.exists():
            tighten([self.location.lite_file])

    @contextmanager
    def _engine(self, action: str) -> Iterator[None]:
        """Turn a Milvus or connection failure into one clear error naming the store (no credential)."""
        try:
            yield
        except (*self._errors, self._pymilvus.exceptions.MilvusException) as exc:
            message = str(exc)
            if "DataDirLockedError" in repr(exc.__context__) or "Open local milvus failed" in message:
                message = "the Milvus Lite file is open in another process (Milvus Lite serves one process; " \
                          "run a Milvus server for more)"
            for secret in (self.location.password, os.environ.get(TOKEN_ENV), os.environ.get(PASSWORD_ENV)):
                if secret:
                    message = message.replace(secret, "***")
            raise RagsteadError(
                f"cannot {action} the Milvus store {self.location.describe()}: {redact(message)}"
            ) from exc

    def _exists(self) -> bool:
        exists = bool(self._client.has_collection(self._name))
        if exists and not self._loaded:
            self._client.load_collection(self._name)  # a reopened collection starts released
            self._loaded = True
        if not exists:
            self._loaded = False
        return exists

    def _create(self, dim: int) -> None:
        """The index's collection: the vector, the filter fields, and the user slug as partition key (so a
        user's search touches that user's partition). Cosine = inner product: vectors are unit length."""
        data_type = self._pymilvus.DataType
        schema = self._client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", data_type.INT64, is_primary=True)
        schema.add_field("dense", data_type.FLOAT_VECTOR, dim=dim)
        schema.add_field("is_private", data_type.BOOL)
        schema.add_field("doc_type", data_type.VARCHAR, max_length=64)
        schema.add_field("user_slug", data_type.VARCHAR, max_length=128, is_partition_key=True)
        schema.add_field("created_day", data_type.INT64)
        schema.add_field("tag_keys", data_type.ARRAY, element_type=data_type.INT64, max_capacity=MAX_TAGS)
        index = self._client.prepare_index_params()
        index.add_index("dense", index_type="AUTOINDEX", metric_type="IP")
        if self.location.lexical_in_milvus:
            # The chunk text goes through the analyzer into a sparse BM25 vector that Milvus computes itself.
            schema.add_field("text", data_type.VARCHAR, max_length=MAX_TEXT_BYTES, enable_analyzer=True,
                             analyzer_params=BM25_ANALYZER)
            schema.add_field("sparse", data_type.SPARSE_FLOAT_VECTOR)
            schema.add_function(self._pymilvus.Function(name="bm25", function_type=self._pymilvus.FunctionType.BM25,
                                                        input_field_names=["text"], output_field_names=["sparse"]))
            index.add_index("sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
        # Strong consistency: a search right after a write sees it, as SQLite's own readers do.
        self._client.create_collection(self._name, schema=schema, index_params=index, consistency_level="Strong")
        self._loaded = True

    def _properties(self) -> dict[str, str]:
        return dict(self._client.describe_collection(self._name).get("properties") or {})

    def _engine_generation(self) -> int | None:
        """The SQLite generation Milvus reflects, read from the server (another process may have written)."""
        if not self._exists():
            return None
        properties = self._properties()
        if properties.get(MODEL_KEY) != (self._store.meta("embed_model") or ""):
            return None
        if properties.get(LEXICAL_KEY, "tantivy") != self.location.lexical:  # built without (or with) the text
            return None
        return int(properties[GENERATION_KEY]) if GENERATION_KEY in properties else None

    def _set_generation(self, generation: int) -> None:
        if self._exists():
            self._client.alter_collection_properties(self._name, properties={
                GENERATION_KEY: str(generation), MODEL_KEY: self._store.meta("embed_model") or "",
                LEXICAL_KEY: self.location.lexical})

    def _drop(self) -> None:
        if self._client.has_collection(self._name):
            self._client.drop_collection(self._name)
        self._loaded = False

    def _count(self) -> int:
        if not self._exists():
            return 0
        return int(self._client.query(self._name, filter="", output_fields=["count(*)"])[0]["count(*)"])

    def _delete(self, rowids: list[int]) -> None:
        if not rowids or not self._exists():
            return
        for start in range(0, len(rowids), WRITE_BATCH):
            self._client.delete(self._name, ids=rowids[start : start + WRITE_BATCH])
        self._unflushed = True

    def _sends_text(self) -> bool:
        return self.location.lexical_in_milvus  # the collection holds the text for Milvus's BM25

    def _appends_to(self, generation: int) -> bool:
        # The first write to a new collection appends too (no full reconcile of an empty one).
        return super()._appends_to(generation) or (not self._exists() and generation == 1)

    def _engine_ids(self) -> Iterator[int]:
        if not self._exists():
            return
        iterator = self._client.query_iterator(self._name, batch_size=WRITE_BATCH, filter="", output_fields=["id"])
        while batch := iterator.next():
            yield from (int(row["id"]) for row in batch)
        iterator.close()

    def _send(self, rows: list[tuple[Any, ...]], vectors: np.ndarray) -> None:
        if not self._exists():
            self._create(vectors.shape[1])
        entities = [
            {"id": r[0], "dense": vector, "is_private": bool(r[2]), "doc_type": r[3], "user_slug": r[4] or "",
             "created_day": day_number(r[5]) or 0, "tag_keys": [tag_key(t) for t in json.loads(r[6])][:MAX_TAGS]}
            for r, vector in zip(rows, vectors, strict=True)
        ]
        if self._sends_text():
            for entity, r in zip(entities, rows, strict=True):
                entity["text"] = r[7].encode()[:MAX_TEXT_BYTES].decode(errors="ignore")
        # Delete, then insert, not upsert: Milvus 2.3's upsert routes rows by something other than their partition
        # key, so a user's filtered search then saw 33 of that user's 2,000 rows (found by `bench milvus` on a
        # 2.3.5 server; insert routes them right). The delete keeps a repeated write idempotent by id.
        self._client.delete(self._name, ids=[entity["id"] for entity in entities])
        self._client.insert(self._name, entities)
        self._unflushed = True

    # -- search -----------------------------------------------------------------------------------

    def _engine_search(self, query: np.ndarray, filters: QueryFilters, k: int) -> list[tuple[int, float]] | None:
        if not self._exists():
            return None
        self._sealed()
        result = self._client.search(self._name, data=[query.astype(np.float32).tolist()], anns_field="dense",
                                     limit=k, filter=milvus_filter(filters), search_params={"metric_type": "IP"},
                                     output_fields=[])
        return [(int(hit["id"]), float(hit["distance"])) for hit in result[0]]

    def text_search(self, terms: list[str], filters: QueryFilters, k: int) -> list[tuple[int, float]]:
        """BM25 by Milvus's own function (`lexical=milvus`) over the chunks the filter expression admits: the
        question's terms as the query text, which Milvus runs through the collection's analyzer."""
        if self._store.meta("embed_model") is None:
            return []
        self._in_step()
        with self._engine("search"):
            if not self._exists():
                return []
            self._sealed()
            result = self._client.search(self._name, data=[" ".join(terms)], anns_field="sparse", limit=k,
                                         filter=milvus_filter(filters), search_params={"metric_type": "BM25"},
                                         output_fields=[])
        # A BM25 score is never negative; Milvus Lite 3.2.2 reports it negated (its distances are "smaller is
        # closer"), a server as is: the magnitude is the score either way, and the order is Milvus's.
        return [(int(hit["id"]), abs(float(hit["distance"]))) for hit in result[0]]

    def _sealed(self) -> None:
        """Milvus Lite scans unsealed rows one by one (1 s a query at 10k rows, measured; 0.1 s once flushed):
        seal them once before the first search after a write. Lite serves one process, so only this one can
        have written. A server seals and indexes on its own."""
        if self._unflushed and self.location.lite_file is not None:
            self._client.flush(self._name)
            self._unflushed = False
            self._tighten()

    # -- reporting --------------------------------------------------------------------------------

    def _engine_stats(self) -> dict[str, Any]:
        return {"store": "milvus", "milvus": self.location.describe(), "milvus_collection": self._name}
