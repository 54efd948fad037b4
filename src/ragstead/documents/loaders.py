"""Loaders: one function per format, each returning plain text plus what citations need.

`load_document` raises `LoadError` (never anything else) for a file it cannot read, so the indexer can
report it, skip it and index the rest: the expected cases (binary, encrypted, over a limit) with their own
message, and any other exception a parser raises on a malformed file as "corrupt or unreadable".

Every file is read under `LoadLimits` (docs/design.md, "Hostile files"): a size cap before reading, a
decompression cap read from a zip's central directory before parsing, a page cap, an HTML nesting cap
counted before parsing, a cap on the text extracted, and a time budget checked inside the page and
paragraph loops.
"""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io
import json
import logging
import os
import re
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ragstead.documents.formats import notes, ocr  # markdown and PDF read with them; neither imports a parser
from ragstead.documents.formats.parts import Parts
from ragstead.documents.ids import open_regular, storable_path
from ragstead.documents.sources import from_front_matter, read_sidecar
from ragstead.errors import ConfigError, LoadError, UnsupportedFileError
from ragstead.plugins import Registry

MIB = 1 << 20


@dataclass(frozen=True)
class LoadLimits:
    """What one file may cost to read. Over any of them the file is skipped with the reason."""

    max_file_bytes: int = 100 * MIB
    max_unzipped_bytes: int = 200 * MIB  # a zip-based file (.docx) unpacked, from its central directory
    max_zip_ratio: float = 100.0  # unpacked / packed size of a zip member (and of the whole zip)
    max_pdf_pages: int = 2000
    max_chars: int = 5_000_000  # text extracted from one file
    seconds: float = 60.0  # time to read one file (and, in the indexer, to chunk it)
    max_html_depth: int = 512  # elements open at once in an HTML file, counted before it is parsed
    ocr: bool = True  # read images and scanned PDF pages with OCR (formats/ocr.py)
    # The address space of the process a file is read in (sandbox.py); 0: read in the calling process, unlimited.
    max_reader_bytes: int = 2048 * MIB


# A zip member smaller than this unpacked cannot hurt, whatever its ratio (a run of blanks compresses well).
_RATIO_FLOOR = MIB


class Budget:
    """The limits of reading one file, with the clock and the character count running."""

    def __init__(self, limits: LoadLimits, name: str) -> None:
        self.limits = limits
        self.name = name
        self.deadline = time.monotonic() + limits.seconds
        self.chars = 0
        self.path: Path | None = None  # the file read (load_document sets it): a vault note finds its links by it

    def tick(self) -> None:
        """Raise LoadError once the file's time budget is spent (called inside page/paragraph loops)."""
        if time.monotonic() > self.deadline:
            raise LoadError(f"{self.name}: took over {self.limits.seconds:g} s to read (the per-file time budget, "
                            "file_seconds), skipped")

    def add_chars(self, count: int) -> None:
        """Count extracted text; raise LoadError past the per-file character limit."""
        self.chars += count
        self.check_chars(self.chars)

    def check_chars(self, total: int) -> None:
        """Raise LoadError if `total` characters is over the per-file limit (no silent truncation)."""
        if total > self.limits.max_chars:
            raise LoadError(f"{self.name}: over {self.limits.max_chars:,} characters of text (max_file_chars), "
                            "skipped")


@dataclass
class LoadedDocument:
    """Text of one file. `page_starts[i]` is the char offset where page i+1 begins (PDF only)."""

    text: str
    title: str | None = None
    page_starts: list[int] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    source: dict[str, Any] | None = None  # an ingested document's origin (documents/sources.py)
    subject: str | None = None  # what the document is about, from a `subject:` front matter line (dossiers)
    markdown: bool = False  # its `#` lines are headings: chunks get the section they start in
    # With `page_starts`: each part's citation label ("slide 3", "sheet Inventory, rows 2-9") instead of a page.
    part_labels: list[str] = field(default_factory=list)
    created_at: str | None = None  # the date the content carries (an e-mail's Date), over the file's mtime
    # Documents of their own inside the file (an mbox's messages, an e-mail's attachments) by key (`msg-…`), each
    # stored as `path#key` (documents.ids.part_path). A file with some and no text of its own is no document.
    inside: list[tuple[str, LoadedDocument]] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # a vault note's [[link]] targets, as written


# -- text ------------------------------------------------------------------------------------------------

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))
# Characters no prose is made of: C0/C1 controls other than whitespace, DEL, and U+FFFD (undecodable bytes).
_SUSPECT = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")
_SUSPECT_SHARE = 0.05
_SAMPLE_CHARS = 65536
_DETECT_BYTES = 256 * 1024
_ASCII_RUNS = re.compile("[\x00-\x7f]+")


def _check_text(text: str, name: str) -> str:
    """Refuse decoded 'text' that is mostly control characters: binary data that happened to decode."""
    if len(text) <= 3 * _SAMPLE_CHARS:
        samples = [text]
    else:
        middle = len(text) // 2
        samples = [text[:_SAMPLE_CHARS], text[middle : middle + _SAMPLE_CHARS], text[-_SAMPLE_CHARS:]]
    for sample in samples:
        suspect = sum(1 for _ in _SUSPECT.finditer(sample))
        if suspect > max(_SUSPECT_SHARE * len(sample), 2):  # a stray control character or two is no verdict
            raise LoadError(f"{name}: looks binary ({suspect} of {len(sample)} characters are control "
                            "characters), skipped")
    return text


def _not_utf8(data: bytes, name: str) -> str:
    """Text that is not valid UTF-8. UTF-8 with a few stray bytes (more valid multi-byte characters than bad
    sequences) stays UTF-8; otherwise the 8-bit (or CJK) encoding charset-normalizer finds; LoadError when
    nothing is plausible (binary data without NUL bytes)."""
    from charset_normalizer import from_bytes

    sample = data[:_DETECT_BYTES]
    lenient = sample.decode("utf-8", errors="replace")
    bad = lenient.count("\ufffd")
    if len(_ASCII_RUNS.sub("", lenient)) - bad >= 2 * bad:
        return data.decode("utf-8", errors="replace")
    results = from_bytes(sample)
    best = results.best()
    if best is not None:
        # Legacy Western text is the common case, and on short samples the detector's first pick is a guess
        # among code pages that decode the same bytes: keep cp1252 whenever it is one of the candidates.
        if "cp1252" in best.could_be_from_charset or any(r.encoding == "cp1252" for r in results):
            return data.decode("cp1252", errors="replace")
        return data.decode(best.encoding, errors="replace")
    if bad <= max(2, len(lenient) // 200):  # ASCII text with a stray byte or two
        return data.decode("utf-8", errors="replace")
    raise LoadError(f"{name}: looks binary (no plausible text encoding), skipped")


def _decode(data: bytes, name: str) -> str:
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return _check_text(data.decode(codec), name)
            except UnicodeDecodeError:
                break  # a BOM-like start on data that is not UTF-16/32: judged below like any other bytes
    if b"\x00" in data[:8192]:
        raise LoadError(f"{name}: looks binary (NUL bytes), skipped")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = _not_utf8(data, name)
    return _check_text(text, name)


_FRONT_MATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n", re.DOTALL)
# Blanks, not \s: an empty `tags:` must not take the next line (a YAML block list) as its value.
_FIELD_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)[ \t]*:[ \t]*(.*?)[ \t\r]*$", re.MULTILINE)


def _scalar(raw: str) -> str:
    """A one-line front matter value: a JSON/YAML double-quoted string (what `ragstead ingest` writes), else
    the text without surrounding quotes."""
    if raw.startswith('"'):
        with contextlib.suppress(ValueError):
            value = json.loads(raw)
            if isinstance(value, str):
                return value
    return raw.strip("'\"")


# The tag of a document whose front matter says `local_only: true`.
LOCAL_ONLY_TAG = "local-only"


def _front_matter(text: str) -> tuple[str, dict[str, str], list[str]]:
    """Strip YAML front matter; return (body, its one-line `key: value` fields, tags). Tags are read from
    `tags: [a, b]` or `tags: a, b`; nested YAML is not read (no YAML parser runs on untrusted files)."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return text, {}, []
    fields = {key.lower(): value for key, value in _FIELD_LINE.findall(match.group(1))}
    raw = fields.pop("tags", "").strip().strip("[]")
    tags = [_scalar(t.strip()).lower() for t in raw.split(",") if _scalar(t.strip())]
    return text[match.end() :], {key: _scalar(value) for key, value in fields.items()}, tags


def _text_of(data: bytes, budget: Budget) -> str:
    budget.check_chars(len(data) // 4)  # no encoding takes more than 4 bytes a character: over before decoding
    text = _decode(data, budget.name)
    budget.add_chars(len(text))
    return text


def load_text(data: bytes, budget: Budget) -> LoadedDocument:
    """Plain text: UTF-8 (or UTF-16/32 with a BOM), else the encoding charset-normalizer finds."""
    return LoadedDocument(text=_text_of(data, budget))


def load_markdown(data: bytes, budget: Budget) -> LoadedDocument:
    """Markdown, kept as text (headings are used by the markdown chunker); front-matter tags read, and what an
    Obsidian/Logseq vault adds (formats/notes.py): inline #tags, aliases, the date, [[links]] as the linked
    notes' titles (else their names)."""
    text = _text_of(data, budget)
    body, fields, tags = _front_matter(text)
    note = notes.read_note(text, body, fields, notes.Titles(budget.path, budget.tick) if budget.path else None)
    body, tags = note.body + (f"\n\nAliases: {', '.join(note.aliases)}" if note.aliases else ""), [*tags, *note.tags]
    if fields.get("local_only", "").lower() in ("true", "yes", "1"):
        tags = [*tags, LOCAL_ONLY_TAG]  # its text never goes into a remote LLM's prompt (answer/consent.py)
    title = fields.get("title") or next(
        (line.lstrip("# ").strip() for line in body.splitlines() if line.startswith("# ")), None)
    return LoadedDocument(text=body, title=title, tags=list(dict.fromkeys(tags)), source=from_front_matter(fields),
                          markdown=True, subject=fields.get("subject") or None, created_at=note.created_at,
                          links=note.links)


# -- PDF -------------------------------------------------------------------------------------------------

_QUIET = logging.NullHandler()  # added once: addHandler ignores a handler the logger already has

def load_pdf(data: bytes, budget: Budget) -> LoadedDocument:
    """PDF text per page with pypdf; page boundaries kept so chunks cite their page."""
    from pypdf import PdfReader

    # pypdf logs what it repairs ("EOF marker not found"); with no handler anywhere Python would print that
    # bare on stderr. A NullHandler keeps it out of the CLI's output; an application's own logging still sees it.
    logging.getLogger("pypdf").addHandler(_QUIET)
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise LoadError(f"{budget.name}: PDF is encrypted, skipped")
    pages = reader.pages
    count = len(pages)
    if count > budget.limits.max_pdf_pages:
        raise LoadError(f"{budget.name}: {count} pages, over the {budget.limits.max_pdf_pages}-page limit "
                        "(max_pdf_pages), skipped")
    parts: list[str] = []
    starts: list[int] = []
    offset = 0
    for page in pages:
        budget.tick()
        page_text = (page.extract_text() or "").strip() or ocr.scanned_page(page, budget).strip()
        budget.add_chars(len(page_text) + 2)
        starts.append(offset)
        parts.append(page_text)
        offset += len(page_text) + 2  # the "\n\n" joiner
    title = None
    if reader.metadata is not None and reader.metadata.title:
        title = str(reader.metadata.title)
    return LoadedDocument(text="\n\n".join(parts), title=title, page_starts=starts)


# -- HTML ------------------------------------------------------------------------------------------------

_BOILERPLATE_TAGS = "script, style, noscript, nav, header, footer, aside, form, iframe, svg, template"


# The depth pre-scan models the HTML parser's stack of open elements (WHATWG "tree construction"), erring only
# toward counting deeper than the parser builds, never shallower. It finds comments and tags; a tag runs to the
# next `>` or `<` (never to the end of the file), so the scan stays linear on broken markup.
_SCAN = re.compile(r"<(?:(!--)|(/?)([a-zA-Z][^\s/<>]*)([^<>]*))")
_COMMENT_END = re.compile(r"--!?>")
# Elements that never nest (void) or that the parser closes by itself (optional end tags): never on the stack.
_FLAT_TAGS = frozenset("area base br col embed hr img input link meta param source track wbr keygen "
                       "p li dt dd tr td th thead tbody tfoot colgroup caption option optgroup rb rt rp "
                       "html head body".split())
# Whose content is text up to their end tag, in HTML (in SVG or MathML they are elements like any other).
_RAW_TEXT = frozenset("script style textarea xmp title".split())
# In SVG or MathML, these start tags leave foreign content (the parser pops back to HTML first).
_BREAKOUT = frozenset("b big blockquote body br center code dd div dl dt em embed h1 h2 h3 h4 h5 h6 head hr i img "
                      "li listing menu meta nobr ol p pre ruby s small span strong strike sub sup table tt u ul "
                      "var".split())
_FONT_BREAKOUT = re.compile(r"\b(?:color|face|size)\b", re.IGNORECASE)
# Foreign elements whose content is HTML again (integration points).
_INTEGRATION = frozenset("foreignobject desc title mi mo mn ms mtext annotation-xml".split())
# An end tag never closes past these ("has an element in scope").
_SCOPE = frozenset("applet caption html table td th marquee object template".split()) | _INTEGRATION
# The "special" elements: an end tag that is not one of theirs stops at them instead of closing through them.
_SPECIAL = frozenset(
    "address applet area article aside base basefont bgsound blockquote body br button caption center col colgroup "
    "dd details dialog dir div dl dt embed fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 "
    "head header hgroup hr html iframe img input keygen li link listing main marquee menu meta nav noembed "
    "noframes noscript object ol p param plaintext pre script search section select source style summary table "
    "tbody td template textarea tfoot th thead title tr track ul wbr xmp".split()) | _INTEGRATION
_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())

_Open = tuple[str, bool]  # an element on the modelled stack: its name and whether it is SVG/MathML (foreign)


def check_html_depth(html: str, budget: Budget) -> None:
    """Refuse markup nested deeper than `max_html_depth` before it is parsed: lexbor's tree building costs
    time growing with the square of the depth (200,000 nested <div>s: minutes in one C call no budget check
    can interrupt). A linear scan keeps the parser's stack as the HTML standard builds it: `<div/>` opens a div
    (the slash only closes SVG and MathML elements), an end tag closes only an element that is open and in scope
    (`</x>` closes nothing), `<!-->` is a whole comment, script and style text ends at `</script`, not `</script>`.
    Void elements and those with optional end tags are never counted, so sloppy but honest HTML counts no deeper
    than a browser builds it."""
    limit = budget.limits.max_html_depth
    stack: list[_Open] = []
    at, count = 0, 0
    while match := _SCAN.search(html, at):
        at = match.end()
        count += 1
        if count % 65536 == 0:
            budget.tick()
        if match.group(1):  # a comment: `<!-->` and `<!--->` end at once, the rest at `-->` or `--!>`
            if html.startswith((">", "->"), at):
                at += 1 if html.startswith(">", at) else 2
                continue
            end = _COMMENT_END.search(html, at)
            at = end.end() if end else len(html)
            continue
        name = match.group(3).lower()
        if match.group(2):
            _close(stack, name)
            continue
        closed = match.group(4).rstrip().endswith("/") and html.startswith(">", at)
        at = _open(stack, name, match.group(4), closed, html, at)
        if len(stack) > limit:
            raise LoadError(f"{budget.name}: HTML nested over {limit} elements deep (max_html_depth), skipped")


def _open(stack: list[_Open], name: str, attributes: str, closed: bool, html: str, at: int) -> int:
    """A start tag on the modelled stack; returns where the scan goes on (past a raw-text element's text)."""
    foreign = bool(stack) and stack[-1][1] and stack[-1][0] not in _INTEGRATION
    if foreign and (name in _BREAKOUT or (name == "font" and _FONT_BREAKOUT.search(attributes))):
        while stack and stack[-1][1] and stack[-1][0] not in _INTEGRATION:  # back to HTML content
            stack.pop()
        foreign = False
    if foreign or name in ("svg", "math"):
        if not (closed and attributes.rstrip()[-2:-1] in ("", " ", '"', "'", "\t", "\n")):
            stack.append((name, True))  # a self-closing foreign element opens nothing
        return at
    if name in _RAW_TEXT:
        end = re.compile(rf"</{re.escape(name)}[\s/>]", re.IGNORECASE).search(html, at)
        return end.start() if end else len(html)
    if name not in _FLAT_TAGS:
        stack.append((name, False))  # in HTML a `/>` closes nothing
    return at


def _close(stack: list[_Open], name: str) -> None:
    """An end tag: it closes the nearest open element of its name, with everything opened inside it, unless an
    element it cannot close through comes first (a scope boundary; for a non-special name, any special element).
    `</form>` takes only the form off the stack; `</h2>` closes any heading."""
    special = name in _SPECIAL
    for index in range(len(stack) - 1, -1, -1):
        element, foreign = stack[index]
        if element == name or (name in _HEADINGS and element in _HEADINGS and not foreign):
            if name == "form":
                del stack[index]
            else:
                del stack[index:]
            return
        if foreign and element not in _INTEGRATION:
            continue  # a foreign element closes when an outer one does
        if element in _SCOPE or (not special and element in _SPECIAL):
            return


def load_html(data: bytes, budget: Budget) -> LoadedDocument:
    """Main text of an HTML page with selectolax: boilerplate elements dropped, <main>/<article> preferred."""
    from selectolax.lexbor import LexborHTMLParser

    html = _decode(data, budget.name)
    check_html_depth(html, budget)
    tree = LexborHTMLParser(html)
    budget.tick()
    title_node = tree.css_first("title")
    title = title_node.text(strip=True) if title_node else None
    for node in tree.css(_BOILERPLATE_TAGS):
        node.decompose()
    # Hidden content is not what a reader sees; indexing it invites prompt-injection payloads.
    for node in tree.css('[hidden], [aria-hidden="true"], [style*="display:none"], [style*="display: none"]'):
        node.decompose()
    budget.tick()
    root = tree.css_first("main") or tree.css_first("article") or tree.body or tree.root
    text = root.text(separator="\n", strip=True) if root is not None else ""
    budget.add_chars(len(text))
    text = re.sub(r"\n{3,}", "\n\n", text)
    return LoadedDocument(text=text, title=title)


# -- DOCX ------------------------------------------------------------------------------------------------

def check_zip(data: bytes, budget: Budget, kind: str = "DOCX") -> None:
    """Refuse a zip bomb from the central directory alone, before anything is unpacked: the unpacked total,
    each large member's ratio and the whole archive's ratio, and compression methods other than the two
    Office writes (zipfile bounds what it unpacks by these declared sizes, so a lying header cannot get
    more through). `kind` names the format in the message ("EPUB", "XLSX"...)."""
    limits, name = budget.limits, budget.name
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError) as exc:
        raise LoadError(f"{name}: corrupt or unreadable {kind} (not a zip: {exc}), skipped") from exc
    with archive:
        total = packed = 0
        for info in archive.infolist():
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise LoadError(f"{name}: zip member {info.filename!r} uses compression method "
                                f"{info.compress_type}, which {kind} never does, skipped")
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > _RATIO_FLOOR and ratio > limits.max_zip_ratio:
                raise LoadError(f"{name}: zip member {info.filename!r} unpacks {ratio:.0f} times its size, over the "
                                f"{limits.max_zip_ratio:g}:1 limit (max_zip_ratio), skipped")
            total += info.file_size
            packed += info.compress_size
    if total > limits.max_unzipped_bytes:
        raise LoadError(f"{name}: unpacks to {total / MIB:.1f} MiB, over the {limits.max_unzipped_bytes / MIB:g} MiB "
                        "limit (max_unzipped_mb), skipped")
    if total > _RATIO_FLOOR and total > limits.max_zip_ratio * max(packed, 1):
        raise LoadError(f"{name}: unpacks {total / max(packed, 1):.0f} times its size, over the "
                        f"{limits.max_zip_ratio:g}:1 limit (max_zip_ratio), skipped")


def load_docx(data: bytes, budget: Budget) -> LoadedDocument:
    """Word .docx paragraphs and table cells, in document order of paragraphs then tables."""
    import docx

    check_zip(data, budget)
    document = docx.Document(io.BytesIO(data))
    parts: list[str] = []
    for paragraph in document.paragraphs:
        budget.tick()
        text = paragraph.text
        if text.strip():
            budget.add_chars(len(text) + 2)
            parts.append(text)
    for table in document.tables:
        for row in table.rows:
            budget.tick()
            cells = [cell.text.strip() for cell in row.cells if cell.text.strip()]
            if cells:
                line = " | ".join(cells)
                budget.add_chars(len(line) + 2)
                parts.append(line)
    title = document.core_properties.title or None
    return LoadedDocument(text="\n\n".join(parts), title=title)


# -- formats/: readers that return labelled parts -------------------------------------------------------

class _Nested:
    """What a formats/ reader may read inside its file, under the file's budget (formats/parts.py, `Nested`)."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def __call__(self, name: str, data: bytes) -> str | None:
        """The text of a file inside another (an attachment); None if no loader reads it or it is unreadable."""
        try:
            loader = LOADERS.get(Path(name).suffix.lower())
        except ConfigError:  # a plugin's loader that cannot be imported: this attachment unread, the message kept
            return None
        if loader is None or len(data) > self.budget.limits.max_file_bytes:
            return None
        path, self.budget.path = self.budget.path, None  # an attached note has no vault to find its links in
        try:
            return loader(data, self.budget).text
        except Exception:  # a malformed attachment: the message is still indexed...
            self.budget.tick()  # ...unless the outer file's own time or character budget is what ran out
            self.budget.check_chars(self.budget.chars)
            return None
        finally:
            self.budget.path = path

    def html(self, markup: str) -> Any:
        """Markup parsed as load_html parses it (any check load_html runs before parsing belongs here too)."""
        from selectolax.lexbor import LexborHTMLParser

        self.budget.tick()
        check_html_depth(markup, self.budget)  # an EPUB chapter or a mail body nests no deeper than a page may
        return LexborHTMLParser(markup)


def _joined(found: Parts) -> LoadedDocument:
    """Parts as one text, each part's start kept (like a PDF page's) and its label its citation."""
    starts, offset = [], 0
    for _, part in found.parts:
        starts.append(offset)
        offset += len(part) + 2  # the "\n\n" joiner, as for PDF pages
    return LoadedDocument(text="\n\n".join(part for _, part in found.parts), title=found.title, page_starts=starts,
                          part_labels=[label for label, _ in found.parts], tags=found.tags,
                          created_at=found.created_at,
                          inside=[(key, _joined(document)) for key, document in found.documents])


Loader = Callable[[bytes, Budget], LoadedDocument]


def _parted(reader: str, zipped: str | None = None, text: bool = False) -> Loader:
    """A formats/ reader ("module:function" in formats/, imported on its first file) as a loader: zip limits
    checked first (`zipped` names the zip-based format in its messages), parts joined, each part's label its
    citation."""
    module, _, function = reader.partition(":")

    def load(data: bytes, budget: Budget) -> LoadedDocument:
        read: Callable[..., Parts] = getattr(importlib.import_module(f"ragstead.documents.formats.{module}"),
                                             function)
        if zipped:
            check_zip(data, budget, zipped)
        return _joined(read(_text_of(data, budget) if text else data, budget, _Nested(budget)))
    return load


load_epub = _parted("epub:read_epub", zipped="EPUB")
load_pptx = _parted("slides:read_pptx", zipped="PPTX")
load_xlsx = _parted("sheets:read_xlsx", zipped="XLSX")
load_ods = _parted("sheets:read_ods", zipped="ODS")
load_csv = _parted("sheets:read_csv", text=True)
load_eml = _parted("mail:read_eml")
load_mbox = _parted("mail:read_mbox")
load_msg = _parted("outlook:read_msg")
load_image = _parted("ocr:read_image")

_BUILT_IN = {"txt": "load_text", "text": "load_text", "md": "load_markdown", "markdown": "load_markdown",
             "pdf": "load_pdf", "html": "load_html", "htm": "load_html", "docx": "load_docx", "epub": "load_epub",
             "pptx": "load_pptx", "xlsx": "load_xlsx", "ods": "load_ods", "csv": "load_csv", "eml": "load_eml",
             "mbox": "load_mbox", "msg": "load_msg", **dict.fromkeys((s[1:] for s in ocr.IMAGE_SUFFIXES), "load_image")}


class Loaders(Mapping[str, Loader]):
    """The loaders by file suffix (".md"), from the "ragstead.loaders" registry (ragstead/plugins.py): the
    built-ins above, by their suffix without the dot, and any another package adds with an entry point whose
    value is a loader, `(data: bytes, budget: Budget) -> LoadedDocument`:

        [project.entry-points."ragstead.loaders"]
        org = "ragstead_org:load_org"

    A built-in suffix wins over a plugin's. The installed metadata is read the first time a suffix is not a
    built-in's, or the suffixes are listed; a format's parser is imported with its first file."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def __getitem__(self, suffix: str) -> Loader:
        loader = self.registry.get(suffix[1:].lower()) if suffix.startswith(".") and len(suffix) > 1 else None
        if loader is None:
            raise KeyError(suffix)
        if not callable(loader):  # an entry point at the wrong attribute: its files skipped with this line
            raise ConfigError(f"the {self.registry.group} plugin {suffix[1:].lower()!r} is not a loader "
                              f"({type(loader).__name__}, not a function of the file's bytes and budget)")
        return cast(Loader, loader)

    def __contains__(self, suffix: object) -> bool:
        """Whether `suffix` has a loader, without importing it: a plugin's that fails to import still claims its
        files, so they are skipped with its error (load_document) rather than passed over in silence."""
        return (isinstance(suffix, str) and suffix.startswith(".") and len(suffix) > 1
                and self.registry.has(suffix[1:].lower()))

    def __iter__(self) -> Iterator[str]:
        return iter(f".{name}" for name in self.registry.names())

    def __len__(self) -> int:
        return len(self.registry.names())


LOADERS = Loaders(Registry("ragstead.loaders", {suffix: f"ragstead.documents.loaders:{name}"
                                                for suffix, name in _BUILT_IN.items()}))
# The files whose text is the file's own decoded text, line for line: a chunk's place in one is a line range.
PLAIN_TEXT_SUFFIXES = frozenset({".txt", ".text"})
_KINDS = {".pdf": "PDF", ".docx": "DOCX", ".html": "HTML", ".htm": "HTML", ".md": "markdown", ".markdown": "markdown",
          ".epub": "EPUB", ".pptx": "PPTX", ".xlsx": "XLSX", ".ods": "ODS", ".csv": "CSV", ".eml": "e-mail",
          ".mbox": "mbox", ".msg": "Outlook .msg", **dict.fromkeys(ocr.IMAGE_SUFFIXES, "image")}


# Files that are no document themselves, only the documents inside them (an mbox's messages): an index that holds
# one as a document of its own was built before mail was split per message, and reads it again.
CONTAINER_SUFFIXES = (".mbox",)


def is_supported(path: Path) -> bool:
    """True when a loader exists for the file's extension."""
    return path.suffix.lower() in LOADERS


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception as one short line: `Type: message`, whitespace collapsed, cut at `limit` characters."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _read(path: Path, limits: LoadLimits, name: str) -> bytes:
    """The file's bytes, opened only if it is a regular file and read only if it is within the size limit."""
    try:
        with os.fdopen(open_regular(path), "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limits.max_file_bytes:
                raise LoadError(f"{name}: {size / MIB:.1f} MiB, over the {limits.max_file_bytes / MIB:g} MiB "
                                "file size limit (max_file_mb), skipped")
            # Asked for its size (+1 to see it grow), not for the limit: read(n) allocates n bytes up front, which
            # under the reader's address-space limit (sandbox.py) failed a 20-byte note with max_file_mb = 600.
            data = handle.read(size + 1)
            if len(data) > size:  # it grew while we read
                data += handle.read(limits.max_file_bytes + 1 - len(data))
    except OSError as exc:
        raise LoadError(f"{name}: cannot read ({exc.strerror or exc})") from exc
    if len(data) > limits.max_file_bytes:  # it grew while we read
        raise LoadError(f"{name}: over the {limits.max_file_bytes / MIB:g} MiB file size limit (max_file_mb), skipped")
    return data


def _storable(text: str) -> str:
    """Text any store takes: no NUL (PostgreSQL refuses it), no lone surrogate (UTF-8 encoders refuse it)."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _returned(loaded: Any, name: str, suffix: str) -> LoadedDocument:
    """What a loader returned, checked (a plugin's may return its text, or None for it): a LoadedDocument whose
    texts are strings, else one LoadError line, not an AttributeError later (in the worker: a death read as out
    of memory)."""
    documents = [loaded, *(document for _, document in loaded.inside)] if isinstance(loaded, LoadedDocument) else []
    if not documents or not all(isinstance(document, LoadedDocument) and isinstance(document.text, str)
                                and isinstance(document.title, str | None) for document in documents):
        raise LoadError(f"{name}: the {suffix} loader returned {type(loaded).__name__}, not a LoadedDocument with "
                        "its text, skipped")
    return loaded


def load_document(path: Path, limits: LoadLimits | None = None, budget: Budget | None = None) -> LoadedDocument:
    """Load any supported file within `limits` (default: `LoadLimits()`). Raises `UnsupportedFileError` or
    `LoadError` with a one-line message for the user, never another exception. `budget`: the indexer's own,
    to keep one clock running over reading and chunking."""
    name = storable_path(path)
    suffix = path.suffix.lower()
    try:
        loader = LOADERS.get(suffix)
    except ConfigError as exc:  # a plugin's loader that fails to import: this file skipped, the others read
        raise LoadError(f"{name}: {exc}, skipped") from exc
    if loader is None:
        raise UnsupportedFileError(f"{name}: unsupported file type {storable_path(path.suffix) or '(none)'!r}, "
                                   "skipped")
    budget = budget or Budget(limits or LoadLimits(), name)
    budget.path = path
    data = _read(path, budget.limits, name)
    try:
        loaded = _returned(loader(data, budget), name, suffix)
    except LoadError:
        raise
    except Exception as exc:  # a parser's surprise on a malformed file (never KeyboardInterrupt/SystemExit)
        kind = _KINDS.get(suffix) or ("text" if suffix in PLAIN_TEXT_SUFFIXES else f"{suffix} file")
        raise LoadError(f"{name}: corrupt or unreadable {kind} ({one_line(exc)})") from exc
    finally:
        del data
    for document in (loaded, *(document for _, document in loaded.inside)):
        document.text = _storable(document.text)
        if document.title is not None:
            document.title = _storable(document.title)[:500].strip() or None
    if loaded.source is None:  # an ingested file archived as fetched keeps its source in a sidecar
        loaded.source, tags, title = read_sidecar(path)
        loaded.tags = list(dict.fromkeys([*loaded.tags, *tags]))
        loaded.title = title or loaded.title
    if loaded.title is not None:
        loaded.title = _storable(loaded.title)[:500].strip() or None
    if loaded.subject is not None:
        loaded.subject = _storable(loaded.subject)[:500].strip() or None
    budget.check_chars(len(loaded.text))
    budget.tick()
    return loaded
