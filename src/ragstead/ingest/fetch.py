"""Fetching a URL for ingest: one httpx client (the transport is the seam tests replace), timeouts, a
streamed size cap, redirects followed with a limit, an SSRF guard on every hop, and every failure turned into
the one-line reason the report shows (`HTTP 404`, `DNS lookup failed for …`, `timed out …`)."""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from ragstead.ingest.base import SourceError, http_failure, read_capped

MIB = 1 << 20
USER_AGENT = "ragstead-ingest/0.1 (+https://github.com/ragstead; local knowledge base)"


@dataclass(frozen=True)
class FetchOptions:
    connect_seconds: float = 10.0
    read_seconds: float = 30.0
    max_bytes: int = 50 * MIB
    max_redirects: int = 10
    # False: refuse URLs whose host resolves to a loopback, private, link-local, reserved or metadata address
    # (the HTTP API's default). The CLI allows them: a person may ingest their own intranet page.
    allow_private: bool = True


@dataclass
class Fetched:
    """One response, read whole (under the cap)."""

    url: str  # after redirects
    status: int
    content_type: str  # the media type, lower case, no parameters
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _blocked_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


def check_public_host(host: str, port: int | None) -> None:
    """Raise SourceError unless every address `host` resolves to is a public one (SSRF guard: no loopback,
    private, link-local — which holds the cloud metadata address 169.254.169.254 — or reserved addresses)."""
    try:
        infos = socket.getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise SourceError(f"DNS lookup failed for {host}") from None
    for info in infos:
        if _blocked_address(info[4][0]):
            raise SourceError(f"refused: {host} resolves to a private or local address ({info[4][0]}); "
                              "set allow_private_urls to ingest intranet pages through the server")


def make_client(options: FetchOptions, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """The client every fetcher of one ingest call shares. With `allow_private` off, each request (redirects
    included) is checked before it is sent."""
    hooks: dict[str, list[Callable[..., None]]] = {}
    if not options.allow_private:
        hooks["request"] = [lambda request: check_public_host(request.url.host, request.url.port)]
    return httpx.Client(
        transport=transport,
        timeout=httpx.Timeout(options.read_seconds, connect=options.connect_seconds),
        follow_redirects=True,
        max_redirects=options.max_redirects,
        headers={"User-Agent": USER_AGENT, "Accept": "text/html,application/xhtml+xml,application/pdf,text/plain;"
                 "q=0.9,*/*;q=0.5"},
        event_hooks=hooks,
    )


def fetch(client: httpx.Client, url: str, options: FetchOptions, *, headers: dict[str, str] | None = None) -> Fetched:
    """GET `url`, streamed, refusing more than `max_bytes`. Raises SourceError with a one-line reason."""
    try:
        with client.stream("GET", url, headers=headers) as response:
            if response.status_code == 304:
                return Fetched(str(response.url), 304, "", b"", dict(response.headers))
            if response.status_code >= 400:
                raise SourceError(f"HTTP {response.status_code}")
            data = read_capped(response, options.max_bytes)
            media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            return Fetched(str(response.url), response.status_code, media, data, dict(response.headers))
    except SourceError:
        raise
    except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
        raise http_failure(exc, connect_seconds=options.connect_seconds, read_seconds=options.read_seconds,
                           max_redirects=options.max_redirects) from None
