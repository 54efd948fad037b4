"""E-mail with the standard library: an .eml is one message, an .mbox a mailbox of them.

A message is a part named "message: Subject" whose text starts with its From, To, Date and Subject lines;
each attachment a loader reads (PDF, DOCX, a sheet...) is a part of its own, "message: Subject > attachment
report.pdf", so a citation names the message it came with. The message's Date is the document's date (the
newest message's in an mbox), which `--date-from`/`--date-to` filter on. docs/design.md, "Mail", says why an
mbox stays one document.
"""

from __future__ import annotations

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


def _add_message(found: Parts, message: EmailMessage, label: str, budget: Meter, nested: Nested) -> None:
    headers = [f"{name}: {' '.join(str(message[name]).split())}" for name in _HEADERS if message[name] is not None]
    found.add(label, "\n".join([*headers, "", _body(message, nested)]), budget)
    for attachment in message.iter_attachments():
        budget.tick()
        name = attachment.get_filename()
        payload = attachment.get_payload(decode=True)
        if not name or not isinstance(payload, bytes):
            continue  # an attached message or a nameless part: nothing a loader is picked for
        text = nested(name, payload)
        if text:
            found.add(f"{label} > attachment {' '.join(name.split())[:200]}", text, budget, counted=True)


def _parse(data: bytes) -> EmailMessage:
    message = BytesParser(policy=policy.default).parsebytes(data)
    assert isinstance(message, EmailMessage)  # policy.default makes EmailMessage objects
    return message


def read_eml(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """One message: its subject is the title, its Date the document's date."""
    message = _parse(data)
    subject = _subject(message)
    found = Parts(title=subject or None, created_at=_date(message))
    _add_message(found, message, f"message: {subject or '(no subject)'}", budget, nested)
    return found


def read_mbox(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """Every message of an mbox (split at its `From ` lines), numbered; a message that does not parse is left
    out and the rest is indexed."""
    raw = [chunk for chunk in _MBOX_SEPARATOR.split(data) if chunk.strip()]
    check_count(len(raw), "messages", budget)
    found = Parts()
    dates = []
    for number, chunk in enumerate(raw, start=1):
        budget.tick()
        try:
            message = _parse(chunk)
            label = f"message {number}: {_subject(message) or '(no subject)'}"
            _add_message(found, message, label, budget, nested)
        except (ValueError, TypeError, LookupError, AttributeError):
            continue
        dates.append(_date(message))
    found.created_at = max((d for d in dates if d), default=None)
    return found
