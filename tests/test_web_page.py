"""The web page at `/` in a real headless Chromium (Debian's `chromium` package, driven by Playwright; Playwright
never downloads a browser of its own), against the real HTTP API served by uvicorn on 127.0.0.1.

Search, ask, open a citation; a hostile document renders as text; one user's key never shows another's
documents; API errors are readable lines; every asset comes from the server itself. Screenshots are saved
under artifacts/test-screenshots/ (a test artifact; CI keeps the folder)."""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn
from playwright.sync_api import BrowserContext, Page, expect, sync_playwright

from helpers.project import write_files
from ragstead import Embedder
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase

REPO = Path(__file__).resolve().parents[1]
SCREENSHOTS = REPO / "artifacts" / "test-screenshots"
pytestmark = pytest.mark.chromium

CHROMIUM = os.environ.get("RAGSTEAD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOSTILE = "The heron ledger note <script>alert(1)</script> and <img src=x onerror=alert(2)> stays plain text."
FILES = {
    # Small chunks, so a citation opens with neighbours around it.
    "ragstead.toml": "[ragstead]\nroots = [\"kb\", \"docs\"]\nchunk_size = 40\noverlap = 0\n",
    "kb/users/alice/billing.md": (
        "# Billing decision\n\nThe team met in February to review the billing platform and its ledger. "
        "Costs had grown every quarter and the old MySQL server reaches end of life this year. "
        "Several options were compared over two weeks of tests and load runs.\n\n"
        "We decided to migrate the billing database to PostgreSQL 16 in March, with the ledger first. "
        "The migration runs over a weekend and the invoices move last.\n\n"
        "Rollback stays possible for a month: the MySQL server is kept read-only until April, then retired. "
        "Finance signs off on the invoice totals before the switch."),
    "kb/users/alice/heron.md": f"# Heron ledger\n\n{HOSTILE}",
    "kb/users/bob/kestrel.md": "# Kestrel budget\n\nBob's kestrel budget is 4711 euros for the spring count.",
    "docs/faq.md": "# FAQ\n\nThe public FAQ explains how to install the billing client.",
}


@dataclass
class Served:
    base: str
    keys: dict[str, str]
    root: Path
    kb: KnowledgeBase


class ThreadServer:
    """uvicorn serving an app on a free 127.0.0.1 port, on a thread of this process."""

    def __init__(self, app: object) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder) -> Iterator[tuple[Path, dict[str, str]]]:
    # The real model: `ask`'s relevance gate is calibrated on it (a hashing embedder would refuse everything).
    root = tmp_path_factory.mktemp("web")
    write_files(root, FILES)
    with KnowledgeBase(load_settings(root), embedder=real_embedder) as kb:
        kb.index()
        keys = KeyFile(kb.api_keys_file)
        tokens = {"alice": keys.add("alice")[0], "bob": keys.add("bob")[0]}
    yield root, tokens


def _kb(root: Path, embedder: Embedder) -> KnowledgeBase:
    # The extractive answerer only: the page's tests never reach an LLM, whatever the environment holds.
    return KnowledgeBase(load_settings(root), embedder=embedder, providers=[ExtractiveAnswerer()])


@pytest.fixture(scope="module")
def served(project, real_embedder) -> Iterator[Served]:
    root, keys = project
    kb = _kb(root, real_embedder)
    with ThreadServer(create_app(kb, ApiConfig())) as base:
        yield Served(base, keys, root, kb)


@pytest.fixture(scope="module")
def strict_server(project, real_embedder) -> Iterator[str]:
    """A second server over the same project with tiny limits: 3 requests a minute, 2 KB uploads."""
    root, _ = project
    limits = ApiConfig(rate_per_minute=3, burst=0, max_upload_bytes=2000)
    with ThreadServer(create_app(_kb(root, real_embedder), limits)) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[BrowserContext]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: install Debian's package (`apt-get install -y chromium`, as "
                    ".ci/run does) or point RAGSTEAD_CHROMIUM at one")
    with sync_playwright() as playwright, tempfile.TemporaryDirectory(prefix="ragstead-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1100, "height": 900})
        yield context
        context.close()


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    page = browser.new_page()
    page.set_default_timeout(15_000)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.dialogs = dialogs  # type: ignore[attr-defined]
    yield page
    page.close()


def sign_in(page: Page, base: str, key: str) -> None:
    page.goto(base + "/")
    page.evaluate("sessionStorage.clear()")
    page.reload()
    page.fill("#key", key)
    page.click("#key-form button")
    expect(page.locator("#app")).to_be_visible()


def run_query(page: Page, text: str, action: str = "search") -> None:
    page.fill("#q", text)
    page.click(f"#{action}-btn")


def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_search_then_ask_then_open_a_citation_in_context(page, served):
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    sign_in(page, served.base, served.keys["alice"])
    expect(page.locator("#status")).to_contain_text("Index ready: 4 documents")

    run_query(page, "billing database migration PostgreSQL")
    first = page.locator("#results-list li").first
    expect(first).to_contain_text("kb/users/alice/billing.md")
    expect(first.locator("mark").first).to_be_visible()  # the query's words are highlighted
    assert re.match(r"score \d\.\d{3} · vector", first.get_attribute("title") or "")  # scores on hover

    run_query(page, "what did we decide about the billing database", "ask")
    cite = page.locator("#answer-text button.cite").first
    expect(cite).to_be_visible()
    expect(page.locator("#answer-text")).to_contain_text("PostgreSQL 16")
    expect(page.locator("#answer-meta")).to_contain_text("Answered by extractive")
    cite.focus()
    page.keyboard.press("Enter")  # keyboard-accessible: a citation is a button
    passage = page.locator("#passage")
    expect(passage).to_be_visible()
    expect(page.locator("#passage-where")).to_contain_text("kb/users/alice/billing.md")
    focus = page.locator("#passage-chunks .chunk.focus")
    expect(focus).to_contain_text("PostgreSQL 16")
    assert page.locator("#passage-chunks .chunk").count() >= 2  # the chunk in context: its neighbours too
    screenshot(page, "web-page-ask")
    assert requests and all(url.startswith(served.base) for url in requests)  # nothing from anywhere else


def test_a_citation_highlights_the_sentence_it_quotes_and_escape_closes_it(page, served):
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "what did we decide about the billing database", "ask")
    page.locator("#answer-text button.cite").first.click()
    quote = page.locator("#passage-chunks .chunk.focus mark.quote.first")
    expect(quote).to_contain_text("We decided to migrate the billing database to PostgreSQL 16 in March")
    assert "Rollback" not in quote.inner_text()  # the quoted sentence, not the whole chunk
    expect(quote).to_be_in_viewport()
    screenshot(page, "web-page-quote")
    page.keyboard.press("Escape")
    expect(page.locator("#passage")).to_be_hidden()


def test_a_follow_up_continues_the_conversation_in_a_thread(page, served):
    sent: list[dict] = []
    page.on("request", lambda r: sent.append({"method": r.method, "url": r.url, "body": r.post_data_json
                                              if r.method == "POST" and r.url.endswith("/v1/chat") else None}))
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "what did we decide about the billing database", "ask")
    expect(page.locator("#answer-text")).to_contain_text("PostgreSQL 16")
    expect(page.locator("#answer-asked-as")).to_be_hidden()  # the first question: asked as typed
    run_query(page, "And when does the migration run?", "ask")
    expect(page.locator("#answer-meta")).to_contain_text("Answered by extractive")
    expect(page.locator("#answer-question")).to_have_text("And when does the migration run?")
    expect(page.locator("#answer-asked-as")).to_have_text("Asked as: When does the migration run? (Billing "
                                                          "decision)")
    expect(page.locator("#answer-text")).to_contain_text("weekend")
    earlier = page.locator("#thread li")
    expect(earlier).to_have_count(1)
    expect(earlier.first).to_contain_text("what did we decide about the billing database")
    earlier.first.locator("button.cite").first.click()  # an earlier turn's citations still open their source
    expect(page.locator("#passage-chunks .chunk.focus mark.quote.first")).to_contain_text("PostgreSQL 16")
    page.keyboard.press("Escape")
    chats = [r["body"] for r in sent if r["body"] is not None]
    conversation = chats[1]["conversation_id"]
    assert "conversation_id" not in chats[0] and conversation.startswith("c_")  # the second turn continues the first
    screenshot(page, "web-page-conversation")

    with page.expect_response(lambda r: r.request.method == "DELETE" and r.url.endswith(conversation)) as deleted:
        page.click("#new-conversation")
    assert deleted.value.status == 200  # forgotten on the server too
    expect(page.locator("#thread li")).to_have_count(0)
    expect(page.locator("#answer")).to_be_hidden()
    with httpx.Client(base_url=served.base) as http:
        gone = http.get(f"/v1/chat/{conversation}", headers={"Authorization": f"Bearer {served.keys['alice']}"})
    assert gone.status_code == 404

    run_query(page, "what did we decide about the billing database", "ask")
    expect(page.locator("#answer-meta")).to_contain_text("Answered by extractive")
    page.locator("#filters summary").click()
    page.select_option("#scope", "public")  # another scope: a new conversation, the old one forgotten
    with page.expect_response(lambda r: r.request.method == "DELETE"):
        run_query(page, "And the install?", "ask")
    expect(page.locator("#answer-meta")).not_to_have_text("Answering…")
    expect(page.locator("#thread li")).to_have_count(0)
    expect(page.locator("#answer-asked-as")).to_be_hidden()


def test_a_near_miss_answer_says_it_is_tentative(page, served):
    # The billing note never names a MySQL version: the gate lets the question through (it is on the note's topic)
    # at a relevance under one half, and the page says the answer is tentative; a sure answer does not.
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "What version of MySQL do we run?", "ask")
    expect(page.locator("#answer-meta")).to_contain_text("Answered by extractive. Tentative: the sources may not "
                                                         "hold this answer; check the citations.")
    run_query(page, "what did we decide about the billing database", "ask")
    expect(page.locator("#answer-meta")).to_have_text("Answered by extractive.")


def test_the_page_says_how_sure_an_answer_is(page, served):
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "What version of MySQL do we run?", "ask")
    expect(page.locator("#answer-sure")).to_have_text(re.compile(r"^Relevance 0\.\d\d: tentative\.$"))
    run_query(page, "what did we decide about the billing database", "ask")
    expect(page.locator("#answer-sure")).to_have_text(re.compile(r"^Relevance (0\.\d\d|1\.00): likely answered\.$"))


def test_a_hostile_document_renders_as_text(page, served):
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "heron ledger note")
    result = page.locator("#results-list li", has_text="kb/users/alice/heron.md")
    expect(result).to_contain_text("<script>alert(1)</script>")
    expect(result).to_contain_text("<img src=x onerror=alert(2)>")
    result.get_by_role("button", name="Show in context").click()
    expect(page.locator("#passage-chunks .chunk.focus")).to_contain_text("<script>alert(1)</script>")
    run_query(page, "what does the heron ledger note say", "ask")
    expect(page.locator("#answer-meta")).not_to_have_text("Answering…")
    assert page.locator("main script, main img, main iframe").count() == 0
    page.wait_for_timeout(300)  # an onerror handler would have fired by now
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_a_key_of_one_user_never_shows_another_users_documents(page, served):
    bob_doc = served.kb.documents(user="bob")[0]
    bob_chunk = served.kb.read(bob_doc["doc_id"], user="bob").chunks[0]["chunk_id"]
    sign_in(page, served.base, served.keys["alice"])
    page.locator("#filters summary").click()
    for scope in ("private", "public"):
        page.select_option("#scope", scope)
        run_query(page, "kestrel budget euros")
        expect(page.locator("#results")).to_be_visible()
        expect(page.locator("#results-list")).not_to_contain_text("kb/users/bob")
        expect(page.locator("#results-list")).not_to_contain_text("4711")
        run_query(page, "what is the kestrel budget", "ask")
        expect(page.locator("#answer-meta")).not_to_have_text("Answering…")
        expect(page.locator("#answer")).not_to_contain_text("4711")
    status = page.evaluate("""async (chunk) => (await fetch(`/v1/chunks/${chunk}`, {headers: {Authorization:
        `Bearer ${sessionStorage.getItem("ragstead-key")}`}})).status""", bob_chunk)
    assert status == 404  # the page's own endpoint, with alice's key: bob's chunk is not there


def test_api_errors_are_readable_lines(page, served, strict_server):
    # A key revoked while the tab is open (a wrong key typed in is refused at entry: see below).
    page.goto(served.base + "/")
    page.evaluate("sessionStorage.setItem('ragstead-key', 'rsk_not-a-key')")
    page.reload()
    expect(page.locator("#app")).to_be_visible()
    run_query(page, "billing")
    expect(page.locator("#error")).to_have_text(re.compile(r"^The API key was refused .*unknown or revoked"))

    sign_in(page, served.base, served.keys["alice"])
    page.eval_on_selector("#top-k", "input => input.removeAttribute('max')")
    page.locator("#filters summary").click()
    page.fill("#top-k", "500")
    run_query(page, "billing")
    expect(page.locator("#error")).to_have_text(re.compile(r"^The request is not valid: top_k: "))

    sign_in(page, strict_server, served.keys["alice"])
    page.set_input_files("#file", files=[{"name": "big.txt", "mimeType": "text/plain", "buffer": b"x" * 5000}])
    page.click("#upload-form button")
    expect(page.locator("#error")).to_have_text(re.compile(r"^Too large for this server: .*2000-byte limit"))
    for _ in range(4):  # 3 a minute: the 4th is refused (the refused upload never reached the key check)
        with page.expect_response(lambda response: response.url.endswith("/v1/query")):
            run_query(page, "billing")
    expect(page.locator("#error")).to_have_text(re.compile(r"^Too many requests; retry in \d+ s: "))
    assert page.locator("main").is_visible()  # never a blank page


def test_upload_a_file_then_find_it(page, served):
    sign_in(page, served.base, served.keys["alice"])
    page.set_input_files("#file", files=[{"name": "osprey.md", "mimeType": "text/markdown",
                                          "buffer": b"# Osprey\n\nThe osprey nest count reached nine."}])
    page.click("#upload-form button")
    expect(page.locator("#add-result")).to_have_text("osprey.md: added (kb/users/alice/uploads/osprey.md, 1 chunks)")
    run_query(page, "osprey nest count")
    expect(page.locator("#results-list li").first).to_contain_text("kb/users/alice/uploads/osprey.md")
    with httpx.Client(base_url=served.base) as http:  # and bob's key never sees it
        found = http.post("/v1/query", json={"query": "osprey nest count"},
                          headers={"Authorization": f"Bearer {served.keys['bob']}"}).json()
    assert all("alice" not in r["file_path"] for r in found["results"])
    page.fill("#url", "http://127.0.0.1:9/internal-page")  # the server refuses loopback URLs (no SSRF)
    page.click("#ingest-form button")
    expect(page.locator("#add-result")).to_contain_text("http://127.0.0.1:9/internal-page: failed (")


def test_light_and_dark_themes_and_a_locked_down_page(page, served):
    page.emulate_media(color_scheme="light")
    page.goto(served.base + "/")
    page.evaluate("localStorage.clear()")
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.click("#theme")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(20, 21, 23)"
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "billing database migration PostgreSQL", "ask")
    expect(page.locator("#answer-text button.cite").first).to_be_visible()
    screenshot(page, "web-page-dark")
    page.click("#theme")
    with httpx.Client(base_url=served.base) as http:
        html = http.get("/")
        assert "script-src 'self'" in html.headers["content-security-policy"]
        assert html.headers["x-content-type-options"] == "nosniff"
        for asset in ("/ui/app.js", "/ui/style.css"):
            response = http.get(asset)
            assert response.status_code == 200 and response.headers["x-content-type-options"] == "nosniff"
        assert set(http.get("/ui/missing.js").json()) == {"error"}


def test_the_endpoints_the_page_uses(served):
    alice = {"Authorization": f"Bearer {served.keys['alice']}"}
    with httpx.Client(base_url=served.base, headers=alice, timeout=30) as http:
        body = {"query": "what did we decide about the billing database", "stream": True}
        with http.stream("POST", "/v1/ask", json=body) as response:
            assert response.headers["content-type"] == "application/x-ndjson"
            lines = [json.loads(line) for line in response.iter_lines() if line]
        assert [line["type"] for line in lines] == ["text", "answer"]
        answer = lines[-1]["answer"]
        assert lines[0]["text"] == answer["answer"] and "PostgreSQL 16" in answer["answer"]
        plain = http.post("/v1/ask", json={**body, "stream": False}).json()
        assert plain["answer"] == answer["answer"]  # the same ask JSON, streamed or not
        bad = http.post("/v1/ask", json={**body, "date_from": "2025-02-30"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_query"  # before any stream
        chunk = answer["citations"][0]["locator"]["chunk_id"]
        opened = http.get(f"/v1/chunks/{chunk}", params={"around": 1}).json()
        assert opened["focus"] == chunk and opened["document"]["file_path"] == "kb/users/alice/billing.md"
        assert len(opened["chunks"]) == 3 and opened["total_chunks"] >= 3
        assert http.get(f"/v1/chunks/{chunk}", params={"around": 9}).status_code == 422
        bob = {"Authorization": f"Bearer {served.keys['bob']}"}
        missing = http.get(f"/v1/chunks/{chunk}", headers=bob)
        assert missing.status_code == 404 and missing.json()["error"]["message"] == "no such document"


def test_a_key_whose_user_owns_nothing_is_told_what_to_index(page, served):
    carol = KeyFile(served.kb.api_keys_file).add("carol")[0]
    sign_in(page, served.base, carol)
    expect(page.locator("#notice")).to_have_text(re.compile(r"^no documents are visible to user carol; index "
                                                            r"kb/users/carol/"))
    run_query(page, "kestrel budget euros")
    expect(page.locator("#results-list")).to_contain_text("Nothing found: no documents are visible to user carol")
    sign_in(page, served.base, served.keys["alice"])
    expect(page.locator("#notice")).to_be_hidden()


def test_a_wrong_key_is_refused_at_entry(page, served):
    page.goto(served.base + "/")
    page.evaluate("sessionStorage.clear()")
    page.reload()
    page.fill("#key", "rsk_not-a-key")
    page.click("#key-form button")
    expect(page.locator("#error")).to_have_text(re.compile(r"^The API key was refused .*unknown or revoked"))
    assert page.locator("#app").is_hidden() and page.evaluate("sessionStorage.getItem('ragstead-key')") is None


def test_the_banner_link_opens_the_owners_page_with_no_key_typed(page, tmp_path):
    """`ragstead serve` itself (the process is the subject): the page URL it prints carries the owner's one-time
    token; opened, the page searches with no key typed; the token is gone from the address bar."""
    import subprocess
    import sys

    from helpers.project import OFFLINE_ENV

    notes = tmp_path / "notes"
    write_files(notes, {"ragstead.toml": '[ragstead]\nowner = "sam"\nroots = ["."]\n',
                        "osprey.md": "# Osprey\n\nThe osprey nest count reached nine this spring."})
    server = subprocess.Popen([sys.executable, "-m", "ragstead", "serve", "--port", "0", "--json", "--log-level",
                               "warning", "--root", str(notes)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=OFFLINE_ENV)
    try:
        assert server.stdout is not None
        banner = json.loads(server.stdout.readline() or "{}")
        assert banner, server.stderr.read() if server.stderr else ""
        assert banner["page"].startswith(banner["url"] + "/?token=")
        with httpx.Client(base_url=banner["url"]) as http:  # index the notes through the owner's token
            token = banner["page"].split("token=")[1]
            assert http.get("/v1/documents", headers={"Authorization": f"Bearer {token}"}).status_code == 200
            assert http.get("/v1/documents", headers={"Authorization": "Bearer nope"}).status_code == 401
            upload = http.post("/v1/documents", headers={"Authorization": f"Bearer {token}"},
                               files={"file": ("heron.md", b"# Heron\n\nThe heron survey moves to May.")})
            assert upload.status_code == 201 and upload.json()["document"]["file_path"] == "uploads/heron.md"
            assert http.get("/ui/favicon.svg").headers["content-type"].startswith("image/svg+xml")
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(banner["page"])
        expect(page.locator("#app")).to_be_visible()
        assert "token" not in page.url
        run_query(page, "heron survey")
        expect(page.locator("#results-list li").first).to_contain_text("uploads/heron.md")
        assert page.evaluate("document.querySelector('link[rel=icon]').href").endswith("/ui/favicon.svg")
        # A phone's width: nothing sticks out sideways, the file picker included.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        box = page.locator("#file").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390
        screenshot(page, "web-page-390px")
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_cited_pdf_titled_untitled_is_named_by_its_file_in_the_source_panel(page, tmp_path, real_embedder):
    # A PDF whose editor left the title "Untitled": the panel names it by its file, as the citation does.
    from helpers.pdf_writer import make_pdf

    write_files(tmp_path, {"ragstead.toml": "[ragstead]\nroots = [\"kb\"]\n"})
    lease = "The lease starts on 1 April 2024.\nIt ends on 31 March 2026, with an option to extend by a year."
    (tmp_path / "kb" / "users" / "alice").mkdir(parents=True)
    (tmp_path / "kb" / "users" / "alice" / "lease.pdf").write_bytes(make_pdf([lease], title="Untitled"))
    with _kb(tmp_path, real_embedder) as kb:
        kb.index()
        key = KeyFile(kb.api_keys_file).add("alice")[0]
        with ThreadServer(create_app(kb, ApiConfig())) as base:
            sign_in(page, base, key)
            run_query(page, "When does the lease end?", "ask")
            page.locator("#answer-text button.cite").first.click()
            where = page.locator("#passage-where")
            expect(where).to_contain_text("[1] kb/users/alice/lease.pdf")
            assert "Untitled" not in where.inner_text()
            expect(page.locator("#passage-chunks .chunk.focus mark.quote.first")).to_contain_text("It ends on 31 March")


def test_a_list_answer_shows_its_files_as_cards_that_open_them(page, served):
    # "which notes mention the ledger": the answer's text names no [n]; its files are cards, each opening its note.
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "which notes mention the ledger", "ask")
    expect(page.locator("#answer-text")).to_contain_text("2 mention the ledger")
    cards = page.locator("#answer-files li")
    expect(cards).to_have_count(2)
    expect(cards.nth(0)).to_contain_text("kb/users/alice/billing.md")
    expect(cards.nth(1)).to_contain_text("kb/users/alice/heron.md")
    expect(cards.nth(1)).to_contain_text("<script>alert(1)</script>")  # the quoted sentence, as text
    expect(page.locator("#answer-meta")).to_have_text("Listed from every document in scope.")
    assert "kestrel" not in page.locator("#answer").inner_text()  # bob's notes stay out of alice's list
    screenshot(page, "web-page-list-answer")
    cards.nth(0).get_by_role("button", name="Open kb/users/alice/billing.md in context").click()
    expect(page.locator("#passage-where")).to_contain_text("kb/users/alice/billing.md")
    expect(page.locator("#passage-chunks .chunk.focus mark.quote.first")).to_contain_text("ledger")
    run_query(page, "what did we decide about the billing database", "ask")  # a plain answer: no cards
    expect(page.locator("#answer-meta")).to_contain_text("Answered by extractive")
    expect(page.locator("#answer-files")).to_be_hidden()
    expect(page.locator("#thread li").first.locator(".files li")).to_have_count(2)  # the earlier turn keeps its files


def test_a_new_search_clears_the_old_answer_above_its_results(page, served):
    sign_in(page, served.base, served.keys["alice"])
    run_query(page, "what did we decide about the billing database", "ask")
    expect(page.locator("#answer-text")).to_contain_text("PostgreSQL 16")
    page.locator("#answer-text button.cite").first.click()
    expect(page.locator("#passage")).to_be_visible()
    run_query(page, "heron ledger note")
    expect(page.locator("#results-list li").first).to_contain_text("kb/users/alice/heron.md")
    expect(page.locator("#answer")).to_be_hidden()  # the results do not read as the old question's answer
    expect(page.locator("#passage")).to_be_hidden()
    run_query(page, "And when does the migration run?", "ask")  # the conversation itself goes on
    expect(page.locator("#answer-meta")).to_contain_text("Answered by extractive")
    expect(page.locator("#thread li")).to_have_count(1)


def test_the_upload_card_names_every_type_index_reads(served):
    from ragstead.documents.loaders import LOADERS

    with httpx.Client(base_url=served.base) as http:
        html = http.get("/").text
    named = re.search(r'<span id="file-types">([^<]*)</span>', html)
    accept = re.search(r'<input id="file" type="file" accept="([^"]*)"', html)
    assert named and accept, html
    assert set(named.group(1).split(", ")) == {suffix.lstrip(".") for suffix in LOADERS}  # the loaders' registry
    assert set(accept.group(1).split(",")) == set(LOADERS)


def test_the_tags_filter_narrows_searches_and_list_answers_to_the_keys_tagged_notes(page, tmp_path, real_embedder):
    # The page's tag filter is the API's: any of the tags, in the store's filter, within the key's scope.
    write_files(tmp_path, {
        "ragstead.toml": "[ragstead]\nroots = [\"kb\", \"docs\"]\n",
        "kb/users/alice/lease.md": "---\ntags: [housing]\n---\n# Lease\n\nThe landlord raised the rent to 950 euros.",
        "kb/users/alice/standup.md": "---\ntags: [work]\n---\n# Standup\n\nThe landlord of the office called.",
        "kb/users/bob/flat.md": "---\ntags: [housing]\n---\n# Flat\n\nBob's landlord is slow to fix the sink.",
        "docs/faq.md": "---\ntags: [housing]\n---\n# FAQ\n\nA landlord must give two months' notice."})
    with _kb(tmp_path, real_embedder) as kb:
        kb.index()
        key = KeyFile(kb.api_keys_file).add("alice")[0]
        with ThreadServer(create_app(kb, ApiConfig())) as base:
            sign_in(page, base, key)
            page.locator("#filters summary").click()
            page.fill("#tags", "housing")
            run_query(page, "landlord")
            expect(page.locator("#results-list li")).to_have_count(1)
            expect(page.locator("#results-list")).to_contain_text("kb/users/alice/lease.md")
            run_query(page, "which notes mention the landlord", "ask")
            expect(page.locator("#answer-text")).to_contain_text("Examined 1 document in your scope; 1 mentions")
            expect(page.locator("#answer-files li")).to_have_count(1)
            expect(page.locator("#answer-files")).to_contain_text("kb/users/alice/lease.md")
            page.fill("#tags", "housing, work")
            run_query(page, "which notes mention the landlord", "ask")
            expect(page.locator("#answer-files li")).to_have_count(2)
            for other in ("kb/users/bob", "docs/faq.md", "sink", "notice"):
                assert other not in page.locator("main").inner_text()


def test_a_sum_shows_the_figure_and_each_payment_it_added_as_a_card(page, tmp_path, real_embedder):
    # "How much did I pay the roofer in 2025?" (#46): the total, and a card per payment with its date and amount;
    # bob's payment to the same roofer is neither counted nor shown.
    write_files(tmp_path, {
        "kb/users/alice/roof.md": "---\ndate: 2025-03-21\n---\n# Roof\n\nPaid the roofer €1,250.00 on 20 March 2025.",
        "kb/users/alice/gutters.md": "---\ndate: 2025-07-10\n---\n# Gutters\n\nPaid the roofer €340.00 on 10 July "
        "2025 for the gutters.",
        "kb/users/bob/roof.md": "---\ndate: 2025-06-03\n---\n# Roof\n\nPaid the roofer €5,000.00 on 3 June 2025."})
    with _kb(tmp_path, real_embedder) as kb:
        kb.index()
        key = KeyFile(kb.api_keys_file).add("alice")[0]
        with ThreadServer(create_app(kb, ApiConfig())) as base:
            sign_in(page, base, key)
            run_query(page, "How much did I pay the roofer in 2025?", "ask")
            expect(page.locator("#answer-text")).to_contain_text("EUR 1,590.00")
            cards = page.locator("#answer-files li")
            expect(cards).to_have_count(2)
            expect(cards.nth(0)).to_contain_text("2025-03-20 · EUR 1250.00")
            expect(cards.nth(1)).to_contain_text("kb/users/alice/gutters.md")
            expect(page.locator("#answer-meta")).to_have_text("Added up from every document in scope.")
            assert "5,000" not in page.locator("#answer").inner_text()
