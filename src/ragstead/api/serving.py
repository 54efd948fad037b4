"""`ragstead serve`'s server: the API app run by uvicorn behind the connection limits every HTTP door shares
(httpguard/connections.py), with the API's access log. The CLI parses and checks the flags; this runs them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from ragstead.api import logging as api_logging
from ragstead.httpguard import connections


def serve_api(api: FastAPI, sock: Any, *, host: str, log_level: str, head_seconds: float, body_seconds: float,
              on_started: Callable[[], None] | None = None) -> None:
    """Serve `api` (api.app.create_app) on the listening `sock` until Ctrl+C; `log_level` is the access log's."""
    connections.run(api, sock, host=host, on_started=on_started, on_configured=lambda: api_logging.configure(log_level),
                    head_seconds=head_seconds, body_seconds=body_seconds, counts=api.state.in_flight_counts,
                    access_log=False, timeout_keep_alive=5, log_level="debug" if log_level == "debug" else "warning",
                    timeout_graceful_shutdown=5)
