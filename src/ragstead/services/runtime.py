"""`Runtime`: what one open project holds, shared by the services that serve it.

The settings, the store they name (one read connection behind one lock, so many threads take turns; a write
opens its own connection, as another process would), the embedder behind its query-vector cache, the
re-ranker and the ask sentence-vector cache once loaded, the answerers and HTTP transport a caller handed in.
It holds state, not behaviour: each concern (index, ingest, freshness, health, ...) is a service that reads
what it needs from here. Nothing here keeps state for one call.
"""

from __future__ import annotations

import importlib
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ragstead.config import Settings
from ragstead.core import egress
from ragstead.errors import LoadError, RagsteadError, require_extra

# What a command that only reads the index (`ls`, `status`, `tags`) never needs is imported where it is used: the
# model runtime, the re-rankers, the file readers, httpx and the answer package (docs/benchmarks.md, "Start-up").
if TYPE_CHECKING:
    import httpx

    from ragstead.answer.ask import UnitVectorCache
    from ragstead.answer.base import AnswerProvider
    from ragstead.embeddings.base import Embedder
    from ragstead.retrieval.rerank import Reranker
    from ragstead.stores.base import DocumentRow, Store


def embedder_for(*args: Any, **kwargs: Any) -> Embedder:
    """embeddings.catalog's `embedder_for`, imported when the first model is made (it brings numpy); tests replace
    this name to hand the Runtime their embedder."""
    from ragstead.embeddings.catalog import embedder_for as make

    return make(*args, **kwargs)


class Runtime:
    """A project's settings and the resources opened from them, each loaded on first use."""

    def __init__(self, settings: Settings, *, store: Store | None = None, embedder: Embedder | None = None,
                 providers: Sequence[AnswerProvider] | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        """`store`, `embedder` and `providers` replace what the settings would build (tests, embedding hosts);
        `transport` is the HTTP transport the LLM answerers and fetches use (default: the network)."""
        self.settings = settings
        self.spec = settings.store_spec()
        self.given_store = store
        self._store = store
        self._embedder: Embedder | None = None
        if embedder is not None:
            from ragstead.embeddings.cache import QueryVectorCache

            self._embedder = QueryVectorCache(embedder, settings.embed_cache_size)
        self.given_embedder = embedder  # also the embedder of the ingest targets opened from this one
        self.providers = list(providers) if providers is not None else None
        self.transport = transport
        self.reranker: Reranker | None = None
        self.unit_vectors: UnitVectorCache | None = None  # ask's sentence vectors (answer/gate.py)
        self.lock = threading.RLock()

    def close(self) -> None:
        """Release the store (a given store stays open: its owner closes it)."""
        with self.lock:
            if self._store is not None and self._store is not self.given_store:
                self._store.close()
            self._store = None if self.given_store is None else self.given_store

    @property
    def root(self) -> Path:
        return self.settings.root

    @property
    def location(self) -> str:
        """Where the index lives, safe to print (no password)."""
        return self.spec.describe()

    @property
    def api_keys_file(self) -> Path:
        """Where `ragstead keys` keeps the HTTP API's key hashes (beside the index)."""
        return self.settings.db_file.parent / "api_keys.json"

    @property
    def egress_file(self) -> Path:
        """The private log of every request that left the machine (egress.py)."""
        return self.settings.db_file.parent / egress.EGRESS_FILE

    def egress_log(self) -> list[dict[str, Any]]:
        """What left the machine, oldest first: time, host, purpose, bytes, documents, payload hash."""
        return egress.read(self.egress_file)

    def revealer(self, sources: Iterable[str]) -> Callable[[str], str]:
        """For the owner's own terminal only (`query`/`ask --reveal-secrets`; never a server or an agent): a
        function that gives back the secret values masked in text quoted from `sources` (project-relative
        paths), read again from the files on disk. A file that is mostly credentials, cited by a notice instead of
        quoted (documents/secrets.py), is given back whole."""
        from ragstead.documents.secrets import reveal as reveal_secrets
        from ragstead.documents.secrets import reveal_notice

        originals = [(Path(source).name, text) for source in dict.fromkeys(sources)
                     if (text := self._text_on_disk(source)) is not None]

        def reveal(text: str) -> str:
            for name, original in originals:
                text = reveal_secrets(reveal_notice(text, name, original), original)
            return text

        return reveal

    def line_spans(self, hits: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
        """For hits in plain-text files (their units are lines): chunk_id → (first line, last line), 1-based,
        counted in the file read again from disk, and only while it is the indexed one (its hash): a chunk's
        char offsets point into that version. Other hits are left out."""
        from ragstead.documents.loaders import PLAIN_TEXT_SUFFIXES

        spans: dict[str, tuple[int, int]] = {}
        texts: dict[str, str | None] = {}
        for hit in hits:
            source = hit["file_path"]
            if Path(source).suffix.lower() not in PLAIN_TEXT_SUFFIXES:
                continue
            if source not in texts:
                texts[source] = self._text_on_disk(source, hit["file_hash"])
            text = texts[source]
            if text is not None:
                start, end = hit["char_start"], max(hit["char_end"] - 1, hit["char_start"])
                spans[hit["chunk_id"]] = (text.count("\n", 0, start) + 1, text.count("\n", 0, end) + 1)
        return spans

    def _text_on_disk(self, source: str, file_hash: str | None = None) -> str | None:
        """The text of project file `source` read again from disk (None: gone, outside the project, unreadable,
        or, with `file_hash`, no longer the version the index holds)."""
        from ragstead.documents.ids import file_sha256
        from ragstead.documents.sandbox import load_isolated

        path = self.root / source
        try:
            if not path.is_file() or not path.resolve().is_relative_to(self.root.resolve()):
                return None
            if file_hash is not None and file_sha256(path) != file_hash:
                return None
            return load_isolated(path, self.settings.indexing().load_limits).text
        except (LoadError, OSError):
            return None

    def exists(self) -> bool:
        """Whether the index is there already (a server store is taken to exist)."""
        return self.given_store is not None or self.spec.exists()

    @property
    def store(self) -> Store:
        """The read store, opened on first use; a missing index is an error that says to run `index`."""
        with self.lock:
            if self._store is None:
                self._check_project()
                self._store = self.spec.open(must_exist=True)
            return self._store

    def _check_project(self) -> None:
        """Run outside any project (no ragstead.toml or index at or above the folder, no --root, --db or --store):
        say so, rather than name a missing index file in a folder that was never meant to hold one."""
        default_place = self.settings.db_path == Settings.db_path and not self.settings.store
        if not self.settings.project_found and default_place and self.given_store is None and not self.spec.exists():
            raise RagsteadError(f"no ragstead project here or above ({self.root}): run `ragstead init FOLDER` then "
                                "`ragstead index`, or pass --root")

    @property
    def embedder(self) -> Embedder:
        """The one embedder (the index's model unless `model` is set), with its query-vector cache."""
        return self.load_embedder(self.store if self.exists() else None)

    def load_embedder(self, store: Store | None) -> Embedder:
        """Load the model once: the configured one, else the one the index in `store` was built with, else
        the default."""
        from ragstead.embeddings.cache import QueryVectorCache

        with self.lock:
            if self._embedder is None:
                inner = embedder_for(self.settings.model, store, max_tokens=self.settings.max_tokens,
                                     batch_size=self.settings.embed_batch_size,
                                     allow_download=self.settings.allow_download)
                self._embedder = QueryVectorCache(inner, self.settings.embed_cache_size)
            return self._embedder

    def load_reranker(self) -> Reranker:
        """The `reranker` setting's cross-encoder, else sentence max-sim over the embedder. Loaded once."""
        from ragstead.embeddings.catalog import cross_encoder_for
        from ragstead.retrieval.rerank import CrossEncoderReranker, SentenceMaxSimReranker

        with self.lock:
            if self.reranker is None:
                if self.settings.reranker:
                    self.reranker = CrossEncoderReranker(
                        cross_encoder_for(self.settings.reranker, allow_download=self.settings.allow_download))
                else:
                    self.reranker = SentenceMaxSimReranker(
                        self.embedder, sentence_budget=self.settings.rerank_sentences or None)
            return self.reranker

    @contextmanager
    def writer(self) -> Iterator[Store]:
        """A store for one write: the given store, else a connection of its own (created if missing)."""
        if self.given_store is not None:
            with self.lock:
                yield self.given_store
            return
        store = self.spec.open()
        try:
            yield store
        finally:
            store.close()

    def create(self) -> None:
        """Create the index, empty, if there is none yet."""
        with self.writer():
            pass

    def document(self, doc_id: str | None = None, *, path: str | None = None) -> DocumentRow | None:
        """One document by id or project-relative path, or None."""
        with self.lock:
            return self.store.get_document(doc_id, file_path=path)

    def relative_path(self, path: str | Path) -> str:
        """`path` relative to the project root (an absolute path must lie inside it)."""
        base = self.root.resolve()
        full = Path(path) if Path(path).is_absolute() else base / path
        try:
            return full.resolve().relative_to(base).as_posix()
        except ValueError:
            raise RagsteadError(f"{path} is not inside the project root {base}") from None


T = TypeVar("T")


class OnRuntime(Generic[T]):
    """An attribute of an object with a `runtime` (the KnowledgeBase) that lives on that Runtime, so callers
    keep spelling `kb.settings`, `kb.store`; setting it sets the runtime's."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, owner: Any, owner_type: type | None = None) -> T:
        return self if owner is None else getattr(owner.runtime, self.name)  # type: ignore[return-value]

    def __set__(self, owner: Any, value: T) -> None:
        setattr(owner.runtime, self.name, value)


# The facade's plumbing (knowledge_base.py): its services and the methods it hands to them, each imported on first
# use, so opening a project costs only what the command then calls (docs/design.md, "Start-up").


def resolve(where: str, extra: str | None = None) -> Any:
    """The object at "module:qualified.name", its module imported; first, when it belongs to an `extra`, the
    MissingExtraError naming it if that extra is not installed."""
    if extra is not None:
        require_extra(extra)
    module, _, qualname = where.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


_BUILDING = threading.RLock()  # one instance of each service, however many threads ask first


class Service(Generic[T]):
    """A service of the facade, built on first use from the class at `where` and what `needs` gives from
    the facade, then kept on the instance. `extra`: the extra its code needs (errors.EXTRAS)."""

    def __init__(self, where: str, needs: Callable[[Any], tuple[Any, ...]], *, extra: str | None = None) -> None:
        self.where, self.needs, self.extra = where, needs, extra

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, kb: Any, owner: type | None = None) -> T:
        if kb is None:
            return self  # type: ignore[return-value]
        with _BUILDING:
            if self.name not in kb.__dict__:
                kb.__dict__[self.name] = resolve(self.where, self.extra)(*self.needs(kb))
        service: T = kb.__dict__[self.name]
        return service


class Delegate:
    """A facade method handed whole to a service: the function at `where` ("module:qualified.name", imported on
    first use), called with the facade's `service` attribute first. Its signature and docstring are the
    function's (`help`, `inspect.signature`). `extra`: the extra its code needs (errors.EXTRAS)."""

    def __init__(self, service: str, where: str, *, extra: str | None = None) -> None:
        self.service, self.where, self.extra = service, where, extra
        self.function: Callable[..., Any] | None = None

    def __get__(self, kb: Any, owner: type | None = None) -> Any:
        if self.function is None:
            self.function = resolve(self.where, self.extra)
        return self.function if kb is None else types.MethodType(self.function, getattr(kb, self.service))
