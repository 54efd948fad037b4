"""Memory's PII filter (memory/sensitive.py): a table of personal data it must find, in several formats and
languages, and of ordinary facts it must let through. `remember` never writes what it finds."""

from __future__ import annotations

import pytest

from ragstead.memory.sensitive import find_sensitive


@pytest.fixture
def embedder(fake_embedder):
    """Stores, filters and wiring, not ranking quality: the deterministic fake embedder stands in for the model."""
    return fake_embedder


POSITIVE = [
    # phone numbers, national and international formats
    ("phone number", "call me on 555-1234"),
    ("phone number", "Call me at 555 1234 after six"),
    ("phone number", "my number is (415) 555-2671"),
    ("phone number", "ring +44 20 7946 0958 for the office"),
    ("phone number", "mobile 06 12 34 56 78"),
    ("phone number", "Tel: +33 6 12 34 56 78"),
    ("phone number", "reach me on 030 1234567"),
    ("phone number", "my cell is 0151 23456789"),
    ("phone number", "whatsapp +49 151 23456789"),
    ("phone number", "text me at 415.555.2671"),
    ("phone number", "the office line is +1-212-555-0147"),
    ("phone number", "phone: 020 7946 0958"),
    ("phone number", "my Dutch number is 06-12345678"),
    ("phone number", "call +91 98765 43210 in Pune"),
    # postal addresses, several languages
    ("postal address", "I live at 221B Baker Street"),
    ("postal address", "send it to 12 rue de Rivoli, Paris"),
    ("postal address", "our flat is at 4 avenue des Champs-Élysées"),
    ("postal address", "my address is Hauptstraße 5 in Berlin"),
    ("postal address", "I moved to Kerkstraat 12, Amsterdam"),
    ("postal address", "home is Calle Mayor 10, Madrid"),
    ("postal address", "I live in Via Roma 3, Milano"),
    ("postal address", "deliver to 1600 Pennsylvania Avenue"),
    ("postal address", "my place: 10 Downing St"),
    ("postal address", "parcel to Bahnhofstrasse 21, Zürich"),
    ("postal address", "I'm at 7 Elm Lane most evenings"),
    ("postal address", "new flat: Rua Augusta 45, Lisboa"),
    # email addresses, plain and obfuscated
    ("email address", "write to john.doe@gmail.com"),
    ("email address", "john.doe at gmail dot com"),
    ("email address", "jane [at] example [dot] org"),
    ("email address", "contact: bob (at) company (dot) io"),
    ("email address", "mail marta at acme dot de"),
    # IBANs and card numbers, with their checksums
    ("IBAN", "my IBAN is DE89 3704 0044 0532 0130 00"),
    ("IBAN", "pay to GB29NWBK60161331926819"),
    ("IBAN", "FR14 2004 1010 0505 0001 3M02 606 is the account"),
    ("payment card number", "card 4111 1111 1111 1111 expires soon"),
    ("payment card number", "use 5500-0000-0000-0004 for tests"),
    ("payment card number", "my Amex 378282246310005"),
    # national ids
    ("US social security number", "SSN 123-45-6789"),
    ("government id", "my passport number is X1234567"),
    ("government id", "national insurance AB 12 34 56 C"),
    ("government id", "reference AB123456C on the payslip"),
    ("government id", "codice fiscale RSSMRA85T10A562S"),
    ("government id", "numéro de sécu 1 85 05 78 006 084 36"),
    ("government id", "my driver's license is D1234-56789"),
    ("government id", "DNI 12345678Z"),
    # dates of birth
    ("date of birth", "I was born on 12 March 1990"),
    ("date of birth", "date of birth: 1990-03-12"),
    ("date of birth", "DOB 03/12/1990"),
    ("date of birth", "my birthday is April 4th"),
    ("date of birth", "née le 4 avril 1988"),
    ("date of birth", "geboren am 1. Mai 1975"),
    # other personal data and secrets the same filter blocks
    ("IP address", "my home IP is 192.168.1.20"),
    ("wallet address", "my wallet 0x9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"),
    ("API key", "my key is sk-proj-abcdefghijklmnopqrstuvwxyz123456"),
]

NEGATIVE = [
    "I prefer dark mode in every editor",
    "We deploy on Tuesdays and never on Fridays",
    "Our API has 42 endpoints",
    "The team uses Python 3.12 since 2024",
    "Dates are written as ISO 8601 in our docs",
    "The standup is at 10:30 every day",
    "The budget for Q3 is 2,500,000 EUR",
    "The service listens on port 8080",
    "Read chapter 12 of the design book",
    "The review is in room 221",
    "We released version 10.0.19041 last week",
    "The migration finished on 2025-03-14",
    "We ordered 300 units of the sensor",
    "Lesson learned: restores need the WAL archive",
    "I prefer PostgreSQL over MySQL for billing",
    "The cluster has 3 nodes and 96 GB of RAM",
    "Alice owns the billing service",
    "The SLA is 99.95 percent uptime",
    "Our sprint lasts 2 weeks",
    "Tickets older than 30 days are closed",
    "I like to read on the train",
    "The on-call rotation changes every Monday",
    "Latency p95 must stay under 150 ms",
    "Batch size 4 was the fastest on 2 cores",
    "We chose Rust for the parser in 2023",
    "The logo is 512 by 512 pixels",
    "Invoices are due within 45 days",
    "I usually write notes in markdown",
    "The roadmap has 5 themes for 2026",
    "Our office is closed on public holidays",
    "The README must stay under 250 lines",
    "Pi is roughly 3.14159",
    "The ISBN of the book is on the back cover",
    "Use the street map in the wiki for the offsite",
    "The main street of the town has three cafes",
    "We call the service every 5 minutes",
    "The phone app shipped in version 2.4",
    "Text search uses BM25 with k1 1.2",
    "The avenue project is owned by Jonas",
    "Our birthday party for the product is in June",
    "The team grew from 4 to 9 people",
    "Deploy windows are 14:00 to 16:00 UTC",
    "The warehouse holds 12,000 pallets",
    "Chapter 7 covers retries and timeouts",
    "We moved the meeting to Thursday at noon",
    "I prefer tea over coffee in the morning",
    "The test suite has 655 tests",
    "The contract runs for 36 months",
    "The invoice total was 1,234.56 USD",
    "The rue of the matter is quality first",
    "Our main branch is called main",
    "Look at example.com for the public docs",
    "We meet at noon in the lobby",
    "I back up my laptop every Sunday",
    "The dashboard refreshes every 60 seconds",
]


@pytest.mark.parametrize(("kind", "text"), POSITIVE, ids=[t for _, t in POSITIVE])
def test_personal_data_is_found_and_named(kind, text):
    assert kind in find_sensitive(text)


@pytest.mark.parametrize("text", NEGATIVE)
def test_ordinary_facts_pass(text):
    assert find_sensitive(text) == []


def test_the_table_is_big_enough():
    assert len(POSITIVE) >= 50 and len(NEGATIVE) >= 50


def test_what_the_issue_saw_through_is_never_written(make_project):
    from ragstead import KnowledgeBase

    project = make_project({"kb/users/ana/x.md": "x"})
    kb = KnowledgeBase(project.settings, embedder=project.embedder)
    for text in ("Remember: call me on 555-1234", "I live at 12 rue de Rivoli", "I live at 221B Baker Street",
                 "My email is john.doe at gmail dot com"):
        result = kb.remember(text, user="ana")
        assert not result.decision.should_write and result.file is None, text
    assert not (project.root / "kb/users/ana/memory").exists()
