"""E-mail with the standard library: an .eml is one message, an .mbox a mailbox of them.

Every message is a document of its own: its subject the title, its Date the document's date (which
`--date-from`/`--date-to` filter on), its text the From, To, Cc, Date and Subject lines and then the body, in a
part named "message: Subject" ("message 2: Subject" in an mbox), so a citation names the message. An .eml's
message is the file's document; an mbox's messages are documents inside it (`a.mbox#msg-…`, keyed by a hash of
the Message-ID, else by their number). Each attachment a loader reads (PDF, DOCX, a sheet...) is a document of
its own inside the same file (`#att-1`, `#msg-…-att-1`), cited "attachment report.pdf of message: Subject":
its path and its citation both lead back to the message. The sender and the recipients are tags
(`from:ana@example.org`, `to:bob@example.org` for To and Cc, lower-cased), so `--tag from:ana@example.org` filters
inside the store like any tag. docs/design.md, "Mail".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import getaddresses, parsedate_to_datetime
from typing import Any

from ragstead.documents.formats.parts import Meter, Nested, Parts, check_count

_HEADERS = ("From", "To", "Cc", "Date", "Subject")
_MBOX_SEPARATOR = re.compile(rb"^From [^\n]*\n", re.MULTILINE)
# The e-mail parser holds a message several times over (raw, each part decoded, the text): a 99 MB message peaked
# at 1.2 GB. 32 MiB holds a message with 25 MB of attachments (mail services' usual cap) in base64; a bigger one
# is read for its headers only, and says so in its text.
MAX_MESSAGE_BYTES = 32 << 20
_HEAD_BYTES = 1 << 20


def _date(message: EmailMessage) -> str | None:
    """The Date header as an ISO timestamp in UTC; None if unreadable."""
    try:
        when = parsedate_to_datetime(str(message["Date"]))
    except (TypeError, ValueError, IndexError):
        return None
    return utc_iso(when)


def utc_iso(when: datetime) -> str:
    """A moment as an ISO timestamp in UTC, to the second (a time without a zone is taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).replace(microsecond=0).isoformat()


def html_text(markup: str, nested: Nested) -> str:
    """An HTML body's text, scripts and styles left out."""
    tree = nested.html(markup)
    for node in tree.css("script, style"):
        node.decompose()
    root = tree.body or tree.root
    return root.text(separator="\n", strip=True) if root is not None else ""


def _body(message: EmailMessage, nested: Nested) -> str:
    """The plain-text body, else the HTML body's text."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    content = part.get_content()
    if not isinstance(content, str):
        return ""
    return html_text(content, nested) if part.get_content_subtype() == "html" else content


def _subject(message: EmailMessage) -> str:
    return one_line(str(message["Subject"] or ""))


def one_line(text: str) -> str:
    """A header as one line of at most 200 characters."""
    return " ".join(text.split())[:200]


ADDRESS_TAG_PREFIXES = ("from:", "to:")  # the tags address_tags makes: facets of a message, not topics


def address_tags(headers: list[tuple[str, str | None]]) -> list[str]:
    """`from:ADDR` for the From header's addresses and `to:ADDR` for To and Cc, lower-cased, each once: the
    message's people as tags, which every store already filters on (no new column in four stores)."""
    tags: list[str] = []
    for name, value in headers:
        prefix = {"From": "from:", "To": "to:", "Cc": "to:"}.get(name)
        if prefix and value:
            tags.extend(f"{prefix}{address.lower()}" for _, address in getaddresses([value]) if "@" in address)
    return list(dict.fromkeys(tags))


def message_document(headers: list[tuple[str, str | None]], body: str, attachments: Iterable[tuple[str | None, Any]],
                     label: str, key: str, date: str | None, budget: Meter, nested: Nested) -> Parts:
    """A message as a document: its header lines, then its body, in one part named `label`; each attachment
    (name, bytes) a loader reads a document of its own under `key`-att-N (an .eml's message has no key: its
    attachments are `att-N`), cited "attachment NAME of LABEL". Shared by .eml, .mbox and Outlook .msg."""
    subject = next((one_line(value) for name, value in headers if name == "Subject" and value), "")
    lines = [f"{name}: {' '.join(str(value).split())}" for name, value in headers if value]
    people = address_tags(headers)
    found = Parts(title=subject or None, created_at=date, tags=people)
    found.add(label, "\n".join([*lines, "", body]), budget)
    for name, payload in attachments:
        budget.tick()
        if not name or not isinstance(payload, bytes):
            continue  # an attached message or a nameless part: nothing a loader is picked for
        text = nested(name, payload)
        if text:
            shown = one_line(name)
            inside = Parts(title=shown, created_at=date, tags=list(people))
            inside.add(f"attachment {shown} of {label}", text, budget, counted=True)
            number = len(found.documents) + 1
            found.documents.append((f"{key}-att-{number}" if key else f"att-{number}", inside))
    return found


def _message(message: EmailMessage, label: str, key: str, budget: Meter, nested: Nested) -> Parts:
    headers = [(name, None if message[name] is None else str(message[name])) for name in _HEADERS]
    attachments = ((part.get_filename(), part.get_payload(decode=True)) for part in message.iter_attachments())
    return message_document(headers, _body(message, nested), attachments, label, key, _date(message), budget, nested)


def _parse(data: bytes) -> EmailMessage:
    """The message, or, past MAX_MESSAGE_BYTES, a message of its headers whose body says it was too large: its size
    is checked before the parser reads it."""
    if len(data) > MAX_MESSAGE_BYTES:
        return _headers_only(data)
    message = BytesParser(policy=policy.default).parsebytes(data)
    assert isinstance(message, EmailMessage)  # policy.default makes EmailMessage objects
    return message


def _headers_only(data: bytes) -> EmailMessage:
    head = BytesParser(policy=policy.default).parsebytes(data[:_HEAD_BYTES], headersonly=True)
    message = EmailMessage()
    for name in (*_HEADERS, "Message-ID"):
        if head[name] is not None:
            message[name] = str(head[name])
    message.set_content(f"(This message is {len(data) / (1 << 20):.0f} MiB, over the {MAX_MESSAGE_BYTES >> 20} MiB "
                        "a message may be: only its headers were read.)")
    return message


def read_eml(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """One message: the file's document, its attachments documents inside it."""
    message = _parse(data)
    return _message(message, f"message: {_subject(message) or '(no subject)'}", "", budget, nested)


def _key(message: EmailMessage, number: int, used: set[str]) -> str:
    """`msg-` and the Message-ID's hash, so a message keeps its path when others come or go; the message's
    number when it has none or shares it with an earlier copy."""
    message_id = " ".join(str(message["Message-ID"] or "").split())
    key = f"msg-{hashlib.sha256(message_id.encode('utf-8', 'replace')).hexdigest()[:12]}" if message_id else ""
    if not key or key in used:
        key = f"msg-n{number}"
    used.add(key)
    return key


def read_mbox(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """Every message of an mbox (split at its `From ` lines) as a document inside it, numbered; a message that
    does not parse is left out and the rest is indexed. The mailbox itself has no text of its own."""
    raw = [chunk for chunk in _MBOX_SEPARATOR.split(data) if chunk.strip()]
    check_count(len(raw), "messages", budget)
    found = Parts()
    used: set[str] = set()
    for number, chunk in enumerate(raw, start=1):
        budget.tick()
        try:
            message = _parse(chunk)
            key = _key(message, number, used)
            inside = _message(message, f"message {number}: {_subject(message) or '(no subject)'}", key, budget,
                              nested)
        except (ValueError, TypeError, LookupError, AttributeError):
            continue
        found.documents.append((key, inside))
        found.documents.extend(inside.documents)
        inside.documents = []
    return found
