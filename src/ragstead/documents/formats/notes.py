"""Obsidian and Logseq notes: what a vault adds to markdown, read without a YAML parser.

- front matter block lists (`tags:` / `aliases:` followed by `- item` lines) and `date:`;
- Logseq page properties (`tags:: a, [[b]]`, `alias:: c`);
- inline `#tags` outside code (`#project/alpha` stays one tag), which become ragstead tags so `--tag` finds them;
- `[[wikilinks]]`: `[[Note|shown]]` reads "shown", `[[Note#Part]]` reads "Note > Part", `[[Note]]` reads
  the linked note's front-matter `title` when it has one (`Titles`), else "Note" (its name, as the vault shows
  it); the targets are kept as the note's links (`Note.links`, `LoadedDocument.links`).

The `.obsidian/` and `.trash/` folders are hidden folders, which the index walk never enters.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import lru_cache
from pathlib import Path

from ragstead.documents.ids import open_regular

_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.DOTALL)
_BLOCK_LIST = re.compile(r"^(tags|aliases|alias)[ \t]*:[ \t]*\n((?:[ \t]*-[ \t]*[^\n]*(?:\n|\Z))+)", re.MULTILINE)
_LOGSEQ = re.compile(r"^(tags|alias|aliases)::[ \t]*([^\n]+)$", re.MULTILINE)
_INLINE_LIST = re.compile(r"^(aliases|alias)[ \t]*:[ \t]*(\S[^\n]*)$", re.MULTILINE)
_CODE = re.compile(r"^```[^\n]*\n.*?^```[ \t]*$|`[^`\n]*`", re.MULTILINE | re.DOTALL)
_INLINE_TAG = re.compile(r"(?<![\w#/&\[\]\(])#([A-Za-z_][\w/-]{0,99})")
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#\n]{0,300})(?:#([^\[\]|\n]{0,300}))?(?:\|([^\[\]\n]{0,300}))?\]\]")
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")


@dataclass
class Note:
    """A note's body with its links read out, and the tags, aliases, date and link targets found in it."""

    body: str
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    created_at: str | None = None


def _items(raw: str) -> list[str]:
    """`a, [[b]], "c"` or `[a, b]` or `- a` lines as clean items."""
    raw = raw.strip().strip("[]") if not raw.strip().startswith("[[") else raw
    parts = re.split(r"[,\n]", raw)
    items = (p.strip().lstrip("-").strip().strip("'\"").removeprefix("[[").removesuffix("]]").lstrip("#").strip()
             for p in parts)
    return [item for item in items if item]


def _day(raw: str | None) -> str | None:
    match = _DAY.match((raw or "").strip().strip("'\""))
    if match is None:
        return None
    try:
        day = date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None
    return datetime(day.year, day.month, day.day, tzinfo=UTC).isoformat()


# What finding linked notes' titles may cost one note: links looked up, bytes of each target read (its front
# matter), files a vault-wide name lookup lists, and how long that listing is reused (watch and serve run long).
MAX_LINKS = 200
_TITLE_BYTES = 16384
_VAULT_FILES = 50_000
_LISTING_SECONDS = 60
_VAULT_MARKERS = (".obsidian", "logseq")
_TITLE_LINE = re.compile(r"^title[ \t]*:[ \t]*(\S[^\n]*?)[ \t\r]*$", re.MULTILINE)


def _vault_root(folder: Path) -> Path | None:
    """The nearest folder at or above `folder` that an Obsidian or Logseq vault keeps its settings in."""
    for candidate in (folder, *folder.parents):
        if any(os.path.isdir(candidate / marker) for marker in _VAULT_MARKERS):
            return candidate
    return None


@lru_cache(maxsize=8)
def _listing(root: Path, period: int) -> dict[str, Path]:
    """The vault's notes by lower-cased name (the first found wins, as Obsidian's shortest path does); hidden
    folders left out. `period` makes the cache expire: a note added a minute ago is found."""
    found: dict[str, Path] = {}
    seen = 0
    for folder, folders, names in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for name in sorted(names):
            seen += 1
            if seen > _VAULT_FILES:
                return found
            if name.lower().endswith(".md"):
                found.setdefault(name[:-3].lower(), Path(folder) / name)
    return found


def _front_title(path: Path) -> str | None:
    """The `title:` of a note's front matter, read from its first bytes only; None if it has none."""
    try:
        with os.fdopen(open_regular(path), "rb") as handle:
            head = handle.read(_TITLE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    front = _FRONT.match(head)
    line = _TITLE_LINE.search(front.group(1)) if front else None
    title = " ".join(line.group(1).strip().strip("'\"").split())[:200] if line else ""
    return title or None


class Titles:
    """The linked notes of one note, found as a vault finds them: a path from the vault's root, else a note of
    that name beside the linking one, else anywhere in the vault. Only `.md` files inside the vault (or the
    note's own folder outside one) are opened, and only their first bytes; at most MAX_LINKS targets a note."""

    def __init__(self, note: Path, tick: Callable[[], None]) -> None:
        self.folder = note.parent
        self.root = _vault_root(self.folder)
        self.tick = tick
        self.found: dict[str, tuple[str | None, str | None]] = {}  # target -> (its path, its title)

    def _file(self, target: str) -> Path | None:
        name = target if target.lower().endswith(".md") else f"{target}.md"
        base = self.root or self.folder
        candidates = [base / name, self.folder / name] if "/" in target else [self.folder / name, base / name]
        inside = os.path.realpath(base)  # `[[../../x]]` or a symlink out of the vault opens nothing
        for candidate in candidates:
            if os.path.isfile(candidate) and Path(os.path.realpath(candidate)).is_relative_to(inside):
                return candidate
        if self.root is None or "/" in target:
            return None
        listed = _listing(self.root, int(time.monotonic() // _LISTING_SECONDS)).get(name[:-3].lower())
        if listed is None or not os.path.isfile(listed):
            return None
        return listed if Path(os.path.realpath(listed)).is_relative_to(inside) else None

    def lookup(self, target: str) -> tuple[str | None, str | None]:
        """(the linked note's path, its front-matter title), either None when not found."""
        if target not in self.found:
            if len(self.found) >= MAX_LINKS or not target or "\x00" in target:
                return None, None
            self.tick()
            path = self._file(target)
            self.found[target] = (str(path), _front_title(path)) if path is not None else (None, None)
        return self.found[target]


def _link_text(match: re.Match[str], titles: Titles | None) -> str:
    target, part, shown = (group.strip() if group else "" for group in match.groups())
    if shown:
        return shown
    title = titles.lookup(target)[1] if titles is not None and target else None
    name = title or target.rsplit("/", 1)[-1].removesuffix(".md")
    return f"{name} > {part}" if name and part else name or part


def read_note(text: str, body: str, fields: dict[str, str], titles: Titles | None = None) -> Note:
    """The vault parts of a markdown file: `text` is the whole file, `body` it without front matter, `fields`
    its one-line front matter fields (loaders._front_matter); `titles` finds the linked notes' titles."""
    front = _FRONT.match(text)
    tags: list[str] = []
    aliases: list[str] = []
    for source in (front.group(1) + "\n" if front else "", body[:4000]):  # Logseq properties sit at the top
        for key, raw in [*_BLOCK_LIST.findall(source), *_LOGSEQ.findall(source)]:
            (tags if key == "tags" else aliases).extend(_items(raw))
    if front:
        aliases.extend(item for _, raw in _INLINE_LIST.findall(front.group(1)) for item in _items(raw))
    prose = _CODE.sub(" ", body)
    tags.extend(match.group(1) for match in _INLINE_TAG.finditer(prose))
    links = list(dict.fromkeys(m.group(1).strip() for m in _WIKILINK.finditer(prose) if m.group(1).strip()))
    return Note(body=_WIKILINK.sub(lambda match: _link_text(match, titles), body),
                tags=list(dict.fromkeys(tag.lower() for tag in tags)),
                aliases=list(dict.fromkeys(aliases)), links=links, created_at=_day(fields.get("date")))
