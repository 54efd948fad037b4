"""The project itself: `init`, `status`, `doctor` (and `--findability`), `migrate` and `egress`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ragstead.cli._app import app
from ragstead.cli._flags import NO_PROJECT_FLAGS, JsonOpt, ModelOpt, ProjectFlags, QuietOpt, with_project_flags
from ragstead.cli._output import (
    echo_json,
    err,
    human_console,
    library_errors,
    plural,
    progress_bar,
    say,
    with_output_flags,
)
from ragstead.errors import RagsteadError
from ragstead.filters import split_values


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="The project folder (created if missing).")] = Path("."),
    layout: Annotated[str, typer.Option("--layout", help="personal: every file of the folder is the owner's; "
                                                         "team: kb/users/<slug>/, artifacts/, docs/.")] = "personal",
    owner: Annotated[str | None, typer.Option("--owner", help="Who owns the files outside the team layout "
                                                              "(default: your user name).")] = None,
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to index (default: the "
                                                              "whole folder; team: kb,artifacts,docs).")] = None,
    model: ModelOpt = None,
    chunker: Annotated[str | None, typer.Option("--chunker", help="words | sentences | markdown")] = None,
    index_home: Annotated[bool, typer.Option(
        "--index-home", help="Keep the index outside the folder, in $XDG_DATA_HOME/ragstead/<project>/ (default "
                             "~/.local/share): a folder synced to a cloud drive then syncs no index.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Make a folder a ragstead project: ragstead.toml (roots, owner, model, chunker), the .gitignore lines
    that keep the index and private folders out of git, and for the team layout its folders.

    Examples:

        ragstead init ~/notes && cd ~/notes && ragstead index
        ragstead init ~/Dropbox/notes --index-home   # the index in ~/.local/share/ragstead/, not in the folder
        ragstead init team-kb --layout team --owner alice
    """
    from ragstead.knowledge_base import init as init_project

    with library_errors():
        report = init_project(path, layout=layout, owner=owner, roots=split_values([roots]) if roots else None,
                              model=model, chunker=chunker, index_outside=index_home)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"initialised {report['root']}: {report['config']}")
    for key, value in report["settings"].items():
        typer.echo(f"  {key} = {', '.join(value) if isinstance(value, list) else value}")
    if report["gitignore"]:  # the lines themselves are in the file; here, only what they are for
        typer.echo(f"  .gitignore: {plural(len(report['gitignore']), 'line')} added (the index, .env files, keys "
                   "and other secrets stay out of git)")
    for folder in report["created"]:
        typer.echo(f"  created {folder}")
    if report.get("model_advice"):  # #47.1: a folder mostly not in English
        err.print(f"[yellow]note:[/] {escape(report['model_advice'])}", markup=True, highlight=False, soft_wrap=True)
    typer.echo(f"next: cd {path} && ragstead index")


@app.command(epilog="""Examples:
  ragstead migrate --from sqlite --to postgresql://me@127.0.0.1:5432/kb
  ragstead migrate --from sqlite --to chroma:kb/rag/chroma --json""")
@with_output_flags("text", "json")
@with_project_flags(db=False, store=False)
def migrate(
    source: Annotated[str, typer.Option("--from", help="Store to copy: sqlite:PATH, postgresql://..., chroma:...")],
    target: Annotated[str, typer.Option("--to", help="Empty store to fill: postgresql://..., chroma:..., sqlite:PATH")],
    replace: Annotated[bool, typer.Option("--replace", help="Empty the target first.")] = False,
    output: str = "text",
    quiet: QuietOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Copy an index to another store, vectors included (nothing is re-embedded)."""
    with library_errors():
        from_store = ProjectFlags(project.root, project.config, store=source)
        with from_store.open() as kb, progress_bar(quiet, "copying documents") as hook:
            report = kb.migrate(target, replace_target=replace, progress=hook)
    if output == "json":
        echo_json(report.to_dict())
        return
    typer.echo(f"copied {report.documents} documents, {report.chunks} chunks (vectors included) in "
               f"{report.seconds:.1f}s: {report.source['path']} -> {report.target['path']}")


def _status_lines(stats: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """`status` for people: (label, value, color or None) rows."""
    schema = f", schema {stats['schema_version']}" if stats.get("schema_version") is not None else ""
    dim = f" ({stats['embed_dim']} dimensions)" if stats.get("embed_dim") else ""
    lexical = "" if stats.get("lexical_rows") == stats.get("chunks") else f" (lexical index: {stats['lexical_rows']})"
    rows: list[tuple[str, str, str | None]] = [
        ("index", f"{stats['path']} ({stats.get('store', 'sqlite')}{schema})", None),
        ("roots", ", ".join(stats["roots"]) or "-", None),
        ("documents", str(stats["documents"]), None),
        ("chunks", f"{stats['chunks']}{lexical}", None),
        ("model", f"{stats.get('embed_model') or 'none yet (run `ragstead index`)'}{dim}", None),
        ("last index", stats["last_indexed_at"] or "never (run `ragstead index`)", None),
        *_store_lines(stats),
    ]
    if secrets := _secrets_line(stats.get("secrets")):
        rows.append(secrets)
    return [*rows, *_health_lines(stats)]


def _store_lines(stats: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """`status`'s rows of what a store adds: PostgreSQL's server and postings, Chroma's collection, and the
    sentence vectors `index --sentence-vectors` keeps (what `--rerank` reads instead of the model)."""
    rows: list[tuple[str, str, str | None]] = []
    if stats.get("server_version"):
        rows.append(("server", f"PostgreSQL {stats['server_version']}, pgvector {stats.get('pgvector_version')}",
                     None))
        if stats.get("lexical_postings", "ready") != "ready":
            rows.append(("postings", f"{stats['lexical_postings']}; the next `ragstead index` rebuilds them",
                         "yellow"))
    if stats.get("collection"):
        rows.append(("vectors", f"{stats.get('vector_rows')} in Chroma collection {stats['collection']}", None))
    if stats.get("sentence_vector_chunks"):
        rows.append(("sentences", f"vectors for {stats['sentence_vector_chunks']} of {stats['chunks']} chunks "
                                  "(`--rerank` reads them)", None))
    return rows


def _secrets_line(secrets: dict[str, Any] | None) -> tuple[str, str, str | None] | None:
    """`status`'s secrets row: how the index's secrets are masked, or why they may not be; None: none found."""
    if not secrets:
        return None
    if secrets.get("checked", True) is None:
        return ("secrets", "unknown: imported from a snapshot that does not say whether its chunks were "
                           "masked; export it again from its project with this version to know", "yellow")
    if not secrets.get("checked", True) and secrets.get("imported"):
        # The files are on the machine the snapshot came from: a rebuild here could not re-read them.
        return ("secrets", "not masked: the snapshot's index predates secret masking; run `ragstead index "
                           "--rebuild` in the project it came from, then export and import it again", "yellow")
    if not secrets.get("checked", True):
        return ("secrets", "not masked: the index predates secret masking; run `ragstead index --rebuild`",
                "yellow")
    if secrets.get("outdated"):
        from ragstead.documents.secrets import MASKING_IMPROVED

        return ("secrets", f"{secrets['masked']} in {secrets['files']} files, masked by an older detector: "
                           f"{MASKING_IMPROVED}", "yellow")
    if secrets["files"]:
        return ("secrets", f"{secrets['masked']} in {secrets['files']} files, masked in every output", None)
    return None


def _health_lines(stats: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """`status`'s last rows: an unfinished import, the integrity check and the permissions."""
    rows: list[tuple[str, str, str | None]] = []
    if unfinished := stats.get("unfinished_import"):
        rows.append(("import", f"unfinished: the index holds part of {unfinished['snapshot']} ({stats['documents']} "
                               f"of {unfinished['documents']} documents); `ragstead import` of it finishes it", "red"))
    ok = stats["integrity"] == "ok"
    rows.append(("integrity", stats["integrity"], "green" if ok else "red"))
    loose = stats["permissions"]
    if not loose:
        rows.append(("permissions", "ok: private (files 0600, folders 0700)", "green"))
    else:
        rows.append(("permissions", f"{len(loose)} readable by others; fix: ragstead doctor --fix", "yellow"))
        rows.extend(("", f"{p['kind']} {p['path']}: {p['mode']}, should be {p['wanted']}", "yellow") for p in loose)
    return rows


@app.command(epilog="""Examples:
  ragstead status
  ragstead status --json
  ragstead status --store postgresql://ragstead@127.0.0.1:5432/kb""")
@with_project_flags
def status(
    as_json: JsonOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Where the index lives, its roots, counts, model, last index time, integrity check and permissions."""
    with library_errors(), project.open() as kb:
        stats = kb.status() | {"roots": list(kb.settings.roots), "last_indexed_at": kb.last_indexed()}
    if as_json:
        echo_json(stats)
        return
    for label, value, color in [*_status_lines(stats), *_language_lines(stats)]:
        say(f"{label:<12} {value}", fg=color)


def _language_lines(stats: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """`status`'s languages row (#47.1: documents by detected language) and the model note, when there is one."""
    counts = stats.get("languages") or {}
    rows: list[tuple[str, str, str | None]] = [
        ("languages", ", ".join(f"{code} {n}" for code, n in counts.items()), None)] if counts else []
    if stats.get("model_advice"):
        rows.append(("note", stats["model_advice"], "yellow"))
    return rows


@app.command(epilog="""Examples:
  ragstead doctor
  ragstead doctor --fix
  ragstead doctor --json
  ragstead doctor --findability""")
@with_output_flags("text", "json")
@with_project_flags
def doctor(
    fix: Annotated[bool, typer.Option("--fix", help="Take group and other permissions off what is loose.")] = False,
    findability: Annotated[bool, typer.Option("--findability", help="Instead: can each document be found by its "
                                                                    "own words? (exit 1 on a regression)")] = False,
    output: str = "text",
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Check that the index and what sits beside it are private (files 0600, folders 0700); --fix tightens.

    Exit code 1 if anything is still loose.
    """
    if findability:
        _doctor_findability(output, fix, project)
        return
    with library_errors(), project.open() as kb:
        report = kb.doctor(fix=fix)
    if output == "json":
        typer.echo(json.dumps(report, indent=2))
    else:
        for item in report["fixed"]:
            typer.echo(f"fixed {item['kind']} {item['path']}: {item['mode']} -> {item['wanted']}")
        for item in report["remaining"]:
            typer.echo(f"loose {item['kind']} {item['path']}: {item['mode']}, should be {item['wanted']}"
                       + ("" if fix else " (ragstead doctor --fix)"))
        if report["ok"]:
            typer.echo("ok: the index files are private (files 0600, folders 0700)")
    if not report["ok"]:
        raise typer.Exit(1)


def _doctor_findability(output: str, fix: bool, project: ProjectFlags) -> None:
    """`doctor --findability`: a table of the documents their own words do not find and the files left out of
    the index, each with why; exit code 1 when a document findable in the last run is not now."""
    with library_errors():
        if fix:
            raise RagsteadError("--findability and --fix are separate checks; run them one at a time")
        with project.open() as kb:
            report = kb.findability()
    if output == "json":
        echo_json(report.to_dict())
    else:
        console = human_console()
        console.print(f"{report.findable} of {report.documents} documents are found by their own words in the "
                      f"top {report.top} ({report.seconds:.1f}s)", markup=False, highlight=False)
        rows = [(u.path, u.kind, u.reason) for u in report.not_findable] + [
            (u.path, u.kind, u.reason) for u in report.left_out]
        if rows:
            table = Table("path", "problem", "why", box=None, header_style="bold")
            for row in rows:
                table.add_row(*(escape(cell) for cell in row))
            console.print(table)
        for item in report.regressions:
            say(f"regression: {item['path']} was findable in the last run; {item['reason']}", fg="red")
        if report.previous is None:
            typer.echo("first run: saved beside the index, the next run compares with it")
        elif not report.regressions:
            typer.echo(f"no regressions since the run of {report.previous['generated_at']} "
                       f"({report.previous['findable']} findable then)")
    if report.regressions:
        raise typer.Exit(1)


@app.command(epilog="""Examples:
  ragstead egress
  ragstead egress --json""")
@with_project_flags
def egress(
    as_json: JsonOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """What left the machine: every request to a remote LLM, an ingest fetch or a tool, from the private log
    kb/rag/egress.jsonl (time, host, purpose, bytes sent, documents, payload hash; never the text)."""
    with library_errors(), project.open() as kb:
        records = kb.egress_log()
    if as_json:
        echo_json(records)
        return
    if not records:
        typer.echo("nothing has left this machine (no request logged)")
        return
    typer.echo(f"{'time':<25} {'host':<30} {'purpose':<36} {'bytes':>9}  documents")
    for r in records:  # one line a request, so it greps and pipes
        typer.echo(f"{r.get('time', ''):<25} {r.get('host', ''):<30} {r.get('purpose', ''):<36} "
                   f"{r.get('bytes_sent', 0):>9}  {', '.join(r.get('documents') or []) or '-'}")
