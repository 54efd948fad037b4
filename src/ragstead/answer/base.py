"""What an answer is made of, and the seam every answerer plugs into."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragstead.errors import ProviderError as ProviderError  # re-exported: the answerers import it from here

REFUSAL = "I could not find relevant information in the uploaded documents."


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
    locator: dict[str, Any]
    similarity: float
    flags: list[str] = field(default_factory=list)  # prompt-injection screening reasons; [] when clean

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the prompt passes to a model: the chunk as data, with its breadcrumbs."""
        crumb = breadcrumb(self.source, self.locator.get("section_path"), self.locator.get("page"))
        return {"n": self.n, "source": self.source, "breadcrumb": crumb, **self.locator,
                "flagged_as_instructions": self.flags, "text": self.text}


class AnswerProvider(Protocol):
    """Writes an answer from the contexts only, citing them as [n]. Raises ProviderError to pass."""

    name: str

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        """The answer text with [n] markers; `on_text` receives it piece by piece while it streams."""
        ...
