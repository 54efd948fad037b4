"""An RSS or Atom feed as a list of sources: `ragstead ingest https://…/feed.xml` ingests its entries' pages.

A URL is tried as a feed when its path says so (`.xml`, `.rss`, `.atom`, or ending `/feed`, `/rss`, `/atom`):
it is fetched once through the same guarded client and parsed with feedparser (from the bytes: feedparser
fetches nothing itself). Each entry's link is then a source of its own, so the usual dedup by URL means a
second run ingests only the new entries. A URL that turns out not to be a feed is ingested as a page.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

MAX_ENTRIES = 1000
_FEED_PATH = re.compile(r"(?:\.(?:xml|rss|atom)|/(?:feed|rss|atom)(?:\.xml)?)/?$", re.IGNORECASE)


def looks_like_feed(url: str) -> bool:
    """True for an http(s) URL whose path names a feed."""
    parts = urlsplit(url.strip())
    return parts.scheme.lower() in ("http", "https") and bool(_FEED_PATH.search(parts.path))


def feed_entries(data: bytes) -> list[str] | None:
    """The entries' http(s) links in feed order, without repeats (at most MAX_ENTRIES); None if `data` is no
    RSS/Atom feed."""
    import feedparser

    parsed = feedparser.parse(data)
    if not parsed.get("version") and not parsed.entries:
        return None
    links: dict[str, None] = {}
    for entry in parsed.entries:
        link = str(entry.get("link") or "").strip()
        if link.lower().startswith(("http://", "https://")):
            links[link] = None
        if len(links) >= MAX_ENTRIES:
            break
    return list(links)
