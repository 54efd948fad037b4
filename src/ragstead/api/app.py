"""The HTTP API: a thin FastAPI layer over the same library calls as the CLI.

Who is asking is decided by the API key alone: the key's user slug becomes the query's user filter
and the owner of uploads; the request body cannot name a user (unknown fields are refused). Every
error is JSON `{"error": {"code", "message"}}`, never a stack trace.
"""

from __future__ import annotations

import difflib
import hmac
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any, Literal

from fastapi import Depends, FastAPI, File, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field, create_model
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragstead.answer.base import AnswerProvider
from ragstead.api.keys import SCOPES, ApiKey, KeyFile
from ragstead.api.logging import KEY_ID, AccessLog
from ragstead.api.page import add_page, stream_lines
from ragstead.api.ratelimit import ByteBudget, PerKey, RateLimiter
from ragstead.conversation.turns import MAX_HISTORY_TURNS, history_turns
from ragstead.errors import (
    DocumentNotFoundError,
    IndexLockedError,
    InvalidQueryError,
    LoadError,
    ModelMismatchError,
    RagsteadError,
    UnsupportedFileError,
)
from ragstead.filters import USER_SLUG
from ragstead.httpguard.origin import HostOriginGuard
from ragstead.knowledge_base import KnowledgeBase
from ragstead.request import model as library  # the request model; this module's QueryRequest/AskRequest are bodies
from ragstead.request.fields import MAX_K, exposed, limits, pydantic_fields, spellings

log = logging.getLogger("ragstead.api")


@dataclass(frozen=True)
class ApiConfig:
    """Server limits; `ragstead serve` flags map onto these."""

    auth: bool = True
    as_user: str | None = None  # --no-auth: every request acts as this user
    rate_per_minute: int = 120
    burst: int = 20
    max_body_bytes: int = 1_000_000
    max_upload_bytes: int = 20_000_000
    index_wait_seconds: float = 30.0
    max_top_k: int = MAX_K  # unused: top_k's limit is the request model's
    max_tokens: int = 8000  # /v1/query's default budget for the returned chunks' text (0: none)
    # The costly calls one key may have running at once (more answer 429), and the bytes the server's concurrent
    # fetches may hold: each /v1/ingest reserves its cap (fetch_max_mb) before it fetches (more answer 503).
    key_findability: int = 1
    key_ingests: int = 1
    key_lists: int = 1  # list and count answers ("which notes mention X") read every matching document of the scope
    fetch_bytes_held: int = 256 << 20
    # `ragstead serve`'s one-time token: the project owner's key for this server's life (the page link it
    # prints, `/?token=…`, as Jupyter does); None: API keys only.
    owner_token: str | None = None


class ApiError(Exception):
    """An error with an HTTP status and a stable machine-readable code."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


class _Body(BaseModel):
    """What the search and ask bodies do with their fields; the fields themselves are the field table's
    (ragstead.request.fields), spelt as this door spells them, with the table's limits."""

    model_config = ConfigDict(extra="forbid")

    def library_fields(self, who: Caller) -> dict[str, Any]:
        """The library request's fields by their library names, in the keyword form `SearchRequest.of` takes; the
        user always comes from the key, and `scope` says whether public documents are read instead."""
        given = {item.name: getattr(self, spelt.name) for item, spelt in exposed("api", "ask")
                 if spelt.name in type(self).model_fields}
        public = given.pop("public_only") == "public"
        return {**given, "user": None if public else who.user_slug, "public_only": public}

    def search_request(self, who: Caller) -> library.SearchRequest:
        return library.SearchRequest.of(**self.library_fields(who))

    def ask_request(self, who: Caller) -> library.AskRequest:
        if getattr(self, "max_tokens", None) is not None:  # ask budgets its context with max_context_tokens
            raise ApiError(422, "invalid_request", "max_tokens applies to /v1/query; ask takes max_context_tokens")
        return library.AskRequest.of(**self.library_fields(who))


def body_models() -> tuple[type[_Body], type[_Body]]:
    """The bodies of POST /v1/query and /v1/ask, built from the field table as it is (once, when this module is
    imported). Dates are checked by the request model (a 400 naming the field), not by a pattern here."""
    query = create_model(
        "QueryRequest", __base__=_Body, __module__=__name__, __doc__="Body of POST /v1/query. There is no user "
        "field: the key decides whose documents are searched.", **pydantic_fields("api", "search", patterns=False),
        max_tokens=(int | None, Field(default=None, ge=1, le=200_000, description="/v1/query: a budget for the "
                                      "returned chunks' text (estimated tokens), cut at chunk boundaries; default: "
                                      "the server's --max-tokens")))
    ask = create_model(
        "AskRequest", __base__=query, __module__=__name__, __doc__="Body of POST /v1/ask: a query body plus how to "
        "answer.", **pydantic_fields("api", "ask", only="ask", patterns=False),
        stream=(bool, Field(default=False, description="stream NDJSON lines: {type: text, text} as the answer is "
                                                       "written, then {type: answer, answer: <the ask JSON>} (or "
                                                       "{type: error, error})")))
    return query, ask


QueryRequest, AskRequest = body_models()


class ChatRequest(AskRequest):
    """Body of POST /v1/chat: an ask body plus the conversation it continues: a kept one's id, or the client's own
    history; neither starts a new kept conversation."""

    conversation_id: str | None = Field(default=None, pattern=r"^c_[0-9a-f]{20}$", description="continue this "
                                        "conversation (kept on the server, the key's user's own)")
    history: list[dict[str, Any]] | None = Field(default=None, max_length=MAX_HISTORY_TURNS, description="the "
                                                 "earlier turns, oldest first, as this route returns them or as "
                                                 "{question, answer}; nothing is kept on the server")
    remember: bool = Field(default=False, description="let a 'remember that ...' turn write to the key's user's "
                                                      "memory (the key needs the upload scope)")

    def chat_request(self, who: Caller) -> library.AskRequest:
        if self.conversation_id is not None and self.history is not None:
            raise ApiError(422, "invalid_request", "give conversation_id or history, not both")
        if self.remember and "upload" not in who.scopes:
            raise ApiError(403, "forbidden", "this key lacks the 'upload' scope a memory write needs")
        return replace(self.ask_request(who), remember=self.remember)


class IngestRequest(BaseModel):
    """Body of POST /v1/ingest: http(s) URLs only, stored in the key's user's private tree."""

    model_config = ConfigDict(extra="forbid")

    sources: list[str] = Field(min_length=1, max_length=20, description="web page, PDF, text, YouTube or post URLs")
    tags: list[str] = Field(default_factory=list, max_length=20)
    refresh: bool = Field(default=False, description="re-fetch URLs already ingested; replace if changed")


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


class HeadAuth:
    """ASGI middleware: a request to /v1/ without a valid key is answered 401 from its head, before a byte of its
    body is read (the route's own check runs only after FastAPI has read the whole body, so 64 anonymous bodies
    sent slowly held every request slot for the body timeout). When a body was announced it is left unread and
    the connection closed."""

    def __init__(self, app: ASGIApp, identify: Callable[[str], Caller]) -> None:
        self.app, self.identify = app, identify

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/") and scope["path"] not in PUBLIC_PATHS:
            try:
                self.identify(_header(scope, b"authorization"))
            except ApiError as exc:
                has_body = _header(scope, b"content-length") not in ("", "0") or _header(scope, b"transfer-encoding")
                headers = {**exc.headers, **({"Connection": "close"} if has_body else {})}
                await _error(exc.status, exc.code, exc.message, headers)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str:
    """One request header from an ASGI scope ("" when absent)."""
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


@dataclass
class Caller:
    """Who is asking: the user slug and the scopes their key grants."""

    user_slug: str
    scopes: tuple[str, ...]
    key_id: str


def caller_scope(who: Caller, scope: str, **narrowing: Any) -> library.Scope:
    """Whose documents a request reads, the one rule of every route: `private` is the key's user's private
    documents, `public` the public ones; `narrowing` (doc_types, tags, dates, include_archive) only narrows."""
    public = scope == "public"
    return library.Scope(None if public else who.user_slug, public, **narrowing)


# The request fields as the API spells them (the field table's); the others share the library's names.
API_SPELLING = spellings("api")


def run_library(call: Callable[[], Any]) -> Any:
    """A library call, its errors as the API's: 400 for a bad query, 503 while the index is busy, 404 for a
    document outside the caller's scope."""
    try:
        return call()
    except InvalidQueryError as exc:
        raise ApiError(400, "invalid_query", exc.respelled(API_SPELLING)) from exc
    except ModelMismatchError as exc:
        raise ApiError(400, "invalid_query", str(exc)) from exc
    except IndexLockedError as exc:
        raise ApiError(503, "index_busy", str(exc), {"Retry-After": "5"}) from exc
    except DocumentNotFoundError as exc:
        raise ApiError(404, "not_found", str(exc)) from exc
    except RagsteadError as exc:
        raise ApiError(400, "bad_request", str(exc)) from exc


def check_rerank_allowed(kb: KnowledgeBase, body: _Body) -> None:
    """ApiError 400 for a body asking to re-rank on a server whose config sets `api_rerank = false`: its operator
    keeps the re-ranking model (loaded on first use, run on each such request) off this server's CPU."""
    if getattr(body, "rerank", False) and not kb.settings.api_rerank:
        raise ApiError(400, "rerank_off", "rerank is off on this server (its config sets api_rerank = false); "
                                          "ask without rerank, or ask its operator to set api_rerank = true")


def _busy_key(what: str, limit: int) -> ApiError:
    return ApiError(429, "busy_key", f"this key already has {limit} {what}{'' if limit == 1 else 's'} running; "
                    "retry when it ends", {"Retry-After": "5"})


def nothing_visible_note(kb: KnowledgeBase, user: str) -> str | None:
    """Why a private scope is empty, when it is because the caller's user owns no document: an empty page says
    so instead of nothing. It names only the caller's own user and folder, never anything of anyone else's."""
    if kb.documents(user=user, include_archive=True, limit=1):
        return None
    folder = kb.settings.user_folder(user)
    where = f"index {folder}/" if folder else "index the project folder"
    return f"no documents are visible to user {user}; {where} (or upload a file) or ask the owner"


def create_app(kb: KnowledgeBase, config: ApiConfig | None = None) -> FastAPI:
    """Routes over one KnowledgeBase (an embedded index is created empty if missing). POST /v1/ask uses the
    knowledge base's answerer chain with its configured template: requests cannot pick one, so clients
    never name files."""
    config = config or ApiConfig()
    if not config.auth and not (config.as_user and USER_SLUG.match(config.as_user)):
        raise RagsteadError("without auth the server needs a user slug to act as (--as-user), "
                            f"letters, digits, '.', '_' or '-'; got {config.as_user!r}")
    answerers = kb.providers()  # built (and the template checked) once, at start-up
    if not kb.exists():
        kb.create()  # an empty index, so readiness and queries answer before the first upload
    kb.embedder  # noqa: B018 - load the model before the first request, not during it

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        kb.close()

    # Swagger UI (/docs) and ReDoc (/redoc) load their JS and CSS from this server (/static-offline-docs/),
    # not from a CDN: the docs work offline.
    app = FastAPIOffline(
        lifespan=lifespan,
        title="ragstead",
        version="1",
        description="Query, upload and delete your own documents in a ragstead index. "
        "Authenticate with `Authorization: Bearer <key>` (`ragstead keys add`).",
    )
    app.state.kb, app.state.config = kb, config
    _add_error_handlers(app)
    gate = _Gate(config, KeyFile(kb.api_keys_file), RateLimiter(config.rate_per_minute, config.burst),
                 kb.settings.owner_slug)
    app.state.in_flight_counts = gate.counts  # `serve` hands it to the server's in-flight limit
    app.add_middleware(BodyLimit, max_body=config.max_body_bytes, max_upload=config.max_upload_bytes)
    app.add_middleware(HeadAuth, identify=gate.identify)  # before any body is read
    app.add_middleware(HostOriginGuard, extra_hosts=kb.settings.allowed_hosts)  # DNS rebinding, cross-origin
    app.add_middleware(AccessLog, anonymous="-" if config.auth else "no-auth")  # outermost: logs 413s too
    need = gate.need
    _add_health_routes(app, kb)
    _add_limits_route(app)
    _add_search_routes(app, kb, need, answerers, config)
    _add_chat_routes(app, kb, need, answerers)
    _add_document_routes(app, kb, need, config)
    add_page(app)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every error as `{"error": {"code", "message"}}`; a crash's trace stays in the server's log."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        body_model = _BODY_MODELS.get(request.url.path)
        problems = "; ".join(_problem(e, body_model) for e in exc.errors()[:5])
        return _error(422, "invalid_request", problems or "the request is not valid")

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = str(exc.detail)
        if exc.status_code == 405:
            message = _method_hint(request.url.path, (exc.headers or {}).get("Allow", ""))
        return _error(exc.status_code, code, message, exc.headers)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)  # the trace stays here
        return _error(500, "internal_error", "the server failed to handle this request; see its log")


# The JSON bodies by route: an unknown field is checked against the body's own field names for a did-you-mean.
_BODY_MODELS: dict[str, type[BaseModel]] = {"/v1/query": QueryRequest, "/v1/ask": AskRequest,
                                            "/v1/chat": ChatRequest, "/v1/ingest": IngestRequest}
# What the library and the CLI call a body field (`k`, `--k`), and a URL's habits (`?q=`): this door's name for
# it. The rest (`--doc-type`, `--tag`, typos) is close enough in spelling for difflib.
_OTHER_SPELLINGS = {**API_SPELLING, "q": "query", "question": "query", "url": "sources", "urls": "sources"}


def _problem(error: Mapping[str, Any], body_model: type[BaseModel] | None) -> str:
    """One validation error as `field: message`; an unknown field names the field this body has for it."""
    where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
    problem = f"{where}: {error.get('msg')}"
    loc = tuple(error.get("loc", ()))
    if error.get("type") == "extra_forbidden" and body_model is not None and len(loc) == 2 and loc[0] == "body":
        guess = _did_you_mean(str(loc[1]), body_model)
        if guess:
            problem += f" (did you mean `{guess}`?)"
    return problem


def _did_you_mean(field: str, body_model: type[BaseModel]) -> str | None:
    known = list(body_model.model_fields)
    name = field.lower().lstrip("-").replace("-", "_")  # a CLI flag's spelling: --date-from
    spelled = _OTHER_SPELLINGS.get(name)
    if spelled in known:
        return spelled
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return close[0] if close else None


def _method_hint(path: str, allowed: str) -> str:
    """A 405's message: the method this route takes (and, for a JSON body, its shape) instead of a bare status."""
    methods = [m.strip() for m in allowed.split(",") if m.strip() not in ("", "HEAD")]
    if not methods:
        return "Method Not Allowed; see /docs"
    if "POST" in methods and path in _BODY_MODELS:
        shape = ' {"query": …}' if "query" in _BODY_MODELS[path].model_fields else ""
        return f"use POST {path} with a JSON body{shape}; see /docs"
    return f"use {' or '.join(f'{method} {path}' for method in methods)}; see /docs"


class _Gate:
    """Who is asking (the API key, or the --no-auth user), within the rate limit, with the scope a route needs."""

    def __init__(self, config: ApiConfig, keys: KeyFile, limiter: RateLimiter, owner: str = "") -> None:
        self.config, self.keys, self.limiter, self.owner = config, keys, limiter, owner

    def identify(self, header: str) -> Caller:
        """The caller an `Authorization` header names (or the --no-auth user); ApiError 401 when it names none."""
        config = self.config
        if not config.auth:
            return Caller(config.as_user or "", SCOPES, "no-auth")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "unauthorized", "send `Authorization: Bearer <key>`", {"WWW-Authenticate": "Bearer"})
        if config.owner_token and hmac.compare_digest(token.strip().encode(), config.owner_token.encode()):
            return Caller(self.owner, SCOPES, "owner-token")  # the page link `serve` printed for its owner
        record: ApiKey | None = self.keys.lookup(token.strip())
        if record is None:
            raise ApiError(401, "unauthorized", "unknown or revoked API key", {"WWW-Authenticate": "Bearer"})
        return Caller(record.user_slug, record.scopes, record.key_id)

    def counts(self, scope: Scope) -> bool:
        """Whether a request counts against the server's in-flight limit: only once its head names a caller,
        so anonymous requests (refused at the head, or the page's and docs' own files) can never fill it."""
        try:
            self.identify(_header(scope, b"authorization"))
        except ApiError:
            return False
        return True

    def caller(self, request: Request) -> Caller:
        config = self.config
        who = self.identify(request.headers.get("authorization", ""))
        if config.auth:
            setattr(request.state, KEY_ID, who.key_id)  # for the access log (the id, never the key)
        wait = self.limiter.check(who.key_id if config.auth
                                  else f"ip:{request.client.host if request.client else '-'}")
        if wait:
            raise ApiError(429, "rate_limited", f"too many requests; retry in {wait}s", {"Retry-After": str(wait)})
        return who

    def need(self, scope: str) -> Callable[[Caller], Caller]:
        """A route dependency: the caller, if their key grants `scope`."""
        def check(who: Caller = Depends(self.caller)) -> Caller:  # noqa: B008 - FastAPI's dependency idiom
            if scope not in who.scopes:
                raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope")
            return who

        return check


Need = Callable[[str], Callable[[Caller], Caller]]


def _add_health_routes(app: FastAPI, kb: KnowledgeBase) -> None:
    @app.get("/livez", tags=["ops"])
    def livez() -> dict[str, str]:
        """Liveness: the process answers (no store, no model)."""
        return {"status": "ok"}

    def readiness() -> JSONResponse:
        report = kb.readiness()
        return JSONResponse(report, status_code=200 if report["status"] == "ready" else 503)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> JSONResponse:
        """Readiness: the store answers, the embedder is loaded and runs, and it is the index's model; 200 with
        each check, or 503 with the failed ones and why."""
        return readiness()

    @app.get("/readyz", tags=["ops"])
    def readyz() -> JSONResponse:
        """The same as /healthz (kept for clients of the earlier versions)."""
        return readiness()


# The one /v1/ route without a key: it says what /openapi.json already says to anyone, and the page reads it before
# a key is given.
PUBLIC_PATHS = ("/v1/limits",)


def _add_limits_route(app: FastAPI) -> None:
    @app.get("/v1/limits", tags=["search"])
    def field_limits() -> dict[str, Any]:
        """The fields /v1/query and /v1/ask take, by this API's names: each one's library field, type, default
        (or `required`), limits (min, max, max_chars, max_items, choices, pattern), words and which requests take
        it. The field table's (ragstead.request.fields), as the bodies are; the web page reads its limits here."""
        return {"fields": limits("api")}


class _ListAnswers(PerKey):
    """One key's list and count answers at once (#45.4): each reads every matching document of its scope."""

    def claimed_for(self, request: library.AskRequest, key: str) -> bool:
        """Whether `request` is a list question that took one of `key`'s places; ApiError 429 when none is free."""
        from ragstead.answer.folder_question import folder_question  # ask loads the answer package anyway
        from ragstead.answer.listing import list_question

        asked = request.query  # a list, or a sum/count over the whole scope (#46)
        if not (request.list_questions and (list_question(asked) or folder_question(asked)) is not None):
            return False
        if not self.claim(key):
            raise _busy_key("list answer", self.limit)
        return True


def _add_search_routes(app: FastAPI, kb: KnowledgeBase, need: Need, answerers: list[AnswerProvider],
                       config: ApiConfig) -> None:
    lists = _ListAnswers(config.key_lists)

    @app.post("/v1/query", tags=["search"])
    def query(body: QueryRequest, who: Caller = Depends(need("query"))) -> dict[str, Any]:  # noqa: B008
        """Search the caller's private documents (or public ones) and return the query JSON contract."""
        check_rerank_allowed(kb, body)
        budget = body.max_tokens or config.max_tokens

        def run() -> dict[str, Any]:
            found = kb.search(body.search_request(who))
            data = (found.within_tokens(budget) if budget else found).to_dict(include_text=True)
            note = None if found.hits or body.scope == "public" else nothing_visible_note(kb, who.user_slug)
            return {**data, "note": note} if note else data

        return run_library(run)

    @app.post("/v1/ask", tags=["search"])
    def ask_endpoint(body: AskRequest, who: Caller = Depends(need("ask"))) -> Any:  # noqa: B008
        """Answer from the caller's documents with citations, or the refusal sentence (the `ask` JSON shape).
        With `stream`, NDJSON lines as the answer is written (the web page at / reads them)."""
        # Bad filters or options are a plain 400 before a stream starts, not an error line inside it.
        check_rerank_allowed(kb, body)
        request = run_library(lambda: body.ask_request(who))

        listed = lists.claimed_for(request, who.key_id)

        def answered(on_text: Callable[[str], None] | None = None) -> dict[str, Any]:
            try:
                answer = kb.ask(request, answerers=answerers, on_text=on_text).to_dict()
            finally:
                if listed:  # a streamed answer ends on the stream's thread: the place is given back there
                    lists.release(who.key_id)
            private = answer["refused"] and body.scope == "private"
            note = nothing_visible_note(kb, who.user_slug) if private else None
            return {**answer, "notes": [*answer["notes"], note]} if note else answer

        if not body.stream:
            return run_library(answered)
        return stream_lines(answered, log)

    @app.get("/v1/chunks/{chunk_id}", tags=["search"])
    def chunk_in_context(chunk_id: str, scope: Literal["private", "public"] = "private", around: int = 1,
                         who: Caller = Depends(need("query"))) -> dict[str, Any]:  # noqa: B008
        """What a citation opens: the chunk with `around` (0-5) chunks on each side and its document (path, URL,
        title), in the caller's scope. Another user's chunk answers 404, exactly like a missing one."""
        if not 0 <= around <= 5:
            raise ApiError(422, "invalid_request", "around must be 0-5")
        public = scope == "public"
        return run_library(lambda: kb.passage(chunk_id, around=around, user=None if public else who.user_slug,
                                              public_only=public).to_dict())


def _add_chat_routes(app: FastAPI, kb: KnowledgeBase, need: Need, answerers: list[AnswerProvider]) -> None:
    @app.post("/v1/chat", tags=["chat"])
    def chat(body: ChatRequest, who: Caller = Depends(need("ask"))) -> Any:  # noqa: B008
        """Ask the next turn of a conversation: a follow-up ("and the deposit?") is rewritten from the earlier turns
        before it is searched, in the conversation's scope. `{conversation_id, turn}`: the turn is the question, the
        question that was searched (`rewritten`, `rewrite`) and the `ask` JSON. With `stream`, NDJSON lines as the
        answer is written, then `{type: chat, chat: <the same object>}`."""
        # Bad filters, another user's id, another scope: a plain error before a stream starts.
        check_rerank_allowed(kb, body)
        request = run_library(lambda: body.chat_request(who))
        before = run_library(lambda: kb.conversation(body.conversation_id, owner=who.user_slug)
                             if body.conversation_id else None)
        history = run_library(lambda: history_turns(body.history)) if body.history is not None else None
        if before is not None and before.scope != request.scope:
            raise ApiError(400, "invalid_query", "scope: this conversation keeps the scope of its first question; "
                                                 "start a new conversation (no conversation_id) for another")

        def run(on_text: Callable[[str], None] | None = None) -> dict[str, Any]:
            found = kb.chat(request, conversation=before, history=history, owner=who.user_slug,
                            keep=history is None, answerers=answerers, on_text=on_text)
            return {"conversation_id": found.id, "turn": found.last.to_dict() if found.last else None,
                    "turns": len(found.turns)}

        if not body.stream:
            return run_library(run)
        return stream_lines(run, log, kind="chat")

    @app.get("/v1/chat/{conversation_id}", tags=["chat"])
    def get_conversation(conversation_id: str, who: Caller = Depends(need("ask"))) -> dict[str, Any]:  # noqa: B008
        """A kept conversation of the caller: its scope and turns. Another user's answers 404, like a missing one."""
        return run_library(lambda: kb.conversation(conversation_id, owner=who.user_slug).to_dict())

    @app.delete("/v1/chat/{conversation_id}", tags=["chat"])
    def delete_conversation(conversation_id: str, who: Caller = Depends(need("ask"))) -> dict[str, Any]:  # noqa: B008
        """Forget a kept conversation of the caller (its file is deleted). Another user's answers 404."""
        run_library(lambda: kb.delete_conversation(conversation_id, owner=who.user_slug))
        return {"deleted": conversation_id}


def _add_document_routes(app: FastAPI, kb: KnowledgeBase, need: Need, config: ApiConfig) -> None:
    checking, ingesting = PerKey(config.key_findability), PerKey(config.key_ingests)
    fetches = ByteBudget(config.fetch_bytes_held)

    @app.get("/v1/findability", tags=["documents"])
    def findability(scope: Literal["private", "public"] = "private", include_archive: bool = False,
                    who: Caller = Depends(need("query"))) -> dict[str, Any]:  # noqa: B008
        """Can each document in the caller's scope be found by its own words (title, headings, rarest terms) in
        the top 5? The `doctor --findability --json` shape, computed as if the index held only this scope: no
        other document is counted, ranked or named (not even as the near-duplicate that shadows one), and only
        the left-out files under the caller's own folders (or public ones, with scope=public) are listed.
        `regressions` is always [] and `previous` null: comparing with the last run is the CLI's."""
        def run() -> dict[str, Any]:
            filters = caller_scope(who, scope, include_archive=include_archive).filters()
            return kb.findability(filters=filters).to_dict()

        with checking.enter(who.key_id) as allowed:
            if not allowed:
                raise _busy_key("findability check", config.key_findability)
            return run_library(run)

    @app.get("/v1/documents", tags=["documents"])
    def list_documents(
        limit: int = 100, offset: int = 0,
        tags: list[str] = Query(default=[], description="only documents with any of these tags (repeat it: "  # noqa: B008
                                "?tags=a&tags=b), as /v1/query's tags"),
        who: Caller = Depends(need("query")),  # noqa: B008
    ) -> dict[str, Any]:
        """The caller's own private documents, by path."""
        if not (1 <= limit <= 1000 and 0 <= offset <= 10_000_000):
            raise ApiError(422, "invalid_request", "limit must be 1-1000 and offset 0-10000000")
        # The key's scope, narrowed by tags in the store's own filter (as a search's), never widened.
        docs = run_library(lambda: kb.documents(filters=caller_scope(who, "private", tags=tuple(tags),
                                                                     include_archive=True).filters(),
                                                limit=limit, offset=offset))
        data = {"documents": [doc.to_dict() for doc in docs], "limit": limit, "offset": offset}
        note = None if docs or offset else nothing_visible_note(kb, who.user_slug)
        return {**data, "note": note} if note else data

    @app.post("/v1/documents", tags=["documents"], status_code=201)
    def upload(
        file: UploadFile = File(...), who: Caller = Depends(need("upload"))  # noqa: B008
    ) -> dict[str, Any]:
        """Store a file in the caller's `kb/users/<slug>/uploads/` and index it; replaces a file of the same
        name. All or nothing: on any failure the previous file and document stay as they were."""
        name = file.filename or ""
        try:
            status, doc = kb.upload(name, file.file, user=who.user_slug, wait=config.index_wait_seconds)
        except UnsupportedFileError as exc:
            raise ApiError(415, "unsupported_type", str(exc)) from exc
        except InvalidQueryError as exc:
            raise ApiError(422, "invalid_filename", str(exc)) from exc
        except LoadError as exc:
            raise ApiError(422, "unreadable_file", str(exc)) from exc
        except IndexLockedError as exc:
            raise ApiError(503, "index_busy", str(exc), {"Retry-After": "5"}) from exc
        return {"status": status, "document": doc}

    @app.post("/v1/ingest", tags=["documents"])
    def ingest(body: IngestRequest, who: Caller = Depends(need("upload"))) -> dict[str, Any]:  # noqa: B008
        """Fetch, archive and index URLs into the caller's private tree: one result per source (added, updated,
        unchanged, duplicate or failed with its reason). URLs that resolve to loopback, private, link-local or
        metadata addresses are refused unless the server's config sets allow_private_urls."""
        if any(len(s) > 4096 for s in body.sources) or any(len(t) > 100 for t in body.tags):
            raise ApiError(422, "invalid_request", "a source is at most 4096 characters, a tag at most 100")
        # The sources of one call are fetched one after another: one response's cap is what the call may hold.
        cap = min(kb.settings.fetch_max_mb << 20, config.fetch_bytes_held)
        with ingesting.enter(who.key_id) as allowed:
            if not allowed:
                raise _busy_key("ingest", config.key_ingests)
            with fetches.reserve(cap) as room:
                if not room:
                    raise ApiError(503, "busy", f"the server is fetching other sources ({fetches.held >> 20} MiB "
                                   f"held of {config.fetch_bytes_held >> 20}); retry", {"Retry-After": "5"})
                return run_library(lambda: kb.ingest(body.sources, tags=body.tags, user=who.user_slug,
                                                     refresh=body.refresh, allow_private=False, urls_only=True,
                                                     wait=config.index_wait_seconds).to_dict())

    @app.delete("/v1/documents/{doc_id}", tags=["documents"])
    def delete_document(doc_id: str, who: Caller = Depends(need("delete"))) -> dict[str, Any]:  # noqa: B008
        """Delete one of the caller's documents: the file and its chunks in every index."""
        if not re.fullmatch(r"[0-9a-f]{64}", doc_id):
            raise ApiError(404, "not_found", "no such document")
        # Someone else's document answers exactly like a missing one: ids must not be probeable.
        return run_library(lambda: kb.delete(doc_id=doc_id, user=who.user_slug, wait=config.index_wait_seconds))
