"""A browser's bookmarks as a list of sources: each bookmark's URL, with the folders it sits in as tags
(`Bookmarks Bar > Recipes` → `bookmarks-bar`, `recipes`). Read: the Netscape HTML export every browser
writes, Chrome's `Bookmarks` JSON file and Firefox's `places.sqlite` (opened read-only and immutable, so a
running browser's lock does not matter and nothing is written). `ragstead ingest bookmarks.html` ingests
the pages; the bookmark file itself is not archived."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragstead.documents.loaders import Budget, LoadLimits, check_html_depth
from ragstead.errors import LoadError
from ragstead.ingest.tagging import normalize_tag

_SIGNATURE = b"NETSCAPE-Bookmark-file"
_MAX_BYTES = 50 << 20  # a browser's whole history of bookmarks is a few MiB
MAX_BOOKMARKS = 10_000
MAX_FOLDER_TAGS = 8  # the outermost folders a bookmark is tagged with


def bookmarks_file(given: str, root: Path | None) -> Path | None:
    """The bookmark export `given` names (a local .html/.htm file whose first bytes say so), else None."""
    if "://" in given:
        return None
    path = Path(given.strip()).expanduser()
    if not path.exists() and root is not None and not path.is_absolute():
        path = root / path
    if not path.is_file() or (path.suffix.lower() not in (".html", ".htm", ".json", ".sqlite")
                              and path.name != "Bookmarks"):
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(1024)
    except OSError:
        return None
    if path.suffix.lower() == ".sqlite":
        return path if head.startswith(b"SQLite format 3\x00") else None
    if path.suffix.lower() in (".html", ".htm"):
        return path if _SIGNATURE.lower() in head.lower() else None
    return path if head.lstrip().startswith(b"{") and b'"roots"' in head else None  # Chrome's JSON


def read_bookmarks(path: Path) -> list[tuple[str, list[str]]]:
    """(URL, folder tags) of each http(s) bookmark, in file order, without repeats; at most MAX_BOOKMARKS."""
    if path.stat().st_size > _MAX_BYTES:
        return []
    suffix = path.suffix.lower()
    links = _sqlite_links(path) if suffix == ".sqlite" else _html_links(path) if suffix in (".html", ".htm") \
        else _json_links(path)
    found: dict[str, list[str]] = {}
    for url, folders in links:
        url = url.strip()
        if not url.lower().startswith(("http://", "https://")) or url in found:
            continue
        found[url] = [tag for tag in (normalize_tag(f) for f in folders if f) if tag]
        if len(found) >= MAX_BOOKMARKS:
            break
    return list(found.items())


def _html_links(path: Path) -> Iterator[tuple[str, list[str]]]:
    from selectolax.lexbor import LexborHTMLParser

    markup = path.read_bytes().decode("utf-8", errors="replace")
    try:  # nested folders are nested <DL>s: lexbor's cost grows with the square of the depth, as for any page
        check_html_depth(markup, Budget(LoadLimits(), path.name))
    except LoadError:
        return
    tree = LexborHTMLParser(markup)
    for link in tree.css("a[href]"):
        folders = []
        node = link.parent
        while node is not None:  # each enclosing <DL> is the folder named by the <H3> before it
            if node.tag == "dl":
                heading = node.prev
                while heading is not None and heading.tag != "h3":
                    heading = heading.prev
                if heading is not None:
                    folders.append(heading.text(strip=True))
            node = node.parent
        yield link.attributes.get("href") or "", folders[::-1][:MAX_FOLDER_TAGS]


def _json_links(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Chrome's `Bookmarks`: {"roots": {"bookmark_bar": {"type": "folder", "name": …, "children": […]}, …}}."""
    try:
        roots = json.loads(path.read_text(encoding="utf-8", errors="replace")).get("roots", {})
    except (ValueError, AttributeError, RecursionError):  # nested past the parser's depth: no browser's export
        return
    stack: list[tuple[Any, list[str]]] = [(node, []) for node in roots.values() if isinstance(node, dict)]
    while stack:
        node, folders = stack.pop()
        if node.get("type") == "url":
            yield str(node.get("url") or ""), folders
        elif isinstance(node.get("children"), list):
            # The tags are the outer folders: a few names, not one per level of a file nested thousands deep.
            inner = folders if len(folders) >= MAX_FOLDER_TAGS else [*folders, str(node.get("name") or "")]
            stack.extend((child, inner) for child in reversed(node["children"]) if isinstance(child, dict))


def _sqlite_links(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Firefox's places.sqlite: bookmarks (type 1) with their folders' titles up to the root, the tags root's
    folders left out."""
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True) as db:
            folders = {row[0]: (row[1], row[2] or "", row[3] or "") for row in
                       db.execute("SELECT id, parent, title, guid FROM moz_bookmarks WHERE type = 2")}
            rows = db.execute("SELECT b.parent, p.url FROM moz_bookmarks b JOIN moz_places p ON p.id = b.fk "
                              "WHERE b.type = 1 ORDER BY b.id").fetchall()
    except sqlite3.Error:
        return
    for parent, url in rows:
        names, seen = [], set()
        while parent in folders and parent not in seen:
            seen.add(parent)
            parent, title, guid = folders[parent]
            if guid == "tags________":
                break
            names.append(title)
        else:
            yield str(url or ""), names[::-1]
