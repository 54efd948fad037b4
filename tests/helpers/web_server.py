"""A real HTTP server on 127.0.0.1 for the ingest tests and bench: saved real pages, a PDF, a redirect chain and
loop, a 404, a slow response, an oversized body, binary content and an empty (JavaScript-only) page."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from helpers.pdf_writer import make_pdf

WEB_PAGES = Path(__file__).resolve().parents[1] / "data" / "web"
ARTICLE = "theverge.com.ios13.html"  # "iOS 13 will fix the FaceTime eye contact problem", Jon Porter, 2019-07-03
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(200)
EMPTY_PAGE = b"<!doctype html><html><head><title>App</title></head><body><div id=root></div>" \
             b"<script src=/app.js></script></body></html>"


class Routes:
    """What the server answers; tests may add pages (`pages[path] = (content type, body)`) and count hits."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {
            f"/{p.name}": ("text/html; charset=utf-8", p.read_bytes()) for p in WEB_PAGES.glob("*.html")}
        self.pages["/article.html"] = self.pages[f"/{ARTICLE}"]
        self.pages["/paper.pdf"] = ("application/pdf", make_pdf(
            ["Ingest test paper. Telescopes gather starlight with mirrors of beryllium.",
             "Page two: adaptive optics correct atmospheric turbulence in real time."], title="Mirror paper"))
        self.pages["/notes.txt"] = ("text/plain", b"Plain notes: the quarterly review moved to Thursday at noon.\n")
        self.pages["/image.png"] = ("image/png", PNG)
        self.pages["/app.html"] = ("text/html", EMPTY_PAGE)
        self.redirects = {"/old": "/older", "/older": "/article.html", "/loop-a": "/loop-b", "/loop-b": "/loop-a"}
        self.hits: dict[str, int] = {}
        self.slow_seconds = 3.0
        self.huge_bytes = 3 << 20


@contextmanager
def serve(routes: Routes | None = None) -> Iterator[tuple[str, Routes]]:
    """Run the server in a thread; yields (base URL, routes)."""
    routes = routes or Routes()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:  # http.server's naming
            path = self.path.split("?", 1)[0]
            routes.hits[path] = routes.hits.get(path, 0) + 1
            if path in routes.redirects:
                self.send_response(302)
                self.send_header("Location", routes.redirects[path])
                self.end_headers()
            elif path == "/slow":
                time.sleep(routes.slow_seconds)
                self._send("text/html", b"<html><body>late</body></html>")
            elif path == "/huge":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()  # no Content-Length: the cap must hold while streaming
                chunk = b"x" * 65536
                try:
                    for _ in range(routes.huge_bytes // len(chunk)):
                        self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    pass
            elif path in routes.pages:
                self._send(*routes.pages[path])
            else:
                self.send_error(404)

        def _send(self, content_type: str, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes
    finally:
        server.shutdown()
        server.server_close()
