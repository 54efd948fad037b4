"""Keeping the index current: `index`, `freshness` and `watch`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from ragstead.cli._app import app
from ragstead.cli._flags import (
    NO_PROJECT_FLAGS,
    AllowDownloadOpt,
    ModelOpt,
    ProjectFlags,
    QuietOpt,
    with_project_flags,
)
from ragstead.cli._output import (
    echo_json,
    err,
    escaped,
    fail,
    library_errors,
    plural,
    progress_bar,
    say,
    with_output_flags,
)
from ragstead.documents.formats.ocr import IMAGE_SUFFIXES
from ragstead.errors import RagsteadError
from ragstead.filters import split_values

if TYPE_CHECKING:
    from ragstead.knowledge_base import KnowledgeBase


@app.command()
@with_output_flags("text", "json")
@with_project_flags
def index(
    paths: Annotated[list[Path] | None, typer.Argument(
        help="Folders to index, inside the project. The first time, they are recorded as the project's roots "
             "in ragstead.toml, so a later plain `ragstead index` walks them again.", show_default=False)] = None,
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to index this once "
                                                             "(default: the configured roots).")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Drop the index and re-embed everything.")] = False,
    remask: Annotated[bool, typer.Option("--remask", help="Read every file again and mask its secrets with this "
                                                          "version's detector; only chunks whose text changes are "
                                                          "embedded again.")] = False,
    prune_missing_roots: Annotated[bool, typer.Option(
        "--prune-missing-roots", help="Drop the documents of roots missing on this machine (a removed folder, an "
                                      "imported index's), which are otherwise kept with a warning.")] = False,
    chunker: Annotated[str | None, typer.Option(help="words | sentences | markdown")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Words per chunk (words/markdown).")] = None,
    overlap: Annotated[int | None, typer.Option(help="Overlapping words between chunks.")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for another index run's lock.")] = 0.0,
    sentence_vectors: Annotated[bool, typer.Option(
        "--sentence-vectors", help="Also store a vector per sentence, so `--rerank` runs no model at query time "
                                   "(recorded in ragstead.toml: later runs keep them current).")] = False,
    output: str = "text",
    model: ModelOpt = None,
    allow_download: AllowDownloadOpt = False,
    quiet: QuietOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Name every file left out (by default: one "
                                                                  "line by type).")] = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Index files under the roots. Incremental: only new or changed files are embedded. Exit code 3: the run
    completed, but some files could not be read (listed as skipped); 130: interrupted (what was committed
    stays; run the same command to resume).

    Examples:

        ragstead index ~/notes            # index a folder (recorded as a root of the project)
        ragstead index                    # again, incrementally: only what changed
        ragstead index --rebuild          # re-embed everything, the old index kept until the new one is whole
        ragstead index --sentence-vectors # make `query --rerank` fast (about as long again as embedding chunks)
    """
    if paths and roots:
        raise fail(RagsteadError("give folders as arguments or --roots, not both"))
    chunking = {"chunker": chunker, "chunk_size": chunk_size, "overlap": overlap}
    with library_errors(), project.open(**chunking, model=model, allow_download=allow_download or None,
                      sentence_vectors=sentence_vectors or None) as kb:
        # Folders given as arguments are relative to where the command runs, as in any shell command.
        folders = [str(p.resolve()) for p in paths] if paths else (split_values([roots]) if roots else None)
        report = _run_index(kb, folders, quiet, rebuild=rebuild, wait=wait,
                            prune_missing_roots=prune_missing_roots, remask=remask)
        recorded = _record_settings(kb, report, paths, sentence_vectors, chunking)
        stats = kb.stats()
        notice = kb.masking_notice()  # once: an index masked by an older detector
    _warn_missing_roots(report, rebuild)
    if notice:
        err.print(f"[yellow]note:[/] {escape(notice)}", markup=True, highlight=False, soft_wrap=True)
    if output == "json":
        typer.echo(json.dumps({**report.to_dict(), "index": stats}, indent=2))
    else:
        _print_index_report(report, stats, verbose)
        for line in recorded:
            typer.echo(line)
    _completed_with_skips(report.failed)


def _run_index(kb: KnowledgeBase, folders: list[str] | None, quiet: bool, **options: Any) -> Any:
    """`kb.index` under a progress bar; Ctrl-C is one line saying how far it got, and exit code 130."""
    seen = [0, 0]
    with progress_bar(quiet, "indexing") as bar:
        def hook(done: int, total: int) -> None:
            seen[:] = [done, total]
            if bar:
                bar(done, total)

        try:
            return kb.index(folders, progress=hook, **options)
        except KeyboardInterrupt:
            err.print(f"interrupted after {seen[0]} of about {seen[1]} chunks; everything committed so far "
                      "is kept: run the same command to resume", highlight=False, soft_wrap=True)
            raise typer.Exit(130) from None


def _record_settings(kb: KnowledgeBase, report: Any, paths: list[Path] | None, sentence_vectors: bool,
                     chunking: dict[str, Any]) -> list[str]:
    """What this run records in ragstead.toml for the runs after it, one line each: the folders given as
    arguments (the roots), that sentence vectors are kept, and a rebuild's chunking."""
    recorded = kb.record_roots([kb.relative_path(p.resolve()) for p in paths]) if paths else None
    lines = []
    if sentence_vectors and kb.keep_sentence_vectors():
        lines.append("sentence vectors: recorded in ragstead.toml (sentence_vectors = true); later runs keep them "
                     "current")
    if recorded:
        lines.append(f"roots: {', '.join(recorded)} (recorded in ragstead.toml; `ragstead index` walks them again)")
    # A rebuild re-cut every document: its chunking is the project's from now on (not one that kept the old
    # index whole for a missing root).
    if recut := report.rebuild and kb.keep_chunking(chunking):
        lines.append(f"chunking: {', '.join(f'{k} = {v}' for k, v in recut.items())} (recorded in ragstead.toml; "
                     "later runs cut the same way)")
    return lines


def _print_index_report(report: Any, stats: dict[str, Any], verbose: bool) -> None:
    """`index`'s text: the counts, each file added, updated or removed, what was skipped, the secrets masked,
    and where the index is."""
    failed = f" ({len(report.failed)} failed)" if report.failed else ""
    typer.echo(
        f"added {len(report.added)}, updated {len(report.updated)}, removed {len(report.removed)}, "
        f"unchanged {report.unchanged}, skipped {len(report.skipped)}{failed} | chunks written "
        f"{report.chunks_written} (embedded {report.chunks_embedded}, reused {report.chunks_reused}) "
        f"in {report.seconds:.2f}s"
    )
    for label, paths in (("+", report.added), ("~", report.updated), ("-", report.removed)):
        for path in paths:
            typer.echo(f"  {label} {escaped(path)}")  # a newline in a file name cannot forge a line
    _print_skipped(report, verbose)
    for path, count in report.secrets.items():
        typer.echo(f"{escaped(path)}: {count} secret{'s' if count != 1 else ''}, masked")
    if report.sentence_vector_chunks:
        typer.echo(f"sentence vectors: {report.sentence_vector_chunks} chunks in {report.sentence_vector_seconds:.2f}s "
                   f"(for `--rerank`)")
    typer.echo(f"index: {stats['path']} ({stats['documents']} documents, {stats['chunks']} chunks)")


def _print_skipped(report: Any, verbose: bool) -> None:
    """The files left out, on stderr: each one that could not be read; the rest (by design) one by one with -v,
    else in one line by type; photos without text always in one line."""
    failed_paths = set(report.failed)
    # Photos without text are no news, one by one: one line names them all.
    photos = [item["path"] for item in report.skipped if item["path"].lower().endswith(IMAGE_SUFFIXES)
              and item["reason"].startswith("no text to index")]
    for item in report.skipped:  # what could not be read is always named; what was left out by design, with -v
        if item["path"] not in photos and (verbose or item["path"] in failed_paths):
            typer.echo(f"  skipped {escaped(item['path'])}: {escaped(item['reason'])}", err=True)
    if photos:
        typer.echo(f"  skipped {len(photos)} image{'s' if len(photos) != 1 else ''} with no text: "
                   f"{escaped(', '.join(photos[:10]))}{', …' if len(photos) > 10 else ''}", err=True)
    by_design = [s for s in report.skipped if s["path"] not in failed_paths and s["path"] not in photos]
    if not verbose and (summary := _skip_summary(by_design)):
        typer.echo(f"  {summary}", err=True)


def _warn_missing_roots(report: Any, rebuild: bool) -> None:
    """One `warning:` line per root this machine cannot re-read: its documents were kept (or pruned on request)."""
    for missing in report.missing_roots:
        count = plural(missing.documents, "document")
        where = (f"root {missing.root!r} is missing" if missing.reason == "missing" else
                 f"root {missing.root!r} holds imported documents whose files are not on this machine")
        if report.pruned:
            err.print(f"[bold yellow]warning:[/] {escape(where)}: dropped its {count} (--prune-missing-roots)",
                      markup=True, highlight=False, soft_wrap=True)
            continue
        kept = f"kept its {count}" + (" and the whole old index (not rebuilt: the model or chunking changed)"
                                      if rebuild and not report.rebuild else "")
        fix = "restore the folder" if missing.reason == "missing" else "copy its files here"
        err.print(f"[bold yellow]warning:[/] {escape(where)}: {kept}; {fix}, or drop them with "
                  "`ragstead index --prune-missing-roots`", markup=True, highlight=False, soft_wrap=True)


def _skip_summary(skipped: list[dict[str, str]]) -> str | None:
    """The files an index run left out by design (unsupported types, empty files, symlinks outside their scope)
    in one line, by type: `skipped 30 files: 28 .mp4, 2 .mov (unsupported; -v lists them)`."""
    from collections import Counter

    if not skipped:
        return None
    types: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for item in skipped:
        unsupported = re.fullmatch(r"unsupported file type '(.*)'", item["reason"])
        if unsupported:
            types[unsupported.group(1)] += 1
        else:
            others[item["reason"]] += 1
    by_type = ", ".join(f"{n} {suffix}" for suffix, n in types.most_common())
    if not others:
        return f"skipped {plural(len(skipped), 'file')}: {by_type} (unsupported; -v lists them)"
    parts = [f"{by_type} (unsupported)"] if types else []
    parts += [f"{n} {reason}" for reason, n in others.most_common()]
    return f"skipped {plural(len(skipped), 'file')}: {'; '.join(parts)} (-v lists them)"


def _completed_with_skips(failed: list[str]) -> None:
    """`index`'s exit code 3: the run completed and committed, but these supported files could not be read."""
    if failed:
        raise typer.Exit(code=3)


def _plan_line(entry: dict[str, Any]) -> str:
    mark = {"new": "+", "changed": "~", "deleted": "-"}[entry["status"]]
    reason = f": {escaped(entry['reason'])}" if entry.get("reason") else ""
    return f"  {mark} {escaped(entry.get('path') or entry.get('url') or '')}{reason}"


@app.command(epilog="""Examples:
  ragstead freshness                            # a dry run: the plan in kb/rag/refresh_plan.jsonl, exit 1 if stale
  ragstead freshness --apply                    # re-index exactly what the plan lists
  ragstead freshness --exec 'python embed.py'   # a hook of your own reads the plan at $RAGSTEAD_PLAN
  ragstead freshness --json                     # the report, for scripts""")
@with_output_flags("text", "json")
@with_project_flags
def freshness(
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to compare (default: the "
                                                             "configured roots).")] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="Where to write the refresh plan (JSONL).",
                                              show_default="kb/rag/refresh_plan.jsonl")] = None,
    ledger: Annotated[Path | None, typer.Option("--ledger", help="The ledger to append to (JSONL).",
                                                show_default="kb/rag/embedding_ledger.jsonl")] = None,
    apply: Annotated[bool, typer.Option("--apply", help="Re-index exactly the planned files.")] = False,
    exec_command: Annotated[str | None, typer.Option("--exec", help="Run this command with the plan's path in "
                                                                    "$RAGSTEAD_PLAN (instead of --apply).")] = None,
    exec_timeout: Annotated[float, typer.Option("--exec-timeout", help="Seconds the --exec hook may run before "
                                                                       "it is stopped.")] = 3600.0,
    full: Annotated[bool, typer.Option("--full", help="Ignore the previous manifest (missing or damaged): plan "
                                                      "every file as new.")] = False,
    urls: Annotated[bool, typer.Option("--urls", help="Also re-check ingested URLs (conditional GET, content "
                                                      "hash).")] = False,
    wait: Annotated[float, typer.Option(help="Seconds to wait for a running index's lock.")] = 0.0,
    output: str = "text",
    quiet: QuietOpt = False,
    model: ModelOpt = None,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Compare the files with the last index run: write the refresh plan, log it to the ledger, and optionally
    apply it or hand it to a hook. Exit code 0: fresh (or applied), 1: stale and not applied, 2: an error.
    """
    with library_errors(), project.open(model=model) as kb, progress_bar(quiet, "applying") as bar:
        report = kb.freshness(split_values([roots]) if roots else None,
                              plan=plan.resolve() if plan else None, ledger=ledger.resolve() if ledger else None,
                              apply=apply, exec_command=exec_command, exec_timeout=exec_timeout, full=full,
                              urls=urls, wait=wait, progress=bar)
    data = report.to_dict()
    if output == "json":
        echo_json(data)
        raise typer.Exit(report.exit_code)
    counts = data["counts"]
    state = "stale" if report.stale else "fresh"
    typer.echo(f"{state}: {counts['new']} new, {counts['changed']} changed, {counts['deleted']} deleted, "
               f"{counts['unchanged']} unchanged | plan: {data['plan']} (run {data['run_id']})")
    for entry in data["entries"]:
        typer.echo(_plan_line(entry))
    for item in data["skipped"]:
        typer.echo(f"  skipped {escaped(item.get('path') or item.get('url') or '')}: {escaped(item['reason'])}",
                   err=True)
    for missing in data["missing_roots"]:
        typer.echo(f"  note: root {missing} does not exist; its documents were not compared", err=True)
    if data["applied"] is not None:
        done = data["applied"]
        typer.echo(f"applied: added {len(done['added'])}, updated {len(done['updated'])}, removed "
                   f"{len(done['removed'])}, skipped {len(done['skipped'])} | chunks embedded "
                   f"{done['chunks_embedded']}, reused {done['chunks_reused']} in {done['seconds']:.2f}s")
        for item in done["skipped"]:
            typer.echo(f"  skipped {escaped(item['path'])}: {escaped(item['reason'])}", err=True)
        for page in done["urls"]:
            typer.echo(f"  ingested again {page['url']}: {page['status']}"
                       + (f" ({page['reason']})" if page["reason"] else ""))
    if data["exec"] is not None:
        hook = data["exec"]
        how = "ok" if hook["exit_code"] == 0 else hook["error"]
        typer.echo(f"exec: {hook['command']}: {how} in {hook['seconds']:.1f}s")
    if report.outcome == "planned":
        say("not applied: run with --apply (or --exec CMD) to bring the index up to date", err=True, dim=True)
    raise typer.Exit(report.exit_code)


def _batch_line(batch: Any) -> str | None:
    """`watch`: one line for a batch that changed the index or could not read something; None for noise."""
    clock = batch.time[11:19]
    if batch.report is None:
        return f"{clock} {batch.note}" if batch.note else None
    report = batch.report
    if not batch.changed and not batch.catch_up:
        return None
    paths = [*report.added, *report.updated, *report.removed]
    shown = escaped(", ".join(paths[:5])) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    head = f"{clock} {batch.note or 'caught up' if batch.catch_up else ''}".rstrip()
    line = f"{head} +{len(report.added)} ~{len(report.updated)} -{len(report.removed)}"
    line += f": {shown}" if shown else f" ({report.unchanged} unchanged)" if batch.catch_up else ""
    if not batch.catch_up:
        line += f" ({plural(batch.events, 'event')}, {report.seconds:.2f}s)"
    failed = [s for s in report.skipped if s["path"] in report.failed]
    if failed:
        line += "; could not read " + escaped(", ".join(f"{s['path']} ({s['reason']})" for s in failed[:5]))
    return line


@app.command(epilog="""Examples:
  ragstead watch                  # the configured roots; Ctrl-C stops
  ragstead watch notes --debounce 2
  ragstead watch --json           # one JSON object per batch""")
@with_project_flags
def watch(
    paths: Annotated[list[Path] | None, typer.Argument(help="Folders to follow, inside the project (default: the "
                                                            "configured roots).", show_default=False)] = None,
    debounce: Annotated[float, typer.Option(help="Seconds the folders must be quiet before a batch is "
                                                 "indexed.")] = 1.0,
    wait: Annotated[float, typer.Option(help="Seconds each batch waits for a running index's lock.")] = 30.0,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per batch on stdout.")] = False,
    model: ModelOpt = None,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Keep the index following the folders: catch up first, then index each burst of changes as it settles.
    One line per batch. Ctrl-C stops after the batch in flight (twice: at once)."""

    def show(batch: Any) -> None:
        if as_json:
            typer.echo(json.dumps(batch.to_dict(), ensure_ascii=False))
        elif (line := _batch_line(batch)) is not None:
            typer.echo(line)

    with library_errors(), project.open(model=model) as kb:
        folders = [str(p.resolve()) for p in paths] if paths else None
        names = ", ".join(kb.relative_path(f) for f in folders) if folders else ", ".join(kb.settings.roots)
        err.print(f"watching {names} in {kb.root} (Ctrl-C stops)", markup=False, highlight=False, soft_wrap=True)
        kb.watch(folders, debounce=debounce, wait=wait, on_batch=show)
    err.print("stopped", markup=False, highlight=False)


def follow_in_background(kb: KnowledgeBase) -> Callable[[], None]:
    """`serve --watch`: the folder follower in a thread beside the server; returns the call that stops it."""
    import threading

    stop = threading.Event()

    def follow() -> None:
        try:
            kb.watch(stop=stop, on_batch=lambda batch: (line := _batch_line(batch)) and err.print(
                f"watch: {line}", markup=False, highlight=False, soft_wrap=True))
        except RagsteadError as exc:
            err.print(f"[bold red]error:[/] watch stopped: {escape(str(exc))}", markup=True, highlight=False)

    thread = threading.Thread(target=follow, name="ragstead-watch", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=60)

    return halt
