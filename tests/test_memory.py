"""Selective memory: the decision, the secret/PII filter, the files, their privacy and their indexing."""

import json

import pytest

from helpers.library import ask, remember, search
from ragstead.answer.ask import AskOptions
from ragstead.answer.extractive import ExtractiveAnswerer
from ragstead.filters import QueryFilters
from ragstead.memory import decide
from ragstead.memory.files import remembered
from ragstead.memory.sensitive import find_sensitive
from ragstead.retrieval.search import SearchOptions


@pytest.fixture
def embedder(fake_embedder):
    """Stores, filters and wiring, not ranking quality: the deterministic fake embedder stands in for the model."""
    return fake_embedder


# Each of these must be caught, and named by its kind. Test values only (documented examples, fake keys).
SENSITIVE = [
    ("email address", "Write to me at jane.doe+kb@example.co.uk about it"),
    ("phone number", "My number is +44 20 7946 0958 if anything breaks"),
    ("phone number", "call (415) 555-2671 after lunch"),
    ("phone number", "reach me on 030-1234-5678"),
    ("phone number", "whatsapp +4915123456789"),
    ("US social security number", "my SSN 123-45-6789 is on file"),
    ("IBAN", "Pay into DE89 3704 0044 0532 0130 00 please"),
    ("IBAN", "IBAN GB29NWBK60161331926819"),
    ("IP address", "the box lives at 10.20.30.40 in the DMZ"),
    ("wallet address", "send it to 0x9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"),
    ("postal address", "I live at 221 Baker Street in London"),
    ("date of birth", "I was born on 4 July 1990"),
    ("government id", "passport number X1234567 expires soon"),
    ("health information", "I was diagnosed with diabetes last year"),
    ("payment card number", "card 4111 1111 1111 1111 exp 12/29"),
    ("payment card number", "use 5555555555554444 for the test order"),
    ("private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"),
    ("private key", "-----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEA"),
    ("API key", "OPENAI key sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWx"),
    ("API key", "the anthropic one is sk-ant-api03-abcdefghijklmnopqrstuv"),
    ("API key", "aws AKIAIOSFODNN7EXAMPLE for uploads"),
    ("API key", "google AIzaSyA-1234567890abcdefghijklmnopqrstu"),
    ("API key", "token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
    ("API key", "github_pat_11ABCDEFG0123456789_abcdefghij"),
    ("API key", "slack xoxb-123456789012-abcdefghijkl"),
    ("API key", "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("API key", "gitlab glpat-abcdefghij0123456789"),
    ("API key", "our server key rsk_abcdefghijklmnopqrstuvwxyz123"),
    ("access token", "Authorization: Bearer abc.def-ghi_jklmnopqrstu"),
    ("access token", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3"),
    ("credentials in a URL", "DATABASE_URL=postgresql://admin:s3cr3t@db.internal:5432/app"),
    ("password or secret", "the wifi password is correcthorsebattery"),
    ("password or secret", "api_key = 12345"),
    ("password or secret", "PIN: 4321"),
    ("password or secret", "log in with password hunter2"),
    ("secret-looking token", "session id Zx81kQp0Lm2Nv7Rt5Wy3Bc9Dg4Hj6Fa"),
]

CLEAN = [
    "I prefer the CLI over the web UI.",
    "We decided to migrate billing to PostgreSQL 16 in 2025.",
    "Our password policy requires twelve characters.",
    "Release 4.2.1 fixed the p95 latency, now 80 ms.",
    "The meeting on 2025-03-14 moved to room 12.",
    "Version 1.2.3 of the client needs Python 3.11.",
    "Invoice runs should drop to under one hour.",
]


@pytest.mark.parametrize(("kind", "text"), SENSITIVE)
def test_secrets_and_pii_are_found_and_named(kind, text):
    assert kind in find_sensitive(text)


@pytest.mark.parametrize(("kind", "text"), SENSITIVE)
def test_a_fact_carrying_a_secret_or_pii_is_never_written(kind, text, tmp_path, make_project):
    project = make_project({})
    result = remember(f"I prefer this setup: {text}", "alice", project.settings)
    assert not result.decision.should_write and not result.written and result.decision.summary == ""
    assert any(kind in reason for reason in result.decision.reasons)
    assert not (project.root / "kb/users/alice/memory").exists()


@pytest.mark.parametrize("text", CLEAN)
def test_ordinary_facts_are_not_mistaken_for_secrets(text):
    assert find_sensitive(text) == []


@pytest.mark.parametrize(("text", "target", "summary"), [
    ("I prefer the CLI over the web UI", "USER", "Prefers the CLI over the web UI."),
    ("Remember that I always use vim keybindings.", "USER", "Always uses vim keybindings."),
    ("I'm a backend engineer on the payments team.", "USER", "Is a backend engineer on the payments team."),
    ("I work at Acme as a data engineer", "USER", "Works at Acme as a data engineer."),
    ("My time zone is CET, working hours 9 to 5.", "USER", "Time zone is CET, working hours 9 to 5."),
    ("We decided to use PostgreSQL 16 for billing.", "COMPANY", "We decided to use PostgreSQL 16 for billing."),
    ("Lesson learned: never deploy on Fridays.", "COMPANY", "Lesson learned: never deploy on Fridays."),
    ("Our deploys always go through the staging cluster first.", "COMPANY",
     "Our deploys always go through the staging cluster first."),
])
def test_high_signal_facts_are_written_to_the_right_file(text, target, summary):
    decision = decide(text)
    assert decision.should_write and decision.target == target and decision.summary == summary
    assert decision.confidence >= 0.6


@pytest.mark.parametrize(("text", "why"), [
    ("What is our deploy process?", "question"),
    ("what did we decide about the billing database", "question"),
    ("I prefer tea today", "temporary"),
    ("Remind me to call the bank tomorrow", "temporary"),
    ("We always deploy at the moment from my laptop", "temporary"),
    ("User: can you fix it?\nAssistant: I prefer to check the logs first.\nUser: ok", "transcript"),
    ("[10:02] Alice: we decided on Postgres\n[10:03] Bob: fine by me", "transcript"),
    ("I prefer " + "very long context " * 40, "longer than"),
    ("maybe I like tea", "hedged"),
    ("The sky is blue.", "no preference"),
    ("ok", "too short"),
])
def test_questions_transient_context_transcripts_and_noise_are_not_written(text, why):
    decision = decide(text)
    assert not decision.should_write
    assert any(why in reason for reason in decision.reasons), decision.reasons


def test_remember_appends_once_indexes_and_stays_private(make_project):
    project = make_project({"kb/users/bob/notes.md": "Bob's notes about the staging cluster and its quota."})
    project.index()
    first = remember("I prefer the CLI over the web UI.", "alice", project.settings, project.store, project.embedder)
    again = remember("i prefer the cli over the web ui", "alice", project.settings, project.store, project.embedder)
    team = remember("We decided to keep MySQL read-only for thirty days.", "alice", project.settings, project.store,
                    project.embedder)
    assert first.written and first.indexed and first.file == "kb/users/alice/memory/USER_MEMORY.md"
    assert not again.written and "already remembered" in again.note
    assert team.written and team.file == "kb/users/alice/memory/COMPANY_MEMORY.md"
    assert remembered(project.root / first.file) == ["Prefers the CLI over the web UI."]

    doc = project.store.get_document(file_path=first.file)
    assert doc["doc_type"] == "user_kb" and doc["is_private"] and doc["user_slug"] == "alice"
    question = "Do I prefer the CLI or the web UI?"
    mine = ask(question, project.store, project.embedder, QueryFilters.build(user_slug="alice"),
               AskOptions(SearchOptions(mode="hybrid", k=8)), [ExtractiveAnswerer()], project.settings.path_rules)
    assert mine["citations"][0]["source"] == first.file and not mine["memory"]["should_write"]
    for filters in (QueryFilters.build(user_slug="bob"), QueryFilters.build(public_only=True)):
        for mode in ("vector", "lexical", "hybrid"):
            found = search("prefers CLI web UI MySQL read-only", project.store, project.embedder, filters,
                           SearchOptions(mode=mode, k=20), project.settings.path_rules)
            assert not any("/memory/" in row["file_path"] for row in found["results"]), (filters, mode)


def test_remember_needs_a_valid_user_and_dry_run_writes_nothing(make_project):
    project = make_project({})
    with pytest.raises(Exception, match="user slug"):
        remember("I prefer tea over coffee.", "../bob", project.settings)
    dry = remember("I prefer tea over coffee.", "alice", project.settings, dry_run=True)
    assert dry.decision.should_write and not dry.written and dry.file.endswith("USER_MEMORY.md")
    assert not (project.root / "kb/users/alice").exists()


def test_remember_and_ask_remember_on_the_command_line(make_project, cli):
    project = make_project({"kb/users/alice/db.md": "We migrate billing to PostgreSQL 16 in March."})
    cli(project, "index", "-q")
    out = cli(project, "remember", "I prefer answers as bullet points.", "--user", "alice", "--format", "json")
    assert json.loads(out.stdout)["written"] is True
    blocked = cli(project, "remember", "my password is hunter2", "--user", "alice")
    assert "do not write" in blocked.stdout and "hunter2" not in blocked.stdout
    asked = cli(project, "ask", "Lesson learned: always test restores of the billing backups.", "--user", "alice",
                "--extractive", "--remember", "--format", "json")
    result = json.loads(asked.stdout)
    assert result["memory"]["target"] == "COMPANY" and result["memory_write"]["written"]
    text = (project.root / "kb/users/alice/memory/COMPANY_MEMORY.md").read_text()
    assert "always test restores of the billing backups" in text
    refused = cli(project, "ask", "what about billing?", "--remember", "--extractive", expect=2)
    assert "--remember needs a user in a team project (--user SLUG)" in refused.stderr
