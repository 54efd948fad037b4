"""Refuses what a web page on another origin can make a browser send (with or without API keys): a request
whose Host is a name the server does not answer to (DNS rebinding: attacker.example resolved to 127.0.0.1),
and a cross-origin request (an Origin header that is not this server, or a cross-site write without one).
Allowed Host names: localhost, any IP address literal (a rebinding page's origin is never an IP address of the
server), the address the request came in on, and `allowed_hosts` from the config; an Origin on one of
`allowed_hosts` is accepted too (a reverse proxy in front)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

LOCAL_NAMES = frozenset({"localhost"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _host_name(host: str) -> str:
    """The name part of a Host header value ("[::1]:8000" -> "::1", "Example.org.:80" -> "example.org")."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0].rstrip(".") if host.count(":") == 1 else host.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    return True


DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_entry(host: str) -> tuple[str, int | None]:
    """An `allowed_hosts` entry as (name, port): "kb.lan:8443" -> ("kb.lan", 8443), "kb.lan" -> ("kb.lan", None),
    None meaning the scheme's default port (a reverse proxy on 80 or 443)."""
    name = _host_name(host)
    rest = host.strip().lower()
    rest = rest.split("]", 1)[1] if rest.startswith("[") else ("" if rest.count(":") != 1 else rest[rest.index(":"):])
    port = rest.lstrip(":")
    return name, int(port) if port.isdigit() else None


class HostOriginGuard:
    def __init__(self, app: ASGIApp, extra_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.hosts = LOCAL_NAMES | {_host_name(h) for h in extra_hosts if h.strip()}
        self.origins = {_origin_entry(h) for h in extra_hosts if h.strip()}

    def host_allowed(self, name: str, scope: Scope) -> bool:
        server = scope.get("server") or ("", None)
        return name in self.hosts or _is_ip(name) or name == str(server[0]).lower()

    def origin_allowed(self, origin: str, host: str) -> bool:
        """The server's own origin, or one on an `allowed_hosts` entry, its port included (a reverse proxy that
        rewrites Host): an entry without a port admits the scheme's default one. Before, any port of an allowed
        name passed, so a page of another local server (`http://127.0.0.1:9999`) could call this one (#45)."""
        try:
            parts = urlsplit(origin)
            name = (parts.hostname or "").rstrip(".")
            port = parts.port
        except ValueError:
            return False
        if parts.netloc.lower() == host.lower():
            return True
        if parts.scheme not in DEFAULT_PORTS or name in LOCAL_NAMES:
            return False
        return (name, port) in self.origins or (port in (None, DEFAULT_PORTS[parts.scheme])
                                                and (name, None) in self.origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        host = headers.get(b"host", "")
        if host and not self.host_allowed(_host_name(host), scope):
            await _refuse(send, "forbidden_host", f"this server does not answer to the name {_host_name(host)!r}; "
                          "add it to allowed_hosts in the config if it is yours")
            return
        origin = headers.get(b"origin")
        if origin is not None and not self.origin_allowed(origin, host):
            await _refuse(send, "cross_origin", "requests from another origin are refused")
            return
        fetch_site = headers.get(b"sec-fetch-site", "")
        if scope.get("method", "GET") not in SAFE_METHODS and fetch_site in ("cross-site", "same-site"):
            await _refuse(send, "cross_origin", "writes from another site are refused")
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
