"""Chunkers. Every chunk keeps its char offsets into the document text, so citations can point back.

- `words` (default): windows of `chunk_size` words with `overlap` words shared.
- `sentences`: sentence-aligned pieces of ~`max_chars`, `overlap_chars` carried over,
  pieces shorter than `min_chars` merged into the one before.
- `markdown`: heading-aware; each section is split into word windows and carries its
  `section_path` ("Guide > Install > Linux").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ragstead.errors import ConfigError

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n{2,}")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


@dataclass
class TextChunk:
    """One chunk: its text and where it sits in the document (words and chars; end is exclusive)."""

    index: int
    text: str
    start_word: int
    end_word: int
    char_start: int
    char_end: int
    section_path: str | None = None


@dataclass(frozen=True)
class ChunkingOptions:
    """Chunker choice and sizes (default: `words`, 400-word windows, 80 words shared)."""

    strategy: str = "words"
    chunk_size: int = 400
    overlap: int = 80
    max_chars: int = 800
    overlap_chars: int = 200
    min_chars: int = 100

    def __post_init__(self) -> None:
        if self.strategy not in CHUNKERS:
            raise ConfigError(f"unknown chunker {self.strategy!r}; use one of {sorted(CHUNKERS)}")
        if self.chunk_size < 1 or not 0 <= self.overlap < self.chunk_size:
            raise ConfigError("chunking needs chunk_size >= 1 and 0 <= overlap < chunk_size")
        if self.max_chars < 1 or not 0 <= self.overlap_chars < self.max_chars:
            raise ConfigError("chunking needs max_chars >= 1 and 0 <= overlap_chars < max_chars")


def _word_windows(
    text: str, chunk_size: int, overlap: int, base_char: int = 0, base_word: int = 0
) -> list[tuple[str, int, int, int, int]]:
    spans = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    windows = []
    step = chunk_size - overlap
    start = 0
    while start < len(spans):
        end = min(start + chunk_size, len(spans))
        char_start, char_end = spans[start][0], spans[end - 1][1]
        windows.append(
            (text[char_start:char_end], base_word + start, base_word + end,
             base_char + char_start, base_char + char_end)
        )
        if end == len(spans):
            break
        start += step
    return windows


def chunk_words(text: str, options: ChunkingOptions) -> list[TextChunk]:
    """Word windows of `chunk_size` words with `overlap` words shared (the default chunker)."""
    return [
        TextChunk(i, t, sw, ew, cs, ce)
        for i, (t, sw, ew, cs, ce) in enumerate(_word_windows(text, options.chunk_size, options.overlap))
    ]


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        if text[start : match.start()].strip():
            spans.append((start, match.start()))
        start = match.end()
    if text[start:].strip():
        spans.append((start, len(text)))
    return spans


def _word_index_at(word_starts: list[int], char_offset: int) -> int:
    import bisect

    return bisect.bisect_left(word_starts, char_offset)


def chunk_sentences(text: str, options: ChunkingOptions) -> list[TextChunk]:
    """Sentence-aligned ~max_chars pieces with overlap; tiny trailing pieces merged back."""
    sentences = _sentence_spans(text)
    pieces: list[tuple[int, int]] = []
    i = 0
    while i < len(sentences):
        start, end = sentences[i]
        j = i + 1
        while j < len(sentences) and sentences[j][1] - start <= options.max_chars:
            end = sentences[j][1]
            j += 1
        pieces.append((start, end))
        if j >= len(sentences):
            break
        # Step back over trailing sentences that fit in the overlap budget, but always advance.
        k = j
        while k - 1 > i and end - sentences[k - 1][0] <= options.overlap_chars:
            k -= 1
        i = max(k, i + 1)
    merged: list[tuple[int, int]] = []
    for start, end in pieces:
        if merged and end - start < options.min_chars:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    word_starts = [m.start() for m in _WORD.finditer(text)]
    return [
        TextChunk(
            n, text[s:e], _word_index_at(word_starts, s), _word_index_at(word_starts, e), s, e
        )
        for n, (s, e) in enumerate(merged)
    ]


def chunk_markdown(text: str, options: ChunkingOptions) -> list[TextChunk]:
    """Split at ATX headings, keep the heading breadcrumb as `section_path`."""
    headings = list(_HEADING.finditer(text))
    bounds = [(0, None)] + [(h.start(), h) for h in headings]
    stack: list[tuple[int, str]] = []
    chunks: list[TextChunk] = []
    word_starts = [m.start() for m in _WORD.finditer(text)]
    for n, (start, heading) in enumerate(bounds):
        end = bounds[n + 1][0] if n + 1 < len(bounds) else len(text)
        if heading is not None:
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading.group(2).strip()))
        section = text[start:end]
        if not section.strip():
            continue
        path = " > ".join(title for _, title in stack) or None
        base_word = _word_index_at(word_starts, start)
        for t, sw, ew, cs, ce in _word_windows(section, options.chunk_size, options.overlap, start, base_word):
            chunks.append(TextChunk(len(chunks), t, sw, ew, cs, ce, section_path=path))
    return chunks


CHUNKERS: dict[str, Callable[[str, ChunkingOptions], list[TextChunk]]] = {
    "words": chunk_words,
    "sentences": chunk_sentences,
    "markdown": chunk_markdown,
}


def chunk_text(text: str, options: ChunkingOptions | None = None) -> list[TextChunk]:
    """Chunk `text` with the configured strategy (default: 400-word windows, 80 overlap)."""
    options = options or ChunkingOptions()
    return CHUNKERS[options.strategy](text, options)


def estimate_tokens(text: str) -> int:
    """Rough token count (~4 chars per token for English BPE), used for context budgeting."""
    return max(1, (len(text) + 3) // 4)
