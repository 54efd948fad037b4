"""The relevance gate per embedding model (#47.1): the gate is fitted on the default model's cosines; the
multilingual model's cosines sit higher (off-topic units near 0.8), so each catalogued model's cosines are read
through a linear map onto the default's scale (gate_model.json `cosine_maps`, fitted by `python -m bench
bilingual --fit`). On the bilingual set with the multilingual model, the shipped gate answered every off-topic
question before the map."""

import json
import shutil
from pathlib import Path

import pytest

import ragstead
from ragstead.answer.gate import Candidate, GateModelError, load_model, measure, parse_model

BILINGUAL = Path(__file__).parent / "data" / "bilingual"
MULTILINGUAL = "multilingual-e5-small-q4"  # the embedder name of the catalogued e5-small-q4


def test_a_cosine_map_moves_every_cosine_the_gate_reads_and_only_for_its_embedder() -> None:
    model = load_model()
    assert model.cosine_map("all-MiniLM-L6-v2 of some other name") == (0.0, 1.0)
    a, b = model.cosine_map(MULTILINGUAL)
    assert (a, b) != (0.0, 1.0) and b > 0  # shipped: fitted on the bilingual set
    candidates = [Candidate("The deposit is 2,340 euros, paid in March.", 0.85, 3.0)]
    units = {0: [0.86]}
    plain, _ = measure("How high is the deposit?", candidates, units, {"deposit": 3.0}, model.sentence)
    mapped, _ = measure("How high is the deposit?", candidates, units, {"deposit": 3.0}, model.sentence, (a, b))
    assert mapped.dense == pytest.approx(a + b * 0.85) and mapped.sentence == pytest.approx(a + b * 0.86)
    assert (mapped.lexical, mapped.coverage) == (plain.lexical, plain.coverage)  # no cosine in these
    assert mapped.evidence != plain.evidence  # the sentence scorer reads the unit's cosine too


def test_a_cosine_map_round_trips_and_must_keep_the_order() -> None:
    raw = load_model().to_dict()
    assert parse_model(json.loads(json.dumps(raw))).to_dict() == raw
    with pytest.raises(GateModelError, match="order"):
        parse_model({**raw, "cosine_maps": {MULTILINGUAL: [0.1, -1.0]}}, "broken.json")
    older = {k: v for k, v in raw.items() if k != "cosine_maps"}  # a model file from before the maps
    assert parse_model(older).cosine_map(MULTILINGUAL) == (0.0, 1.0)


@pytest.fixture(scope="module")
def multilingual(tmp_path_factory):
    root = tmp_path_factory.mktemp("bilingual")
    shutil.copytree(BILINGUAL / "notes", root / "notes")
    kb = ragstead.open(root, roots=("notes",), owner="me", model="e5-small-q4")
    kb.index()
    yield kb
    kb.close()


def _questions(kind: str) -> list[dict]:
    rows = [json.loads(line) for line in (BILINGUAL / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    return [q for q in rows if q["kind"] == kind]


def test_the_multilingual_model_refuses_off_topic_questions_and_answers_german_as_often_as_english(
        multilingual) -> None:
    assert multilingual.embedder.name == MULTILINGUAL
    answered = [q["question"] for q in _questions("off_topic")
                if not multilingual.ask(q["question"], user="me", extractive=True).refused]
    assert answered == []  # before the map: all ten answered

    def share_answered(lang: str) -> float:
        asked = [q for q in _questions("answerable") if q["lang"] == lang]
        return sum(not multilingual.ask(q["question"], user="me", extractive=True).refused for q in asked) / len(asked)

    german, english = share_answered("de"), share_answered("en")
    assert german >= english > 0.5, (german, english)
