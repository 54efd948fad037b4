"""Complete answers to list and count questions (answer/listing.py): "which notes mention Lisbon?" names every
note of the scope that does, once, with the sentence quoted, says how many it examined, pages, and never names a
file outside the caller's scope (library, CLI, HTTP API, MCP).

The notes folder: 40 of alice's notes, 7 mention Lisbon (four only in passing, deep in a note about something
else), 2 are near misses (Porto, the Douro: Portugal, never Lisbon); bob's private note and a public page mention
Lisbon too, and are outside alice's scope.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from helpers.project import write_files
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.answer.listing import list_question
from ragstead.api import ApiConfig, create_app
from ragstead.api.keys import KeyFile
from ragstead.config import load_settings
from ragstead.errors import InvalidQueryError
from ragstead.knowledge_base import KnowledgeBase
from ragstead.request.model import AskRequest, Scope

ALICE = "kb/users/alice/notes/"
LISBON = {
    "trips/2024-05-lisbon.md": "# Lisbon, May 2024\n\nWe flew to Lisbon on 3 May and stayed four nights in Alfama. "
    "The view from the Miradouro da Senhora do Monte at sunset was the best moment of the trip.",
    "trips/tram-28.md": "# Tram 28\n\nTram 28 rattles up the hills of Lisbon from Martim Moniz to Campo de Ourique. "
    "Get on at the first stop: by the third one it is full.",
    "reading/pessoa.md": "# Fernando Pessoa\n\nThe Book of Disquiet is a diary of sorts. Pessoa wrote most of it while "
    "working as a clerk in Lisbon, under the name Bernardo Soares. I read it slowly, a few pages a night.",
    # Only in passing, in notes about something else:
    "recipes/bacalhau.md": "# Bacalhau à Brás\n\nSoak the salt cod for two days, changing the water twice a day. "
    "Fry thin matchstick potatoes until golden. Scramble six eggs with the cod, onions and potatoes off the heat. "
    "I first ate this in a tiny tasca near the cathedral in Lisbon, years ago. Finish with black olives and "
    "parsley, and serve at once.",
    "work/conference-2025.md": "# Data conference 2025\n\nThe keynote argued that most dashboards are never opened "
    "twice. The workshop on column stores was the most useful session. Hallway talk: next year's edition moves "
    "to Lisbon. Follow up with Priya about the ingestion benchmark.",
    "meetings/2025-03-12-standup.md": "# Standup 12 March\n\nJonas finished the export job. Marta is out next week "
    "for a wedding in Lisbon. The flaky login test is quarantined until Friday.",
    "lists/summer-packing.md": "# Summer packing list\n\n- Passport and the travel insurance card\n- Sunscreen and "
    "a hat\n- Adapter plugs: Lisbon and Porto both use type F sockets\n- A light rain jacket",
}
NEAR_MISSES = {
    "trips/porto-weekend.md": "# Porto weekend\n\nA weekend in Porto: the port wine cellars of Vila Nova de Gaia, "
    "a francesinha at Café Santiago, and a walk along the Ribeira at dusk. Portugal in autumn is lovely.",
    "trips/douro-valley.md": "# Douro valley\n\nFrom Porto, the train up the Douro valley to Pinhão takes two hours. "
    "Terraced vineyards all the way; the quintas offer tastings of Portuguese wine.",
}
TOPICS = [
    ("garden/tomatoes", "Tomatoes need staking by June; the San Marzano plants split after the heavy rain."),
    ("garden/compost", "Turn the compost every two weeks and keep it as damp as a wrung-out sponge."),
    ("garden/roses", "Prune the climbing roses in late winter, above an outward-facing bud."),
    ("recipes/pancakes", "Pancakes: two eggs, a cup of flour, a cup of milk, a pinch of salt, rest the batter."),
    ("recipes/risotto", "Risotto wants warm stock added a ladle at a time and constant stirring for twenty minutes."),
    ("recipes/sourdough", "Feed the starter the night before; the dough proves in the fridge for sixteen hours."),
    ("recipes/curry", "Toast the cumin and coriander seeds before grinding; add the coconut milk at the end."),
    ("reading/dune", "Dune is about ecology and power more than about sand worms; the appendices are worth it."),
    ("reading/middlemarch", "Middlemarch: Dorothea marries Casaubon and regrets it within the honeymoon in Rome."),
    ("reading/sapiens", "Sapiens argues that shared fictions let large groups of strangers cooperate."),
    ("reading/station-eleven", "Station Eleven follows a travelling symphony after a flu pandemic."),
    ("work/oncall", "On-call handover: the disk alert on db-3 fires at 80 percent; ignore it until 90."),
    ("work/backups", "Backups run nightly at 02:00 and are restored monthly to prove they work."),
    ("work/hiring", "Hiring loop: a take-home exercise, then a pairing session, then a values interview."),
    ("work/roadmap", "The roadmap for Q3 puts the billing migration before the new search page."),
    ("work/incident-0412", "Incident 12 April: the queue filled up because the consumer crashed on a bad message."),
    ("work/budget", "The team budget for tooling is 12,000 euros this year, half of it for observability."),
    ("meetings/2025-02-03-retro", "Retro: too many meetings on Mondays; we moved planning to Tuesday mornings."),
    ("meetings/2025-04-01-planning", "Planning: Jonas takes the export job, Marta the onboarding emails."),
    ("meetings/2025-05-20-review", "Design review of the new settings page: fewer toggles, clearer defaults."),
    ("health/running", "Ran ten kilometres in 58 minutes; the left knee complained after eight."),
    ("health/sleep", "Sleep improves when the phone stays out of the bedroom and coffee stops at noon."),
    ("health/dentist", "Dentist on 14 July at 9:30; ask about the night guard."),
    ("home/boiler", "The boiler service is due in October; the engineer's number is on the fridge."),
    ("home/insurance", "Home insurance renews on 1 September; compare quotes before the end of August."),
    ("home/moving", "Moving checklist: redirect post, update the electoral roll, read the meters."),
    ("money/taxes", "Tax return due by 31 January; keep the receipts for the home office."),
    ("money/savings", "Move the savings to the account with the better rate before the fixed term ends."),
    ("family/birthdays", "Mum's birthday is on 9 March; she would like a pottery class this year."),
    ("family/holiday-ideas", "Holiday ideas for the kids: the Lake District, a canal boat, or the coast of Wales."),
    ("trips/berlin", "Berlin in March: the Pergamon was closed, but the Neues Museum made up for it."),
]
FILES: dict[str, str] = {
    "ragstead.toml": '[ragstead]\nroots = ["kb", "docs"]\n',
    **{ALICE + path: text for path, text in LISBON.items()},
    **{ALICE + path: text for path, text in NEAR_MISSES.items()},
    **{f"{ALICE}{path}.md": f"# {path.split('/')[-1].replace('-', ' ').title()}\n\n{text}" for path, text in TOPICS},
    "kb/users/bob/flat-hunting.md": "# Flat hunting\n\nBob's private note: a viewing of the flat in Lisbon next "
    "month, rent 1,400 euros.",
    "docs/offices.md": "# Offices\n\nOur Lisbon office opens in June, next to the river.",
}
EXPECTED = sorted(ALICE + path for path in LISBON)
NOTES = len(LISBON) + len(NEAR_MISSES) + len(TOPICS)
OUT_OF_SCOPE = ("kb/users/bob/flat-hunting.md", "docs/offices.md")


@pytest.fixture(scope="module")
def project(tmp_path_factory, real_embedder) -> Path:
    """The notes folder, indexed once with the real model (the gate's signals are the model's)."""
    root = tmp_path_factory.mktemp("lists")
    write_files(root, FILES)
    with KnowledgeBase(load_settings(root), embedder=real_embedder) as kb:
        kb.index()
    return root


@pytest.fixture(scope="module")
def kb(project, real_embedder) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(load_settings(project), embedder=real_embedder, providers=[ExtractiveAnswerer()]) as kb:
        yield kb


def _alice(question: str, **fields) -> dict:  # type: ignore[no-untyped-def]
    return AskRequest(question, scope=Scope(user="alice"), **fields)  # type: ignore[return-value]


# -- recognising the question ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("question", "kind", "topic"), [
    ("which notes mention Lisbon?", "list", "Lisbon"),
    ("Which of my notes talk about the Lisbon trip?", "list", "the Lisbon trip"),
    ("which notes have the word Lisbon in them?", "list", "Lisbon"),
    ("what files do I have about taxes", "list", "taxes"),
    ("list all documents that mention Alfama", "list", "Alfama"),
    ("How many notes mention Lisbon", "count", "Lisbon"),
    ("how many documents are about sourdough?", "count", "sourdough"),
])
def test_list_and_count_questions_are_recognised_with_their_topic(question, kind, topic):
    asked = list_question(question)
    assert asked is not None and (asked.kind, asked.topic) == (kind, topic)


@pytest.mark.parametrize("question", ["what is the tram to take in Lisbon", "list the steps to back up",
                                      "how many eggs go in pancakes", "which notes?", "when did we fly to Lisbon",
                                      "what page is the warranty on?", "what documents do I need for a visa?"])
def test_other_questions_are_answered_as_before(question):
    assert list_question(question) is None


# -- the library ----------------------------------------------------------------------------------------------


def test_which_notes_cites_every_note_that_mentions_it_once_and_says_how_many_it_examined(kb):
    result = kb.ask(_alice("which notes mention Lisbon?"))
    data = result.to_dict()
    assert data["kind"] == "list" and not data["refused"] and data["complete"]
    assert [c["source"] for c in data["citations"]] == EXPECTED  # all 7, once each, in path order: no near miss
    assert (data["examined"], data["matched"]) == (NOTES, len(LISBON))
    assert result.text.startswith(f"Examined {NOTES} documents in your scope; 7 mention Lisbon.")
    for citation in data["citations"]:  # the sentence that mentions it, quoted where it stands in the chunk
        assert "Lisbon" in citation["quote"]
        assert citation["char_end"] - citation["char_start"] == len(citation["quote"])
    bacalhau = next(c for c in data["citations"] if c["source"].endswith("bacalhau.md"))
    assert bacalhau["quote"] == "I first ate this in a tiny tasca near the cathedral in Lisbon, years ago."


def test_how_many_says_the_number(kb):
    result = kb.ask(_alice("how many notes mention Lisbon"))
    assert result.kind == "count" and result.to_dict()["matched"] == 7
    assert result.text.startswith("7 notes mention Lisbon.")
    assert f"Examined {NOTES} documents in your scope" in result.text


def test_a_topic_no_note_holds_is_a_complete_none(kb):
    result = kb.ask(_alice("which notes mention Reykjavik?"))
    assert result.to_dict()["matched"] == 0 and result.citations == () and not result.refused
    assert result.text == f"Examined {NOTES} documents in your scope; none mention Reykjavik."


def test_a_big_list_pages(kb):
    first = kb.ask(_alice("which notes mention Lisbon?", limit=3)).to_dict()
    assert len(first["citations"]) == 3 and first["next_offset"] == 3 and first["matched"] == 7
    assert "the next page starts at offset 3" in first["answer"]
    seen = [c["source"] for c in first["citations"]]
    offset = first["next_offset"]
    while offset is not None:
        page = kb.ask(_alice("which notes mention Lisbon?", limit=3, offset=offset)).to_dict()
        assert [c["n"] for c in page["citations"]] == list(range(offset + 1, offset + 1 + len(page["citations"])))
        seen += [c["source"] for c in page["citations"]]
        offset = page["next_offset"]
    assert seen == EXPECTED


def test_list_questions_can_be_turned_off(kb):
    result = kb.ask(_alice("which notes mention Lisbon?", list_questions=False, extractive=True))
    assert result.kind == "answer" and "examined" not in result.to_dict()


def test_a_list_never_names_a_file_outside_the_scope(kb):
    alice = kb.ask(_alice("which notes mention Lisbon?")).to_dict()
    assert not {c["source"] for c in alice["citations"]} & set(OUT_OF_SCOPE)
    bob = kb.ask(AskRequest("which notes mention Lisbon?", scope=Scope(user="bob"))).to_dict()
    assert [c["source"] for c in bob["citations"]] == ["kb/users/bob/flat-hunting.md"] and bob["examined"] == 1
    public = kb.ask(AskRequest("which documents mention Lisbon?", scope=Scope(public_only=True))).to_dict()
    assert [c["source"] for c in public["citations"]] == ["docs/offices.md"] and public["examined"] == 1


def test_count_documents_without_the_store_method_pages_the_listing(kb):
    from ragstead.answer.listing import count_documents

    class Listed:  # a store that only lists (a plugin store without count_documents)
        def list_documents(self, filters, limit, offset):  # type: ignore[no-untyped-def]
            return kb.store.list_documents(filters, limit, offset)

    filters = Scope(user="alice").filters()
    assert count_documents(Listed(), filters) == kb.store.count_documents(filters) == NOTES  # type: ignore[arg-type]


# -- the doors ------------------------------------------------------------------------------------------------


def test_the_cli_prints_the_completeness_line_then_one_line_per_note_with_its_quote(project, cli):
    result = cli(_Root(project), "ask", "which notes mention Lisbon?",
                 "--user", "alice")
    lines = result.stdout.strip().splitlines()
    assert lines[0] == f"Examined {NOTES} documents in your scope; 7 mention Lisbon."
    listed = [line for line in lines[1:] if line.startswith("[")]
    assert len(listed) == 7 and all("“" in line and "Lisbon" in line for line in listed)
    assert not any(path in result.stdout for path in OUT_OF_SCOPE)
    data = json.loads(cli(_Root(project), "ask", "how many notes mention Lisbon", "--user", "alice", "--json").stdout)
    assert data["kind"] == "count" and data["matched"] == 7 and len(data["citations"]) == 7
    paged = json.loads(cli(_Root(project), "ask", "which notes mention Lisbon?", "--user", "alice", "--limit", "2",
                           "--offset", "6", "--json").stdout)
    assert [c["source"] for c in paged["citations"]] == EXPECTED[6:] and paged["next_offset"] is None


def test_every_door_takes_the_same_page_limits():
    from typer.testing import CliRunner

    from ragstead import cli as cli_module
    from ragstead.api.app import AskRequest as AskBody
    from ragstead.mcp_server import AskArgs
    from ragstead.request.model import MAX_LIST_LIMIT, MAX_LIST_OFFSET

    for schema in (AskBody.model_json_schema()["properties"], AskArgs.model_json_schema()["properties"]):
        assert (schema["limit"]["maximum"], schema["offset"]["maximum"]) == (MAX_LIST_LIMIT, MAX_LIST_OFFSET)
    assert f"1-{MAX_LIST_LIMIT}" in CliRunner().invoke(cli_module.app, ["ask", "--help"], env={"COLUMNS": "200"}).output
    with pytest.raises(InvalidQueryError) as caught:
        AskRequest("which notes mention Lisbon?", limit=MAX_LIST_LIMIT + 1)
    assert caught.value.fields == ("limit",)


class _Root:
    """What the `cli` fixture reads of a project: its root."""

    def __init__(self, root: Path) -> None:
        self.root = root


def test_the_http_api_lists_only_the_keys_users_notes(project, real_embedder):
    keys = KeyFile(load_settings(project).db_file.parent / "api_keys.json")
    alice, bob = keys.add("alice")[0], keys.add("bob")[0]
    kb = KnowledgeBase(load_settings(project), embedder=real_embedder, providers=[ExtractiveAnswerer()])
    with TestClient(create_app(kb, ApiConfig())) as client:
        def ask(token: str, **body) -> dict:  # type: ignore[no-untyped-def]
            response = client.post("/v1/ask", json=body, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 200, response.text
            return response.json()

        data = ask(alice, query="which notes mention Lisbon?")
        assert [c["source"] for c in data["citations"]] == EXPECTED and data["examined"] == NOTES
        assert ask(bob, query="which notes mention Lisbon?")["citations"][0]["source"] == OUT_OF_SCOPE[0]
        page = ask(alice, query="how many notes mention Lisbon?", limit=5, offset=5)
        assert page["matched"] == 7 and [c["source"] for c in page["citations"]] == EXPECTED[5:]
        off = ask(alice, query="which notes mention Lisbon?", list_questions=False)
        assert off["kind"] == "answer"
        assert client.post("/v1/ask", json={"query": "which notes mention Lisbon?", "limit": 0},
                           headers={"Authorization": f"Bearer {alice}"}).status_code == 422


def test_mcp_ask_lists_only_the_servers_users_notes(project):
    from test_mcp import served

    for client in served(project, "--user", "alice"):
        data = client.data("ask", {"question": "which notes mention Lisbon?"})
        assert [c["source"] for c in data["citations"]] == EXPECTED and data["complete"]
        page = client.data("ask", {"question": "which notes mention Lisbon?", "limit": 4, "offset": 4})
        assert [c["source"] for c in page["citations"]] == EXPECTED[4:] and page["offset"] == 4
        assert not any(c["source"] in OUT_OF_SCOPE for c in page["citations"])


def test_the_same_list_on_postgresql(tmp_path, pg_url, real_embedder):
    write_files(tmp_path, FILES)
    settings = load_settings(tmp_path).with_overrides(store=pg_url)
    with KnowledgeBase(settings, embedder=real_embedder, providers=[ExtractiveAnswerer()]) as kb:
        kb.index()
        data = kb.ask(_alice("which notes mention Lisbon?")).to_dict()
        assert [c["source"] for c in data["citations"]] == EXPECTED and data["examined"] == NOTES
        assert kb.ask(AskRequest("how many notes mention Lisbon", scope=Scope(user="bob"))).to_dict()["matched"] == 1
