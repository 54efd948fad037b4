"""The HTTP API: a thin FastAPI layer over the same library calls as the CLI.

Who is asking is decided by the API key alone: the key's user slug becomes the query's user filter
and the owner of uploads; the request body cannot name a user (unknown fields are refused). Every
error is JSON `{"error": {"code", "message"}}`, never a stack trace.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from fastapi import Depends, FastAPI, File, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragstead.answer.ask import (
    DEFAULT_MAX_CONTEXT_TOKENS,
    DEFAULT_MIN_SIMILARITY,
    AskOptions,
    answer,
    gather,
    providers_from_env,
)
from ragstead.answer.base import AnswerProvider
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.prompt import load_template
from ragstead.api.keys import SCOPES, ApiKey, KeyFile
from ragstead.api.ratelimit import RateLimiter
from ragstead.config import Settings
from ragstead.documents.loaders import LOADERS
from ragstead.embeddings.base import Embedder
from ragstead.errors import IndexLockedError, InvalidQueryError, ModelMismatchError, RagsteadError
from ragstead.indexing.build import index_paths
from ragstead.retrieval.filters import USER_SLUG, QueryFilters
from ragstead.retrieval.search import MAX_QUERY_CHARS, SearchOptions, search
from ragstead.stores import open_store

log = logging.getLogger("ragstead.api")
_UPLOAD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]{0,119}$")


@dataclass(frozen=True)
class ApiConfig:
    """Server limits; `ragstead serve` flags map onto these."""

    auth: bool = True
    as_user: str | None = None  # --no-auth: every request acts as this user
    rate_per_minute: int = 120
    burst: int = 20
    max_body_bytes: int = 1_000_000
    max_upload_bytes: int = 20_000_000
    embed_cache_size: int = 1024
    index_wait_seconds: float = 30.0
    max_top_k: int = 100


class ApiError(Exception):
    """An error with an HTTP status and a stable machine-readable code."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


class QueryRequest(BaseModel):
    """Body of POST /v1/query. There is no user field: the key decides whose documents are searched."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    top_k: int = Field(default=8, ge=1, le=100)
    mode: Literal["vector", "lexical", "hybrid"] | None = None
    scope: Literal["private", "public"] = Field(
        default="private", description="private: the key's own private documents; public: public documents"
    )
    doc_types: list[str] = Field(default_factory=list, max_length=10)
    date_from: str | None = Field(default=None, max_length=10, description="YYYY-MM-DD, inclusive")
    date_to: str | None = Field(default=None, max_length=10, description="YYYY-MM-DD, inclusive")
    include_archive: bool = False
    tags: list[str] = Field(default_factory=list, max_length=20)
    top_k_vector: int | None = Field(default=None, ge=1, le=1000)
    top_k_lexical: int | None = Field(default=None, ge=1, le=1000)
    rrf_k: int | None = Field(default=None, ge=0, le=1000)
    fusion: Literal["convex", "rrf"] | None = Field(default=None, description="hybrid fusion (default: config)")
    fusion_weight: float | None = Field(default=None, ge=0.0, le=1.0, description="convex: the vector side's share")


class AskRequest(QueryRequest):
    """Body of POST /v1/ask: a query body plus how to answer."""

    min_similarity: float = Field(default=DEFAULT_MIN_SIMILARITY, ge=-1.0, le=1.0)
    max_context_tokens: int = Field(default=DEFAULT_MAX_CONTEXT_TOKENS, ge=100, le=32000)
    extractive: bool = Field(default=False, description="answer offline from the retrieved sentences only")


class CachedEmbedder:
    """LRU cache of query vectors in front of an embedder (repeated questions skip the model)."""

    def __init__(self, inner: Embedder, size: int) -> None:
        self.inner, self.size = inner, size
        self.name, self.dim = inner.name, inner.dim
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def embed_query(self, text: str) -> np.ndarray:
        if self.size <= 0:
            return self.inner.embed_query(text)
        with self._lock:
            if text in self._cache:
                self._cache.move_to_end(text)
                self.hits += 1
                return self._cache[text]
        vector = self.inner.embed_query(text)
        with self._lock:
            self.misses += 1
            self._cache[text] = vector
            if len(self._cache) > self.size:
                self._cache.popitem(last=False)
        return vector

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)


class BodyLimit:
    """ASGI middleware: refuse a body over the limit, by Content-Length or while it streams in."""

    def __init__(self, app: ASGIApp, max_body: int, max_upload: int) -> None:
        self.app, self.max_body, self.max_upload = app, max_body, max_upload

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        upload = scope["path"] == "/v1/documents" and scope["method"] == "POST"
        limit = self.max_upload if upload else self.max_body
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await _error(413, "request_too_large", f"the request body is over the {limit}-byte limit")(
                scope, receive, send
            )
            return
        seen = 0
        refused = False

        async def counted_receive() -> Message:
            # Over the limit: answer 413 ourselves and tell the app the client left, so it stops reading.
            # (Raising here would be turned into a generic 400 by FastAPI's body parser.)
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    refused = True
                    await _error(413, "request_too_large", f"the request body is over the {limit}-byte limit")(
                        scope, receive, send
                    )
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not refused:  # after a 413 the app's own answer (to the "disconnect") is dropped
                await send(message)

        await self.app(scope, counted_receive, guarded_send)


@dataclass
class Caller:
    """Who is asking: the user slug and the scopes their key grants."""

    user_slug: str
    scopes: tuple[str, ...]
    key_id: str


def create_app(
    settings: Settings, embedder: Embedder, config: ApiConfig | None = None,
    providers: list[AnswerProvider] | None = None,
) -> FastAPI:
    """Build the app over the configured store (an embedded index is created empty if missing).

    `providers` is the answerer chain of POST /v1/ask (default: from the environment, see `ask`, with
    the configured `answer_template`; requests cannot pick a template, so clients never name files).
    """
    config = config or ApiConfig()
    answerers = providers if providers is not None else providers_from_env(
        template=load_template(settings.template_spec))
    if not config.auth and not (config.as_user and USER_SLUG.match(config.as_user)):
        raise RagsteadError("without auth the server needs a user slug to act as (--as-user), "
                            f"letters, digits, '.', '_' or '-'; got {config.as_user!r}")
    keys = KeyFile(settings.db_file.parent / "api_keys.json")
    limiter = RateLimiter(config.rate_per_minute, config.burst)
    cached = CachedEmbedder(embedder, config.embed_cache_size)
    store = open_store(settings)
    # One read connection for all requests; sqlite3 connections and the store's caches are not meant
    # for concurrent use, so reads take turns. Writes open their own store (as another process would).
    read_lock = threading.Lock()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        store.close()

    app = FastAPI(
        lifespan=lifespan,
        title="ragstead",
        version="1",
        description="Query, upload and delete your own documents in a ragstead index. "
        "Authenticate with `Authorization: Bearer <key>` (`ragstead keys add`).",
    )
    app.state.store, app.state.embedder, app.state.config = store, cached, config

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}"
            for e in exc.errors()[:5]
        )
        return _error(422, "invalid_request", problems or "the request is not valid")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)  # the trace stays here
        return _error(500, "internal_error", "the server failed to handle this request; see its log")

    app.add_middleware(BodyLimit, max_body=config.max_body_bytes, max_upload=config.max_upload_bytes)

    def caller(request: Request) -> Caller:
        if not config.auth:
            who = Caller(config.as_user or "", SCOPES, "no-auth")
        else:
            header = request.headers.get("authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise ApiError(401, "unauthorized", "send `Authorization: Bearer <key>`",
                               {"WWW-Authenticate": "Bearer"})
            record: ApiKey | None = keys.lookup(token.strip())
            if record is None:
                raise ApiError(401, "unauthorized", "unknown or revoked API key", {"WWW-Authenticate": "Bearer"})
            who = Caller(record.user_slug, record.scopes, record.key_id)
        wait = limiter.check(who.key_id if config.auth else f"ip:{request.client.host if request.client else '-'}")
        if wait:
            raise ApiError(429, "rate_limited", f"too many requests; retry in {wait}s", {"Retry-After": str(wait)})
        return who

    def need(scope: str) -> Callable[[Caller], Caller]:
        def check(who: Caller = Depends(caller)) -> Caller:  # noqa: B008 - FastAPI's dependency idiom
            if scope not in who.scopes:
                raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope")
            return who

        return check

    def run_library(call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (InvalidQueryError, ModelMismatchError) as exc:
            raise ApiError(400, "invalid_query", str(exc)) from exc
        except IndexLockedError as exc:
            raise ApiError(503, "index_busy", str(exc), {"Retry-After": "5"}) from exc
        except RagsteadError as exc:
            raise ApiError(400, "bad_request", str(exc)) from exc

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"])
    def readyz() -> JSONResponse:
        """Readiness: the store is open, the embedder is loaded and matches the index's model."""
        try:
            with read_lock:
                store.check_model(cached.name, cached.dim)
                stats = store.stats()
        except RagsteadError as exc:
            return _error(503, "not_ready", str(exc))
        return JSONResponse({"status": "ready", "model": cached.name, "documents": stats["documents"],
                             "chunks": stats["chunks"]})

    def search_request(body: QueryRequest, who: Caller) -> tuple[QueryFilters, SearchOptions]:
        """Filters (the user always from the key) and options from a query or ask body."""
        public = body.scope == "public"
        filters = QueryFilters.build(
            user_slug=None if public else who.user_slug, doc_types=body.doc_types, public_only=public,
            date_from=body.date_from, date_to=body.date_to, include_archive=body.include_archive, tags=body.tags,
        )
        options = SearchOptions.from_settings(
            settings, body.mode, k=body.top_k, top_k_vector=body.top_k_vector, top_k_lexical=body.top_k_lexical,
            rrf_k=body.rrf_k, fusion=body.fusion, fusion_weight=body.fusion_weight,
        )
        return filters, options

    @app.post("/v1/query", tags=["search"])
    def query(body: QueryRequest, who: Caller = Depends(need("query"))) -> dict[str, Any]:  # noqa: B008
        """Search the caller's private documents (or public ones) and return the query JSON contract."""

        def run() -> dict[str, Any]:
            filters, options = search_request(body, who)
            with read_lock:
                return search(body.query, store, cached, filters, options, settings.path_rules)

        return run_library(run)

    @app.post("/v1/ask", tags=["search"])
    def ask_endpoint(body: AskRequest, who: Caller = Depends(need("ask"))) -> dict[str, Any]:  # noqa: B008
        """Answer from the caller's documents with citations, or the refusal sentence (the `ask` JSON shape)."""

        def run() -> dict[str, Any]:
            filters, options = search_request(body, who)
            ask_options = AskOptions(options, body.min_similarity, body.max_context_tokens)
            with read_lock:  # the store-side half; the LLM call below does not hold up other readers
                found, contexts = gather(body.query, store, cached, filters, ask_options, settings.path_rules)
            chain = [ExtractiveAnswerer()] if body.extractive else list(answerers)
            return answer(body.query, found, contexts, chain)

        return run_library(run)

    @app.get("/v1/documents", tags=["documents"])
    def list_documents(
        limit: int = 100, offset: int = 0, who: Caller = Depends(need("query"))  # noqa: B008
    ) -> dict[str, Any]:
        """The caller's own private documents, by path."""
        if not (1 <= limit <= 1000 and 0 <= offset <= 10_000_000):
            raise ApiError(422, "invalid_request", "limit must be 1-1000 and offset 0-10000000")
        filters = QueryFilters.build(user_slug=who.user_slug, include_archive=True)
        with read_lock:
            docs = store.list_documents(filters, limit, offset)
        return {"documents": docs, "limit": limit, "offset": offset}

    @app.post("/v1/documents", tags=["documents"], status_code=201)
    def upload(
        file: UploadFile = File(...), who: Caller = Depends(need("upload"))  # noqa: B008
    ) -> dict[str, Any]:
        """Store a file in the caller's `kb/users/<slug>/uploads/` and index it; replaces a file of the same name."""
        name = Path(file.filename or "").name
        if not _UPLOAD_NAME.match(name) or name != (file.filename or ""):
            raise ApiError(422, "invalid_filename",
                           "the file name must be 1-120 letters, digits, spaces, '.', '_' or '-', without a path")
        if Path(name).suffix.lower() not in LOADERS:
            raise ApiError(415, "unsupported_type",
                           f"unsupported file type {Path(name).suffix!r}; send one of {sorted(LOADERS)}")
        folder = settings.root / "kb" / "users" / who.user_slug / "uploads"
        target = folder / name
        base = settings.root.resolve()
        if not target.resolve().is_relative_to((base / "kb" / "users" / who.user_slug).resolve()):
            raise ApiError(422, "invalid_filename", "the file name leaves the caller's folder")
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".upload-{os.getpid()}-{threading.get_ident()}.tmp"
        try:
            with tmp.open("wb") as out:
                while chunk := file.file.read(1 << 20):
                    out.write(chunk)
            previous = target.read_bytes() if target.exists() else None
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        rel = target.relative_to(settings.root).as_posix()
        report = _index_one(rel)
        if report.skipped:
            # Unreadable content: put back what was there (or nothing) so a bad upload loses nothing.
            if previous is None:
                target.unlink(missing_ok=True)
            else:
                target.write_bytes(previous)
            _index_one(rel)
            raise ApiError(422, "unreadable_file", report.skipped[0]["reason"])
        with read_lock:
            doc = store.get_document(file_path=rel)
        status = "added" if report.added else "updated" if report.updated else "unchanged"
        return {"status": status, "document": doc}

    def _index_one(rel: str) -> Any:
        writer = open_store(settings)
        try:
            return run_library(lambda: index_paths(settings, writer, embedder, [rel], config.index_wait_seconds))
        finally:
            writer.close()

    @app.delete("/v1/documents/{doc_id}", tags=["documents"])
    def delete_document(doc_id: str, who: Caller = Depends(need("delete"))) -> dict[str, Any]:  # noqa: B008
        """Delete one of the caller's documents: the file and its chunks in every index."""
        if not re.fullmatch(r"[0-9a-f]{64}", doc_id):
            raise ApiError(404, "not_found", "no such document")
        with read_lock:
            doc = store.get_document(doc_id)
        # Someone else's document answers exactly like a missing one: ids must not be probeable.
        if doc is None or not doc["is_private"] or doc["user_slug"] != who.user_slug:
            raise ApiError(404, "not_found", "no such document")
        path = (settings.root / doc["file_path"]).resolve()
        if not path.is_relative_to((settings.root / "kb" / "users" / who.user_slug).resolve()):
            raise ApiError(404, "not_found", "no such document")
        path.unlink(missing_ok=True)
        _index_one(doc["file_path"])
        return {"deleted": doc_id, "file_path": doc["file_path"]}

    return app

