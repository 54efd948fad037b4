"""Metadata derived from a document's path: the fields every filter uses.

The rules are data, not if-chains: a list of `PathRule`s, first match wins. Users add their own rules
in `ragstead.toml` (`[[path_rules]]`), which are tried before the built-in ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

# `upload` and `ingested`: a personal project's own uploads/ and ingested/ folders (config.Settings.scope_rules).
DOC_TYPES = ("user_kb", "dossier", "kb", "artifact", "docs", "archive", "upload", "ingested")

_WALLET = re.compile(r"0x[0-9a-fA-F]{40}")
_PATH_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


@dataclass(frozen=True)
class PathRule:
    """Matches a root-relative POSIX path; a named group `user_slug` in the pattern captures the user, else
    `user_slug` (if set) is the user of every file the rule matches."""

    pattern: str
    doc_type: str
    is_private: bool
    tags: tuple[str, ...] = ()
    user_slug: str | None = None

    def __post_init__(self) -> None:
        if self.doc_type not in DOC_TYPES:
            raise ValueError(f"unknown doc_type {self.doc_type!r} in path rule; use one of {DOC_TYPES}")
        re.compile(self.pattern)

    def match(self, rel_path: str) -> re.Match[str] | None:
        return re.search(self.pattern, rel_path)


# Order matters: the most specific prefix first.
DEFAULT_PATH_RULES: tuple[PathRule, ...] = (
    PathRule(r"^kb/users/(?P<user_slug>[^/]+)/", "user_kb", True),
    PathRule(r"^artifacts/dossiers/(?P<user_slug>[^/]+)/", "dossier", True),
    PathRule(r"^docs/archive/", "archive", False),
    PathRule(r"^kb/", "kb", True),
    PathRule(r"^artifacts/", "artifact", True),
    PathRule(r"^docs/", "docs", False),
)

# Anything no rule matches is private: a missing rule must never publish a file.
_FALLBACK = PathRule(r"", "kb", True)


def owner_rule(owner: str) -> PathRule:
    """Personal mode: a file outside the team layout (kb/, artifacts/, docs/) is its project owner's private
    note. Tried after every other rule."""
    return PathRule(r"", "user_kb", True, user_slug=owner)


@dataclass
class PathMetadata:
    """The filterable fields of a document, derived from the path (and mtime for `created_at`)."""

    doc_type: str
    is_private: bool
    user_slug: str | None = None
    subject: str | None = None  # a `0x` wallet address in the path
    created_at: str | None = None
    tags: list[str] = field(default_factory=list)


def _date_from_path(rel_path: str) -> str | None:
    for match in _PATH_DATE.finditer(rel_path):
        try:
            day = date(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            continue
        return datetime(day.year, day.month, day.day, tzinfo=UTC).isoformat()
    return None


def derive_metadata(
    rel_path: str, mtime: float | None, rules: tuple[PathRule, ...] = DEFAULT_PATH_RULES
) -> PathMetadata:
    """Apply the first matching rule; fill wallet, date and tags from the path."""
    rule, match = _FALLBACK, None
    for candidate in rules:
        match = candidate.match(rel_path)
        if match:
            rule = candidate
            break
    user_slug = rule.user_slug
    if match is not None and "user_slug" in match.groupdict():
        user_slug = match["user_slug"] or None
    wallet = _WALLET.search(rel_path)
    created_at = _date_from_path(rel_path)
    if created_at is None and mtime is not None:
        created_at = datetime.fromtimestamp(mtime, tz=UTC).replace(microsecond=0).isoformat()
    return PathMetadata(
        doc_type=rule.doc_type,
        is_private=rule.is_private,
        user_slug=user_slug,
        subject=wallet.group(0).lower() if wallet else None,
        created_at=created_at,
        tags=list(rule.tags),
    )
