"""The offline follow-up rewriter: a question that leans on the previous turn gets that turn's subject carried in.

"And the deposit?", "Who wrote it?", "What's the budget?" are searched on their own words otherwise, and answered
about something else or refused. The rule, measured on tests/data/conversations (`python -m bench chat`,
docs/benchmarks.md):

- A question is a **follow-up** when it opens with "and", "what about", ... , points back ("it", "there", "he",
  "that one"), is a bare question word ("Where?", "Why that one?"), or names nothing of its own (no name, number
  or acronym) in at most two content words ("What's the budget?"). Anything else names its own subject and is
  asked as typed: a follow-up that changes the subject is not polluted by the old one.
- A follow-up gets the previous turn's **subject**: the names the previous (rewritten) question held, the title of
  the document its answer cited first, and what was carried into it; a pronoun also gets the names of the previous
  answer's first sentence ("it" is often what was just answered).
- A fragment borrows the previous question's frame: "Where?" after "When does the book club meet?" is "Where does
  the book club meet?"; "And the deposit?" after "How much is the rent ...?" is "How much is the deposit ...";
  "And for Leo?" after "What could I get Mum for her birthday?" puts Leo where Mum was, and carries nothing else
  (a fragment that names its own subject switches to it).

Nothing here reads the index: the rewrite is the same whatever the documents, and `--json` shows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragstead.conversation.turns import Rewrite, Turn
from ragstead.retrieval.lexical_query import STOP_WORDS

MAX_CARRIED = 5  # subject items carried into one follow-up
MAX_CONTENT_WORDS = 2  # a question naming nothing with at most this many content words leans on the last turn

_WORD = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*", re.UNICODE)
_LEAD = re.compile(r"^\s*(?:(?:and|also|but|so|ok|okay|then|well)\b[\s,]*|(?:what|how)\s+about\b\s*)+", re.I)
_WH = ("how much", "how many", "how long", "how often", "how far", "how old", "what time", "what", "which", "who",
       "whom", "whose", "when", "where", "why", "how")
_AUX = ("is", "are", "was", "were", "do", "does", "did", "can", "could", "should", "will", "would", "has", "have",
        "had", "may", "must", "shall")
_WH_PHRASE = re.compile(rf"^\s*(?P<wh>{'|'.join(_WH)})\b(?:'s|’s)?(?:\s+(?P<aux>{'|'.join(_AUX)})\b)?", re.I)
_WH_WORDS = frozenset(w for phrase in _WH for w in phrase.split())
_BARE = re.compile(rf"^\s*(?:{'|'.join(_WH)}|how come)\b(?:\s+(?:that|this|the other)(?:\s+one)?|\s+then|"
                   r"\s+exactly|\s+so)?\s*[?.!]*\s*$", re.I)
_PRONOUN = re.compile(r"\b(?:it|its|it's|they|them|their|theirs|he|him|his|she|her|hers)\b|"
                      r"\b(?:that|this|the other|the same)(?:\s+one)?\s*[?.!]*\s*$|\b(?:that|this|the other) one\b|"
                      r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )(?<!\bbe )\bthere\b(?!\s+(?:is|are|was|were|be)\b)",
                      re.I)
# Words that say nothing about the subject: question fluff beside the lexical index's stop words.
_FLUFF = frozenset("""much many long often far old time get got need needs use used make made go goes going
    there's what's who's where's when's how's it's that's i'm i've i'd my me mine our ours us we you your any anything
    something thing things one ones please tell know exactly else still next last again""".split()) | STOP_WORDS
_TIME_WORDS = frozenset("""monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december today tomorrow yesterday""".split())
_SELF = frozenset(("i", "i'm", "i’m", "i've", "i’ve", "i'd", "i’d", "i'll", "i’ll"))
_DATE_BITS = re.compile(r"\(.*?\)|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}\s*[–-]\s*\d{1,2}\b\s*\w*\s*\d{0,4}")


@dataclass(frozen=True)
class _Question:
    """A question taken apart: its lead word ("and ...") removed, the names it holds, its content words."""

    body: str
    lead: bool
    names: tuple[str, ...]
    content: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> _Question:
        body = _LEAD.sub("", text).strip()
        lead = body != text.strip()
        words = [w.lower() for w in _WORD.findall(body)]
        return cls(body, lead, names_in(body), tuple(dict.fromkeys(w for w in words if _content(w))))


def _content(word: str) -> bool:
    return word not in _FLUFF and not word.isdigit() and len(word) > 1


def names_in(text: str) -> tuple[str, ...]:
    """The named things of `text`: runs of capitalised words and acronyms, with the numbers that follow one
    ("Project Atlas", "TBE", "March 25", "Weidenweg 12"); a possessive's 's dropped. A sentence's opening word is
    a name only as an acronym or as the start of a longer run ("Alta Via ..."), and a run of month and day names
    alone is a date, not a subject."""
    names = []
    for run in _runs(text):
        while run and run[0].lower() in _FLUFF:  # "The Overstory": the name is Overstory
            run = run[1:]
        if run and not all(w.lower() in _TIME_WORDS or w.isdigit() for w in run):
            names.append(" ".join(run))
    return tuple(dict.fromkeys(names))


def _runs(text: str) -> list[list[str]]:
    """The runs of name-like words of `text`; punctuation between two words ends a run."""
    found = list(_WORD.finditer(text))
    tokens = [re.sub(r"['’]s$", "", m.group(0)) for m in found]
    runs: list[list[str]] = []
    current: list[str] = []
    for i, word in enumerate(tokens):
        if current and text[found[i - 1].end():found[i].start()].strip():
            runs.append(current)
            current = []
        following = i + 1 < len(tokens) and tokens[i + 1][:1].isupper() and not text[
            found[i].end():found[i + 1].start()].strip()
        if _name_word(word, i, following, bool(current)):
            current.append(word)
        elif current:
            runs.append(current)
            current = []
    return [*runs, current] if current else runs


def _name_word(word: str, i: int, following: bool, in_run: bool) -> bool:
    """Whether `word` (the i-th of its text) belongs to a name: capitalised (the opening word only as an acronym or
    before another capitalised word: "Max 450 pages" names nothing), or a number or connector inside a run."""
    if word[:1].isupper() and len(word) > 1 and word.lower() not in _SELF:
        return i > 0 or (word.isupper() and len(word) > 1) or following
    if in_run and any(c.isdigit() for c in word):
        return True
    return in_run and following and word.lower() in ("of", "di", "de", "del", "von", "van", "am")


def follow_up_reason(question: str) -> str | None:
    """Why `question` leans on the previous turn, or None when it names its own subject."""
    q = _Question.of(question)
    if _BARE.match(q.body):
        return "a bare question word"
    pronoun = _PRONOUN.search(q.body)
    if pronoun and not (pronoun.group(0).lower() in ("her", "his", "he", "she", "him", "their", "its") and q.names):
        return f"it points back ({pronoun.group(0).strip(' ?.!').lower()})"
    if q.lead:
        return "it continues the last question"
    if not q.names and len(q.content) <= MAX_CONTENT_WORDS:
        return "it names nothing of its own"
    return None


def rewrite(question: str, history: Sequence[Turn]) -> Rewrite:
    """`question` as it should be searched after `history` (oldest first): as typed when it names its own
    subject or there is nothing to lean on, else with the previous turn's subject carried in."""
    recent = [t for t in history if t.rewrite.method != "memory"][-3:]
    previous = recent[-1] if recent else None
    if previous is None:
        return Rewrite(question, question, "none", (), "the first question")
    reason = follow_up_reason(question)
    if reason is None:
        return Rewrite(question, question, "none", (), "it names its own subject")
    q = _Question.of(question)
    frame, switched = _framed(q, _parallel(q, recent))
    if switched:  # the fragment names its own subject: the old one is replaced, not carried
        return Rewrite(question, _finish(frame), "carried", (), f"{reason}; its own subject replaces the last one")
    pointing = reason.startswith("it points back") or reason == "a bare question word"
    carried = _subject(previous, frame, pointing, {_title(t) for t in history})
    if not carried and frame == q.body:
        return Rewrite(question, question, "none", (), f"{reason}, but the last turn names nothing to carry")
    rewritten = _finish(frame) + (f" ({', '.join(carried)})" if carried else "")
    return Rewrite(question, rewritten, "carried", carried, reason)


def _finish(text: str) -> str:
    text = text.strip().rstrip("?.! ")
    return text[:1].upper() + text[1:] + "?"


def _core(turn: Turn) -> str:
    """The previous question as it was searched, without what was carried into it."""
    text = turn.rewritten
    if turn.rewrite.carried and text.endswith(")"):
        text = text[:text.rfind(" (")] if " (" in text else text
    return text


def _parallel(q: _Question, recent: Sequence[Turn]) -> Turn:
    """The earlier turn a fragment parallels: the recent question sharing most of its content words ("And my
    Spanish teacher?" parallels "Who is my guitar teacher?", not the lesson's price asked since); for a fragment
    that names something, the last question that named something ("And for Leo?" parallels "What could I get Mum
    ...?" across "When is it?"); else the last."""
    words = set(q.content)
    best = max(reversed(recent), key=lambda t: len(words & set(_Question.of(_core(t)).content)))
    if words & set(_Question.of(_core(best)).content):
        return best
    named = [t for t in recent if names_in(_core(t))] if q.names else []
    return named[-1] if named else recent[-1]


def _framed(q: _Question, previous: Turn) -> tuple[str, bool]:
    """The follow-up in the previous question's frame when it is a fragment; and whether it switched subject
    (a fragment naming its own thing)."""
    before = _core(previous)
    frame = _WH_PHRASE.match(before)
    if _BARE.match(q.body):
        asked = _WH_PHRASE.match(q.body)
        rest = before[frame.end():] if frame else " " + before
        tail = re.sub(r"^\s*\w+", "", q.body).strip(" ?.!") if asked else ""  # "that one" of "why that one?"
        word = asked.group("wh") if asked else q.body.strip(" ?.!")
        aux = f" {frame.group('aux')}" if frame and frame.group("aux") else ""
        return f"{word}{aux}{rest}".rstrip(" ?") + (f" ({tail})" if tail and not frame else ""), False
    words = [re.sub(r"['’](?:s|re|ve|d|ll)$", "", w.lower()) for w in _WORD.findall(q.body)]
    fragment = len(words) <= 6 and not set(words) & {*_WH_WORDS, *_AUX}  # "And the deposit?", not "And at what ..."
    if not fragment or not frame:
        return q.body, False
    if q.names:
        old = [n for n in names_in(before) if n.lower() not in q.body.lower()]
        noun = re.sub(r"^\s*(?:for|about|of|with|to|in|on|at)\s+", "", q.body).strip(" ?.!")
        if old:  # "And for Leo?" after "What could I get Mum ...": Leo where Mum was
            return before.replace(old[-1], noun, 1), True
        return f"{frame.group(0).strip()} {q.body}", True
    return f"{frame.group(0).strip()} {q.body}", False


def _subject(previous: Turn, frame: str, pointing: bool, titles: set[str | None]) -> tuple[str, ...]:
    """What of the previous turn names the conversation's subject, minus what the follow-up already says: the names
    carried into it go on, an earlier answer's document title gives way to the previous answer's (`titles`)."""
    items = [*names_in(_core(previous)), *(c for c in previous.rewrite.carried if c not in titles)]
    if pointing and not previous.refused:
        items += names_in(_first_sentence(previous.text))[:2]
    title = _title(previous)
    if title:
        items.append(title)
    elif not items:  # no name and no document (a client's history, a refusal): the last question's own words
        words = [w for w in _Question.of(_core(previous)).content if w not in frame.lower()]
        items += [" ".join(words)] if words else []
    said = frame.lower()
    kept: list[str] = []
    for item in items:
        low = item.lower()
        if low in said or any(low in k.lower() for k in kept):
            continue
        kept = [k for k in kept if k.lower() not in low] + [item]  # "Apartment – Weidenweg 12" holds "Weidenweg"
    return tuple(kept[:MAX_CARRIED])


def _first_sentence(text: str) -> str:
    return re.split(r"\[\d+\]|(?<=[.!?])\s", text, maxsplit=1)[0]


def _title(turn: Turn) -> str | None:
    """The subject the previous answer's first document is about: its title without dates and parentheses,
    else its file name's words ("car-log.txt": "car log")."""
    if turn.refused or not turn.sources or turn.kind in ("list", "count"):
        return None
    source = turn.sources[0]
    title = source.title or re.sub(r"[-_]+", " ", re.sub(r"\.\w+$", "", source.source.rsplit("/", 1)[-1]))
    title = re.sub(r"\b\d{4}( \d{2}){0,2}\b", "", title) if not source.title else _DATE_BITS.sub("", title)
    title = re.sub(r"\s+", " ", re.sub(r"[\s,–—:-]+$", "", title)).strip(" ,–—-:")
    return title or None


__all__ = ["MAX_CARRIED", "follow_up_reason", "names_in", "rewrite"]
