"""Secrets known by where they sit as well as by their shape (issue #50): the rules documents/secrets.py adds to
its key shapes and `password: …` lines. Each rule reads one shape people keep secrets in, and says why:

- credential context: a file named or a heading that says passwords, logins, accounts, credentials, codes, keys
  or PINs makes its `label: value` and `user / value` lines credentials (a value that looks like one);
- table and CSV columns: a markdown table's column or a spreadsheet row's key that names a credential (password,
  pass, PIN, code, key, secret, CVV, TOTP, ...) holds one in every row;
- key/value lines whose key names one: `DB_PASS=…`, `<password>…</password>`, `pass: …`, `Key: …`;
- codes: an alarm, door, gate, garage, safe or lock code, a PIN or PUK, a combination, given as digits after it;
- `user / password` pairs after an e-mail address, admin or root, and `admin:password`;
- cards: a Luhn-valid number near card words (the check rules out order and tracking numbers), its CVV and expiry;
- wallet phrases: 12 to 24 words in a row of the BIP-39 word list (data/bip39_english.txt, MIT);
- recovery codes: the short code-shaped lines under a line that names recovery or backup codes;
- passphrases: words joined by dashes right after a word that names a credential;
- an AWS key id split over two lines.

Each rule gives (start, end, kind) over the whole text; documents/secrets.py merges them with its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from importlib import resources

Found = tuple[int, int, str]
PASSWORD = "password or secret"
CODE = "code or PIN"

# -- context: file names and headings ----------------------------------------------------------------------

# A file name or heading that says it holds credentials (plural "keys"/"codes": "Key dates" and "Code review" don't).
_CONTEXT = re.compile(r"(?<![a-z])(?:pass ?words?|passwd|passcodes?|logins?|log-ins|sign-ins|accounts|credentials?|"
                      r"codes|keys|pins|secrets|wi-?fi|recovery|2fa|vault)(?![a-z])", re.I)
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# `label: value`, `label - value`, `label = value` (the label a service, the value the rest of the line).
_KEY_VALUE = re.compile(r"^[ \t>*+-]*(?:\d+[.)]\s+)?(?P<label>[^\s:=|][^:=|\n]{0,40}?)[ \t]*(?:[:=]|\s[-–—]\s)[ \t]*"
                        r"(?P<value>\S.*?)[ \t]*$")
# `user / password`: the part after the last ` / `.
_PAIR = re.compile(r"\s/\s+(?P<value>\S+)\s*$")
_DATE_OR_NUMBER = re.compile(r"^[\d\s.,:/()+%-]*(?:am|pm|h|min|kg|g|ml|eur|usd|gbp|€|\$|£)?[.,;]?$", re.I)
_URL_OR_MAIL = re.compile(r"^(?:[a-z][\w+.-]*://|www\.)|^[^@\s]+@[^@\s]+\.\w+$", re.I)
_PASSPHRASE = re.compile(r"(?<![\w-])[A-Za-z]{3,10}(?:-[A-Za-z]{3,10}){2,7}(?:-\d{1,4})?(?![\w-])")


def looks_secret(value: str) -> bool:
    """A value a person would keep as a password: one token, with letters and a digit or a symbol, or words
    joined by dashes; not a date, time, amount, URL or e-mail address (which a `label: value` line also holds)."""
    value = value.strip("\"'`.,;")
    if not value or " " in value or len(value) < 4 or len(value) > 64:
        return False
    if _DATE_OR_NUMBER.match(value) or _URL_OR_MAIL.search(value):
        return False
    letters = any(c.isalpha() for c in value)
    marked = any(c.isdigit() for c in value) or any(c in "!#$%&*+?@^~=_" for c in value)
    return (letters and marked) or bool(_PASSPHRASE.fullmatch(value))


def _pair_value(value: str) -> bool:
    """The second of `user / value` in a credential context: any word (`tulip-moon`), not a number or a link."""
    value = value.strip("\"'`.,;")
    return len(value) >= 3 and not _DATE_OR_NUMBER.match(value) and not _URL_OR_MAIL.search(value)


def credential_name(name: str) -> bool:
    """Whether a file name (or a heading) says it holds credentials: `passwords.txt`, `Logins`, `door codes.md`."""
    return bool(_CONTEXT.search(re.sub(r"[_.]", " ", name)))


def _lines(text: str) -> Iterator[tuple[int, str]]:
    at = 0
    for line in text.splitlines(keepends=True):
        yield at, line.rstrip("\r\n")
        at += len(line)


def _contexts(text: str, filename: str) -> Iterator[tuple[int, str, bool]]:
    """(offset, line, in a credential context) of each line: the whole file when its name says so, else the
    section under a heading that does (until a heading as high), or the lines after a short first line that does
    (a text file's title: "Logins (keep offline)")."""
    whole = credential_name(filename.rsplit("/", 1)[-1].rsplit(".", 1)[0])
    level, first = 0, True
    for offset, line in _lines(text):
        heading = _HEADING.match(line)
        if heading:
            depth = len(heading[1])
            if level and depth <= level:
                level = 0
            if credential_name(heading[2]):
                level = depth
        elif first and line.strip() and len(line.split()) <= 6 and not line.rstrip().endswith("."):
            level = 7 if credential_name(line) else level
        if line.strip():
            first = False
        yield offset, line, whole or bool(level)


def context_spans(text: str, filename: str) -> list[Found]:
    """The values of `label: value` and `user / value` lines in a credential context (see `_contexts`)."""
    found: list[Found] = []
    for offset, line, inside in _contexts(text, filename):
        if not inside or _HEADING.match(line) or line.lstrip().startswith("|"):
            continue
        pair = _PAIR.search(line)
        if pair and _pair_value(pair["value"]):  # `service: user / password` or `user / password`
            found.append((offset + pair.start("value"), offset + pair.end("value"), PASSWORD))
            continue
        match = _KEY_VALUE.match(line)
        if match and looks_secret(match["value"]):
            found.append((offset + match.start("value"), offset + match.end("value"), PASSWORD))
    return found


# -- tables and spreadsheet rows ----------------------------------------------------------------------------

# A column or key that names a credential: the whole header cell, or its last word ("Wi-Fi password", "PIN").
_CREDENTIAL_KEY = re.compile(
    r"^(?:[\w' -]{0,24}[ _-])?(?:pass(?:word|wd|code|phrase|key)?|pwd|pin(?: ?code)?|puk|secret|cvv2?|cvc2?|csc|"
    r"totp|otp|token|api[ _-]?key|(?:wi-?fi|wpa2?|network|access|secret|private|recovery|backup) ?(?:key|code)|"
    r"key|(?:alarm|door|gate|garage|safe|lock|entry|access|security|unlock) ?code|recovery codes?|"
    r"memorable (?:word|information|info)|security answer)$", re.I)
_TABLE_ROW = re.compile(r"^\s*\|(.+)\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")
_RECORD_PAIR = re.compile(r"(?:^|; )(?P<key>[^:;\n]{1,40}): (?P<value>[^;\n]*)")


def table_spans(text: str) -> list[Found]:
    """The cells of markdown table columns whose header names a credential, and the values of spreadsheet rows
    ("site: ebay; login: ana_k; pass: …", documents/formats/sheets.py) whose key does."""
    found: list[Found] = []
    columns: set[int] = set()
    for offset, line in _lines(text):
        row = _TABLE_ROW.match(line)
        if not row:
            columns = set()
            found += _record_spans(offset, line)
            continue
        if _TABLE_RULE.match(line):
            continue
        cells = _cells(line, row.start(1))
        if not columns:
            named = {n for n, (cell, _) in enumerate(cells) if _CREDENTIAL_KEY.match(cell.strip())}
            if named and not any(looks_secret(cell) for cell, _ in cells):
                columns = named  # a header row: it names, it does not hold
            continue
        for n, (cell, start) in enumerate(cells):
            value = cell.strip()
            if n in columns and value and value not in ("-", "—"):
                begin = offset + start + cell.index(value)
                found.append((begin, begin + len(value), PASSWORD))
    return found


def _cells(line: str, start: int) -> list[tuple[str, int]]:
    """A table row's cells with their offsets in the line (the row's content starts at `start`)."""
    cells, at = [], start
    for cell in line[start:].rstrip().rstrip("|").split("|"):
        cells.append((cell, at))
        at += len(cell) + 1
    return cells


def _record_spans(offset: int, line: str) -> list[Found]:
    if ": " not in line:
        return []
    found = []
    for pair in _RECORD_PAIR.finditer(line):
        value = pair["value"].strip()
        if value and _CREDENTIAL_KEY.match(pair["key"].strip()) and (looks_secret(value) or value.isdigit()):
            begin = offset + pair.start("value") + pair["value"].index(value)
            found.append((begin, begin + len(value), PASSWORD))
    return found


# -- key/value lines, codes and pairs -----------------------------------------------------------------------

# Why each: an environment file's `*_PASS=`, an XML config's element, and a bare `pass:`/`Key:` label.
_ENV = re.compile(r"(?m)^[ \t]*(?:export[ \t]+)?[A-Z][A-Z0-9_]*_(?:PASS|PASSWD|PASSWORD|PWD|SECRET|TOKEN|KEY|PIN)"
                  r"[ \t]*=[ \t]*(?P<value>\"[^\"\n]+\"|'[^'\n]+'|\S+)")
_XML = re.compile(r"<(?P<tag>password|passwd|pwd|pass|secret|token|pin|api[_-]?key|passphrase)>(?P<value>[^<\n]+)"
                  r"</(?P=tag)>", re.I)
_BARE_LABEL = re.compile(r"(?<![\w-])(?P<label>pass|key|wpa2?(?:[ -]psk)?|psk|network key|unlock (?:words|phrase|code)|"
                         r"seed (?:words|phrase)|recovery phrase)[ \t]*[:=][ \t]*(?P<value>\S+)", re.I)
# "Boarding pass: gate 12", "Key: rest the dough": a bare label is a credential's only when its value looks like one.
_NOT_A_PASS = re.compile(r"(?:boarding|bus|day|season|travel|ski|rail|train|museum|mountain|hall|free|guest|press)"
                         r"\s+$", re.I)
_CODE_VALUE = r"(?P<value>\d{2,8}(?:[ -]\d{2,8}){0,3}[#*]?)(?![\w/]|[.,:]\d)"
MIN_CODE_DIGITS = 3  # a CVV's length; "PIN 12" is a pin of a chip, not a code
# A code's name, then a few words ("Key safe by the door", "The wardrobe safe opens with"), then the digits.
_CODE = re.compile(
    r"(?<![\w-])(?:(?:alarm|door|gate|garage|safe|lock|lockbox|key ?safe|keypad|entry|access|security|unlock|"
    r"building|intercom|locker|padlock|bike lock)[ \t]+(?:code|combination|combo|pin|number)|keypad|"
    r"safe(?=[^.\n]{0,30}\bopens?\b)|key ?safe)"
    r"(?:[ \t]+(?![A-Za-z]+[ \t]*\d)[A-Za-z'’]+){0,4}?[ \t]*(?:[:=-]|is|was|now|opens? with|reads)?[ \t]*"
    + _CODE_VALUE, re.I)
# A PIN, PUK, passcode or CVV right before its digits ("PIN 5186", "cvc 771"); a combination only with `:` or
# `is` ("the combination of PD-0332991 and radiation" is a therapy).
_CODE_BARE = re.compile(r"(?<![\w-])(?:(?:pin(?: ?code)?|puk|passcode|cvv2?|cvc2?|csc)[ \t]*(?:[:=]|is|was)?|"
                        r"(?:combination|combo)[ \t]*(?:[:=]|is|was))[ \t]*" + _CODE_VALUE, re.I)
_USER_SLASH = re.compile(r"(?<![\w.+-])(?:admin|root|administrator|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)[ \t]+/[ \t]+"
                         r"(?P<value>\S+)")
_USER_COLON = re.compile(r"(?<![\w/:@.-])(?:admin|root|administrator|pi|ubuntu|sa|postgres)[ \t]*:[ \t]*"
                         r"(?P<value>\S{4,})")
# An AWS key id cut by a line break: AKIA and 16 more, across the break.
_AWS_SPLIT = re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)(?P<a>[0-9A-Z]{1,15})[ \t]*\r?\n[ \t]*(?P<b>[0-9A-Z]{1,15})"
                        r"(?![A-Za-z0-9])")
# A word that names a credential, then a passphrase: "unlock words: ember-cactus-ribbon-tide".
_PASSPHRASE_AFTER = re.compile(r"(?i:pass(?:word|phrase)?|key|unlock|login|secret|phrase|words|wi-?fi|wpa2?|code)"
                               r"[^\n]{0,30}?[:=–—-][ \t]*(?P<value>" + _PASSPHRASE.pattern + ")")


def line_spans(text: str) -> list[Found]:
    """The key/value, code and pair rules over the whole text."""
    found: list[Found] = []
    for pattern, kind in ((_ENV, PASSWORD), (_XML, PASSWORD), (_PASSPHRASE_AFTER, PASSWORD)):
        found += [(m.start("value"), m.end("value"), kind) for m in pattern.finditer(text)]
    found += [(m.start("value"), m.end("value"), CODE) for pattern in (_CODE, _CODE_BARE)
              for m in pattern.finditer(text) if sum(c.isdigit() for c in m["value"]) >= MIN_CODE_DIGITS]
    for pattern in (_USER_SLASH, _USER_COLON):
        found += [(m.start("value"), m.end("value"), PASSWORD) for m in pattern.finditer(text)
                  if looks_secret(m["value"])]
    for match in _BARE_LABEL.finditer(text):
        before = text[max(0, match.start() - 20):match.start()]
        if looks_secret(match["value"]) and not _NOT_A_PASS.search(before):
            found.append((match.start("value"), match.end("value"), PASSWORD))
    for match in _AWS_SPLIT.finditer(text):
        if len(match["a"]) + len(match["b"]) == 16:
            found.append((match.start(), match.end(), "API key"))
    return found


# -- cards --------------------------------------------------------------------------------------------------

_CARD = re.compile(r"(?<![\d-])(?:\d{4}[ -]){3}\d{1,7}(?![\d-])|(?<![\d-])\d{13,19}(?![\d-])|"
                   r"(?<![\d-])\d{4}[ -]\d{6}[ -]\d{5}(?![\d-])")
_CARD_WORDS = re.compile(r"visa|master ?card|amex|american express|maestro|discover|card|credit|debit|"
                         r"exp(?:ires?|iry)?\b|valid (?:thru|through|until)|cvv|cvc|csc", re.I)
_EXPIRY = re.compile(r"(?i:exp(?:ires?|iry)?\.?|valid (?:thru|through|until))[ \t:]*"
                     r"(?P<value>(?:0[1-9]|1[0-2])[/-]\d{2}"
                     r"(?:\d{2})?)(?!\d)")


def luhn(digits: str) -> bool:
    """The card number checksum (ISO/IEC 7812): every second digit from the right doubled."""
    total = 0
    for n, char in enumerate(reversed(digits)):
        value = int(char) * (2 if n % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def card_spans(text: str) -> list[Found]:
    """Luhn-valid numbers of 13-19 digits with a card word within 60 characters, and each such card's expiry."""
    found: list[Found] = []
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        near = text[max(0, match.start() - 60):match.end() + 60]
        if 13 <= len(digits) <= 19 and luhn(digits) and len(set(digits)) > 2 and _CARD_WORDS.search(near):
            found.append((match.start(), match.end(), "card number"))
            base = max(0, match.start() - 60)
            found += [(base + e.start("value"), base + e.end("value"), "card number") for e in _EXPIRY.finditer(near)]
    return found


# -- wallet phrases and recovery codes ----------------------------------------------------------------------


@cache
def bip39_words() -> frozenset[str]:
    """The BIP-39 English word list (2,048 words), shipped with the package."""
    data = resources.files("ragstead.documents") / "data" / "bip39_english.txt"
    return frozenset(data.read_text(encoding="utf-8").split())


_WORD = re.compile(r"[a-z]+")
PHRASE_WORDS = 12  # the shortest wallet phrase; 12 words of prose all in the list are vanishingly rare


def phrase_spans(text: str) -> list[Found]:
    """Runs of 12 or more words of the BIP-39 list with nothing but spaces, commas, line breaks or list numbers
    between them (a wallet's recovery phrase, as written down)."""
    words = bip39_words()
    found: list[Found] = []
    run: list[re.Match[str]] = []
    last = 0
    for match in _WORD.finditer(text):
        gap = text[last:match.start()]
        joined = run and re.fullmatch(r"[\s,]*(?:\d{1,2}[.)][\s]*)?", gap) is not None
        if match.group(0) in words and (joined or not run) and not text[match.start() - 1:match.start()].isalpha():
            run.append(match)
        else:
            found += _phrase(run)
            run = [match] if match.group(0) in words else []
        last = match.end()
    return found + _phrase(run)


def _phrase(run: list[re.Match[str]]) -> list[Found]:
    return [(run[0].start(), run[-1].end(), "wallet recovery phrase")] if len(run) >= PHRASE_WORDS else []


_CODES_LINE = re.compile(r"(?i:recovery|backup|scratch|one-time|2fa|two-factor|emergency)[\w ()-]{0,30}codes?\b")
_CODE_SHAPE = re.compile(r"^[ \t>*+-]*(?:\d{1,2}[.)][ \t]+)?"
                         r"(?P<value>(?=[\w -]*\d)[A-Za-z0-9]{3,12}(?:[ -][A-Za-z0-9]{3,12})?)"
                         r"[ \t]*$")


def recovery_code_spans(text: str, filename: str = "") -> list[Found]:
    """The code-shaped lines (`a3f9c-81d2e`, `- 8341 2297`) that follow a line naming recovery or backup codes (blank
    lines and a line of prose may come between), or fill a file whose name does."""
    found: list[Found] = []
    open_list = bool(_CODES_LINE.search(filename))
    codes = prose = 0  # codes and lines of prose since the list opened
    for offset, line in _lines(text):
        code = _CODE_SHAPE.match(line)
        if _CODES_LINE.search(line):
            open_list, codes, prose = True, 0, 0
        elif code and open_list:
            found.append((offset + code.start("value"), offset + code.end("value"), CODE))
            codes += 1
        elif line.strip():  # prose: one line may come before the codes ("Each code works once."), none between
            prose += 1
            open_list = open_list and codes == 0 and prose <= 1
    return found


def context_rules(text: str, filename: str) -> list[Found]:
    """Every rule of this module over `text` (a document's whole text; `filename` its name)."""
    return (context_spans(text, filename) + table_spans(text) + line_spans(text) + card_spans(text)
            + phrase_spans(text) + recovery_code_spans(text, filename))
