"""The reader: which retrieved unit answers the question.

A logistic model over what `ask` already computes, trained on public question-answering data by
`python -m bench train-reader` (SQuAD 2.0's train split, never its dev split; docs/benchmarks.md, "The reader")
and shipped as reader_model.json. It scores (question, unit in its context: the note's title › heading › the unit)
for "this unit answers the question" from the unit's cosine to the question read after its headings, its chunk's
cosine, how much of the question (rarity-weighted) the unit and its headings hold, the rarest question word they
lack, whether it holds the kind of value asked for, and where it sits. Its weights are a few dozen numbers read by
numpy: no runtime dependency. The extractive answerer leads with the unit it scores best.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ragstead.answer.evidence import (
    CONTEXT_SHARE,
    Unit,
    answer_kind,
    header_answers,
    held_stems,
    holds_kind,
    other_end_only,
    question_stems,
    stems_of,
)
from ragstead.errors import RagsteadError

MODEL_FILE = "reader_model.json"
KINDS = ("date", "quantity", "person", "place", "entity")
UNIT_FEATURES = ("cosine", "cosine_gap", "chunk_cosine", "overlap", "overlap_gap", "context_overlap", "missing",
                 *(f"holds_{k}" for k in KINDS), *(f"lacks_{k}" for k in KINDS), "rank", "position", "length")


@dataclass(frozen=True)
class Item:
    """One unit as the reader reads it: its chunk's rank among the retrieved, the unit, its cosine to the
    question (embedded after its headings: evidence.in_context_text), and its chunk's cosine."""

    rank: int
    unit: Unit
    similarity: float
    chunk_similarity: float


def unit_rows(question: str, items: Sequence[Item]) -> tuple[np.ndarray, np.ndarray]:
    """One row of UNIT_FEATURES per item, and which items are blocked: a header-like line that does not answer,
    or the other end's date of a span the question asks about, may not lead (a rule: SQuAD's paragraphs, which
    the weights are fitted on, have no such lines). Rarity weights come from the items themselves (a word every
    candidate holds decides nothing), so a row means the same in a SQuAD paragraph and a personal note."""
    if not items:
        return np.zeros((0, len(UNIT_FEATURES))), np.zeros(0, dtype=bool)
    wanted = question_stems(question)
    held = [held_stems(item.unit.text, question, wanted) for item in items]
    inherited = [held_stems(item.unit.context, question, wanted) - have if item.unit.context else set()
                 for item, have in zip(items, held, strict=True)]
    weight = {t: math.log(1 + len(items) / (1 + sum(t in h for h in held))) for t in wanted}
    total, rarest = sum(weight.values()) or 1.0, max(weight.values(), default=1.0) or 1.0
    kind = answer_kind(question)
    rows = [[item.similarity, 0.0, item.chunk_similarity,
             sum(weight[t] for t in have) / total, 0.0, sum(weight[t] for t in above) / total,
             max((weight[t] for t in wanted - have - above), default=0.0) / rarest,
             *_kind_flags(item.unit.text, kind, question),
             1.0 / (1 + item.rank), 1.0 / (1 + item.unit.position), math.log1p(len(item.unit.text.split()))]
            for item, have, above in zip(items, held, inherited, strict=True)]
    blocked = [not header_answers(item.unit, kind, wanted, stems_of(item.unit.header or "")) or (
        kind == "date" and other_end_only(item.unit.text, question)) for item in items]
    out = np.asarray(rows, dtype=np.float64)
    out[:, 1] = out[:, 0] - out[:, 0].max()
    out[:, 4] = out[:, 3] - out[:, 3].max()
    return out, np.asarray(blocked, dtype=bool)


def _kind_flags(text: str, kind: str | None, question: str) -> list[float]:
    """holds_<kind> and lacks_<kind> for each kind (KINDS): only the asked kind's pair can be set."""
    holds = holds_kind(text, kind, question)
    return [*(float(kind == k and holds) for k in KINDS), *(float(kind == k and not holds) for k in KINDS)]


@dataclass(frozen=True)
class Logistic:
    """p = sigmoid(bias + weights · (x - mean) / scale) over named features."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        if rows.size == 0:
            return np.zeros(len(rows))
        z = self.bias + ((rows - self.mean) / self.scale) @ self.weights
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))

    @classmethod
    def from_dict(cls, raw: dict[str, Any], expected: tuple[str, ...]) -> Logistic:
        features = tuple(raw["features"])
        if features != expected:
            raise ReaderModelError(f"reader model: features {features} are not {expected}")
        arrays = [np.asarray(raw[key], dtype=np.float64) for key in ("mean", "scale", "weights")]
        if any(a.shape != (len(features),) for a in arrays) or (arrays[1] <= 0).any():
            raise ReaderModelError("reader model: mean, scale and weights need one positive scale per feature")
        return cls(features, arrays[0], arrays[1], arrays[2], float(raw["bias"]))

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "weights": self.weights.tolist(), "bias": self.bias}


class ReaderModelError(RagsteadError):
    """A reader model file that cannot be read or does not validate."""


@dataclass(frozen=True)
class Reader:
    """The unit model and the card that says what it was trained on and how it measured."""

    unit: Logistic
    card: dict[str, Any]

    def read(self, question: str, items: Sequence[Item]) -> tuple[np.ndarray, np.ndarray]:
        """How likely each item is to answer the question (items' order; a blocked item scores 0), and the
        feature rows that say so (`question_share`, `holds_asked` read them)."""
        rows, blocked = unit_rows(question, items)
        scores = self.unit(rows)
        scores[blocked] = 0.0
        return scores, rows

    def unit_scores(self, question: str, items: Sequence[Item]) -> np.ndarray:
        return self.read(question, items)[0]

    def to_dict(self) -> dict[str, Any]:
        return {"unit": self.unit.to_dict(), "card": self.card}


def question_share(rows: np.ndarray) -> np.ndarray:
    """Per row: the share of the question's rarity-weighted words its unit holds, a word only in its headings
    counting CONTEXT_SHARE (the extractive answerer's bar for a sentence that adds to the lead)."""
    return rows[:, UNIT_FEATURES.index("overlap")] + CONTEXT_SHARE * rows[:, UNIT_FEATURES.index("context_overlap")]


def holds_asked(rows: np.ndarray) -> np.ndarray:
    """Per row: whether its unit holds the kind of value the question asks for."""
    first = UNIT_FEATURES.index(f"holds_{KINDS[0]}")
    return rows[:, first:first + len(KINDS)].max(axis=1, initial=0.0) > 0


def parse_reader(raw: dict[str, Any]) -> Reader:
    try:
        return Reader(Logistic.from_dict(raw["unit"], UNIT_FEATURES), dict(raw.get("card", {})))
    except (KeyError, TypeError, ValueError) as exc:
        raise ReaderModelError(f"reader model: {exc!r}") from exc


@lru_cache(maxsize=4)
def load_reader(path: str | None = None) -> Reader:
    """The shipped reader (answer/reader_model.json), or the one at `path`."""
    try:
        text = (resources.files("ragstead.answer") / MODEL_FILE).read_text(encoding="utf-8") if path is None else (
            Path(path).read_text(encoding="utf-8"))
        return parse_reader(json.loads(text))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReaderModelError(f"reader model {path or MODEL_FILE}: {exc}") from exc
