"""Outlook .msg (an OLE compound file) with extract-msg, the one kept Python library that reads its message,
recipients and attachments; an extra (`ragstead[mail]`) since it is GPL-3.0 and brings a dozen packages.

The message is the file's document and its attachments documents inside it (`#att-1`), exactly as an .eml's
(mail.message_document): From, To, Cc, Date and Subject lines, then the plain (else HTML) body.
"""

from __future__ import annotations

import io
import logging
from datetime import datetime
from typing import Any

from ragstead.documents.formats.mail import html_text, message_document, one_line, utc_iso
from ragstead.documents.formats.parts import Meter, Nested, Parts, check_count
from ragstead.errors import UnsupportedFileError

INSTALL = "an Outlook .msg needs pip install 'ragstead[mail]' (extract-msg)"
_QUIET = logging.NullHandler()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _body(message: Any, nested: Nested) -> str:
    """The plain body, else the HTML body's text (extract-msg turns an RTF-only body into neither)."""
    body = _text(message.body)
    if body is not None:
        return body
    html = message.htmlBody
    if isinstance(html, bytes):
        return html_text(html.decode("utf-8", "replace"), nested)
    return ""


def read_msg(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """One Outlook message: its subject the title, its sent date the document's date."""
    try:
        import extract_msg
        from extract_msg.enums import ErrorBehavior
    except ImportError:
        raise UnsupportedFileError(f"{budget.name}: {INSTALL}, skipped") from None

    logging.getLogger("extract_msg").addHandler(_QUIET)  # its warnings about odd files are no user's business
    # A stream, never the bytes: olefile takes a short bytes value for a file name to open.
    message = extract_msg.openMsg(io.BytesIO(data), strict=False, delayAttachments=True,
                                  errorBehavior=ErrorBehavior.ATTACH_SUPPRESS_ALL | ErrorBehavior.RTFDE)
    try:
        budget.tick()
        attachments = list(getattr(message, "attachments", None) or [])
        check_count(len(attachments), "attachments", budget)
        when = getattr(message, "date", None)
        date = utc_iso(when) if isinstance(when, datetime) else None
        subject = one_line(_text(getattr(message, "subject", None)) or "")
        headers = [("From", _text(getattr(message, "sender", None))), ("To", _text(getattr(message, "to", None))),
                   ("Cc", _text(getattr(message, "cc", None))), ("Date", date), ("Subject", subject)]
        files = ((_text(getattr(item, "longFilename", None)) or _text(getattr(item, "shortFilename", None)),
                  getattr(item, "data", None)) for item in attachments)
        return message_document(headers, _body(message, nested), files, f"message: {subject or '(no subject)'}", "",
                                date, budget, nested)
    finally:
        message.close()
