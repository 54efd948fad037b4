"""Finds secrets and personal data in text that is about to be remembered.

A finding blocks the write outright instead of redacting it; the detectors err on the side of blocking
(docs/design.md, "Memory").
"""

from __future__ import annotations

import re

from ragstead.documents.secrets import secret_kinds

# The separators of a disguised email address: "[at]", "(at)", " at ", " @ "; "[dot]", " dot ", ".".
_AT_HIDDEN = r"(?:\s*[\[({]\s*at\s*[\])}]\s*|\s+@\s+)"
_AT = rf"(?:{_AT_HIDDEN}|\s+at\s+)"
_DOT_HIDDEN = r"(?:\s*[\[({]\s*dot\s*[\])}]\s*|\s+dot\s+)"
_DOT = rf"(?:{_DOT_HIDDEN}|\.)"
_TLD = r"(?:com|org|net|edu|gov|io|co|de|fr|uk|es|it|nl|ch|be|eu|info|me|dev)"

# (kind, pattern): kinds are reported to the user; the matched text never is.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("email address", re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")),
    ("phone number", re.compile(
        r"(?<![\w.-])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)[\s.-]?|\d{2,4}[\s.-])\d{3,4}[\s.-]\d{3,4}(?![\w-])"
        r"|(?<![\w+])\+\d{8,15}(?!\w)")),
    ("US social security number", re.compile(r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)")),
    ("IP address", re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])")),
    ("wallet address", re.compile(r"\b0x[0-9a-fA-F]{40}\b")),
    # Street + number in the orders several languages write them: "221B Baker Street", "12 rue de Rivoli",
    # "Hauptstraße 5", "Kerkstraat 12", "Calle Mayor 10", "Via Roma 3".
    ("postal address", re.compile(
        r"\b\d{1,5}[A-Za-z]?,?\s+(?:[A-Z][a-z]+\s){1,3}(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|"
        r"Dr|Court|Ct|Way|Place|Pl|Square|Sq|Terrace|Crescent|Close|Row|Gardens|Mews)\b\.?"
        r"|\b\d{1,5}(?:\s?(?:bis|ter|[A-Za-z]))?,?\s+(?:rue|avenue|av\.|boulevard|bd|place|chemin|allée|impasse|quai|"
        r"cours|route|passage)\s+(?:de\s+la\s+|de\s+l'|du\s+|des\s+|de\s+|d')?[A-ZÉÈ][\w'-]+"
        r"|\b[A-ZÄÖÜ][\wäöüß-]*(?:straße|strasse|str\.|weg|gasse|platz|allee|ring|damm|straat|laan|gracht|plein|"
        r"kade|vej|gade|gatan|vägen)\s+\d{1,5}[a-z]?\b"
        r"|\b(?:Calle|Avenida|Av\.|Plaza|Paseo|Carrer|Via|Viale|Piazza|Corso|Largo|Rua|Travessa|Praça|ul\.)\s+"
        r"(?:[A-Za-zÀ-ÿ][\w'-]*\s+){1,4},?\s*(?:n[º°o]\.?\s*)?\d{1,5}\b")),
    ("date of birth", re.compile(
        r"\b(?:born (?:on|in)|date of birth|birth ?date|(?:my|his|her|their) birthday|birthday\s*(?:is|:)|"
        r"d\.?o\.?b\.?|né(?:e)? le|geboren am|"
        r"fecha de nacimiento|data di nascita)\b", re.I)),
    ("government id", re.compile(
        r"\b(?:passport|driver'?s? licen[cs]e|social security|national id|id card|identity card|tax id|ssn|nino|"
        r"ni number|"
        r"national insurance|codice fiscale|dni|nie|bsn|aadhaar|insee|steuer-?id)\b.{0,25}\d", re.I)),
    ("government id", re.compile(
        r"\b[A-CEGHJ-PR-TW-Z]{2}\s?\d{2}\s?\d{2}\s?\d{2}\s?[A-D]\b"  # UK National Insurance number
        r"|\b[A-Z]{6}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z]\b"  # Italian codice fiscale
        r"|\b[12]\s?\d{2}\s?(?:0[1-9]|1[0-2])\s?\d{2}\s?\d{3}\s?\d{3}\s?\d{2}\b")),  # French INSEE number
    # "john.doe at gmail dot com", "jane [at] example [dot] org": an email written to dodge filters. One of the
    # two must be disguised ("look at example.com" is no address).
    ("email address", re.compile(
        rf"\b[\w.+-]+{_AT_HIDDEN}[\w-]+(?:{_DOT}[\w-]+)*{_DOT}{_TLD}\b"
        rf"|\b[\w.+-]+{_AT}[\w-]+(?:{_DOT}[\w-]+)*{_DOT_HIDDEN}{_TLD}\b", re.I)),
    # A phone number written as a local number after words that announce one ("call me on 555-1234").
    ("phone number", re.compile(
        r"\b(?:call|ring|text|phone|mobile|cell|tel|telephone|whatsapp|signal|reach)(?:\s+me)?(?:\s+(?:on|at))?"
        r"(?:\s+(?:number|no\.?|is|:))*\s*:?\s*\+?\(?\d[\d\s().-]{5,}\d", re.I)),
    ("health information", re.compile(
        r"\b(?:diagnosed with|my diagnosis|my medication|prescribed|my therapist|my illness)\b", re.I)),
    # Secrets (keys, tokens, passwords, URL credentials): the project's one detector, documents/secrets.py.
]
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _iban_valid(candidate: str) -> bool:
    """The IBAN checksum (ISO 13616: the rearranged number mod 97 is 1)."""
    text = candidate.replace(" ", "").upper()
    rearranged = text[4:] + text[:4]
    return 15 <= len(text) <= 34 and int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _phone_numbers(text: str) -> bool:
    """A valid phone number of any of the common regions (Google's libphonenumber metadata): written with a
    `+`, parentheses or separators; a bare run of digits is left to the context rule (order numbers)."""
    import phonenumbers

    for region in _PHONE_REGIONS:
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            if not match.raw_string.isdigit():
                return True
    return False


_PHONE_REGIONS = ("US", "GB", "FR", "DE", "ES", "IT", "NL", "BE", "CH", "AT", "CA", "AU", "IN", "BR", "PL", "SE", "IE")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?\b")


def find_sensitive(text: str) -> list[str]:
    """The kinds of secret or personal data in `text` (sorted, unique); [] when none was found."""
    kinds = {kind for kind, pattern in _PATTERNS if pattern.search(text)}
    if any(_iban_valid(m.group(0)) for m in _IBAN.finditer(text)):
        kinds.add("IBAN")
    if "phone number" not in kinds and _phone_numbers(text):
        kinds.add("phone number")
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and _luhn(digits):
            kinds.add("payment card number")
    kinds.update(secret_kinds(text))
    return sorted(kinds)
