"""Deterministic SHA-256 ids: the same file at the same path always gets the same ids.

File names are bytes on POSIX and need not be UTF-8. Python hands such a name over with lone surrogates
(`os.fsdecode`'s surrogateescape), which SQLite, JSON and a terminal refuse. So ids hash the name's real
bytes (`os.fsencode`), and a path that is stored or shown goes through `storable_path` first: the same
text for every UTF-8 name, `\\xe9`-style escapes for the bytes that are not UTF-8.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

_READ_BLOCK = 1 << 20
_ESCAPE = re.compile(r"\\x([89a-f][0-9a-f])")  # only bytes >= 0x80 can fail to decode


def sha256_text(text: str) -> str:
    """Hex SHA-256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def storable_path(path: str | os.PathLike[str]) -> str:
    """The path as it is stored and printed: a non-UTF-8 byte of the name becomes `\\xNN`, so the text never
    holds a lone surrogate. A UTF-8 name comes back unchanged."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def fs_path(base: Path, stored: str) -> Path:
    """The file a stored path names under `base`: the literal name if it exists, else the name with its
    `\\xNN` escapes turned back into the bytes `storable_path` escaped."""
    literal = base / stored
    if "\\x" not in stored or os.path.lexists(literal):
        return literal
    # surrogateescape holds byte b (>= 0x80) as U+DC00 + b: the str os.fsdecode would give for the real name.
    return base / _ESCAPE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), stored)


def open_regular(path: Path) -> int:
    """An fd open for reading on `path`, refused (OSError) unless it is a regular file. O_NONBLOCK, so a
    FIFO that replaced the file after the walk looked at it cannot block the open."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks so large files do not load into memory."""
    digest = hashlib.sha256()
    with os.fdopen(open_regular(path), "rb") as handle:
        while block := handle.read(_READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def make_doc_id(canonical_path: str, file_hash: str) -> str:
    """`doc_id` = SHA-256 of the canonical (root-relative, POSIX) path's bytes and the file's hash."""
    return hashlib.sha256(os.fsencode(canonical_path) + b"\x00" + file_hash.encode("ascii")).hexdigest()


def make_chunk_id(doc_id: str, chunk_index: int, text_hash: str) -> str:
    """`chunk_id` = SHA-256 of doc_id, the chunk's index and the hash of its text."""
    return sha256_text(f"{doc_id}\x00{chunk_index}\x00{text_hash}")


# A document inside a file (an mbox's message, an e-mail's attachment) is stored under the file's path and a
# `#key`: `mail/a.mbox#msg-3f2a9c0d1e4b`, `mail/a.mbox#msg-3f2a9c0d1e4b-att-1`, `mail/b.eml#att-2`. A key holds
# no dot and no slash, so such a path never names a file the walk indexes (its suffix would hold the `#`).
_PART_PATH = re.compile(r"(.+)#((?:msg-[0-9a-z]+-)?att-\d+|msg-[0-9a-z]+)")


def part_path(file_path: str, key: str) -> str:
    """The stored path of the document `key` inside the file `file_path`."""
    return f"{file_path}#{key}"


def file_of(stored: str) -> str:
    """The file a stored document path belongs to: the path itself, or the file a `#msg-…`/`#att-…` part is in."""
    match = _PART_PATH.fullmatch(stored)
    return match.group(1) if match else stored
