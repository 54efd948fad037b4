"""`python -m bench answers [--fit]`: does `ask` answer what the documents say, refuse what they do not, and quote
the sentence that answers? The relevance gate against the cosine threshold it replaced, in the same run.

Two calibration sources:
- the notes set (tests/data/notes: 43 personal and team notes in md, txt, html, docx and pdf; answerable questions
  with the fact the answer must contain, near-miss questions on the same topics that the notes do not answer, and
  off-topic questions), split into a fit half and a held-out half by note topic;
- SciFact (BEIR): train queries answerable (full corpus) and near-miss (the query's relevant abstracts removed,
  as `bench refusal` does), plus 30 off-topic questions; the test split, with 30 other off-topic questions, is
  only ever measured, never fitted.
A second public BEIR set is not available here (docs/benchmarks.md says what was searched).
The fresh notes set (tests/data/notes_fresh: 22 other notes, 28 answerable, 12 near-miss and 12 off-topic
questions, written and committed before anything was scored on it) is only ever measured, never fitted: its own
rows ("notes fresh") beside the fit and held-out halves.

Every run fits the gate three ways (notes fit half, SciFact train, both) and reports each on the data it was not
fitted on; `--fit` also writes the model fitted on both to src/ragstead/answer/gate_model.json. The sentence
scorer (which sentence holds the answer) is fitted on the notes fit half only: only the notes say which sentence
answers. Notes answers are produced by the real `ask` path (gather + the extractive answerer). The ceiling table
says how far any gate over these signals could go: each set's best single signal and a logistic fitted on the set
itself, both read at 90 % answered.
Needs the SciFact index that `python -m bench quality` keeps in bench/results/.cache/.
"""

from __future__ import annotations

import json
import math
import pickle
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import RESULTS, Timer, write_results
from bench.refusal_calibration import OFF_TOPIC as SCIFACT_OFF_TOPIC

NOTES = Path(__file__).resolve().parents[1] / "tests" / "data" / "notes"
FRESH = Path(__file__).resolve().parents[1] / "tests" / "data" / "notes_fresh"
MODEL_PATH = Path(__file__).resolve().parents[1] / "src" / "ragstead" / "answer" / "gate_model.json"
# SciFact test's off-topic questions: 30 others than the fit list (bench/refusal_calibration.py), written in the same
# everyday style before any was scored, so the test rows hold no question the gate was fitted on.
SCIFACT_OFF_TOPIC_HELDOUT = [
    "how do I unclog a kitchen sink", "what is the best way to store fresh basil", "how to fold a fitted sheet",
    "when does the supermarket close on sundays", "how long does it take to drive from Paris to Lyon",
    "what is the score of the tennis final", "how to make cold brew coffee at home",
    "best board games for four players", "how do I change my email signature",
    "what is the tallest building in the world", "how to sharpen a kitchen knife",
    "cheapest way to send a parcel abroad", "how to grow tomatoes on a balcony",
    "what year did the first moon landing happen", "how do I cancel a streaming subscription",
    "ideas for a child's birthday party", "how to jump start a car battery", "what does a notary do",
    "how much should I tip at a restaurant", "how to clean white sneakers",
    "where can I watch the new season of my favourite show", "how to plan a weekend in Rome",
    "what is the difference between a latte and a cappuccino", "how do I back up my phone photos",
    "how to hang a picture without nails", "how to make a paper airplane that flies far",
    "what is the speed limit on the motorway", "how to get a library card", "which wood is best for a campfire",
    "how do I translate a word into Spanish",
]
LEGACY_THRESHOLD = 0.428
K = 8
FIT_ANSWER_RATE = 0.93  # the threshold is the highest that still answers this share of every fit set's answerable
L2 = 1.0


# -- observing: one search per question, everything the gate reads, reusable with documents taken out ---------

@dataclass
class Observation:
    """One question's retrieval, deep enough that a view without some documents still has K hits."""

    question: str
    hits: list[Any]
    similarities: list[float]
    lexical: dict[str, float]
    ceilings: dict[str, list[tuple[str, float]]]  # query word -> [(file path, best single-word BM25)], best first
    query_vector: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)


def observe(kb: Any, filters: Any, question: str, extra: int = 0) -> Observation:
    from ragstead.answer import ask as ask_module
    from ragstead.retrieval.lexical_query import query_terms

    found = kb.search(question, k=K + extra, filters=filters)
    vector = found.query_vector if found.query_vector is not None else kb.embedder.embed_query(found.question)
    hits = list(found.hits)
    similarities = ask_module._similarities(hits, kb.store, vector)
    lexical = ask_module._lexical_scores(found, kb.store, filters)
    ceilings = {}
    for term in query_terms(found.question):
        ranked = kb.store.lexical_search([term], filters, 1 + extra)
        rows = kb.store.fetch_chunks([rowid for rowid, _ in ranked], filters)
        ceilings[term] = [(rows[rowid]["file_path"], score) for rowid, score in ranked if rowid in rows]
    return Observation(found.question, hits, similarities, lexical, ceilings, vector)


def signals(obs: Observation, cache: Any, scorer: Any, exclude: Iterable[str] = ()) -> Any:
    """The gate's signals for `obs`, as if the documents `exclude` (file paths) were not in the index."""
    from ragstead.answer.evidence import line_structured
    from ragstead.answer.gate import EVIDENCE_CHUNKS, Candidate, measure

    gone = set(exclude)
    kept = [i for i, hit in enumerate(obs.hits) if hit.file_path not in gone][:K]
    candidates = [Candidate(obs.hits[i].text, obs.similarities[i], obs.lexical.get(obs.hits[i].chunk_id),
                            line_structured(obs.hits[i].file_path)) for i in kept]
    units = {n: cache.vectors(obs.hits[i].text, candidates[n].lines) @ obs.query_vector
             for n, i in enumerate(kept[:EVIDENCE_CHUNKS])}
    ceilings = {term: next((score for doc, score in ranked if doc not in gone), 0.0)
                for term, ranked in obs.ceilings.items()}
    return measure(obs.question, candidates, units, ceilings, scorer)[0]


def unit_items(obs: Observation, cache: Any) -> list[tuple[int, Any, float]]:
    """(chunk rank, unit, cosine) for the units of the top chunks: what the sentence scorer ranks."""
    from ragstead.answer.evidence import line_structured, split_units
    from ragstead.answer.gate import EVIDENCE_CHUNKS

    items = []
    for rank, hit in enumerate(obs.hits[:EVIDENCE_CHUNKS]):
        lines = line_structured(hit.file_path)
        sims = cache.vectors(hit.text, lines) @ obs.query_vector
        items += [(rank, unit, float(sims[p])) for p, unit in enumerate(split_units(hit.text, lines))]
    return items


# -- fitting ----------------------------------------------------------------------------------------------------

def fit_logistic(x: np.ndarray, y: np.ndarray, weight: np.ndarray | None = None,
                 l2: float = L2) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method on standardised features: (mean, scale, w, b).
    Written here because it is a dozen lines of numpy and needs no new dependency."""
    mean, scale = x.mean(0), x.std(0) + 1e-6
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    weight = np.ones(len(y)) if weight is None else weight
    beta = np.zeros(z.shape[1])
    penalty = l2 * np.diag(np.r_[np.ones(z.shape[1] - 1), 0.0])
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(z @ beta, -60, 60)))
        gradient = z.T @ (weight * (p - y)) + penalty @ beta
        hessian = (z * (weight * p * (1 - p))[:, None]).T @ z + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, beta[:-1], float(beta[-1])


def fit_sentence_scorer(observations: list[Observation], cache: Any) -> Any:
    """The sentence scorer from the notes fit half: a unit is positive when it holds the expected fact."""
    from ragstead.answer.evidence import SentenceScorer, unit_features

    rows, labels = [], []
    for obs in observations:
        items = unit_items(obs, cache)
        fact = obs.meta["fact"].lower()
        for (features, blocked), (_, unit, _) in zip(unit_features(obs.question, items), items, strict=True):
            if not blocked:
                rows.append(features)
                labels.append(1.0 if fact in " ".join(unit.text.split()).lower() else 0.0)
    x, y = np.array(rows), np.array(labels)
    mean, scale, w, b = fit_logistic(x, y)
    raw = w / scale  # back to unstandardised weights: the library scores raw features
    return SentenceScorer((float(raw[0]), float(raw[1]), float(raw[2]), float(raw[3])), float(b - raw @ mean))


ALL_SIGNALS = ("dense", "lexical", "sentence", "coverage", "agreement", "evidence")
# What the shipped model reads. With the best sentence's cosine in, dense and agreement took negative weights (they
# say the same thing more weakly) and the six-signal model refused fewer off-topic notes on the held-out half.
FEATURES = ("lexical", "sentence", "coverage", "evidence")
FEATURE_SETS = {"four signals (shipped)": FEATURES, "all six signals": ALL_SIGNALS}


@dataclass
class LabelledSet:
    """One calibration set's signals: answerable, near-miss and off-topic questions."""

    name: str
    answerable: list[Any]
    near_miss: list[Any]
    off_topic: list[Any]


def _matrix(values: list[Any], features: tuple[str, ...] = FEATURES) -> np.ndarray:
    return np.array([[getattr(s, f) for f in features] for s in values]).reshape(-1, len(features))


def fit_gate(sets: list[LabelledSet], scorer: Any, features: tuple[str, ...] = FEATURES) -> Any:
    """A GateModel fitted on `sets`, thresholded so every set answers FIT_ANSWER_RATE of its answerable
    questions."""
    from ragstead.answer.gate import GateModel

    xs, ys, ws = [], [], []
    for s in sets:  # each set weighs the same; within it, half answerable, a quarter each kind of refusal
        for values, label, share in ((s.answerable, 1.0, 0.5), (s.near_miss, 0.0, 0.25), (s.off_topic, 0.0, 0.25)):
            xs.append(_matrix(values, features))
            ys.append(np.full(len(values), label))
            ws.append(np.full(len(values), share / max(1, len(values))))
    weight = np.concatenate(ws)
    mean, scale, w, b = fit_logistic(np.vstack(xs), np.concatenate(ys), weight * len(weight) / weight.sum())
    model = GateModel(features, tuple(map(float, mean)), tuple(map(float, scale)), tuple(map(float, w)), b, 0.5,
                      scorer)
    threshold = 0.01
    for candidate in np.round(np.arange(0.01, 1.0, 0.01), 2):
        if all(answer_rate(model, s.answerable, candidate) >= FIT_ANSWER_RATE for s in sets):
            threshold = float(candidate)
    return replace(model, threshold=threshold)


def answer_rate(model: Any, values: list[Any], threshold: float) -> float:
    return float(np.mean([model.probability(v) >= threshold for v in values])) if values else math.nan


@dataclass(frozen=True)
class HandRule:
    """The hand-written alternative: answer when the best sentence is close enough and the question's words are
    found, or when the best chunk alone is very close."""

    sentence: float
    coverage: float
    dense: float

    def passes(self, s: Any) -> bool:
        return (s.sentence >= self.sentence and s.coverage >= self.coverage) or s.dense >= self.dense


def fit_hand_rule(sets: list[LabelledSet]) -> HandRule:
    """The grid rule that refuses most near-miss and off-topic questions while every set answers
    FIT_ANSWER_RATE of its answerable ones."""
    best, best_score = HandRule(0.0, 0.0, 1.0), -1.0
    for sentence in np.arange(0.20, 0.80, 0.02):
        for coverage in np.arange(0.0, 1.01, 0.1):
            for dense in (0.45, 0.5, 0.55, 0.6, 0.7, 1.0):
                rule = HandRule(float(sentence), float(coverage), dense)
                if min(np.mean([rule.passes(v) for v in s.answerable]) for s in sets) < FIT_ANSWER_RATE:
                    continue
                score = float(np.mean([1 - np.mean([rule.passes(v) for v in s.near_miss + s.off_topic])
                                       for s in sets]))
                if score > best_score:
                    best, best_score = rule, score
    return best


def tentative_shares(model: Any, s: LabelledSet) -> dict[str, tuple[float, int]]:
    """Of the answerable and the near-miss questions the gate answers, the share `ask` marks tentative (and how
    many it answers): near misses should mostly be marked, right answers mostly not."""
    from ragstead.answer.gate import confidence

    def share(values: list[Any]) -> tuple[float, int]:
        marks = [confidence(p, True) for p in map(model.probability, values) if p >= model.threshold]
        return (round(float(np.mean([m == "tentative" for m in marks])), 4) if marks else math.nan, len(marks))

    return {"answerable": share(s.answerable), "near_miss": share(s.near_miss)}


CEILING_ANSWER_RATE = 0.90  # the answer target: each refusal rate below is read at this operating point


def separability(s: LabelledSet) -> dict[str, dict[str, float]]:
    """How well the signals can tell this set's answerable questions from its refusals at all: each signal alone,
    and a logistic over all six fitted on this very set (answerable against near misses). Each is thresholded
    on the set itself to answer CEILING_ANSWER_RATE of its answerable questions, so these are upper bounds for
    any gate over these signals, not results a fitted gate could reach on unseen data."""
    def at_rate(score: Callable[[list[Any]], np.ndarray]) -> dict[str, float]:
        answerable = score(s.answerable)
        threshold = float(np.quantile(answerable, 1 - CEILING_ANSWER_RATE))
        return {"answered": round(float(np.mean(answerable >= threshold)), 4),
                "refused_near_miss": round(float(np.mean(score(s.near_miss) < threshold)), 4),
                "refused_off_topic": round(float(np.mean(score(s.off_topic) < threshold)), 4)}

    out = {name: at_rate(lambda v, f=name: _matrix(v, (f,))[:, 0]) for name in ALL_SIGNALS}
    x = np.vstack([_matrix(s.answerable, ALL_SIGNALS), _matrix(s.near_miss, ALL_SIGNALS)])
    y = np.r_[np.ones(len(s.answerable)), np.zeros(len(s.near_miss))]
    mean, scale, w, b = fit_logistic(x, y, l2=0.01)
    out["logistic, all six, fitted on this set"] = at_rate(lambda v: ((_matrix(v, ALL_SIGNALS) - mean) / scale) @ w + b)
    return out


def rates(decide: Callable[[Any], bool], s: LabelledSet) -> dict[str, float]:
    def share(values: list[Any], answered: bool) -> float:
        return round(float(np.mean([decide(v) == answered for v in values])), 4) if values else math.nan

    return {"answered": share(s.answerable, True), "refused_near_miss": share(s.near_miss, False),
            "refused_off_topic": share(s.off_topic, False), "questions": len(s.answerable) + len(s.near_miss)
            + len(s.off_topic)}


# -- the notes set ------------------------------------------------------------------------------------------------

def load_questions(notes: Path = NOTES) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (notes / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def notes_kb(folder: Path, embedder: Any, notes: Path = NOTES) -> Any:
    """A personal-mode project over a copy of the notes set `notes` (the notes folder by default), indexed."""
    import ragstead

    shutil.copytree(notes / "notes", folder / "notes")
    kb = ragstead.open(folder, roots=("notes",), owner="me", embedder=embedder)
    kb.index()
    return kb


def fact_in(text: str, fact: str) -> bool:
    """Every `&&`-joined part of `fact` in `text`, case and whitespace aside (a two-part question's facts)."""
    flat = " ".join(text.split()).lower()
    return all(" ".join(part.split()).lower() in flat for part in fact.split("&&"))


class LegacyExtractive:
    """The extractive answerer before issue 22, kept here as the baseline: sentences by idf-weighted share of
    the question's words, printed in document order (so a header line could lead)."""

    name = "extractive"

    def answer(self, question: str, contexts: list[Any], on_text: Any = None) -> str:
        from ragstead.answer.screening import screen
        from ragstead.retrieval.lexical_query import query_terms
        from ragstead.retrieval.sentences import split_sentences
        from ragstead.stores.lexical_index import text_analyzer

        analyzer = text_analyzer()
        wanted = set(analyzer.analyze(" ".join(query_terms(question))))
        candidates = [(rank, position, c.n, sentence, set(analyzer.analyze(sentence)) & wanted)
                      for rank, c in enumerate(contexts) for position, sentence in enumerate(split_sentences(c.text))
                      if not screen(sentence)]
        if not candidates:
            return ""
        df = {t: sum(t in c[4] for c in candidates) for t in wanted}
        weight = {t: math.log(1 + len(candidates) / (1 + df[t])) for t in wanted}
        total = sum(weight.values()) or 1.0
        ranked = sorted(candidates, key=lambda c: (-(sum(weight[t] for t in c[4]) / total + 0.05 / (1 + c[0])),
                                                   c[0], c[1]))
        chosen = sorted([c for c in ranked[:3] if c[4]] or ranked[:1], key=lambda c: (c[0], c[1]))
        return " ".join(f"{sentence} [{n}]" for _, _, n, sentence, _ in chosen)


@dataclass(frozen=True)
class Variant:
    name: str
    min_similarity: float | None = None
    legacy_answerer: bool = False
    group_sources: bool = False
    dedup_sources: bool = False


VARIANTS = (
    Variant("before: cosine 0.428, old sentence choice", LEGACY_THRESHOLD, legacy_answerer=True),
    Variant("cosine 0.428, new sentence choice", LEGACY_THRESHOLD),
    Variant("gate, rank order (default)"),
    Variant("gate, best chunk per source only", dedup_sources=True),
    Variant("gate, source by source", group_sources=True),
)


def run_notes(kb: Any, questions: list[dict[str, Any]], model: Any,
              splits: tuple[str | None, ...] = ("fit", "heldout", None)) -> dict[str, dict[str, Any]]:
    """Every variant over every notes question through gather + answer: per split, the rates and fact-in-answer."""
    from ragstead.answer.ask import AskOptions, UnitVectorCache, answer, gather
    from ragstead.answer.extractive import ExtractiveAnswerer

    filters = kb.scope(user="me")
    cache = UnitVectorCache(kb.embedder, size=10000)
    out: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        answerer = LegacyExtractive() if variant.legacy_answerer else ExtractiveAnswerer()
        options = AskOptions(kb.search_options(k=K, dedup_sources=variant.dedup_sources), variant.min_similarity,
                             group_sources=variant.group_sources, gate=model)
        records = []
        for q in questions:
            found, contexts = gather(q["question"], kb.store, kb.embedder, filters, options, kb.settings.scope_rules,
                                     cache)
            result = answer(found, contexts, options.min_similarity, [answerer])
            first = result.text.split(" [")[0] if not result.refused else ""
            records.append({"id": q["id"], "split": q["split"], "kind": q["kind"], "refused": result.refused,
                            "fact": bool(q["fact"]) and fact_in(result.text, q["fact"]),
                            "lead": bool(q["fact"]) and fact_in(first, q["fact"]),
                            "score": result.gate["score"] if result.gate else None,
                            "confidence": "refused" if result.refused else
                            (result.gate or {}).get("confidence", "likely"), "answer": result.text})
        out[variant.name] = {split: _notes_rates(records, split) for split in splits}
        out[variant.name]["records"] = records  # type: ignore[assignment]
    return out


def _notes_rates(records: list[dict[str, Any]], split: str | None) -> dict[str, Any]:
    chosen = [r for r in records if split is None or r["split"] == split]
    answerable = [r for r in chosen if r["kind"] == "answerable"]
    answered = [r for r in answerable if not r["refused"]]

    def mean(values: list[bool]) -> float:
        return round(float(np.mean(values)), 4) if values else math.nan

    likely = [r for r in answered if r["confidence"] == "likely"]
    near_miss = [r for r in chosen if r["kind"] == "near_miss"]
    return {"answerable": len(answerable), "answered": mean([not r["refused"] for r in answerable]),
            "refused_near_miss": mean([r["refused"] for r in near_miss]),
            "near_miss_refused_or_tentative": mean([r["confidence"] != "likely" for r in near_miss]),
            # "likely but wrong": of the answerable questions answered at `likely` confidence, the share whose
            # answer lacks the fact (how often a confident answer misleads)
            "likely_missing_fact": mean([not r["fact"] for r in likely]), "likely_answers": len(likely),
            "refused_off_topic": mean([r["refused"] for r in chosen if r["kind"] == "off_topic"]),
            "fact_in_answer": mean([r["fact"] for r in answerable]),
            "fact_when_answered": mean([r["fact"] for r in answered]),
            "fact_leads": mean([r["lead"] for r in answerable]),
            "counts": {"fact_in_answer": sum(r["fact"] for r in answerable), "answerable": len(answerable),
                       "near_miss_refused_or_tentative": sum(r["confidence"] != "likely" for r in near_miss),
                       "near_miss": len(near_miss),
                       "off_topic_refused": sum(r["refused"] for r in chosen if r["kind"] == "off_topic"),
                       "off_topic": sum(r["kind"] == "off_topic" for r in chosen),
                       "likely_missing_fact": sum(not r["fact"] for r in likely)}}


# -- the run ----------------------------------------------------------------------------------------------------

def observe_notes(embedder: Any, questions: list[dict[str, Any]], notes: Path,
                  cache: Any) -> list[Observation]:
    """One observation per question of the notes set `notes`, its sentences embedded into `cache`."""
    with tempfile.TemporaryDirectory(prefix="ragstead-notes-") as scratch:
        kb = notes_kb(Path(scratch), embedder, notes)
        observations = []
        for q in questions:
            obs = observe(kb, kb.scope(user="me"), q["question"])
            obs.meta = q
            unit_items(obs, cache)  # embeds the sentences the sets will read
            observations.append(obs)
        kb.close()
    return observations


def observe_all(dataset: Path, embedder: Any, questions: list[dict[str, Any]], limit: int | None,
                fresh_questions: list[dict[str, Any]]) -> dict[str, Any]:
    """Every retrieval the run needs, once: the notes questions (both sets), SciFact train and test (deep enough
    to take the relevant abstracts out), the off-topic questions; with the sentence vectors they used."""
    import ragstead
    from ragstead.answer.gate import UnitVectorCache
    from ragstead.evaluation.cases import load_beir

    index_db = RESULTS / ".cache" / f"{dataset.name}.db"
    if not index_db.exists():
        sys.exit(f"no SciFact index at {index_db}; run `python -m bench quality` first")
    cache = UnitVectorCache(embedder, size=10**6)
    notes = observe_notes(embedder, questions, NOTES, cache)
    fresh = observe_notes(embedder, fresh_questions, FRESH, cache)
    with ragstead.open(RESULTS / ".cache", db_path=str(index_db), lock_path=f"{index_db}.lock",
                       embedder=embedder) as sci:
        sci_cache = UnitVectorCache(sci.embedder, size=10**6)
        filters = sci.scope()
        scifact: dict[str, list[Observation]] = {}
        for split in ("train", "test"):
            scifact[split] = []
            for case in load_beir(dataset, split).cases[:limit]:
                relevant = {f"kb/beir/{d}" for d, gain in case.relevant.items() if gain > 0}
                obs = observe(sci, filters, case.query, extra=len(relevant))
                obs.meta = {"relevant": relevant}
                for hit in obs.hits[:K + len(relevant)]:
                    sci_cache.vectors(hit.text)
                scifact[split].append(obs)
        off = observe_off_topic(sci, SCIFACT_OFF_TOPIC, sci_cache)
        heldout = observe_off_topic(sci, SCIFACT_OFF_TOPIC_HELDOUT, sci_cache)
    return {"notes": notes, "notes_fresh": fresh, "scifact": scifact, "scifact_off_topic": off,
            "scifact_off_topic_heldout": heldout,
            "notes_vectors": dict(cache._vectors), "scifact_vectors": dict(sci_cache._vectors), "scifact_limit": limit}


def observe_off_topic(sci: Any, questions: list[str], sci_cache: Any) -> list[Observation]:
    observations = []
    for question in questions:
        obs = observe(sci, sci.scope(), question)
        unit_items(obs, sci_cache)
        observations.append(obs)
    return observations



def _pct(value: float) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f} %"


def main(dataset: Path, fit: bool = False, limit: int | None = None, reuse: bool = False) -> None:
    """`limit`: the first N SciFact queries of each split only (a quick look; the results say so). `reuse`: the
    retrievals and sentence vectors of the last run (bench/results/.cache/answers-observations.pkl)."""
    from ragstead.answer.evidence import split_units
    from ragstead.answer.gate import UnitVectorCache, load_model
    from ragstead.embeddings import default_embedder

    embedder = default_embedder()
    questions, fresh_questions = load_questions(), load_questions(FRESH)
    saved = RESULTS / ".cache" / "answers-observations.pkl"
    timings: dict[str, float] = {}
    if reuse and saved.exists():
        with saved.open("rb") as f:
            observed = pickle.load(f)  # our own cache file, written below
        if "scifact_off_topic_heldout" not in observed or "notes_fresh" not in observed:
            sys.exit(f"{saved} is from before SciFact test had its own off-topic questions or before the fresh "
                     "notes set; run without --reuse")
    else:
        with Timer() as t:
            observed = observe_all(dataset, embedder, questions, limit, fresh_questions)
        timings["observe_s"] = round(t.seconds, 1)
        saved.parent.mkdir(parents=True, exist_ok=True)
        with saved.open("wb") as f:
            pickle.dump(observed, f)
    notes_obs, sci_obs, sci_off = observed["notes"], observed["scifact"], observed["scifact_off_topic"]
    cache, sci_cache = UnitVectorCache(embedder, size=10**6), UnitVectorCache(embedder, size=10**6)
    for target, saved_vectors in ((cache, observed["notes_vectors"]), (sci_cache, observed["scifact_vectors"])):
        # A chunk whose units changed since the saved run (a new split_units) is embedded again when read.
        target._vectors.update({key: v for key, v in saved_vectors.items() if len(v) == len(
            split_units(key.removeprefix("\0lines\0"), key.startswith("\0lines\0")))})
    scorer = fit_sentence_scorer([o for o in notes_obs if o.meta["kind"] == "answerable"
                                  and o.meta["split"] == "fit"], cache)

    def sets_for(scorer: Any) -> dict[str, LabelledSet]:
        out = {}
        for split in ("fit", "heldout"):
            chosen = [o for o in notes_obs if o.meta["split"] == split]
            out[f"notes {split}"] = LabelledSet(
                f"notes {split}", *[[signals(o, cache, scorer) for o in chosen if o.meta["kind"] == kind]
                                    for kind in ("answerable", "near_miss", "off_topic")])
        out["notes fresh"] = LabelledSet(  # measured only: never in a fit below
            "notes fresh", *[[signals(o, cache, scorer) for o in observed["notes_fresh"] if o.meta["kind"] == kind]
                             for kind in ("answerable", "near_miss", "off_topic")])
        off = {"train": [signals(o, sci_cache, scorer) for o in sci_off],
               "test": [signals(o, sci_cache, scorer) for o in observed["scifact_off_topic_heldout"]]}
        for split, observations in sci_obs.items():
            out[f"SciFact {split}"] = LabelledSet(
                f"SciFact {split}", [signals(o, sci_cache, scorer) for o in observations],
                [signals(o, sci_cache, scorer, o.meta["relevant"]) for o in observations], off[split])
        return out

    with Timer() as t:
        sets = sets_for(scorer)
    timings["signals_s"] = round(t.seconds, 1)

    fits = {"notes fit half": [sets["notes fit"]], "SciFact train": [sets["SciFact train"]],
            "both": [sets["notes fit"], sets["SciFact train"]]}
    cross: dict[str, Any] = {}
    cross_rows = [["fitted on", "model", "tested on", "answered", "refused near-miss", "refused off-topic"]]
    models = {}
    for fit_name, fit_sets in fits.items():
        deciders: dict[str, Callable[[Any], bool]] = {}
        cross[fit_name] = {"tests": {}}
        for label, features in FEATURE_SETS.items():
            model = fit_gate(fit_sets, scorer, features)
            models[(fit_name, label)] = model
            cross[fit_name][label] = model.to_dict()
            deciders[f"logistic, {label}"] = lambda v, m=model: m.probability(v) >= m.threshold
        rule = fit_hand_rule(fit_sets)
        cross[fit_name]["hand rule"] = rule.__dict__
        deciders["hand rule"] = rule.passes
        for test_name, test_set in sets.items():
            if test_set in fit_sets:
                continue
            for label, decide in deciders.items():
                measured = rates(decide, test_set)
                cross[fit_name]["tests"].setdefault(test_name, {})[label] = measured
                cross_rows.append([fit_name, label, test_name, _pct(measured["answered"]),
                                   _pct(measured["refused_near_miss"]), _pct(measured["refused_off_topic"])])
    if fit:  # the other embedders' cosine maps (`bench bilingual --fit`) are kept: nothing here refits them
        fitted = {**models[("both", "four signals (shipped)")].to_dict(), "cosine_maps": load_model().to_dict()[
            "cosine_maps"]}
        MODEL_PATH.write_text(json.dumps(fitted, indent=2) + "\n", encoding="utf-8")
        load_model.cache_clear()
    shipped = load_model()

    gate_rows = [["set", "gate", "answered (answerable)", "refused near-miss", "refused off-topic"]]
    gate_results: dict[str, Any] = {}
    tentative_rows = [["set", "answerable answers marked tentative", "near-miss answers marked tentative"]]
    for name, s in sets.items():
        legacy = rates(lambda v: v.dense >= LEGACY_THRESHOLD, s)
        new = rates(lambda v: shipped.probability(v) >= shipped.threshold, s)
        gate_results[name] = {"cosine 0.428": legacy, "gate": new, "tentative": tentative_shares(shipped, s)}
        tentative_rows.append([name, *(f"{_pct(share)} of {answered}" for share, answered in
                                       gate_results[name]["tentative"].values())])
        for label, measured in (("cosine 0.428 (before)", legacy), ("gate", new)):
            gate_rows.append([name, label, _pct(measured["answered"]), _pct(measured["refused_near_miss"]),
                              _pct(measured["refused_off_topic"])])

    with tempfile.TemporaryDirectory(prefix="ragstead-notes-") as scratch:
        kb = notes_kb(Path(scratch), embedder)
        with Timer() as t:
            notes = run_notes(kb, questions, shipped)
        timings["notes_answers_s"] = round(t.seconds, 1)
        kb.close()
    with tempfile.TemporaryDirectory(prefix="ragstead-fresh-") as scratch:
        kb = notes_kb(Path(scratch), embedder, FRESH)
        fresh = run_notes(kb, fresh_questions, shipped, splits=("fresh",))
        kb.close()
    for variant, by_split in fresh.items():
        notes[variant]["fresh"] = by_split["fresh"]
        notes[variant]["records"] += by_split["records"]  # type: ignore[operator]
    notes_rows = [["notes set", "ask", "answered", "refused near-miss", "near-miss refused or tentative",
                   "refused off-topic", "fact in answer", "fact when answered", "fact in first sentence",
                   "likely answers missing the fact"]]
    for variant, by_split in notes.items():
        for split in ("fresh", "heldout", "fit"):
            m = by_split[split]
            notes_rows.append([split, variant, _pct(m["answered"]), _pct(m["refused_near_miss"]),
                               _pct(m["near_miss_refused_or_tentative"]), _pct(m["refused_off_topic"]),
                               _pct(m["fact_in_answer"]), _pct(m["fact_when_answered"]), _pct(m["fact_leads"]),
                               f'{_pct(m["likely_missing_fact"])} of {m["likely_answers"]}'])
    (RESULTS / ".cache").mkdir(parents=True, exist_ok=True)
    (RESULTS / ".cache" / "answers-notes-records.json").write_text(json.dumps(
        {v: by_split["records"] for v, by_split in notes.items()}, indent=1, ensure_ascii=False))
    counts = {name: {"answerable": len(s.answerable), "near_miss": len(s.near_miss), "off_topic": len(s.off_topic)}
              for name, s in sets.items()}
    ceiling = {name: separability(s) for name, s in sets.items()}
    ceiling_rows = [["set", "signal", "answered", "refused near-miss", "refused off-topic"]]
    for name, by_signal in ceiling.items():
        for label, measured in by_signal.items():
            ceiling_rows.append([name, label, _pct(measured["answered"]), _pct(measured["refused_near_miss"]),
                                 _pct(measured["refused_off_topic"])])
    results = {"data": __doc__.split("\n\n")[1].replace("\n", " "), "counts": counts,
               "model": shipped.to_dict(), "fitted_now": fit, "gate": gate_results,
               "notes": {v: {k: m for k, m in by_split.items() if k != "records"} for v, by_split in notes.items()},
               "cross_dataset": cross, "separability_ceiling": ceiling, "timings_s": timings,
               "scifact_limit": observed["scifact_limit"]}
    path = write_results("answers", results, gate_rows)
    markdown = (RESULTS / "answers.md").read_text()
    limit_note = ([f"SciFact: the first {observed['scifact_limit']} queries of each split only (`--limit`).", ""]
                  if observed["scifact_limit"] else [])
    extra = "\n".join(["", *limit_note, "Notes sets, through `ask` (gather + extractive answerer); `fresh` is "
                       "tests/data/notes_fresh, measured only:", "", *_table(notes_rows), "",
                       "Answers the gate lets through at a probability under one half are marked tentative:", "",
                       *_table(tentative_rows), "",
                       "Cross-dataset: fitted on one source, tested on the others:", "", *_table(cross_rows), "",
                       f"The ceiling: each signal alone, and a logistic fitted on the set itself, thresholded on the "
                       f"set to answer {CEILING_ANSWER_RATE:.0%} of its answerable questions (upper bounds, not "
                       f"results):", "", *_table(ceiling_rows), ""])
    (RESULTS / "answers.md").write_text(markdown + extra)
    print(extra)
    print(f"wrote {path}")


def _table(rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])] + [
        "| " + " | ".join(row) + " |" for row in rows[1:]]
