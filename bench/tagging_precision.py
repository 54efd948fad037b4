"""`python -m bench tagging`, first part: the precision of the local auto-tagger on a folder's notes (#47.12).

The sample: tests/data/tagging, 24 notes of one person's folder and the tags that person would accept on each
(labels.toml: the folder's 36 existing tags, and for each note the existing tags that apply and the proposed
keyphrases worth keeping). Each note is tagged as `ingest` tags it, with the packaged model and the folder's
tags as the existing ones; a tag offered and not accepted is wrong.

The bar: the tagger keeps a tag only at or above its kind's threshold (an existing tag, a keyphrase). The pair
is chosen on the fit half: of the pairs whose offered tags are right at least BAR of the time there, the one
that offers the most right tags (ties: the higher thresholds). Reported on the held-out half, against the
thresholds shipped before (EXISTING_TAG_MIN 0.225, KEYPHRASE_MIN 0.425).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from bench.common import write_results

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "data" / "tagging"
BAR = 0.8
BEFORE = (0.225, 0.425)
EXISTING = [round(0.2 + 0.025 * i, 3) for i in range(13)]  # 0.200 .. 0.500
KEYPHRASES = [round(0.35 + 0.025 * i, 3) for i in range(13)]  # 0.350 .. 0.650


def load_sample() -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(the folder's existing tags, {note name: {"half", "accept", "text"}})."""
    labels = tomllib.loads((SAMPLE / "labels.toml").read_text(encoding="utf-8"))
    notes = {name: {**note, "text": (SAMPLE / "notes" / f"{name}.md").read_text(encoding="utf-8")}
             for name, note in labels["notes"].items()}
    return labels["vocabulary"], notes


def scored_candidates(embedder: Any) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    """Every candidate the local tagger scores for each note (no threshold), and the notes."""
    from ragstead.ingest.tagging import local_tags

    vocabulary, notes = load_sample()
    return {name: local_tags(note["text"], vocabulary, embedder, existing_min=-1.0, keyphrase_min=-1.0).candidates
            for name, note in notes.items()}, notes


def measure(candidates: dict[str, list[dict[str, Any]]], notes: dict[str, dict[str, Any]], half: str,
            existing_min: float, keyphrase_min: float) -> dict[str, Any]:
    """Precision of the tags offered on one half's notes at these thresholds, right and offered tags per note."""
    from ragstead.ingest.tagging import choose_tags

    names = [name for name, note in notes.items() if note["half"] == half]
    offered = right = 0
    wrong: list[str] = []
    for name in names:
        tags = choose_tags(candidates[name], existing_min, keyphrase_min)
        offered += len(tags)
        right += sum(tag in notes[name]["accept"] for tag in tags)
        wrong += [f"{name}: {tag}" for tag in tags if tag not in notes[name]["accept"]]
    return {"precision": right / offered if offered else 0.0, "right_per_note": right / len(names),
            "offered_per_note": offered / len(names), "right": right, "offered": offered, "wrong": wrong}


def choose_bar(candidates: dict[str, list[dict[str, Any]]], notes: dict[str, dict[str, Any]]) -> tuple[float, float]:
    """The (existing, keyphrase) thresholds on the fit half: precision >= BAR, the most right tags."""
    best, best_key = BEFORE, None
    for existing_min in EXISTING:
        for keyphrase_min in KEYPHRASES:
            fit = measure(candidates, notes, "fit", existing_min, keyphrase_min)
            if fit["precision"] < BAR:
                continue
            key = (fit["right"], existing_min, keyphrase_min)
            if best_key is None or key > best_key:
                best, best_key = (existing_min, keyphrase_min), key
    return best


def main() -> None:
    import ragstead  # noqa: F401 - the package's model
    from ragstead.embeddings.catalog import embedder_for

    embedder = embedder_for("", None)
    candidates, notes = scored_candidates(embedder)
    chosen = choose_bar(candidates, notes)
    rows = [["thresholds (existing, keyphrase)", "half", "precision", "right tags / note", "offered / note"]]
    result: dict[str, Any] = {"model": embedder.name, "notes": len(notes), "bar": BAR, "before": BEFORE,
                              "chosen": chosen}
    for label, (existing_min, keyphrase_min) in (("before", BEFORE), ("after", chosen)):
        for half in ("fit", "held_out"):
            m = measure(candidates, notes, half, existing_min, keyphrase_min)
            result[f"{label} {half}"] = m
            rows.append([f"{label}: {existing_min:.3f}, {keyphrase_min:.3f}", half, f"{m['precision']:.2f}",
                         f"{m['right_per_note']:.2f}", f"{m['offered_per_note']:.2f}"])
    write_results("tagging_precision", result, rows)
