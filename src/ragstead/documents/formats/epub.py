"""EPUB e-books: the spine's chapters in reading order, each a part named by its first heading.

Read with zipfile and selectolax (already used for HTML), not ebooklib: the chapters are XHTML, the
container and package files are small XML, and this path reads one chapter at a time under the budget.
"""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

from ragstead.documents.formats.parts import Meter, Nested, Parts, check_count, open_zip, xml_parser
from ragstead.errors import LoadError

_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_HEADINGS = "h1, h2, h3"
_DROPPED = "script, style, nav, svg, template"


def _package_path(archive) -> str:  # type: ignore[no-untyped-def]
    from lxml import etree

    root = etree.fromstring(archive.read("META-INF/container.xml"), xml_parser())
    if root is None:
        raise LoadError("META-INF/container.xml is not XML")
    for node in root.iter("{*}rootfile"):
        if node.get("full-path"):
            return str(node.get("full-path"))
    raise LoadError("META-INF/container.xml names no package file")


def _chapter(html: str, number: int, nested: Nested) -> tuple[str, str]:
    """(label, text) of one chapter: its first heading (else its <title>, else "chapter N") and its text."""
    tree = nested.html(html)
    for node in tree.css(_DROPPED):
        node.decompose()
    heading = tree.css_first(_HEADINGS) or tree.css_first("title")
    label = " ".join(heading.text().split())[:200] if heading is not None else ""
    root = tree.body or tree.root
    text = root.text(separator="\n", strip=True) if root is not None else ""
    return label or f"chapter {number}", text


def read_epub(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """Chapters of an EPUB 2/3 in spine order; the book's dc:title is the title."""
    from lxml import etree

    with open_zip(data) as archive:
        package = _package_path(archive)
        opf = etree.fromstring(archive.read(package), xml_parser())
        if opf is None:
            raise LoadError(f"{package} is not XML")
        folder = posixpath.dirname(package)
        hrefs = {item.get("id"): item.get("href") for item in opf.iter(f"{_OPF}item") if item.get("href")}
        spine = [hrefs[ref.get("idref")] for ref in opf.iter(f"{_OPF}itemref") if ref.get("idref") in hrefs]
        check_count(len(spine), "chapters", budget)
        title_node = next(opf.iter(f"{_DC}title"), None)
        found = Parts(title=" ".join((title_node.text or "").split()) or None if title_node is not None else None)
        names = set(archive.namelist())
        for number, href in enumerate(spine, start=1):
            budget.tick()
            member = posixpath.normpath(posixpath.join(folder, unquote(href.split("#")[0])))
            if member not in names:
                continue  # a spine entry the zip lacks: the rest of the book still reads
            label, text = _chapter(archive.read(member).decode("utf-8", errors="replace"), number, nested)
            found.add(label, text, budget)
    return found
