"""Two languages (#47.1): each document's language is detected at index time and kept with the index; `init` and
`status` say when most of a folder is not in English and the model was trained on English, naming the catalogued
multilingual model. The bilingual set under tests/data/bilingual is checked for shape here (the lead calibrates the
answer gate on it)."""

from __future__ import annotations

import json
import shutil
import stat
from collections import Counter
from pathlib import Path

import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV
from ragstead.documents.language import detect_language
from ragstead.embeddings.catalog import MULTILINGUAL_MODEL
from ragstead.indexing.languages import LANGUAGES_FILE, model_advice

SET = Path(__file__).parent / "data" / "bilingual"
QUESTIONS = [json.loads(line) for line in (SET / "questions.jsonl").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(("text", "code"), [
    ("Wann ist der nächste Termin beim Zahnarzt? Bitte bis Freitag absagen.", "de"),
    ("The huts on the Alta Via accept cards, but carry cash for the small ones.", "en"),
    ("Le rendez-vous chez le dentiste est à dix heures.", "fr"),
    ("12 34 56 7890", None),  # too few letters to tell
    ("", None),
])
def test_a_documents_language_is_detected(text, code):
    assert detect_language(text) == code


def test_the_advice_names_the_multilingual_model_only_for_a_mostly_foreign_folder_on_an_english_model():
    assert MULTILINGUAL_MODEL in (model_advice({"de": 8, "en": 6}, "minilm-l6-int8") or "")
    assert "German" in (model_advice({"de": 8, "en": 6, "unknown": 40}, "") or "")  # "" is the default model
    assert model_advice({"de": 8, "en": 6}, "all-MiniLM-L6-v2-onnx-int8") is not None  # as an index records it
    assert model_advice({"de": 5, "en": 6}, "") is None  # half or less: no note
    assert model_advice({"de": 2}, "") is None  # too few to tell
    assert model_advice({"de": 8, "en": 6}, MULTILINGUAL_MODEL) is None
    assert model_advice({"de": 8, "en": 6}, "multilingual-e5-small-q4") is None
    assert model_advice({"de": 8}, "onnx:/models/mine") is None  # a model of one's own: not ours to judge


@pytest.fixture
def folder(tmp_path):
    copy = tmp_path / "notes"
    shutil.copytree(SET / "notes", copy)
    return copy


def test_the_index_keeps_each_documents_language_and_status_suggests_the_multilingual_model(folder):
    made = run_ragstead("init", str(folder), "--owner", "sam", "--json", env=OFFLINE_ENV)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["languages"] == {"de": 8, "en": 6}
    assert MULTILINGUAL_MODEL in json.loads(made.stdout)["model_advice"]
    assert run_ragstead("index", "-q", "--root", str(folder), env=OFFLINE_ENV).returncode == 0
    record = folder / "kb" / "rag" / LANGUAGES_FILE
    languages = json.loads(record.read_text())["files"]
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert languages["wohnung/mietvertrag.md"] == "de" and languages["work/clients.md"] == "en"
    assert Counter(languages.values()) == {"de": 8, "en": 6}

    status = json.loads(run_ragstead("status", "--json", "--root", str(folder), env=OFFLINE_ENV).stdout)
    assert status["languages"] == {"de": 8, "en": 6}
    assert "German" in status["model_advice"] and f"--model {MULTILINGUAL_MODEL}" in status["model_advice"]
    text = run_ragstead("status", "--root", str(folder), env={**OFFLINE_ENV, "COLUMNS": "200"}).stdout
    assert "languages    de 8, en 6" in text and MULTILINGUAL_MODEL in text

    for name in ("ostsee.md",):  # a removed document leaves the record; two more English notes tip the balance
        (folder / "travel" / name).unlink()
    (folder / "work" / "glossary.md").write_text("Terms the clients prefer: invoice, not bill; flat, not apartment.")
    (folder / "work" / "rates-2026.md").write_text("The rates for next year go up by five percent for every client.")
    assert run_ragstead("index", "-q", "--root", str(folder), env=OFFLINE_ENV).returncode == 0
    status = json.loads(run_ragstead("status", "--json", "--root", str(folder), env=OFFLINE_ENV).stdout)
    assert status["languages"] == {"en": 8, "de": 7} and "model_advice" not in status


def test_init_says_nothing_for_an_english_folder_or_with_the_multilingual_model(tmp_path, folder):
    english = tmp_path / "english"
    english.mkdir()
    for number in range(4):
        (english / f"n{number}.md").write_text(f"Note {number}: the quarterly review moved to the big meeting room.")
    made = run_ragstead("init", str(english), "--json", env=OFFLINE_ENV)
    assert json.loads(made.stdout)["model_advice"] is None
    told = run_ragstead("init", str(folder), env=OFFLINE_ENV)
    assert "note:" in told.stderr and MULTILINGUAL_MODEL in told.stderr


def test_the_bilingual_set_has_both_languages_each_fact_in_its_note_and_fit_and_heldout_halves():
    notes = {str(p.relative_to(SET / "notes")): p.read_text(encoding="utf-8") for p in (SET / "notes").rglob("*.*")}

    def norm(text: str) -> str:
        return " ".join(text.split()).lower()

    for q in QUESTIONS:
        if q["kind"] == "answerable":
            assert norm(q["fact"]) in norm(notes[q["source"]]), q["id"]
        if q["source"] is not None:
            assert detect_language(notes[q["source"]]) == q["doc_lang"], q["id"]
        assert detect_language(q["question"]) in (q["lang"], None), q["id"]
    counts = Counter((q["kind"], q["lang"]) for q in QUESTIONS)
    assert counts[("answerable", "de")] >= 10 and counts[("answerable", "en")] >= 10
    assert counts[("near_miss", "de")] and counts[("near_miss", "en")] and counts[("off_topic", "de")] >= 5
    assert Counter(q["split"] for q in QUESTIONS if q["kind"] == "answerable") == {"fit": 13, "heldout": 12}
