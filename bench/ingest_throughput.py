"""`python -m bench ingest`: ingest throughput of 200 web pages from a loopback server, against indexing the
same extracted text from files, in the same run with the same (real) model.

The 19 saved real pages of ../shared/fixtures/web are served under 200 paths; each copy gets its number
appended to every paragraph, so no two copies share a chunk (the index would otherwise reuse the vectors of
identical chunks and flatter ingest). Three runs, each in a fresh project:
1. `kb.ingest(urls)` with auto-tags off: fetch + extract + archive + index, one source at a time;
2. `kb.index()` of the archived markdown copied to a plain folder: the indexing share alone;
3. `kb.ingest` of 20 of them with auto-tags on: what the local tagger adds per page.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from bench.common import Timer, write_results

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO.parent / "shared" / "fixtures" / "web"
sys.path.insert(0, str(REPO / "tests"))  # the tests' loopback server (tests/helpers/web_server.py)


def _copies(count: int) -> dict[str, tuple[str, bytes]]:
    sources = sorted(PAGES.glob("*.html"))
    pages = {}
    for i in range(count):
        page = sources[i % len(sources)]
        html = re.sub(rb"</p>", f" (copy {i})</p>".encode(), page.read_bytes(), flags=re.I)
        pages[f"/c{i}/{page.name}"] = ("text/html; charset=utf-8", html)
    return pages


def main(count: int = 200) -> None:
    import ragstead
    from helpers.web_server import Routes, serve

    routes = Routes()
    routes.pages.update(_copies(count))
    urls = sorted(p for p in routes.pages if p.startswith("/c"))
    with serve(routes) as (base, _), tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "ingest" / "kb").mkdir(parents=True)
        with ragstead.open(work / "ingest", auto_tags=False) as kb:
            kb.embedder  # noqa: B018 - the model loads outside the timed part, as in the index run
            with Timer() as ingest_time:
                report = kb.ingest([base + u for u in urls])
            stats = kb.stats()
        counts = report.counts()
        failed = [(r.source, r.reason) for r in report.failed]
        archive = work / "ingest" / "kb" / "users"
        plain = work / "files" / "kb" / "notes"
        plain.mkdir(parents=True)
        for i, path in enumerate(sorted(archive.rglob("*.md"))):
            shutil.copy(path, plain / f"{i:04d}-{path.name}")
        with ragstead.open(work / "files") as kb:
            kb.embedder  # noqa: B018
            with Timer() as index_time:
                indexed = kb.index()
        (work / "tagged" / "kb").mkdir(parents=True)
        with ragstead.open(work / "tagged", auto_tags=True) as kb:
            kb.embedder  # noqa: B018
            with Timer() as untagged_time:
                kb.ingest([base + u for u in urls[:20]], auto_tags=False)
            with Timer() as tagged_time:
                tagged = kb.ingest([base + u for u in urls[20:40]], auto_tags=True)
        tag_counts = [len(r.tags) for r in tagged.results]
    pages = counts["added"]
    per_page_ingest = ingest_time.seconds / max(pages, 1) * 1000
    per_page_index = index_time.seconds / max(len(indexed.added), 1) * 1000
    tag_ms = (tagged_time.seconds - untagged_time.seconds) / 20 * 1000
    rows = [["run", "pages", "seconds", "pages/s", "ms/page"],
            ["ingest (fetch, extract, archive, index)", str(pages), f"{ingest_time.seconds:.1f}",
             f"{pages / ingest_time.seconds:.2f}", f"{per_page_ingest:.0f}"],
            ["index the same text from files", str(len(indexed.added)), f"{index_time.seconds:.1f}",
             f"{len(indexed.added) / index_time.seconds:.2f}", f"{per_page_index:.0f}"],
            ["ingest overhead (fetch, extract, archive, per-source commit)", "", "", "",
             f"{per_page_ingest - per_page_index:.0f}"],
            ["auto-tags (local tagger), added per page", "20", "", "", f"{tag_ms:.0f}"]]
    write_results("ingest_throughput", {
        "pages": pages, "counts": counts, "failed": failed, "chunks": stats["chunks"],
        "ingest_seconds": round(ingest_time.seconds, 2), "index_seconds": round(index_time.seconds, 2),
        "index_chunks": indexed.chunks_written, "ms_per_page_ingest": round(per_page_ingest, 1),
        "ms_per_page_index": round(per_page_index, 1), "auto_tag_ms_per_page": round(tag_ms, 1),
        "tags_per_page": tag_counts,
    }, rows)
