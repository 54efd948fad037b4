"""`ragstead mcp`: the knowledge base as a Model Context Protocol server, for agents (Claude Desktop, Cursor, any
MCP client), on the official `mcp` SDK's low-level server, over stdio (default) or streamable HTTP.

A thin shell over `KnowledgeBase`, like the CLI and the HTTP API. Whose documents a client reaches is fixed when
the server starts (`--user`, private documents only unless `--public-only`, archive only with
`--include-archive`): a tool argument can narrow that scope (doc types, tags, dates), never widen it, and an
argument that tries (`user`, `public_only`, `include_archive: true` on a server without the archive) is an MCP
error. Every tool validates its arguments against a strict schema (no unknown keys, no type coercion, sizes
capped); unknown tools, wrong types and oversized arguments are MCP errors (JSON-RPC -32602) and the server
goes on. Write tools (`ingest`, `remember`) exist only with `--allow-write`. Logs go to stderr; on stdio the
SDK keeps stdout for the protocol alone.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from ragstead import __version__
from ragstead.conversation.turns import MAX_ANSWER_CHARS, MAX_HISTORY_TURNS
from ragstead.errors import DocumentNotFoundError, InvalidQueryError, RagsteadError
from ragstead.httpguard.origin import HostOriginGuard
from ragstead.knowledge_base import KnowledgeBase
from ragstead.request.fields import MAX_QUERY_CHARS, MAX_TAGS, Door, exposed, pydantic_fields
from ragstead.request.model import SCOPE_FIELDS, AskRequest, Scope, SearchRequest

log = logging.getLogger("ragstead.mcp")
R = TypeVar("R", SearchRequest, AskRequest)

MAX_ARGUMENT_BYTES = 64 * 1024  # a tool call's arguments, as JSON; 10 MB of arguments is refused, not parsed
URI_PREFIX = "ragstead://doc/"
STATUS_COUNT_LIMIT = 10_000  # `status` counts documents up to this many ("more": true above it)
# Argument names that would choose whose documents are read: the scope is the server's, never the caller's.
SCOPE_KEYS = ("user", "user_slug", "users", "public_only", "private_only", "scope")


@dataclass(frozen=True)
class McpScope:
    """What a client of this server may reach, fixed at start-up."""

    user: str
    public_only: bool = False
    include_archive: bool = False
    allow_write: bool = False

    def describe(self) -> str:
        kind = "public documents" if self.public_only else f"{self.user}'s private documents"
        return kind + (" and the archive" if self.include_archive else "")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class HistoryTurn(_Strict):
    question: str = Field(min_length=1, max_length=MAX_QUERY_CHARS, description="An earlier question, as asked.")
    answer: str = Field(default="", max_length=MAX_ANSWER_CHARS, description="Its answer's text, as `ask` gave it.")


# The search and ask tools' arguments: the field table's (ragstead.request.fields) that this door shows, with
# their limits; ask calls the query `question`.
ASK_RENAME = {"query": Door("question", "The question to answer.")}


def argument_models() -> tuple[type[BaseModel], type[BaseModel]]:
    """The search and ask tools' argument models, built from the field table as it is (once, at import)."""
    search = create_model("SearchArgs", __base__=_Strict, __module__=__name__, **pydantic_fields("mcp", "search"))
    ask = create_model(
        "AskArgs", __base__=_Strict, __module__=__name__, **pydantic_fields("mcp", "ask", rename=ASK_RENAME),
        history=(list[HistoryTurn], Field(default_factory=list, max_length=MAX_HISTORY_TURNS, description="The "
                 "earlier turns of the user's conversation, oldest first, when the question is a follow-up ('and "
                 "the deposit?', 'who wrote it?'): it is rewritten from them before it is searched (the answer's "
                 "`rewrite` says how). Nothing is kept.")))
    return search, ask


SearchArgs, AskArgs = argument_models()


class ListDocumentsArgs(_Strict):
    limit: int = Field(default=50, ge=1, le=200, description="How many documents to list.")
    offset: int = Field(default=0, ge=0, le=10_000_000, description="How many to skip (paging).")
    doc_types: list[str] = Field(default_factory=list, max_length=10, description="Only these document types.")
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS,
                            description="Only documents with any of these tags.")


class GetDocumentArgs(_Strict):
    doc_id: str = Field(pattern=r"^[0-9a-f]{64}$", description="The document's id (doc_id from search or "
                                                                 "list_documents).")
    offset: int = Field(default=0, ge=0, le=1_000_000, description="The first chunk to return (paging).")
    limit: int = Field(default=50, ge=1, le=200, description="How many chunks to return.")


class StatusArgs(_Strict):
    pass


class FindabilityArgs(_Strict):
    pass


class RememberArgs(_Strict):
    text: str = Field(min_length=1, max_length=2000, description="A lasting preference, fact or lesson to "
                                                                   "remember (never secrets or personal data).")


class IngestArgs(_Strict):
    urls: list[str] = Field(min_length=1, max_length=10, description="Web pages, PDFs, videos or posts to fetch.")
    tags: list[str] = Field(default_factory=list, max_length=20, description="Tags to add to what is ingested.")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[Any], Any]
    writes: bool = False
    read_only: bool = True
    # Request fields whose argument has another name in this tool (a library error names the field).
    spelling: Mapping[str, str] = field(default_factory=dict)


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema a client sees: pydantic's, with `additionalProperties: false` at the top (the model
    forbids unknown keys) and without the titles pydantic adds."""
    found = model.model_json_schema()
    found.pop("title", None)
    for prop in found.get("properties", {}).values():
        prop.pop("title", None)
    found["additionalProperties"] = False
    return found


class RagsteadMcp:
    """The tools and resources of one server over one KnowledgeBase and one fixed scope."""

    def __init__(self, kb: KnowledgeBase, scope: McpScope) -> None:
        self.kb, self.scope = kb, scope
        self.tools = {spec.name: spec for spec in self._specs()}

    # -- the tools -----------------------------------------------------------------------------------

    def _specs(self) -> list[ToolSpec]:
        specs = [
            ToolSpec("search", "Search the user's private knowledge base (notes, documents, dossiers) for passages "
                     "relevant to a query. Returns ranked passages with their text, file path, doc_id, chunk_id, "
                     "page or section and scores. Use it before answering questions about the user's own work.",
                     SearchArgs, self._search),
            ToolSpec("ask", "Answer a question from the user's documents only, with numbered citations [n] that "
                     "point at passages, each with the sentence(s) it rests on (quote, char_start, char_end in the "
                     "passage's text); or the refusal sentence when nothing relevant is found. gate.confidence "
                     "'tentative' means the sources may not hold the answer: check the citations before relying "
                     "on it. A list or count question ('which notes mention X?', 'how many files ...?') is "
                     "answered from the whole scope (kind 'list' or 'count'): every matching document cited once, "
                     "with how many documents were examined and matched; page with offset and limit. A sum, "
                     "count, average, earliest or latest over the records ('how much did I pay the roofer in "
                     "2025?', 'how many rows where status is open?') answers with its figure and unit, every unit "
                     "it added (units: source, quote, date, amount) and what it left out; complete is false when "
                     "an amount was left out.",
                     AskArgs, self._ask, spelling={"query": "question"}),
            ToolSpec("list_documents", "List the documents in scope, by path: doc_id, type, title, tags, dates, "
                     "chunk count.", ListDocumentsArgs, self._list_documents),
            ToolSpec("get_document", "Read one document's indexed text (its chunks in order) and metadata by doc_id. "
                     "Page with offset and limit for long documents.", GetDocumentArgs, self._get_document),
            ToolSpec("status", "Where the index is and what it holds: documents, chunks, embedding model, last "
                     "index time, and the scope this server serves.", StatusArgs, self._status),
            ToolSpec("findability", "Which documents in scope cannot be found by their own words (title, headings, "
                     "rarest terms) in the top 5, and why: shadowed by a near-duplicate, empty, too short, "
                     "outranked; and the files in scope left out of the index (unsupported, skipped, not indexed "
                     "yet). Use it when the user asks why a file cannot be found.", FindabilityArgs,
                     self._findability),
        ]
        if self.scope.allow_write:
            specs += [
                ToolSpec("ingest", "Fetch web pages, PDFs, YouTube videos or posts by URL, archive them in the "
                         "user's private folder and index them. Returns per-URL status.", IngestArgs, self._ingest,
                         writes=True, read_only=False),
                ToolSpec("remember", "Remember a lasting preference, fact or lesson in the user's memory file "
                         "(secrets and personal data are refused). Returns the decision and what was written.",
                         RememberArgs, self._remember, writes=True, read_only=False),
            ]
        return specs

    def _request_scope(self, args: Any) -> Scope:
        """The server's scope, narrowed by the arguments (never widened)."""
        if args.include_archive and not self.scope.include_archive:
            raise _scope_error("include_archive")
        include_archive = self.scope.include_archive if args.include_archive is None else args.include_archive
        user = None if self.scope.public_only else self.scope.user
        # The one archive rule (filters.py): a server whose scope has no archive refuses it however it is asked.
        self.kb.scope(user=user, public_only=self.scope.public_only, include_archive=include_archive,
                      doc_types=args.doc_types, tags=args.tags, date_from=args.date_from, date_to=args.date_to,
                      archive_allowed=self.scope.include_archive)
        return Scope(user, self.scope.public_only, tuple(args.doc_types), tuple(args.tags), args.date_from,
                     args.date_to, include_archive)

    def _request(self, kind: type[R], args: Any) -> R:
        """The library request of a search or ask tool's arguments: the table's fields this door shows, by their
        library names (a None keeps the request's default), inside the server's scope."""
        rename: dict[str, Door] = ASK_RENAME if kind is AskRequest else {}
        spelt = {item.name: rename.get(item.name, door).name for item, door in exposed("mcp", "ask")}
        knobs = {name: getattr(args, there) for name, there in spelt.items() if there in type(args).model_fields
                 and name not in SCOPE_FIELDS and getattr(args, there) is not None}
        return kind(knobs.pop("query"), scope=self._request_scope(args), **knobs)

    def _search(self, args: Any) -> dict[str, Any]:
        return self.kb.search(self._request(SearchRequest, args)).to_dict(include_text=True)

    def _ask(self, args: Any) -> dict[str, Any]:
        request = self._request(AskRequest, args)
        if not args.history:
            return self.kb.ask(request).to_dict()
        # One question per call still: the agent keeps the conversation; its turns only resolve a follow-up.
        turn = self.kb.chat(request, history=[h.model_dump() for h in args.history]).turns[-1]
        return {**turn.to_dict()["answer"], "rewrite": {"question": turn.question, "rewritten": turn.rewritten,
                                                         **turn.rewrite.to_dict()}}

    def _list_documents(self, args: ListDocumentsArgs) -> dict[str, Any]:
        filters = self.kb.scope(user=None if self.scope.public_only else self.scope.user,
                                public_only=self.scope.public_only, include_archive=self.scope.include_archive,
                                doc_types=args.doc_types, tags=args.tags, archive_allowed=self.scope.include_archive)
        docs = self.kb.documents(filters=filters, limit=args.limit, offset=args.offset)
        return {"documents": [doc.to_dict() for doc in docs], "limit": args.limit, "offset": args.offset,
                "scope": self.scope.describe()}

    def _read(self, doc_id: str, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        return self.kb.read(doc_id, offset=offset, limit=limit, user=None if self.scope.public_only else
                            self.scope.user, public_only=self.scope.public_only,
                            include_archive=self.scope.include_archive).to_dict()

    def _get_document(self, args: GetDocumentArgs) -> dict[str, Any]:
        return self._read(args.doc_id, args.offset, args.limit)

    def _status(self, args: StatusArgs) -> dict[str, Any]:
        # Counts of this scope only: how much other users hold is not this client's to know.
        docs = self.kb.documents(user=None if self.scope.public_only else self.scope.user,
                                 public_only=self.scope.public_only, include_archive=self.scope.include_archive,
                                 limit=STATUS_COUNT_LIMIT + 1)
        return {"documents": min(len(docs), STATUS_COUNT_LIMIT), "more": len(docs) > STATUS_COUNT_LIMIT,
                "chunks": sum(d.get("chunks", 0) for d in docs[:STATUS_COUNT_LIMIT]),
                "model": self.kb.stats().get("embed_model"), "store": self.kb.location,
                "last_indexed_at": self.kb.last_indexed(), "scope": self.scope.describe(),
                "write_tools": self.scope.allow_write}

    def _findability(self, args: FindabilityArgs) -> dict[str, Any]:
        # The check of this scope alone: nothing outside it is counted, ranked or named (the library's scoped run).
        filters = self.kb.scope(user=None if self.scope.public_only else self.scope.user,
                                public_only=self.scope.public_only, include_archive=self.scope.include_archive,
                                archive_allowed=self.scope.include_archive)
        return self.kb.findability(filters=filters).to_dict()

    def _remember(self, args: RememberArgs) -> dict[str, Any]:
        return self.kb.remember(args.text, user=self.scope.user).to_dict()

    def _ingest(self, args: IngestArgs) -> dict[str, Any]:
        bad = [url for url in args.urls if not re.match(r"^https?://[^\s/]+", url) or len(url) > 2048]
        if bad:  # never a local path: an agent must not copy the machine's files into the index
            raise MCPError(code=types.INVALID_PARAMS, message=f"ingest takes http(s) URLs only; got {bad[0][:80]!r}")
        # Loopback and private-network addresses are refused, as over the HTTP API (no SSRF from an agent).
        return self.kb.ingest(args.urls, tags=args.tags, user=self.scope.user, allow_private=False,
                              urls_only=True).to_dict()

    # -- the protocol handlers -----------------------------------------------------------------------

    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=spec.name, description=spec.description, input_schema=strict_schema(spec.arguments),
                       annotations=types.ToolAnnotations(read_only_hint=spec.read_only, open_world_hint=spec.writes))
            for spec in self.tools.values()])

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = self.tools.get(params.name)
        if spec is None:
            if params.name in ("ingest", "remember", "add_file"):
                raise _invalid(f"{params.name!r} is a write tool and write tools are off; start the server with "
                               "`ragstead mcp --allow-write`")
            raise _invalid(f"unknown tool {params.name[:60]!r}; tools: {', '.join(self.tools)}")
        arguments = params.arguments or {}
        size = len(json.dumps(arguments, ensure_ascii=False).encode("utf-8"))
        if size > MAX_ARGUMENT_BYTES:
            raise _invalid(f"{spec.name}: the arguments are {size} bytes; the limit is {MAX_ARGUMENT_BYTES}")
        widening = [key for key in SCOPE_KEYS if key in arguments]
        if widening:
            raise _scope_error(widening[0])
        try:
            parsed = spec.arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                                 for e in exc.errors()[:5])
            raise _invalid(f"{spec.name}: invalid arguments ({problems})") from None
        try:
            data = await anyio.to_thread.run_sync(spec.run, parsed)
        except MCPError:
            raise
        except InvalidQueryError as exc:  # the field named as this tool's argument is (ask's query: `question`)
            log.info("tool %s: %s", spec.name, exc)
            return _error_result(exc.respelled(spec.spelling))
        except (DocumentNotFoundError, RagsteadError) as exc:  # the caller's to fix: a tool error it can read
            log.info("tool %s: %s", spec.name, exc)
            return _error_result(str(exc))
        except Exception:
            log.exception("tool %s failed", spec.name)  # the trace stays in the server's log (stderr)
            return _error_result(f"{spec.name} failed inside the server; see its log")
        text = json.dumps(data, ensure_ascii=False, indent=1)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=data)

    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        offset = _offset(params.cursor if params else None)
        page = 100
        docs = await anyio.to_thread.run_sync(lambda: self.kb.documents(
            user=None if self.scope.public_only else self.scope.user, public_only=self.scope.public_only,
            include_archive=self.scope.include_archive, limit=page, offset=offset))
        return types.ListResourcesResult(
            resources=[types.Resource(uri=f"{URI_PREFIX}{d['doc_id']}", name=d["file_path"], title=d.get("title"),
                                      description=f"{d['doc_type']} document, {d.get('chunks', 0)} chunks",
                                      mime_type="text/plain") for d in docs],
            next_cursor=str(offset + page) if len(docs) == page else None)

    async def list_resource_templates(self, ctx: Any, params: types.PaginatedRequestParams | None
                                      ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=f"{URI_PREFIX}{{doc_id}}", name="document", mime_type="text/plain",
            description="One document's indexed text, by doc_id (from search or list_documents).")])

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        doc_id = uri.removeprefix(URI_PREFIX) if uri.startswith(URI_PREFIX) else ""
        try:
            passage = await anyio.to_thread.run_sync(lambda: self._read(doc_id, 0, 200))
        except DocumentNotFoundError:  # someone else's document reads exactly like a missing one
            raise MCPError(code=types.INVALID_PARAMS, message="no such document", data={"uri": uri[:200]}) from None
        doc = passage["document"]
        header = f"# {doc.get('title') or doc['file_path']}\n(source: {doc.get('url') or doc['file_path']})\n\n"
        text = header + "\n\n".join(chunk["text"] for chunk in passage["chunks"])
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text,
                                                                             mime_type="text/plain")])


def _offset(cursor: str | None) -> int:
    """The offset a `nextCursor` of ours names; any other cursor is a clean invalid-params error (str.isdigit
    admits '²' and int() refuses 5,000 digits, with Python's own message)."""
    if not cursor:
        return 0
    if not re.fullmatch(r"[0-9]{1,9}", cursor):
        raise _invalid("invalid cursor: pass the nextCursor of the previous page, or none for the first")
    return int(cursor)


def _invalid(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


def _scope_error(key: str) -> MCPError:
    return _invalid(f"argument {key!r} refused: the scope is fixed when the server starts; tool arguments can "
                    "narrow it (doc_types, tags, dates, include_archive: false), never widen it")


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def build_server(kb: KnowledgeBase, scope: McpScope) -> Server[Any]:
    """The low-level MCP server: tools, the document resources, the instructions an agent reads first."""
    handlers = RagsteadMcp(kb, scope)
    write = " With write tools: ingest URLs and remember facts." if scope.allow_write else ""
    return Server(
        "ragstead", version=__version__, title="ragstead knowledge base",
        instructions=(f"A private knowledge base ({scope.describe()}). Use `search` to find passages, `get_document` "
                      "(or the ragstead://doc/{doc_id} resources) to read a document, `ask` for a cited answer, "
                      "`findability` for why a document cannot be found. "
                      f"Cite what you use by its file path or URL.{write}"),
        on_list_tools=handlers.list_tools, on_call_tool=handlers.call_tool,
        on_list_resources=handlers.list_resources, on_list_resource_templates=handlers.list_resource_templates,
        on_read_resource=handlers.read_resource,
    )


def run_stdio(kb: KnowledgeBase, scope: McpScope) -> None:
    """Serve over stdin/stdout until the client closes stdin."""
    server = build_server(kb, scope)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


def serve_http(kb: KnowledgeBase, scope: McpScope, sock: Any, *, host: str, log_level: str,
               head_seconds: float) -> None:
    """Serve streamable HTTP at /mcp on the listening `sock` until Ctrl+C, under the same slow-peer and idle-socket
    limits as `serve` (a held socket must not starve the agent's calls)."""
    from ragstead.httpguard import connections

    connections.run(http_app(kb, scope, host), sock, host=host, log_level=log_level, head_seconds=head_seconds,
                    timeout_graceful_shutdown=5)


def http_app(kb: KnowledgeBase, scope: McpScope, host: str) -> Any:
    """The streamable HTTP app (a Starlette app at /mcp) behind the Host/Origin guard of `serve`: no DNS
    rebinding and no cross-origin call from a web page (the SDK's own loopback check stays behind it)."""
    app = build_server(kb, scope).streamable_http_app(streamable_http_path="/mcp", host=host)
    # `host` is loopback, a name the guard answers to already; not added, so an Origin on another local port
    # (another local web server's page) stays refused.
    return HostOriginGuard(app, extra_hosts=kb.settings.allowed_hosts)
