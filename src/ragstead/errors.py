"""Errors a user can act on. The CLI prints their message and exits non-zero, never a traceback."""

import importlib.util
import re
import sys
from collections.abc import Mapping

# A value quoted in a message (repr of a str: single or double quotes, escapes inside).
_QUOTED = re.compile(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


class RagsteadError(Exception):
    """Base class for every error ragstead reports to its user."""


class LoadError(RagsteadError):
    """A file could not be read or parsed (corrupt, encrypted, binary, unreadable)."""


class UnsupportedFileError(LoadError):
    """The file type has no loader."""


class MissingExtraError(RagsteadError):
    """A part of ragstead whose extra is not installed; the message names the extra to install."""


# Per runtime extra: what it adds, and the modules of its packages that ragstead imports (pyproject's
# [project.optional-dependencies]; tests/test_dependencies.py keeps the two in step).
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "server": ("the HTTP API (ragstead serve)", ("fastapi", "starlette", "uvicorn", "limits", "fastapi_offline")),
    "ingest": ("ingest of web pages, feeds, videos and dossiers (and freshness --urls)",
               ("trafilatura", "url_normalize", "youtube_transcript_api", "requests", "jinja2", "yake",
                "feedparser")),
}


def _importable(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None  # None: import blocked (how tests hide a package)
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def require_extra(extra: str) -> None:
    """MissingExtraError naming `extra` when a package it brings is not installed: checked before the part that
    needs it is imported, without importing the packages, so a partial install is one line, not a traceback."""
    what, modules = EXTRAS[extra]
    missing = [name for name in modules if not _importable(name)]
    if missing:
        raise MissingExtraError(f"{what} needs {', '.join(missing)}: pip install 'ragstead[{extra}]'")


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
