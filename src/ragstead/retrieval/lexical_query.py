"""Turn arbitrary user text into a safe FTS5 MATCH expression.

Only word tokens survive; each is wrapped in double quotes, so FTS5 sees string literals and never
operators (AND, OR, NOT, NEAR, *, ^, column filters, parentheses). The tokens are OR-ed, which is
what BM25 ranking expects. The expression is always bound as a parameter, never spliced into SQL.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64


def to_fts_query(text: str) -> str | None:
    """A MATCH expression for `text`, or None when it has no word tokens (then: empty result)."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(text.lower()):
        token = token.strip("_")
        if token:
            seen.setdefault(token, None)
        if len(seen) >= MAX_QUERY_TERMS:
            break
    if not seen:
        return None
    return " OR ".join(f'"{token}"' for token in seen)
