"""How the HTTP doors (`serve`, `mcp --http`) run uvicorn so that idle or slow sockets cannot starve them: a
connection must send a complete request head within `head_seconds` and its body within `body_seconds` (uvicorn's
own keep-alive timeout only starts after a first response, and any byte resets it), at most `max_connections`
sockets are open at once, and the 503 limit counts requests being handled, not open sockets (uvicorn's
`limit_concurrency` counts both, so four idle sockets under a limit of four turned every request away)."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_SECONDS = 10.0  # `serve --head-timeout`
BODY_SECONDS = 60.0  # `serve --body-timeout`: a 20 MB upload at 350 KB/s
MAX_REQUESTS = 64  # handled at once; more get 503
MAX_CONNECTIONS = 1024  # open sockets; a new one past this is closed at once


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a timer per request: armed for the head when the connection opens (and
    after each response), re-armed for the body when the head is in; when it fires before the request is
    complete, the socket is closed."""

    head_seconds = HEAD_SECONDS
    body_seconds = BODY_SECONDS
    max_connections = MAX_CONNECTIONS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._request_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.close()
            return
        self._arm(self.head_seconds)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not None and self.cycle is not before:  # a request head came in: now its body
            self._arm(self.body_seconds)

    def on_response_complete(self) -> None:
        # Armed first: uvicorn may start a pipelined request inside this call, and that one re-arms for its body.
        if not self.transport.is_closing():
            self._arm(self.head_seconds)  # the next request on this connection gets the same budget
        super().on_response_complete()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._request_timer = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _too_slow(self) -> None:
        self._request_timer = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            return  # the whole request is in: the app is working on it
        if not self.transport.is_closing():
            self.transport.close()


class InFlightLimit:
    """Answers 503 when `max_requests` requests are already being handled (open sockets do not count)."""

    def __init__(self, app: ASGIApp, max_requests: int = MAX_REQUESTS) -> None:
        self.app, self.max_requests, self.active = app, max_requests, 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.active >= self.max_requests:
            body = b'{"error": {"code": "busy", "message": "the server is handling too many requests; retry"}}'
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"retry-after", b"1")]})
            await send({"type": "http.response.body", "body": body})
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1


def server_config(app: ASGIApp, *, host: str, port: int, head_seconds: float = HEAD_SECONDS,
                  body_seconds: float = BODY_SECONDS, max_requests: int = MAX_REQUESTS,
                  max_connections: int = MAX_CONNECTIONS, **options: Any) -> uvicorn.Config:
    """The uvicorn.Config the HTTP doors run: `app` behind the in-flight limit, on the guarded h11 protocol."""
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "head_seconds": head_seconds, "body_seconds": body_seconds, "max_connections": max_connections})
    return uvicorn.Config(InFlightLimit(app, max_requests), host=host, port=port, http=protocol,
                          limit_concurrency=None, **options)
