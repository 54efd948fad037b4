"""Small valid files of the formats people keep, made here (never downloaded), each holding a distinctive word."""

from __future__ import annotations

import io
import zipfile
from datetime import datetime
from email.message import EmailMessage


def make_epub(chapters: list[tuple[str, str]], title: str = "A Book") -> bytes:
    """An EPUB 3 with one XHTML file per (heading, paragraph) chapter."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        book.writestr("META-INF/container.xml",
                      '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                      'container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/'
                      'oebps-package+xml"/></rootfiles></container>')
        items = "".join(f'<item id="c{n}" href="text/c{n}.xhtml" media-type="application/xhtml+xml"/>'
                        for n in range(len(chapters)))
        spine = "".join(f'<itemref idref="c{n}"/>' for n in range(len(chapters)))
        book.writestr("OEBPS/content.opf",
                      '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                      f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title></metadata>'
                      f'<manifest>{items}</manifest><spine>{spine}</spine></package>')
        for n, (heading, body) in enumerate(chapters):
            book.writestr(f"OEBPS/text/c{n}.xhtml",
                          f'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>{heading}'
                          f"</title></head><body><h1>{heading}</h1><p>{body}</p></body></html>")
    return out.getvalue()


def make_pptx(slides: list[tuple[str, str]], notes: str = "") -> bytes:
    """A deck of title-and-content slides; `notes` on the last one."""
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = "Deck"
    for title, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    if notes:
        slide.notes_slide.notes_text_frame.text = notes
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def make_ods(sheets: dict[str, list[list[str]]]) -> bytes:
    """A minimal OpenDocument spreadsheet (content.xml only, as LibreOffice reads it)."""
    tables = []
    for name, rows in sheets.items():
        body = "".join("<table:table-row>" + "".join(
            f'<table:table-cell office:value-type="string"><text:p>{cell}</text:p></table:table-cell>'
            for cell in row) + "</table:table-row>" for row in rows)
        tables.append(f'<table:table table:name="{name}">{body}</table:table>')
    content = ('<?xml version="1.0" encoding="UTF-8"?><office:document-content '
               'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
               f'<office:body><office:spreadsheet>{"".join(tables)}</office:spreadsheet></office:body>'
               "</office:document-content>")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.spreadsheet")
        archive.writestr("content.xml", content)
        archive.writestr("META-INF/manifest.xml",
                         '<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:'
                         'xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type='
                         '"application/vnd.oasis.opendocument.spreadsheet"/></manifest:manifest>')
    return out.getvalue()


def make_message(subject: str, body: str, date: str, attachments: dict[str, bytes] | None = None,
                 sender: str = "Dana <dana@example.org>", to: str = "Sam <sam@example.org>") -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Date"], message["Subject"] = sender, to, date, subject
    message.set_content(body)
    for name, data in (attachments or {}).items():
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message


def make_mbox(messages: list[EmailMessage]) -> bytes:
    return b"".join(b"From dana@example.org Mon Mar  4 10:00:00 2024\n" + m.as_bytes() + b"\n" for m in messages)


def text_image(text: str, size: tuple[int, int] = (1100, 160)):  # type: ignore[no-untyped-def]
    """A picture of a line of text, as a phone photo of a whiteboard would hold (Pillow's built-in font)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).text((30, 50), text, fill="black", font=ImageFont.load_default(size=40))
    return image


def make_png(text: str) -> bytes:
    out = io.BytesIO()
    text_image(text).save(out, "PNG")
    return out.getvalue()


def make_heic(text: str) -> bytes:
    """A HEIC photo of text, as an iPhone saves it (pillow-heif's bundled encoder)."""
    import pillow_heif

    pillow_heif.register_heif_opener()
    out = io.BytesIO()
    text_image(text).save(out, "HEIF", quality=90)
    return out.getvalue()


def make_scanned_pdf(text: str) -> bytes:
    """A PDF whose one page is an image of text and has no text layer (what a scanner writes)."""
    out = io.BytesIO()
    text_image(text).save(out, "PDF")
    return out.getvalue()


def make_photo() -> bytes:
    """A JPEG with no text in it: a gradient."""
    from PIL import Image

    image = Image.linear_gradient("L").resize((320, 240)).convert("RGB")
    out = io.BytesIO()
    image.save(out, "JPEG")
    return out.getvalue()


def make_msg(subject: str, body: str, sent: datetime, attachments: dict[str, bytes] | None = None,
             sender: tuple[str, str] = ("Dana", "dana@example.org"), to: tuple[str, str] = ("Sam", "sam@example.org"),
             html: bool = False) -> bytes:
    """An Outlook .msg (MS-OXMSG): an OLE compound file written with extract-msg's own OleWriter, holding the
    message's string properties as `__substg1.0_<id>001F` streams, its times in `__properties_version1.0`, one
    recipient and each attachment in a storage of its own. `html`: the body only as PidTagHtml."""
    import struct

    from extract_msg.ole_writer import OleWriter

    def stamp(when: datetime) -> int:  # a FILETIME: 100 ns ticks since 1601
        return int((when.timestamp() + 11644473600) * 10_000_000)

    def properties(header: bytes, entries: list[tuple[int, int]]) -> bytes:
        return header + b"".join(struct.pack("<IIQ", tag, 6, value) for tag, value in entries)

    def strings(path: list[str], values: dict[int, str]) -> None:
        for pid, text in values.items():
            writer.addEntry([*path, f"__substg1.0_{pid:04X}001F"], text.encode("utf-16-le"))

    writer = OleWriter()
    writer.addEntry("__nameid_version1.0", storage=True)
    for stream in ("__substg1.0_00020102", "__substg1.0_00030102", "__substg1.0_00040102"):
        writer.addEntry(["__nameid_version1.0", stream], b"")
    strings([], {0x001A: "IPM.Note", 0x0037: subject, 0x0C1A: sender[0], 0x0C1F: sender[1], 0x5D01: sender[1],
                 0x0E04: to[0]})
    if html:
        writer.addEntry("__substg1.0_10130102", f"<html><body><p>{body}</p></body></html>".encode())
    else:
        strings([], {0x1000: body})
    files = attachments or {}
    header = b"\0" * 8 + struct.pack("<IIII", 1, len(files), 1, len(files)) + b"\0" * 8
    writer.addEntry("__properties_version1.0", properties(header, [(0x00390040, stamp(sent)),
                                                                   (0x0E060040, stamp(sent))]))
    recipient = "__recip_version1.0_#00000000"
    writer.addEntry(recipient, storage=True)
    strings([recipient], {0x3001: to[0], 0x3003: to[1], 0x39FE: to[1]})
    writer.addEntry([recipient, "__properties_version1.0"], properties(b"\0" * 8, [(0x0C150003, 1)]))
    for number, (name, data) in enumerate(files.items()):
        storage = f"__attach_version1.0_#{number:08X}"
        writer.addEntry(storage, storage=True)
        strings([storage], {0x3707: name, 0x3704: name})
        writer.addEntry([storage, "__substg1.0_37010102"], data)
        writer.addEntry([storage, "__properties_version1.0"], properties(b"\0" * 8, [(0x37050003, 1),
                                                                                     (0x0E200003, len(data))]))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
