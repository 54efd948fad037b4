"""YouTube videos: the transcript as markdown, one `## m:ss` section per minute or so, so the markdown chunker's
`section_path` of every chunk names the time it starts at and a citation can link to `&t=…s`.

The transcript comes from the maintained `youtube-transcript-api`, which speaks `requests`. Its session gets one
transport adapter, `HttpxAdapter`, that sends every request through the caller's `httpx.Client`: our transport,
timeouts and size cap apply, tests drive it with `httpx.MockTransport`, and no request leaves another way.
The title and channel come from oEmbed through the same client, else from the watch page the library fetched.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import requests
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict
from youtube_transcript_api import (
    AgeRestricted,
    CouldNotRetrieveTranscript,
    FailedToCreateConsentCookie,
    InvalidVideoId,
    NoTranscriptFound,
    PoTokenRequired,
    RequestBlocked,
    TranscriptsDisabled,
    VideoUnavailable,
    VideoUnplayable,
    YouTubeDataUnparsable,
    YouTubeRequestFailed,
    YouTubeTranscriptApi,
)

from ragstead.documents.sources import timestamp_seconds as timestamp_seconds  # re-exported for callers
from ragstead.ingest.base import (
    DEFAULT_MAX_BYTES,
    Extracted,
    SourceError,
    http_failure,
    read_capped,
    split_web_url,
)

WATCH_URL = "https://www.youtube.com/watch?v={video_id}"
OEMBED_URL = "https://www.youtube.com/oembed"
SECTION_SECONDS = 60  # about a minute of speech per `## m:ss` section: one chunk each at the default sizes
MAX_LISTED_SECTIONS = 300  # extra["segments"] lists section start times up to a 5-hour video, not beyond

_VIDEO_ID = re.compile(r"[A-Za-z0-9_-]{11}")
_WATCH_HOSTS = {"youtube.com", "www.youtube.com", "m.youtube.com", "music.youtube.com"}
_SHORT_HOSTS = {"youtu.be", "www.youtu.be"}
_NOCOOKIE_HOSTS = {"youtube-nocookie.com", "www.youtube-nocookie.com"}
_PATH_KINDS = {"shorts", "embed", "live", "v"}  # /shorts/ID, /embed/ID, /live/ID, /v/ID
_HEADING_START = re.compile(r"#{1,6}(?:[ \t]|$)")  # an ATX heading; a #hashtag is not one
# Hop-by-hop and encoding headers `requests` adds that httpx sets (and decodes) itself.
_DROPPED_REQUEST_HEADERS = {"connection", "content-length", "accept-encoding", "host", "transfer-encoding",
                            "keep-alive", "te", "upgrade"}
_DROPPED_RESPONSE_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}
BLOCKED = "YouTube refused the request (rate limited or blocked); try later"


def youtube_video_id(url: str) -> str | None:
    """The 11-character video id of a YouTube video URL (watch, youtu.be, shorts, embed, live, mobile, music,
    nocookie), or None for anything else. Scheme-less input ("youtu.be/ID") is read as https."""
    split = split_web_url(url)
    if split is None:
        return None
    host, parts, segments = split
    candidate: str | None = None
    if host in _SHORT_HOSTS:
        candidate = segments[0] if len(segments) == 1 else None
    elif host in _WATCH_HOSTS:
        if segments == ["watch"]:
            values = [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k == "v"]
            candidate = values[0] if values else None
        elif len(segments) == 2 and segments[0] in _PATH_KINDS:
            candidate = segments[1]
    elif host in _NOCOOKIE_HOSTS and len(segments) == 2 and segments[0] == "embed":
        candidate = segments[1]
    return candidate if candidate is not None and _VIDEO_ID.fullmatch(candidate) else None


def format_timestamp(seconds: int) -> str:
    """`m:ss` below an hour, `h:mm:ss` from there (the form YouTube shows)."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def video_link(url: str, seconds: int) -> str:
    """The watch URL of the video at `url`, starting at `seconds` (`…watch?v=ID&t=83s`). A URL that is not a
    YouTube video comes back unchanged."""
    video_id = youtube_video_id(url)
    if video_id is None:
        return url
    return f"{WATCH_URL.format(video_id=video_id)}&t={max(0, int(seconds))}s"


@dataclass(frozen=True)
class Segment:
    """One transcript line: its text and where it starts, in seconds."""

    start: float
    text: str


def transcript_sections(segments: Sequence[Segment], seconds: int = SECTION_SECONDS) -> list[tuple[int, str]]:
    """Group transcript lines into sections of about `seconds` each: (start second, text) pairs. A section starts
    at the first line at least `seconds` after the previous section's start, so no line is split."""
    sections: list[tuple[int, list[str]]] = []
    section_start = None
    for segment in segments:
        text = " ".join(segment.text.split())
        if not text:
            continue
        if section_start is None or segment.start >= section_start + seconds:
            section_start = segment.start
            sections.append((int(segment.start), []))
        sections[-1][1].append(text)
    return [(start, " ".join(texts)) for start, texts in sections]


def transcript_markdown(title: str | None, video_id: str, channel: str | None, segments: Sequence[Segment],
                        seconds: int = SECTION_SECONDS) -> tuple[str, list[int]]:
    """The archived markdown of a video (title, a line with the channel and URL, then `## m:ss` sections), and
    the start second of each section."""
    url = WATCH_URL.format(video_id=video_id)
    heading = _heading_text(title) if title else f"YouTube video {video_id}"
    lines = [f"# {heading}", "", f"{_escape_line(channel)} · {url}" if channel else url, ""]
    starts: list[int] = []
    for start, text in transcript_sections(segments, seconds):
        starts.append(start)
        lines += [f"## {format_timestamp(start)}", "", _escape_line(text), ""]
    return "\n".join(lines), starts


def fetch_youtube(url: str, client: httpx.Client, *, languages: Sequence[str] = ("en",),
                  max_bytes: int = DEFAULT_MAX_BYTES) -> Extracted:
    """Fetch a video's transcript (first of `languages` available; manual before generated captions) and its
    title, as an `Extracted` markdown document. Raises `SourceError` with a one-line reason when it cannot."""
    video_id = youtube_video_id(url)
    if video_id is None:
        raise SourceError("not a YouTube video URL")
    wanted = [languages] if isinstance(languages, str) else list(languages)
    adapter = HttpxAdapter(client, max_bytes=max_bytes)
    session = _session_over(adapter)
    try:
        fetched = YouTubeTranscriptApi(http_client=session).fetch(video_id, languages=wanted or ["en"])
    except CouldNotRetrieveTranscript as exc:
        raise SourceError(_transcript_failure(exc)) from None
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, SyntaxError):
        # An answer of the wrong shape: HTML where JSON or XML was due (the library parses without checking;
        # XML parse errors are SyntaxErrors, JSON's are ValueErrors, missing keys KeyErrors).
        raise SourceError("YouTube's answer could not be read (the site may have changed)") from None
    except requests.RequestException as exc:  # only a malformed request can get here; transport errors are ours
        raise SourceError(f"request failed ({type(exc).__name__})") from None
    finally:
        session.close()
    segments = [Segment(snippet.start, snippet.text) for snippet in fetched.snippets]
    if not any(s.text.strip() for s in segments):
        raise SourceError("no transcript for this video")

    title, channel, channel_url = _oembed(client, video_id, max_bytes)
    if title is None:
        title, page_channel = _title_from_watch_page(adapter.watch_page or "")
        channel = channel or page_channel
    body, starts = transcript_markdown(title, video_id, channel, segments)
    extra: dict[str, Any] = {
        "duration": _duration(adapter.player, fetched.snippets),
        "language": fetched.language_code,
        "generated_captions": fetched.is_generated,
    }
    if channel_url:
        extra["channel_url"] = channel_url
    if len(starts) <= MAX_LISTED_SECTIONS:
        extra["segments"] = starts
    return Extracted(
        source_type="Video",
        source_id=video_id,
        url=WATCH_URL.format(video_id=video_id),
        body=body,
        ext="md",
        title=title,
        canonical_url=WATCH_URL.format(video_id=video_id),
        author=channel,
        site_name="YouTube",
        extra=extra,
    )


class HttpxAdapter(BaseAdapter):
    """A `requests` transport adapter that sends each request through one `httpx.Client`: its transport,
    timeouts and redirects, and `max_bytes` on every body. Transport errors become `SourceError`s here, so the
    library above cannot retry them elsewhere. It also keeps the last watch page and player JSON it saw, for the
    title and duration fallbacks."""

    def __init__(self, client: httpx.Client, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__()
        self._client = client
        self._max_bytes = max_bytes
        self.watch_page: str | None = None
        self.player: dict[str, Any] | None = None

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED_REQUEST_HEADERS}
        body = request.body.encode("utf-8") if isinstance(request.body, str) else request.body
        try:
            with self._client.stream(request.method or "GET", request.url or "", headers=headers,
                                     content=body) as answer:
                content = read_capped(answer, self._max_bytes)
        except httpx.HTTPError as exc:
            raise http_failure(exc) from None
        response = requests.Response()
        response.status_code = answer.status_code
        response.reason = answer.reason_phrase
        response.headers = CaseInsensitiveDict(
            {k: v for k, v in answer.headers.items() if k.lower() not in _DROPPED_RESPONSE_HEADERS})
        response._content = content
        response._content_consumed = True  # no raw stream behind it: requests must not try to read or close one
        response.encoding = answer.charset_encoding or "utf-8"
        response.url = str(answer.url)
        response.request = request
        self._remember(request, response)
        return response

    def close(self) -> None:
        """The client belongs to the caller; nothing of ours to close."""

    def _remember(self, request: requests.PreparedRequest, response: requests.Response) -> None:
        path = urlsplit(request.url or "").path
        if response.status_code != 200:
            return
        if request.method == "GET" and path == "/watch":
            self.watch_page = response.text
        elif request.method == "POST" and path == "/youtubei/v1/player":
            try:
                data = json.loads(response.content)
            except ValueError:
                return
            self.player = data if isinstance(data, dict) else None


def _session_over(adapter: HttpxAdapter) -> requests.Session:
    """A requests session whose only way out is `adapter` (no default adapters, no proxies from the env)."""
    session = requests.Session()
    session.trust_env = False
    session.adapters.clear()
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def _transcript_failure(exc: CouldNotRetrieveTranscript) -> str:
    """The one-line reason for each way the transcript library gives up."""
    if isinstance(exc, (TranscriptsDisabled, NoTranscriptFound)):
        return "no transcript for this video"
    if isinstance(exc, RequestBlocked):  # IpBlocked included: HTTP 429, the reCAPTCHA page, "not a bot"
        return BLOCKED
    if isinstance(exc, AgeRestricted):
        return "video is age-restricted (its transcript needs a signed-in session)"
    if isinstance(exc, InvalidVideoId):
        return "invalid YouTube video id"
    if isinstance(exc, VideoUnavailable):
        return "video unavailable (removed, private or a wrong id)"
    if isinstance(exc, FailedToCreateConsentCookie):
        return "YouTube showed a cookie consent page that could not be accepted"
    if isinstance(exc, PoTokenRequired):
        return "YouTube requires a PO token for this video's transcript"
    if isinstance(exc, VideoUnplayable):
        reason = " ".join((exc.reason or "no reason given").split())[:200]
        return f"video is unplayable: {reason}"
    if isinstance(exc, YouTubeRequestFailed):
        status = re.match(r"\s*(\d{3})\b", exc.reason)
        return f"HTTP {status.group(1)} from YouTube" if status else "YouTube request failed"
    if isinstance(exc, YouTubeDataUnparsable):
        return "YouTube's page could not be read (the site may have changed)"
    return "could not retrieve the transcript"


def _oembed(client: httpx.Client, video_id: str, max_bytes: int) -> tuple[str | None, str | None, str | None]:
    """(title, channel, channel URL) from YouTube's oEmbed endpoint; Nones when it fails in any way."""
    query = urlencode({"url": WATCH_URL.format(video_id=video_id), "format": "json"})
    try:
        with client.stream("GET", f"{OEMBED_URL}?{query}") as answer:
            if answer.status_code != 200:
                return None, None, None
            data = json.loads(read_capped(answer, min(max_bytes, 1024 * 1024)))
    except (httpx.HTTPError, SourceError, ValueError):
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    return _clean(data.get("title")), _clean(data.get("author_name")), _clean(data.get("author_url"))


def _title_from_watch_page(page: str) -> tuple[str | None, str | None]:
    """(title, channel) from a watch page's meta tags and player JSON; Nones where it has none."""
    title = None
    for pattern in (r'<meta\s+name="title"\s+content="([^"]*)"', r'<meta\s+property="og:title"\s+content="([^"]*)"',
                    r"<title>([^<]*?)(?:\s+-\s+YouTube)?\s*</title>"):
        match = re.search(pattern, page)
        if match and _clean(html.unescape(match.group(1))):
            title = _clean(html.unescape(match.group(1)))
            break
    channel = None
    match = re.search(r'"ownerChannelName"\s*:\s*("(?:[^"\\]|\\.)*")', page)
    if match:
        try:
            channel = _clean(json.loads(match.group(1)))
        except ValueError:
            channel = None
    return title, channel


def _duration(player: dict[str, Any] | None, snippets: Sequence[Any]) -> int:
    """The video's length in seconds: the player's `lengthSeconds`, else where the transcript ends."""
    details = (player or {}).get("videoDetails")
    length = details.get("lengthSeconds") if isinstance(details, dict) else None
    if isinstance(length, str) and length.isdigit():
        return int(length)
    if not snippets:
        return 0
    return int(max(s.start + s.duration for s in snippets))


def _clean(value: object) -> str | None:
    """A one-line, trimmed string, or None for anything empty or not a string."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text[:500] or None


def _heading_text(title: str) -> str:
    """The title as a `#` heading the markdown chunker reads back as one path component that names no time."""
    text = title.replace(">", "›")
    return f"{text} (video)" if timestamp_seconds(text) is not None else text


def _escape_line(text: str) -> str:
    """A line of transcript text that can never read back as a heading (which would break the time sections)."""
    return "\\" + text if _HEADING_START.match(text) else text
