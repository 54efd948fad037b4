"""What every fetcher returns, and the one error type of a source that could not be ingested."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import SplitResult, urlsplit

import httpx

from ragstead.errors import RagsteadError
from ragstead.ingest.decoding import UndecodableBody, decoded_pieces

# The archive's folder per kind of source: …/ingested/{SourceType}/{YYYY-MM}/…
SOURCE_TYPES = ("Article", "PDF", "Text", "Video", "Post", "Dossier")


class SourceError(RagsteadError):
    """A source that cannot be ingested. The message is the one-line reason the report shows after
    `failed: ` ("HTTP 404", "no transcript for this video", ...)."""


def utc_now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


@dataclass
class Extracted:
    """One source, fetched and extracted, ready to be archived and indexed.

    `body` is what the archive file holds: markdown text for pages, videos and posts (the metadata goes into
    its front matter), the bytes as fetched for PDFs and plain text (the metadata goes into a sidecar).
    """

    source_type: str  # one of SOURCE_TYPES
    source_id: str  # short and stable: a video or post id, else a hash of the normalized URL
    url: str  # the normalized URL (the dedup key is derived from it)
    body: str | bytes
    ext: str  # "md" | "pdf" | "txt"
    title: str | None = None
    canonical_url: str | None = None
    author: str | None = None
    published_at: str | None = None  # ISO 8601 date or datetime
    site_name: str | None = None
    fetched_at: str = field(default_factory=utc_now)
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.source_type not in SOURCE_TYPES:
            raise ValueError(f"unknown source type {self.source_type!r}")

    def text(self) -> str:
        """The text the auto-tagger reads (markdown, or the bytes decoded leniently)."""
        return self.body if isinstance(self.body, str) else self.body.decode("utf-8", "replace")


# The default cap on one fetched body (the 50 MB); a larger response is refused while streaming.
DEFAULT_MAX_BYTES = 50 * 1024 * 1024


def read_capped(response: httpx.Response, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The decoded body of a streamed response, refused as soon as it passes `max_bytes`: never buffered, nor
    decompressed, beyond it (a compression bomb stops at the cap whatever its Content-Encoding chain)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise SourceError(f"response over the {max_bytes / (1 << 20):g} MB cap ({int(declared) >> 20} MB declared; "
                          "fetch_max_mb)")
    body = bytearray()
    try:
        for piece in decoded_pieces(response):
            body += piece
            if len(body) > max_bytes:
                raise SourceError(f"response over the {max_bytes / (1 << 20):g} MB cap (fetch_max_mb)")
    except UndecodableBody as exc:
        raise SourceError(str(exc)) from None
    return bytes(body)


def http_failure(exc: BaseException, *, connect_seconds: float | None = None, read_seconds: float | None = None,
                 max_redirects: int | None = None) -> SourceError:
    """A transport failure (DNS, refused, TLS, timeout, redirect loop, a socket error) as a SourceError with a
    one-line reason. Given the client's limits, the reason names them ("within 10 s", "more than 10")."""
    try:
        host = exc.request.url.host or "the server"  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # not httpx's, or raised before any request existed
        host = "the server"
    text = " ".join(str(exc).split())[:160]
    lowered = text.lower()
    if isinstance(exc, httpx.TooManyRedirects):
        reason = (f"more than {max_redirects} redirects" if max_redirects is not None else "too many redirects") \
            + " (a redirect loop?)"
    elif isinstance(exc, httpx.ConnectTimeout):
        reason = f"could not connect to {host} " + (f"within {connect_seconds:g} s" if connect_seconds else "in time")
    elif isinstance(exc, httpx.TimeoutException):
        reason = f"{host} sent no data " + (f"for {read_seconds:g} s" if read_seconds else "in time") + \
            " (read timeout)"
    elif isinstance(exc, httpx.UnsupportedProtocol):  # fetchers start from http(s): only a redirect gets here
        reason = f"redirected to an unsupported URL ({text or 'no scheme'})"
    elif any(s in lowered for s in ("name or service not known", "nodename nor servname", "name resolution",
                                    "no address associated", "errno -2", "errno -3")):
        reason = f"DNS lookup failed for {host}"
    elif "refused" in lowered:
        reason = f"connection refused by {host}"
    elif "ssl" in lowered or "certificate" in lowered or "tls" in lowered:
        reason = f"TLS error with {host} ({text})"
    else:
        reason = f"fetch failed ({type(exc).__name__}: {text or 'no detail'})"
    return SourceError(reason)


def split_web_url(url: object) -> tuple[str, SplitResult, list[str]] | None:
    """(host, parts, path segments) of an http(s) URL, or None for anything a fetcher must not guess about:
    not a string, over 2,048 characters, whitespace or control characters (urlsplit would drop tabs and
    newlines and splice the pieces together), credentials, another scheme or an odd port. Scheme-less input
    ("youtu.be/ID") is read as https; one trailing slash is dropped from the segments."""
    if not isinstance(url, str) or len(url) > 2048 or not url.strip():
        return None
    url = url.strip()
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        return None
    if "://" not in url:
        url = "https://" + url
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or parts.username is not None or parts.password is not None:
        return None
    if port not in (None, 80, 443):
        return None
    segments = parts.path.split("/")[1:]
    if segments and segments[-1] == "":
        segments = segments[:-1]
    return host, parts, segments
