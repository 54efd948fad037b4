"""The reader (issue 52): the trained unit model that chooses the answering sentence, read after its headings, and
the two-part questions it answers part by part; on a small household folder written here, with the real model."""

import json
from importlib import resources

import numpy as np
import pytest

import ragstead
from ragstead.answer.evidence import Unit, in_context_text, question_parts
from ragstead.answer.reader import UNIT_FEATURES, Item, ReaderModelError, load_reader, parse_reader

HOUSEHOLD = {name: "\n\n".join(blocks) + "\n" for name, blocks in {
    "home/doctors.md": ["# Doctors", "## Dentist", "Dr. Amira Haddad, Lindenweg 4 - phone 0316 55 12 90, check-ups "
                        "every spring.", "## GP", "Dr. Paul Gruber, Mariengasse 9 - open consultation Mon-Fri "
                        "8:00-12:00.", "## Physio", "Praxis Bewegt, Annenstrasse 12 - six sessions in 2025."],
    "home/rental.md": ["# Rental contract - Ahornweg 3", "We signed the contract with the agency on 3 May 2022, in "
                       "their office.", "The rental runs from 1 June 2022 and ends on 31 May 2027 unless renewed.",
                       "Deposit: three months' rent, paid on 20 May 2022."],
    "home/boiler-invoice.md": ["# Installateur Weber - Invoice 2025-118", "Boiler service, labour 2 h: €160.00",
                               "Replacement valve: €189.00", "Travel flat rate: €35.00", "TOTAL incl. VAT: €412.80"],
    "kids/judo.md": ["# Mia - judo club", "Training is on Thursdays at 17:00 in the school sports hall, with coach "
                     "Ben.", "The term costs €120, paid at the start of September.", "Bring water and a towel."],
    "home/plumber.md": ["# Plumber", "Kurt Meier runs the firm with his son since 2019.",
                        "E-mail: kurt@meier-install.example", "Phone: 0316 40 22 81",
                        "Workshop: Griesgasse 21, 8020 Graz"],
    "pets/biscuit.md": ["# Biscuit (dog)", "Chip no. 276 098 106 512 901",
                        "Weight at the last vet visit: 23.1 kg (was 21.6 kg in 2024).",
                        "## Vet", "Dr. Ines Vogl, small animal practice\n0316 58 22 10\nKeplerstrasse 40, 8020 Graz"],
    "home/tax.md": ["# Tax return 2025", "Sent through the tax portal on 3 April 2026.", "## Tax adviser",
                    "Petra Lang\n0316 77 31 08\nlang@steuer-lang.example", "Her fee for 2025: €420"],
    "hobby/yoga.md": ["# Yoga at Studio Lila", "Thursday evening class: 19:15 to 20:30, with Nora.",
                      "A drop-in class costs €18; ten classes €150."],
    "kids/swim.md": ["# Noah - swimming course", "## Course", "Beginners' course (level 2) at the Auster pool, 12 "
                     "sessions.", "Lessons: Wednesdays 15:30 to 16:15, from 8 October.",
                     "Price for the whole course: €148, paid by transfer.", "Bring goggles and a swim cap."],
    # sheets: each row is rendered "date: ...; work: ...; cost_eur: ..." and its first column is a date
    "car/service-log.csv": ["date,mileage_km,garage,work,cost_eur\n2023-05-10,41200,Autohaus Berger,annual "
                            "inspection,289.50\n2024-10-02,52900,Autohaus Berger,clutch replaced,1140.00\n"
                            "2025-04-14,58100,Autohaus Berger,annual inspection + wipers,301.20"],
    "sport/races.csv": ["date,race,distance_km,time,notes\n2024-09-15,Harbour 10k,10,0:52:31,windy\n"
                        "2025-04-06,Spring half marathon,21.1,1:57:02,personal best"],
}.items()}


@pytest.fixture(scope="module")
def household(tmp_path_factory, real_embedder):
    root = tmp_path_factory.mktemp("household")
    for name, text in HOUSEHOLD.items():
        (root / "notes" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "notes" / name).write_text(text, encoding="utf-8")
    kb = ragstead.open(root, roots=("notes",), owner="me", embedder=real_embedder)
    kb.index()
    yield kb
    kb.close()


def _first(kb, question: str) -> str:
    shown = kb.ask(question, user="me", extractive=True)
    assert not shown.refused, question
    return shown.text.split("[")[0]


@pytest.mark.parametrize(("question", "fact"), [
    # each failed before the reader: refused (the gate read the units without their headings), or a line item led
    ("What did the boiler service cost in the end, everything included?", "412.80"),  # the total, not a line
    ("How heavy is Biscuit these days?", "23.1 kg"),  # the weight sits in a note about the dog
    ("What number do I call to reach my tax adviser?", "0316 77 31 08"),  # under "## Tax adviser"
    # held before too, and kept: the fact under a heading that names it, the end of a span, the phone beside e-mail
    ("Who is our family doctor?", "Gruber"),
    ("When does the rental run out?", "31 May 2027"),
    ("What is the plumber's phone number?", "0316 40 22 81"),
    # a sheet row whose first column is a date was read as a header line ("date: ...") and could not lead
    ("What did the clutch replacement cost?", "1140.00"),
    ("How long did the spring half marathon take me?", "1:57:02"),
])
def test_the_reader_leads_with_the_unit_that_answers(household, question: str, fact: str) -> None:
    assert fact in _first(household, question)


@pytest.mark.parametrize(("question", "facts"), [
    ("When is Noah's swimming and how much does the course cost?", ("15:30", "€148")),  # before: the time only
    ("When is Mia's judo training and how much does the term cost?", ("17:00", "€120")),
])
def test_a_two_part_question_gets_each_part_answered(household, question: str, facts: tuple[str, str]) -> None:
    shown = household.ask(question, user="me", extractive=True)
    assert all(fact in shown.text for fact in facts), shown.text
    assert not any("asks for" in note for note in shown.notes)


def test_a_name_the_quoted_sentences_lack_makes_the_answer_tentative(household) -> None:
    # There is no Wednesday yoga class; the swimming note handed over beside it says "Wednesdays", so every name
    # of the question is somewhere in the sources, but not in what the answer quotes.
    shown = household.ask("What time is the Wednesday yoga class?", user="me", extractive=True)
    assert shown.refused or (shown.gate.confidence == "tentative"
                             and any("never mention Wednesday" in note for note in shown.notes)), shown.text


def test_a_part_left_unanswered_is_said() -> None:
    from ragstead.answer.ask import _untyped

    assert _untyped("When is judo and how much does it cost?", "Judo is on Thursdays at 17:00.") == [
        ("amount", "how much does it cost?")]
    assert _untyped("When is judo?", "Judo is on Thursdays at 17:00.") == []


def test_question_parts() -> None:
    assert question_parts("When does Lena have piano, and how much do the lessons cost?") == [
        "When does Lena have piano", "how much do the lessons cost?"]
    assert question_parts("What is salt and pepper?") == ["What is salt and pepper?"]
    assert question_parts("Who came and what did they bring?") == ["Who came", "what did they bring?"]


def test_a_unit_is_read_after_its_headings() -> None:
    assert in_context_text(Unit("Dr. Paul Gruber, Mariengasse 9.", 0, None, "Doctors GP")) == (
        "Doctors GP: Dr. Paul Gruber, Mariengasse 9.")
    assert in_context_text(Unit("No heading above me.", 0)) == "No heading above me."


def test_the_shipped_reader_says_what_it_learned_from() -> None:
    raw = json.loads((resources.files("ragstead.answer") / "reader_model.json").read_text(encoding="utf-8"))
    card = raw["card"]
    assert "SQuAD 2.0, train split" in card["data"]["name"] and card["data"]["licence"] == "CC BY-SA 4.0"
    assert "dev" not in card["data"]["name"]
    assert card["held_out"]["top1_reader"] > card["held_out"]["top1_cosine"]  # measured when it was trained
    assert tuple(raw["unit"]["features"]) == UNIT_FEATURES


def test_a_header_that_does_not_answer_never_leads() -> None:
    reader = load_reader()
    items = [Item(0, Unit("Attendees: Marta, Jonas, me.", 0, "attendees", "Retro"), 0.9, 0.8),
             Item(0, Unit("We decided to ship on 4 March.", 1, None, "Retro"), 0.5, 0.8)]
    scores = reader.unit_scores("When do we ship?", items)
    assert scores[0] == 0.0 and scores[1] > 0


def test_a_reader_model_that_does_not_validate_is_refused() -> None:
    raw = load_reader().to_dict()
    raw["unit"]["features"] = raw["unit"]["features"][:-1]
    with pytest.raises(ReaderModelError):
        parse_reader(raw)
    raw = load_reader().to_dict()
    raw["unit"]["scale"] = [0.0] * len(UNIT_FEATURES)
    with pytest.raises(ReaderModelError):
        parse_reader(raw)
    assert np.isfinite(load_reader().unit_scores("anything?", [])).all()


def test_an_llm_answerer_is_handed_the_readers_choice_first() -> None:
    # The search ranked the talk about the contract first; the reader's best unit (the end date, its cosine the
    # higher) is in the second chunk: an LLM reads that chunk first, renumbered [1].
    from ragstead.answer.base import Context
    from ragstead.answer.extractive import reader_order

    talk = Context(1, "We talked with the agency about the rental contract, nothing decided.", "notes/talk.md",
                   {"chunk_id": "c1"}, 0.66, unit_similarities=(0.41,))
    lease = Context(2, "The rental runs from 1 June 2022 and ends on 31 May 2027 unless renewed.", "notes/lease.md",
                    {"chunk_id": "c2"}, 0.58, unit_similarities=(0.71,))
    handed = reader_order("When does the rental contract end?", [talk, lease])
    assert [(c.n, c.source) for c in handed] == [(1, "notes/lease.md"), (2, "notes/talk.md")]
    assert reader_order("When does the rental contract end?", [lease]) == [lease]


def test_ask_hands_an_llm_answerer_the_chunks_in_the_readers_order(household) -> None:
    from ragstead.answer.extractive import reader_order

    class Capture:  # an answerer that reads what it is handed and cites its first chunk
        name = "capture"

        def answer(self, question, contexts, on_text=None):
            self.seen = list(contexts)
            line = [x for x in contexts[0].text.splitlines() if x.strip() and not x.startswith("#")][-1]
            return f"{line} [1]"  # a quote of its first chunk, as an LLM's answer must hold

    question = "How long did the spring half marathon take me?"  # searched: races, doctors, swim; read otherwise
    capture = Capture()
    shown = household.ask(question, user="me", answerers=[capture])
    assert shown.provider == "capture" and len(capture.seen) >= 2
    assert [c.n for c in capture.seen] == list(range(1, len(capture.seen) + 1))
    assert capture.seen == reader_order(question, capture.seen)  # already in the reader's order: a fixed point
    assert shown.citations[0].source == capture.seen[0].source
