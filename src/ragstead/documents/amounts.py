"""Money amounts and dates a passage states, and a sheet row's columns: the data a sum or a count adds up.

- `amounts(text)`: every amount with its currency ("€1,250.00", "EUR 480.00", "£60", "73.40 euros"), where it
  stands in `text`. A number without a currency is not an amount (an invoice number, a year, kilometres).
- `dates(text)`: every calendar day it states ("20 March 2025", "March 20, 2025", "2025-03-20"), where it stands.
- `row_fields(line)`: a sheet row as the sheet readers write it (documents/formats/sheets.py: "date: 2025-03-03;
  shop: Lidl; amount (EUR): 38.90"), as {header: value}; `row_amount` and `row_date` read its money and its day
  from the columns whose header names them ("amount (EUR)", "total", "price"; "date", "paid on").

Written with the standard library (re, decimal, datetime): the forms above are the ones people's mail, notes
and sheets use; a locale-aware parser (babel's parse_decimal, dateparser) is not a dependency, and dateparser's
search over free text both slows an answer that reads every unit of a scope and finds "dates" in words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation

_SYMBOLS = {"€": "EUR", "£": "GBP", "$": "USD", "us$": "USD", "r$": "BRL"}
_CODES = ("EUR", "GBP", "USD", "CHF", "BRL", "CAD", "AUD", "JPY", "SEK", "NOK", "DKK", "PLN")
_WORDS = {"euro": "EUR", "euros": "EUR", "pound": "GBP", "pounds": "GBP", "dollar": "USD", "dollars": "USD"}
_NUMBER = r"\d{1,3}(?:[,.\u00a0 ]\d{3})+(?:[.,]\d{1,2})?|\d+(?:[.,]\d{1,2})?"
_CODE = "|".join(_CODES)
_BEFORE = re.compile(rf"(?P<cur>US\$|R\$|[€£$]|\b(?:{_CODE})\b)\s?(?P<num>{_NUMBER})(?![\d.,]?\d)", re.I)
_AFTER = re.compile(rf"(?<![\w.,])(?P<num>{_NUMBER})\s?(?P<cur>[€£]|\b(?:{_CODE}|euros?|pounds?|dollars?)\b)", re.I)
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH = r"(?P<month>" + "|".join(m[:3] + f"(?:{m[3:]})?" if len(m) > 3 else m for m in MONTHS) + r")\.?"
_DAY_MONTH = re.compile(rf"\b(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})\b", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})\b", re.I)
_ISO = re.compile(r"(?<![\d-])(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})(?![\d])")
_MONEY_HEADER = re.compile(r"\b(amount|total|price|cost|paid|sum|value|spent)\b|\((?:" + _CODE + r"|[€£$])\)", re.I)
_HEADER_CURRENCY = re.compile(r"\((?P<cur>" + _CODE + r"|[€£$])\)|\b(?P<code>" + _CODE + r")\b", re.I)
_DATE_HEADER = re.compile(r"^(date|day|when|paid on|paid|booked|ordered|on)\b", re.I)


@dataclass(frozen=True)
class Amount:
    """An amount of money a text states: its `value`, `currency` (ISO code) and where it stands."""

    value: Decimal
    currency: str
    start: int
    end: int


@dataclass(frozen=True)
class Day:
    """A calendar day a text states, and where it stands."""

    day: date
    start: int
    end: int


def parse_number(text: str) -> Decimal | None:
    """A number as people write amounts: "1,250.00", "1.250,00", "1 250", "480", "73,4". The last separator
    followed by one or two digits is the decimal point; the others group thousands."""
    raw = text.replace("\u00a0", " ").strip()
    found = re.fullmatch(r"(?P<int>\d{1,3}(?:[,. ]\d{3})+|\d+)(?:[.,](?P<dec>\d{1,2}))?", raw)
    if found is None:
        return None
    digits = re.sub(r"[,. ]", "", found["int"]) + ("." + found["dec"] if found["dec"] else "")
    try:
        return Decimal(digits)
    except InvalidOperation:
        return None


def _currency(mark: str) -> str:
    low = mark.lower()
    return _SYMBOLS.get(low) or _WORDS.get(low) or mark.upper()


def amounts(text: str) -> list[Amount]:
    """Every amount of money `text` states, in order; a number counts only with its currency beside it."""
    found: dict[int, Amount] = {}
    for pattern in (_BEFORE, _AFTER):
        for match in pattern.finditer(text):
            value = parse_number(match["num"])
            if value is None or any(a.start <= match.start() < a.end or match.start() <= a.start < match.end()
                                    for a in found.values()):
                continue
            found[match.start()] = Amount(value, _currency(match["cur"]), match.start(), match.end())
    return [found[start] for start in sorted(found)]


def _day(year: str, month: str, day: str) -> date | None:
    number = int(month) if month.isdigit() else next(
        (i for i, name in enumerate(MONTHS, start=1) if name.startswith(month.lower()[:3])), 0)
    try:
        return date(int(year), number, int(day))
    except ValueError:
        return None


def dates(text: str) -> list[Day]:
    """Every calendar day `text` states (day month year, month day year, ISO), in order."""
    found: dict[int, Day] = {}
    for pattern in (_DAY_MONTH, _MONTH_DAY, _ISO):
        for match in pattern.finditer(text):
            day = _day(match["year"], match["month"], match["day"])
            if day is not None and not any(d.start <= match.start() < d.end for d in found.values()):
                found[match.start()] = Day(day, match.start(), match.end())
    return [found[start] for start in sorted(found)]


def row_fields(line: str) -> dict[str, str] | None:
    """A sheet row's {header: value} ("date: 2025-03-03; shop: Lidl; ..."), or None for a line that is not one
    (fewer than two columns)."""
    parts = [part.split(": ", 1) for part in line.strip().split("; ")]
    if len(parts) < 2 or any(len(part) != 2 or not part[0].strip() for part in parts):
        return None
    return {key.strip(): value.strip() for key, value in parts}


def money_column(headers: Sequence[str]) -> str | None:
    """The column of a sheet that holds its money: a header with a currency ("amount (EUR)") first, then one
    named amount/total/price/cost/paid."""
    with_currency = [h for h in headers if _HEADER_CURRENCY.search(h) and _MONEY_HEADER.search(h)]
    named = [h for h in headers if _MONEY_HEADER.search(h)]
    return (with_currency or named or [None])[0]


def row_amount(fields: dict[str, str], column: str | None = None) -> tuple[Decimal, str | None] | None:
    """The amount of a row (its money column, or `column`) and its currency (from the header, "amount (EUR)", or
    the value, "€12.40"; None when neither says)."""
    column = column or money_column(list(fields))
    if column is None or column not in fields:
        return None
    stated = amounts(fields[column])
    if stated:
        return stated[0].value, stated[0].currency
    value = parse_number(fields[column])
    if value is None:
        return None
    marked = _HEADER_CURRENCY.search(column)
    return value, _currency(marked["cur"] or marked["code"]) if marked else None


def row_date(fields: dict[str, str]) -> date | None:
    """The day of a row: the first column whose header names a date and whose value is one."""
    for header, value in fields.items():
        if _DATE_HEADER.match(header.strip()):
            stated = dates(value)
            if stated:
                return stated[0].day
    return None


__all__: Sequence[str] = ["Amount", "Day", "amounts", "dates", "money_column", "parse_number", "row_amount",
                          "row_date", "row_fields"]
