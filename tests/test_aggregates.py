"""Whole-folder questions (issue 46): sums, counts over a period, lists joined by "or", tags and sheet rows.

The household folders (tests/data/household) are the measurement set: written before any answering change,
in fit and held-out halves, scored by `python -m bench aggregates`. Here they are indexed once and asked through
the library, the CLI, the HTTP API and MCP: ana's answers never count or cite bruno's payments, and his never
hers.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.config import load_settings
from ragstead.knowledge_base import KnowledgeBase
from ragstead.request.model import AskRequest, Scope

HOUSEHOLD = Path(__file__).parent / "data" / "household"
ANA, BRUNO = "kb/users/ana/", "kb/users/bruno/"
TODAY = date(2026, 1, 10)


def test_the_household_set_has_thirty_questions_in_two_halves_over_files_that_exist() -> None:
    rows = [json.loads(line) for line in (HOUSEHOLD / "questions.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) >= 30 and len({row["id"] for row in rows}) == len(rows)
    assert {row["split"] for row in rows} == {"fit", "heldout"}
    assert min(sum(row["split"] == half for row in rows) for half in ("fit", "heldout")) >= 15
    for row in rows:
        assert row["figure"] and row["unit"] and row["units"], row["id"]
        for group in row["units"]:
            for path in group:
                assert (HOUSEHOLD / "kb/users/ana" / path).is_file(), (row["id"], path)
    kinds = {path.suffix for path in (HOUSEHOLD / "kb").rglob("*") if path.is_file()}
    assert {".eml", ".md", ".csv", ".xlsx", ".pdf"} <= kinds


# -- the question parser ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("question", "op", "topics", "start", "end"), [
    ("How much did I pay the roofer in 2025?", "sum", ("roofer",), "2025-01-01", "2025-12-31"),
    ("How many times did the car go to the garage in 2025?", "count", ("car garage",), "2025-01-01", "2025-12-31"),
    ("What did groceries cost in March 2025?", "sum", ("groceries",), "2025-03-01", "2025-03-31"),
    ("What did groceries cost in March?", "sum", ("groceries",), "2025-03-01", "2025-03-31"),  # the last March
    ("What did I spend at the garage in the first quarter?", "sum", ("garage",), "2026-01-01", "2026-03-31"),
    ("How much did I spend on groceries last quarter?", "sum", ("groceries",), "2025-10-01", "2025-12-31"),
    ("How much did I pay the roofer since March?", "sum", ("roofer",), "2025-03-01", None),
    ("How much did I pay the roofer or the garage this year?", "sum", ("roofer", "garage"), "2026-01-01",
     "2026-12-31"),
    ("What was the average garage bill in Q2 2025?", "average", ("garage",), "2025-04-01", "2025-06-30"),
    ("When did I last pay the roofer?", "latest", ("roofer",), None, None),
    ("When did the car first go to the garage?", "earliest", ("car garage",), None, None),
    ("How much have I paid the roofer in total?", "sum", ("roofer",), None, None),
    ("What did I pay for insurance in 2025?", "sum", ("insurance",), "2025-01-01", "2025-12-31"),
    ("How many garage visits were there in 2025?", "count", ("garage",), "2025-01-01", "2025-12-31"),
])
def test_aggregate_questions_are_parsed_with_their_topics_and_period(question, op, topics, start, end):
    from ragstead.answer.folder_question import folder_question

    parsed = folder_question(question, TODAY)
    assert parsed is not None and (parsed.op, parsed.topics) == (op, topics)
    period = parsed.period.to_dict() if parsed.period else {"from": None, "to": None}
    assert (period["from"], period["to"]) == (start, end)


def test_tags_senders_and_rows_are_parsed():
    from ragstead.answer.folder_question import folder_question, list_form, or_topics

    assert (folder_question("Which notes are tagged garden?", TODAY).tag,
            folder_question("How many notes are tagged #garden?", TODAY).op) == ("garden", "count")
    assert folder_question("Which e-mails are from Dana?", TODAY).sender == "Dana"
    assert folder_question("How many emails did I get from Dana Reyes in 2025?", TODAY).sender == "Dana Reyes"
    rows = folder_question("How many rows where status is open?", TODAY)
    assert (rows.op, rows.where) == ("count", ("status", "open"))
    total = folder_question("What is the total of amount where category is electricity?", TODAY)
    assert (total.op, total.column, total.where) == ("sum", "amount", ("category", "electricity"))
    assert folder_question("How many orders are still open?", TODAY).where == (None, "open")
    assert or_topics("Madrid or Porto") == ("Madrid", "Porto") and or_topics("the Lisbon trip") == ("the Lisbon trip",)
    assert list_form("In which notes do I mention the harbour?") == "which notes do I mention the harbour?"


@pytest.mark.parametrize("question", [
    "How much is the rent?", "What does a ticket to Porto cost?", "When is the dentist appointment?",
    "Which notes mention Lisbon?", "How many notes mention Lisbon?", "What is the wifi password?",
    "How many notes are there?", "Who came to the party?", "",
    # Fact questions of the notes set, taken for aggregates before: one value, not a sum over the folder.
    "How much was the rental deposit?", "What does nit mean in a review comment?",
    "How long did the checkout outage last?", "How many nights are we in Kyoto?",
    "What's the total budget for the Japan trip?", "Where is the team dinner on the first night in Lisbon?",
    "How much can I spend on a conference?", "How many moons does Jupiter have?", "Who was the first person in space?",
    "How much did I give to charity?",
])
def test_other_questions_are_not_whole_folder_ones(question):
    from ragstead.answer.folder_question import folder_question

    assert folder_question(question, TODAY) is None


def test_the_notes_sets_questions_stay_with_the_usual_answer():
    # tests/data/notes: 269 questions asking for one fact each; two name a period or "in total" and go to the
    # aggregates first (both hand on to the usual answer there: no amount of their topic is found).
    from ragstead.answer.folder_question import folder_question

    notes = Path(__file__).parent / "data" / "notes" / "questions.jsonl"
    rows = [json.loads(line) for line in notes.read_text().splitlines()]
    taken = {row["question"] for row in rows if folder_question(row["question"], TODAY) is not None}
    assert taken == {"How much did the car inspection cost in 2023?", "How much did the Beacon redesign cost in total?"}


def test_amounts_and_dates_are_read_with_their_currency():
    from ragstead.documents.amounts import amounts, dates, row_amount, row_date, row_fields

    said = "Paid €1,250.00 (not EUR 1.250,50 nor 480 euros or £60) on 20 March 2025; invoice 118, 212 kWh."
    assert [(a.value, a.currency) for a in amounts(said)] == [
        (Decimal("1250.00"), "EUR"), (Decimal("1250.50"), "EUR"), (Decimal("480"), "EUR"), (Decimal("60"), "GBP")]
    assert [d.day for d in dates("on 20 March 2025, March 3, 2025 and 2025-04-01")] == [
        date(2025, 3, 20), date(2025, 3, 3), date(2025, 4, 1)]
    row = row_fields("date: 2025-03-03; shop: Lidl; category: groceries; amount (EUR): 61.35")
    assert row is not None and row_amount(row) == (Decimal("61.35"), "EUR") and row_date(row) == date(2025, 3, 3)
    assert row_fields("Paid the roofer: yes") is None


# -- answers over the household folders ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder) -> Path:
    root = tmp_path_factory.mktemp("household")
    shutil.copytree(HOUSEHOLD / "kb", root / "kb")
    with KnowledgeBase(load_settings(root), embedder=real_embedder) as kb:
        kb.index()
    return root


@pytest.fixture(scope="module")
def kb(project, real_embedder) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(load_settings(project), embedder=real_embedder, providers=[ExtractiveAnswerer()]) as kb:
        yield kb


def _ask(kb: KnowledgeBase, question: str, user: str = "ana") -> dict:  # type: ignore[type-arg]
    return kb.ask(AskRequest(question, scope=Scope(user=user), extractive=True)).to_dict()


def _sources(data: dict) -> set[str]:  # type: ignore[type-arg]
    return {c["source"] for c in data["citations"]} | {u["source"] for u in data.get("units", [])} | {
        u["source"] for u in data.get("left_out", [])}


def test_a_sum_adds_every_payment_once_and_lists_each_with_its_date_and_amount(kb):
    data = _ask(kb, "How much did I pay the roofer in 2025?")
    assert (data["kind"], data["figure"], data["unit"], data["complete"]) == ("sum", "2070.00", "EUR", True)
    assert [(u["date"], u["amount"]) for u in data["units"]] == [
        ("2025-03-20", "1250.00"), ("2025-07-10", "340.00"), ("2025-10-02", "480.00")]
    assert all(u["quote"] in c["snippet"] or c["quote"] == u["quote"]
               for u, c in zip(data["units"], data["citations"], strict=True))
    # The invoice and the note "paid the roofer's invoice 118" are one payment: counted once, and said.
    assert any("counted once" in note for note in data["aggregate_notes"])
    reasons = {u["source"]: u["reason"] for u in data["left_out"]}
    assert reasons[ANA + "notes/house/skylight.md"] == "no amount"
    assert "the same payment" in reasons[ANA + "notes/house/roof.md"]
    assert "2,070.00" in data["answer"] and ANA + "notes/house/2024-11-storm.md" not in _sources(data)


def test_counts_averages_and_the_latest_over_a_period(kb):
    assert _ask(kb, "How many times did the car go to the garage in 2025?")["figure"] == "3"
    assert _ask(kb, "What did I spend at the garage in the first quarter of 2025?")["figure"] == "210.00"
    assert _ask(kb, "What was the average garage bill in 2025?")["figure"] == "205.00"
    assert _ask(kb, "How much did the garage cost since May 2025?")["figure"] == "405.00"
    latest = _ask(kb, "When did I last pay the roofer?")
    assert latest["figure"] == "2025-10-02" and [c["source"] for c in latest["citations"]] == [
        ANA + "pdf/2025-10-02-roofer-receipt.pdf"]


def test_an_amount_in_another_currency_is_left_out_and_the_answer_is_not_complete(kb):
    data = _ask(kb, "How much did I pay the dentist in 2025?")
    assert (data["figure"], data["complete"]) == ("85.00", False)
    assert [u["reason"] for u in data["left_out"] if u["currency"] == "GBP"] == ["another currency (GBP)"]


def test_sheet_rows_are_records(kb):
    assert _ask(kb, "How many rows where category is groceries?")["figure"] == "8"
    electricity = _ask(kb, "What is the total of amount where category is electricity?")
    assert (electricity["figure"], electricity["unit"], len(electricity["citations"])) == ("204.40", "EUR", 3)
    assert all("category: electricity" in c["quote"] for c in electricity["citations"])
    open_orders = _ask(kb, "How many orders are still open?")
    assert open_orders["figure"] == "3" and all("status: open" in c["quote"] for c in open_orders["citations"])
    assert _ask(kb, "What is the total of the orders where status is open?")["figure"] == "236.50"
    assert _ask(kb, "What did groceries cost in March 2025?")["figure"] == "168.00"


def test_a_list_joined_by_or_names_every_note_of_either(kb):
    data = _ask(kb, "Which notes mention Madrid or Porto?")
    assert (data["kind"], data["matched"], data["complete"]) == ("list", 5, True)
    assert BRUNO + "notes/trips/porto.md" not in _sources(data)
    assert _ask(kb, "How many notes mention Madrid or Porto?")["matched"] == 5
    assert _ask(kb, "Which notes mention Madrid and Porto?")["matched"] == 1
    harbour = _ask(kb, "In which notes do I mention the harbour?")
    assert harbour["kind"] == "list" and {c["source"] for c in harbour["citations"]} == {
        ANA + "notes/walks/cascais.md", ANA + "notes/boats.md"}


def test_tags_and_senders_choose_the_documents(kb):
    garden = _ask(kb, "Which notes are tagged garden?")
    assert garden["kind"] == "list" and {c["source"] for c in garden["citations"]} == {
        ANA + "notes/garden/tomatoes.md", ANA + "notes/garden/compost.md", ANA + "notes/garden/seeds.md"}
    assert _ask(kb, "How many notes are tagged garden?")["matched"] == 3
    dana = _ask(kb, "Which e-mails are from Dana?")
    assert {c["source"] for c in dana["citations"]} == {ANA + "mail/2025-02-11-book-club.eml",
                                                        ANA + "mail/2025-06-02-plants.eml"}


def test_wrong_footed_questions_go_on_to_the_usual_answer_never_a_complete_figure(kb):
    """A question that reads like one but counts nothing (no amount of the topic in the period) is handed on."""
    from ragstead.answer.aggregate import whole_folder
    from ragstead.answer.ask import AskOptions

    for question in ("How much does the roofer charge per hour?", "How many people came to the party?",
                     "How much did I pay the roofer in 2019?", "How many rows where status is lost?"):
        request = AskRequest(question, scope=Scope(user="ana"))
        assert whole_folder(request, kb, request.scope.filters(), AskOptions(kb.search_options(request))) == (
            None, None)


# -- scope: another user's payments are never counted, through every door ----------------------------------------

def test_the_library_counts_only_the_askers_payments(kb):
    ana = _ask(kb, "How much did I pay the roofer in 2025?")
    bruno = _ask(kb, "How much did I pay the roofer in 2025?", user="bruno")
    assert (ana["figure"], bruno["figure"]) == ("2070.00", "5000.00")
    assert not any(s.startswith(BRUNO) for s in _sources(ana)) and all(s.startswith(BRUNO) for s in _sources(bruno))
    assert "5,000" not in ana["answer"] and "1,250" not in bruno["answer"]


def test_the_http_api_counts_only_the_keys_users_payments(project, real_embedder):
    keys = KeyFile(load_settings(project).db_file.parent / "api_keys.json")
    ana, bruno = keys.add("ana")[0], keys.add("bruno")[0]
    kb = KnowledgeBase(load_settings(project), embedder=real_embedder, providers=[ExtractiveAnswerer()])
    with TestClient(create_app(kb, ApiConfig())) as client:
        def ask(token: str, query: str) -> dict:  # type: ignore[type-arg]
            response = client.post("/v1/ask", json={"query": query}, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 200, response.text
            return response.json()

        mine = ask(ana, "How much did I pay the roofer in 2025?")
        assert (mine["kind"], mine["figure"]) == ("sum", "2070.00") and not any(
            s.startswith(BRUNO) for s in _sources(mine))
        his = ask(bruno, "How much did I pay the roofer in 2025?")
        assert his["figure"] == "5000.00" and all(s.startswith(BRUNO) for s in _sources(his))
        assert ask(bruno, "How many times did the car go to the garage in 2025?")["figure"] == "1"
        assert ask(ana, "How many rows where status is open?")["figure"] == "3"
        assert ask(bruno, "How many rows where status is open?")["kind"] == "answer"  # no sheet of his


def test_the_cli_and_mcp_return_the_same_typed_result(project, cli, kb):
    from test_mcp import served

    expected = _ask(kb, "How much did I pay the roofer in 2025?")
    printed = cli(_Root(project), "ask", "How much did I pay the roofer in 2025?", "--user", "ana", "--json")
    data = json.loads(printed.stdout)
    assert {k: data[k] for k in ("kind", "figure", "unit", "units", "left_out", "complete")} == {
        k: expected[k] for k in ("kind", "figure", "unit", "units", "left_out", "complete")}
    text = cli(_Root(project), "ask", "How much did I pay the roofer in 2025?", "--user", "ana").stdout
    assert "EUR 2,070.00" in text and "bruno" not in text
    for client in served(project, "--user", "bruno"):
        got = client.data("ask", {"question": "How much did I pay the roofer in 2025?"})
        assert (got["kind"], got["figure"]) == ("sum", "5000.00") and all(
            s.startswith(BRUNO) for s in _sources(got))


class _Root:
    """What the `cli` fixture reads of a project: its root."""

    def __init__(self, root: Path) -> None:
        self.root = root


def test_a_whole_scope_sum_takes_one_of_the_keys_list_places():
    # A sum reads every unit of its topic in the scope, as a list does: one at a time per key (#45.4), plain
    # questions untouched.
    from ragstead.api.app import ApiError, _ListAnswers

    places = _ListAnswers(1)
    assert places.claimed_for(AskRequest("How much did I pay the roofer in 2025?"), "ana")
    with pytest.raises(ApiError, match="already has 1 list answer running"):
        places.claimed_for(AskRequest("How many rows where status is open?"), "ana")
    assert not places.claimed_for(AskRequest("What is on the ferry?"), "ana")
    assert places.claimed_for(AskRequest("How much did I pay the roofer in 2025?"), "bruno")


def test_the_scan_holds_the_read_lock_per_store_call_not_across_it(kb):
    from ragstead.answer.aggregate import whole_folder
    from ragstead.answer.ask import AskOptions

    class Counting:
        def __init__(self) -> None:
            self.entered = self.held = 0

        def __enter__(self) -> None:
            self.entered += 1
            self.held += 1

        def __exit__(self, *exc: object) -> None:
            self.held -= 1

    lock = Counting()
    request = AskRequest("How much did I pay the roofer in 2025?", scope=Scope(user="ana"))
    answered, _ = whole_folder(request, kb, request.scope.filters(), AskOptions(kb.search_options(request)),
                               lock=lock)
    assert answered is not None and answered.listing.figure == "2070.00"  # type: ignore[union-attr]
    assert lock.entered >= 3 and lock.held == 0


def test_rows_of_an_ods_sheet_are_records_too(tmp_path, hashing_embedder):
    from helpers.format_files import make_ods
    from helpers.project import write_files

    rows = [["order", "item", "status", "total (EUR)"], ["7", "kettle", "open", "30.00"],
            ["8", "toaster", "shipped", "25.50"], ["9", "mugs", "open", "12.25"]]
    write_files(tmp_path, {"kb/users/carol/orders.ods": make_ods({"Orders": rows})})
    with KnowledgeBase(load_settings(tmp_path), embedder=hashing_embedder, providers=[ExtractiveAnswerer()]) as kb:
        kb.index()
        count = _ask(kb, "How many rows where status is open?", user="carol")
        total = _ask(kb, "What is the total of the orders where status is open?", user="carol")
    assert (count["figure"], total["figure"], total["unit"]) == ("2", "42.25", "EUR")
    assert [c["quote"] for c in total["citations"]] == ["order: 7; item: kettle; status: open; total (EUR): 30.00",
                                                        "order: 9; item: mugs; status: open; total (EUR): 12.25"]


def test_the_same_answers_on_postgresql(tmp_path, pg_url, real_embedder):
    shutil.copytree(HOUSEHOLD / "kb", tmp_path / "kb")
    settings = load_settings(tmp_path).with_overrides(store=pg_url)
    with KnowledgeBase(settings, embedder=real_embedder, providers=[ExtractiveAnswerer()]) as kb:
        kb.index()
        assert _ask(kb, "How much did I pay the roofer in 2025?")["figure"] == "2070.00"
        assert _ask(kb, "How much did I pay the roofer in 2025?", user="bruno")["figure"] == "5000.00"
        assert _ask(kb, "How many rows where category is groceries?")["figure"] == "8"
        assert _ask(kb, "Which notes are tagged garden?")["matched"] == 3
        assert _ask(kb, "Which notes mention Madrid or Porto?")["matched"] == 5


def test_an_amount_only_the_title_ties_to_the_topic_counts_only_as_a_payment(tmp_path, hashing_embedder):
    # The subject names the roofer; the balance in the same e-mail is no payment to him: left out, not complete.
    from helpers.project import write_files

    write_files(tmp_path, {"kb/users/carol/roofer.md": "# Roofer invoice 7\n\nAmount due: €400.00 by 3 May 2025. "
                                                        "Your account balance is €3,000.00 after 3 May 2025."})
    with KnowledgeBase(load_settings(tmp_path), embedder=hashing_embedder, providers=[ExtractiveAnswerer()]) as kb:
        kb.index()
        data = _ask(kb, "How much did I pay the roofer in 2025?", user="carol")
    assert (data["figure"], data["complete"]) == ("400.00", False)
    assert [u["amount"] for u in data["left_out"]] == ["3000.00"]
