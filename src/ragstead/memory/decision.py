"""Whether a piece of text deserves to be remembered, and where (USER or COMPANY memory).

Rule-based and explainable; blockers (secrets, transcripts, temporary context, questions) win over signals,
and a blocked decision carries no summary (docs/design.md, "Memory").
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ragstead.memory.sensitive import find_sensitive

WRITE_THRESHOLD = 0.6
MAX_MEMORY_CHARS = 500  # longer than a few sentences is a document or a transcript, not a fact
MAX_SUMMARY_CHARS = 200

Target = Literal["USER", "COMPANY"]


@dataclass(frozen=True)
class MemoryDecision:
    """The decision object: write or not, where, what, how sure, and why."""

    should_write: bool
    target: Target
    summary: str
    confidence: float
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_I = r"(?:I|i)"
_SIGNALS: list[tuple[Target, float, str, re.Pattern[str]]] = [
    ("USER", 0.9, "a personal preference", re.compile(
        rf"\b{_I}\s+(?:(?:really|strongly|generally|always|usually)\s+)?(?:prefer|like|love|hate|dislike|"
        rf"want|would rather)\b|\b{_I}'d rather\b|\bmy (?:favou?rite|preferred|preference)\b|"
        r"\bplease (?:always|never)\b|\b(?:call me|address me as)\b", re.I)),
    ("USER", 0.85, "a stable professional fact", re.compile(
        rf"\b{_I}(?:'m| am) (?:an? |the )?(?:[\w-]+ ){{0,3}}(?:engineer|developer|manager|designer|scientist|"
        r"analyst|lead|director|architect|researcher|consultant|administrator|admin|owner|founder|cto|ceo|"
        r"cfo|intern|student|writer|editor|lawyer|accountant|doctor|nurse|teacher|maintainer|on-?call)\b|"
        rf"\b{_I} work (?:at|for|on|as|in|with)\b|\b{_I}(?:'m| am) (?:responsible for|in charge of|based in)\b|"
        rf"\b{_I} (?:lead|manage|own|maintain|run)\b|\b{_I} speak\b|"
        r"\bmy (?:role|title|job|team|manager|time ?zone|working hours|stack|editor|os)\b", re.I)),
    ("USER", 0.7, "a personal habit", re.compile(
        rf"\b{_I} (?:always|never|usually|tend to|mostly)\b|\b{_I} use\b", re.I)),
    ("COMPANY", 0.85, "a team or project decision", re.compile(
        r"\b(?:we|our (?:team|company|org)|the (?:team|company))\s+(?:have\s+)?(?:decided|chose|agreed|"
        r"standardi[sz]ed|settled|switched|moved|migrated)\b", re.I)),
    ("COMPANY", 0.85, "a reusable learning", re.compile(
        r"\b(?:lessons? learned|we learned|learning:|takeaway:|post-?mortem|rule of thumb|best practice|"
        r"root cause)\b", re.I)),
    ("COMPANY", 0.8, "a team convention", re.compile(
        r"\b(?:we|our (?:team|company|org)|the (?:team|company))\s+(?:always|never|use|uses|require|requires|"
        r"deploy|deploys|prefer|prefers|run|runs|ship|ships)\b|\bour (?:stack|convention|policy|process|"
        r"standard|architecture|codebase|ci|pipeline|release process|deploys?|on-?call|style guide)\b|"
        r"\b(?:must|should) (?:always|never)\b|\b(?:company|team|org) (?:policy|convention|standard)\b", re.I)),
]
_TEMPORARY = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|right now|this (?:morning|afternoon|evening|week|weekend)|"
    r"at the moment|for now|for the moment|later today|in (?:a|an|\d+) (?:minute|hour)s?|next (?:hour|few minutes)|"
    r"remind me|this meeting|this call|just now)\b", re.I)
_HEDGE = re.compile(r"\b(?:maybe|perhaps|probably|i think|i guess|not sure|might|possibly)\b", re.I)
_SPEAKER_TURN = re.compile(r"^\s*(?:\[\d{1,2}:\d{2}(?::\d{2})?\]\s*)?[A-Z][\w .'-]{0,30}:\s+\S", re.M)
_QUESTION_START = re.compile(
    r"^\s*(?:who|what|when|where|why|how|which|is|are|do|does|did|can|could|should|would|will)\b", re.I)
_PREAMBLE = re.compile(
    r"^\s*(?:(?:please\s+)?(?:remember|note|keep in mind|don't forget)(?:\s+that)?|fyi|for the record|"
    r"just so you know|for future reference)\s*[:,-]?\s*", re.I)
_FIRST_PERSON = re.compile(rf"^{_I}(?:'m| am)\s+|^{_I}'d rather\s+|^{_I}\s+(?:(always|never|usually|really|"
                           r"generally|mostly|strongly)\s+)?(\w+)\b\s*")
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "would": "would", "can": "can", "will": "will"}


def decide(text: str) -> MemoryDecision:
    """The memory decision for `text` (a `remember` request or a question asked in `ask`)."""
    cleaned = " ".join(text.split())
    blockers = _blockers(text, cleaned)
    target, confidence, reasons = _target(cleaned)
    confidence = _discounted(cleaned, confidence, reasons)
    if blockers:
        return MemoryDecision(False, target, "", confidence, blockers + reasons)
    should_write = confidence >= WRITE_THRESHOLD
    if not should_write:
        reasons.append(f"confidence {confidence} is under the write threshold {WRITE_THRESHOLD}")
    return MemoryDecision(should_write, target, summarize(cleaned, target), confidence, reasons)


def _blockers(text: str, cleaned: str) -> list[str]:
    """Why `text` is never stored, whatever its confidence: secrets or personal data, a raw transcript, a
    document rather than a fact, temporary context, a question. `cleaned`: its whitespace collapsed."""
    blockers: list[str] = []
    sensitive = find_sensitive(text)
    if sensitive:
        blockers.append("contains " + ", ".join(sensitive) + ": secrets and personal data are never stored")
    if len(_SPEAKER_TURN.findall(text)) >= 2:
        blockers.append("looks like a raw transcript (speaker turns): only distilled facts are stored")
    if len(cleaned) > MAX_MEMORY_CHARS:
        blockers.append(f"longer than {MAX_MEMORY_CHARS} characters: a document or transcript, not one fact")
    if _TEMPORARY.search(cleaned):
        blockers.append("temporary context (refers to now, today, tomorrow...): it will not stay true")
    if cleaned.endswith("?") or (_QUESTION_START.match(cleaned) and not cleaned.endswith(".")):
        blockers.append("a question, not a fact")
    return blockers


def _target(cleaned: str) -> tuple[Target, float, list[str]]:
    """The memory file the text belongs in, the confidence the signals give (the strongest, plus a little for
    each other kind found) and the signals as reasons; with no signal, a low guess from whether it speaks of
    the user."""
    signals = [(target, weight, why) for target, weight, why, pattern in _SIGNALS if pattern.search(cleaned)]
    if not signals:
        target: Target = "USER" if re.search(r"\b(?:i|my)\b", cleaned, re.I) else "COMPANY"
        return target, 0.2, ["no preference, stable fact or reusable learning found"]
    best = max(weight for _, weight, _ in signals)
    target = next(t for t, w, _ in signals if w == best)
    confidence = best + 0.05 * (len({why for _, _, why in signals}) - 1)
    return target, confidence, [f"signal: {why}" for _, _, why in signals]


def _discounted(cleaned: str, confidence: float, reasons: list[str]) -> float:
    """The confidence less what hedging or a too-short text costs (each adds its reason), kept in 0 to 0.99."""
    if _HEDGE.search(cleaned):
        confidence -= 0.4
        reasons.append("hedged (maybe, probably...): not a stable fact")
    if len(cleaned.split()) < 4:
        confidence -= 0.3
        reasons.append("too short to stand on its own")
    return round(min(max(confidence, 0.0), 0.99), 2)


def summarize(text: str, target: Target) -> str:
    """One line for the memory file: preamble dropped, first person turned into a profile line."""
    text = _PREAMBLE.sub("", text).strip().rstrip(".!").strip()
    if target == "USER":
        text = _FIRST_PERSON.sub(_third_person, text, count=1)
        text = re.sub(r"^[Mm]y\s+", "", text)
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[: MAX_SUMMARY_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return (text[:1].upper() + text[1:] + ".") if text else ""


def _third_person(match: re.Match[str]) -> str:
    whole = match.group(0).lower()
    if whole.startswith(("i'm", "i am")):
        return "Is "
    if whole.startswith("i'd rather"):
        return "Would rather "
    adverb, verb = match.group(1), match.group(2).lower()
    if verb in _IRREGULAR:
        verb = _IRREGULAR[verb]
    elif re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        verb += "es"
    elif re.search(r"[^aeiou]y$", verb):
        verb = verb[:-1] + "ies"
    else:
        verb += "s"
    return f"{adverb} {verb} " if adverb else f"{verb} "
