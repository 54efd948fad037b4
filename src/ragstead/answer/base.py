"""What an answer is made of, and the seam every answerer plugs into."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragstead.errors import ProviderError as ProviderError  # re-exported: the answerers import it from here
from ragstead.records import Record
from ragstead.request.fields import REFUSAL as REFUSAL  # re-exported: the answerers and doors import it here


@dataclass(frozen=True)
class Locator(Record):
    """Where a cited chunk sits: its page (PDF), section path (markdown chunker), a heading a person recognises
    and its chunk id; for an ingested document also its `url`, the `link` a citation opens (a video: at
    `video_time` seconds) and its `title`; for a tool's result the `tool`. `to_dict()` is the ask JSON's."""

    page: int | None
    section_path: str | None
    heading: str | None
    chunk_id: str
    url: str | None = None
    link: str | None = None
    video_time: int | None = None
    title: str | None = None
    tool: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"page": self.page, "section_path": self.section_path, "heading": self.heading,
                                "chunk_id": self.chunk_id, "title": self.title}
        if self.tool is not None:
            data["tool"] = self.tool
        if self.url is not None:
            data |= {"url": self.url, "link": self.link, "video_time": self.video_time}
        return data

@dataclass(frozen=True)
class Listing(Record):
    """What a complete answer to a list or count question (answer/listing.py) adds to the ask JSON: its `kind`
    (`list` or `count`), the `topic` it matched, how many documents of the scope it `examined` and how many
    `matched`, whether the whole scope was read (`complete`), and the page of matches it cites (`offset`,
    `limit`, `next_offset`: None on the last page)."""

    kind: str
    topic: str
    examined: int
    matched: int
    complete: bool
    offset: int
    limit: int
    next_offset: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "topic": self.topic, "examined": self.examined, "matched": self.matched,
                "complete": self.complete, "offset": self.offset, "limit": self.limit,
                "next_offset": self.next_offset}


# The answerers' prompts teach the refusal sentence; `ask` reads it (or the project's) back as a refusal.
# The cosine threshold `ask` used before the relevance gate (`python -m bench refusal`, SciFact train); an
# explicit `min_similarity` still applies it instead of the gate (docs/cli.md, `ragstead ask`). Kept here, in a
# light module, because the CLI's help text shows it and `ragstead -h` must not load answer/ask.py's numpy.
DEFAULT_MIN_SIMILARITY = 0.428


def breadcrumb(source: str, section_path: str | None = None, page: int | None = None) -> str:
    """Where a chunk sits, for people and models: `file › section › subsection › p. N`."""
    parts = [source]
    if section_path:
        parts += [s.strip() for s in section_path.split(">") if s.strip()]
    if page:
        parts.append(f"p. {page}")
    return " › ".join(parts)


@dataclass
class Context:
    """One retrieved chunk handed to an answerer, numbered `n` for its citation marker `[n]`."""

    n: int
    text: str
    source: str
    locator: Locator
    similarity: float | None  # cosine to the question; None for a tool's result (answer/tools.py)
    flags: list[str] = field(default_factory=list)  # prompt-injection screening reasons; [] when clean
    # The cosine of each sentence of `text` (answer/evidence.py's `split_units` order) to the question, for the
    # chunks whose sentences `ask` scored; () otherwise. Not part of what a model reads.
    unit_similarities: tuple[float, ...] = ()
    local_only: bool = False  # never handed to a remote answerer (answer/consent.py)
    # Its document's day (YYYY-MM-DD: front matter date, else a date in its path, else its mtime); None unknown.
    # Of two that disagree, the newer wins (answer/supersession.py).
    date: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the prompt passes to a model: the chunk as data, with its breadcrumbs (and its document's
        `date` when known, so a model can prefer the newer of two documents that disagree)."""
        crumb = breadcrumb(self.source, self.locator.get("section_path"), self.locator.get("page"))
        dated = {"date": self.date} if self.date else {}
        return {"n": self.n, "source": self.source, "breadcrumb": crumb, **dated, **self.locator,
                "flagged_as_instructions": self.flags, "text": self.text}


class AnswerProvider(Protocol):
    """Writes an answer from the contexts only, citing them as [n]. Raises ProviderError to pass."""

    name: str

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        """The answer text with [n] markers; `on_text` receives it piece by piece while it streams."""
        ...


class ToolBox(Protocol):
    """The tools one answer may call (answer/tools.py): `specs` describe them to a model (name, description,
    JSON schema of the arguments); `call` runs one and returns what the model reads next: the result with the
    number `n` it is cited by, or `{"error": ...}` (refused or failed; the answer goes on without it)."""

    @property
    def specs(self) -> list[dict[str, Any]]:  # read-only: a session's tools are fixed when it starts
        ...

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        ...


class ToolCallingProvider(AnswerProvider, Protocol):
    """An answerer that can ask for tool calls while it answers (the LLM answerers; never the extractive one)."""

    def answer_with_tools(self, question: str, contexts: list[Context], tools: ToolBox,
                          on_text: Callable[[str], None] | None = None) -> str:
        """As `answer`, and the model may call `tools`; their results are cited like documents."""
        ...
