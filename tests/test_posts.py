"""Tweets / X posts: the id table, the syndication token (checked against V8), and fetching through the
client seam with recorded syndication answers (tests/data/tweets, see SOURCE.md)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragstead.ingest.base import SourceError
from ragstead.ingest.posts import (
    NOT_FOUND,
    SYNDICATION_URL,
    fetch_post,
    post_id,
    post_text,
    post_url,
    syndication_token,
)

DATA = Path(__file__).parent / "data" / "tweets"
QUOTE = "1641895049427550208"  # Matt Carroll quoting sammy's post
PHOTO = "1641086480675225601"  # sammy: a link and a photo
CARD = "1629262255744503809"  # Matt Carroll: mentions, a link, a link card


def recorded(name: str) -> bytes:
    return (DATA / name).read_bytes()


class FakeSyndication:
    """The syndication endpoint: one answer per post id; every request kept; nothing else reachable."""

    def __init__(self, answers: dict[str, httpx.Response]) -> None:
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        assert str(request.url).startswith(SYNDICATION_URL + "?"), f"unexpected request to {request.url}"
        return self.answers[request.url.params["id"]]

    def fetch(self, url: str, **kwargs):
        with httpx.Client(transport=httpx.MockTransport(self)) as client:
            return fetch_post(url, client, **kwargs)


def answer(name: str) -> httpx.Response:
    return httpx.Response(200, content=recorded(name), headers={"content-type": "application/json"})


@pytest.fixture(autouse=True)
def no_sockets(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a request tried to leave outside the httpx client")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


# --- post ids ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, expected", [
    (f"https://twitter.com/mattcarrollcode/status/{QUOTE}", QUOTE),
    (f"https://x.com/mattcarrollcode/status/{QUOTE}", QUOTE),
    (f"https://www.x.com/mattcarrollcode/status/{QUOTE}?s=20&t=abc", QUOTE),
    (f"https://mobile.twitter.com/mattcarrollcode/status/{QUOTE}", QUOTE),
    (f"https://twitter.com/mattcarrollcode/statuses/{QUOTE}", QUOTE),
    (f"https://twitter.com/SamuelSusla/status/{PHOTO}/photo/1", PHOTO),
    (f"https://twitter.com/i/web/status/{QUOTE}", QUOTE),
    (f"https://x.com/i/status/{QUOTE}", QUOTE),
    (f"http://twitter.com/a_b/status/{QUOTE}/", QUOTE),
    (f"x.com/mattcarrollcode/status/{QUOTE}#frag", QUOTE),
    ("https://twitter.com/jack/status/20", "20"),
    (f"https://TWITTER.com/mattcarrollcode/status/{QUOTE}", QUOTE),
    # not a post, or hostile
    ("https://twitter.com/mattcarrollcode", None),
    ("https://twitter.com/mattcarrollcode/status/", None),
    ("https://twitter.com/mattcarrollcode/status/123abc", None),
    ("https://twitter.com/mattcarrollcode/status/0123", None),
    ("https://twitter.com/mattcarrollcode/status/-5", None),
    ("https://twitter.com/mattcarrollcode/status/１２３", None),  # full-width digits are not digits here
    ("https://twitter.com/mattcarrollcode/status/" + "9" * 30, None),
    (f"https://twitter.com/this_handle_is_too_long/status/{QUOTE}", None),
    (f"https://twitter.com/bad.handle/status/{QUOTE}", None),
    (f"https://twitter.com.evil.example/a/status/{QUOTE}", None),
    (f"https://evil.example/twitter.com/a/status/{QUOTE}", None),
    (f"https://twitter.com@evil.example/a/status/{QUOTE}", None),
    (f"https://fxtwitter.com/a/status/{QUOTE}", None),
    (f"ftp://twitter.com/a/status/{QUOTE}", None),
    (f"https://twitter.com:8080/a/status/{QUOTE}", None),
    (f"https://twitter.com/a/status/{QUOTE[:5]}\n{QUOTE[5:]}", None),
    (f"https://twitter.com/a/likes/{QUOTE}", None),
    ("", None),
])
def test_post_id_table(url, expected):
    assert post_id(url) == expected


# Computed by Node.js 20 (V8) with react-tweet's getToken; see tests/data/tweets/SOURCE.md.
@pytest.mark.parametrize("identifier, token", [
    ("20", "6dq1a2xwd93"),
    ("1", "bhi2ay3f28n"),
    (PHOTO, "3z7miaszni8"),
    (QUOTE, "3za5ye2w3ov"),
    (CARD, "3y6h7x4gn61"),
    ("2023357708301455483", "4wkkd5uwebk"),
    ("1703436713362870723", "44ni5iyte19"),
    ("1629307668568633344", "3y6mctgwzxo"),
])
def test_token_matches_javascript(identifier, token):
    assert syndication_token(identifier) == token


def test_post_url():
    assert post_url(QUOTE) == f"https://twitter.com/i/status/{QUOTE}"
    assert post_url(QUOTE, "mattcarrollcode") == f"https://twitter.com/mattcarrollcode/status/{QUOTE}"


# --- fetching ----------------------------------------------------------------------------------------------

def test_fetch_a_post_with_its_quoted_post():
    endpoint = FakeSyndication({QUOTE: answer(f"tweet_{QUOTE}.json")})
    got = endpoint.fetch(f"https://x.com/mattcarrollcode/status/{QUOTE}?s=20")
    assert (got.source_type, got.ext, got.source_id) == ("Post", "md", QUOTE)
    assert got.url == f"https://twitter.com/i/status/{QUOTE}"
    assert got.canonical_url == f"https://twitter.com/mattcarrollcode/status/{QUOTE}"
    assert got.author == "Matt Carroll (@mattcarrollcode)"
    assert got.published_at == "2023-03-31T20:07:39+00:00"
    assert got.title.startswith("Matt Carroll (@mattcarrollcode): #ReactNative's new architecture renderer")
    assert got.title.endswith("…") and len(got.title) < 120
    assert got.extra == {"handle": "mattcarrollcode", "lang": "en", "quoted": PHOTO}
    body = got.body
    assert body.startswith("# Matt Carroll (@mattcarrollcode)\n\n#ReactNative's new architecture")
    assert f"https://twitter.com/mattcarrollcode/status/{QUOTE}" in body
    # the quoted post, as thread text, with its link expanded and its photo link gone
    quoted = body.split("## Quoting sammy (@SamuelSusla)\n\n", 1)[1]
    assert quoted.startswith("If you are interested about View Flattening in React Native, I wrote a short post "
                             "about it: https://github.com/reactwg/react-native-new-architecture/discussions/110")
    assert "t.co/" not in body
    (request,) = endpoint.requests
    assert request.url.params["id"] == QUOTE and request.url.params["token"] == "3za5ye2w3ov"


def test_links_are_expanded_and_photos_listed():
    got = FakeSyndication({PHOTO: answer(f"tweet_{PHOTO}.json")}).fetch(
        f"https://twitter.com/SamuelSusla/status/{PHOTO}/photo/1")
    assert got.body == (
        "# sammy (@SamuelSusla)\n\n"
        "If you are interested about View Flattening in React Native, I wrote a short post about it: "
        "https://github.com/reactwg/react-native-new-architecture/discussions/110\n\nLet me know what you think!\n\n"
        f"https://twitter.com/SamuelSusla/status/{PHOTO}\n")
    assert "rQd6FIwZ0U" not in got.body
    assert got.extra["media"] == ["https://pbs.twimg.com/media/FsZNOgcWAAEQtrd.jpg"]
    assert got.author == "sammy (@SamuelSusla)"


def test_mentions_and_card_post():
    got = FakeSyndication({CARD: answer(f"tweet_{CARD}.json")}).fetch(f"https://twitter.com/i/web/status/{CARD}")
    assert "📰 I recently joined @reactjs! My inaugural project was porting @sophiebits's Tic Tac Toe tutorial" \
        in got.body
    assert got.body.count("https://beta.reactjs.org/learn/tutorial-tic-tac-toe") == 1
    assert got.published_at == "2023-02-24T23:29:26+00:00"
    assert got.canonical_url == f"https://twitter.com/mattcarrollcode/status/{CARD}"


def test_reply_carries_its_parent_as_thread_text():
    got = FakeSyndication({QUOTE: answer("reply_constructed.json")}).fetch(f"https://x.com/i/status/{QUOTE}")
    assert got.extra["in_reply_to"] == PHOTO
    assert "quoted" not in got.extra
    parent = got.body.split("## In reply to sammy (@SamuelSusla)\n\n", 1)[1]
    assert parent.startswith("If you are interested about View Flattening in React Native")
    assert "## Quoting" not in got.body


@pytest.mark.parametrize("response", [
    httpx.Response(404, text=""),
    httpx.Response(404, json={"error": "not found"}),
    answer("tombstone.json"),
    httpx.Response(200, content=b""),
    httpx.Response(200, content=b"   \n"),
    httpx.Response(200, json={}),
    httpx.Response(200, json={"__typename": "TweetTombstone"}),
    httpx.Response(200, json={"tombstone": {"text": {"text": "These posts are protected."}}}),
    httpx.Response(200, json={"__typename": "Tweet", "user": {"name": "x"}}),
], ids=["404", "404-json", "tombstone-recorded", "empty", "blank", "empty-object", "bare-tombstone",
        "protected", "no-text"])
def test_missing_posts_are_not_found(response):
    with pytest.raises(SourceError) as caught:
        FakeSyndication({QUOTE: response}).fetch(f"https://x.com/a/status/{QUOTE}")
    assert str(caught.value) == NOT_FOUND == "post not found (deleted or protected)"


@pytest.mark.parametrize("response, reason", [
    (httpx.Response(429, text="slow down"), "X refused the request (HTTP 429, rate limited); try later"),
    (httpx.Response(500, text="oops"), "HTTP 500"),
    (httpx.Response(403, text="no"), "HTTP 403"),
    (httpx.Response(200, text="<html>maintenance</html>"),
     "the embed endpoint answered with something that is not JSON"),
])
def test_other_failures_are_one_line(response, reason):
    with pytest.raises(SourceError) as caught:
        FakeSyndication({QUOTE: response}).fetch(f"https://x.com/a/status/{QUOTE}")
    assert str(caught.value) == reason


def test_transport_failure_is_a_reason():
    def handler(request):
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    with httpx.Client(transport=httpx.MockTransport(handler)) as client, pytest.raises(SourceError) as caught:
        fetch_post(f"https://x.com/a/status/{QUOTE}", client)
    assert str(caught.value) == "DNS lookup failed for cdn.syndication.twimg.com"


def test_oversized_answer_is_refused():
    big = httpx.Response(200, content=b'{"text": "' + b"a" * 300_000 + b'"}')
    with pytest.raises(SourceError, match=r"^response over the"):
        FakeSyndication({QUOTE: big}).fetch(f"https://x.com/a/status/{QUOTE}", max_bytes=100_000)


@pytest.mark.parametrize("url", ["https://x.com/a", "https://example.com/a/status/1", "nonsense"])
def test_not_a_post_url_makes_no_request(url):
    endpoint = FakeSyndication({})
    with pytest.raises(SourceError, match=r"^not a tweet / X post URL$"):
        endpoint.fetch(url)
    assert endpoint.requests == []


def test_text_escapes_and_headings():
    post = {"id_str": "5", "text": "# Big news &amp; more &lt;3\nsecond line https://t.co/x",
            "entities": {"urls": [{"url": "https://t.co/x", "expanded_url": "https://example.com/a"}]},
            "user": {"name": "A  B", "screen_name": "ab"}, "created_at": "Sat Feb 23 03:40:21 +0000 2013"}
    assert post_text(post) == "# Big news & more <3\nsecond line https://example.com/a"
    endpoint = FakeSyndication({"5": httpx.Response(200, content=json.dumps(post).encode())})
    got = endpoint.fetch("https://twitter.com/ab/status/5")
    assert "\n\\# Big news & more <3\n" in got.body  # a post line never becomes a heading of the archive
    assert got.published_at == "2013-02-23T03:40:21+00:00"
    assert got.author == "A B (@ab)"


def test_entities_of_the_wrong_shape_are_ignored():
    # One public recording has `"urls": {}` instead of a list; hostile answers may have anything.
    for entities in ({"urls": {}}, {"urls": [1, "x", None]}, "nope", None, {"media": [{"url": None}]}):
        assert post_text({"text": "plain https://t.co/y", "entities": entities}) == "plain https://t.co/y"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25)
post_keys = st.sampled_from(["text", "full_text", "id_str", "user", "entities", "parent", "quoted_tweet",
                             "mediaDetails", "created_at", "lang", "__typename", "in_reply_to_status_id_str"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(post_keys, json_values, max_size=8) | json_values)
def test_any_json_answer_is_a_post_or_a_reason(data):
    endpoint = FakeSyndication({QUOTE: httpx.Response(200, content=json.dumps(data).encode())})
    try:
        got = endpoint.fetch(f"https://x.com/a/status/{QUOTE}")
    except SourceError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert got.source_id == QUOTE and isinstance(got.body, str) and got.title


@pytest.mark.parametrize("module", ["youtube", "posts"])
def test_fetchers_stand_on_base_and_errors_only(module):
    """The fetchers are low level: besides httpx, requests and the transcript library they import only
    ragstead.ingest.base and ragstead.errors (no store, index, embedder, config or knowledge base)."""
    import ast

    source = Path(__file__).resolve().parents[1] / "src" / "ragstead" / "ingest" / f"{module}.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    top_level = {name.split(".")[0] for name in imported} - {"ragstead", "__future__"}
    assert {name for name in imported if name.startswith("ragstead")} <= {"ragstead.ingest.base", "ragstead.errors",
                                                                         "ragstead.documents.sources"}
    assert top_level <= {"httpx", "requests", "youtube_transcript_api", "html", "json", "math", "re",
                           "collections", "dataclasses", "datetime", "typing", "urllib"}


def test_a_post_ingested_twice_under_x_and_twitter_is_one_document(tmp_path, hashing_embedder):
    import ragstead

    endpoint = FakeSyndication({QUOTE: answer(f"tweet_{QUOTE}.json")})
    with ragstead.open(tmp_path, embedder=hashing_embedder, owner="ana", auto_tags=False) as kb:
        first = kb.ingest([f"https://x.com/mattcarrollcode/status/{QUOTE}?s=20"],
                          transport=httpx.MockTransport(endpoint)).results[0]
        assert first.line == "added" and "/ingested/Post/" in first.file_path
        again = kb.ingest([f"https://twitter.com/mattcarrollcode/status/{QUOTE}"],
                          transport=httpx.MockTransport(endpoint)).results[0]
        assert again.line == "duplicate" and len(endpoint.requests) == 1
        hit = kb.search("React Native new architecture renderer", user="ana").hits[0]
        assert hit.source["type"] == "Post" and hit.source["author"] == "Matt Carroll (@mattcarrollcode)"
        assert hit.link == f"https://twitter.com/mattcarrollcode/status/{QUOTE}"
