"""The server's SSRF guard: which addresses an ingest must not reach (loopback, private, link-local with the
cloud metadata address, reserved, and the IPv6 forms that carry such an IPv4 address), checked on the name
before each request and again at connect time on the very address connected to (DNS rebinding)."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

import httpcore

from ragstead.ingest.base import SourceError

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
