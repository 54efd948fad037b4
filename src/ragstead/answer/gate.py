"""The relevance gate of `ask`: answer, or refuse because nothing retrieved answers the question.

One cosine threshold did not carry over from the dataset it was calibrated on to short questions and personal
notes (docs/benchmarks.md, "The relevance gate"). The gate reads several signals of the retrieved chunks:

- `dense`: the best cosine of a retrieved chunk to the question (the old threshold's only signal);
- `lexical`: the best BM25 score divided by the most the question's words could score in this scope, the sum of
  each word's best single-word score, a word found nowhere counting as the rarest (so 0..1 in any store);
- `sentence`: the best cosine of one sentence of the top chunks to the question;
- `coverage`: the largest share of the question's words (stemmed) that one of the top chunks holds;
- `agreement`: the share of the vector side's top hits that the lexical side also ranks at the top;
- `evidence`: how likely the best sentence is to hold the answer (the sentence scorer of answer/evidence.py).

A logistic model over the signals, fitted by `python -m bench answers --fit` and shipped as gate_model.json,
turns them into a probability; at or above the model's threshold, `ask` answers. It is fitted on the default
embedding model's cosines; another catalogued model's cosines sit elsewhere (the multilingual e5 puts an off-topic
question's best sentence near 0.78, above MiniLM's answers at 0.56), so each such model has a linear map of its
cosines onto the default's scale (`cosine_maps`, fitted without labels by `python -m bench bilingual --fit`),
applied before any signal is read.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ragstead.answer.evidence import SentenceScorer, held_stems, in_context_text, question_stems, split_units
from ragstead.embeddings.base import Embedder
from ragstead.errors import RagsteadError
from ragstead.filters import QueryFilters
from ragstead.stores.base import Store

MODEL_FILE = "gate_model.json"
EVIDENCE_CHUNKS = 4  # the top chunks whose sentences are embedded: the gate and the extractive answerer read them
AGREEMENT_DEPTH = 5
# The model's probability is fitted on balanced classes, so below one half it rates "does not answer" the likelier;
# the threshold sits lower to answer 93 % of answerable questions. Answers between the two are marked tentative:
# that band holds most near misses the gate lets through (docs/design.md, "The relevance gate").
TENTATIVE_BELOW = 0.5


@dataclass(frozen=True)
class Candidate:
    """What the gate reads of one retrieved chunk, in the search's order."""

    text: str
    similarity: float  # cosine to the question
    lexical_score: float | None  # BM25, None when the lexical side did not return it
    lines: bool = False  # its lines are its units (evidence.line_structured)


@dataclass(frozen=True)
class Signals:
    """The gate's inputs for one question (module docstring)."""

    dense: float
    lexical: float
    sentence: float
    coverage: float
    agreement: float
    evidence: float

    def to_dict(self) -> dict[str, float]:
        return {name: round(float(value), 4) for name, value in asdict(self).items()}


@dataclass(frozen=True)
class GateModel:
    """A logistic model over named signals: p = sigmoid(bias + sum(weight * (signal - mean) / scale))."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    threshold: float
    sentence: SentenceScorer
    source: str = ""
    # embedder name -> (a, b): that model's cosine x is read as a + b * x (module docstring); absent: as it is
    cosine_maps: dict[str, tuple[float, float]] = field(default_factory=dict)

    def probability(self, signals: Signals) -> float:
        values = asdict(signals)
        z = self.bias + sum(w * (values[f] - m) / s for f, m, s, w in
                            zip(self.features, self.mean, self.scale, self.weights, strict=True))
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def cosine_map(self, embedder_name: str) -> tuple[float, float]:
        """(a, b) reading the embedder's cosine x as a + b * x on the default model's scale."""
        return self.cosine_maps.get(embedder_name, (0.0, 1.0))

    def to_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "mean": list(self.mean), "scale": list(self.scale),
                "weights": list(self.weights), "bias": self.bias, "threshold": self.threshold,
                "sentence": self.sentence.to_dict(),
                "cosine_maps": {name: list(ab) for name, ab in sorted(self.cosine_maps.items())}}


def confidence(probability: float, passed: bool) -> str:
    """How sure `ask` is: `refused`, `tentative` (answered, but the gate rates the retrieved text no likelier to
    answer than not) or `likely`."""
    if not passed:
        return "refused"
    return "tentative" if probability < TENTATIVE_BELOW else "likely"


class GateModelError(RagsteadError):
    """A gate model file that cannot be read or does not validate."""


def parse_model(raw: dict[str, Any], source: str = "") -> GateModel:
    """A validated GateModel from its JSON form."""
    try:
        features = tuple(str(f) for f in raw["features"])
        unknown = set(features) - set(Signals.__dataclass_fields__)
        if unknown:
            raise GateModelError(f"gate model {source}: unknown signals {sorted(unknown)}")
        vectors = [tuple(float(x) for x in raw[key]) for key in ("mean", "scale", "weights")]
        if any(len(v) != len(features) for v in vectors) or any(s <= 0 for s in vectors[1]):
            raise GateModelError(f"gate model {source}: mean, scale and weights need one positive scale per feature")
        maps = {str(name): (float(a), float(b)) for name, (a, b) in raw.get("cosine_maps", {}).items()}
        if any(b <= 0 for _, b in maps.values()):
            raise GateModelError(f"gate model {source}: a cosine map must keep the order (b > 0)")
        return GateModel(features, vectors[0], vectors[1], vectors[2], float(raw["bias"]), float(raw["threshold"]),
                         SentenceScorer.from_dict(raw["sentence"]), source, maps)
    except (KeyError, TypeError, ValueError) as exc:
        raise GateModelError(f"gate model {source}: {exc!r}") from exc


@lru_cache(maxsize=4)
def load_model(path: str | None = None) -> GateModel:
    """The shipped model (answer/gate_model.json), or the one at `path`."""
    try:
        if path is None:
            text = (resources.files("ragstead.answer") / MODEL_FILE).read_text(encoding="utf-8")
            return parse_model(json.loads(text), MODEL_FILE)
        return parse_model(json.loads(Path(path).read_text(encoding="utf-8")), path)
    except (OSError, json.JSONDecodeError) as exc:
        raise GateModelError(f"gate model {path or MODEL_FILE}: {exc}") from exc


def lexical_ceilings(store: Store, terms: Sequence[str], filters: QueryFilters) -> dict[str, float]:
    """Each word's best single-word BM25 score in the scope (0 where it is found nowhere): what `attainable`
    and the gate's lexical signal measure a question's, or a list topic's, words against."""
    return {term: max((score for _, score in store.lexical_search([term], filters, 1)), default=0.0)
            for term in terms}


def attainable(ceilings: dict[str, float]) -> float:
    """The most the question's words could score together: each word's best single-word BM25 score, a word
    found nowhere in scope counting as the rarest one found. 0 when no word is found at all."""
    found = [score for score in ceilings.values() if score > 0]
    if not found:
        return 0.0
    rarest = max(found)
    return sum(score if score > 0 else rarest for score in ceilings.values())


def measure(question: str, candidates: Sequence[Candidate], unit_similarities: dict[int, Sequence[float]],
            ceilings: dict[str, float], scorer: SentenceScorer,
            cosine: tuple[float, float] = (0.0, 1.0)) -> tuple[Signals, dict[int, list[float]]]:
    """The signals for `question` over `candidates` (the search's order). `unit_similarities[i]`: the cosine of
    each unit of candidate i (`split_units` order), for the top EVIDENCE_CHUNKS. `ceilings`: each query word's
    best single-word BM25 score in scope. `cosine`: the embedder's map onto the default model's scale
    (GateModel.cosine_map). Also returns each scored candidate's unit answer scores."""
    if not candidates:
        return Signals(0.0, 0.0, 0.0, 0.0, 0.0, 0.0), {}
    candidates, unit_similarities = _on_default_scale(candidates, unit_similarities, cosine)
    dense = max(c.similarity for c in candidates)
    ceiling = attainable(ceilings)
    lexical_scores = [c.lexical_score for c in candidates if c.lexical_score is not None]
    lexical = min(1.0, max(lexical_scores) / ceiling) if lexical_scores and ceiling > 0 else 0.0
    wanted = question_stems(question)
    top = list(candidates[:EVIDENCE_CHUNKS])
    coverage = max((len(held_stems(c.text, question, wanted)) / len(wanted) for c in top),
                   default=0.0) if wanted else 0.0
    agreement = _agreement(candidates)
    items = [(i, unit, unit_similarities[i][p]) for i in sorted(unit_similarities)
             for p, unit in enumerate(split_units(candidates[i].text, candidates[i].lines))]
    scores = scorer.score(question, items)
    per_chunk: dict[int, list[float]] = {i: [] for i in unit_similarities}
    for (i, _, _), value in zip(items, scores, strict=True):
        per_chunk[i].append(value)
    sentence = float(max((similarity for _, _, similarity in items), default=dense))
    evidence = float(max(scores, default=0.0))
    return Signals(dense, lexical, sentence, coverage, agreement, evidence), per_chunk


def _on_default_scale(candidates: Sequence[Candidate], unit_similarities: dict[int, Sequence[float]],
                      cosine: tuple[float, float]) -> tuple[Sequence[Candidate], dict[int, Sequence[float]]]:
    """The candidates' and units' cosines read through the embedder's map (a, b): a + b * x."""
    a, b = cosine
    if (a, b) == (0.0, 1.0):
        return candidates, unit_similarities
    return ([replace(c, similarity=a + b * c.similarity) for c in candidates],
            {i: [a + b * float(x) for x in v] for i, v in unit_similarities.items()})


def _agreement(candidates: Sequence[Candidate]) -> float:
    """The share of the vector side's top AGREEMENT_DEPTH hits that the lexical side also ranks there."""
    by_vector = sorted(range(len(candidates)), key=lambda i: -candidates[i].similarity)[:AGREEMENT_DEPTH]
    by_lexical = sorted((i for i, c in enumerate(candidates) if c.lexical_score is not None),
                        key=lambda i: -(candidates[i].lexical_score or 0.0))[:AGREEMENT_DEPTH]
    return len(set(by_vector) & set(by_lexical)) / AGREEMENT_DEPTH


class UnitVectorCache:
    """The vectors of a chunk's units, by chunk text (LRU): the same chunks come back for related questions, and
    embedding sentences is most of what the gate costs."""

    def __init__(self, embedder: Embedder, size: int = 2048) -> None:
        self.embedder = embedder
        self.size = size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(self, text: str, lines: bool = False) -> np.ndarray:
        """One row per unit of `text` (`split_units(text, lines)` order); (0, dim) for a chunk without any. Each
        unit is embedded after its headings ("Plumber: Kessler Haustechnik, 0316 44 18 02"): the gate and the
        reader both read it so (docs/benchmarks.md, "The reader": the gate separates better, and costs the same)."""
        key = f"\0lines\0{text}" if lines else text
        with self._lock:
            if key in self._vectors:
                self._vectors.move_to_end(key)
                return self._vectors[key]
        units = [in_context_text(unit) for unit in split_units(text, lines)]
        matrix = (np.asarray(self.embedder.embed_documents(units), dtype=np.float32) if units
                  else np.zeros((0, self.embedder.dim), dtype=np.float32))
        with self._lock:
            self._vectors[key] = matrix
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return matrix
