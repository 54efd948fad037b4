"""Sentence splitting shared by the extractive answerer and the sentence re-ranker."""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n\s*\n|\n(?=\s*[-*#\d])")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s.*$", re.M)
MIN_WORDS = 5
MAX_SENTENCE_CHARS = 400


def split_sentences(text: str) -> list[str]:
    """Sentences (or list items / paragraphs), whitespace-collapsed, markdown heading marks removed."""
    out = []
    text = _HEADING.sub("\n\n", text)  # a heading titles what follows; it is not a sentence of it
    for piece in _SENTENCE.split(text):
        sentence = " ".join(piece.split()).lstrip("#*- ").strip()
        if len(sentence.split()) >= MIN_WORDS:  # headings and fragments are not answers
            out.append(sentence if len(sentence) <= MAX_SENTENCE_CHARS else sentence[: MAX_SENTENCE_CHARS - 1] + "…")
    return out
