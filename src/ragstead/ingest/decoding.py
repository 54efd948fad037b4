"""A response body decoded with a bound on every step: httpx decodes each raw chunk whole, so a few KB of
`Content-Encoding: gzip, gzip` turn into gigabytes inside one call. Here each layer of the encoding chain
hands on at most `PIECE` bytes at a time, and the caller (base.read_capped) counts the decoded bytes and stops at
its cap."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

import httpx


class UndecodableBody(ValueError):
    """A body we will not decode (a broken stream, an unknown coding); read_capped reports it as a SourceError."""


PIECE = 64 * 1024  # the most one decompress call may produce
# What we ask for and can decode with a bound (brotli and zstd need packages we do not ship).
ACCEPT_ENCODING = "gzip, deflate"
_GZIP_WBITS = zlib.MAX_WBITS | 16
MAX_LAYERS = 4  # more encodings than this is not a real server


def _inflate(chunks: Iterable[bytes], encoding: str) -> Iterator[bytes]:
    decoder: zlib._Decompress | None = None
    for chunk in chunks:
        if decoder is None:
            if not chunk:
                continue
            if encoding == "deflate" and not _has_zlib_header(chunk):
                decoder = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send it
            else:
                decoder = zlib.decompressobj(_GZIP_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
        data = chunk
        while True:
            try:
                out = decoder.decompress(data, PIECE)
            except zlib.error as exc:
                raise UndecodableBody(f"the {encoding} body does not decode ({exc})") from None
            if out:
                yield out
            data = decoder.unconsumed_tail
            if not data and len(out) < PIECE:
                break
        if decoder.eof:
            return  # trailing bytes after the stream end are ignored, as httpx does


def _has_zlib_header(chunk: bytes) -> bool:
    return len(chunk) >= 2 and chunk[0] & 0x0F == 8 and ((chunk[0] << 8) | chunk[1]) % 31 == 0


def content_codings(response: httpx.Response) -> list[str]:
    """The Content-Encoding chain in the order the server applied it; UndecodableBody for one we cannot decode."""
    codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
    codings = ["gzip" if c == "x-gzip" else c for c in codings if c and c != "identity"]
    if len(codings) > MAX_LAYERS:
        raise UndecodableBody(f"Content-Encoding with {len(codings)} layers (at most {MAX_LAYERS})")
    unknown = [c for c in codings if c not in ("gzip", "deflate")]
    if unknown:
        raise UndecodableBody(f"unsupported Content-Encoding {unknown[0]!r} (ragstead asks for {ACCEPT_ENCODING})")
    return codings


def decoded_pieces(response: httpx.Response) -> Iterator[bytes]:
    """The body of a streamed response, decoded layer by layer, in pieces of at most PIECE bytes."""
    try:
        content = response.content  # a response built from bytes in memory (MockTransport) is read already
    except httpx.ResponseNotRead:
        pass
    else:
        yield content
        return
    pieces: Iterable[bytes] = response.iter_raw()
    for coding in reversed(content_codings(response)):
        pieces = _inflate(pieces, coding)
    yield from pieces
