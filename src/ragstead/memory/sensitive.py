"""Finds secrets and personal data in text that is about to be remembered.

A finding blocks the write outright instead of redacting it; the detectors err on the side of blocking
(docs/design.md, "Memory").
"""

from __future__ import annotations

import math
import re
from collections import Counter

# (kind, pattern): kinds are reported to the user; the matched text never is.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("email address", re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")),
    ("phone number", re.compile(
        r"(?<![\w.-])(?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)[\s.-]?|\d{2,4}[\s.-])\d{3,4}[\s.-]\d{3,4}(?![\w-])"
        r"|(?<![\w+])\+\d{8,15}(?!\w)")),
    ("US social security number", re.compile(r"(?<!\d)\d{3}-\d{2}-\d{4}(?!\d)")),
    ("IBAN", re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){3,7}(?:[ ]?[A-Z0-9]{1,4})?\b")),
    ("IP address", re.compile(r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])")),
    ("wallet address", re.compile(r"\b0x[0-9a-fA-F]{40}\b")),
    ("postal address", re.compile(
        r"\b\d{1,5}\s+(?:[A-Z][a-z]+\s){1,3}(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|"
        r"Court|Ct|Way|Place|Pl)\b\.?")),
    ("date of birth", re.compile(r"\b(?:born (?:on|in)|date of birth|d\.?o\.?b\.?)\b", re.I)),
    ("government id", re.compile(
        r"\b(?:passport|driver'?s? licen[cs]e|social security|national id|tax id|ssn)\b.{0,25}\d", re.I)),
    ("health information", re.compile(
        r"\b(?:diagnosed with|my diagnosis|my medication|prescribed|my therapist|my illness)\b", re.I)),
    ("private key", re.compile(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----")),
    ("API key", re.compile(
        r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
        r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key id
        r"|\bAIza[0-9A-Za-z_-]{35}\b"  # Google
        r"|\bgh[pousr]_[A-Za-z0-9]{36,}\b|\bgithub_pat_[A-Za-z0-9_]{22,}"  # GitHub
        r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
        r"|\b[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"  # Stripe
        r"|\bglpat-[A-Za-z0-9_-]{20,}"  # GitLab
        r"|\brsk_[A-Za-z0-9_-]{20,}")),  # ragstead's own API keys
    ("access token", re.compile(
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"  # JWT
        r"|\bBearer\s+[A-Za-z0-9._~+/-]{16,}=*", re.I)),
    ("credentials in a URL", re.compile(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@", re.I)),
    ("password or secret", re.compile(
        r"\b(?:password|passwd|pwd|passphrase|secret|token|api[_ -]?key|access[_ -]?key|private[_ -]?key|"
        r"client[_ -]?secret|pin(?: code)?)\b\s*(?:is|was|=|:)\s*\S+"
        r"|\b(?:password|passwd|pwd|passphrase)\s+\S*\d\S*", re.I)),  # "password hunter2", not "password policy"
]
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def _random_looking(token: str) -> bool:
    """A long token of mixed letters and digits with high character entropy: a key, hash or token."""
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    return has_digit and has_alpha and _entropy(token) > 3.5


def find_sensitive(text: str) -> list[str]:
    """The kinds of secret or personal data in `text` (sorted, unique); [] when none was found."""
    kinds = {kind for kind, pattern in _PATTERNS if pattern.search(text)}
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group(0))
        if 13 <= len(digits) <= 19 and _luhn(digits):
            kinds.add("payment card number")
    if any(_random_looking(t) for t in _TOKEN.findall(text)):
        kinds.add("secret-looking token")
    return sorted(kinds)
