"""The detector reads context as well as shape (issue #50): every secret of tests/data/secrets_shapes (written
before the detector, fit and held-out halves) is masked, and ordinary notes full of numbers, codes and times
are left alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragstead.documents.loaders import load_document
from ragstead.documents.secret_context import bip39_words, luhn
from ragstead.documents.secrets import MASK, credentials_notice, find_secrets, mask, mask_secrets

SHAPES = Path(__file__).parent / "data" / "secrets_shapes"
EXPECTED = json.loads((SHAPES / "expected.json").read_text(encoding="utf-8"))["secrets"]


def _masked(half: str, name: str) -> str:
    loaded = load_document(SHAPES / half / name)
    return mask(loaded.text, find_secrets(loaded.text, name))


@pytest.mark.parametrize("secret", EXPECTED, ids=lambda s: f"{s['half']}-{s['class']}-{s['value'][:12]}")
def test_every_secret_of_the_folder_is_masked(secret: dict) -> None:
    masked = _masked(secret["half"], secret["file"])
    for part in secret.get("parts", [secret["value"]]):
        assert part not in masked, masked


def test_the_folder_holds_at_least_forty_secrets_in_two_halves() -> None:
    assert len(EXPECTED) >= 40 and {s["half"] for s in EXPECTED} == {"fit", "heldout"}


def test_the_label_stays_beside_the_mask() -> None:
    masked = _masked("fit", "home network.md")
    assert "Key: [secret]" in masked and "admin / [secret]" in masked and "Maple-5G" in masked
    assert MASK == "[secret]" and "*" not in MASK  # not markdown: no renderer eats it


@pytest.mark.parametrize("text", [
    "Sort code 40-12-76, account 31926648 (on every statement).",
    "Discount code SPRING20 saved EUR 12; flight LH1234 seat 14C.",
    "the combination of PD-0332991 and radiation therapy",
    "Boarding pass: gate B12, seat 14A",
    "Key step: rest the dough for an hour.",
    "Key points: ship version 2.4.1 on the 14th",
    "Time: 9:30-10:00, room B12. Dial-in +44 20 7946 0958, meeting ID 845 221 9032.",
    "IBAN: DE89 3704 0044 0532 0130 00  BIC: COBADEFFXXX  VAT ID: DE123456789",
    "Paid by card ending 4242 on 3 March; postcode SW1A 1AA.",
    "Order #48213377 (kettle), EUR 39.99, tracking UPS 1Z999AA10123456784",
    "Invoice no. 2024-0173  Customer number: 4419203  Reference: INV 4471 2093",
    "Pass the sauce through a sieve, then simmer for 20 minutes.",
    "Door buzzer for flat 12; the PIN-compatible board has 40 pins.",
    "We took the 7:45 train; the password policy needs 12 characters.",
    "Heat the oven to 200 °C (gas mark 6). Serves 4.",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert find_secrets(text) == [], [text[s.start:s.end] for s in find_secrets(text)]


def test_a_card_number_needs_its_checksum_and_a_card_word() -> None:
    assert luhn("4539148803436467") and not luhn("4539148803436468")
    assert mask_secrets("Visa 4539 1488 0343 6467 exp 09/27") == "Visa [secret] exp [secret]"
    assert find_secrets("shipment 4539148803436467 arrived") == []  # no card word near it
    assert find_secrets("Visa 4539 1488 0343 6468") == []  # fails the checksum


def test_a_wallet_phrase_is_twelve_words_of_the_bip39_list() -> None:
    words = sorted(bip39_words())
    assert len(words) == 2048
    phrase = " ".join(words[i * 150] for i in range(12))
    assert mask_secrets(f"seed: {phrase}\n").count(MASK) == 1
    assert phrase.split()[3] not in mask_secrets(f"written down\n{phrase}\n")
    eleven = " ".join(phrase.split()[:11])
    assert find_secrets(f"Note\n{eleven}\n") == []


def test_recovery_codes_are_the_code_lines_under_their_name() -> None:
    text = "Backup codes for mail:\n- 4471 2093\n- 0831 7720\n\nShopping list\n- 2 lemons\n"
    masked = mask_secrets(text)
    assert "4471" not in masked and "0831" not in masked and "2 lemons" in masked


def test_a_file_that_is_mostly_credentials_is_summarised_not_quoted() -> None:
    text = (SHAPES / "fit" / "passwords.txt").read_text(encoding="utf-8")
    notice = credentials_notice(text, find_secrets(text, "passwords.txt"), "passwords.txt")
    assert notice is not None and notice.startswith("passwords.txt holds 3 secrets (amazon; dropbox; library)")
    assert "ana@example.com" not in notice and "tulip" not in notice
    prose = "Trip notes\nWe walked to the harbour.\nThe wifi password: Tr0ub4dor&3 at the cafe.\nLunch was fish.\n"
    assert credentials_notice(prose, find_secrets(prose), "trip.md") is None
