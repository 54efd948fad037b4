"""The egress log: one line for every HTTP request that leaves the machine, in a private `kb/rag/egress.jsonl`.

Each line holds the time, the destination host, the purpose (an LLM prompt, an ingest fetch, a tool), the bytes
sent, the documents whose text went with it, and a SHA-256 of the payload: never the text. Every HTTP client
ragstead makes for the network (the LLM answerers, the tools, ingest's fetcher) carries `hook` as a request
event hook; the knowledge base says where the log is (`recording`) and each caller what a request is for
(`purpose`). A request to loopback (a local LLM server) stays on the machine and is not logged.
`ragstead egress` shows the log.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ragstead.core.atomic import PRIVATE_FILE_MODE, make_private_folder

EGRESS_FILE = "egress.jsonl"


@dataclass(frozen=True)
class _Purpose:
    what: str
    documents: tuple[str, ...] = ()


_LOG: ContextVar[Path | None] = ContextVar("ragstead_egress_log", default=None)
_PURPOSE: ContextVar[_Purpose | None] = ContextVar("ragstead_egress_purpose", default=None)
_UNLABELLED = _Purpose("unlabelled")
_WRITE = threading.Lock()


@contextlib.contextmanager
def recording(log: Path) -> Iterator[None]:
    """Requests made inside this block (this thread or context) are logged to `log`."""
    token = _LOG.set(log)
    try:
        yield
    finally:
        _LOG.reset(token)


@contextlib.contextmanager
def purpose(what: str, documents: Sequence[str] = ()) -> Iterator[None]:
    """What the requests made inside this block are for, and the documents whose text they carry."""
    token = _PURPOSE.set(_Purpose(what, tuple(dict.fromkeys(documents))))
    try:
        yield
    finally:
        _PURPOSE.reset(token)


def is_local_host(host: str) -> bool:
    """localhost or a loopback address: a request there stays on the machine. Not `*.localhost`: RFC 6761 asks
    resolvers to keep those on loopback, but many send them to DNS, so such a name is remote (consent, logged)."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_local_url(url: str) -> bool:
    """Whether a request to `url` stays on the machine (its host is localhost or a loopback address)."""
    return is_local_host(urlsplit(url).hostname or "")


def hook(request: Any) -> None:
    """httpx request event hook: append the request to the current log (if one is being recorded)."""
    log = _LOG.get()
    host = request.url.host or ""
    if log is None or is_local_host(host):
        return
    try:
        body = request.content
    except Exception:  # a streaming body not read yet: its size is what the header says
        body = b""
    size = len(body) or int(request.headers.get("content-length") or 0)
    sent(host, request.method, size, hashlib.sha256(body).hexdigest() if body else None)


def sent(host: str, method: str, size: int, payload_sha256: str | None) -> None:
    """Append one record of something that left the machine (if a log is being recorded), under the current
    purpose: `hook` for an HTTP request, or a plugin answerer's call, whose own transport ragstead cannot see."""
    log = _LOG.get()
    if log is None:
        return
    current = _PURPOSE.get() or _UNLABELLED
    record = {"time": datetime.now(UTC).isoformat(timespec="seconds"), "host": host, "method": method,
              "purpose": current.what, "bytes_sent": size, "documents": list(current.documents),
              "payload_sha256": payload_sha256}
    append(log, record)


def append(log: Path, record: dict[str, Any]) -> None:
    """One line at the end of `log`, created private (0600, in a 0700 folder)."""
    make_private_folder(log.parent)
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    with _WRITE:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE_MODE)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def read(log: Path) -> list[dict[str, Any]]:
    """The log's records, oldest first ([] when nothing has left the machine)."""
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out
