"""A browser's bookmark export (the Netscape HTML file every browser writes) as a list of sources: each
bookmark's URL, with the folders it sits in as tags (`Bookmarks Bar > Recipes` → `bookmarks-bar`, `recipes`).
`ragstead ingest bookmarks.html` ingests the pages; the file itself is not archived."""

from __future__ import annotations

from pathlib import Path

from ragstead.ingest.tagging import normalize_tag

_SIGNATURE = b"NETSCAPE-Bookmark-file"
_MAX_BYTES = 50 << 20  # a browser's whole history of bookmarks is a few MiB
MAX_BOOKMARKS = 10_000


def bookmarks_file(given: str, root: Path | None) -> Path | None:
    """The bookmark export `given` names (a local .html/.htm file whose first bytes say so), else None."""
    if "://" in given:
        return None
    path = Path(given.strip()).expanduser()
    if not path.exists() and root is not None and not path.is_absolute():
        path = root / path
    if path.suffix.lower() not in (".html", ".htm") or not path.is_file():
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(1024)
    except OSError:
        return None
    return path if _SIGNATURE.lower() in head.lower() else None


def read_bookmarks(path: Path) -> list[tuple[str, list[str]]]:
    """(URL, folder tags) of each http(s) bookmark, in file order, without repeats; at most MAX_BOOKMARKS."""
    from selectolax.lexbor import LexborHTMLParser

    if path.stat().st_size > _MAX_BYTES:
        return []
    tree = LexborHTMLParser(path.read_bytes().decode("utf-8", errors="replace"))
    found: dict[str, list[str]] = {}
    for link in tree.css("a[href]"):
        url = (link.attributes.get("href") or "").strip()
        if not url.lower().startswith(("http://", "https://")) or url in found:
            continue
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
        found[url] = [tag for tag in (normalize_tag(f) for f in reversed(folders)) if tag]
        if len(found) >= MAX_BOOKMARKS:
            break
    return list(found.items())
