"""The documents: `ls`, `tags`, `ingest`, `remember`, `export` and `import`."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ragstead.cli import _output
from ragstead.cli._app import app
from ragstead.cli._flags import NO_PROJECT_FLAGS, TAG_HELP, ProjectFlags, with_project_flags
from ragstead.cli._output import (
    echo_json,
    escaped,
    human_console,
    library_errors,
    plural,
    print_rows,
    with_output_flags,
)
from ragstead.filters import split_values


@app.command(epilog="""Examples:
  ragstead ingest https://example.com/article --tags reading
  ragstead ingest https://youtu.be/VIDEO_ID https://x.com/user/status/123 ~/Downloads/paper.pdf
  ragstead ingest https://example.com/article --refresh --json
  ragstead ingest "clickhouse://user@localhost:8123/analytics" --query "SELECT * FROM wallets" --group-by user_slug""")
@with_output_flags("text", "json")
@with_project_flags
def ingest(
    sources: Annotated[list[str], typer.Argument(
        help="URLs (web pages, PDFs, text, YouTube videos, tweets), local files, or one analytics database URL "
             "(clickhouse://, postgresql://, sqlite:///) with --query.", show_default=False)],
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags for every source.")] = None,
    targets: Annotated[str | None, typer.Option("--targets", help="Comma-separated knowledge bases to store in: "
                                                                 "`default` (this project) and [targets.NAME] "
                                                                 "of ragstead.toml.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Whose private tree the sources go to (default: "
                                                           "the project owner).")] = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Re-fetch sources already ingested; replace the "
                                                           "stored copy if the content changed.")] = False,
    no_auto_tags: Annotated[bool, typer.Option("--no-auto-tags", help="Only the --tags given, no automatic "
                                                                     "tags.")] = False,
    query: Annotated[str | None, typer.Option("--query", help="Analytics source: the SELECT whose rows become "
                                                             "dossiers.")] = None,
    template: Annotated[Path | None, typer.Option("--template", help="Analytics source: a Jinja2 dossier "
                                                                    "template (default: built in).")] = None,
    group_by: Annotated[str | None, typer.Option("--group-by", help="Analytics source: one dossier per value of "
                                                                   "this column (default: one per row).")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for the index lock.")] = 30.0,
    output: str = "text",
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Fetch, archive and index web pages, PDFs, videos, posts and analytics rows. One line per source:
    added | updated | unchanged | duplicate | failed: reason. Exit code 3: some sources failed (the others
    were ingested)."""
    with library_errors():
        def show(result: Any) -> None:
            if output == "text":
                title = f"  ({result.title})" if result.title and result.status != "failed" else ""
                typer.echo(f"{result.line}  {result.source}{title}")

        with project.open() as kb:
            report = kb.ingest(sources, tags=split_values([tags] if tags else []),
                               targets=split_values([targets] if targets else []), user=user, refresh=refresh,
                               auto_tags=False if no_auto_tags else None, query=query,
                               template=template.resolve() if template else None,
                               group_by=group_by, wait=wait, on_result=show)
    if output == "json":
        echo_json(report.to_dict())
    else:
        counts = report.counts()
        typer.echo(", ".join(f"{n} {status}" for status, n in counts.items() if n) or "nothing to ingest")
    if report.failed:
        raise typer.Exit(code=3)


@app.command(epilog="""Examples:
  ragstead tags
  ragstead tags --user alice --json""")
@with_output_flags("text", "json")
@with_project_flags
def tags(
    user: Annotated[str | None, typer.Option("--user", help="Only this user's documents (and public ones "
                                                           "with --public-only).")] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Only public documents.")] = False,
    output: str = "text",
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """List the tags of the indexed documents with how many documents carry each (filter with --tag)."""
    with library_errors(), project.open() as kb:
        counts = kb.tags(user=user, public_only=public_only)
    if output == "json":
        echo_json({"tags": [{"tag": tag, "documents": n} for tag, n in counts.items()]})
        return
    if not counts:
        typer.echo("no tags yet (ragstead ingest URL --tags a,b, or `tags:` in a markdown file's front matter)")
    for tag, n in counts.items():
        typer.echo(f"{n:>6}  {tag}")


@app.command("remember", epilog="""Examples:
  ragstead remember "I prefer the CLI over the web UI"            # a personal project: the owner's memory
  ragstead remember "I prefer the CLI over the web UI" --user alice
  ragstead remember "Lesson learned: no deploys on Fridays" --user alice
  ragstead remember "my password is hunter2" --user alice --dry-run""")
@with_output_flags("text", "json")
@with_project_flags
def remember_cmd(
    text: Annotated[str, typer.Argument(help="A preference, stable fact or team learning to remember.")],
    user: Annotated[str | None, typer.Option("--user", help="Whose memory (default in a personal project: its "
                                                            "owner; a team project needs it).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print the decision; write nothing.")] = False,
    no_index: Annotated[bool, typer.Option("--no-index", help="Write the file; leave indexing to `index`.")] = False,
    wait: Annotated[float, typer.Option(help="Seconds to wait for the index lock.")] = 30.0,
    output: str = "text",
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Remember a high-signal fact in USER_MEMORY.md / COMPANY_MEMORY.md (never secrets or PII)."""
    with library_errors(), project.open() as kb:
        result = kb.remember(text, user=user, dry_run=dry_run, index=not (dry_run or no_index), wait=wait)
    if output == "json":
        echo_json(result.to_dict())
        return
    decision = result.decision
    verdict = "write" if decision.should_write else "do not write"
    typer.echo(f"{verdict} ({decision.target}, confidence {decision.confidence}): {decision.summary or '-'}")
    for reason in decision.reasons:
        typer.echo(f"  - {reason}")
    typer.echo(f"{result.note}" + (f": {result.file}" if result.file else ""))


LS_FORMATS = ("table", "json", "jsonl", "csv")
LS_CSV_COLUMNS = ("file_path", "doc_type", "user_slug", "is_private", "chunks", "indexed_at", "created_at", "title",
                  "tags", "doc_id")


@app.command("ls", epilog="""Examples:
  ragstead ls
  ragstead ls --user alice --doc-type user_kb
  ragstead ls --public-only --no-archive
  ragstead ls --tag housing
  ragstead ls --limit 20 --offset 20 --format csv""")
@with_output_flags(*LS_FORMATS)
@with_project_flags
def ls(
    user: Annotated[str | None, typer.Option("--user", help="Only this user's documents.")] = None,
    doc_type: Annotated[list[str] | None, typer.Option("--doc-type", help="Repeatable or comma-separated.")] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help=TAG_HELP)] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Public documents instead of private ones.")
                           ] = False,
    include_archive: Annotated[bool, typer.Option("--include-archive/--no-archive",
                                                  help="List archive documents too.")] = True,
    limit: Annotated[int, typer.Option("--limit", min=1, max=10000, help="Documents to list.")] = 100,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Documents to skip (paging).")] = 0,
    output: str = "table",
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """The documents in the index, by path: type, user, privacy, chunks and when each was indexed."""
    with library_errors(), project.open() as kb:
        filters = kb.scope(user=user, public_only=public_only, include_archive=include_archive,
                           doc_types=split_values(doc_type), tags=split_values(tag))  # the store filters by tag
        docs = kb.documents(filters=filters, limit=limit, offset=offset)
    if output == "json":
        echo_json({"documents": [doc.to_dict() for doc in docs], "limit": limit, "offset": offset})
        return
    if output != "table":
        print_rows([doc.to_dict() for doc in docs], LS_CSV_COLUMNS, output)
        return
    columns = ("file", "type", "user", "privacy", "chunks", "indexed")
    rows = [(doc["file_path"], _type_label(doc), doc["user_slug"] or "-", "private" if doc["is_private"] else "public",
             str(doc.get("chunks", "")), str(doc.get("indexed_at") or "-")) for doc in docs]
    scope = ("public" if public_only else "private") + " scope" + (
        f", tagged {' or '.join(filters.tags)}" if filters.tags else "")
    shown = f"{offset + 1}-{offset + len(docs)}" if docs else "none"
    more = f"; more: --offset {offset + limit}" if len(docs) == limit else ""
    other = "" if public_only else "; --public-only lists public ones"
    summary = f"{plural(len(docs), 'document')} ({scope}, showing {shown}{more}{other})"
    if not _output.on_terminal():  # a pipe: TSV for cut and awk, the summary a `#` comment line after it
        for row in [columns, *rows] if rows else []:
            typer.echo("\t".join(escaped(cell) for cell in row))  # a tab or newline in a name stays in its cell
        typer.echo(f"# {summary}")
        return
    console = human_console()
    if docs:
        console.print(_ls_table(docs, console.width))
    console.print(Text(summary, style="dim"), soft_wrap=True)


def _type_label(doc: Any) -> str:
    """The type `ls` shows: a personal project's files are `note` (stored, filtered and in --json as the
    `user_kb` the path rules give every user's own file); every other type as stored."""
    return "note" if doc["doc_type"] == "user_kb" and not doc["file_path"].startswith("kb/users/") else doc["doc_type"]


def _ls_table(docs: list[Any], width: int) -> Table:
    """`ls` on a terminal: path, title, type and date (the user too when there are several) in `width` columns.
    The type and date keep their width; a long path is shortened in the middle (its folder and file name stay
    readable) and a title wraps at words. chunks, privacy and the indexing time are in --json and the pipe."""
    rows = [doc.to_dict() for doc in docs]
    fixed = _ls_fixed_columns(rows)
    fixed_widths = {name: max(len(name), *(len(cell) for cell in cells)) for name, cells in fixed.items()}
    titles = [row.get("title") or PurePosixPath(row["file_path"]).stem for row in rows]  # no title: its file name
    path_width, title_width = _ls_widths(rows, titles, width, fixed_widths)
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("file", no_wrap=True, width=path_width)
    if title_width:
        table.add_column("title", overflow="fold", width=title_width)
    for name, column_width in fixed_widths.items():
        table.add_column(name, no_wrap=True, min_width=column_width)
    for i, row in enumerate(rows):
        cells = [Text(_shorten_middle(row["file_path"], path_width), style="cyan")]
        if title_width:
            cells.append(Text(titles[i]))
        table.add_row(*cells, *(Text(column[i]) for column in fixed.values()))
    return table


def _ls_fixed_columns(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The cells of `ls`'s columns that keep their width: type and date, and the user when there are several."""
    fixed: dict[str, list[str]] = {"type": [_type_label(row) for row in rows],
                                   "date": [str(row.get("created_at") or row.get("indexed_at") or "-")[:10]
                                            for row in rows]}
    if len({row["user_slug"] or "-" for row in rows}) > 1:
        fixed["user"] = [row["user_slug"] or "-" for row in rows]
    return fixed


def _ls_widths(rows: list[dict[str, Any]], titles: list[str], width: int,
               fixed_widths: dict[str, int]) -> tuple[int, int]:
    """The path's and the title's column widths in what the fixed columns leave of `width` (title 0: no title
    column, too narrow or no document has one)."""
    gutter = 2  # rich's padding between two columns
    # What the path has, and the title with its gutter:
    room = width - sum(fixed_widths.values()) - gutter * len(fixed_widths)
    widest_path = max(len(row["file_path"]) for row in rows)
    widest_title = max((len(title) for title in titles), default=0)
    title_share = min(widest_title, 24)  # a title wraps: it needs less than a path, which is cut instead
    path_width = max(min(widest_path, room - gutter - title_share), 12)
    title_width = room - gutter - path_width
    if not (widest_title > 0 and title_width >= 8):
        return max(min(widest_path, room), 5), 0
    return max(path_width, 5), min(title_width, widest_title)


def _shorten_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, an ellipsis in the middle: `work/team…2025-02-11.md`."""
    if len(text) <= width or width < 5:
        return text
    tail = (width - 1) // 2
    return f"{text[:width - 1 - tail]}…{text[-tail:]}"


@app.command("export", epilog="""Examples:
  ragstead export backup.ragsnap
  ragstead export /mnt/usb/kb --json""")
@with_output_flags("text", "json")
@with_project_flags
def export_cmd(
    file: Annotated[Path, typer.Argument(help="The snapshot to write (.ragsnap is added unless it ends so).")],
    output: str = "text",
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Write the index (documents, chunks, vectors, metadata, tags, scopes, the model) to one private file."""
    with library_errors(), project.open() as kb:
        report = kb.export_snapshot(file)
    if output == "json":
        echo_json(report.to_dict())
        return
    typer.echo(f"exported {report.documents} documents, {report.chunks} chunks ({report.model}, {report.dim}-d) "
               f"to {report.path} ({report.bytes / (1 << 20):.1f} MiB, 0600) in {report.seconds:.1f}s")


@app.command("import", epilog="""Examples:
  ragstead import backup.ragsnap
  ragstead import backup.ragsnap --store postgresql://me@127.0.0.1:5432/kb
  ragstead import backup.ragsnap --replace --reembed""")
@with_output_flags("text", "json")
@with_project_flags
def import_cmd(
    file: Annotated[Path, typer.Argument(help="A snapshot written by `ragstead export`.")],
    replace: Annotated[bool, typer.Option("--replace", help="Empty the target store first.")] = False,
    reembed: Annotated[bool, typer.Option("--reembed", help="Embed every chunk again with the project's model "
                                                            "(a snapshot of another model).")] = False,
    output: str = "text",
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Restore a snapshot into the project's store (or --store), without parsing or embedding anything."""
    with library_errors(), project.open() as kb:
        report = kb.import_snapshot(file, replace=replace, reembed=reembed)
    if output == "json":
        echo_json(report.to_dict())
        return
    typer.echo(f"imported {report.documents} documents, {report.chunks} chunks, {report.embedded} embedded "
               f"({report.model}) into {report.target} in {report.seconds:.1f}s")
