"""Fetching a URL for ingest: one httpx client (the transport is the seam tests replace), timeouts, a
streamed size cap on the decoded body, a deadline per source, redirects followed with a limit, an SSRF guard on
every hop (checked again at connect time), and every failure turned into the one-line reason the report shows
(`HTTP 404`, `DNS lookup failed for …`, `timed out …`)."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx

from ragstead.ingest.base import SourceError, http_failure, read_capped
from ragstead.ingest.decoding import ACCEPT_ENCODING

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


# IPv6 ranges that carry an IPv4 address: the address is judged by the IPv4 inside (a NAT64 gateway or a 6to4
# relay would connect there). The local-use NAT64 prefix is never public.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64 or ip in _IPV4_TRANSLATED or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # the client's own address
    return None


def blocked_address(address: str) -> bool:
    """True for an address the server must not fetch from: loopback, private, link-local (the cloud metadata
    address 169.254.169.254), reserved, multicast, or an IPv6 form that carries such an IPv4 address."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _NAT64_LOCAL:
            return True
        ip = _embedded_ipv4(ip) or ip
    return not ip.is_global or ip.is_multicast


Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (the operating system's resolver)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _resolve(resolver: Resolver, host: str, port: int, timeout: float | None) -> list[str]:
    """`resolver(host, port)` with a wall-clock bound: getaddrinfo has no timeout of its own, so it runs in a
    daemon thread that is left behind if it hangs."""
    answer: list[list[str] | BaseException] = []

    def lookup() -> None:
        try:
            answer.append(resolver(host, port))
        except BaseException as exc:
            answer.append(exc)

    worker = threading.Thread(target=lookup, daemon=True, name="ragstead-dns")
    worker.start()
    worker.join(timeout)
    if not answer:
        raise SourceError(f"DNS lookup for {host} took over {timeout:g} s")
    result = answer[0]
    if isinstance(result, BaseException) or not result:
        raise SourceError(f"DNS lookup failed for {host}")
    return result


def _refusal(host: str, address: str) -> SourceError:
    return SourceError(f"refused: {host} resolves to a private or local address ({address}); "
                       "set allow_private_urls to ingest intranet pages through the server")


def check_public_host(host: str, port: int | None, resolver: Resolver = system_resolver) -> None:
    """Raise SourceError unless every address `host` resolves to is a public one (the SSRF guard's early check,
    which names the host; the check that counts is the one at connect time, `CheckedBackend`)."""
    try:
        addresses = resolver(host, port or 443)
    except (OSError, UnicodeError):
        raise SourceError(f"DNS lookup failed for {host}") from None
    for address in addresses:
        if blocked_address(address):
            raise _refusal(host, address)


class CheckedBackend(httpcore.NetworkBackend):
    """Resolves each host once and connects to the very address it resolved to, after checking it (with
    `allow_private` off): a DNS answer that changes between a check and the connect (DNS rebinding) cannot
    slip a private address in. TLS still verifies, and sends SNI for, the URL's host name: httpcore passes the
    origin's host to start_tls, not the address connected to."""

    def __init__(self, allow_private: bool, resolver: Resolver = system_resolver) -> None:
        self._allow_private = allow_private
        self._resolver = resolver
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        addresses = _resolve(self._resolver, host, port, timeout)
        if not self._allow_private:
            for address in addresses:
                if blocked_address(address):
                    raise _refusal(host, address)
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # addresses is never empty
        raise failure

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        raise SourceError("unix sockets are not fetched")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


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


def _network_transport(options: FetchOptions, resolver: Resolver) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport()
    # httpx takes no network backend; its pool is swapped for one that connects through CheckedBackend (same
    # TLS context and HTTP/1.1 as httpx's default).
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(), http1=True, http2=False,
        network_backend=CheckedBackend(options.allow_private, resolver))
    return transport


def make_client(options: FetchOptions, transport: httpx.BaseTransport | None = None,
                resolver: Resolver = system_resolver) -> httpx.Client:
    """The client every fetcher of one ingest call shares. With `allow_private` off, each request (redirects
    included) is checked before it is sent, and each connection at connect time (CheckedBackend). `transport`
    replaces the network (tests); `resolver` replaces DNS (tests)."""
    hooks: dict[str, list[Callable[..., None]]] = {}
    if not options.allow_private:
        hooks["request"] = [lambda request: check_public_host(request.url.host, request.url.port, resolver)]
    return httpx.Client(
        transport=DeadlineTransport(transport or _network_transport(options, resolver)),
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
