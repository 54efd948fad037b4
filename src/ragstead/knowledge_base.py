"""`KnowledgeBase`: the one facade the CLI, the HTTP API, the MCP server, `sanity`, `eval` and the benches call.

It opens a `Runtime` from the project's `Settings` (the store, one embedder behind one query-vector cache,
the re-ranker, the answerers; reads share one store connection behind a lock, so one KnowledgeBase can serve
many threads) and hands each concern to its service (ragstead/services/, one module each): index runs
(`indexer`), uploads and the all-or-nothing install (`landing`), ingest, freshness, watch, health, the findability
check, portable snapshots, conversations, evaluation and project setup (`project`). A method handed over whole is
one line, `Delegate(service, "module:function")`: the call, its signature and its docstring are the service's. The
services are built, and their modules imported, on first use: `ls` and `tags` need none, `status` only health.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragstead.config import Settings, load_settings, provider_env
from ragstead.core import egress
from ragstead.errors import DocumentNotFoundError
from ragstead.filters import QueryFilters
from ragstead.request.model import MAX_QUERY_CHARS, MODES, AskRequest, Scope, SearchKnobs, SearchRequest
from ragstead.retrieval.passages import MAX_CHUNKS as MAX_PASSAGE_CHUNKS
from ragstead.services.runtime import Delegate, OnRuntime, Runtime, Service, resolve

# The services and the answer, ingest, evaluation and search code are imported on first use (`Service`, `Delegate`,
# the methods below): a command that only reads the index loads none of them (docs/benchmarks.md, "Start-up").
# Named here too, for type checkers and the import contracts.
if TYPE_CHECKING:
    import httpx

    from ragstead.answer.ask import DEFAULT_MAX_CONTEXT_TOKENS, DEFAULT_MIN_SIMILARITY, Answer, UnitVectorCache
    from ragstead.answer.base import AnswerProvider
    from ragstead.answer.tools import ToolRegistry
    from ragstead.embeddings.base import Embedder
    from ragstead.embeddings.catalog import DEFAULT_MODEL
    from ragstead.evaluation.runner import EvalSettings, format_table
    from ragstead.indexing.build import ProgressHook as Progress
    from ragstead.retrieval.passages import Passage
    from ragstead.retrieval.rerank import Reranker
    from ragstead.retrieval.search import SearchOptions, SearchResult
    from ragstead.services.conversation import Conversations
    from ragstead.services.evaluation import Evaluation, is_server_or_chroma
    from ragstead.services.findability import Findability
    from ragstead.services.freshness import FreshnessService
    from ragstead.services.health import Health
    from ragstead.services.indexer import SUPPORTED_SUFFIXES, Indexer
    from ragstead.services.ingest import IngestService
    from ragstead.services.landing import UPLOAD_NAME, Landing
    from ragstead.services.project import TEAM_ROOTS, init, model_catalog, prompt_templates, template_preview
    from ragstead.services.snapshots import Snapshots
    from ragstead.stores.base import DocumentInfo, Store

# The names this module exports from elsewhere, each imported when first asked for (PEP 562).
_EXPORTED = {"DEFAULT_MAX_CONTEXT_TOKENS": "ragstead.answer.ask", "DEFAULT_MIN_SIMILARITY": "ragstead.answer.ask",
             "DEFAULT_MODEL": "ragstead.embeddings.catalog", "SUPPORTED_SUFFIXES": "ragstead.services.indexer",
             "TEAM_ROOTS": "ragstead.services.project", "UPLOAD_NAME": "ragstead.services.landing",
             "EvalSettings": "ragstead.evaluation.runner", "Progress": "ragstead.indexing.build:ProgressHook",
             "format_table": "ragstead.evaluation.runner", "init": "ragstead.services.project",
             "is_server_or_chroma": "ragstead.services.evaluation", "model_catalog": "ragstead.services.project",
             "prompt_templates": "ragstead.services.project", "template_preview": "ragstead.services.project"}


def __getattr__(name: str) -> Any:
    if name not in _EXPORTED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    where = _EXPORTED[name]
    return resolve(where if ":" in where else f"{where}:{name}")


class KnowledgeBase:
    """A project's index and everything that reads or writes it. Use as a context manager, or `close()` it."""

    settings: OnRuntime[Settings] = OnRuntime("settings")
    store: OnRuntime[Store] = OnRuntime("store")  # the read store, opened on first use
    embedder: OnRuntime[Embedder] = OnRuntime("embedder")  # the index's model, with its query-vector cache
    root: OnRuntime[Path] = OnRuntime("root")
    location: OnRuntime[str] = OnRuntime("location")  # where the index lives, safe to print
    api_keys_file: OnRuntime[Path] = OnRuntime("api_keys_file")
    egress_file: OnRuntime[Path] = OnRuntime("egress_file")  # what left the machine (core/egress.py)
    _lock: OnRuntime[Any] = OnRuntime("lock")
    _providers: OnRuntime[list[AnswerProvider] | None] = OnRuntime("providers")
    _transport: OnRuntime[httpx.BaseTransport | None] = OnRuntime("transport")
    _unit_vectors: OnRuntime[UnitVectorCache | None] = OnRuntime("unit_vectors")

    # The services, each built on first use.
    _indexer: Service[Indexer] = Service("ragstead.services.indexer:Indexer", lambda kb: (kb.runtime,))
    _landing: Service[Landing] = Service("ragstead.services.landing:Landing", lambda kb: (kb._indexer,))
    _ingester: Service[IngestService] = Service("ragstead.services.ingest:IngestService",
                                                  lambda kb: (kb._landing, lambda: kb.providers()), extra="ingest")
    _freshness: Service[FreshnessService] = Service("ragstead.services.freshness:FreshnessService",
                                                      lambda kb: (kb._indexer, lambda: kb._ingester))
    _health: Service[Health] = Service("ragstead.services.health:Health", lambda kb: (kb.runtime,))
    _evaluation: Service[Evaluation] = Service("ragstead.services.evaluation:Evaluation", lambda kb: (kb.runtime,))
    _snapshots: Service[Snapshots] = Service("ragstead.services.snapshots:Snapshots", lambda kb: (kb.runtime,))
    _findability: Service[Findability] = Service("ragstead.services.findability:Findability", lambda kb: (kb.runtime,))
    _conversations: Service[Conversations] = Service("ragstead.services.conversation:Conversations",
                                                       lambda kb: (kb.runtime, kb.ask, kb.remember, kb.providers))

    def __init__(self, settings: Settings, *, store: Store | None = None, embedder: Embedder | None = None,
                 providers: Sequence[AnswerProvider] | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        """`store`, `embedder` and `providers` replace what the settings would build (tests, embedding hosts);
        `transport` is the HTTP transport the LLM answerers use (default: the network)."""
        self.runtime = Runtime(settings, store=store, embedder=embedder, providers=providers, transport=transport)

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    create = Delegate("runtime", "ragstead.services.runtime:Runtime.create")
    close = Delegate("runtime", "ragstead.services.runtime:Runtime.close")
    exists = Delegate("runtime", "ragstead.services.runtime:Runtime.exists")
    relative_path = Delegate("runtime", "ragstead.services.runtime:Runtime.relative_path")
    document = Delegate("runtime", "ragstead.services.runtime:Runtime.document")
    revealer = Delegate("runtime", "ragstead.services.runtime:Runtime.revealer")
    line_spans = Delegate("runtime", "ragstead.services.runtime:Runtime.line_spans")
    egress_log = Delegate("runtime", "ragstead.services.runtime:Runtime.egress_log")

    # -- writing: index runs, files, uploads, ingest, memory, migration ----------------------------------

    index = Delegate("_indexer", "ragstead.services.indexer:Indexer.index")
    masking_notice = Delegate("_indexer", "ragstead.services.indexer:Indexer.masking_notice")
    add = Delegate("_indexer", "ragstead.services.indexer:Indexer.add")
    delete = Delegate("_indexer", "ragstead.services.indexer:Indexer.delete")
    index_records = Delegate("_indexer", "ragstead.services.indexer:Indexer.index_records")
    remember = Delegate("_indexer", "ragstead.services.indexer:Indexer.remember")
    migrate = Delegate("_indexer", "ragstead.services.indexer:Indexer.migrate")
    export_snapshot = Delegate("_snapshots", "ragstead.services.snapshots:Snapshots.export_snapshot")
    import_snapshot = Delegate("_snapshots", "ragstead.services.snapshots:Snapshots.import_snapshot")
    upload = Delegate("_landing", "ragstead.services.landing:Landing.upload")
    ingest = Delegate("_ingester", "ragstead.services.ingest:IngestService.ingest", extra="ingest")
    record_roots = Delegate("runtime", "ragstead.services.project:record_roots")
    keep_sentence_vectors = Delegate("runtime", "ragstead.services.project:keep_sentence_vectors")
    keep_chunking = Delegate("runtime", "ragstead.services.project:keep_chunking")

    # -- health, measuring, keeping it fresh, conversations ------------------------------------------------

    status = Delegate("_health", "ragstead.services.health:Health.status")
    doctor = Delegate("_health", "ragstead.services.health:Health.doctor")
    readiness = Delegate("_health", "ragstead.services.health:Health.readiness")
    findability = Delegate("_findability", "ragstead.services.findability:Findability.findability")
    evaluate = Delegate("_evaluation", "ragstead.services.evaluation:Evaluation.evaluate")
    evaluate_beir = Delegate("_evaluation", "ragstead.services.evaluation:Evaluation.evaluate_beir")
    freshness = Delegate("_freshness", "ragstead.services.freshness:FreshnessService.freshness")
    watch = Delegate("_indexer", "ragstead.services.watch:watch")
    # A follow-up rewritten from the earlier turns, then asked.
    chat = Delegate("_conversations", "ragstead.services.conversation:Conversations.chat")
    conversation = Delegate("_conversations", "ragstead.services.conversation:Conversations.conversation")
    delete_conversation = Delegate("_conversations", "ragstead.services.conversation:Conversations.delete_conversation")

    # -- reading -------------------------------------------------------------------------------------

    def scope(self, *, user: str | None = None, doc_types: Sequence[str] = (), public_only: bool = False,
              include_archive: bool = False, date_from: str | None = None, date_to: str | None = None,
              tags: Sequence[str] = (), archive_allowed: bool = True) -> QueryFilters:
        """Validated filters: private-only unless `public_only`, archive excluded unless asked for (and refused
        when `archive_allowed` is False: a door whose scope has no archive)."""
        scope = Scope(user, public_only, tuple(doc_types), tuple(tags), date_from, date_to, include_archive)
        return scope.filters() if archive_allowed else QueryFilters.build(
            user, list(doc_types), public_only, date_from, date_to, include_archive, list(tags), archive_allowed)

    def search_options(self, knobs: SearchKnobs | None = None, /, **keywords: Any) -> SearchOptions:
        """Search options: the configured defaults (hybrid, convex fusion, feedback from the 2 best chunks) with
        the request's knobs (a `SearchKnobs`, e.g. a `SearchRequest`, or its fields as keywords), validated."""
        if knobs is None:
            knobs = SearchKnobs(**{name: value for name, value in keywords.items() if value is not None})
        elif keywords:
            raise TypeError(f"give SearchKnobs or keyword arguments, not both: {sorted(keywords)}")
        options = self.settings.search_options(knobs.mode, **knobs.overrides())
        options.validate()
        return options

    def reranker(self) -> Reranker:
        """What `rerank=True` uses: the `reranker` setting's cross-encoder, else sentence max-sim. Loaded once."""
        return self.runtime.load_reranker()

    def search(self, query: str | SearchRequest, *, filters: QueryFilters | None = None,
               options: SearchOptions | None = None, **fields: Any) -> SearchResult:
        """Search the index for a `SearchRequest`, or for query text with the request's fields as keywords
        (`kb.search("billing", user="alice", k=3)`). `filters` and `options`, when given, replace the
        request's scope and knobs."""
        from ragstead.retrieval.search import search

        request = SearchRequest.of(query, **fields)
        filters = filters or request.scope.filters()
        options = options or self.search_options(request)
        needs_model = options.mode != "lexical" or request.rerank
        with self._lock:
            return search(request.query, self.store, self.embedder if needs_model else None, filters, options,
                          self.settings.scope_rules, self.reranker() if request.rerank else None)

    def providers(self, *, extractive: bool = False, template: str | None = None,
                  llm: Sequence[str] | None = None) -> list[AnswerProvider]:
        """The answerer chain: the configured LLMs (environment) in the `answerers` order, the extractive answerer
        always last. A remote LLM only with consent: `llm` (`ask --llm`, tried first when the order leaves it
        out), else the remote names the project's config wrote in `answerers` (answer/consent.py)."""
        from ragstead.answer.base import REFUSAL
        from ragstead.answer.extractive import ExtractiveAnswerer
        from ragstead.answer.prompt import load_template
        from ragstead.answer.registry import AnswererSetup, answerer_chain

        if extractive:
            return [ExtractiveAnswerer()]
        prompt = load_template(template or self.settings.template_spec)  # validated even when unused
        prompt = replace(prompt, refusal=self.settings.refusal.strip() or REFUSAL)  # taught as the project says it
        if self._providers is not None:
            return list(self._providers)
        remote = self.settings.consented_for(llm)
        order = self.settings.answer_order
        order = (*(n for n in remote if n not in order), *order) if llm is not None else order
        return answerer_chain(AnswererSetup(provider_env(self.root), prompt, transport=self._transport), order, remote)

    def consent_hint(self, llm: Sequence[str] | None = None) -> str | None:
        """A line for the person when an LLM key is set but unused for want of consent, else None."""
        from ragstead.answer.consent import consent_hint

        return consent_hint(provider_env(self.root), self.settings.consented_for(llm), self.settings.answer_order)

    def tool_registry(self, tools: Sequence[str] | None = None) -> ToolRegistry | None:
        """The allow-listed tools `ask` offers an LLM answerer (`tools`, else the `tools` setting), over this
        knowledge base's HTTP transport; None when there are none. Unknown names raise ConfigError."""
        from ragstead.answer.tools import ToolRegistry

        names = tuple(self.settings.tools if tools is None else tools)
        return ToolRegistry(names, transport=self._transport) if names else None

    def ask(self, question: str | AskRequest, *, filters: QueryFilters | None = None,
            options: SearchOptions | None = None, answerers: Sequence[AnswerProvider] | None = None,
            on_text: Callable[[str], None] | None = None, **fields: Any) -> Answer:
        """Answer an `AskRequest` (or question text with the request's fields as keywords) from the documents
        in scope with citations, or the exact refusal sentence.

        `answerers`: a chain built once by `providers()` (a server reuses it); the request's `extractive`
        overrides it. `on_text` hears a streamed answer as it is written. `filters` and `options`, when given,
        replace the request's scope and knobs. The request's fields are documented on `AskRequest`; the
        extractive answerer never calls tools."""
        from ragstead.answer.aggregate import whole_folder
        from ragstead.answer.ask import AskOptions, UnitVectorCache, answer, gather
        from ragstead.answer.base import REFUSAL
        from ragstead.answer.listing import ListPage, list_answer

        request = AskRequest.of(question, **fields)
        writer = self._indexer.memory_user(request.scope.user) if request.remember else None  # a personal owner's
        filters = filters or request.scope.filters()
        chain = list(answerers) if answerers is not None and not request.extractive else self.providers(
            extractive=request.extractive, template=request.template, llm=request.llm)
        ask_options = AskOptions(options or self.search_options(request), request.min_similarity,
                                 request.max_context_tokens, self.reranker() if request.rerank else None,
                                 request.min_confidence, local_only=self.settings.local_only)
        registry = self.tool_registry(request.tools)  # unknown tool names fail here, before any work
        result, listed = whole_folder(request, self, filters, ask_options, self._unit_vectors, self._lock)  # #46
        with self._lock:  # the store-side half; the answerers below do not hold up other readers
            if self._unit_vectors is None or self._unit_vectors.embedder is not self.embedder:
                self._unit_vectors = UnitVectorCache(self.embedder)  # sentence vectors, kept between questions
            if result is None and listed is None:
                found, contexts = gather(request.query, self.store, self.embedder, filters, ask_options,
                                         self.settings.scope_rules, self._unit_vectors)
        if result is None and listed is not None:  # "which notes mention X": the whole scope (#45.4); sums: #46
            result = list_answer(listed, self.store, self.embedder, filters, ask_options, self.settings.scope_rules,
                                 ListPage(request.offset, request.limit), self._unit_vectors, self._lock)
        elif result is None:
            with egress.recording(self.egress_file):  # privacy: a remote LLM's prompt or a tool call is logged
                result = answer(found, contexts, ask_options.min_similarity, chain, on_text, registry,
                                self.settings.refusal.strip() or REFUSAL)
        if writer:
            result = replace(result, memory_write=self.remember(request.query, user=writer).to_dict())
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
                  filters: QueryFilters | None = None) -> list[DocumentInfo]:
        """Indexed documents in a scope, by path (`filters`, when given, replaces the scope arguments;
        `to_dict()`: each as `ls --json` prints it)."""
        from ragstead.stores.base import DocumentInfo

        filters = filters or self.scope(user=user, public_only=public_only, include_archive=include_archive,
                                        doc_types=doc_types)
        with self._lock:
            return [DocumentInfo.of(row) for row in self.store.list_documents(filters, limit, offset)]

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
        from ragstead.retrieval.passages import read_passage

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
    settings = load_settings(Path(path).expanduser() if path else None, Path(config).expanduser() if config else None)
    return KnowledgeBase(settings.with_overrides(**overrides), embedder=embedder, providers=providers)


__all__ = ["DEFAULT_MAX_CONTEXT_TOKENS", "DEFAULT_MIN_SIMILARITY", "DEFAULT_MODEL", "MAX_QUERY_CHARS", "MODES",
           "SUPPORTED_SUFFIXES", "TEAM_ROOTS", "UPLOAD_NAME", "EvalSettings", "KnowledgeBase", "Progress",
           "format_table", "init", "is_server_or_chroma", "model_catalog", "open", "prompt_templates",
           "template_preview"]
