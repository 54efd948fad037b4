"""Answers people can trust (issue 22): the relevance gate, sentence choice and per-source context of `ask`, on the
notes set in tests/data/notes with the real model."""

import json
import shutil
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pytest

import ragstead
from ragstead.answer.ask import AskOptions, _order, gather
from ragstead.answer.base import REFUSAL, Context
from ragstead.answer.evidence import (
    Unit,
    answer_kind,
    header_answers,
    held_stems,
    holds_kind,
    line_structured,
    missing_names,
    quantity_type,
    split_units,
    stems_of,
    unit_features,
)
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.gate import (
    MODEL_FILE,
    TENTATIVE_BELOW,
    GateModel,
    GateModelError,
    Signals,
    confidence,
    load_model,
    parse_model,
)
from ragstead.answer.quotes import quote_markers
from ragstead.errors import InvalidQueryError

NOTES = Path(__file__).parent / "data" / "notes"
SCENARIO = [  # the questions: (question, the fact the first sentence must hold)
    ("What did we decide about Friday deploys?", "no Friday deploys"),
    ("Do the huts on the Alta Via accept cards?", "accept cards"),
    ("Which book should I read next?", "The Overstory"),
    ("Which database did we choose for Project Atlas?", "PostgreSQL"),
]
OFF_TOPIC = ["What is the capital of Australia?", "How do I knit a scarf?", "Who invented the telephone?",
             "How do hurricanes get their names?"]
# Off the folder's topics, but in its words (the apple cake's recipe beats in eggs): since the gate reads units after
# their titles (issue 52) it sits at its threshold, so it may be answered, only ever tentatively.
NEAR_OFF_TOPIC = "best pancake recipe without eggs"


@pytest.fixture(scope="module")
def notes_kb(tmp_path_factory, real_embedder):
    root = tmp_path_factory.mktemp("notes-project")
    shutil.copytree(NOTES / "notes", root / "notes")
    kb = ragstead.open(root, roots=("notes",), owner="me", embedder=real_embedder)
    report = kb.index()
    assert len(report.added) == 43 and not report.skipped  # md, txt, html, docx and pdf all load
    yield kb
    kb.close()


@pytest.mark.parametrize(("question", "fact"), SCENARIO)
def test_the_scenario_questions_are_answered_with_the_right_sentence_first(notes_kb, question, fact):
    result = notes_kb.ask(question, user="me", extractive=True)
    assert not result.refused and result.provider == "extractive"
    first = result.text.split(" [")[0]
    assert fact in first, result.text
    assert not result.text.startswith("Attendees"), result.text
    assert result.gate["passed"] and result.gate["decided_by"] == "gate"
    assert result.gate["score"] >= result.gate["threshold"] and result.gate["confidence"] == "likely"


def test_a_sentence_under_the_right_heading_is_quoted_though_it_repeats_none_of_the_question(notes_kb):
    # "Duration: 47 minutes" holds no word of the question; its heading ("Postmortem: checkout outage") does.
    answer = notes_kb.ask("How long did the checkout outage last?", user="me", extractive=True)
    assert "47 minutes" in answer.text and answer.gate["passed"]
    units = split_units("# Postmortem: checkout outage\n\nDuration: 47 minutes.\n\n## Root cause\n"
                        "The pool size was set in two places.")
    assert [u.context for u in units] == ["Postmortem: checkout outage", "Postmortem: checkout outage Root cause"]
    assert split_units("Home network notes\n\nThe router is in the hallway cupboard.")[0].context == \
        "Home network notes"  # a title line is the heading of what follows


def test_a_near_miss_the_gate_lets_through_is_marked_tentative(notes_kb):
    # The home network note is the right topic but holds no password: the gate cannot tell (docs/design.md, "The
    # relevance gate"), so the answer says it is unsure instead of sounding like the scenario answers above.
    # Since the gate reads units after their headings (issue 52) it refuses this one outright; either way it never
    # sounds sure.
    near = notes_kb.ask("What's the wifi password?", user="me", extractive=True)
    assert near.refused or (near.gate["confidence"] == "tentative"
                            and near.gate["threshold"] <= near.gate["score"] < TENTATIVE_BELOW)
    assert confidence(TENTATIVE_BELOW, True) == "likely" and confidence(TENTATIVE_BELOW - 1e-9, True) == "tentative"
    assert confidence(0.99, False) == "refused"


def test_a_name_the_evidence_lacks_makes_the_answer_tentative(notes_kb):
    # The Atlas kickoff answers which database was chosen; no note names a project Zephyr, so the answer, however
    # well the rest of the question matches, is about something else.
    sure = notes_kb.ask("Which database did we choose for Project Atlas?", user="me", extractive=True)
    assert sure.gate["confidence"] == "likely" and not sure.notes
    near = notes_kb.ask("Which database did we choose for Project Zephyr?", user="me", extractive=True)
    assert near.refused or (near.gate["confidence"] == "tentative" and "never mention Zephyr" in near.notes[0])
    assert missing_names("Which restaurant did I book in Rome?", ["Dinner at Da Mario in Paris, booked for 8."]) \
        == ["Rome"]
    # A possessive names the person, not a person and an "s": Mila is in the note, Ivo is not.
    assert missing_names("When is Mila's birthday?", ["Mila was born on 3 May 2019."]) == []
    assert missing_names("When is Ivo’s birthday?", ["Mila was born on 3 May 2019."]) == ["Ivo"]


def test_off_topic_questions_still_get_the_exact_refusal(notes_kb):
    for question in OFF_TOPIC:
        out = notes_kb.ask(question, user="me", extractive=True).to_dict()
        assert out == {**out, "answer": REFUSAL, "refused": True, "citations": [], "provider": None}, question
        assert not out["gate"]["passed"] and out["gate"]["score"] < out["gate"]["threshold"]
    near = notes_kb.ask(NEAR_OFF_TOPIC, user="me", extractive=True)
    assert near.refused or near.gate["confidence"] == "tentative", near.text


def test_the_ask_json_reports_the_gate_and_its_signals(notes_kb):
    data = notes_kb.ask("How much rent do I pay?", user="me", extractive=True).to_dict()
    gate = data["gate"]
    assert set(gate) == {"score", "threshold", "passed", "confidence", "decided_by", "signals"}
    assert set(gate["signals"]) == {"dense", "lexical", "sentence", "coverage", "agreement", "evidence"}
    assert all(isinstance(v, float) for v in gate["signals"].values())
    assert 0.0 <= gate["signals"]["lexical"] <= 1.0 and 0.0 <= gate["signals"]["coverage"] <= 1.0
    assert gate["threshold"] == load_model().threshold and data["retrieval"]["min_similarity"] is None
    assert json.loads(json.dumps(data)) == data
    assert "1,240 €" in data["answer"]


def test_min_similarity_replaces_the_gate_and_min_confidence_moves_it(notes_kb):
    question = "What is the capital of Australia?"
    legacy = notes_kb.ask(question, user="me", extractive=True, min_similarity=-1.0)
    assert not legacy.refused and legacy.gate["decided_by"] == "min_similarity" and legacy.gate["passed"]
    assert legacy.retrieval["min_similarity"] == -1.0
    strict = notes_kb.ask("What did we decide about Friday deploys?", user="me", extractive=True, min_similarity=0.99)
    assert strict.refused and strict.gate["decided_by"] == "min_similarity"
    assert not notes_kb.ask(question, user="me", extractive=True, min_confidence=0.0).refused
    assert notes_kb.ask("Which book should I read next?", user="me", extractive=True, min_confidence=1.0).refused
    for bad in ({"min_confidence": 1.5}, {"min_confidence": -0.1}, {"min_similarity": 2.0}):
        with pytest.raises(InvalidQueryError):
            notes_kb.ask(question, user="me", extractive=True, **bad)


def test_context_is_deduplicated_and_handed_over_source_by_source(make_project):
    text = "We chose PostgreSQL 16 for the billing database in March, replacing MySQL."
    project = make_project({"kb/users/alice/db.md": text, "kb/users/alice/copy-of-db.md": text,
                            "kb/users/alice/other.md": "The billing team meets on Tuesdays to review invoices."})
    project.index()
    from ragstead.filters import QueryFilters
    from ragstead.retrieval.search import SearchOptions

    _, contexts = gather("Which database did we choose for billing?", project.store, project.embedder,
                         QueryFilters.build(user_slug="alice"), AskOptions(SearchOptions()),
                         project.settings.path_rules)
    assert [c.text for c in contexts].count(text) == 1  # the copy adds nothing the prompt has not got
    assert contexts.relevance.passed and contexts[0].text == text
    assert all(len(c.unit_similarities) == len(split_units(c.text)) for c in contexts)
    hits = [SimpleNamespace(doc_id=d) for d in ("a", "b", "a", "c", "b")]
    assert _order(hits, True) == [0, 2, 1, 4, 3] and _order(hits, False) == [0, 1, 2, 3, 4]


def test_the_shipped_gate_model_loads_and_a_broken_one_is_refused(tmp_path):
    assert (resources.files("ragstead.answer") / MODEL_FILE).is_file()  # package data
    model = load_model()
    assert isinstance(model, GateModel) and 0.0 < model.threshold < 1.0
    assert set(model.features) <= set(Signals.__dataclass_fields__)
    strong, weak = Signals(0.7, 0.9, 0.8, 1.0, 0.8, 0.9), Signals(0.1, 0.0, 0.15, 0.0, 0.0, 0.01)
    assert model.probability(strong) > model.threshold > model.probability(weak)
    raw = model.to_dict()
    assert parse_model(json.loads(json.dumps(raw))).to_dict() == raw
    for broken in ({**raw, "features": ["nope"]}, {**raw, "scale": [0.0] * len(raw["scale"])},
                   {k: v for k, v in raw.items() if k != "sentence"}):
        with pytest.raises(GateModelError):
            parse_model(broken, "broken.json")
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(GateModelError, match=r"bad\.json"):
        load_model(str(path))


def test_units_keep_table_rows_and_wrapped_lines_together_and_mark_headers():
    units = split_units("Japan budget (two people)\n\nItem\nCost\n\nTotal\n7,520 €\n\nKR3: a restore from\n"
                        "backup is tested every month.\n\nAttendees: Marta (PM), Jonas (backend), me.\n\n"
                        "Rent is 1,240 € warm. Mr. Albers gets it on the 1st.")
    assert [(u.text, u.header) for u in units] == [
        ("Japan budget (two people)", ""), ("Total 7,520 €", None),
        ("KR3: a restore from backup is tested every month.", None),
        ("Attendees: Marta (PM), Jonas (backend), me.", "attendees"),
        ("Rent is 1,240 € warm.", None), ("Mr. Albers gets it on the 1st.", None)]
    attendees = units[3]
    assert header_answers(attendees, "person", stems_of("who attended"), stems_of("attendees"))
    assert not header_answers(attendees, "entity", stems_of("which database"), stems_of("attendees"))
    assert not header_answers(units[0], "quantity", stems_of("budget"), set())  # a title never leads
    assert header_answers(Unit("We chose it.", 1), None, set(), set())
    # An HTML page's h1 with a dash and an ampersand is still a short title: eight words, not ten.
    h1 = split_units("Tom & Sara's wedding – 24 August 2024, Gut Kaltenbach\nDress code: summer formal, no black.")
    assert [(u.text, u.header) for u in h1] == [("Tom & Sara's wedding – 24 August 2024, Gut Kaltenbach", ""),
                                                ("Dress code: summer formal, no black.", None)]
    # A fragment joins the next sentence of its block (the name the sentence is about); a lone one is dropped.
    podcast = split_units("- Hard Fork for tech news on the commute.\n- To try: Acquired. Jonas recommends the Nvidia "
                          "episode.\n\nIngredients\n\nA real sentence is here. Tiny end.")
    assert [u.text for u in podcast] == ["Hard Fork for tech news on the commute.",
                                         "To try: Acquired. Jonas recommends the Nvidia episode.",
                                         "A real sentence is here."]
    long_line = split_units("We moved the team offsite to the lake house near Annecy for three days")
    assert long_line[0].header is None  # ten words: a sentence without its full stop, not a title


def test_units_follow_the_documents_structure_and_drop_markdown_markup():
    # A plain-text file's lines are its units; a line starting in lower case after an open clause continues one.
    log = ("Car log\n\n2023-04-11  Winter tyres off, summer tyres on\n2023-09-28  Inspection at Menke, oil change\n"
           "and brake fluid, 389 EUR\n2024-03-02  TÜV passed, next one due in March 2026")
    assert [u.text for u in split_units(log, lines=True)] == [
        "2023-04-11 Winter tyres off, summer tyres on", "2023-09-28 Inspection at Menke, oil change and brake fluid, "
        "389 EUR", "2024-03-02 TÜV passed, next one due in March 2026"]
    assert line_structured("notes/car-log.txt") and not line_structured("notes/lease.pdf")
    # A markdown table row is a unit of its own; emphasis, code and link syntax never reach the answer.
    table = split_units("## Costs\n\n| Item | Cost |\n|---|---|\n| Flights | 1,800 € |\n| **Total** | 7,520 € |\n"
                        "Book the `JR pass` via [the agency](https://example.org/jr) *before* May, _not_ at_home.")
    assert [u.text for u in table] == ["Flights | 1,800 €", "Total | 7,520 €",
                                       "Book the JR pass via the agency before May, not at_home."]


def test_a_plain_text_line_is_answered_alone_and_quoted_with_its_offsets():
    log = "Car log\n\n2023-09-28  Inspection at Autohaus Menke, 389 EUR\n2024-03-02  TÜV passed, no defects"
    text = ExtractiveAnswerer().answer("When did the car pass the TÜV?",
                                       [Context(1, log, "notes/car-log.txt", {"chunk_id": "c1"}, 0.5)])
    assert text == "2024-03-02 TÜV passed, no defects [1]", text
    markdown = "# Costs\n\n| Item | Cost |\n|---|---|\n| **Total** | 7,520 € |"
    answered = ExtractiveAnswerer().answer("What is the total?", [Context(1, markdown, "x.md", {"chunk_id": "c"}, .5)])
    assert "**" not in answered and answered.startswith("Total | 7,520 €")
    quoted = quote_markers(answered, [(markdown, True)]).quotes[1][0]
    assert markdown[quoted.char_start:quoted.char_end] == quoted.text == "**Total** | 7,520 €"


def test_answer_kinds_and_what_holds_them():
    assert [answer_kind(q) for q in ("When is hack week?", "How much rent do I pay?", "Who is on call?",
                                     "Where is the router?", "Which book should I read next?",
                                     "Do the huts accept cards?")] == [
        "date", "quantity", "person", "place", "entity", None]
    assert holds_kind("Hack week is 18-22 March.", "date", "When is hack week?")
    assert not holds_kind("Hack week is about developer experience.", "date", "When is hack week?")
    assert holds_kind("The fee is 280 EUR.", "quantity", "How much is the fee?")


def test_a_header_line_never_leads_the_extractive_answer():
    note = ("Attendees: Marta (PM), Jonas (backend), me.\n\nDatabase: we chose PostgreSQL. Jonas argued for "
            "MongoDB, but the reporting queries are relational.")
    context = Context(1, note, "notes/atlas.md", {"chunk_id": "c1"}, 0.5)
    text = ExtractiveAnswerer().answer("Which database did we choose for Project Atlas?", [context])
    assert text.startswith("Database: we chose PostgreSQL. [1]"), text
    title_only = Context(1, "Atlas weekly status\n\nThe load test peaked at 1,800 events per second.",
                         "notes/status.txt", {"chunk_id": "c2"}, 0.5)
    assert ExtractiveAnswerer().answer("Atlas status?", [title_only]).startswith("The load test")


def test_a_compound_meets_its_parts_in_the_lexical_signals():
    # "rollback" and "roll back" are one word to a reader; inflections already meet through the stemmer.
    assert held_stems("Rollbacks: use make rollback ENV=prod.", "How do I roll back a bad deploy?") >= {"roll", "back"}
    assert held_stems("We rolled back the release on Friday.", "When did we do the rollback?") == {"rollback"}
    assert held_stems("The household insurance covers theft.", "What am I insured for?") == {"insur"}
    question = "How do I roll back a bad deploy?"
    compound = Unit("Rollbacks: use make rollback ENV=prod, which redeploys the previous image.", 0)
    other = Unit("Deploys go out on weekdays after the standup, never on Fridays.", 1)
    overlap = [row[1] for row, _ in unit_features(question, [(0, compound, 0.5), (0, other, 0.5)])]
    assert overlap[0] > 0


def test_a_quantity_question_wants_its_own_kind_and_the_answer_is_not_padded():
    # "How long" wants a duration, "how much is" an amount, "how many" a count: an ingredient weight answers none.
    assert [quantity_type(q) for q in ("How long does the cake bake?", "How much is the gym?",
                                       "How many people came?", "How much stock goes in?")] == [
        "duration", "amount", "count", None]
    assert holds_kind("Oven at 180 °C, about 50 minutes.", "quantity", "How long does the apple cake bake?")
    assert not holds_kind("250 g flour and 2 tsp baking powder", "quantity", "How long does the apple cake bake?")
    assert holds_kind("Gym – 59 € a month.", "quantity", "How much is the gym membership?")
    recipe = ("Grandma's apple cake\n\n- 250 g flour and 2 tsp baking powder\n- Oven at 180 °C (fan 160 °C), about 50 "
              "minutes.\n- Cream the butter and sugar, beat in the eggs one at a time, then fold in the flour.")
    text = ExtractiveAnswerer().answer("How long does the apple cake bake?",
                                       [Context(1, recipe, "recipes/apple-cake.md", {"chunk_id": "c"}, 0.6)])
    assert text == "Oven at 180 °C (fan 160 °C), about 50 minutes. [1]", text


def test_a_total_line_answers_a_question_for_the_total_alone():
    budget = ("Japan budget (two people)\n\n| Item | Cost |\n|---|---|\n"
              "| Flights Frankfurt–Tokyo, return 2 × 1,140 € | 2,280 € |\n| Trains and passes | 640 € |\n"
              "| **Total** | 7,520 € |")
    text = ExtractiveAnswerer().answer("How much did the Japan trip cost in total?",
                                       [Context(1, budget, "travel/japan-budget.md", {"chunk_id": "c"}, 0.6)])
    assert text == "Total | 7,520 € [1]", text


SPANS = {  # question: (a note that gives both ends of a span, the sentence that must lead)
    "When does the lease end?": ("Flat – Lindenstraße 7\n\nLandlord: Mrs. Berger.\nThe lease starts on 1 April 2024. "
                                 "It ends on 31 March 2026, with an option to extend by a year.",
                                 "It ends on 31 March 2026"),
    "When does the phone contract end?": ("Phone contract\n\nThe contract started on 1 June 2024.\nIt runs until 31 "
                                          "May 2026 and renews by a year unless cancelled.",
                                          "It runs until 31 May 2026"),
    "When did my probation begin?": ("Probation\n\nMy probation period began on 2 January 2025.\nIt finishes on 30 "
                                     "June 2025; the review meeting is a week before.",
                                     "My probation period began on 2 January 2025"),
}


def test_a_date_question_about_an_end_wants_the_end_date_not_the_start_date_beside_it():
    # "When does the lease end?" was answered with the sentence holding the start date; the end date was the next.
    assert not holds_kind("The lease starts on 1 April 2024.", "date", "When does the lease end?")
    assert holds_kind("It ends on 31 March 2026.", "date", "When does the lease end?")
    assert holds_kind("It runs until 31 May 2026.", "date", "When does the contract expire?")
    assert not holds_kind("It runs until 31 May 2026.", "date", "When did the contract start?")
    assert holds_kind("The surf lesson runs from 15:00 to 17:00.", "date", "When does the surf lesson end?")
    assert holds_kind("The lease starts on 1 April 2024.", "date", "When is the lease signed?")  # neither end
    for question, (note, lead) in SPANS.items():
        text = ExtractiveAnswerer().answer(question, [Context(1, note, "notes/n.md", {"chunk_id": "c"}, 0.6)])
        assert text.startswith(lead), (question, text)


def test_the_other_ends_date_does_not_lead_though_the_model_finds_it_closer(real_embedder):
    # With the sentences' real cosines the start date's sentence ("The lease starts ...") is the closer one: it
    # must not lead an answer about the end however close it is.
    from ragstead.answer.gate import UnitVectorCache

    cache = UnitVectorCache(real_embedder)
    for question, (note, lead) in SPANS.items():
        similarities = tuple(float(x) for x in cache.vectors(note, False) @ real_embedder.embed_query(question))
        context = Context(1, note, "notes/n.md", {"chunk_id": "c"}, 0.6, unit_similarities=similarities)
        text = ExtractiveAnswerer().answer(question, [context])
        assert text.startswith(lead), (question, text)
