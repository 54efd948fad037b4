"""One filter model, the scope of every query, compiled by each store into its own query language.

Semantics: AND across fields, OR within a field (several doc types or tags). Private-only unless
`public_only`; archive excluded unless `include_archive` (or `archive` is asked for by doc type). The
archive is public content: a private-scope query that asks for it sees it too. A door whose scope has no
archive (an MCP server started without it) builds with `archive_allowed=False`: asking for the archive in
either spelling is then refused, here, for every door alike.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from typing import Any

from ragstead.documents.metadata import DOC_TYPES, PathRule, derive_metadata
from ragstead.errors import InvalidQueryError
from ragstead.records import Record

# \Z, not $: "$" also matches before a trailing newline, which would let "alice\n" through as a slug.
USER_SLUG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Any user text made safe for tokenizers, SQL drivers and JSON: bytes that were not UTF-8 (argv decoded
    with surrogateescape) and lone surrogates become U+FFFD, control characters a space."""
    with contextlib.suppress(UnicodeEncodeError):  # surrogates outside the escape range: just invalid
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return _CONTROL.sub(" ", _SURROGATE.sub("\ufffd", text))


def _parse_day(value: str | None, name: str) -> date | None:
    if value in (None, ""):
        return None
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError) as exc:
        raise InvalidQueryError(f"{name} must be a date as YYYY-MM-DD, got {value!r}", fields=(name,)) from exc


def split_values(values: list[str] | tuple[str, ...] | None) -> list[str]:
    """Flatten repeatable, comma-separated CLI values: ['a,b', 'c'] -> ['a', 'b', 'c']."""
    out: list[str] = []
    for value in values or []:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class QueryFilters:
    """Scope of a query. Construct with `QueryFilters.build(...)` to validate user input."""

    user_slug: str | None = None
    doc_types: tuple[str, ...] = ()
    public_only: bool = False
    date_from: str | None = None
    date_to: str | None = None
    include_archive: bool = False
    tags: tuple[str, ...] = field(default=())

    @property
    def private_only(self) -> bool:
        return not self.public_only

    @property
    def wants_archive(self) -> bool:
        """Archive documents are in scope (asked for by `include_archive` or by doc type)."""
        return self.include_archive or "archive" in self.doc_types

    @property
    def archive_beside_private(self) -> bool:
        """A private-scope query that asked for the archive: public archive documents are admitted too."""
        return self.wants_archive and not self.public_only

    @classmethod
    def build(
        cls,
        user_slug: str | None = None,
        doc_types: list[str] | tuple[str, ...] | None = None,
        public_only: bool = False,
        date_from: str | None = None,
        date_to: str | None = None,
        include_archive: bool = False,
        tags: list[str] | tuple[str, ...] | None = None,
        archive_allowed: bool = True,
    ) -> QueryFilters:
        """Validate and normalise filter values; raise `InvalidQueryError` with a clear message.
        `archive_allowed=False`: the caller's scope has no archive, so asking for it is refused."""
        if user_slug is not None and not USER_SLUG.match(user_slug):
            raise InvalidQueryError(f"user must be a slug of letters, digits, '.', '_' or '-', got {user_slug!r}",
                                    fields=("user",))
        types = tuple(split_values(list(doc_types or [])))
        unknown = [t for t in types if t not in DOC_TYPES]
        if unknown:
            raise InvalidQueryError(f"doc_types: unknown doc type(s) {unknown}; use {list(DOC_TYPES)}",
                                    fields=("doc_types",))
        if not archive_allowed and (include_archive or "archive" in types):
            raise InvalidQueryError("the archive is outside this scope (doc type 'archive' or include_archive): "
                                    "the scope is fixed when the server starts", fields=("doc_types",))
        start, end = _parse_day(date_from, "date_from"), _parse_day(date_to, "date_to")
        if start and end and start > end:
            raise InvalidQueryError(f"date_from {start} is after date_to {end}", fields=("date_from", "date_to"))
        return cls(
            user_slug=user_slug,
            doc_types=types,
            public_only=public_only,
            date_from=start.isoformat() if start else None,
            date_to=end.isoformat() if end else None,
            include_archive=include_archive,
            tags=tuple(clean_text(t).lower() for t in split_values([str(t) for t in tags or []])),
        )

    def to_sql(self, alias: str = "c", mark: str = "?") -> tuple[str, list[object]]:
        """A WHERE fragment over the chunks (or documents) table `alias` and its parameters. Never empty.

        `mark` is the driver's parameter placeholder (`?` for sqlite3, `%s` for psycopg). Privacy is a
        Python bool: sqlite3 stores it as 1/0, PostgreSQL compares it with its boolean column.
        """
        privacy = f"{alias}.is_private = {mark}"
        if self.archive_beside_private:
            privacy = f"({privacy} OR {alias}.doc_type = 'archive')"
        clauses = [privacy]
        params: list[object] = [not self.public_only]
        if self.user_slug is not None:
            clauses.append(f"{alias}.user_slug = {mark}")
            params.append(self.user_slug)
        if self.doc_types:
            clauses.append(f"{alias}.doc_type IN ({','.join([mark] * len(self.doc_types))})")
            params.extend(self.doc_types)
        if not self.wants_archive:
            clauses.append(f"{alias}.doc_type != 'archive'")
        if self.date_from:
            clauses.append(f"{alias}.created_at >= {mark}")
            params.append(self.date_from)
        if self.date_to:
            # created_at is a full ISO timestamp; the whole --date-to day is included.
            clauses.append(f"{alias}.created_at < {mark}")
            params.append((date.fromisoformat(self.date_to) + timedelta(days=1)).isoformat())
        if self.tags:
            clauses.append(
                f"EXISTS (SELECT 1 FROM doc_tags t WHERE t.doc_id = {alias}.doc_id "
                f"AND t.tag IN ({','.join([mark] * len(self.tags))}))"
            )
            params.extend(self.tags)
        return " AND ".join(clauses), params

    def admits(self, file_path: str, rules: tuple[PathRule, ...]) -> bool:
        """Defensive backstop: re-derive scope from the path alone and check it against these filters.

        The SQL WHERE is what enforces scope; this catches a row whose stored metadata disagrees with
        its path (a bug or a tampered index) before it can reach the caller.
        """
        derived = derive_metadata(file_path, None, rules)
        if derived.is_private == self.public_only and not (
            self.archive_beside_private and derived.doc_type == "archive"
        ):
            return False
        if self.user_slug is not None and derived.user_slug != self.user_slug:
            return False
        if self.doc_types and derived.doc_type not in self.doc_types:
            return False
        return derived.doc_type != "archive" or self.wants_archive

    def describe(self, rules: tuple[PathRule, ...]) -> AppliedFilters:
        """The filters a search applied: the `filters` object of the JSON contract, typed."""
        return AppliedFilters(**asdict(self), private_only=self.private_only,
                              prefix_backstop=tuple(user_prefixes(self.user_slug, rules) if self.user_slug else ()))


@dataclass(frozen=True)
class AppliedFilters(Record):
    """The scope a search ran in, as `SearchResult.filters` reports it: the query filters, whether the scope was
    private, and the path prefixes that back the user filter up. `to_dict()` is the JSON contract's `filters`."""

    user_slug: str | None
    doc_types: tuple[str, ...]
    public_only: bool
    date_from: str | None
    date_to: str | None
    include_archive: bool
    tags: tuple[str, ...]
    private_only: bool
    prefix_backstop: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {"doc_types": list(self.doc_types), "tags": list(self.tags),
                 "prefix_backstop": list(self.prefix_backstop)}
        return data


def user_prefixes(user_slug: str, rules: tuple[PathRule, ...]) -> list[str]:
    """Path prefixes where a user's files live, read off the rules that capture `user_slug`."""
    prefixes = []
    for rule in rules:
        if "(?P<user_slug>" in rule.pattern:
            head = rule.pattern.split("(?P<user_slug>")[0].lstrip("^")
            prefixes.append(f"{head.replace(chr(92), '')}{user_slug}/")
    return prefixes
