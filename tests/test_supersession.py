"""The newer note wins (issue 40, item 2): of two notes that state the same thing with different values, the newer
leads the answer and the older is cited as superseded; two notes that agree, or speak of different things, are
left alone. A document's date: front matter `date`, else a date in its name, else its modification time."""

import json
import os
from pathlib import Path

import pytest

import ragstead
from helpers.cli_runner import run_ragstead
from ragstead.answer.base import Context, Locator
from ragstead.answer.prompt import load_template
from ragstead.answer.supersession import Statement, disagreements, document_day, label_superseded

QUESTION = "When does the team meet?"
OLD_DAY, NEW_DAY = "2024-03-04", "2025-05-12"
MARCH_2024 = 1709550000  # 2024-03-04 11:00 UTC
MAY_2025 = 1747044000  # 2025-05-12 10:00 UTC


def _statements(*rows: tuple[str, str, str | None] | tuple[str, str, str | None, str]) -> list[Statement]:
    return [Statement(i, row[0], row[1], row[2], row[3] if len(row) > 3 else "") for i, row in enumerate(rows)]


# -- the detector ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("newer_first", [True, False])
def test_two_dated_statements_of_one_thing_with_different_values_disagree_and_the_newer_wins(newer_first):
    rows = [("The team meets on Wednesdays.", "b.md", NEW_DAY), ("The team meets on Mondays.", "a.md", OLD_DAY)]
    found = disagreements(QUESTION, _statements(*(rows if newer_first else rows[::-1])))
    assert len(found) == 1
    assert "Wednesdays" in found[0].newer.text and found[0].newer.date == NEW_DAY
    assert "Mondays" in found[0].older.text and found[0].older.date == OLD_DAY


@pytest.mark.parametrize(("question", "older", "newer"), [
    ("Which day does the team meet?", "The team meets on Mondays.", "Since May 2025 the team meets on Wednesdays."),
    ("How much is the rent?", "The rent is 900 € a month.", "The rent is 950 € a month from June."),
    ("How much does the gym cost?", "The gym costs 29 € a month.", "The gym costs 34 € a month now."),
    ("Where is the spare key?", "The spare key is in the garage.", "The spare key is under the doormat."),
    ("Who is the landlord?", "The landlord is Mr Weber.", "The landlord is Anna Kraus since March."),
    ("How many people are on the team?", "The team has 5 people.", "The team has 7 people."),
])
def test_a_date_an_amount_a_count_a_place_or_a_name_can_be_superseded(question, older, newer):
    found = disagreements(question, _statements((older, "a.md", OLD_DAY), (newer, "b.md", NEW_DAY)))
    assert [(d.newer.text, d.older.text) for d in found] == [(newer, older)]


@pytest.mark.parametrize(("question", "first", "second"), [
    # the same value, or one holding the other: they agree
    (QUESTION, ("The team meets on Mondays.", "a.md", OLD_DAY), ("The team meets on Mondays.", "b.md", NEW_DAY)),
    (QUESTION, ("The team meets on Mondays.", "a.md", OLD_DAY),
     ("The team meets on Mondays at 10:00.", "b.md", NEW_DAY)),
    # two teams: in the sentence, in the headings above it, by name
    (QUESTION, ("The platform team meets on Mondays.", "a.md", OLD_DAY),
     ("The design team meets on Wednesdays.", "b.md", NEW_DAY)),
    (QUESTION, ("We meet on Mondays.", "a.md", OLD_DAY, "Platform team"),
     ("We meet on Wednesdays.", "b.md", NEW_DAY, "Design team")),
    (QUESTION, ("Marta's team meets on Mondays.", "a.md", OLD_DAY),
     ("Jonas's team meets on Wednesdays.", "b.md", NEW_DAY)),
    ("Which day does the platform team meet?", ("The platform team meets on Mondays.", "a.md", OLD_DAY),
     ("The design team meets on Wednesdays.", "b.md", NEW_DAY)),
    ("Who is the landlord?", ("The landlord of the flat is Mr Weber.", "a.md", OLD_DAY),
     ("The landlord of the garage is Anna Kraus.", "b.md", NEW_DAY)),
    # two different things that hold a weekday
    (QUESTION, ("The team meets on Mondays.", "a.md", OLD_DAY),
     ("The bins are collected on Wednesdays.", "b.md", NEW_DAY)),
    # no way to tell which is newer: one day, an unknown date, one document
    (QUESTION, ("The team meets on Mondays.", "a.md", NEW_DAY), ("The team meets on Wednesdays.", "b.md", NEW_DAY)),
    (QUESTION, ("The team meets on Mondays.", "a.md", None), ("The team meets on Wednesdays.", "b.md", NEW_DAY)),
    (QUESTION, ("The team meets on Mondays.", "a.md", OLD_DAY), ("The team meets on Wednesdays.", "a.md", NEW_DAY)),
    # a question about past events has one true answer per event
    ("When did I visit the dentist?", ("I visited the dentist on 3 March.", "a.md", OLD_DAY),
     ("I visited the dentist on 5 June.", "b.md", NEW_DAY)),
    ("What was the original go-live target?", ("The go-live target is June 17.", "a.md", OLD_DAY),
     ("The go-live target is July 1.", "b.md", NEW_DAY)),
    # no value asked for
    ("Tell me about the team meeting", ("The team meets on Mondays.", "a.md", OLD_DAY),
     ("The team meets on Wednesdays.", "b.md", NEW_DAY)),
])
def test_no_false_alarm_when_the_notes_agree_speak_of_different_things_or_cannot_be_ordered(question, first, second):
    assert disagreements(question, _statements(first, second)) == []


def test_the_document_day_is_the_day_part_of_created_at():
    assert document_day("2025-05-12T00:00:00+00:00") == "2025-05-12"
    assert document_day(None) is None and document_day("") is None and document_day("last spring") is None


def test_an_extractive_answer_labels_the_superseded_sentence():
    text = "The team meets on Wednesdays. [1] Bring your laptop. [2] The team meets on Mondays. [2]"
    assert label_superseded(text, [("The team meets on Mondays.", OLD_DAY)]) == (
        "The team meets on Wednesdays. [1] Bring your laptop. [2] Superseded (2024-03-04): The team meets on "
        "Mondays. [2]")
    assert label_superseded(text, [("Not quoted.", OLD_DAY)]) == text


def test_an_llm_reads_each_document_s_date_and_is_told_the_newer_wins():
    context = Context(1, "The team meets on Mondays.", "notes/team.md", Locator(None, None, None, "c1"), 0.8,
                      date=OLD_DAY)
    assert context.to_dict()["date"] == OLD_DAY
    assert "date" not in Context(1, "x", "s", Locator(None, None, None, "c1"), 0.8).to_dict()
    messages = load_template("grounded").messages(QUESTION, [context])
    assert f'"date": "{OLD_DAY}"' in messages[-1]["content"] and "newer" in messages[0]["content"]


# -- through ask, with the real model --------------------------------------------------------------------------

OLD_NOTE = "# Team sync\n\nThe team meets on Mondays in the small room.\nBring your laptop and the weekly numbers.\n"
NEW_NOTE = "# Team sync\n\nThe team meets on Wednesdays.\nMarta books the room every quarter.\n"


def _ask(root: Path, embedder, files: dict[str, str], times: dict[str, int] | None = None,
         question: str = QUESTION) -> ragstead.Answer:
    (root / "ragstead.toml").write_text('[ragstead]\nowner = "me"\nroots = ["notes"]\n', encoding="utf-8")
    for name, text in files.items():
        path = root / "notes" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for name, when in (times or {}).items():
        os.utime(root / "notes" / name, (when, when))
    with ragstead.open(root, embedder=embedder) as kb:
        kb.index()
        return kb.ask(question, user="me", extractive=True)


def _assert_newer_wins(answer: ragstead.Answer, old_name: str, new_name: str, old_day: str, new_day: str) -> None:
    assert not answer.refused, answer.text
    assert answer.text.startswith("The team meets on Wednesdays."), answer.text
    assert f"Superseded ({old_day}): The team meets on Mondays" in answer.text
    by_source = {c.source: c for c in answer.citations}
    old, new = by_source[f"notes/{old_name}"], by_source[f"notes/{new_name}"]
    assert old.superseded_by == new.n and new.superseded_by is None
    assert [s.to_dict() for s in answer.superseded] == [{
        "n": old.n, "source": old.source, "date": old_day, "quote": "The team meets on Mondays in the small room.",
        "superseded_by": new.n, "newer_source": new.source, "newer_date": new_day}]
    data = answer.to_dict()
    assert data["superseded"][0]["superseded_by"] == new.n
    assert next(c for c in data["citations"] if c["n"] == old.n)["superseded_by"] == new.n
    assert "superseded_by" not in next(c for c in data["citations"] if c["n"] == new.n)


@pytest.mark.parametrize(("old_name", "new_name"), [("a-team.md", "b-team.md"), ("b-team.md", "a-team.md")])
def test_front_matter_date_beats_an_older_note_whichever_file_name_sorts_first(tmp_path, real_embedder, old_name,
                                                                                new_name):
    answer = _ask(tmp_path, real_embedder, {old_name: OLD_NOTE, new_name: f"---\ndate: {NEW_DAY}\n---\n{NEW_NOTE}"},
                  times={old_name: MARCH_2024, new_name: MARCH_2024})
    _assert_newer_wins(answer, old_name, new_name, OLD_DAY, NEW_DAY)


def test_the_date_in_a_file_name_orders_the_notes(tmp_path, real_embedder):
    answer = _ask(tmp_path, real_embedder, {"2024-03-04-team.md": OLD_NOTE, "2025-05-12-team.md": NEW_NOTE},
                  times={"2024-03-04-team.md": MAY_2025, "2025-05-12-team.md": MARCH_2024})  # the name wins
    _assert_newer_wins(answer, "2024-03-04-team.md", "2025-05-12-team.md", OLD_DAY, NEW_DAY)


def test_the_modification_time_orders_undated_notes(tmp_path, real_embedder):
    answer = _ask(tmp_path, real_embedder, {"team.md": NEW_NOTE, "sync.md": OLD_NOTE},
                  times={"team.md": MAY_2025, "sync.md": MARCH_2024})
    _assert_newer_wins(answer, "sync.md", "team.md", OLD_DAY, NEW_DAY)


def test_notes_that_agree_are_not_flagged(tmp_path, real_embedder):
    answer = _ask(tmp_path, real_embedder, {
        "2024-03-04-team.md": OLD_NOTE, "2025-05-12-team.md": NEW_NOTE.replace("Wednesdays", "Mondays")})
    assert not answer.refused and "Mondays" in answer.text
    assert answer.superseded == () and "superseded" not in answer.to_dict() and "Superseded" not in answer.text
    assert all(c.superseded_by is None for c in answer.citations)


def test_two_teams_meeting_days_are_not_flagged(tmp_path, real_embedder):
    answer = _ask(tmp_path, real_embedder, {
        "2024-03-04-platform.md": "# Platform team\n\nThe platform team meets on Mondays.\nWe demo on Fridays.\n",
        "2025-05-12-design.md": "# Design team\n\nThe design team meets on Wednesdays.\nCritique is open to all.\n"},
        question="When does the platform team meet?")
    assert not answer.refused and answer.text.startswith("The platform team meets on Mondays."), answer.text
    assert answer.superseded == () and "Superseded" not in answer.text


def test_the_cli_prints_the_superseded_line_and_the_json_carries_it(tmp_path, real_embedder):
    _ask(tmp_path, real_embedder, {"2024-03-04-team.md": OLD_NOTE, "2025-05-12-team.md": NEW_NOTE})
    shown = run_ragstead("ask", QUESTION, "--user", "me", "--extractive", "--root", str(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "superseded: [2] notes/2024-03-04-team.md (2024-03-04), by [1] notes/2025-05-12-team.md (2025-05-12)" \
        in shown.stdout, shown.stdout
    data = json.loads(run_ragstead("ask", QUESTION, "--user", "me", "--extractive", "--json", "--root",
                                   str(tmp_path)).stdout)
    assert data["superseded"][0]["source"] == "notes/2024-03-04-team.md"


class _Model:
    """An LLM answerer stand-in: it cites the newer note first and the older as what came before."""

    name = "fake-llm"

    def answer(self, question, contexts, on_text=None):  # type: ignore[no-untyped-def]
        self.dates = {c.source: c.date for c in contexts}
        new = next(c.n for c in contexts if "Wednesdays" in c.text)
        old = next(c.n for c in contexts if "Mondays" in c.text)
        return f"The team meets on Wednesdays [{new}]. Before that, it met on Mondays in the small room [{old}]."


def test_an_llm_answer_reads_the_dates_and_its_older_citation_is_marked_superseded(tmp_path, real_embedder):
    _ask(tmp_path, real_embedder, {"2024-03-04-team.md": OLD_NOTE, "2025-05-12-team.md": NEW_NOTE})
    model = _Model()
    with ragstead.open(tmp_path, embedder=real_embedder) as kb:
        answer = kb.ask(QUESTION, user="me", answerers=[model])
    assert answer.provider == "fake-llm"
    assert model.dates == {"notes/2024-03-04-team.md": OLD_DAY, "notes/2025-05-12-team.md": NEW_DAY}
    assert "Superseded" not in answer.text  # an LLM's text is its own
    old = next(c for c in answer.citations if c.source == "notes/2024-03-04-team.md")
    assert [s.n for s in answer.superseded] == [old.n] and old.superseded_by is not None


def test_the_api_returns_the_superseded_citation(tmp_path, real_embedder):
    from fastapi.testclient import TestClient

    from ragstead.api import ApiConfig, create_app

    _ask(tmp_path, real_embedder, {"2024-03-04-team.md": OLD_NOTE, "2025-05-12-team.md": NEW_NOTE})
    with ragstead.open(tmp_path, embedder=real_embedder) as kb, \
            TestClient(create_app(kb, ApiConfig(auth=False, as_user="me"))) as client:
        out = client.post("/v1/ask", json={"query": QUESTION, "extractive": True}).json()
    assert out["answer"].startswith("The team meets on Wednesdays.")
    assert [(s["source"], s["newer_source"]) for s in out["superseded"]] == [
        ("notes/2024-03-04-team.md", "notes/2025-05-12-team.md")]


# -- explicit revisions (the rules drawn from a newcomer's notes: a fit set, docs/design.md) ------------------------

ATLAS_OLD = ("# Project Atlas weekly sync — 2024-11-05\n\nDecisions:\n"
             "- Database for Atlas: we chose MySQL 8, because Tom's team already runs it.\n"
             "- Launch date target: 15 March 2025.\n")
ATLAS_NEW = ("# Project Atlas weekly sync — 2025-02-11\n\nDecisions:\n"
             "- We are switching the Atlas database from MySQL to PostgreSQL 16: we need JSONB and the pgvector "
             "extension.\n  This replaces the November decision.\n"
             "- Launch date moved to 2 June 2025 because of the migration.\n")


@pytest.mark.parametrize(("question", "older", "newer"), [
    # a revision shares few words with what it revises
    ("What is the Atlas launch date?", "Launch date target: 15 March 2025.",
     "Launch date moved to 2 June 2025 because of the migration."),
    ("Which database does Atlas use now?", "Database for Atlas: we chose MySQL 8, because Tom's team already runs it.",
     "We are switching the Atlas database from MySQL to PostgreSQL 16: we need JSONB and the pgvector extension."),
    # a past question about a decision that a newer note explicitly revises
    ("Which database did we choose for Atlas?", "Database for Atlas: we chose MySQL 8.",
     "We are switching the Atlas database from MySQL to PostgreSQL 16."),
])
def test_an_explicit_revision_in_a_newer_note_supersedes_the_older_value(question, older, newer):
    found = disagreements(question, _statements((older, "a.md", OLD_DAY, "Project Atlas weekly sync"),
                                                (newer, "b.md", NEW_DAY, "Project Atlas weekly sync")))
    assert [(d.newer.text, d.older.text) for d in found] == [(newer, older)]


def test_a_revision_orders_two_notes_of_one_day_and_a_plain_past_question_needs_one():
    older = ("Monthly rent: 1,150 EUR, due on the 5th of each month.", "lease.md", NEW_DAY)
    newer = ("From 1 February 2025 the monthly rent is 1,210 EUR, still due on the 5th.", "renewal.md", NEW_DAY)
    found = disagreements("How much is the monthly rent?", _statements(older, newer))
    assert [(d.newer.text, d.older.text) for d in found] == [(newer[0], older[0])]
    assert disagreements("Which database did we choose?", _statements(
        ("We chose MySQL 8 for the database.", "a.md", OLD_DAY),
        ("We chose PostgreSQL 16 for the database.", "b.md", NEW_DAY))) == []  # two decisions, no revision


@pytest.mark.parametrize("question", ["Which database did we choose for Atlas?", "Which database does Atlas use now?",
                                      "What is the Atlas launch date?"])
def test_the_revised_decision_leads_and_the_older_is_cited_as_superseded(tmp_path, real_embedder, question):
    answer = _ask(tmp_path, real_embedder, {"team-meeting-2024-11-05.md": ATLAS_OLD,
                                            "team-meeting-2025-02-11.md": ATLAS_NEW}, question=question)
    assert not answer.refused, answer.text
    assert answer.text.startswith(("We are switching", "Launch date moved")), answer.text
    assert "Superseded (2024-11-05): " in answer.text
    assert [(s.source, s.newer_source) for s in answer.superseded] == [
        ("notes/team-meeting-2024-11-05.md", "notes/team-meeting-2025-02-11.md")]


def test_a_statement_superseded_by_a_note_of_the_same_day_is_labelled_without_a_date():
    assert label_superseded("New. [1] Old rent 900 €. [2]", [("Old rent 900 €.", "")]) == (
        "New. [1] Superseded: Old rent 900 €. [2]")
