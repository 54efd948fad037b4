"""Deterministic SHA-256 ids: the same file at the same path always gets the same ids."""

from __future__ import annotations

import hashlib
from pathlib import Path

_READ_BLOCK = 1 << 20


def sha256_text(text: str) -> str:
    """Hex SHA-256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in blocks so large files do not load into memory."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def make_doc_id(canonical_path: str, file_hash: str) -> str:
    """`doc_id` = SHA-256 of the canonical (root-relative, POSIX) path and the file's hash."""
    return sha256_text(f"{canonical_path}\x00{file_hash}")


def make_chunk_id(doc_id: str, chunk_index: int, text_hash: str) -> str:
    """`chunk_id` = SHA-256 of doc_id, the chunk's index and the hash of its text."""
    return sha256_text(f"{doc_id}\x00{chunk_index}\x00{text_hash}")
