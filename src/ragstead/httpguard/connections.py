"""How the HTTP doors (`serve`, `mcp --http`) run uvicorn so that idle, slow or non-reading sockets cannot starve
them: a connection must send a complete request head within `head_seconds` and its body within `body_seconds`, at
no less than `min_body_rate` bytes a second (uvicorn's own keep-alive timeout only starts after a first response,
and any byte resets it); a response the client leaves unread for `write_seconds` is dropped with its socket; at
most `max_connections` sockets are open at once, and past that the one that has waited longest without sending a
request head makes room; and the 503 limit counts requests being handled, not open sockets (uvicorn's
`limit_concurrency` counts both, so four idle sockets under a limit of four turned every request away), and only
those the door says are its own (`counts`: for `serve`, a request whose head carries a valid key)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, ClassVar

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_SECONDS = 10.0  # `serve --head-timeout`
BODY_SECONDS = 60.0  # `serve --body-timeout`: a 20 MB upload at 350 KB/s
WRITE_SECONDS = 30.0  # a response that cannot be written for this long (the client reads nothing) is dropped
MIN_BODY_RATE = 1024  # bytes a second, over each RATE_WINDOW of a body: a slow modem sends 5 times that
RATE_WINDOW = 5.0
MAX_REQUESTS = 64  # handled at once; more get 503
MAX_CONNECTIONS = 1024  # open sockets; past this the longest-waiting one without a request head is closed


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with timers per request: armed for the head when the connection opens (and after
    each response), re-armed for the body when the head is in, with a body-rate check every RATE_WINDOW; when one
    fires before the request is complete, the socket is closed. A write that stays paused (the client reads
    nothing) for `write_seconds` drops the socket, which ends the response the app is stuck sending."""

    head_seconds = HEAD_SECONDS
    body_seconds = BODY_SECONDS
    write_seconds = WRITE_SECONDS
    min_body_rate = MIN_BODY_RATE
    max_connections = MAX_CONNECTIONS
    # The connections waiting for a request head, oldest first (a dict keeps insertion order): one per server,
    # set by server_config; the base class's is only for a protocol used on its own.
    waiting: ClassVar[dict[GuardedH11Protocol, None]] = {}

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._request_timer: asyncio.TimerHandle | None = None
        self._rate_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._received = 0
        super().connection_made(transport)
        if len(self.connections) > self.max_connections and not self._evict_one():
            self.connections.discard(self)
            _drop(transport)
            return
        self._wait_for_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self.waiting.pop(self, None)
        for timer in (self._request_timer, self._rate_timer, self._write_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._received += len(data)
        super().data_received(data)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not None and self.cycle is not before:  # a request head came in: now its body
            self.waiting.pop(self, None)
            self._arm(self.body_seconds)
            self._arm_rate_check()

    def on_response_complete(self) -> None:
        # Armed first: uvicorn may start a pipelined request inside this call, and that one re-arms for its body.
        if not self.transport.is_closing():
            self._wait_for_head()  # the next request on this connection gets the same budget
        super().on_response_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_seconds, self._write_stalled)

    def resume_writing(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        super().resume_writing()

    def _wait_for_head(self) -> None:
        self.waiting.pop(self, None)
        self.waiting[self] = None  # now the newest
        self._arm(self.head_seconds)

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest without sending a request head, to make room for this
        one; False when every other connection is busy with a request (then this one is refused)."""
        for victim in list(self.waiting):
            del self.waiting[victim]
            if victim is not self and not victim.transport.is_closing():
                self.connections.discard(victim)  # it leaves now; uvicorn's own discard later is a no-op
                _drop(victim.transport)
                return True
        return False

    def _arm(self, seconds: float) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
        self._request_timer = self.loop.call_later(seconds, self._too_slow)

    def _arm_rate_check(self, since: int | None = None) -> None:
        if self._rate_timer is not None:
            self._rate_timer.cancel()
        start = self._received if since is None else since
        self._rate_timer = self.loop.call_later(RATE_WINDOW, self._check_rate, self.cycle, start)

    def _check_rate(self, cycle: Any, start: int) -> None:
        """Every RATE_WINDOW of a body: close the socket unless at least `min_body_rate` bytes a second came in
        (not judged while uvicorn itself has paused reading because the app is not taking the body yet)."""
        self._rate_timer = None
        if cycle is not self.cycle or not cycle.more_body or cycle.response_complete or self.transport.is_closing():
            return  # the body is in, or the request is over
        if not self.flow.read_paused and self._received - start < self.min_body_rate * RATE_WINDOW:
            _drop(self.transport)
            return
        self._arm_rate_check()

    def _too_slow(self) -> None:
        self._request_timer = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            return  # the whole request is in: the app is working on it
        self.waiting.pop(self, None)
        if not self.transport.is_closing():
            _drop(self.transport)

    def _write_stalled(self) -> None:
        self._write_timer = None
        self.waiting.pop(self, None)
        self.transport.abort()  # close() would wait for the unread bytes to drain, and they never do


def _drop(transport: asyncio.BaseTransport) -> None:
    """Close a socket; abort it when bytes are still waiting to be written to a client that may never read
    them (a plain close would keep the socket until they drain)."""
    pending = getattr(transport, "get_write_buffer_size", lambda: 0)()
    if pending:
        transport.abort()  # type: ignore[attr-defined]
    else:
        transport.close()


class InFlightLimit:
    """Answers 503 when `max_requests` requests are already being handled (open sockets do not count). Only the
    requests `counts` says yes to are counted (all by default): a door counts its authenticated requests, so
    anonymous ones, answered at their head, can never fill the limit."""

    def __init__(self, app: ASGIApp, max_requests: int = MAX_REQUESTS,
                 counts: Callable[[Scope], bool] | None = None) -> None:
        self.app, self.max_requests, self.active = app, max_requests, 0
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (self.counts is not None and not self.counts(scope)):
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
                  body_seconds: float = BODY_SECONDS, write_seconds: float = WRITE_SECONDS,
                  min_body_rate: int = MIN_BODY_RATE, max_requests: int = MAX_REQUESTS,
                  max_connections: int = MAX_CONNECTIONS, counts: Callable[[Scope], bool] | None = None,
                  **options: Any) -> uvicorn.Config:
    """The uvicorn.Config the HTTP doors run: `app` behind the in-flight limit (counting what `counts` says yes
    to), on the guarded h11 protocol."""
    protocol = type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "head_seconds": head_seconds, "body_seconds": body_seconds, "write_seconds": write_seconds,
        "min_body_rate": min_body_rate, "max_connections": max_connections, "waiting": {}})
    return uvicorn.Config(InFlightLimit(app, max_requests, counts), host=host, port=port, http=protocol,
                          limit_concurrency=None, **options)


def run(app: ASGIApp, sock: Any, *, host: str, on_started: Callable[[], None] | None = None,
        on_configured: Callable[[], None] | None = None, **config: Any) -> None:
    """Serve `app` on the listening `sock` until Ctrl+C, under `server_config`'s limits (`config`: its keywords
    and uvicorn's); `on_configured` after uvicorn has configured logging (a door's own loggers go after it),
    `on_started` once requests are accepted (a door's banner)."""

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and not self.should_exit and on_started is not None:  # accepting requests from now on
                on_started()

    configured = server_config(app, host=host, port=sock.getsockname()[1], **config)
    if on_configured is not None:
        on_configured()
    Server(configured).run(sockets=[sock])
