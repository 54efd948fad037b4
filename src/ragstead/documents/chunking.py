"""Chunkers. Every chunk keeps its char offsets into the document text, so citations can point back.

- `words` (default): windows of `chunk_size` words with `overlap` words shared.
- `sentences`: sentence-aligned pieces of ~`max_chars`, `overlap_chars` carried over,
  pieces shorter than `min_chars` merged into the one before.
- `markdown`: heading-aware; each section is split into word windows and carries its
  `section_path` ("Guide > Install > Linux").

Whatever the chunker, no chunk is longer than `max_chunk_chars`: a longer one is cut at its last space
before the limit, or inside a word when there is none (a 50 MB token without spaces is many chunks, not one).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ragstead.errors import ConfigError

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n{2,}")
# Linear: the title's trailing " #" is stripped in Python (a lazy `(.+?)[ \t#]*$` is quadratic on a long line).
_HEADING = re.compile(r"^(#{1,6})[ \t]([^\n]+)$", re.MULTILINE)


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
    max_chunk_chars: int = 4000

    def describe(self) -> str:
        """The settings that decide where chunks start and end, as the index records them."""
        sizes = (f"max_chars={self.max_chars} overlap_chars={self.overlap_chars} min_chars={self.min_chars}"
                 if self.strategy == "sentences" else f"chunk_size={self.chunk_size} overlap={self.overlap}")
        return f"chunker={self.strategy} {sizes} max_chunk_chars={self.max_chunk_chars}"

    def __post_init__(self) -> None:
        if self.strategy not in CHUNKERS:
            raise ConfigError(f"unknown chunker {self.strategy!r}; use one of {sorted(CHUNKERS)}")
        if self.chunk_size < 1 or not 0 <= self.overlap < self.chunk_size:
            raise ConfigError("chunking needs chunk_size >= 1 and 0 <= overlap < chunk_size")
        if self.max_chars < 1 or not 0 <= self.overlap_chars < self.max_chars:
            raise ConfigError("chunking needs max_chars >= 1 and 0 <= overlap_chars < max_chars")
        if self.max_chunk_chars < 1:
            raise ConfigError("chunking needs max_chunk_chars >= 1")


def _cut_points(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Split text[start:end] into spans of at most `limit` chars: at the last whitespace in the second half of
    each window, else (one giant token) right at the limit. Whitespace between spans belongs to none."""
    spans = []
    while end - start > limit:
        window = text[start : start + limit]
        space = max(window.rfind(c) for c in " \t\n\r\f\v")
        if space > limit // 2:
            stop, start_next = start + space, start + space + 1
            while stop > start and text[stop - 1].isspace():
                stop -= 1
        else:
            stop = start_next = start + limit
        spans.append((start, stop))
        start = start_next
        while start < end and text[start].isspace():
            start += 1
    if start < end:
        spans.append((start, end))
    return spans


Chunker = Callable[[str, ChunkingOptions], list[TextChunk]]


def _capped(chunker: Chunker) -> Chunker:
    """Make a chunker cut every chunk longer than `options.max_chunk_chars`, keeping offsets and word numbers."""

    @functools.wraps(chunker)
    def capped(text: str, options: ChunkingOptions) -> list[TextChunk]:
        chunks = chunker(text, options)
        limit = options.max_chunk_chars
        if all(len(c.text) <= limit for c in chunks):
            return chunks
        out: list[TextChunk] = []
        for chunk in chunks:
            if len(chunk.text) <= limit:
                out.append(replace(chunk, index=len(out)))
                continue
            # Word numbers inside the chunk: a piece starting inside a word counts from that word.
            starts = [m.start() for m in _WORD.finditer(text, chunk.char_start, chunk.char_end)]
            for s, e in _cut_points(text, chunk.char_start, chunk.char_end, limit):
                first = max(bisect.bisect_right(starts, s) - 1, 0)
                out.append(TextChunk(len(out), text[s:e], chunk.start_word + first,
                                     chunk.start_word + bisect.bisect_left(starts, e), s, e, chunk.section_path))
        return out

    return capped


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


@_capped
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
    return bisect.bisect_left(word_starts, char_offset)


@_capped
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


def _heading_title(rest: str) -> str:
    """The title after `#… `: leading blanks and a closing run of " #" dropped (a title of only '#'s keeps one)."""
    body = rest.lstrip(" \t")
    return (body.rstrip(" \t#") or body[:1]).strip()


def _sections(text: str) -> list[tuple[int, int, str | None]]:
    """(start, end, heading breadcrumb) of each stretch of markdown between ATX headings, in order."""
    headings = list(_HEADING.finditer(text))
    bounds = [(0, None)] + [(h.start(), h) for h in headings]
    stack: list[tuple[int, str]] = []
    out = []
    for n, (start, heading) in enumerate(bounds):
        end = bounds[n + 1][0] if n + 1 < len(bounds) else len(text)
        if heading is not None:
            level = len(heading.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, _heading_title(heading.group(2))))
        out.append((start, end, " > ".join(title for _, title in stack) or None))
    return out


def fill_section_paths(text: str, chunks: list[TextChunk]) -> None:
    """Give chunks of a markdown document cut by another strategy the breadcrumb of the section they start
    in, so citations name the section (and a transcript chunk its `## m:ss` start time)."""
    sections = _sections(text)
    starts = [start for start, _, _ in sections]
    for chunk in chunks:
        if chunk.section_path is None:
            chunk.section_path = sections[max(0, bisect.bisect_right(starts, chunk.char_start) - 1)][2]


@_capped
def chunk_markdown(text: str, options: ChunkingOptions) -> list[TextChunk]:
    """Split at ATX headings, keep the heading breadcrumb as `section_path`."""
    chunks: list[TextChunk] = []
    word_starts = [m.start() for m in _WORD.finditer(text)]
    for start, end, path in _sections(text):
        section = text[start:end]
        if not section.strip():
            continue
        base_word = _word_index_at(word_starts, start)
        for t, sw, ew, cs, ce in _word_windows(section, options.chunk_size, options.overlap, start, base_word):
            chunks.append(TextChunk(len(chunks), t, sw, ew, cs, ce, section_path=path))
    return chunks


CHUNKERS: dict[str, Chunker] = {
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
