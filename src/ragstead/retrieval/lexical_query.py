"""Turn arbitrary user text into the word terms of a lexical (BM25) query: only word tokens survive, so no
query syntax ever reaches a parser. English stop words are dropped unless nothing else is left
(docs/design.md, "Lexical analysis").
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does during each few for from further had has have he her
    here his how i if in into is it its just may might more most no nor not now of off on once only or
    other our out over own same she should so some such than that the their them then there these they
    this through to too under until up very was we were what when where which while who whom why will
    with would you your""".split()
)


def query_terms(text: str) -> list[str]:
    """The distinct word terms of `text` in order, at most MAX_QUERY_TERMS; [] means an empty result."""
    seen: dict[str, None] = {}
    for token in _TOKEN.findall(text.lower()):
        token = token.strip("_")
        if token:
            seen.setdefault(token, None)
    tokens = [t for t in seen if t not in STOP_WORDS] or list(seen)
    return tokens[:MAX_QUERY_TERMS]
