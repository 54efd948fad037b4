"""Obsidian and Logseq notes: what a vault adds to markdown, read without a YAML parser.

- front matter block lists (`tags:` / `aliases:` followed by `- item` lines) and `date:`;
- Logseq page properties (`tags:: a, [[b]]`, `alias:: c`);
- inline `#tags` outside code (`#project/alpha` stays one tag), which become ragstead tags so `--tag` finds them;
- `[[wikilinks]]`: `[[Note|shown]]` reads "shown", `[[Note#Part]]` reads "Note > Part", `[[Note]]` reads
  "Note" (the linked note's name, as the vault shows it); the targets are kept as the note's links.

The `.obsidian/` and `.trash/` folders are hidden folders, which the index walk never enters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

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


def _link_text(match: re.Match[str]) -> str:
    target, part, shown = (group.strip() if group else "" for group in match.groups())
    if shown:
        return shown
    name = target.rsplit("/", 1)[-1].removesuffix(".md")
    return f"{name} > {part}" if name and part else name or part


def read_note(text: str, body: str, fields: dict[str, str]) -> Note:
    """The vault parts of a markdown file: `text` is the whole file, `body` it without front matter, `fields`
    its one-line front matter fields (loaders._front_matter)."""
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
    return Note(body=_WIKILINK.sub(_link_text, body),
                tags=list(dict.fromkeys(tag.lower() for tag in tags)),
                aliases=list(dict.fromkeys(aliases)), links=links, created_at=_day(fields.get("date")))
