"""E-mail with the standard library: an .eml is one message, an .mbox a mailbox of them.

Every message is a document of its own: its subject the title, its Date the document's date (which
`--date-from`/`--date-to` filter on), its text the From, To, Cc, Date and Subject lines and then the body, in a
part named "message: Subject" ("message 2: Subject" in an mbox), so a citation names the message. An .eml's
message is the file's document; an mbox's messages are documents inside it (`a.mbox#msg-…`, keyed by a hash of
the Message-ID, else by their number). Each attachment a loader reads (PDF, DOCX, a sheet...) is a document of
its own inside the same file (`#att-1`, `#msg-…-att-1`), cited "attachment report.pdf of message: Subject":
its path and its citation both lead back to the message. docs/design.md, "Mail".
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import parsedate_to_datetime

from ragstead.documents.formats.parts import Meter, Nested, Parts, check_count

_HEADERS = ("From", "To", "Cc", "Date", "Subject")
_MBOX_SEPARATOR = re.compile(rb"^From [^\n]*\n", re.MULTILINE)


def _date(message: EmailMessage) -> str | None:
    """The Date header as an ISO timestamp in UTC (a date without a zone is taken as UTC); None if unreadable."""
    try:
        when = parsedate_to_datetime(str(message["Date"]))
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).replace(microsecond=0).isoformat()


def _body(message: EmailMessage, nested: Nested) -> str:
    """The plain-text body, else the HTML body's text."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    content = part.get_content()
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        tree = nested.html(content)
        for node in tree.css("script, style"):
            node.decompose()
        root = tree.body or tree.root
        return root.text(separator="\n", strip=True) if root is not None else ""
    return content


def _subject(message: EmailMessage) -> str:
    return " ".join(str(message["Subject"] or "").split())[:200]


def _message(message: EmailMessage, label: str, key: str, budget: Meter, nested: Nested) -> Parts:
    """The message as a document, its readable attachments documents of their own under `key`-att-N (an .eml's
    message has no key: its attachments are `att-N`)."""
    subject, date = _subject(message), _date(message)
    headers = [f"{name}: {' '.join(str(message[name]).split())}" for name in _HEADERS if message[name] is not None]
    found = Parts(title=subject or None, created_at=date)
    found.add(label, "\n".join([*headers, "", _body(message, nested)]), budget)
    for attachment in message.iter_attachments():
        budget.tick()
        name = attachment.get_filename()
        payload = attachment.get_payload(decode=True)
        if not name or not isinstance(payload, bytes):
            continue  # an attached message or a nameless part: nothing a loader is picked for
        text = nested(name, payload)
        if text:
            shown = " ".join(name.split())[:200]
            inside = Parts(title=shown, created_at=date)
            inside.add(f"attachment {shown} of {label}", text, budget, counted=True)
            number = len(found.documents) + 1
            found.documents.append((f"{key}-att-{number}" if key else f"att-{number}", inside))
    return found


def _parse(data: bytes) -> EmailMessage:
    message = BytesParser(policy=policy.default).parsebytes(data)
    assert isinstance(message, EmailMessage)  # policy.default makes EmailMessage objects
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
