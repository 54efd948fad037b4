"""Analytics rows -> dossiers: one markdown dossier per result row (or per value of a group column) of a
read-only query (sql_rows.py), written to `artifacts/dossiers/<user>/<name>.md` with front matter.

Row values are untrusted: the front matter is written here (one JSON-quoted line per field), never by the
template, and every `{{ value }}` a template prints is made a one-line markdown-safe string, so no value can
add a front matter key, start a heading or break a table. Templates run in Jinja2's sandbox.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from datetime import time as day_time
from decimal import Decimal
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from ragstead.core.atomic import make_private_folder, write_text_atomically
from ragstead.filters import USER_SLUG
from ragstead.ingest.archive import sanitize_title
from ragstead.ingest.base import SourceError, utc_now
from ragstead.ingest.sql_rows import DataSource, Limits, check_read_only_statement, fetch_rows, parse_source, scrubbed

DOSSIER_FOLDER = ("artifacts", "dossiers")
DEFAULT_TABLE_ROWS = 50
MAX_TEMPLATE_BYTES = 1_000_000


# -- the result ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SkippedRow:
    """A result row that made no dossier: `row` is its 1-based position in the query's result."""

    row: int
    reason: str


@dataclass
class DossierRun:
    """What `render_dossiers` did. Paths are POSIX and relative to the project root."""

    source: str  # the source URL without its password
    query_hash: str
    rows: int  # rows the query returned
    written: list[str] = field(default_factory=list)  # new or changed dossiers
    unchanged: list[str] = field(default_factory=list)  # identical to the file already there: not rewritten
    skipped: list[SkippedRow] = field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        """Every dossier this run stands behind (written or unchanged): what the indexer should look at."""
        return [*self.written, *self.unchanged]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "query_hash": self.query_hash,
            "rows": self.rows,
            "written": list(self.written),
            "unchanged": list(self.unchanged),
            "skipped": [asdict(s) for s in self.skipped],
        }


# -- values as markdown -------------------------------------------------------------------------------------

_LINE_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
# A value that would start a markdown block if a template put it at the start of a line: heading, quote,
# list item, fence, thematic break or setext underline, link reference definition.
_BLOCK_START = re.compile(r"^(?:#|>|[-+*](?:\s|$)|\d{1,9}[.)](?:\s|$)|`{3}|~{3}|[-=*_](?:\s*[-=*_]){2,}\s*$"
                          r"|\[[^\]]*\]:)")


def display(value: Any) -> str:
    """A value as plain text: None empty, floats to 10 significant digits, dates ISO, containers as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, datetime | date | day_time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, list | tuple | dict | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return json.dumps(items, default=display, ensure_ascii=False)
    return str(value)


def markdown_inline(value: Any) -> str:
    """A value made safe anywhere in a markdown line: one line (line breaks become spaces, control characters
    go), backslash, `|` and `<` escaped (tables and HTML), and a leading block marker escaped."""
    if isinstance(value, Paragraphs):
        return str(value)
    text = _LINE_BREAKS.sub(" ", display(value))
    text = _CONTROL.sub("", text).strip()
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "\\<")
    return "\\" + text if _BLOCK_START.match(text) else text


class Paragraphs(str):
    """A multi-line value each of whose lines went through `markdown_inline`: the `paragraphs` filter's output,
    for free text printed in the body (not inside a table)."""


def _paragraphs(value: Any) -> Paragraphs:
    lines = _LINE_BREAKS.sub("\n", display(value).replace("\r\n", "\n")).split("\n")
    return Paragraphs("\n".join(markdown_inline(line) for line in lines).strip("\n"))


def _short(value: Any, limit: int = 120) -> str:
    text = display(value)
    return text if len(text) <= limit else text[: max(1, limit - 1)].rstrip() + "…"


# -- grouping and summaries -------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    if isinstance(value, Decimal):
        return value.is_finite()
    return not isinstance(value, float) or math.isfinite(value)


def summarize(rows: list[dict[str, Any]], columns: list[str]) -> dict[str, dict[str, Any]]:
    """count/min/max/mean/sum of each column whose non-null values are all numbers (booleans are not)."""
    summary: dict[str, dict[str, Any]] = {}
    for name in columns:
        values = [row[name] for row in rows if row[name] is not None]
        if not values or not all(_is_number(v) for v in values):
            continue
        finite = [v for v in values if _finite(v)]
        if not finite:
            continue
        total = sum(finite)
        mean = total / len(finite)
        summary[name] = {"count": len(finite), "min": min(finite), "max": max(finite), "sum": total,
                         "mean": float(mean) if isinstance(mean, float) else mean}
    return summary


def _constant_columns(rows: list[dict[str, Any]], columns: list[str]) -> list[str]:
    return [c for c in columns if all(row[c] == rows[0][c] for row in rows[1:])]


# -- file names ---------------------------------------------------------------------------------------------

_WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)), *(f"lpt{i}" for i in range(1, 10))}


def dossier_name(key: Any) -> str:
    """A group key as a file stem: sanitized like archive titles (no separators, traversal, hidden dots,
    control characters; length-capped; Unicode-safe), plus a short hash of the key whenever sanitizing changed
    it, so two keys never share a file."""
    text = display(key) if key is not None else ""
    name = sanitize_title(text)
    if name != text or key is None or name in _WINDOWS_RESERVED:
        digest = hashlib.sha256(("\x00none" if key is None else text).encode("utf-8", "surrogatepass")).hexdigest()
        name = f"{name}-{digest[:8]}"
    return name


# -- templates ----------------------------------------------------------------------------------------------

DEFAULT_TEMPLATE = """\
# {{ title }}

{% for name in key_columns if row[name] is not none %}
- **{{ name }}**: {{ row[name] | short(200) }}
{% endfor %}
- **rows**: {{ row_count }}
{% if numeric and row_count > 1 %}

## Summary

| column | count | min | max | mean | sum |
| --- | ---: | ---: | ---: | ---: | ---: |
{% for name, s in numeric.items() %}
| {{ name }} | {{ s.count }} | {{ s.min }} | {{ s.max }} | {{ s.mean }} | {{ s.sum }} |
{% endfor %}
{% endif %}
{% if table_columns %}

## Rows

|{% for name in table_columns %} {{ name }} |{% endfor %}

|{% for name in table_columns %} --- |{% endfor %}

{% for r in shown_rows %}
|{% for name in table_columns %} {{ r[name] | short }} |{% endfor %}

{% endfor %}
{% if row_count > shown_rows | length %}

{{ row_count - shown_rows | length }} more rows not shown.
{% endif %}
{% endif %}
"""


def _template_source(template: str | Path | None) -> str:
    if template is None:
        return DEFAULT_TEMPLATE
    if isinstance(template, Path):
        try:
            if template.stat().st_size > MAX_TEMPLATE_BYTES:
                raise SourceError(f"template {template} is over {MAX_TEMPLATE_BYTES} bytes")
            return template.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(f"cannot read template {template}: {scrubbed(str(exc), ())}") from None
    if "{{" not in template and "{%" not in template:
        # A str is the template itself; one without any placeholder is most likely a path passed as str.
        raise SourceError("the template has no {{ … }} or {% … %}: pass a pathlib.Path to read a template file")
    return template


def _environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(autoescape=False, undefined=jinja2.StrictUndefined, finalize=markdown_inline,
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["short"] = _short
    env.filters["paragraphs"] = _paragraphs
    return env


def _compile(template: str | Path | None) -> jinja2.Template:
    source = _template_source(template)
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise SourceError(f"template line {exc.lineno}: {scrubbed(exc.message or str(exc), ())}") from None


# -- front matter -------------------------------------------------------------------------------------------

_RENDERED_AT = re.compile(r"^rendered_at: .*\n", re.MULTILINE)


def _fm(value: Any) -> str:
    # JSON strings are YAML double-quoted scalars; escaping keeps every value on its one line, and the
    # Unicode line separators are escaped too since YAML and str.splitlines break lines on them.
    text = json.dumps(display(value), ensure_ascii=False)
    for char in ("\u2028", "\u2029", "\x85"):
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def front_matter(fields: dict[str, Any]) -> str:
    lines = ["---"]
    for name, value in fields.items():
        if value is None:
            continue
        if name == "tags":
            lines.append(f"tags: [{', '.join(_fm(t) for t in value)}]")
        elif isinstance(value, int) and not isinstance(value, bool):
            lines.append(f"{name}: {value}")
        else:
            lines.append(f"{name}: {_fm(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def _same_dossier(old: str, new: str) -> bool:
    """Equal but for the rendering time: a re-run with the same rows leaves the file (and its mtime) alone."""
    return _RENDERED_AT.sub("", old, count=1) == _RENDERED_AT.sub("", new, count=1)


# -- the run ------------------------------------------------------------------------------------------------


@dataclass
class _Dossier:
    user: str
    key: Any
    rows: list[dict[str, Any]]


def _user_of(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    text = display(value)
    return text if USER_SLUG.fullmatch(text) else None


def _shown(value: Any) -> str:
    text = repr(display(value))
    return text if len(text) <= 60 else text[:59] + "…"


def render_dossiers(
    source: str,
    *,
    query: str,
    root: Path,
    template: str | Path | None = None,
    group_by: str | None = None,
    user_column: str = "user_slug",
    user: str | None = None,
    kind: str | None = None,
    table_rows: int = DEFAULT_TABLE_ROWS,
    connect_timeout: float = 10,
    query_timeout: float = 300,
    max_rows: int = 100_000,
) -> DossierRun:
    """Run `query` read-only on `source` and write one markdown dossier per row (or per value of `group_by`)
    under `root/artifacts/dossiers/<user>/`.

    The user of a row is its `user_column` value, which must be a valid user slug; a row without one is
    skipped and reported. With `user` set, only that user's rows are rendered (the others are skipped), and a
    result with no `user_column` belongs wholly to `user`. `template` is Jinja2 text (a `str`) or a file (a
    `Path`), rendered in a sandbox; None is the built-in dossier. Nothing is written unless every dossier
    rendered; a dossier identical to the file already there is left untouched.

    A dossier is named by its group key (per row: by the first column that is not `user_column`), plus
    `-<kind>` when `kind` is given, so two queries keyed on the same column can keep separate files.

    Raises SourceError (one-line reason, never the password) for a bad URL, an unreachable server, refused
    credentials, a statement that is not one SELECT, an SQL error, an unknown `group_by`/`user_column`, more
    than `max_rows` rows, or a template error.
    """
    src = parse_source(source)
    if user is not None and not USER_SLUG.fullmatch(user):
        raise SourceError(f"user {user!r} is not a valid user slug")
    if max_rows < 1 or table_rows < 0 or connect_timeout <= 0 or query_timeout <= 0:
        raise SourceError("max_rows must be ≥ 1, table_rows ≥ 0 and the timeouts > 0")
    check_read_only_statement(query, src.engine)
    compiled = _compile(template)
    limits = Limits(connect_timeout, query_timeout, max_rows)
    columns, raw_rows = fetch_rows(src, query, limits)
    suffix = f"-{sanitize_title(kind)}" if kind else ""
    return _write_run(src, query, Path(root), compiled, columns, raw_rows, group_by, user_column, user, table_rows,
                      suffix)


def _write_run(src: DataSource, query: str, root: Path, compiled: jinja2.Template, columns: list[str],
               raw_rows: list[tuple[Any, ...]], group_by: str | None, user_column: str, user: str | None,
               table_rows: int, suffix: str) -> DossierRun:
    """Check the columns, group the rows into dossiers, render every one, and only then write them."""
    _check_columns(columns, group_by, user_column, user)
    query_hash = hashlib.sha256(query.strip().encode("utf-8", "surrogatepass")).hexdigest()[:16]
    run = DossierRun(source=src.url, query_hash=query_hash, rows=len(raw_rows))
    name_column = group_by or next((c for c in columns if c != user_column), user_column)
    dossiers = _group_rows(columns, raw_rows, group_by, user_column, user, name_column, run.skipped)
    folder_root = root.joinpath(*DOSSIER_FOLDER)
    rendered_at = utc_now()
    planned: list[tuple[Path, str]] = []
    used: set[Path] = set()
    for dossier in dossiers:
        path = _dossier_path(folder_root, dossier, used, suffix)
        text = _render(compiled, src, query, query_hash, rendered_at, dossier, columns, name_column, group_by,
                       table_rows)
        planned.append((path, text))
    # Every dossier rendered: only now is anything written (a template error above wrote nothing).
    _write_planned(planned, root, folder_root, run)
    return run


def _check_columns(columns: list[str], group_by: str | None, user_column: str, user: str | None) -> None:
    """Refuse a result with two columns of one name, or without the `group_by`/`user_column` asked for."""
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise SourceError(f"the query returns more than one column named {duplicates[0]!r}: give each an alias")
    shown_columns = ", ".join(columns[:20]) + (", …" if len(columns) > 20 else "")
    for what, name in (("group_by", group_by), ("user_column", user_column)):
        if name is not None and name not in columns and not (what == "user_column" and user is not None):
            raise SourceError(f"{what} column {name!r} is not in the query's result (columns: {shown_columns})")


def _row_owner(row: dict[str, Any], user_column: str, user: str | None) -> tuple[str | None, str]:
    """(the user a row belongs to, "") or (None, why the row is skipped). A result without `user_column`
    belongs wholly to `user`."""
    if user_column not in row:
        assert user is not None
        return user, ""
    owner = _user_of(row[user_column])
    if owner is None:
        return None, (f"no user in column {user_column!r}" if row[user_column] in (None, "")
                      else f"user {_shown(row[user_column])} in column {user_column!r} is not a valid user slug")
    if user is not None and owner != user:
        return None, f"row belongs to user {owner!r}, not {user!r}"
    return owner, ""


def _group_rows(columns: list[str], raw_rows: list[tuple[Any, ...]], group_by: str | None, user_column: str,
                user: str | None, name_column: str, skipped: list[SkippedRow]) -> list[_Dossier]:
    """The dossiers to render: one per row, or one per (user, `group_by` value) in first-seen order; rows
    without a valid owner go to `skipped`."""
    groups: dict[tuple[str, Any], _Dossier] = {}
    per_row: list[_Dossier] = []
    for number, values in enumerate(raw_rows, start=1):
        row = dict(zip(columns, values, strict=True))
        owner, reason = _row_owner(row, user_column, user)
        if owner is None:
            skipped.append(SkippedRow(number, reason))
            continue
        key = row.get(name_column)
        if group_by is None:
            per_row.append(_Dossier(owner, key, [row]))
            continue
        group_key = (owner, _hashable(key))
        if group_key not in groups:
            groups[group_key] = _Dossier(owner, key, [])
        groups[group_key].rows.append(row)
    return [*groups.values(), *per_row]


def _write_planned(planned: list[tuple[Path, str]], root: Path, folder_root: Path, run: DossierRun) -> None:
    """Write each (path, text), skipping a user folder that leads outside artifacts/dossiers and leaving a
    dossier equal to the file already there alone; `run` records what was written, unchanged or skipped."""
    folder_ok: dict[Path, bool] = {}  # user folder -> it is really inside artifacts/dossiers (checked once)
    for path, text in planned:
        user_folder = path.parent
        if user_folder not in folder_ok:
            folder_ok[user_folder] = _open_user_folder(user_folder, folder_root, path)
            if not folder_ok[user_folder]:
                run.skipped.append(SkippedRow(0, f"artifacts/dossiers/{user_folder.name} leads outside "
                                                 "artifacts/dossiers (a symlink): not written"))
        if not folder_ok[user_folder]:
            continue
        rel = path.relative_to(root).as_posix()
        if _unchanged(path, text):
            run.unchanged.append(rel)
            continue
        write_text_atomically(path, text)
        run.written.append(rel)


def _open_user_folder(user_folder: Path, folder_root: Path, path: Path) -> bool:
    """Make the private user folder; True if it really is inside artifacts/dossiers (not through a symlink)."""
    if user_folder.parent != folder_root or not USER_SLUG.fullmatch(user_folder.name):
        raise AssertionError(f"dossier path {path} is not under {folder_root}")  # validated above: a bug
    make_private_folder(user_folder)
    return _inside(user_folder, folder_root)


def _unchanged(path: Path, text: str) -> bool:
    """The dossier file there (not a symlink) equals `text` but for its rendering time; unreadable: False."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        return _same_dossier(path.read_text(encoding="utf-8"), text)
    except (OSError, UnicodeDecodeError):
        return False  # unreadable: replaced


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        return ("\x00unhashable", display(value))


def _inside(folder: Path, folder_root: Path) -> bool:
    try:
        return folder.resolve().parent == folder_root.resolve()
    except OSError:
        return False


def _dossier_path(folder_root: Path, dossier: _Dossier, used: set[Path], suffix: str) -> Path:
    stem = dossier_name(dossier.key)
    path = folder_root / dossier.user / f"{stem}{suffix}.md"
    counter = 2
    while path in used:  # rows of one user sharing a name (per-row dossiers): -2, -3 … in query order
        path = folder_root / dossier.user / f"{stem}-{counter}{suffix}.md"
        counter += 1
    used.add(path)
    return path


def _render(compiled: jinja2.Template, src: DataSource, query: str, query_hash: str, rendered_at: str,
            dossier: _Dossier, columns: list[str], name_column: str, group_by: str | None, table_rows: int) -> str:
    rows = dossier.rows
    key_columns = _constant_columns(rows, columns) if len(rows) > 1 else list(columns)
    title = f"{name_column} {display(dossier.key)}".strip()
    context = {
        "title": title,
        "user": dossier.user,
        "group_by": group_by,
        "key": dossier.key,
        "row": rows[0],
        "rows": rows,
        "row_count": len(rows),
        "columns": list(columns),
        "key_columns": key_columns,
        "table_columns": [c for c in columns if c not in key_columns],
        "shown_rows": rows[:table_rows],
        "table_rows": table_rows,
        "numeric": summarize(rows, columns),
        "source": src.url,
        "query": query,
        "query_hash": query_hash,
    }
    try:
        body = compiled.render(context)
    except Exception as exc:
        message = exc.message if isinstance(exc, jinja2.TemplateError) and exc.message else str(exc)
        raise SourceError(f"template error in the dossier {title!r}: {scrubbed(message, (src.secret,))}") from None
    head = front_matter({
        "title": title,
        "user": dossier.user,
        "group_by": group_by,
        "group": dossier.key if group_by else None,
        "subject": dossier.key if group_by else None,  # the index's subject field: what this dossier is about
        "source_url": src.url,
        "source_type": "Dossier",
        "query_hash": query_hash,
        "rows": len(rows),
        "rendered_at": rendered_at,
        "tags": ["dossier"],
    })
    return head + "\n" + body.strip("\n") + "\n"
