"""Conversations in the library (`kb.chat`, issue 48): the follow-up rewriter, the types, the conversation store,
scope and privacy across turns, memory, and the LLM's condensing prompt with the consent rules of `ask`.

The rewriter is tested on its own (no index); `kb.chat` on a small team project with the real model, asserting on
what was searched and cited rather than on the reader's wording."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.project import write_files
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.config import load_settings
from ragstead.conversation.history import ConversationStore
from ragstead.conversation.rewrite import follow_up_reason, names_in, rewrite
from ragstead.conversation.turns import Conversation, Rewrite, Turn, TurnSource
from ragstead.errors import DocumentNotFoundError, InvalidQueryError
from ragstead.knowledge_base import KnowledgeBase
from ragstead.request.model import Scope

FILES = {
    "ragstead.toml": '[ragstead]\nroots = ["kb", "docs"]\nowner = "alice"\n',
    "kb/users/alice/lease.md": "# Lease – flat on Elm Street\n\nThe lease ends on 31 March 2027.\n\nThe deposit is "
                               "2,400 euros, paid into a deposit account.\n\nThe landlord is Mrs. Novak; call her "
                               "about repairs.\n",
    "kb/users/alice/reading.md": "# Reading list\n\nNext up: The Overstory by Richard Powers, recommended by Lena.\n",
    "kb/users/alice/car.md": "# Car log\n\nThe next TÜV inspection of the Golf is due in March 2026.\n",
    "kb/users/alice/diary.md": "---\nlocal_only: true\n---\n# Diary\n\nThe heron came back to the pond on Sunday.\n",
    "kb/users/bob/lease.md": "# Lease – Bob's flat on Elm Street\n\nBob's deposit is 9,999 euros and his lease ends "
                             "in 2030.\n",
    "docs/faq.md": "# FAQ\n\nThe public FAQ explains how to install the survey app.\n",
}
ANSWERED = "The lease ends on 31 March 2027. [1]"


def turn(question: str, text: str = ANSWERED, sources: tuple[TurnSource, ...] = (), rewritten: str | None = None,
         carried: tuple[str, ...] = (), refused: bool = False) -> Turn:
    method = "carried" if carried else "none"
    return Turn(question, Rewrite(question, rewritten or question, method, carried), text, refused, sources)


LEASE = (TurnSource(1, "kb/users/alice/lease.md", "Lease – flat on Elm Street"),)


# -- the offline rewriter ------------------------------------------------------------------------------------------

def test_the_first_question_is_asked_as_typed():
    found = rewrite("When does the lease end?", [])
    assert (found.rewritten, found.method, found.reason) == ("When does the lease end?", "none", "the first question")


def test_a_fragment_borrows_the_last_questions_frame_and_its_subject():
    found = rewrite("And the deposit?", [turn("How much is the rent for the Weidenweg apartment?", sources=(
        TurnSource(1, "notes/home/apartment.md", "Apartment – Weidenweg 12"),))])
    assert found.rewritten == "How much is the deposit? (Apartment – Weidenweg 12)"
    assert found.method == "carried" and found.carried == ("Apartment – Weidenweg 12",)
    assert found.reason == "it continues the last question"


def test_a_pronoun_gets_the_last_answers_names_and_document():
    history = [turn("Which book should I read next?", "Next up: The Overstory by Richard Powers, recommended by "
                    "Lena. [1]", (TurnSource(1, "kb/users/alice/reading.md", "Reading list"),))]
    found = rewrite("Who wrote it?", history)
    assert found.rewritten.startswith("Who wrote it? (") and found.reason == "it points back (it)"
    assert "Overstory" in found.carried and "Reading list" in found.carried


def test_a_question_that_names_nothing_leans_on_the_last_turn():
    found = rewrite("What's the budget?", [turn("Where is the team offsite in October?", "In Lisbon. [1]", (
        TurnSource(1, "notes/work/offsite-lisbon.md", "Team offsite, Lisbon, 16–18 October 2024"),))])
    assert found.rewritten == "What's the budget? (Team offsite, Lisbon)"


def test_a_bare_question_word_takes_the_last_questions_rest():
    found = rewrite("Where?", [turn("When does the book club meet?", "On the last Thursday. [1]")])
    assert found.rewritten == "Where does the book club meet?"


def test_a_follow_up_that_changes_the_subject_is_not_polluted():
    history = [turn("When does the lease end?", sources=LEASE)]
    for question in ("When is the next TÜV inspection of the Golf due?", "What did we decide about feature flags?",
                     "How often should the Monstera be watered?"):
        found = rewrite(question, history)
        assert (found.rewritten, found.method, found.carried) == (question, "none", ()), question
        assert found.reason == "it names its own subject"


def test_a_fragment_naming_its_own_subject_switches_to_it():
    mum = turn("What could I get Mum for her birthday?", "A pottery course. [1]")
    when = turn("When is it?", "On 12 August. [1]", rewritten="When is it? (Mum, Gift ideas)",
                carried=("Mum", "Gift ideas"))
    found = rewrite("And for Leo?", [mum, when])
    assert (found.rewritten, found.carried) == ("What could I get Leo for her birthday?", ())
    guitar = [turn("Who is my guitar teacher?", "Jakob. [1]"), turn("How much does a lesson cost?", "35 EUR. [1]")]
    assert rewrite("And my Spanish teacher?", guitar).rewritten == "Who is my Spanish teacher?"


def test_carried_names_go_on_and_an_older_answers_title_gives_way():
    first = turn("Which database did we pick for Project Atlas?", "We chose PostgreSQL. [1]",
                 (TurnSource(1, "notes/work/atlas-kickoff.md", "Project Atlas kickoff"),))
    second = turn("Who argued against it?", "Jonas argued for MongoDB. [1]",
                  (TurnSource(1, "notes/work/atlas-architecture.md", "Atlas architecture notes"),),
                  rewritten="Who argued against it? (Project Atlas, PostgreSQL, Project Atlas kickoff)",
                  carried=("Project Atlas", "PostgreSQL", "Project Atlas kickoff"))
    found = rewrite("Who is the pilot customer?", [first, second])
    assert found.carried == ("Project Atlas", "PostgreSQL", "Atlas architecture notes")


def test_a_memory_turn_is_not_what_a_follow_up_leans_on():
    remembered = Turn("remember that I prefer tea", Rewrite("remember that I prefer tea", "remember that I prefer "
                      "tea", "memory"), "Remembered.", False, kind="memory")
    found = rewrite("And the deposit?", [turn("How much is the rent for the flat?", sources=LEASE), remembered])
    assert found.rewritten == "How much is the deposit? (Lease – flat on Elm Street)"


@pytest.mark.parametrize(("question", "reason"), [
    ("And the deposit?", "it continues the last question"), ("What about the other one?", "it points back (the "
                                                                                           "other one)"),
    ("Who wrote it?", "it points back (it)"), ("Why that one?", "a bare question word"),
    ("Who's the coach?", "it names nothing of its own"), ("Is there a deposit?", "it names nothing of its own"),
    ("Which notes mention Lisbon?", None), ("What did my allergy test show?", None),
    ("When is Bruno's next vaccination due?", None),
])
def test_what_makes_a_follow_up(question, reason):
    assert follow_up_reason(question) == reason


def test_names_are_runs_of_capitalised_words_not_a_sentences_first_word():
    assert names_in("Max 450 pages, so everyone finishes.") == ()
    assert names_in("The Overstory by Richard Powers – Lena's recommendation") == ("Overstory", "Richard Powers",
                                                                                  "Lena")
    assert names_in("Which database did we pick for Project Atlas on March 25?") == ("Project Atlas",)
    assert names_in("When is my next TBE booster due? I'm away in May.") == ("TBE",)


# -- the types -------------------------------------------------------------------------------------------------------

def test_a_turn_reads_back_from_its_json_and_from_a_clients_short_form():
    full = Turn("And the deposit?", Rewrite("And the deposit?", "How much is the deposit? (Lease)", "carried",
                                            ("Lease",), "it continues the last question"), "2,400 euros [1]", False,
                LEASE, asked_at="2025-01-01T10:00:00+00:00",
                answer_json={"answer": "2,400 euros [1]", "refused": False, "kind": "answer",
                             "citations": [{"n": 1, "source": "kb/users/alice/lease.md",
                                            "locator": {"title": "Lease – flat on Elm Street"}}]})
    back = Turn.of(json.loads(json.dumps(full.to_dict())))
    assert (back.question, back.rewritten, back.rewrite.carried, back.text, back.sources) == (
        full.question, full.rewritten, ("Lease",), full.text, LEASE)
    short = Turn.of({"question": "When does the lease end?", "answer": "On 31 March 2027."})
    assert (short.rewritten, short.text, short.sources, short.refused) == ("When does the lease end?",
                                                                           "On 31 March 2027.", (), False)


@pytest.mark.parametrize("bad", [{"answer": "no question"}, {"question": ""}, "a string", {"question": "x" * 5000},
                                 {"question": "ok", "answer": "y" * 30_000}])
def test_a_malformed_history_turn_is_an_invalid_query(bad):
    with pytest.raises(InvalidQueryError) as caught:
        Turn.of(bad)
    assert caught.value.fields == ("history",)


@pytest.mark.parametrize("odd", [
    {"question": "q", "rewrite": {"carried": 5, "method": ["x"]}, "rewritten": 7},
    {"question": "q", "answer": {"citations": [{"source": "a.md", "locator": "x", "n": True}, 3], "kind": None}},
    {"question": "q", "answer": {"answer": 5}}, {"question": "q", "memory_write": [1], "asked_at": 12},
])
def test_odd_history_values_are_read_or_refused_never_a_crash(odd):
    try:
        read = Turn.of(odd)
    except InvalidQueryError:
        return
    assert read.question == "q" and isinstance(read.to_dict(), dict)


# -- kb.chat over a project ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def root(tmp_path_factory, real_embedder) -> Path:
    folder = tmp_path_factory.mktemp("chat")
    write_files(folder, FILES)
    with KnowledgeBase(load_settings(folder), embedder=real_embedder) as kb:
        kb.index()
    return folder


@pytest.fixture
def kb(root, real_embedder):
    # The index is shared and read-only; each test's kept conversations are its own.
    with KnowledgeBase(load_settings(root), embedder=real_embedder, providers=None) as opened:
        yield opened
    shutil.rmtree(root / "kb/rag/conversations", ignore_errors=True)


@pytest.fixture
def own_kb(tmp_path, real_embedder):
    """A project of its own: a memory write indexes the memory file, which the shared index must not hold."""
    write_files(tmp_path, FILES)
    with KnowledgeBase(load_settings(tmp_path), embedder=real_embedder) as opened:
        opened.index()
        yield opened


def sources(conversation: Conversation) -> set[str]:
    return {s.source for s in conversation.last.sources} if conversation.last else set()


def test_a_follow_up_is_searched_rewritten_and_answered_from_the_subject(kb):
    first = kb.chat("When does the lease end?", user="alice", extractive=True)
    assert sources(first) == {"kb/users/alice/lease.md"} and first.id is None and first.owner is None
    second = kb.chat("And how much is the deposit?", conversation=first, extractive=True)
    last = second.last
    assert last.rewrite.method == "carried" and "Lease – flat on Elm Street" in last.rewritten
    assert last.answer is not None and last.answer.question == last.rewritten  # what the gate and reader judged
    assert sources(second) == {"kb/users/alice/lease.md"} and "2,400" in last.text
    assert [t.question for t in second.turns] == ["When does the lease end?", "And how much is the deposit?"]
    assert second.scope == Scope(user="alice") and first.turns == second.turns[:1]


def test_no_turn_sees_another_users_documents(kb):
    conversation = None
    for question in ("When does the lease end?", "And the deposit?", "What about Bob's deposit?", "And in 2030?"):
        conversation = kb.chat(question, conversation=conversation, user="alice", extractive=True)
        assert not any("bob" in s for s in sources(conversation)), question
        assert "9,999" not in conversation.last.text
    history = [{"question": "How much is Bob's deposit?", "answer": "Bob's deposit is 9,999 euros."}]
    told = kb.chat("And when does his lease end?", history=history, user="alice", extractive=True)
    assert not any("bob" in s for s in sources(told))  # a client's history names bob: the scope is still alice's


def test_a_conversation_keeps_the_scope_of_its_first_question(kb):
    first = kb.chat("When does the lease end?", user="alice", extractive=True)
    with pytest.raises(InvalidQueryError) as caught:
        kb.chat("And the deposit?", conversation=first, user="bob", extractive=True)
    assert caught.value.fields == ("scope",) and "alice's documents" in str(caught.value)
    with pytest.raises(InvalidQueryError):
        kb.chat("And the deposit?", conversation=first, public_only=True, extractive=True)
    assert kb.chat("And the deposit?", conversation=first, extractive=True).scope == Scope(user="alice")
    with pytest.raises(InvalidQueryError):
        kb.chat("And the deposit?", conversation=first, history=[], extractive=True)


def test_kept_conversations_are_private_files_within_the_retention_limit(kb, root):
    first = kb.chat("When does the lease end?", user="alice", extractive=True, keep=True)
    assert first.id and first.id.startswith("c_") and first.owner == "alice"
    path = root / "kb/rag/conversations/alice" / f"{first.id}.json"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    second = kb.chat("And the deposit?", conversation=first.id, owner="alice", extractive=True)
    assert second.id == first.id and len(kb.conversation(first.id, owner="alice").turns) == 2
    assert "Lease" in kb.conversation(first.id, owner="alice").turns[1].rewritten
    for wrong in ("bob", "../alice", "alice/.."):
        with pytest.raises(DocumentNotFoundError):
            kb.conversation(first.id, owner=wrong)
    with pytest.raises(DocumentNotFoundError):
        kb.chat("And the deposit?", conversation=first.id, owner="bob", extractive=True)
    store = ConversationStore(root / "kb/rag/conversations")
    assert store.ids("alice") == [first.id]
    old = time.time() - 31 * 86400  # past chat_retention_days (30)
    os.utime(path, (old, old))
    with pytest.raises(DocumentNotFoundError):
        kb.conversation(first.id, owner="alice")
    assert store.ids("alice") == [] and not path.exists()
    kept = kb.chat("When does the lease end?", user="alice", extractive=True, keep=True)
    kb.delete_conversation(kept.id, owner="alice")
    with pytest.raises(DocumentNotFoundError):
        kb.delete_conversation(kept.id, owner="alice")


def test_an_owner_keeps_at_most_the_limit_of_conversations(tmp_path):
    store = ConversationStore(tmp_path, max_conversations=2)
    ids = []
    for n in range(3):
        conversation = Conversation(f"c_{n:020x}", "alice", Scope(user="alice"), (turn(f"question {n}?"),))
        store.save(conversation)
        recent = time.time() - 100 + n
        os.utime(tmp_path / "alice" / f"{conversation.id}.json", (recent, recent))
        ids.append(conversation.id)
    store.save(Conversation(f"c_{9:020x}", "alice", Scope(user="alice"), (turn("the newest?"),)))
    assert store.ids("alice") == [f"c_{9:020x}", ids[2]]


def test_secrets_stay_masked_in_the_stored_turns(kb, root):
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    kept = kb.chat(f"When does the lease end? My token is {token}", user="alice", extractive=True, keep=True)
    stored = (root / "kb/rag/conversations/alice" / f"{kept.id}.json").read_text(encoding="utf-8")
    assert token not in stored and "[secret]" in stored
    assert token in kept.last.question  # the caller's own turn, in memory, is as typed


def test_remember_that_goes_through_the_selective_memory_rule(own_kb):
    kb = own_kb
    memory = kb.root / "kb/users/alice/memory/USER_MEMORY.md"
    asked = kb.chat("remember that I prefer tea over coffee", user="alice", extractive=True)
    last = asked.last
    assert last.kind == "memory" and last.rewrite.method == "memory" and last.answer is None
    assert last.text.startswith("Not remembered: this conversation may not write to memory")
    assert not memory.exists()
    written = kb.chat("remember that I prefer tea over coffee", conversation=asked, remember=True, extractive=True)
    assert written.last.text.startswith("Remembered in kb/users/alice/memory/USER_MEMORY.md")
    assert "tea over coffee" in memory.read_text(encoding="utf-8")
    temporary = kb.chat("remember that I am in the office today", conversation=written, remember=True,
                        extractive=True)
    assert temporary.last.text.startswith("Not remembered:") and "today" not in memory.read_text(encoding="utf-8")
    nobody = kb.chat("remember that I prefer tea", extractive=True)
    assert nobody.last.text.startswith("Not remembered: memory belongs to one person")


def test_no_question_and_nothing_of_the_history_is_written_to_memory(own_kb):
    kb, root = own_kb, own_kb.root
    conversation = kb.chat("I always use the CLI. When does the lease end?", user="alice", extractive=True,
                           remember=True)
    conversation = kb.chat("And the deposit? I prefer short answers.", conversation=conversation, remember=True,
                           extractive=True)
    assert conversation.last.answer is not None and conversation.last.answer.memory_write is None
    assert not (root / "kb/users/alice/memory").exists()


# -- the condensing prompt of an LLM, and consent -------------------------------------------------------------------

class Condenser:
    """An LLM answerer that records what it was handed; as a condenser it replies with `reply`."""

    def __init__(self, reply: str, *, remote: bool = False) -> None:
        self.name, self.remote, self.reply = "fake-llm", remote, reply
        self.seen: list[tuple[str, list[Any]]] = []

    def answer(self, question: str, contexts: list[Any], on_text: Any = None) -> str:
        self.seen.append((question, contexts))
        return self.reply


def test_an_llm_condenses_the_follow_up_and_its_output_is_what_is_searched(kb):
    first = kb.chat("When does the lease end?", user="alice", extractive=True)
    condenser = Condenser("How much is the deposit for the Elm Street lease?")
    second = kb.chat("And the deposit?", conversation=first, condensers=[condenser], answerers=[ExtractiveAnswerer()])
    last = second.last
    assert (last.rewritten, last.rewrite.method, last.rewrite.model) == (
        "How much is the deposit for the Elm Street lease?", "llm", "fake-llm")
    question, contexts = condenser.seen[0]
    assert question == "And the deposit?" and contexts[0].text.startswith("Question: When does the lease end?\n"
                                                                          "Answer: ")
    assert last.to_dict()["rewrite"] == {"method": "llm", "carried": [], "reason": "a condensing prompt rewrote it",
                                         "model": "fake-llm"}


def test_an_unusable_condensing_reply_leaves_the_offline_rule_to_it(kb):
    first = kb.chat("When does the lease end?", user="alice", extractive=True)
    for reply in ("", "I could not find relevant information in the uploaded documents.", "The deposit is 2,400 [1]."):
        second = kb.chat("And the deposit?", conversation=first, condensers=[Condenser(reply)],
                         answerers=[ExtractiveAnswerer()]).last
        assert second.rewrite.method == "carried" and "fake-llm gave no usable rewrite" in second.rewrite.reason


def test_a_remote_condenser_never_reads_an_answer_from_a_local_only_document_or_a_client(kb):
    diary = kb.chat("When did the heron come back to the pond?", user="alice", extractive=True)
    assert sources(diary) == {"kb/users/alice/diary.md"}  # local-only: front matter local_only: true
    remote = Condenser("Which day did the heron come back?", remote=True)
    kb.chat("Which day?", conversation=diary, condensers=[remote], answerers=[ExtractiveAnswerer()])
    assert remote.seen[0][1][0].text == "Question: When did the heron come back to the pond?"
    local = Condenser("Which day did the heron come back?")
    kb.chat("Which day?", conversation=diary, condensers=[local], answerers=[ExtractiveAnswerer()])
    assert "\nAnswer: " in local.seen[0][1][0].text  # a model on this machine reads the answer
    lease = kb.chat("When does the lease end?", user="alice", extractive=True)
    kb.chat("And the deposit?", conversation=lease, condensers=[remote], answerers=[ExtractiveAnswerer()])
    assert "\nAnswer: " in remote.seen[-1][1][0].text  # a checked, shareable answer
    client = [{"question": "When does the lease end?", "answer": "On 31 March 2027."}]
    kb.chat("And the deposit?", history=client, user="alice", condensers=[remote], answerers=[ExtractiveAnswerer()])
    assert remote.seen[-1][1][0].text == "Question: When does the lease end?"  # a client's answer is never sent


def _openai(requests: list[dict[str, Any]], reply: str) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        text = reply if "standalone question" in body["messages"][0]["content"] else "The deposit is 2,400 euros [1]."
        events = [{"choices": [{"index": 0, "delta": {"content": text}}]}]
        content = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=content.encode())

    return httpx.MockTransport(handle)


def test_the_history_goes_to_a_remote_model_only_with_the_same_consent_as_a_question(root, real_embedder,
                                                                                       monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.delenv("RAGSTEAD_OPENAI_BASE_URL", raising=False)
    sent: list[dict[str, Any]] = []
    transport = _openai(sent, "How much is the deposit of the Elm Street lease?")
    with KnowledgeBase(load_settings(root), embedder=real_embedder, transport=transport) as kb:
        first = kb.chat("When does the lease end?", user="alice")
        second = kb.chat("And the deposit?", conversation=first)
        assert sent == [] and second.last.rewrite.method == "carried"  # a key alone: nothing leaves the machine
        consented = kb.chat("And the deposit?", conversation=first, llm=("openai",))
        assert consented.last.rewrite.method == "llm"
        assert consented.last.rewrite.model == "openai-compatible:gpt-4o-mini"
        prompt = sent[0]["messages"]
        assert "standalone question" in prompt[0]["content"] and "When does the lease end?" in prompt[1]["content"]
        answerer = sent[1]["messages"]
        assert all("When does the lease end?" not in m["content"] for m in answerer)  # the answerer: no history
        log = [json.loads(line) for line in kb.egress_file.read_text(encoding="utf-8").splitlines()]
        assert [entry["purpose"] for entry in log][:1] == ["condense a follow-up: openai-compatible:gpt-4o-mini"]
    kb.egress_file.unlink()
