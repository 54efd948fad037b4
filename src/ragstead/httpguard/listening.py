"""The listening socket of an HTTP door (`serve`, `mcp --http`), bound before the model loads: a busy port or a bad
host is one `error:` line at once, not uvicorn's own output later."""

from __future__ import annotations

import errno
import socket

from ragstead.errors import RagsteadError

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def check_seconds(**limits: float) -> None:
    """A door's time limits (`head_timeout=10.0` is --head-timeout): each above 0, or one error line (at 0 or below
    every connection would be closed before its first request)."""
    for name, seconds in limits.items():
        if not seconds > 0:
            raise RagsteadError(f"--{name.replace('_', '-')} must be above 0 seconds, got {seconds}")


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port (port 0: any free one), not listening yet."""
    if not 0 <= port <= 65535:
        raise RagsteadError(f"--port must be 0-65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError, ValueError):
        raise RagsteadError(f"cannot listen on {host!r}: not an IP address or a known host name; "
                            "pass --host 127.0.0.1, for example") from None
    family, _, _, _, address = next((info for info in infos if info[0] == socket.AF_INET), infos[0])
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart is not blocked
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise listen_error(exc, host, port) from None
    return sock


def listen(sock: socket.socket, host: str, port: int, backlog: int) -> int:
    """Start listening (another server that bound meanwhile fails here, not in uvicorn); the port bound."""
    try:
        sock.listen(backlog)
    except OSError as exc:
        raise listen_error(exc, host, port) from None
    return int(sock.getsockname()[1])


def listen_error(exc: OSError, host: str, port: int) -> RagsteadError:
    if exc.errno == errno.EADDRINUSE:
        return RagsteadError(f"port {port} on {host} is in use; pass --port N or stop the other server")
    if exc.errno == errno.EACCES:
        return RagsteadError(f"no permission to listen on port {port} on {host}; pass --port N (1024 or above)")
    return RagsteadError(f"cannot listen on {host} port {port}: {exc.strerror or exc}")
