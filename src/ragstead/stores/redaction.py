"""`redact`: the one function that makes a store setting, or any text that may hold one, safe to print.

Every output that names a store goes through it (`StoreSpec.describe()`, `Store.stats()["path"]`, errors
that embed a spec or a driver's message, `KnowledgeBase.location`). It is re-exported by
`ragstead.stores.factory`; it lives in a module of its own so that the backends, which the factory
imports, can use it too without an import cycle.

What it masks, with `***`:

- URL user-info of any scheme (`postgresql://`, `postgres://`, `chroma+http://`, an unknown one): the
  password is everything between the first `:` after `://` and the *last* `@` before the next URL, so
  an unencoded `@`, `:`, `/`, `?`, `#` or space inside it is masked too;
- `name=value` pairs (URL query parameters and libpq key/value DSNs) whose name looks like a secret
  (`password`, `sslpassword`, `passwd`, `pwd`, `secret`, `token`, `key`, `auth`, ...), except the
  ones that name a file (`passfile`, `sslkey`, ...). A value runs to the next `&name=` or ` name=`
  (an unencoded `&` or space stays inside it), or is a 'quoted string';
- a setting the parser rejects that still looks like `something:password@host`.

Given the setting a message is about (`spec=`), it also masks that setting's secrets wherever the
message repeats them, and any quoted token of the message that holds a piece of one (drivers echo the
tail of a password they misparsed, e.g. `failed to resolve host 'ss@127.0.0.1'`).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"

# Parameters whose value is a file path, not a secret (libpq's names).
PATH_PARAMETERS = frozenset({"passfile", "sslkey", "sslcert", "sslrootcert", "sslcrl", "sslcrldir", "sslkeylogfile",
                             "service", "servicefile"})
_SECRET_WORDS = re.compile(r"pass|pwd|secret|token|key|auth|credential", re.I)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
# name=value: a name not glued to a longer word, an optional quoted value, else a value that runs until
# the next `&name=` / ` name=` (or the end), so an unencoded `&` or space cannot cut a password short.
_PAIR = re.compile(
    r"(?P<name>(?<![\w%.-])[A-Za-z_%][\w%.-]*)(?P<eq>\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|\"(?:[^\"\\]|\\.)*(?:\"|$)|.*?(?=[&\s]+[A-Za-z_%][\w%.-]*\s*=|$))",
    re.S,
)
_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")
_PIECES = re.compile(r"[@:/?#&=\s'\"]+")
# Shorter pieces of a password are too likely to match ordinary words of a message.
MIN_PIECE = 4


def is_secret_name(name: str) -> bool:
    """Whether a parameter called `name` holds a secret (a password, token or key, not a key file)."""
    plain = unquote(name).strip().lower()
    return plain not in PATH_PARAMETERS and bool(_SECRET_WORDS.search(plain))


def redact(text: str, spec: str | None = None) -> str:
    """`text` (a store setting, or a message that may hold one) with every secret replaced by ***.

    `spec`: the setting a message is about; its secrets are masked wherever the message repeats them.
    """
    text = str(text)
    if spec:
        text = _mask_known(text, secrets(spec))
    text = _PAIR.sub(_mask_pair, _mask_user_info(text))
    return _mask_bare_user_info(text)


def secrets(spec: str) -> list[str]:
    """The secrets a store setting holds (passwords and secret parameters), raw and percent-decoded."""
    found: list[str] = []
    for url in _urls(spec):
        password = _user_info_password(url)
        if password:
            found.append(password)
    for match in _PAIR.finditer(spec):
        if is_secret_name(match["name"]):
            found.append(_unquote_value(match["value"]))
    if _looks_like_bare_spec(spec) and (bare := _bare_password(spec)):
        found.append(bare)
    values = {v for s in found for v in (s, unquote(s)) if v and v != MASK}
    return sorted(values, key=len, reverse=True)


# -- the rules ---------------------------------------------------------------------------------------


def _urls(text: str) -> list[str]:
    """Each URL of `text`, from its scheme to the next URL's scheme (or the end)."""
    starts = [m.start() for m in _SCHEME.finditer(text)]
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=False)]


def _user_info_password(url: str) -> str | None:
    """The password of `scheme://user:password@host...`: from the first ':' to the last '@'."""
    rest = url.split("://", 1)[1]
    at = rest.rfind("@")
    if at < 0 or ":" not in rest[:at]:
        return None
    return rest[:at].split(":", 1)[1]


def _mask_user_info(text: str) -> str:
    out = [text[: m.start()] if (m := _SCHEME.search(text)) else text]
    for url in _urls(text):
        scheme, rest = url.split("://", 1)
        password = _user_info_password(url)
        if password is not None:
            user = rest.split(":", 1)[0]
            rest = f"{user}:{MASK}@{rest[rest.rfind('@') + 1:]}"
        out.append(f"{scheme}://{rest}")
    return "".join(out)


def _mask_pair(match: re.Match[str]) -> str:
    if not is_secret_name(match["name"]) or not match["value"] or match["value"] == MASK:
        return match[0]
    return f"{match['name']}{match['eq']}{MASK}"


def _unquote_value(value: str) -> str:
    if value[:1] in ("'", '"'):
        value = value[1:-1] if len(value) > 1 and value[-1] == value[0] else value[1:]
        value = re.sub(r"\\(.)", r"\1", value)
    return value


def _bare_password(text: str) -> str | None:
    """`prefix:password@host` without `://` (a setting the parser rejects, e.g. `postgresql:/u:pw@host`)."""
    at = text.rfind("@")
    head = text[:at]
    if at < 0 or ":" not in head:
        return None
    return head.split(":", 1)[1] or None


def _looks_like_bare_spec(text: str) -> bool:
    """Text that starts like a setting (`word:`) and holds no URL."""
    return "://" not in text and re.match(r"[A-Za-z][\w+.-]*:", text) is not None


def _mask_bare_user_info(text: str) -> str:
    """Only for text that looks like a bare setting (see above): mask from the first ':' to the last '@'."""
    if not _looks_like_bare_spec(text):
        return text
    at = text.rfind("@")
    if at < 0 or MASK in text[:at] or ":" not in text[:at]:
        return text
    return f"{text.split(':', 1)[0]}:{MASK}@{text[at + 1:]}"


def _mask_known(text: str, known: list[str]) -> str:
    """Mask each known secret wherever it appears, and each quoted token that holds a piece of one."""
    if not known:
        return text

    def quoted(match: re.Match[str]) -> str:
        token = match[1] if match[1] is not None else match[2]
        parts = [p for p in _PIECES.split(token) if len(p) >= MIN_PIECE]
        if (len(token.strip()) >= 2 and any(token.strip() in s for s in known)) or any(s in token for s in known) \
                or any(p in s for p in parts for s in known):
            return match[0][0] + MASK + match[0][-1]
        return match[0]

    text = _QUOTED.sub(quoted, text)
    for secret in known:  # longest first
        if len(secret) >= MIN_PIECE:
            text = text.replace(secret, MASK)
        else:  # a short one only as a whole word: it would garble the message otherwise
            text = re.sub(rf"(?<!\w){re.escape(secret)}(?!\w)", MASK, text)
    return text
