"""Errors a user can act on. The CLI prints their message and exits non-zero, never a traceback."""

import re
from collections.abc import Mapping

# A value quoted in a message (repr of a str: single or double quotes, escapes inside).
_QUOTED = re.compile(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


class RagsteadError(Exception):
    """Base class for every error ragstead reports to its user."""


class LoadError(RagsteadError):
    """A file could not be read or parsed (corrupt, encrypted, binary, unreadable)."""


class UnsupportedFileError(LoadError):
    """The file type has no loader."""


class ModelMismatchError(RagsteadError):
    """The index was built with another embedding model than the one configured."""


class IndexLockedError(RagsteadError):
    """Another `ragstead index` run holds the index lock."""


class LexicalIndexBusyError(IndexLockedError):
    """Another process held the lexical index's writer lock for longer than we waited; nothing was written."""


class InvalidQueryError(RagsteadError):
    """A query or filter value is malformed (bad date, k out of range, oversized text).

    `fields`: the library's names of the request fields the message speaks of (`date_from`, `k`); each door
    re-spells them as its users know them (`respelled`: `--date-from` on the CLI, `top_k` over HTTP)."""

    def __init__(self, message: str, *, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields

    def respelled(self, spelling: Mapping[str, str]) -> str:
        """The message with each of its fields in a door's spelling; quoted values (the caller's own text) are
        left as they are."""
        names = [name for name in self.fields if name in spelling]
        if not names:
            return str(self)
        field = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
        parts = _QUOTED.split(str(self))  # odd parts are quoted values
        return "".join(part if i % 2 else field.sub(lambda m: spelling[m[1]], part) for i, part in enumerate(parts))


class ConfigError(RagsteadError):
    """A configuration file or value is invalid."""


class ProviderError(RagsteadError):
    """An answerer could not answer (HTTP error, timeout, malformed or empty reply); the next one in the chain tries."""


class ToolError(RagsteadError):
    """A tool call of `ask` was refused (not allow-listed, malformed arguments) or failed (its API down, too
    slow, too big); the model is told and the answer goes on without it."""


class DocumentNotFoundError(RagsteadError):
    """No such document in the caller's scope (someone else's document answers the same way)."""


class RagsteadWarning(UserWarning):
    """Something was wrong and ragstead repaired it (a damaged derived index rebuilt); the CLI prints one
    `warning:` line."""


def one_line_reason(exc: BaseException, limit: int = 300) -> str:
    """An error's message as a report's one-line reason: whitespace collapsed, at most `limit` characters, the
    exception's type when it has no message."""
    return " ".join(str(exc).split())[:limit] or type(exc).__name__
