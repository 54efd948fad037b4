"""`ragstead keys`: API keys for `ragstead serve`."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from ragstead.cli import _output
from ragstead.cli._app import Group
from ragstead.cli._flags import NO_PROJECT_FLAGS, JsonOpt, ProjectFlags, with_project_flags
from ragstead.cli._output import echo_json, human_console, library_errors, say
from ragstead.filters import split_values

keys_app = typer.Typer(cls=Group, no_args_is_help=True, help="Manage API keys for `ragstead serve`.")


def _key_file(project: ProjectFlags):  # type: ignore[no-untyped-def]
    from ragstead.api.keys import KeyFile

    return KeyFile(project.open().api_keys_file)


def _key_summary(record: dict[str, Any]) -> str:
    label = f", label {record['label']!r}" if record["label"] else ""
    return f"{record['key_id']} for {record['user_slug']} (scopes {','.join(record['scopes'])}{label})"


@keys_app.command("add", epilog="""Examples:
  ragstead keys add --user alice                 # the key alone on stdout
  ragstead keys add --user bob --scopes query --label "bob's laptop"
  ragstead keys add --user alice --json""")
@with_project_flags(store=False)
def keys_add(
    user: Annotated[str, typer.Option("--user", help="The user slug this key acts as.")],
    scopes: Annotated[str, typer.Option(help="Comma-separated subset of: query, ask, upload, delete.",
                                        show_default="all")] = "",
    label: Annotated[str, typer.Option(help="A note to tell keys apart.")] = "",
    as_json: JsonOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Create a key and print it once (only its SHA-256 is stored)."""
    from ragstead.api.keys import SCOPES

    with library_errors():
        key, record = _key_file(project).add(user, split_values([scopes]) or SCOPES, label)
    if as_json:
        echo_json({"key": key, **record.to_dict()})
        return
    typer.echo(key)
    typer.echo(f"created key {_key_summary(record.to_dict())}", err=True)
    say("this is the only time the key is shown; it cannot be shown again (only its SHA-256 is kept)",
         err=True, fg="yellow")


@keys_app.command("list", epilog="""Examples:
  ragstead keys list
  ragstead keys list --json""")
@with_project_flags(store=False)
def keys_list(as_json: JsonOpt = False, project: ProjectFlags = NO_PROJECT_FLAGS) -> None:
    """List keys (ids, users, scopes; never the keys)."""
    with library_errors():
        records = [r.to_dict() for r in _key_file(project).list()]
    if as_json:
        echo_json(records)
        return
    if not records:
        typer.echo("no keys yet; create one: ragstead keys add --user SLUG")
        return
    columns = ("id", "user", "scopes", "label", "created", "state")
    if not _output.on_terminal():  # a pipe: TSV, as `query` and `ls` print it there
        typer.echo("\t".join(columns))
        for r in records:
            typer.echo("\t".join((r["key_id"], r["user_slug"], ",".join(r["scopes"]), " ".join(r["label"].split()),
                                  r["created_at"], "revoked" if r["revoked"] else "active")))
        return
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for r in records:
        table.add_row(Text(r["key_id"]), Text(r["user_slug"]), Text(",".join(r["scopes"])), Text(r["label"]),
                      Text(r["created_at"]), Text("revoked", style="red") if r["revoked"] else Text("active"))
    human_console().print(table)


@keys_app.command("revoke", epilog="""Examples:
  ragstead keys revoke k_1a2b3c4d""")
@with_project_flags(store=False)
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (k_...).")],
    as_json: JsonOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Revoke a key; a running server refuses it from its next request."""
    with library_errors():
        record = _key_file(project).revoke(key_id)
    if as_json:
        echo_json(record.to_dict())
        return
    typer.echo(f"revoked {_key_summary(record.to_dict())}; a running server refuses it from its next request")
