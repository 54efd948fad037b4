"""YouTube ingest: the video-id table, the transcript sections and their timestamps, and every way YouTube says
no, each a one-line reason. YouTube is played by recorded real responses (tests/data/youtube, see SOURCE.md)
served by URL through `httpx.MockTransport`; nothing else is reachable."""

from __future__ import annotations

import gzip
import itertools
import re
import socket
from pathlib import Path

import httpx
import pytest
import requests

from ragstead.documents.chunking import ChunkingOptions, chunk_text
from ragstead.ingest.base import SourceError
from ragstead.ingest.youtube import (
    BLOCKED,
    Segment,
    fetch_youtube,
    format_timestamp,
    timestamp_seconds,
    transcript_markdown,
    transcript_sections,
    video_link,
    youtube_video_id,
)

DATA = Path(__file__).parent / "data" / "youtube"
VIDEO = "GJLlxj_dtq8"  # the video of the recorded watch page and player JSON
WATCH_TITLE = "Surface Go Review - It’s Awesome"
OEMBED_TITLE = "Rick Astley - Never Gonna Give You Up (Official Music Video)"
UNREADABLE = "YouTube's answer could not be read (the site may have changed)"


def recorded(name: str) -> bytes:
    path = DATA / name
    return path.read_bytes() if path.exists() else gzip.decompress(path.with_name(name + ".gz").read_bytes())


def page(name: str, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content=recorded(name), headers={"content-type": "text/html; charset=utf-8"})


def json_answer(name: str) -> httpx.Response:
    return httpx.Response(200, content=recorded(name), headers={"content-type": "application/json"})


class FakeYouTube:
    """Serves the recorded responses by path; `answers[path]` overrides one (a list: one per request, in order).
    Every request is kept; any URL it does not know fails the test."""

    def __init__(self, **answers: httpx.Response | list[httpx.Response]) -> None:
        self.answers = {"/watch": page("youtube.html.static"),
                        "/youtubei/v1/player": json_answer("youtube.innertube.json.static"),
                        "/api/timedtext": httpx.Response(200, content=recorded("transcript.xml.static")),
                        "/oembed": json_answer("oembed_dQw4w9WgXcQ.json")}
        self.answers.update({"/" + k.replace("__", "/").strip("/"): v for k, v in answers.items()})
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        assert request.url.host == "www.youtube.com", f"unexpected request to {request.url}"
        answer = self.answers.get(request.url.path)
        assert answer is not None, f"unexpected request to {request.url}"
        if isinstance(answer, list):
            return answer.pop(0)
        return answer

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self))

    def fetch(self, url: str = f"https://youtu.be/{VIDEO}", **kwargs):
        with self.client() as client:
            return fetch_youtube(url, client, **kwargs)

    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


@pytest.fixture(autouse=True)
def no_other_door(monkeypatch):
    """Any socket or stock requests adapter use fails the test: every request must go through the client."""
    def refuse(*args, **kwargs):
        raise AssertionError("a request tried to leave outside the httpx client")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send", refuse)


# --- video ids ---------------------------------------------------------------------------------------------

ID = "dQw4w9WgXcQ"


@pytest.mark.parametrize("url, expected", [
    (f"https://www.youtube.com/watch?v={ID}", ID),
    (f"https://www.youtube.com/watch?v={ID}&t=43s&list=PL123&index=2", ID),
    (f"https://www.youtube.com/watch?feature=share&v={ID}", ID),
    (f"http://youtube.com/watch?v={ID}", ID),
    (f"https://m.youtube.com/watch?v={ID}", ID),
    (f"https://music.youtube.com/watch?v={ID}&si=abc", ID),
    (f"https://youtu.be/{ID}", ID),
    (f"https://youtu.be/{ID}?si=XyZ&t=10", ID),
    (f"https://youtu.be/{ID}/", ID),
    (f"youtu.be/{ID}", ID),
    (f"www.youtube.com/watch?v={ID}", ID),
    (f"https://www.youtube.com/shorts/{ID}", ID),
    (f"https://youtube.com/shorts/{ID}?feature=share", ID),
    (f"https://www.youtube.com/embed/{ID}?start=30", ID),
    (f"https://www.youtube.com/live/{ID}", ID),
    (f"https://www.youtube-nocookie.com/embed/{ID}", ID),
    (f"https://WWW.YouTube.COM/watch?v={ID}", ID),
    (f"https://www.youtube.com./watch?v={ID}", ID),
    ("https://www.youtube.com/watch?v=a-b_C1d2E3f", "a-b_C1d2E3f"),
    # not a video, or not YouTube, or hostile
    ("https://www.youtube.com/watch?v=short", None),
    (f"https://www.youtube.com/watch?v={ID}X", None),
    ("https://www.youtube.com/watch?v=dQw4w9WgX%3Cs", None),
    (f"https://www.youtube.com/watch?v={ID}%00", None),
    ("https://www.youtube.com/watch", None),
    ("https://www.youtube.com/", None),
    ("https://www.youtube.com/@RickAstleyYT", None),
    ("https://www.youtube.com/playlist?list=PLFgquLnL59alCl_2TQvOiD5Vgm1hCaGSI", None),
    (f"https://www.youtube.com/channel/{ID}", None),
    (f"https://www.youtube.com.evil.example/watch?v={ID}", None),
    (f"https://evilyoutube.com/watch?v={ID}", None),
    (f"https://youtube.com@evil.example/watch?v={ID}", None),
    (f"https://user:pass@www.youtube.com/watch?v={ID}", None),
    (f"https://evil.example/?u=https://youtu.be/{ID}", None),
    (f"https://evil.example/youtu.be/{ID}", None),
    (f"https://youtu.be/{ID}/extra", None),
    (f"https://youtu.be/../{ID}", None),
    ("https://youtu.be/dQw4w\nw9WgXcQ", None),
    (f"https://you\ttu.be/{ID}", None),
    (f"ftp://youtu.be/{ID}", None),
    (f"javascript://youtu.be/{ID}", None),
    (f"file:///youtu.be/{ID}", None),
    (f"https://www.youtube.com:8443/watch?v={ID}", None),
    ("https://www.youtube.com:99999/watch?v=" + ID, None),
    ("https://[::1/watch?v=" + ID, None),
    ("https://www.youtube.com/watch?v=dQw4w9WgXc\u0661", None),  # an Arabic-Indic digit is not an id character
    ("https://youtu.be/" + "a" * 5000, None),
    ("", None),
    ("   ", None),
])
def test_video_id_table(url, expected):
    assert youtube_video_id(url) == expected


def test_video_id_of_non_strings_is_none():
    assert youtube_video_id(None) is None  # type: ignore[arg-type]
    assert youtube_video_id(b"https://youtu.be/dQw4w9WgXcQ") is None  # type: ignore[arg-type]


# --- timestamps and links ----------------------------------------------------------------------------------

@pytest.mark.parametrize("seconds, text", [(0, "0:00"), (5, "0:05"), (83, "1:23"), (599, "9:59"), (600, "10:00"),
                                           (3599, "59:59"), (3600, "1:00:00"), (3723, "1:02:03"),
                                           (36000, "10:00:00"), (-4, "0:00")])
def test_format_timestamp(seconds, text):
    assert format_timestamp(seconds) == text
    if seconds >= 0:
        assert timestamp_seconds(f"Some video > {text}") == seconds


@pytest.mark.parametrize("path, seconds", [
    ("Title > 1:23", 83), ("1:23", 83), ("Title > 1:02:03", 3723), ("A > B > 0:00", 0), ("T >  12:05 ", 725),
    (None, None), ("", None), ("Title", None), ("Title > Intro", None), ("Title > 1:2", None), ("T > 1:60", None),
    ("T > 1:02:60", None), ("T > 1:23 > more", None), ("T > :23", None), ("T > 1:23s", None),
    ("T > ١:٢٣", None), ("Talk at 1:23", None),
])
def test_timestamp_seconds(path, seconds):
    assert timestamp_seconds(path) == seconds


def test_video_link():
    assert video_link(f"https://youtu.be/{ID}", 83) == f"https://www.youtube.com/watch?v={ID}&t=83s"
    assert video_link(f"https://www.youtube.com/watch?v={ID}&t=5s&list=L", 0) == \
        f"https://www.youtube.com/watch?v={ID}&t=0s"
    assert video_link(f"https://www.youtube.com/shorts/{ID}", -3) == f"https://www.youtube.com/watch?v={ID}&t=0s"
    assert video_link("https://example.com/page", 83) == "https://example.com/page"


# --- sections ----------------------------------------------------------------------------------------------

def speech(seconds: int, step: float = 4.5) -> list[Segment]:
    """A transcript line every `step` seconds up to `seconds`, each naming its own start."""
    out, t, n = [], 0.0, 0
    while t < seconds:
        out.append(Segment(t, f"line{n} said at {t:.1f} seconds"))
        t, n = t + step, n + 1
    return out


def test_sections_are_about_a_minute_and_never_split_a_line():
    segments = speech(250)
    sections = transcript_sections(segments)
    starts = [start for start, _ in sections]
    assert starts[0] == 0
    assert all(b - a >= 60 for a, b in itertools.pairwise(starts))
    assert all(b - a < 65 for a, b in itertools.pairwise(starts))  # the next line after a minute
    joined = " ".join(text for _, text in sections)
    assert joined == " ".join(s.text for s in segments)
    for start, text in sections:
        first = float(re.match(r"line\d+ said at ([\d.]+)", text).group(1))
        assert int(first) == start


def test_every_chunk_names_its_start_time(tmp_path):
    segments = speech(4000, step=7.0)  # past the hour: h:mm:ss headings too
    body, starts = transcript_markdown("A talk > about #things", VIDEO, "Some Channel", segments)
    chunks = chunk_text(body, ChunkingOptions(strategy="markdown", chunk_size=60, overlap=10))
    times = [timestamp_seconds(c.section_path) for c in chunks]
    head, rest = times[0], times[1:]
    assert head is None  # the title and channel line name no time
    assert all(t is not None for t in rest)
    assert sorted(set(rest)) == starts
    assert "## 1:00:" in body and "## 0:00" in body
    for chunk, start in zip(chunks[1:], rest, strict=True):
        said = [float(x) for x in re.findall(r"said at ([\d.]+) seconds", chunk.text)]
        assert said and all(start <= s < start + 70 for s in said)


@pytest.mark.parametrize("title", ["1:23", "Intro > 2:05", "#1 > 3:00:00"])
def test_a_title_that_looks_like_a_time_names_no_time(title):
    body, _ = transcript_markdown(title, VIDEO, None, speech(30))
    chunks = chunk_text(body, ChunkingOptions(strategy="markdown"))
    assert timestamp_seconds(chunks[0].section_path) is None
    assert [timestamp_seconds(c.section_path) for c in chunks[1:]] == [0]


def test_transcript_text_cannot_open_a_heading():
    body, starts = transcript_markdown("T", VIDEO, None, [Segment(0, "# not a heading"), Segment(61, "## nor this")])
    chunks = chunk_text(body, ChunkingOptions(strategy="markdown"))
    assert starts == [0, 61]
    assert [timestamp_seconds(c.section_path) for c in chunks[1:]] == [0, 61]
    assert "\\# not a heading" in body


# --- fetching ----------------------------------------------------------------------------------------------

def test_fetch_a_video():
    youtube = FakeYouTube()
    got = youtube.fetch(f"https://www.youtube.com/watch?v={VIDEO}&t=12s&utm_source=x")
    assert (got.source_type, got.ext, got.source_id) == ("Video", "md", VIDEO)
    assert got.url == got.canonical_url == f"https://www.youtube.com/watch?v={VIDEO}"
    assert got.title == OEMBED_TITLE  # oEmbed wins over the watch page
    assert got.author == "Rick Astley"
    assert got.site_name == "YouTube"
    assert got.extra["duration"] == 316  # the player's lengthSeconds
    assert got.extra["segments"] == [0]
    assert got.extra["language"] == "en" and got.extra["generated_captions"] is False
    assert got.extra["channel_url"] == "https://www.youtube.com/@RickAstleyYT"
    assert got.body.splitlines()[:5] == [f"# {OEMBED_TITLE}", "", f"Rick Astley · https://www.youtube.com/watch?v={VIDEO}",
                                         "", "## 0:00"]
    # the recorded transcript, with the library's tag stripping (`<i>not</i>`) and its empty line skipped
    assert "Hey, this is just a test this is not the original transcript just something shorter, I made up for " \
           "testing" in got.body
    assert youtube.paths() == ["GET /watch", "POST /youtubei/v1/player", "GET /api/timedtext", "GET /oembed"]
    oembed = youtube.requests[-1].url
    assert oembed.params["url"] == f"https://www.youtube.com/watch?v={VIDEO}" and oembed.params["format"] == "json"
    assert youtube.requests[1].url.params["key"] == "AIzaSyAO_FJ2SlqU8Q4STEHLGCilw_Y9_11qcW8"


@pytest.mark.parametrize("languages, lang", [(("de", "en"), "de"), (("xx", "en"), "en"), ("es", "es"), ((), "en")])
def test_languages_in_order_of_preference(languages, lang):
    youtube = FakeYouTube()
    youtube.fetch(languages=languages)
    timedtext = [r for r in youtube.requests if r.url.path == "/api/timedtext"]
    assert [r.url.params["lang"] for r in timedtext] == [lang]


@pytest.mark.parametrize("oembed", [
    httpx.Response(404, text="Not Found"),
    httpx.Response(401, text="Unauthorized"),
    httpx.Response(200, text="<html>not json</html>"),
    httpx.Response(200, json=["not", "an", "object"]),
    httpx.Response(200, json={"title": "   "}),
])
def test_title_falls_back_to_the_watch_page(oembed):
    got = FakeYouTube(oembed=oembed).fetch()
    assert got.title == WATCH_TITLE
    assert got.author == "Dave2D"
    assert got.body.startswith(f"# {WATCH_TITLE}\n\nDave2D · https://www.youtube.com/watch?v={VIDEO}\n")


def test_title_falls_back_when_oembed_cannot_connect():
    youtube = FakeYouTube()

    def handler(request):
        if request.url.path == "/oembed":
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return youtube(request)

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        got = fetch_youtube(f"https://youtu.be/{VIDEO}", client)
    assert got.title == WATCH_TITLE


def test_no_title_at_all_is_not_an_error():
    # The real watch page with its title, og:title and channel name cut out.
    html = recorded("youtube.html.static").decode("utf-8")
    html = re.sub(r'<meta name="title"[^>]*>|<meta property="og:title"[^>]*>|<title>[^<]*</title>', "", html)
    html = html.replace('"ownerChannelName"', '"ownerChannelRemoved"')
    got = FakeYouTube(oembed=httpx.Response(404), watch=httpx.Response(200, text=html)).fetch()
    assert got.title is None and got.author is None
    assert got.body.startswith(f"# YouTube video {VIDEO}\n\nhttps://www.youtube.com/watch?v={VIDEO}\n\n## 0:00")


def test_consent_page_is_accepted_with_the_cookie_it_asks_for():
    youtube = FakeYouTube(watch=[page("youtube_consent_page.html.static"), page("youtube.html.static")])
    got = youtube.fetch()
    assert got.title == OEMBED_TITLE
    assert youtube.paths()[:2] == ["GET /watch", "GET /watch"]
    assert "cookie" not in youtube.requests[0].headers
    for request in youtube.requests[1:4]:  # the library's requests carry its consent cookie, through httpx
        assert request.headers["cookie"] == "CONSENT=YES+cb.20210328-17-p0.de+FX+119"


def too_many() -> httpx.Response:
    return httpx.Response(429, text="Too Many Requests")


@pytest.mark.parametrize("answers, kwargs, reason", [
    ({"youtubei__v1__player": json_answer("youtube_transcripts_disabled.innertube.json.static")}, {},
     "no transcript for this video"),
    ({}, {"languages": ("cz",)}, "no transcript for this video"),
    ({"api__timedtext": httpx.Response(200, text='<?xml version="1.0"?><transcript></transcript>')}, {},
     "no transcript for this video"),
    ({"youtubei__v1__player": json_answer("youtube_video_unavailable.innertube.json.static")}, {},
     "video unavailable (removed, private or a wrong id)"),
    ({"youtubei__v1__player": json_answer("youtube_age_restricted.innertube.json.static")}, {},
     "video is age-restricted (its transcript needs a signed-in session)"),
    ({"watch": [page("youtube_consent_page.html.static"), page("youtube_consent_page.html.static")]}, {},
     "YouTube showed a cookie consent page that could not be accepted"),
    ({"watch": page("youtube_consent_page_invalid.html.static")}, {},
     "YouTube showed a cookie consent page that could not be accepted"),
    ({"watch": page("youtube_too_many_requests.html.static")}, {}, BLOCKED),
    ({"youtubei__v1__player": json_answer("youtube_request_blocked.innertube.json.static")}, {}, BLOCKED),
    ({"watch": too_many()}, {}, BLOCKED),
    ({"api__timedtext": too_many()}, {}, BLOCKED),
    ({"youtubei__v1__player": json_answer("youtube_po_token_required.innertube.json.static")}, {},
     "YouTube requires a PO token for this video's transcript"),
    ({"youtubei__v1__player": json_answer("youtube_unplayable.innertube.json.static")}, {},
     "video is unplayable: Custom Reason"),
    ({"youtubei__v1__player": httpx.Response(500, text="oops")}, {}, "HTTP 500 from YouTube"),
    ({"watch": httpx.Response(404, text="gone")}, {}, "HTTP 404 from YouTube"),
    ({"youtubei__v1__player": httpx.Response(200, text="<html>not json</html>")}, {}, UNREADABLE),
    ({"youtubei__v1__player": httpx.Response(200, json={"captions": {"playerCaptionsTracklistRenderer": {
        "captionTracks": [{"baseUrl": 5}]}}})}, {}, UNREADABLE),
    ({"api__timedtext": httpx.Response(200, text="<html><body>captcha")}, {}, UNREADABLE),
    ({"api__timedtext": httpx.Response(200, text='<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaa">]>'
                                                 "<transcript><text start='0'>&a;</text></transcript>")}, {},
     UNREADABLE),
], ids=["transcripts-disabled", "no-such-language", "empty-transcript", "unavailable", "age-restricted",
        "consent-twice", "consent-invalid", "captcha-page", "not-a-bot", "429-watch", "429-timedtext", "po-token",
        "unplayable", "player-500", "watch-404", "player-html", "player-wrong-shape", "timedtext-html",
        "timedtext-entities"])
def test_each_refusal_is_one_clear_line(answers, kwargs, reason):
    youtube = FakeYouTube(**answers)
    with pytest.raises(SourceError) as caught:
        youtube.fetch(**kwargs)
    assert str(caught.value) == reason
    assert "\n" not in str(caught.value)
    assert "/oembed" not in [r.url.path for r in youtube.requests]  # no title work for a failed video


@pytest.mark.parametrize("url", ["https://www.youtube.com/watch?v=short", "https://example.com/watch?v=" + ID,
                                 f"https://www.youtube.com/channel/{ID}", "not a url"])
def test_invalid_video_url_makes_no_request(url):
    youtube = FakeYouTube()
    with pytest.raises(SourceError, match=r"^not a YouTube video URL$"):
        youtube.fetch(url)
    assert youtube.requests == []


@pytest.mark.parametrize("error, reason", [
    (httpx.ConnectError("[Errno -2] Name or service not known"), "DNS lookup failed for www.youtube.com"),
    (httpx.ConnectError("[Errno 111] Connection refused"), "connection refused by www.youtube.com"),
    (httpx.ConnectTimeout("timed out"), "could not connect to www.youtube.com in time"),
    (httpx.ReadTimeout("timed out"), "www.youtube.com sent no data in time (read timeout)"),
    (httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
     "TLS error with www.youtube.com ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed)"),
])
def test_transport_failures_are_reasons(error, reason):
    def handler(request):
        error.request = request
        raise error

    with httpx.Client(transport=httpx.MockTransport(handler)) as client, pytest.raises(SourceError) as caught:
        fetch_youtube(f"https://youtu.be/{VIDEO}", client)
    assert str(caught.value) == reason


def test_an_oversized_page_is_refused_while_streaming():
    youtube = FakeYouTube()
    with pytest.raises(SourceError, match=r"^response over the 0\.5 MB cap"):
        youtube.fetch(max_bytes=512 * 1024)  # the recorded watch page is about 1 MB
    assert youtube.paths() == ["GET /watch"]


@pytest.mark.parametrize("client_follows", [True, False])
def test_redirects_stay_inside_the_client(client_follows):
    # Followed by httpx when the client does, else by requests, which sends the next hop through the adapter.
    youtube = FakeYouTube()

    def handler(request):
        if request.url.path == "/watch" and "hop" not in request.url.params:
            return httpx.Response(302, headers={"location": f"https://www.youtube.com/watch?v={VIDEO}&hop=1"})
        return youtube(request)

    with httpx.Client(transport=httpx.MockTransport(handler), follow_redirects=client_follows) as client:
        got = fetch_youtube(f"https://youtu.be/{VIDEO}", client)
    assert got.title == OEMBED_TITLE
    assert youtube.requests[0].url.params["hop"] == "1"


def test_the_guard_against_other_doors_is_armed():
    with pytest.raises(AssertionError, match="outside the httpx client"):
        requests.get("https://www.youtube.com/", timeout=1)
    with pytest.raises(AssertionError, match="outside the httpx client"):
        socket.create_connection(("127.0.0.1", 9))


# --- through kb.ingest ---------------------------------------------------------------------------------------


def test_a_video_ingested_is_found_with_a_link_at_its_time(tmp_path, hashing_embedder):
    import ragstead

    youtube = FakeYouTube()
    (tmp_path / "kb").mkdir()
    with ragstead.open(tmp_path, embedder=hashing_embedder, owner="ana", auto_tags=False) as kb:
        result = kb.ingest([f"https://youtu.be/{VIDEO}?si=share"], transport=httpx.MockTransport(youtube)).results[0]
        assert result.line == "added", result.to_dict()
        assert result.file_path.startswith("kb/users/ana/ingested/Video/") and VIDEO in result.file_path
        hit = kb.search("something shorter I made up for testing", user="ana").hits[0]
        assert hit.source_url == f"https://www.youtube.com/watch?v={VIDEO}" and hit.source["type"] == "Video"
        assert hit.video_time == 0 and hit.link == f"https://www.youtube.com/watch?v={VIDEO}&t=0s"
        cited = kb.ask("something shorter I made up for testing", user="ana", extractive=True, min_similarity=-1)
        assert cited.citations[0].locator["link"] == hit.link
        asked = len(youtube.requests)
        again = kb.ingest([f"https://www.youtube.com/watch?v={VIDEO}&feature=share"],
                          transport=httpx.MockTransport(youtube)).results[0]
        assert again.line == "duplicate" and len(youtube.requests) == asked  # no network


def test_a_video_without_transcript_fails_alone(tmp_path, hashing_embedder):
    import ragstead

    youtube = FakeYouTube(**{"youtubei__v1__player": json_answer("youtube_transcripts_disabled.innertube.json.static")})
    with ragstead.open(tmp_path, embedder=hashing_embedder, auto_tags=False) as kb:
        result = kb.ingest([f"https://youtu.be/{VIDEO}"], transport=httpx.MockTransport(youtube)).results[0]
        assert result.line.startswith("failed: ") and "transcript" in result.line
        assert not (tmp_path / "kb").exists() or not list((tmp_path / "kb").rglob("*.md"))
