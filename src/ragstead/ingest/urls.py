"""What a source string is (a web URL, a video, a post, a local file, a database), and the key that
deduplicates it: the URL normalized by `url-normalize` plus our rules (tracking parameters dropped, fragment
and trailing slash ignored, youtu.be ≡ youtube.com/watch, x.com ≡ twitter.com)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from url_normalize import url_normalize

from ragstead.ingest.base import SourceError
from ragstead.ingest.posts import post_id
from ragstead.ingest.youtube import youtube_video_id

# Query parameters that only say where a click came from: never part of a document's identity.
TRACKING_PREFIXES = ("utm_",)
TRACKING_PARAMS = frozenset({"fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "mc_cid", "mc_eid", "igshid",
                             "yclid", "_hsenc", "_hsmi", "mkt_tok", "ref_src", "si"})
DATABASE_SCHEMES = ("clickhouse", "clickhouses", "chdb", "postgresql", "postgres", "sqlite")
MAX_URL_CHARS = 4096


@dataclass(frozen=True)
class Source:
    """One parsed source: its kind, the URL as fetched (or the local path), and its dedup key."""

    given: str
    kind: str  # web | video | post | file | database
    url: str  # what is fetched (normalized), the local path, or the database URL
    key: str  # the dedup key: equal for the same document however it was spelled
    source_id: str  # short id for the archive's file name

    @property
    def is_remote(self) -> bool:
        return self.kind in ("web", "video", "post")


def short_hash(text: str, length: int = 12) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def _drop_tracking(query: str) -> str:
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True)
            if not k.lower().startswith(TRACKING_PREFIXES) and k.lower() not in TRACKING_PARAMS]
    return urlencode(kept)


def normalize_url(url: str) -> str:
    """The URL a page is fetched from and keyed by: normalized, without tracking parameters or fragment, and
    without a trailing slash (except the site root)."""
    try:
        normal = url_normalize(url.strip())
    except Exception as exc:  # url-normalize raises several kinds on garbage (bad ports, IDNA errors)
        raise SourceError(f"malformed URL ({exc})") from None
    if not normal:
        raise SourceError("malformed URL")
    parts = urlsplit(normal)
    path = parts.path.rstrip("/") if parts.path not in ("", "/") else ""
    return urlunsplit((parts.scheme, parts.netloc, path, _drop_tracking(parts.query), ""))


def parse_source(given: str, *, root: Path | None = None) -> Source:
    """Classify one source as the user typed it. Raises SourceError with the reason for what cannot be
    ingested (a malformed URL, an unsupported scheme, a missing file)."""
    text = given.strip()
    if not text:
        raise SourceError("empty source")
    if len(text) > MAX_URL_CHARS:
        raise SourceError(f"source longer than {MAX_URL_CHARS} characters")
    scheme = text.split(":", 1)[0].lower() if "://" in text else ""
    if scheme in DATABASE_SCHEMES:
        return Source(given, "database", text, f"db:{short_hash(text)}", short_hash(text))
    if scheme and scheme not in ("http", "https"):
        raise SourceError(f"unsupported scheme {scheme}:// (ingest takes http(s) URLs, local files and "
                          "clickhouse://, postgresql:// or sqlite:// analytics sources)")
    if not scheme:
        # A path that exists is a file; one that looks like a path but is missing is an error; anything else
        # ("example.com/page") is a URL without its scheme.
        path = Path(text).expanduser()
        if not path.exists() and not path.is_absolute() and root is not None and (root / path).exists():
            path = root / path
        if path.exists() or text.startswith(("/", "./", "../", "~", "\\")):
            if not path.is_file():
                raise SourceError(f"no such file: {text}" if not path.exists() else f"{text} is not a file")
            resolved = path.resolve()
            return Source(given, "file", str(resolved), f"file:{resolved.as_posix()}", short_hash(str(resolved)))
    url = normalize_url(text)
    if not urlsplit(url).hostname:
        raise SourceError("malformed URL (no host)")
    video = youtube_video_id(url)
    if video:
        watch = f"https://www.youtube.com/watch?v={video}"
        return Source(given, "video", watch, watch, video)
    post = post_id(url)
    if post:
        status = f"https://twitter.com/i/status/{post}"
        return Source(given, "post", status, status, post)
    return Source(given, "web", url, _web_key(url), short_hash(_web_key(url)))


def _web_key(url: str) -> str:
    """The dedup key of a page: the normalized URL with the scheme folded (http and https are one page)."""
    parts = urlsplit(url)
    host = parts.netloc.lower()
    host = {"x.com": "twitter.com", "www.x.com": "twitter.com", "mobile.twitter.com": "twitter.com"}.get(host, host)
    return urlunsplit(("https", host, parts.path, parts.query, ""))
