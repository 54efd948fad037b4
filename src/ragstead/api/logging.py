"""The server's log on stderr: one access line per request, and the API's own warnings and errors.

An access line reads `2025-06-01 12:00:00 INFO POST /v1/query 200 12.3ms key=k_1a2b3c4d`: method, path
(without the query string), status, duration and the API key id (`-` when no key was accepted, `no-auth`
without keys). Never the key, never a body.
"""

from __future__ import annotations

import logging
import sys
import time
from urllib.parse import quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOG_LEVELS = ("warning", "info", "debug")
KEY_ID = "ragstead_key_id"  # the request-state entry the API's auth dependency fills in

access = logging.getLogger("ragstead.api.access")


def configure(level: str) -> None:
    """Send the `ragstead.api` loggers (the access log among them) to stderr at this level."""
    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be {', '.join(LOG_LEVELS)}; got {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger = logging.getLogger("ragstead.api")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def _printable(path: str) -> str:
    # Percent-encode anything that is not a plain URL character, so a path cannot split or forge a line.
    return quote(path[:300], safe="/:@!$&'()*+,;=-._~%")


class AccessLog:
    """ASGI middleware: one INFO line per HTTP request on `ragstead.api.access`, once it is answered."""

    def __init__(self, app: ASGIApp, anonymous: str = "-") -> None:
        self.app, self.anonymous = app, anonymous

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not access.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        start = time.perf_counter()
        status: int | None = None

        async def noted_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noted_send)
        except Exception:
            status = status or 500  # the server's error handler answers 500 once this propagates
            raise
        finally:
            access.info("%s %s %s %.1fms key=%s", scope["method"], _printable(scope["path"]),
                        status if status is not None else "-", (time.perf_counter() - start) * 1000,
                        state.get(KEY_ID) or self.anonymous)
