"""Fetching a URL for ingest: one httpx client (the transport is the seam tests replace), timeouts, a
streamed size cap on the decoded body, a deadline per source, redirects followed with a limit, an SSRF guard on
every hop (checked again at connect time), and every failure turned into the one-line reason the report shows
(`HTTP 404`, `DNS lookup failed for …`, `timed out …`)."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

import httpcore
import httpx

from ragstead.core import egress
from ragstead.ingest.base import SourceError, http_failure, read_capped
from ragstead.ingest.deadline import DeadlineTransport, source_deadline
from ragstead.ingest.decoding import ACCEPT_ENCODING
from ragstead.ingest.ssrf import CheckedBackend, Resolver, check_public_host, system_resolver

MIB = 1 << 20
USER_AGENT = "ragstead-ingest/0.1 (+https://github.com/ragstead; local knowledge base)"


@dataclass(frozen=True)
class FetchOptions:
    connect_seconds: float = 10.0
    read_seconds: float = 30.0
    max_bytes: int = 50 * MIB
    max_redirects: int = 10
    # Wall-clock budget of one source: DNS, connect, redirects and body together (0: none).
    deadline_seconds: float = 60.0
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


def network_transport(allow_private: bool, resolver: Resolver = system_resolver,
                      ssl_context: ssl.SSLContext | None = None) -> httpx.HTTPTransport:
    """httpx's transport, connecting through CheckedBackend. `ssl_context`: httpx's default (tests: their CA)."""
    transport = httpx.HTTPTransport()
    # httpx takes no network backend; its pool is swapped for one that connects through CheckedBackend (same
    # TLS context and HTTP/1.1 as httpx's default).
    transport._pool = httpcore.ConnectionPool(
        ssl_context=ssl_context or httpx.create_ssl_context(), http1=True, http2=False,
        network_backend=CheckedBackend(allow_private, resolver))
    return transport


def make_client(options: FetchOptions, transport: httpx.BaseTransport | None = None,
                resolver: Resolver = system_resolver) -> httpx.Client:
    """The client every fetcher of one ingest call shares. With `allow_private` off, each request (redirects
    included) is checked before it is sent, and each connection at connect time (CheckedBackend). `transport`
    replaces the network (tests); `resolver` replaces DNS (tests)."""
    hooks: dict[str, list[Callable[..., None]]] = {"request": []}
    if not options.allow_private:
        hooks["request"].append(lambda request: check_public_host(request.url.host, request.url.port, resolver))
    # Every request of every fetching client (each redirect hop) is in the egress log, under the caller's
    # `egress.purpose`: a caller that made its own client without the hook left a gap (`freshness --urls`, #45).
    hooks["request"].append(egress.hook)
    return httpx.Client(
        transport=DeadlineTransport(transport or network_transport(options.allow_private, resolver)),
        timeout=httpx.Timeout(options.read_seconds, connect=options.connect_seconds),
        follow_redirects=True,
        max_redirects=options.max_redirects,
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING,
                 "Accept": "text/html,application/xhtml+xml,application/pdf,text/plain;"
                 "q=0.9,*/*;q=0.5"},
        event_hooks=hooks,
    )


def fetch(client: httpx.Client, url: str, options: FetchOptions, *, headers: dict[str, str] | None = None) -> Fetched:
    """GET `url`, streamed, refusing more than `max_bytes` decoded and giving up after `deadline_seconds`.
    Raises SourceError with a one-line reason."""
    try:
        target = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:  # 0177.0.0.1, 127.000.000.001, a bad IDNA label (UnicodeError)
        raise SourceError(f"malformed URL ({' '.join(str(exc).split())[:120] or type(exc).__name__})") from None
    try:
        with source_deadline(options.deadline_seconds), client.stream("GET", target, headers=headers) as response:
            if response.status_code == 304:
                return Fetched(str(response.url), 304, "", b"", dict(response.headers))
            if response.status_code >= 400:
                raise SourceError(f"HTTP {response.status_code}")
            data = read_capped(response, options.max_bytes)
            media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            return Fetched(str(response.url), response.status_code, media, data, dict(response.headers))
    except SourceError:
        raise
    except (httpx.InvalidURL, ValueError) as exc:  # an IDNA label httpx takes but cannot encode, or a redirect
        raise SourceError(f"malformed URL ({' '.join(str(exc).split())[:120]})") from None
    except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
        raise http_failure(exc, connect_seconds=options.connect_seconds, read_seconds=options.read_seconds,
                           max_redirects=options.max_redirects) from None
