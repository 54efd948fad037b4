"""The offline, deterministic answerer: the most relevant sentences of the retrieved chunks, each cited.

A sentence's score is the share of the question's content words (stemmed as the lexical index stems
them) that it contains, weighted by how rare each word is among the candidate sentences, plus a small
bonus for coming from a higher-ranked chunk. The best few are printed in document order per chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ragstead.answer.base import Context
from ragstead.answer.screening import screen
from ragstead.retrieval.lexical_query import query_terms
from ragstead.retrieval.sentences import split_sentences
from ragstead.stores.lexical_index import text_analyzer

MAX_SENTENCES = 3


class ExtractiveAnswerer:
    """`AnswerProvider` that never fails and never invents: it quotes retrieved sentences."""

    name = "extractive"

    def __init__(self, max_sentences: int = MAX_SENTENCES) -> None:
        self.max_sentences = max_sentences
        self._analyzer = text_analyzer()

    def _stems(self, text: str) -> set[str]:
        return set(self._analyzer.analyze(text))

    def answer(self, question: str, contexts: list[Context], on_text: Callable[[str], None] | None = None) -> str:
        wanted = set(self._analyzer.analyze(" ".join(query_terms(question))))
        candidates = []  # (context rank, position, sentence, stems)
        for rank, context in enumerate(contexts):
            for position, sentence in enumerate(split_sentences(context.text)):
                if not screen(sentence):  # never quote an instruction-like sentence
                    candidates.append((rank, position, context.n, sentence, self._stems(sentence) & wanted))
        if not candidates:
            return ""
        df = {term: sum(term in c[4] for c in candidates) for term in wanted}
        weight = {term: math.log(1 + len(candidates) / (1 + df[term])) for term in wanted}
        total = sum(weight.values()) or 1.0

        def score(c: tuple[int, int, int, str, set[str]]) -> float:
            return sum(weight[t] for t in c[4]) / total + 0.05 / (1 + c[0])

        ranked = sorted(candidates, key=lambda c: (-score(c), c[0], c[1]))
        chosen = [c for c in ranked[: self.max_sentences] if c[4]] or ranked[:1]
        chosen.sort(key=lambda c: (c[0], c[1]))
        text = " ".join(f"{sentence} [{n}]" for _, _, n, sentence, _ in chosen)
        if on_text:
            on_text(text)
        return text
