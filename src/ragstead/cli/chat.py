"""`chat`: a conversation of `ask` turns, at a prompt or from a pipe."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from ragstead.cli._app import app
from ragstead.cli._flags import (
    CLI_SPELLING,
    NO_PROJECT_FLAGS,
    AskFlags,
    ProjectFlags,
    RevealOpt,
    SearchFlags,
    with_ask_flags,
    with_project_flags,
    with_search_flags,
)
from ragstead.cli._output import err, library_errors, say, with_output_flags
from ragstead.cli.search import AnswerLines, answer_stream, fallback_notes, print_answer, revealed_answer
from ragstead.errors import InvalidQueryError, RagsteadError

if TYPE_CHECKING:
    from ragstead.knowledge_base import KnowledgeBase

CHAT_HELP = "/new starts a new conversation, /quit (or Ctrl-D) leaves"


@app.command(epilog="""Examples:
  ragstead chat --user alice                      # a conversation in the terminal (/new, /quit)
  ragstead chat --extractive < questions.txt      # one question a line, answered turn by turn
  printf 'When does the lease end?\\nAnd the deposit?\\n' | ragstead chat --json   # JSON Lines, a turn a line""")
@with_search_flags
@with_ask_flags
@with_output_flags("text", "json")
@with_project_flags(models=True)
def chat(
    flags: SearchFlags,
    answer_flags: AskFlags,
    *,
    output: str = "text",
    reveal_secrets: RevealOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """A conversation: follow-up questions ("and the deposit?", "who wrote it?") are answered with the earlier
    turns' subject carried in, in the same scope and with citations, as `ask` answers. On a terminal: a prompt
    (/new starts over, /quit or Ctrl-D leaves); questions piped in, one a line, are answered turn by turn."""
    with library_errors():
        fields = answer_flags.request_fields()
        flags.ask_request("?", **fields)  # a bad flag is an error before the first question, not at every turn
    interactive = sys.stdin.isatty()
    failed = False
    with library_errors(), project.open() as kb:
        kb.store  # noqa: B018 - a missing index is one error before the first question, not one per turn
        if answer_flags.remember and not flags.user and not kb.settings.personal:
            raise RagsteadError("--remember needs --user in a team project: memory belongs to one person")
        if interactive and output == "text":
            say(f"Ask about your documents; {CHAT_HELP}.", err=True, dim=True)
        conversation = None
        for line in _chat_lines(interactive and output == "text"):
            if line.startswith("/"):
                conversation = _chat_command(line, conversation)
                if conversation == "quit":
                    break
                continue
            try:
                conversation = _chat_turn(kb, flags.ask_request(line, **fields), conversation, output,
                                          reveal_secrets, echo=not interactive)
            except RagsteadError as exc:  # one turn's error: its line, and the conversation goes on
                message = exc.respelled(CLI_SPELLING) if isinstance(exc, InvalidQueryError) else str(exc)
                err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
                failed = True
    if failed:
        raise typer.Exit(code=2)


def _chat_lines(prompt: bool) -> Iterator[str]:
    """The questions: typed at a prompt with line editing and this session's history (never written to disk),
    or read from a pipe, one a line; blank lines are skipped."""
    if not prompt:
        for line in sys.stdin:
            if line.strip():
                yield line.strip()
        return
    import readline  # noqa: F401 - line editing and the up-arrow history of input()

    while True:
        try:
            line = input("you> ")
        except EOFError:  # Ctrl-D
            typer.echo("")
            return
        if line.strip():
            yield line.strip()


def _chat_command(line: str, conversation: Any) -> Any:
    """A `/command` of the chat loop: the conversation it leaves (None after /new), or "quit"."""
    word = line.split()[0].lower()
    if word in ("/quit", "/exit", "/q"):
        return "quit"
    if word == "/new":  # notes on stderr: stdout stays the answers (JSON Lines with --json)
        say("(a new conversation)", err=True, dim=True)
        return None
    say(f"{CHAT_HELP}; anything else is a question" if word in ("/help", "/?") else
         f"unknown command {word}: {CHAT_HELP}", err=True)
    return conversation


def _chat_turn(kb: KnowledgeBase, request: Any, conversation: Any, output: str, reveal_secrets: bool, *,
               echo: bool) -> Any:
    """Ask one turn and print it: a JSON line, or the answer as `ask` prints it (a piped question first)."""
    if echo and output == "text":
        typer.echo(f"> {request.query}")
    stream = answer_stream(output, reveal_secrets)
    conversation = kb.chat(request, conversation=conversation, on_text=stream.feed if stream else None)
    turn = conversation.last
    result = turn.answer
    if result is not None and reveal_secrets:
        result = revealed_answer(kb, result)
        turn = replace(turn, answer=result)
    if result is not None:
        fallback_notes(result)
    if output == "json":
        typer.echo(json.dumps({"turn": len(conversation.turns), **turn.to_dict()}, ensure_ascii=False))
    elif result is None:  # a "remember that ..." turn: the memory rule's decision
        AnswerLines().line(turn.text)
    else:
        print_answer(result, stream, asked_as=turn.rewritten if turn.rewrite.method != "none" else None)
    if output == "text":
        typer.echo("")  # a blank line between turns
    return conversation
