"""Spreadsheets (.xlsx with openpyxl, .ods with lxml, .csv with the csv module): each sheet's rows, grouped
into parts named "sheet Inventory, row 2" (or "rows 2-9"), every row written with its header so a chunk reads
on its own: "Item: lamp; Qty: 4".

.ods is read by streaming content.xml with lxml (a row at a time, with the time budget ticking) rather than
with odfpy, which builds a DOM of the whole sheet first.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator

from ragstead.documents.formats.parts import Meter, Nested, Parts, open_zip
from ragstead.errors import UnsupportedFileError

_PART_CHARS = 1500  # rows per part: about a chunk's worth, so a citation names few rows
_MAX_COLUMNS = 1000  # a repeated empty column run ("16384 blank cells") is not data
_MAX_REPEAT = 1000
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"

Row = tuple[int, list[str]]  # (row number in the sheet, cell texts)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return " ".join(str(value).split())


def _column_name(index: int) -> str:
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(65 + rest) + name
    return f"column {name}"


def _add_sheet(found: Parts, sheet: str, rows: Iterable[Row], budget: Meter) -> None:
    """The sheet's rows as parts: the first non-empty row is the header, repeated into every row below it."""
    header: list[str] | None = None
    group: list[str] = []
    first = last = 0
    body = False

    def flush() -> None:
        if group:
            where = f"row {first}" if first == last else f"rows {first}-{last}"
            found.add(f"sheet {sheet}, {where}", "\n".join(group), budget)
            group.clear()

    for number, cells in rows:
        budget.tick()
        if not any(cells):
            continue
        if header is None:
            header = cells
            continue
        pairs = [f"{header[i] if i < len(header) and header[i] else _column_name(i)}: {value}"
                 for i, value in enumerate(cells) if value]
        line = "; ".join(pairs)
        if group and sum(map(len, group)) + len(line) > _PART_CHARS:
            flush()
        if not group:
            first = number
        body = True
        group.append(line)
        last = number
    if header is not None and not body:  # a sheet of one row (a header and nothing else) is still text
        found.add(f"sheet {sheet}, row 1", "; ".join(v for v in header if v), budget)
    flush()


def _trimmed(cells: list[str]) -> list[str]:
    while cells and not cells[-1]:
        cells.pop()
    return cells[:_MAX_COLUMNS]


def read_xlsx(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """Every worksheet's cell values (formulas as their last computed value)."""
    try:
        from openpyxl import load_workbook
    except ImportError:  # the `office` extra: the file is skipped with the reason, the run goes on (as for OCR)
        raise UnsupportedFileError(f"{budget.name}: an .xlsx needs pip install 'ragstead[office]' (openpyxl), "
                                   "skipped") from None

    book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    try:
        found = Parts(title=book.properties.title or None)
        for sheet in book.worksheets:
            # The sheet's declared size (`<dimension ref="A1:XFD1048576">`) is the file's word, not its data: with
            # it, or with a column bound, openpyxl pads every row, and every missing row between two that are
            # there, to that width (a 5 KB file: a million rows of 1,000 cells, 60 s). Without, a missing row is
            # an empty tuple and a row is as wide as its last cell.
            sheet.reset_dimensions()
            rows = ((number, _trimmed([_cell(v) for v in values[:_MAX_COLUMNS]]))
                    for number, values in enumerate(sheet.iter_rows(values_only=True), 1))
            _add_sheet(found, sheet.title, rows, budget)
    finally:
        book.close()
    return found


def _ods_rows(table, budget: Meter) -> Iterator[Row]:  # type: ignore[no-untyped-def]
    number = 0
    for row in table.iter(f"{_TABLE}table-row"):
        budget.tick()
        cells: list[str] = []
        for cell in row.iter(f"{_TABLE}table-cell", f"{_TABLE}covered-table-cell"):
            text = " ".join(" ".join(cell.itertext()).split())
            repeat = int(cell.get(f"{_TABLE}number-columns-repeated", "1") or 1)
            cells.extend([text] * (min(repeat, _MAX_REPEAT) if text else min(repeat, _MAX_COLUMNS)))
            if len(cells) >= _MAX_COLUMNS:
                break
        cells = _trimmed(cells)
        repeat = int(row.get(f"{_TABLE}number-rows-repeated", "1") or 1)
        for _ in range(min(repeat, _MAX_REPEAT) if any(cells) else 1):
            number += 1
            yield number, cells
        number += max(0, repeat - _MAX_REPEAT) if any(cells) else repeat - 1


def read_ods(data: bytes, budget: Meter, nested: Nested) -> Parts:
    """Every table of an OpenDocument spreadsheet, streamed from content.xml a table at a time."""
    from lxml import etree

    found = Parts()
    with open_zip(data) as archive, archive.open("content.xml") as content:
        for _, table in etree.iterparse(content, events=("end",), tag=f"{_TABLE}table", resolve_entities=False,
                                        no_network=True, huge_tree=False):
            _add_sheet(found, table.get(f"{_TABLE}name") or "1", _ods_rows(table, budget), budget)
            table.clear()
    return found


def read_csv(text: str, budget: Meter, nested: Nested) -> Parts:
    """A CSV (or TSV, by what the first lines look like) as one sheet named after nothing: "sheet 1"."""
    sample = text[:8192]
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = ((number, _trimmed([_cell(v) for v in values]))
            for number, values in enumerate(csv.reader(io.StringIO(text), dialect), start=1))
    found = Parts()
    _add_sheet(found, "1", rows, budget)
    return found
