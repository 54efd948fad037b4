"""The one secret detector: where in a text a password, key or token sits, so it can be masked.

Index runs mask every span it finds in the chunk text before the chunk is stored (so no door, export or
prompt can show it), `remember` refuses text that holds one, and `guard` blocks a file that holds one.

It is detect-secrets (the maintained detector, with its false-positive filters; only on lines that name a
secret, since it costs ~0.2 ms a line) plus the project's own patterns for what it misses in prose: a
label followed by its value (`wifi password: ...`, `PIN is 1234`), key and token shapes (`github_pat_`,
`sk-...`, AWS keys, JWTs, private key blocks), the password of a URL, and long random-looking tokens, and
the rules of documents/secret_context.py, which read where a value sits as well as its shape (credential files
and headings, table columns, codes, cards, wallet phrases, recovery codes). Each span carries a kind a person can
read; the value itself is never reported.

A masked value reads `[secret]` (MASK) everywhere: not markdown (`***` was a rule or emphasis to every renderer,
and the answer's markdown stripper ate it to `*`), and the label before it stays ("Key: [secret]").
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from ragstead.documents.secret_context import context_rules, looks_secret

MASK = "[secret]"
# The detector's version, kept with each index (indexing/build.py): an index masked by an older one is told once
# that masking improved and how to apply it (`ragstead index --remask`). 1: the rules before issue #50.
DETECTOR_VERSION = 2
MASKING_IMPROVED = ("secret masking has improved (credential files and headings, tables, codes and PINs, cards, "
                    "wallet phrases, recovery codes; headings, titles and tags too): `ragstead index --remask` "
                    "applies it, embedding again only the chunks whose text changes")


@dataclass(frozen=True)
class SecretSpan:
    """A secret's place in a text: `text[start:end]` is the value to hide."""

    start: int
    end: int
    kind: str


_LABEL = (r"(?:wi-?fi\s+)?(?:password|passwd|pwd|passphrase|passcode|passkey|pass\s?word|pin(?:\s?code)?|puk|"
          r"secret(?:[_ -]?(?:access[_ -]?)?key)?|token|api[_ -]?key|access[_ -]?key(?:[_ -]?id)?|"
          r"private[_ -]?key|client[_ -]?secret|login|credentials?|mot de passe|passwort|contraseña|"
          r"memorable\s+(?:word|information|info|phrase|date|answer)|security\s+(?:answer|question\s+answer)|"
          r"maiden\s+name(?:\s+answer)?|(?:wi-?fi|network|wpa2?)\s+key|unlock\s+(?:words|phrase)|"
          r"seed\s+(?:words|phrase)|recovery\s+phrase)")
# `label: value` / `label = value` hides the rest of the line (a passwords file: `Netflix: me@x.com / pw`);
# `label is value` one word, so prose around it stays readable.
_LABELLED_LINE = re.compile(rf"^[ \t>*#+\d.)-]*[\w \t'’&/@.-]{{0,40}}?(?<![A-Za-z0-9-]){_LABEL}"
                            r"(?:\s*\([^)\n]{0,30}\))?[ \t]*[:=][ \t]*(?P<value>[^\s].*?)[ \t]*$", re.I | re.M)
_LABELLED_WORD = re.compile(rf"(?<![A-Za-z0-9-]){_LABEL}\s+(?:is|was|are|were)\s*:?\s+"
                            r"(?P<value>[\"']?[^\s\"']*\d[^\s\"']*|\"[^\"\n]+\"|'[^'\n]+'|[^\s.,;]{6,})", re.I)
# `label: value` / `label=value` inside a line: one word.
_LABELLED_TOKEN = re.compile(rf"(?<![A-Za-z0-9-]){_LABEL}[\"']?[ \t]*[:=][ \t]*"
                             r"(?P<value>[\"'][^\"'\n]+[\"']|[^\s\"'`]+)", re.I)
# "I set the router's new password to Figs&5", "Password for the NAS — Quokka!2": the label, a few words of what it
# is for, a connector, then a value that looks like a password (`password to access the portal` is none).
_LABELLED_PROSE = re.compile(rf"(?<![A-Za-z0-9-]){_LABEL}(?:\s+(?:for|of|on|at)\s+(?:the\s+|my\s+|our\s+)?"
                             r"[\w'’-]+(?:\s+[\w'’-]+)?)?\s*(?:\s(?:is|was|to|now)|[—–=:]|\s-)\s*(?P<value>\S+)", re.I)
# `password hunter2`: a word with a digit right after the label (`password policy` is no password).
_PASSWORD_WORD = re.compile(r"(?<![A-Za-z0-9-])(?:password|passwd|pwd|passphrase)\s+(?P<value>[^\s]*\d[^\s]*)", re.I)
# Shapes whose every match is a secret, with a kind each.
KEY_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<![A-Za-z0-9])sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}|(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{22,}"),
     "API key"),
    (re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])[rs]k_(?:live|test)_[0-9A-Za-z]{16,}"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])rsk_[A-Za-z0-9_-]{20,}"), "API key"),
    (re.compile(r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), "access token"),
    (re.compile(r"(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*", re.I), "access token"),
    (re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY"
                r"(?: BLOCK)?-----|\Z)", re.S), "private key"),
)
# Each key shape's fixed text (one must occur for the shape to match), in KEY_PATTERNS' order.
_KEY_LITERALS: tuple[tuple[str, ...], ...] = (
    ("sk-",), ("AIza",), ("hf_",), ("AKIA", "ASIA"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ("xox",), ("_live_", "_test_"), ("glpat-",), ("rsk_",), ("eyJ",), ("Bearer ", "bearer ", "BEARER "),
    ("PRIVATE KEY",),
)
# Words that name a secret; the label rules read only the lines that hold one.
_LABEL_WORDS = re.compile(r"pass|pwd|pin|puk|secret|token|key|login|credential|memorable|maiden|security|unlock|seed|"
                          r"recovery|mot de passe|passwort|contraseña", re.I)
# scheme://user:PASSWORD@host: the password runs from the first ':' after the user to the last '@' before the
# host, so `! & # %21 @ :` inside it are hidden too.
# `redis://:PASSWORD@host` has no user.
URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:(?P<value>[^\s]*)@[^\s@/]+")
# Long base64/hex-like runs (a key wrapped over lines, a token without a label).
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/=_-])")
_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
# Lines worth detect-secrets' time: they name a secret or look like an assignment of a key.
_WORTH_SCANNING = re.compile(r"(?:pass|pwd|secret|token|key|auth|cred|api|private)[\w.-]*[\"']?\s*(?::|=|=>)|://", re.I)
# detect-secrets' types in the words the other rules use.
_KINDS = {"Basic Auth Credentials": "credentials in a URL", "Private Key": "private key",
          "JSON Web Token": "access token"} | {name: "API key" for name in (
    "AWS Access Key", "GitHub Token", "GitLab Token", "Slack Token", "Stripe Access Key", "OpenAI Token",
    "Azure Storage Account access key", "Discord Bot Token", "Mailchimp Access Key", "NPM tokens",
    "SendGrid API Key", "Square OAuth Secret", "Twilio API Key", "Artifactory Credentials", "IBM Cloud IAM Key",
    "PyPI upload token", "Telegram Bot Token")}
MIN_VALUE = 3  # shorter values are detect-secrets' group fragments (`ghp`), not secrets


def _label_lines(text: str) -> Iterator[tuple[int, str]]:
    """(offset, line) of each line of `text` holding a word that names a secret, once each."""
    end = -1
    for match in _LABEL_WORDS.finditer(text):
        if match.start() < end:
            continue
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        end = len(text) if end < 0 else end
        yield start, text[start:end]


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(c / len(token) * math.log2(c / len(token)) for c in counts.values())


def random_looking(token: str) -> bool:
    """A long token of mixed letters and digits with high character entropy: a key or token (a hex digest,
    a commit id or a checksum, is left alone)."""
    if _HEX_DIGEST.fullmatch(token) or ("/" in token.strip("/") and token.count("/") > 2 and "." in token):
        return False
    part = max(re.split(r"[-_./]", token), key=len)  # the longest run between separators is what must look random
    if len(part) < 12:
        return False  # words joined by separators (`all-MiniLM-L6-v2-onnx-int8`), not one random run
    if _wordish(part):
        return False  # a chemical, gene or haplotype name: "phosphatidylinositol-3-OH", "Gln356Pro871Glu1038"
    has_digit = any(c.isdigit() for c in token)
    has_alpha = any(c.isalpha() for c in token)
    has_case = any(c.isupper() for c in token) and any(c.islower() for c in token)
    return has_digit and has_alpha and has_case and _entropy(token) > 3.5


def _wordish(part: str) -> bool:
    """Letters in word-shaped runs between the digits (lower, UPPER or Capitalised, three letters or more on
    average), as names are written; a key's letters change case inside short runs ("wJalrXUtn", "Zx81kQp0")."""
    runs = re.findall(r"[A-Za-z]+", part)
    if not runs or sum(map(len, runs)) / len(runs) < 3:
        return False
    return all(run.islower() or run.isupper() or (run[0].isupper() and run[1:].islower()) for run in runs)


def _labelled(text: str) -> list[SecretSpan]:
    """The values after a label that names a secret, on the lines that hold one (most lines cost one cheap scan)."""
    spans: list[SecretSpan] = []
    for offset, line in _label_lines(text):
        for pattern in (_LABELLED_LINE, _LABELLED_TOKEN, _LABELLED_WORD, _PASSWORD_WORD):
            for match in pattern.finditer(line):
                value = match["value"].strip("\"'").rstrip(";,")  # a spreadsheet row's `; ` ends the value
                if len(value) >= MIN_VALUE - 1 and not value.startswith(MASK):
                    start = offset + match.start("value") + match["value"].find(value)
                    spans.append(SecretSpan(start, start + len(value), "password or secret"))
        for match in _LABELLED_PROSE.finditer(line):
            if looks_secret(match["value"]) and not match["value"].startswith(MASK):
                value = match["value"].strip("\"'.,;")
                start = offset + match.start("value") + match["value"].find(value)
                spans.append(SecretSpan(start, start + len(value), "password or secret"))
    return spans


def find_secrets(text: str, filename: str = "notes.txt", *, context: bool = True) -> list[SecretSpan]:
    """The secret spans of `text`, sorted and merged (overlapping spans become one). `filename` picks
    detect-secrets' parsers (a `.env` or `.yaml` file reads `key: value` lines as assignments) and says whether
    the file holds credentials; `context=False` reads shapes and labels only (a file's name is no document)."""
    spans = _labelled(text)
    for (pattern, kind), literals in zip(KEY_PATTERNS, _KEY_LITERALS, strict=True):
        if any(literal in text for literal in literals):  # a shape's fixed part first: most texts have none
            spans += [SecretSpan(m.start(), m.end(), kind) for m in pattern.finditer(text)]
    for match in URL_PASSWORD.finditer(text):
        value = match["value"]
        if value and not value.startswith(MASK) and value.lower() not in ("password", "pass", "secret"):
            # The password ends at the last '@' before the host: `[^\s]*` took it greedily, up to it.
            spans.append(SecretSpan(match.start("value"), match.end("value"), "credentials in a URL"))
    spans += [SecretSpan(m.start(), m.end(), "secret-looking token") for m in _TOKEN.finditer(text)
              if random_looking(m.group(0))]
    spans += [SecretSpan(start, end, "base64-encoded key") for start, end in base64_blocks(text)]
    spans += _detect_secrets(text, filename)
    if context:
        spans += [SecretSpan(start, end, kind) for start, end, kind in context_rules(text, filename)]
    return _merged([span for span in spans if text[span.start:span.end] != MASK])


# A key wrapped over lines without its PEM header: two or more lines of nothing but base64.
_BASE64_BLOCK = re.compile(r"(?m)^[ \t]*[A-Za-z0-9+/]{40,}={0,2}[ \t]*(?:\r?\n[ \t]*[A-Za-z0-9+/]{16,}={0,2}[ \t]*)+$")


def base64_blocks(text: str) -> list[tuple[int, int]]:
    """Where `text` holds an unquoted base64 block (a key body wrapped over lines) that looks random."""
    return [(m.start(), m.end()) for m in _BASE64_BLOCK.finditer(text)
            if random_looking("".join(m.group(0).split())[:64])]


def secret_kinds(text: str) -> list[str]:
    """The kinds of secret in `text` (sorted, unique); [] when none."""
    return sorted({span.kind for span in find_secrets(text)})


def mask(text: str, spans: list[SecretSpan], offset: int = 0) -> str:
    """`text` with every span (positions relative to `offset`, the start of `text` in the document) replaced
    by MASK. Spans outside `text` are ignored; a span cut by its edge is masked up to the edge."""
    out, at = [], 0
    for span in spans:
        start, end = max(span.start - offset, 0), min(span.end - offset, len(text))
        if end <= at or start >= len(text):
            continue
        start = max(start, at)
        out += [text[at:start], MASK]
        at = end
    out.append(text[at:])
    return "".join(out)


def mask_secrets(text: str) -> str:
    """`text` with every secret it holds replaced by MASK."""
    return mask(text, find_secrets(text))


def mask_field(value: str | None, known: list[str] = ()) -> str | None:  # type: ignore[assignment]
    """A short field shown beside a document's text (a heading path, a title, a subject, a tag) with its secrets
    masked: what the detector finds in it, and each value `known` from the document's text wherever it recurs."""
    if not value:
        return value
    for secret in sorted(set(known), key=len, reverse=True):
        if len(secret) >= MIN_VALUE and secret != MASK:
            value = value.replace(secret, MASK)
    return mask_secrets(value)


# A file that is mostly credentials (a passwords file, a table of logins, a list of codes) is cited, never quoted:
# what masking missed in it (a username, a hint, a password in no known shape) would be quoted beside the masks.
MOSTLY_CREDENTIALS = 0.5  # of its lines hold a secret
MIN_CREDENTIALS = 3
# No flag named in it: "reveal … secrets" in a chunk reads as a prompt injection to answer/screening.py.
_NOTICE = "{name} holds {count} secrets ({labels}), masked in every output; open the file on this machine to read them."
_HEADING_OR_RULE = re.compile(r"^\s*(?:#{1,6}\s|\|?\s*:?-{3,})")
_LABEL_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")


def credentials_notice(text: str, spans: list[SecretSpan], name: str) -> str | None:
    """The one text a file that is mostly credentials is stored as (None for any other file): its name, how many
    secrets it holds and what they are for (the words before each value: "amazon", "Netflix", "Alarm code"), so a
    question about one still finds it; never a value, nor a line's other words (a username, a hint)."""
    if len(spans) < MIN_CREDENTIALS:
        return None
    lines, holding, labels = 0, 0, []
    at = 0
    for line in text.splitlines(keepends=True):
        start, at = at, at + len(line)
        inside = [s for s in spans if s.start < at and s.end > start]
        if not line.strip():
            continue
        if _HEADING_OR_RULE.match(line):
            labels.append(_words(line))
            continue
        lines += 1
        if inside:
            holding += 1
            labels.append(_words(text[start:max(start, inside[0].start)]))
        elif len(_words(line).split()) >= 2:  # a title, a table's header row; a lone word may be a password missed
            labels.append(_words(line))
    if holding < MOSTLY_CREDENTIALS * lines:
        return None
    named = "; ".join(dict.fromkeys(label for label in labels if label))
    return _NOTICE.format(name=name, count=len(spans), labels=named or "no labels")


def _words(text: str) -> str:
    """The plain words of a label: no address, number, username or anything else with a digit or a sign in it."""
    tokens = (token.strip(".,:;|()[]#*-–—/\"'") for token in text.split())
    return " ".join(token for token in tokens if _LABEL_WORD.fullmatch(token))


def reveal_notice(text: str, name: str, original: str) -> str:
    """`text` with a credentials file's notice (`credentials_notice`) given back as the file's own text. For the
    owner's own terminal only (`--reveal-secrets`)."""
    pattern = re.compile(re.escape(name) + r" holds \d+ secrets \(.*?\), masked in every output; open the file on "
                         r"this machine to read them\.", re.S)
    return pattern.sub(lambda _: original, text)


def _detect_secrets(text: str, filename: str) -> list[SecretSpan]:
    from detect_secrets.core.scan import _process_line_based_plugins
    from detect_secrets.settings import default_settings

    starts, lines = [], []
    at = 0
    for line in text.splitlines(keepends=True):
        starts.append(at)
        lines.append(line.rstrip("\r\n"))
        at += len(line)
    wanted = [(n, line) for n, line in enumerate(lines, start=1) if _WORTH_SCANNING.search(line)]
    if not wanted:
        return []
    spans = []
    with default_settings():
        for secret in _process_line_based_plugins(wanted, filename=filename):
            value = secret.secret_value or ""
            line = lines[secret.line_number - 1]
            where = line.find(value) if len(value) >= MIN_VALUE else -1
            if where >= 0:
                start = starts[secret.line_number - 1] + where
                spans.append(SecretSpan(start, start + len(value), _KINDS.get(secret.type, "password or secret")))
    return spans


def _merged(spans: list[SecretSpan]) -> list[SecretSpan]:
    out: list[SecretSpan] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if out and span.start <= out[-1].end:
            last = out[-1]
            out[-1] = SecretSpan(last.start, max(last.end, span.end), last.kind)
        else:
            out.append(span)
    return out


# The words before a MASK that identify it when it is given back (enough to be unique in one document).
_REVEAL_CONTEXT = 24


def reveal(text: str, original: str) -> str:
    """`text` (quoting the masked form of `original`, a document's text) with each MASK that masking put there
    given back its value. For the owner's own terminal only (`--reveal-secrets`); never a server's output."""
    spans = find_secrets(original)
    if not spans or MASK not in text:
        return text
    for span in reversed(spans):  # the last first: the masks before a secret still match their context
        at = mask(original[: span.start], spans)  # the masked text before this secret
        words = at[-_REVEAL_CONTEXT:].split()
        value = original[span.start : span.end]
        # The longest run of the words before it that the text quotes (an answer may quote one line of a file);
        # two words at least, so a bare "key: [secret]" is not taken for another secret's place.
        for count in range(len(words), min(2, len(words)) - 1, -1):
            pattern = re.compile(r"\s+".join(re.escape(w) for w in words[-count:]) + r"(\s*)" + re.escape(MASK))
            text, found = pattern.subn(lambda m, v=value: m.group(0)[: -len(MASK)] + v, text)
            if found:
                break
    return text
