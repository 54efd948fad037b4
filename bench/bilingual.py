"""`python -m bench bilingual [--label L]`: the bilingual notes set (tests/data/bilingual, #47.1) as a person meets it,
with each catalogued model it is measured for (the default, trained on English, and the multilingual one), through
the public library only (`ragstead.open`, `kb.search`, `kb.ask`), so the same file measures an older checkout too
(`PYTHONPATH=<old checkout>/src python -m bench bilingual --label before`).

For each model, by question language and split (fit / held-out):
- lexical: the share of answerable questions whose source note is in the lexical side's top 5 (`mode="lexical"`),
  what stemming per document language (#47.1) changes; a second table gives it, and the first place, by the
  question's and the note's language over both halves;
- answered: answerable questions `ask` answers (not refused), right (answered and holding the fact), likely
  (answered with confidence `likely`); near misses not answered `likely`; off-topic refused. The done-when of
  #47.1: with the multilingual model, German questions answered as often as English ones, off-topic >= 95 %
  refused.
- two per-model calibrations, computed from what the gate recorded (its probability and signals; nothing in
  ragstead is changed by them): `shift`, the gate's logit moved by the one offset that, on the fit half, refuses
  every off-topic question and answers the most answerable ones; `sentence a+bx`, the model's sentence cosine
  mapped onto the default model's mean and spread over the fit half's questions (no labels) before the shipped
  gate model reads it. For the default model the map is the identity. `--fit` writes each other model's map into
  the gate model (src/ragstead/answer/gate_model.json, `cosine_maps`, by embedder name), where `ask` applies it to
  every cosine the gate reads: composed with the map the run was measured under, so a second fit keeps the first.
"""

from __future__ import annotations

import json
import math
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.answers import fact_in
from bench.common import RESULTS, write_results

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "tests" / "data" / "bilingual"
MODELS = ("minilm-l6-int8", "e5-small-q4")
LEXICAL_TOP = 5
LEXICAL_DEPTH = 20
TENTATIVE_BELOW = 0.5  # gate.TENTATIVE_BELOW, read here so an older checkout is measured by the same rule
SHIFTS = [x / 20 for x in range(-80, 81)]  # logit offsets tried by the recalibration


def questions() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SET / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def run_model(model: str, asked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each question searched lexically and asked through `kb.ask` over a personal-mode copy of the notes."""
    import ragstead

    records = []
    with tempfile.TemporaryDirectory(prefix="ragstead-bilingual-bench-") as scratch:
        shutil.copytree(SET / "notes", Path(scratch) / "notes")
        with ragstead.open(Path(scratch), roots=("notes",), owner="me", model=model) as kb:
            kb.index()
            for q in asked:
                found = kb.search(q["question"], user="me", mode="lexical", k=LEXICAL_DEPTH).to_dict()["results"]
                paths = list(dict.fromkeys(r["file_path"] for r in found))
                shipped = kb.ask(q["question"], user="me", extractive=True).to_dict()
                gate = shipped.get("gate") or {}
                records.append({
                    **q, "model": model, "refused": shipped["refused"],
                    "confidence": "refused" if shipped["refused"] else gate.get("confidence", "likely"),
                    "right": not shipped["refused"] and bool(q.get("fact")) and fact_in(shipped["answer"], q["fact"]),
                    "lexical_rank": paths.index(f"notes/{q['source']}") + 1
                    if q.get("source") and f"notes/{q['source']}" in paths else None,
                    "score": gate.get("score"), "threshold": gate.get("threshold"),
                    "signals": gate.get("signals"), "embedder": kb.embedder.name})
    return records


def rates(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of one group of records (one model, split and question language)."""
    answerable = [r for r in records if r["kind"] == "answerable"]
    near = [r for r in records if r["kind"] == "near_miss"]
    off = [r for r in records if r["kind"] == "off_topic"]
    return {"answerable": len(answerable), "lexical_top1": sum(r["lexical_rank"] == 1 for r in answerable),
            "lexical_top5": sum((r["lexical_rank"] or LEXICAL_DEPTH + 1) <= LEXICAL_TOP for r in answerable),
            "answered": sum(not r["refused"] for r in answerable), "right": sum(r["right"] for r in answerable),
            "likely": sum(r["confidence"] == "likely" for r in answerable),
            "near_miss": len(near), "near_not_likely": sum(r["confidence"] != "likely" for r in near),
            "off_topic": len(off), "off_refused": sum(r["refused"] for r in off)}


def _decided(record: dict[str, Any], p: float | None) -> dict[str, Any]:
    """The record as the gate would have decided it at probability `p` (answer text unchanged: a question refused
    by the shipped gate and answered at `p` counts as answered, its answer unknown, so not right)."""
    threshold = record.get("threshold")
    if p is None or threshold is None:
        return record
    refused = p < threshold
    likely = not refused and p >= TENTATIVE_BELOW and record["confidence"] != "tentative"
    return {**record, "refused": refused, "confidence": "refused" if refused else "likely" if likely else "tentative",
            "right": record["right"] and not refused}


def _shifted(record: dict[str, Any], shift: float) -> dict[str, Any]:
    """The record with the gate's logit moved by `shift`."""
    score = record.get("score")
    if score is None or not 0.0 < score < 1.0:
        return record
    return _decided(record, 1.0 / (1.0 + math.exp(-(math.log(score / (1.0 - score)) + shift))))


def sentence_map(records: list[dict[str, Any]], default: list[dict[str, Any]]) -> tuple[float, float]:
    """(a, b) with a + b * sentence giving the model's sentence signal the default model's mean and spread over the
    same questions (the fit half): fitted without labels."""
    mine = [r["signals"]["sentence"] for r in records if r["split"] == "fit" and r.get("signals")]
    theirs = [r["signals"]["sentence"] for r in default if r["split"] == "fit" and r.get("signals")]
    b = statistics.pstdev(theirs) / statistics.pstdev(mine)
    return statistics.mean(theirs) - b * statistics.mean(mine), b


def _mapped(record: dict[str, Any], a: float, b: float) -> dict[str, Any]:
    """The record with its sentence signal mapped by (a, b) before the shipped gate model reads it."""
    from ragstead.answer.gate import Signals, load_model

    if not record.get("signals"):
        return record
    signals = {**record["signals"], "sentence": a + b * record["signals"]["sentence"]}
    return _decided(record, load_model().probability(Signals(**signals)))


def best_shift(fit: list[dict[str, Any]]) -> float:
    """The logit offset that refuses every off-topic question of the fit half and, among those, answers the most
    answerable ones, then declines the most near misses; the smallest such offset in size."""
    def key(shift: float) -> tuple[float, ...]:
        counts = rates([_shifted(r, shift) for r in fit])
        return (counts["off_refused"] == counts["off_topic"], counts["answered"], counts["near_not_likely"],
                -abs(shift))
    return max(SHIFTS, key=key)


def groups(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for split in ("fit", "heldout"):
        for lang in ("de", "en"):
            out[f"{split} {lang}"] = rates([r for r in records if r["split"] == split and r["lang"] == lang])
    return out


def pairs(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The answerable questions' counts by question and note language, both halves."""
    answerable = [r for r in records if r["kind"] == "answerable"]
    return {f"{q} -> {d}": rates([r for r in answerable if r["lang"] == q and r["doc_lang"] == d])
            for q in ("de", "en") for d in ("de", "en")}


def write_cosine_maps(maps: dict[str, tuple[float, float]]) -> None:
    """Each embedder's measured (a, b) composed with the map the run read its cosines through, into the shipped
    gate model."""
    from ragstead.answer.gate import load_model, parse_model

    path = ROOT / "src" / "ragstead" / "answer" / "gate_model.json"
    model = parse_model(json.loads(path.read_text(encoding="utf-8")), str(path))
    composed = dict(model.cosine_maps)
    for name, (a, b) in maps.items():
        a0, b0 = model.cosine_map(name)
        composed[name] = (round(a + b * a0, 4), round(b * b0, 4))
    raw = {**model.to_dict(), "cosine_maps": {name: list(ab) for name, ab in sorted(composed.items())}}
    path.write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    load_model.cache_clear()
    print(f"cosine maps written to {path}: {raw['cosine_maps']}")


def main(label: str = "", fit: bool = False) -> dict[str, Any]:
    import ragstead

    asked = questions()
    out: dict[str, Any] = {"label": label or getattr(ragstead, "__version__", "?"), "models": {}}
    rows = [["model", "gate", "questions", "lexical first", "lexical top 5", "answered", "right", "likely",
             "near miss not likely", "off-topic refused"]]

    def row(model: str, gate: str, name: str, c: dict[str, Any]) -> list[str]:
        return [model, gate, name, f"{c['lexical_top1']}/{c['answerable']}", f"{c['lexical_top5']}/{c['answerable']}",
                f"{c['answered']}/{c['answerable']}", f"{c['right']}/{c['answerable']}",
                f"{c['likely']}/{c['answerable']}", f"{c['near_not_likely']}/{c['near_miss']}",
                f"{c['off_refused']}/{c['off_topic']}"]

    default: list[dict[str, Any]] = []
    maps: dict[str, tuple[float, float]] = {}
    for model in MODELS:
        records = run_model(model, asked)
        default = default or records
        shift = best_shift([r for r in records if r["split"] == "fit"])
        a, b = sentence_map(records, default)
        if records is not default and records:
            maps[records[0]["embedder"]] = (a, b)
        variants = {"shipped": records, f"shift {shift:+.2f}": [_shifted(r, shift) for r in records],
                    f"sentence {a:+.2f}{b:+.2f}x": [_mapped(r, a, b) for r in records]}
        out["models"][model] = {"gates": {name: groups(rs) for name, rs in variants.items()}, "shift": shift,
                                "sentence_map": [a, b], "by_language": pairs(records),
                                "records": [{k: r[k] for k in ("id", "split", "lang", "doc_lang", "kind", "refused",
                                                               "confidence", "right", "lexical_rank", "score",
                                                               "signals")} for r in records]}
        for gate, rs in variants.items():
            rows += [row(model, gate, name, c) for name, c in groups(rs).items()]
        rows += [row(model, "shipped", f"answerable {pair} (both halves)", c) for pair, c in pairs(records).items()]
    if fit:
        write_cosine_maps(maps)
    name = f"bilingual_{label}" if label else "bilingual"
    write_results(name, out, rows)
    print(f"written {RESULTS / name}.json / .md")
    return out
