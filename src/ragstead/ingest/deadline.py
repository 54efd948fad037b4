"""One source's wall-clock deadline across DNS, connect, redirects and body: httpx's timeouts are per read, so
a server sending a byte every few seconds never trips them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import httpx

from ragstead.ingest.base import SourceError


@dataclass
class Deadline:
    """One source's wall-clock budget across DNS, connect, redirects and body (`fetch_deadline_seconds`)."""

    seconds: float
    at: float

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise SourceError(f"gave up after {self.seconds:g} s (fetch_deadline_seconds)")
        return left


_DEADLINE: ContextVar[Deadline | None] = ContextVar("ragstead_fetch_deadline", default=None)


@contextmanager
def source_deadline(seconds: float | None) -> Iterator[None]:
    """Every request made inside this block (on a client from make_client) shares one deadline; a block
    nested in another keeps the outer one. None or 0: no deadline."""
    if not seconds or _DEADLINE.get() is not None:
        yield
        return
    token = _DEADLINE.set(Deadline(seconds, time.monotonic() + seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class _DeadlineStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, deadline: Deadline) -> None:
        self._inner, self._deadline = inner, deadline

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                self._deadline.left()
                yield chunk
        except httpx.TimeoutException:
            self._deadline.left()  # the deadline, not the read timeout, is what ran out: say so
            raise

    def close(self) -> None:
        self._inner.close()


class DeadlineTransport(httpx.BaseTransport):
    """Wraps a transport: each request's timeouts are cut to what is left of the current source's deadline,
    and its body stops when the deadline passes (a server sending a byte every few seconds)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = _DEADLINE.get()
        if deadline is None:
            return self._inner.handle_request(request)
        left = deadline.left()
        timeouts = request.extensions.get("timeout", {})
        request.extensions = {**request.extensions, "timeout": {
            key: left if value is None else min(value, left) for key, value in
            {"connect": None, "read": None, "write": None, "pool": None, **timeouts}.items()}}
        try:
            response = self._inner.handle_request(request)
        except httpx.TimeoutException:
            deadline.left()
            raise
        if isinstance(response.stream, httpx.SyncByteStream):
            response.stream = _DeadlineStream(response.stream, deadline)
        return response

    def close(self) -> None:
        self._inner.close()
