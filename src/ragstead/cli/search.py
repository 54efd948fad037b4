"""Reading the index: `query` and `ask`, and how a hit table and an answer are printed."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from ragstead.cli import _output
from ragstead.cli._app import app
from ragstead.cli._flags import (
    NO_PROJECT_FLAGS,
    AskFlags,
    ProjectFlags,
    RevealOpt,
    SearchFlags,
    with_ask_flags,
    with_project_flags,
    with_search_flags,
)
from ragstead.cli._output import (
    echo_json,
    err,
    escaped,
    human_console,
    library_errors,
    plural,
    print_rows,
    say,
    with_output_flags,
)

if TYPE_CHECKING:
    from ragstead.knowledge_base import KnowledgeBase


def _relevant(row: dict[str, Any], floor: float) -> bool:
    """A hit worth showing a person: close in meaning (its cosine reaches `floor`, where `ask` hands a chunk to the
    answerer) or sharing a word with the question (a lexical match); lexical-only results have no cosine."""
    return row.get("vector_score") is None or row["vector_score"] >= floor or row.get("lexical_score") is not None


def _hit_location(row: dict[str, Any], lines: tuple[int, int] | None = None) -> str:
    """Where a hit sits, as a person finds it again: its page, its lines (a plain-text file), its section, else
    nothing (a chunk number means nothing to a reader)."""
    if row.get("page"):
        return f"p.{row['page']}"
    if lines:
        return f"line {lines[0]}" if lines[0] == lines[1] else f"lines {lines[0]}-{lines[1]}"
    return row.get("section_path") or ""


def _print_table(payload: dict[str, Any], show_all: bool = False,
                 lines: Mapping[str, tuple[int, int]] | None = None) -> None:
    """`query` for people: the relevant hits (the first always), numbered 1, 2, 3 as shown, and how many less
    relevant ones were hidden (`final_rank`, the rank among every hit, stays in --json, jsonl and csv). On a
    terminal, one block per hit (the path whole, the snippet wrapped at words); in a pipe, TSV with a header."""
    from ragstead.answer.ask import CONTEXT_FLOOR

    results = payload["results"]
    shown = [row for i, row in enumerate(results) if show_all or i == 0 or _relevant(row, CONTEXT_FLOOR)]
    hidden = len(results) - len(shown)
    if _output.on_terminal():
        console = human_console()
        console.print(Text(f"{payload['mode']}: {payload['question']}", style="bold"), soft_wrap=True)
        for rank, row in enumerate(shown, start=1):  # numbered as shown: a hidden hit leaves no gap
            where = _hit_location(row, (lines or {}).get(row["chunk_id"]))
            head = Text.assemble((f"{rank:>2}  ", "bold"), (escaped(row["file_path"]), "cyan"),
                                 f"  {where}  " if where else "  ", (f"{row['score']:.4f}", "dim"))
            console.print(head, soft_wrap=True)  # a path is never broken: the terminal wraps the line whole
            console.print(Padding(Text(" ".join(row["snippet"].split())), (0, 0, 0, 4)))
    else:
        typer.echo("\t".join(("rank", "file", "loc", "score", "snippet")))
        for rank, row in enumerate(shown, start=1):
            where = _hit_location(row, (lines or {}).get(row["chunk_id"]))
            cells = (str(rank), row["file_path"], where, f"{row['score']:.4f}", " ".join(row["snippet"].split()))
            typer.echo("\t".join(escaped(cell) for cell in cells))  # a tab or newline in a name stays in its cell
    if hidden:
        err.print(f"{plural(hidden, 'less relevant hit')} hidden (--all shows them; --json has every hit)",
                  markup=False, highlight=False, soft_wrap=True, style="dim")
    if not results:
        typer.echo("no results in scope (widen it: --user, --doc-type, --public-only, --include-archive)")


QUERY_FORMATS = ("table", "json", "jsonl", "csv")
QUERY_CSV_COLUMNS = ("rank", "file_path", "score", "snippet", "page", "section_path", "chunk_index", "doc_type",
                     "user_slug", "is_private", "created_at", "title", "vector_score", "lexical_score",
                     "rerank_score", "chunk_id", "doc_id")


@app.command(epilog="""Examples:
  ragstead query "what did we decide about billing" --user alice
  ragstead query "invoice runs" --lexical-only --doc-type dossier -k 3
  ragstead query "travel policy" --json      # the JSON contract (docs/cli.md)
  ragstead query "travel policy" --format csv > hits.csv""")
@with_search_flags
@with_output_flags(*QUERY_FORMATS)
@with_project_flags(models=True)
def query(
    question: Annotated[str, typer.Argument(help="What to look for.")],
    flags: SearchFlags,
    output: str = "table",
    show_all: Annotated[bool, typer.Option("--all", help="Table: also the hits neither close in meaning nor sharing "
                                                         "a word with the question (--json always has them).")
                        ] = False,
    reveal_secrets: RevealOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Search the index: a table of the best chunks (--json: the JSON contract; jsonl and csv too)."""
    with library_errors():
        request = flags.search_request(question)
        with project.open() as kb:
            payload = kb.search(request).to_dict()
            if reveal_secrets:  # the owner's own terminal, asked for explicitly
                payload = _revealed(payload, kb.revealer(r["file_path"] for r in payload["results"]))
            lines = kb.line_spans(payload["results"]) if output == "table" else {}
    if output == "table":
        _print_table(payload, show_all, lines)
    elif output == "json":
        echo_json(payload)
    else:
        print_rows([{"rank": r["final_rank"], **r} for r in payload["results"]], QUERY_CSV_COLUMNS, output)


def _revealed(value: Any, reveal: Callable[[str], str]) -> Any:
    """`value` (JSON-like) with every string's masked secrets given back."""
    if isinstance(value, str):
        return reveal(value)
    if isinstance(value, dict):
        return {k: _revealed(v, reveal) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_revealed(v, reveal) for v in value]
    return value


def _ask_trailer(result: Any) -> str:
    """The last line of `ask`'s text: the answer's explanation (Answer.explain), with the settings it names
    spelled as this command's flags."""
    return str(result.explain(lambda name: "--" + name.replace("_", "-")))


@app.command(epilog="""Examples:
  ragstead ask "what did we decide about the billing database" --user alice
  ragstead ask "how do we back up?" --extractive   # offline: never an LLM
  ragstead ask "best pancake recipe" --json        # the ask JSON""")
@with_search_flags
@with_ask_flags
@with_output_flags("text", "json")
@with_project_flags(models=True)
def ask(
    question: Annotated[str, typer.Argument(help="The question.")],
    flags: SearchFlags,
    answer_flags: AskFlags,
    *,
    output: str = "text",
    reveal_secrets: RevealOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Answer from your documents only, with citations, or say that nothing relevant was found. A list or count
    question ("which notes mention Lisbon?") is answered from every document in scope."""
    with library_errors():
        request = flags.ask_request(question, **answer_flags.request_fields())
        stream = answer_stream(output, reveal_secrets)
        with project.open() as kb:
            result = kb.ask(request, on_text=stream.feed if stream else None)
            hint = None if answer_flags.extractive or result.listing is not None else kb.consent_hint(request.llm)
            if reveal_secrets:  # the owner's own terminal, asked for explicitly
                result = revealed_answer(kb, result)
    if hint:  # privacy: an LLM key alone sends nothing; say how to opt in
        err.print(f"note: {hint}", markup=False, highlight=False, soft_wrap=True)
    fallback_notes(result)
    if output == "json":
        echo_json(result.to_dict())
        return
    print_answer(result, stream)


def answer_stream(output: str, reveal_secrets: bool) -> WordWrapper | None:
    """Where a streamed answer goes: wrapped on a terminal; nowhere in a pipe, in JSON or when secrets are revealed
    (the revealed text is printed once, whole)."""
    streaming = output == "text" and _output.on_terminal() and not reveal_secrets
    return WordWrapper(human_console().width) if streaming else None


def revealed_answer(kb: KnowledgeBase, result: Any) -> Any:
    """The answer with the secret values the index masks given back, read again from the files it cites."""
    reveal = kb.revealer(c.source for c in result.citations)
    return replace(result, text=reveal(result.text), citations=tuple(replace(
        c, snippet=reveal(c.snippet), quote=c.quote and replace(c.quote, text=reveal(c.quote.text)),
        quotes=tuple(replace(q, text=reveal(q.text)) for q in c.quotes)) for c in result.citations))


def fallback_notes(result: Any) -> None:
    """Each answerer or tool that failed, one `note:` line on stderr (with --json too: the JSON has `fallbacks`)."""
    for fallback in result.fallbacks:
        after = ("the answer went on without it" if fallback["provider"].startswith("tool:")
                 else "the next answerer took over")
        err.print(f"[yellow]note:[/] {escape(fallback['provider'])} failed ({escape(fallback['error'])}); "
                  f"{after}", markup=True, highlight=False, soft_wrap=True)


def print_answer(result: Any, stream: WordWrapper | None, asked_as: str | None = None) -> None:
    """`ask`'s text for people: the answer (already streamed when `stream`), each citation with the sentence(s)
    it rests on, what a newer note superseded, the notes, and a last line naming who answered and how sure;
    `asked_as`, the question that was searched when a conversation rewrote it, goes before that last line."""
    show = AnswerLines()
    if result.listing is not None:  # the completeness line, then one line per document with its quote
        show.line(result.text)
        for citation in result.citations:
            quoted = citation.quote.text if citation.quote else citation.snippet
            show.line(f"[{citation.n}] {escaped(citation.where)}: “{escaped(' '.join(quoted.split()))}”", indent=4)
        if asked_as:
            say(show.wrapped(f"asked as: {asked_as}"), dim=True)
        return
    if stream:
        stream.close()
    else:
        show.line(result.text)
    for citation in result.citations:  # where it is, then the sentence(s) the answer rests on
        show.line(f"[{citation.n}] {escaped(citation.where)}:", indent=4)  # a newline in a name forges no line
        for quoted in [q.text for q in citation.quotes] or [citation.snippet]:
            show.line(f"    “{escaped(' '.join(quoted.split()))}”", indent=4)
    for older in result.superseded:  # the newer note wins: say which cited statement it replaced
        show.line(escaped(f"superseded: [{older.n}] {older.source} ({older.date}), by [{older.superseded_by}] "
                           f"{older.newer_source} ({older.newer_date})"), indent=4)
    for note in result.notes:
        err.print(f"[yellow]note:[/] {escape(note)}", markup=True, highlight=False, soft_wrap=True)
    if result.memory_write is not None:
        err.print(f"memory: {result.memory_write['note']}", markup=False, highlight=False, soft_wrap=True)
    if result.withheld:
        err.print(f"withheld from {result.provider} (local-only): {', '.join(result.withheld)}", markup=False,
                  highlight=False, soft_wrap=True)
    if asked_as:
        say(show.wrapped(f"asked as: {asked_as}"), dim=True)
    say(show.wrapped(_ask_trailer(result)), dim=True)


class AnswerLines:
    """`ask`'s lines for people: wrapped at words to the terminal's width (a long line's rest indented by
    `indent`), as `query` wraps its snippets; in a pipe, each line whole, for grep."""

    def __init__(self) -> None:
        self.width = human_console().width if _output.on_terminal() else None

    def line(self, text: str, indent: int = 0) -> None:
        typer.echo(self.wrapped(text, indent))

    def wrapped(self, text: str, indent: int = 0) -> str:
        if self.width is None:
            return text
        import textwrap

        return "\n".join(textwrap.fill(paragraph, self.width, subsequent_indent=" " * indent, break_long_words=False,
                                        break_on_hyphens=False, drop_whitespace=True) if paragraph.strip() else ""
                          for paragraph in text.split("\n"))


class WordWrapper:
    """A streamed answer on a terminal, wrapped at words as it arrives: a word is written once it is whole, on a
    new line when it would pass `width` (a word longer than the line stays whole)."""

    def __init__(self, width: int) -> None:
        self.width, self.column, self.pending, self.space = width, 0, "", False

    def feed(self, piece: str) -> None:

        tokens = re.split(r"(\s+)", self.pending + piece)
        self.pending = tokens.pop() if tokens and tokens[-1] and not tokens[-1].isspace() else ""
        for token in tokens:
            self._put(token)

    def close(self) -> None:
        self._put(self.pending)
        self.pending = ""
        typer.echo("")

    def _put(self, token: str) -> None:
        if not token:
            return
        if token.isspace():
            if "\n" not in token:
                self.space = True
                return
            typer.echo("\n" * (token.count("\n") - 1))
            indent = token.rsplit("\n", 1)[1]  # a list item's indentation on its new line stays
            typer.echo(indent, nl=False)
            self.column, self.space = len(indent), False
            return
        gap = 1 if self.space and self.column else 0
        if self.column and self.column + gap + len(token) > self.width:
            typer.echo("")
            self.column, gap = 0, 0
        typer.echo(" " * gap + token, nl=False)
        self.column += gap + len(token)
        self.space = False
