"""Tweets / X posts, from the public syndication endpoint that powers embedded posts (no account, no API key):
`https://cdn.syndication.twimg.com/tweet-result?id=ID&token=…`. The text keeps its links expanded; the author,
date, the quoted post and the post it replies to (the thread text the endpoint gives) come along."""

from __future__ import annotations

import html
import json
import math
import re
from datetime import UTC, datetime
from typing import Any

import httpx

from ragstead.ingest.base import (
    DEFAULT_MAX_BYTES,
    Extracted,
    SourceError,
    http_failure,
    read_capped,
    split_web_url,
)

SYNDICATION_URL = "https://cdn.syndication.twimg.com/tweet-result"
NOT_FOUND = "post not found (deleted or protected)"

_HOSTS = {"twitter.com", "www.twitter.com", "mobile.twitter.com", "x.com", "www.x.com", "mobile.x.com"}
_POST_ID = re.compile(r"[1-9][0-9]{0,19}")  # ASCII digits only (\d would take other scripts' digits)
_HANDLE = re.compile(r"[A-Za-z0-9_]{1,15}")
_DIGITS36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_HEADING_START = re.compile(r"#{1,6}(?:[ \t]|$)")  # an ATX heading; a #hashtag is not one
TITLE_CHARS = 80


def post_id(url: str) -> str | None:
    """The numeric id of a post URL on twitter.com or x.com (`/USER/status/ID`, `/USER/statuses/ID`,
    `/i/web/status/ID`, `/i/status/ID`, mobile hosts, any query), or None for anything else."""
    parsed = _parse_post_url(url)
    return parsed[1] if parsed else None


def post_url(identifier: str, handle: str | None = None) -> str:
    """The post's URL on twitter.com: with the author's handle when known, else the handle-free `/i/status/`."""
    return f"https://twitter.com/{handle}/status/{identifier}" if handle else \
        f"https://twitter.com/i/status/{identifier}"


def syndication_token(identifier: str) -> str:
    """The `token` the syndication endpoint expects, as react-tweet's `getToken` computes it in JavaScript:
    `((Number(id) / 1e15) * Math.PI).toString(36).replace(/(0+|\\.)/g, '')`."""
    return re.sub(r"(0+|\.)", "", _js_radix_string((int(identifier) / 1e15) * math.pi, 36))


def fetch_post(url: str, client: httpx.Client, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Extracted:
    """Fetch one post as an `Extracted` markdown document. Raises `SourceError` with a one-line reason; a
    deleted, protected or withheld post (404, a tombstone, an empty answer) is "post not found (deleted or
    protected)"."""
    parsed = _parse_post_url(url)
    if parsed is None:
        raise SourceError("not a tweet / X post URL")
    url_handle, identifier = parsed
    params = {"id": identifier, "lang": "en", "token": syndication_token(identifier)}
    try:
        with client.stream("GET", SYNDICATION_URL, params=params) as answer:
            if answer.status_code == 404:
                raise SourceError(NOT_FOUND)
            if answer.status_code == 429:
                raise SourceError("X refused the request (HTTP 429, rate limited); try later")
            if answer.status_code >= 400:
                raise SourceError(f"HTTP {answer.status_code}")
            raw = read_capped(answer, max_bytes)
    except httpx.HTTPError as exc:
        raise http_failure(exc) from None
    post = _parse_body(raw)
    return _extracted(post, identifier, url_handle)


def post_markdown(post: dict[str, Any]) -> str:
    """The archived markdown of a post: a heading with the author, the text, its link, then the post it replies
    to and the post it quotes, each under its own heading."""
    author = _author(post)
    lines = [f"# {author or 'Post'}", ""]
    text = post_text(post)
    if text:
        lines += [_escape_block(text), ""]
    handle = _handle(post)
    identifier = str(post.get("id_str") or "")
    if identifier:
        lines += [post_url(identifier, handle), ""]
    for key, label in (("parent", "In reply to"), ("quoted_tweet", "Quoting")):
        other = post.get(key)
        if isinstance(other, dict) and post_text(other):
            who = _author(other)
            lines += [f"## {label} {who}" if who else f"## {label}", "", _escape_block(post_text(other)), ""]
    return "\n".join(lines)


def post_text(post: dict[str, Any]) -> str:
    """A post's text with its t.co links replaced by the URLs they stand for, the links to its own photos and
    videos dropped, and Twitter's HTML escapes (`&amp;`) undone."""
    text = post.get("text") or post.get("full_text") or ""
    if not isinstance(text, str):
        return ""
    entities = post.get("entities") if isinstance(post.get("entities"), dict) else {}
    for entity in _entity_list(entities, "urls"):
        short, expanded = entity.get("url"), entity.get("expanded_url")
        if isinstance(short, str) and short and isinstance(expanded, str) and expanded:
            text = text.replace(short, expanded)
    for entity in _entity_list(entities, "media"):
        short = entity.get("url")
        if isinstance(short, str) and short:
            text = text.replace(short, "")
    return html.unescape(text).strip()


def _parse_post_url(url: str) -> tuple[str | None, str] | None:
    """(handle or None, id) of a post URL, or None."""
    split = split_web_url(url)
    if split is None:
        return None
    host, _, segments = split
    if host not in _HOSTS:
        return None
    if len(segments) >= 3 and segments[0] == "i" and segments[1] in ("status", "statuses"):
        handle, identifier = None, segments[2]
    elif len(segments) >= 4 and segments[:3] == ["i", "web", "status"]:
        handle, identifier = None, segments[3]
    elif len(segments) >= 3 and segments[1] in ("status", "statuses") and _HANDLE.fullmatch(segments[0]):
        handle, identifier = segments[0], segments[2]
    else:
        return None
    if not _POST_ID.fullmatch(identifier):
        return None
    return handle, identifier


def _parse_body(raw: bytes) -> dict[str, Any]:
    """The post object of a 200 answer; deleted, protected and empty answers are "not found"."""
    if not raw.strip():
        raise SourceError(NOT_FOUND)
    try:
        data = json.loads(raw)
    except ValueError:
        raise SourceError("the embed endpoint answered with something that is not JSON") from None
    if not isinstance(data, dict) or not data or data.get("__typename") == "TweetTombstone" or "tombstone" in data:
        raise SourceError(NOT_FOUND)
    if not post_text(data) and not data.get("id_str"):
        raise SourceError(NOT_FOUND)
    return data


def _extracted(post: dict[str, Any], identifier: str, url_handle: str | None) -> Extracted:
    handle = _handle(post) or url_handle
    author = _author(post)
    return Extracted(
        source_type="Post",
        source_id=identifier,
        url=post_url(identifier),
        body=post_markdown({**post, "id_str": post.get("id_str") or identifier}),
        ext="md",
        title=_title(author, post_text(post), identifier),
        canonical_url=post_url(identifier, handle),
        author=author,
        published_at=_iso_date(post.get("created_at")),
        site_name="X (Twitter)",
        extra=_extra(post, handle),
    )


def _title(author: str | None, text: str, identifier: str) -> str:
    """ "Author: the post's text" on one line, cut to TITLE_CHARS; whichever of the two there is, else the id."""
    snippet = " ".join(text.split())
    if len(snippet) > TITLE_CHARS:
        snippet = snippet[: TITLE_CHARS - 1].rstrip() + "…"
    return f"{author}: {snippet}" if author and snippet else (author or snippet or f"Post {identifier}")


def _extra(post: dict[str, Any], handle: str | None) -> dict[str, Any]:
    """The post's metadata an archive keeps besides its text: handle, language, the post it answers or quotes
    and its photos' and videos' URLs (each only when the post has it)."""
    extra: dict[str, Any] = {}
    if handle:
        extra["handle"] = handle
    if isinstance(post.get("lang"), str):
        extra["lang"] = post["lang"]
    parent = post.get("parent") if isinstance(post.get("parent"), dict) else {}
    parent_id = post.get("in_reply_to_status_id_str") or parent.get("id_str")
    if isinstance(parent_id, str) and parent_id:
        extra["in_reply_to"] = parent_id
    quoted = post.get("quoted_tweet")
    if isinstance(quoted, dict) and isinstance(quoted.get("id_str"), str):
        extra["quoted"] = quoted["id_str"]
    media = _media_urls(post)
    if media:
        extra["media"] = media
    return extra


def _media_urls(post: dict[str, Any]) -> list[str]:
    details = post.get("mediaDetails") if isinstance(post.get("mediaDetails"), list) else []
    return [m["media_url_https"] for m in details if isinstance(m, dict) and isinstance(m.get("media_url_https"), str)]


def _handle(post: dict[str, Any]) -> str | None:
    user = post.get("user") if isinstance(post.get("user"), dict) else {}
    handle = user.get("screen_name")
    return handle if isinstance(handle, str) and _HANDLE.fullmatch(handle) else None


def _author(post: dict[str, Any]) -> str | None:
    """ "Name (@handle)", or whichever of the two the post has."""
    user = post.get("user") if isinstance(post.get("user"), dict) else {}
    name = " ".join(user.get("name").split()) if isinstance(user.get("name"), str) else ""
    handle = _handle(post)
    if name and handle:
        return f"{name} (@{handle})"
    return name or (f"@{handle}" if handle else None)


def _iso_date(value: object) -> str | None:
    """ISO 8601 (UTC, seconds) from the endpoint's `2023-03-31T20:07:39.000Z`, or the older
    `Sat Feb 23 03:40:21 +0000 2013`; None when absent or unreadable."""
    if not isinstance(value, str) or not value.strip():
        return None
    for parse in (datetime.fromisoformat, lambda v: datetime.strptime(v, "%a %b %d %H:%M:%S %z %Y")):
        try:
            moment = parse(value.strip())
        except ValueError:
            continue
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).replace(microsecond=0).isoformat()
    return None


def _entity_list(entities: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = entities.get(key)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def _escape_block(text: str) -> str:
    """Post text whose lines can never read back as markdown headings (a line starting `# ` would otherwise split
    the archive into sections)."""
    return "\n".join("\\" + line if _HEADING_START.match(line) else line for line in text.splitlines())


def _js_radix_string(value: float, radix: int) -> str:
    """JavaScript's `Number.prototype.toString(radix)` for a finite double: a port of V8's
    `DoubleToRadixCString`. Python has no float-to-base-36 of its own, and the token must match byte for byte;
    V8 stops the fraction digits at the double's precision (delta), which plain base conversion does not."""
    if value == 0:
        return "0"
    negative = value < 0
    value = -value if negative else value
    integer = math.floor(value)
    fraction = value - integer
    delta = max(0.5 * (math.nextafter(value, math.inf) - value), math.nextafter(0.0, 1.0))
    fraction_digits: list[int] = []
    if fraction >= delta:
        while True:
            fraction *= radix
            delta *= radix
            digit = int(fraction)
            fraction_digits.append(digit)
            fraction -= digit
            if (fraction > 0.5 or (fraction == 0.5 and digit & 1)) and fraction + delta > 1:
                # Round up (to even), carrying into earlier digits and past the first into the integer part.
                while True:
                    if not fraction_digits:
                        integer += 1
                        break
                    last = fraction_digits.pop() + 1
                    if last < radix:
                        fraction_digits.append(last)
                        break
                break
            if fraction < delta:
                break
    integer_digits: list[str] = []
    integer_part = float(integer)
    while integer_part / radix >= 2.0 ** 53:  # digits below the double's precision are written as zeros
        integer_part /= radix
        integer_digits.append("0")
    while True:
        remainder = math.fmod(integer_part, radix)
        integer_digits.append(_DIGITS36[int(remainder)])
        integer_part = (integer_part - remainder) / radix
        if integer_part <= 0:
            break
    result = "".join(reversed(integer_digits))
    if fraction_digits:
        result += "." + "".join(_DIGITS36[d] for d in fraction_digits)
    return "-" + result if negative else result
