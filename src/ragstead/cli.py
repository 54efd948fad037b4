"""The `ragstead` command line: a thin typer layer over the library. Errors print one line, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ragstead.config import Settings, load_settings
from ragstead.errors import RagsteadError
from ragstead.retrieval.filters import QueryFilters
from ragstead.retrieval.search import SearchOptions, search

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="ragstead: a local-first, private knowledge base. Index your files, query them offline.",
)
err = Console(stderr=True)

RootOpt = Annotated[Path | None, typer.Option("--root", help="Project root (default: $RAGSTEAD_ROOT or cwd).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (default: <root>/ragstead.toml).")]
DbOpt = Annotated[str | None, typer.Option("--db", help="Index file (default: kb/rag/ragstead.db).")]


def _settings(root: Path | None, config: Path | None, db: str | None, **overrides: Any) -> Settings:
    return load_settings(root, config).with_overrides(db_path=db, **overrides)


def _fail(exc: Exception) -> typer.Exit:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
    return typer.Exit(code=2)


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@app.command()
def index(
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to index.")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Drop the index and re-embed everything.")] = False,
    chunker: Annotated[str | None, typer.Option(help="words | sentences | markdown")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Words per chunk (words/markdown).")] = None,
    overlap: Annotated[int | None, typer.Option(help="Overlapping words between chunks.")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for another index run's lock.")] = 0.0,
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Index files under the roots. Incremental: only new or changed files are embedded."""
    from ragstead.embeddings import default_embedder
    from ragstead.indexing.build import index_roots
    from ragstead.stores import SqliteStore

    try:
        settings = _settings(root, config, db, chunker=chunker, chunk_size=chunk_size, overlap=overlap)
        root_list = tuple(r.strip() for r in roots.split(",") if r.strip()) if roots else None
        store = SqliteStore(settings.db_file)
        embedder = default_embedder()
        if _show_progress(quiet):
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            with Progress(
                "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                TimeRemainingColumn(), console=err, transient=True,
            ) as bar:
                task = bar.add_task("indexing", total=None)
                report = index_roots(
                    settings, store, embedder, root_list, rebuild, wait,
                    progress=lambda done, total: bar.update(task, completed=done, total=total),
                )
        else:
            report = index_roots(settings, store, embedder, root_list, rebuild, wait)
        stats = store.stats()
        store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
    if output == "json":
        typer.echo(json.dumps({**report.to_dict(), "index": stats}, indent=2))
        return
    typer.echo(
        f"added {len(report.added)}, updated {len(report.updated)}, removed {len(report.removed)}, "
        f"unchanged {report.unchanged}, skipped {len(report.skipped)} | chunks written "
        f"{report.chunks_written} (embedded {report.chunks_embedded}, reused {report.chunks_reused}) "
        f"in {report.seconds:.2f}s"
    )
    for label, paths in (("+", report.added), ("~", report.updated), ("-", report.removed)):
        for path in paths:
            typer.echo(f"  {label} {path}")
    for item in report.skipped:
        typer.echo(f"  skipped {item['path']}: {item['reason']}", err=True)
    typer.echo(f"index: {stats['path']} ({stats['documents']} documents, {stats['chunks']} chunks)")


def _mode(hybrid: bool, lexical_only: bool, vector: bool, mode: str | None, default: str) -> str:
    chosen = [m for m, on in (("hybrid", hybrid), ("lexical", lexical_only), ("vector", vector)) if on]
    if mode:
        chosen.append(mode)
    if len(set(chosen)) > 1:
        raise RagsteadError(f"choose one mode, got {sorted(set(chosen))}")
    return chosen[0] if chosen else default


def _print_table(payload: dict[str, Any]) -> None:
    table = Table(title=f"{payload['mode']}: {payload['question']}", show_lines=True)
    for column in ("#", "file", "loc", "score", "snippet"):
        table.add_column(column, overflow="fold")
    for row in payload["results"]:
        loc = f"p.{row['page']}" if row.get("page") else (row.get("section_path") or f"chunk {row['chunk_index']}")
        table.add_row(str(row["final_rank"]), row["file_path"], loc, f"{row['score']:.4f}", row["snippet"])
    Console().print(table)
    if not payload["results"]:
        Console().print("no results in scope")


@app.command()
def query(
    question: Annotated[str, typer.Argument(help="What to look for.")],
    k: Annotated[int, typer.Option("--k", help="Results to return.")] = 8,
    hybrid: Annotated[bool, typer.Option("--hybrid", help="Vector + lexical, fused with RRF.")] = False,
    lexical_only: Annotated[bool, typer.Option("--lexical-only", help="FTS5 BM25 only.")] = False,
    vector: Annotated[bool, typer.Option("--vector", help="Vector search only.")] = False,
    mode: Annotated[str | None, typer.Option(help="vector | lexical | hybrid")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Only this user's documents.")] = None,
    doc_type: Annotated[list[str] | None, typer.Option("--doc-type", help="Repeatable or comma-separated.")] = None,
    private_only: Annotated[bool, typer.Option("--private-only", help="Only private content (default).")] = False,
    public_only: Annotated[bool, typer.Option("--public-only", help="Only public content.")] = False,
    date_from: Annotated[str | None, typer.Option("--date-from", help="YYYY-MM-DD, inclusive.")] = None,
    date_to: Annotated[str | None, typer.Option("--date-to", help="YYYY-MM-DD, inclusive.")] = None,
    include_archive: Annotated[bool, typer.Option("--include-archive", help="Include archive docs.")] = False,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Any of these tags; repeatable.")] = None,
    top_k_vector: Annotated[int | None, typer.Option("--top-k-vector", help="Vector candidates.")] = None,
    top_k_lexical: Annotated[int | None, typer.Option("--top-k-lexical", help="Lexical candidates.")] = None,
    rrf_k: Annotated[int | None, typer.Option("--rrf-k", help="RRF constant.")] = None,
    output: Annotated[str, typer.Option("--format", help="json | table")] = "json",
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Search the index and print the JSON contract (or a table with --format table)."""
    from ragstead.stores import SqliteStore

    try:
        if private_only and public_only:
            raise RagsteadError("--private-only and --public-only exclude each other")
        if output not in ("json", "table"):
            raise RagsteadError(f"--format must be json or table, got {output!r}")
        settings = _settings(root, config, db)
        chosen = _mode(hybrid, lexical_only, vector, mode, settings.default_mode)
        filters = QueryFilters.build(user, doc_type, public_only, date_from, date_to, include_archive, tag)
        options = SearchOptions(
            mode=chosen, k=k, top_k_vector=top_k_vector or settings.top_k_vector,
            top_k_lexical=top_k_lexical or settings.top_k_lexical,
            rrf_k=settings.rrf_k if rrf_k is None else rrf_k,
        )
        options.validate()
        if not settings.db_file.exists():
            raise RagsteadError(f"no index at {settings.db_file}; run `ragstead index` first")
        store = SqliteStore(settings.db_file)
        embedder = None
        if chosen != "lexical":
            from ragstead.embeddings import default_embedder

            embedder = default_embedder()
        payload = search(question, store, embedder, filters, options, settings.path_rules)
        store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
    if output == "table":
        _print_table(payload)
    else:
        for row in payload["results"]:
            row.pop("text", None)  # the snippet is the contract; full text stays in the index
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))


@app.command()
def status(root: RootOpt = None, config: ConfigOpt = None, db: DbOpt = None) -> None:
    """Print index counts, the embedding model and the integrity check as JSON."""
    from ragstead.stores import SqliteStore

    try:
        settings = _settings(root, config, db)
        if not settings.db_file.exists():
            raise RagsteadError(f"no index at {settings.db_file}; run `ragstead index` first")
        store = SqliteStore(settings.db_file)
        stats = store.stats() | {"integrity": store.integrity_check()}
        store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps(stats, indent=2))


def main() -> None:
    """Console-script entry point."""
    app()
