"""The web page at `/` of `ragstead serve`, and the NDJSON stream its answers arrive on.

The page is static files shipped inside the package (api/static/: HTML, CSS and plain JavaScript, no CDN, no
build step). It calls the same /v1 endpoints as every client, with the API key the user enters (kept in the
tab's sessionStorage). It builds every piece of server data into the page as text (DOM text nodes, never
HTML), and a Content-Security-Policy that allows only this server's own scripts backs that up: a document
holding `<script>` or `<img onerror>` shows as text and runs nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import queue
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, StreamingResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragstead.errors import DocumentNotFoundError, IndexLockedError, RagsteadError
from ragstead.knowledge_base import SUPPORTED_SUFFIXES

STATIC = Path(__file__).parent / "static"
# Only this server's own files: no inline script, no eval, no remote anything, no framing, no plugins.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}


class _Assets(StaticFiles):
    """The page's JS and CSS, with the same security headers as the page."""

    async def get_response(self, path: str, scope: Scope) -> Any:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


# The API docs (Swagger UI at /docs, ReDoc at /redoc, their offline assets): the same framing and sniffing
# headers as the page; a CSP allowing this server's scripts plus the docs page's own inline script by its hash,
# and inline styles (ReDoc injects <style> elements). They show no document text, only the API's schema.
DOCS_PATHS = ("/docs", "/redoc", "/static-offline-docs/")
DOCS_CSP = ("default-src 'none'; script-src 'self'{hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'")
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


class DocsHeaders:
    """ASGI middleware: the security headers on the API docs' pages and assets (FastAPI serves them itself)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(DOCS_PATHS):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body = b""

        async def with_headers(message: Message) -> None:
            nonlocal start, body
            if message["type"] == "http.response.start":
                start = message  # held until the body is complete: the CSP names the inline script's hash
                return
            body += message.get("body", b"")
            if message.get("more_body"):
                return
            assert start is not None
            html = any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in start.get("headers", []))
            hashes = "".join(f" 'sha256-{base64.b64encode(hashlib.sha256(s).digest()).decode()}'"
                             for s in (_INLINE_SCRIPT.findall(body) if html else ()))
            extra = {**HEADERS, "Content-Security-Policy": DOCS_CSP.format(hashes=hashes)}
            kept = [(k, v) for k, v in start.get("headers", []) if k.decode("latin-1").lower() not in
                    {name.lower() for name in extra}]
            start["headers"] = kept + [(k.lower().encode(), v.encode()) for k, v in extra.items()]
            await send(start)
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, with_headers)


def page_html() -> str:
    """The page, its upload card naming every file type `index` reads (the loaders' registry, SUPPORTED_SUFFIXES):
    an upload of any of them is stored and indexed."""
    text = (STATIC / "index.html").read_text(encoding="utf-8")
    types = html.escape(", ".join(suffix.lstrip(".") for suffix in SUPPORTED_SUFFIXES))
    return text.replace("{file_types}", types).replace("{file_accept}", html.escape(",".join(SUPPORTED_SUFFIXES)))


def add_page(app: FastAPI) -> None:
    """`GET /` (the page) and `/ui/*` (its assets), and the security headers of the API docs."""
    app.add_middleware(DocsHeaders)

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(page_html(), headers=HEADERS)

    app.mount("/ui", _Assets(directory=STATIC), name="ui")


def stream_lines(work: Callable[[Callable[[str], None]], dict[str, Any]], log: logging.Logger,
                 kind: str = "answer") -> StreamingResponse:
    """Run `work(on_text)` on a thread and stream NDJSON: `{"type": "text", "text"}` for each piece it passes to
    `on_text`, then `{"type": kind, kind: <what it returned>}` (`answer` for /v1/ask, `chat` for /v1/chat), or
    `{"type": "error", "error": {code, message}}` if it failed (the status line was already sent as 200)."""
    lines: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def run() -> None:
        try:
            lines.put({"type": kind, kind: work(lambda piece: lines.put({"type": "text", "text": piece}))})
        except IndexLockedError as exc:
            lines.put({"type": "error", "error": {"code": "index_busy", "message": str(exc)}})
        except DocumentNotFoundError as exc:  # another user's conversation reads like a missing one
            lines.put({"type": "error", "error": {"code": "not_found", "message": str(exc)}})
        except RagsteadError as exc:
            lines.put({"type": "error", "error": {"code": "bad_request", "message": str(exc)}})
        except Exception:
            log.exception("a streamed answer failed")  # the trace stays in the server's log
            lines.put({"type": "error", "error": {"code": "internal_error",
                                                  "message": "the server failed to answer; see its log"}})
        finally:
            lines.put(None)

    threading.Thread(target=run, name="ask-stream", daemon=True).start()

    def body() -> Iterator[str]:
        while (item := lines.get()) is not None:
            yield json.dumps(item, ensure_ascii=False) + "\n"

    return StreamingResponse(body(), media_type="application/x-ndjson", headers={"Cache-Control": "no-store"})
