"""`KnowledgeBase`: the one facade the CLI, the HTTP API, the MCP server, `sanity`, `eval` and the benches call.

It opens a `Runtime` from the project's `Settings` (the store, one embedder behind one query-vector cache,
the re-ranker, the answerers; reads share one store connection behind a lock, so one KnowledgeBase can serve
many threads) and hands each concern to its service: index runs (`ragstead.indexer`), uploads and the
all-or-nothing install (`ragstead.landing`), ingest (`ragstead.ingest.service`), freshness, watch, health,
evaluation and project setup (`ragstead.project`). A method handed over whole is one line, `_to(service,
method)`: the call, its signature and its docstring are the service's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from ragstead import project
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
from ragstead.answer.base import AnswerProvider
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.prompt import load_template
from ragstead.answer.tools import ToolRegistry
from ragstead.config import Settings, load_settings
from ragstead.embeddings.base import Embedder
from ragstead.embeddings.catalog import DEFAULT_MODEL, cross_encoder_for
from ragstead.errors import DocumentNotFoundError, InvalidQueryError
from ragstead.evaluation.runner import EvalSettings, format_table
from ragstead.evaluation.service import Evaluation, is_server_or_chroma
from ragstead.filters import QueryFilters
from ragstead.freshness import FreshnessService
from ragstead.health import Health
from ragstead.indexer import SUPPORTED_SUFFIXES, Indexer
from ragstead.indexing.build import ProgressHook
from ragstead.ingest.service import IngestService
from ragstead.landing import UPLOAD_NAME, Landing
from ragstead.project import TEAM_ROOTS, init, model_catalog, prompt_templates, template_preview
from ragstead.retrieval.passages import MAX_CHUNKS as MAX_PASSAGE_CHUNKS
from ragstead.retrieval.passages import Passage, read_passage
from ragstead.retrieval.rerank import CrossEncoderReranker, Reranker, SentenceMaxSimReranker
from ragstead.retrieval.search import MAX_QUERY_CHARS, MODES, SearchOptions, SearchResult, choose_fusion, search
from ragstead.runtime import OnRuntime, Runtime
from ragstead.stores.base import Store
from ragstead.watch import watch as follow_folders

Progress = ProgressHook
P, R = ParamSpec("P"), TypeVar("R")


def _to(service: str, method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[KnowledgeBase, P], R]:
    """A facade method that hands the call to `method` of the KnowledgeBase's `service` attribute; its
    signature and docstring are the service's (`help`, `inspect.signature` and type checkers see them)."""
    @functools.wraps(method)
    def delegate(kb: KnowledgeBase, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(getattr(kb, service), *args, **kwargs)
    return delegate


class KnowledgeBase:
    """A project's index and everything that reads or writes it. Use as a context manager, or `close()` it."""

    settings: OnRuntime[Settings] = OnRuntime("settings")
    store: OnRuntime[Store] = OnRuntime("store")  # the read store, opened on first use
    embedder: OnRuntime[Embedder] = OnRuntime("embedder")  # the index's model, with its query-vector cache
    root: OnRuntime[Path] = OnRuntime("root")
    location: OnRuntime[str] = OnRuntime("location")  # where the index lives, safe to print
    api_keys_file: OnRuntime[Path] = OnRuntime("api_keys_file")
    _lock: OnRuntime[Any] = OnRuntime("lock")
    _providers: OnRuntime[list[AnswerProvider] | None] = OnRuntime("providers")
    _transport: OnRuntime[httpx.BaseTransport | None] = OnRuntime("transport")
    _reranker: OnRuntime[Reranker | None] = OnRuntime("reranker")
    _unit_vectors: OnRuntime[UnitVectorCache | None] = OnRuntime("unit_vectors")

    def __init__(self, settings: Settings, *, store: Store | None = None, embedder: Embedder | None = None,
                 providers: Sequence[AnswerProvider] | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        """`store`, `embedder` and `providers` replace what the settings would build (tests, embedding hosts);
        `transport` is the HTTP transport the LLM answerers use (default: the network)."""
        self.runtime = Runtime(settings, store=store, embedder=embedder, providers=providers, transport=transport)
        self._indexer = Indexer(self.runtime)
        self._landing = Landing(self._indexer)
        self._ingester = IngestService(self._landing, lambda: self.providers())
        self._freshness = FreshnessService(self._indexer, self._ingester)
        self._health = Health(self.runtime)
        self._evaluation = Evaluation(self.runtime)

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    create = _to("runtime", Runtime.create)
    close = _to("runtime", Runtime.close)
    exists = _to("runtime", Runtime.exists)
    relative_path = _to("runtime", Runtime.relative_path)
    document = _to("runtime", Runtime.document)

    # -- writing: index runs, files, uploads, ingest, memory, migration ----------------------------------

    index = _to("_indexer", Indexer.index)
    add = _to("_indexer", Indexer.add)
    delete = _to("_indexer", Indexer.delete)
    index_records = _to("_indexer", Indexer.index_records)
    remember = _to("_indexer", Indexer.remember)
    migrate = _to("_indexer", Indexer.migrate)
    upload = _to("_landing", Landing.upload)
    ingest = _to("_ingester", IngestService.ingest)
    record_roots = _to("runtime", project.record_roots)
    keep_sentence_vectors = _to("runtime", project.keep_sentence_vectors)

    # -- health, measuring, keeping it fresh ------------------------------------------------------------

    status = _to("_health", Health.status)
    doctor = _to("_health", Health.doctor)
    readiness = _to("_health", Health.readiness)
    evaluate = _to("_evaluation", Evaluation.evaluate)
    evaluate_beir = _to("_evaluation", Evaluation.evaluate_beir)
    freshness = _to("_freshness", FreshnessService.freshness)
    watch = _to("_indexer", follow_folders)

    # -- reading -------------------------------------------------------------------------------------

    def scope(self, *, user: str | None = None, doc_types: Sequence[str] = (), public_only: bool = False,
              include_archive: bool = False, date_from: str | None = None, date_to: str | None = None,
              tags: Sequence[str] = (), archive_allowed: bool = True) -> QueryFilters:
        """Validated filters: private-only unless `public_only`, archive excluded unless asked for (and refused
        when `archive_allowed` is False: a door whose scope has no archive)."""
        return QueryFilters.build(user, list(doc_types), public_only, date_from, date_to, include_archive, list(tags),
                                  archive_allowed)

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

    def providers(self, *, extractive: bool = False, template: str | None = None) -> list[AnswerProvider]:
        """The answerer chain: the configured LLMs (environment), the extractive answerer always last."""
        if extractive:
            return [ExtractiveAnswerer()]
        prompt = load_template(template or self.settings.template_spec)  # validated even when unused
        if self._providers is not None:
            return list(self._providers)
        return _providers_from_env(template=prompt, transport=self._transport)

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
            **knobs: Any) -> Answer:
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
            extractive=extractive, template=template)
        ask_options = AskOptions(options or self.search_options(k=k, mode=mode, **knobs), min_similarity,
                                 max_context_tokens, self.reranker() if rerank else None, min_confidence)
        registry = self.tool_registry(tools)  # unknown tool names fail here, before any work
        with self._lock:  # the store-side half; the answerers below do not hold up other readers
            if self._unit_vectors is None or self._unit_vectors.embedder is not self.embedder:
                self._unit_vectors = UnitVectorCache(self.embedder)  # sentence vectors, kept between questions
            found, contexts = gather(question, self.store, self.embedder, filters, ask_options,
                                     self.settings.scope_rules, self._unit_vectors)
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

    def last_indexed(self) -> str | None:
        """When a document was last written to the index (the latest `indexed_at`, ISO 8601 UTC), or None
        for an empty index. A run that changed nothing leaves it as it was."""
        with self._lock:
            return self.store.last_indexed_at()

    def documents(self, *, user: str | None = None, public_only: bool = False, include_archive: bool = True,
                  doc_types: Sequence[str] = (), limit: int = 100, offset: int = 0,
                  filters: QueryFilters | None = None) -> list[dict[str, Any]]:
        """Indexed documents in a scope, by path (`filters`, when given, replaces the scope arguments)."""
        filters = filters or self.scope(user=user, public_only=public_only, include_archive=include_archive,
                                        doc_types=doc_types)
        with self._lock:
            return self.store.list_documents(filters, limit, offset)

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


def open(path: str | Path | None = None, *, embedder: Embedder | None = None,
         providers: Sequence[AnswerProvider] | None = None, config: str | Path | None = None,
         **overrides: Any) -> KnowledgeBase:
    """Open the knowledge base of the project at `path` (default: $RAGSTEAD_ROOT, else the current folder):
    its `ragstead.toml`, then `RAGSTEAD_*` variables, then `overrides` (any `Settings` field, e.g.
    `roots=("notes",)`, `store="postgresql://..."`; None keeps the configured value)."""
    settings = load_settings(Path(path) if path else None, Path(config) if config else None)
    return KnowledgeBase(settings.with_overrides(**overrides), embedder=embedder, providers=providers)


__all__ = ["DEFAULT_MAX_CONTEXT_TOKENS", "DEFAULT_MIN_SIMILARITY", "DEFAULT_MODEL", "MAX_QUERY_CHARS", "MODES",
           "SUPPORTED_SUFFIXES", "TEAM_ROOTS", "UPLOAD_NAME", "EvalSettings", "KnowledgeBase", "Progress",
           "format_table", "init", "is_server_or_chroma", "model_catalog", "open", "prompt_templates",
           "template_preview"]
