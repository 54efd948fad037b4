"""`ragstead guard`: keep private documents and secrets out of git."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragstead.cli._app import Group
from ragstead.cli._flags import NO_PROJECT_FLAGS, JsonOpt, ProjectFlags, with_project_flags
from ragstead.cli._output import echo_json, err, human_console, library_errors, plural

guard_app = typer.Typer(cls=Group, no_args_is_help=True, help="Keep private documents and secrets out of git: a "
                                                               "pre-push hook, and a check for CI.")


@guard_app.command("install", epilog="""Examples:
  ragstead guard install                     # .git/hooks/pre-push
  ragstead guard install --hook pre-commit   # check each commit's staged changes too""")
@with_project_flags(db=False, store=False)
def guard_install(
    hook: Annotated[str, typer.Option("--hook", help="pre-push | pre-commit")] = "pre-push",
    force: Annotated[bool, typer.Option("--force", help="Keep a hook that is not ragstead's as <hook>.local, "
                                                        "run after the guard.")] = False,
    as_json: JsonOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Write the git hook that runs `ragstead guard check` before each push (or commit)."""
    from ragstead.services.guard import install

    with library_errors():
        result = install(project.root, project.config, hook=hook, force=force)
    if as_json:
        echo_json(result)
        return
    typer.echo(f"installed {result['hook']}: {hook} now blocks private documents and secrets")
    if result["kept"]:
        typer.echo(f"  your own hook is kept as {result['kept']} and runs after the guard")
    skip = "git push --no-verify" if hook == "pre-push" else "git commit --no-verify"
    typer.echo(f"  to publish a blocked file anyway, knowingly: {skip}")


@guard_app.command("check", epilog="""Examples:
  ragstead guard check                       # every tracked file (CI)
  ragstead guard check --staged              # what the next commit adds
  ragstead guard check --range origin/main..HEAD
  ragstead guard check docs/ notes.md --json""")
@with_project_flags(db=False, store=False)
def guard_check(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files or folders of the working tree to check.",
                                                       show_default=False)] = None,
    staged: Annotated[bool, typer.Option("--staged", help="Check the staged changes.")] = False,
    rev_range: Annotated[str | None, typer.Option("--range", help="Check every commit of A..B.")] = None,
    pre_push: Annotated[bool, typer.Option("--pre-push", help="Read the refs git gives a pre-push hook on stdin "
                                                              "and check the commits they send.")] = False,
    remote: Annotated[str | None, typer.Option("--remote", help="With --pre-push: the remote pushed to.")] = None,
    max_scan_mb: Annotated[float, typer.Option("--max-scan-mb", help="Larger text files are blocked: too large to "
                                                                     "scan for secrets.")] = 2.0,
    as_json: JsonOpt = False,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Block private paths and secret-like files or contents. Exit code 0: nothing to block, 1: blocked files
    (each named with why), 2: an error."""
    from ragstead.services.guard import check, read_pre_push_input

    with library_errors():
        report = check(project.root, project.config, staged=staged, rev_range=rev_range, paths=paths or (),
                       pre_push=read_pre_push_input() if pre_push else None, remote=remote,
                       max_scan_mb=max_scan_mb)
    if as_json:
        echo_json(report.to_dict())
    else:
        # A hook's stdout is not for people: everything goes to stderr there.
        say = err.print if pre_push else human_console().print
        if report.ok:
            say(f"ok: {plural(report.checked, 'file')} in {report.what}, nothing private or secret-like",
                markup=False, highlight=False, soft_wrap=True)
        else:
            say(f"ragstead guard: {plural(len(report.blocked), 'file')} blocked in {report.what} "
                f"({report.checked} checked):", markup=False, highlight=False, soft_wrap=True)
            for finding in report.blocked:
                say(f"  blocked {finding.path}: {finding.reason}", markup=False, highlight=False, soft_wrap=True)
            escape_hatch = ("git push --no-verify" if pre_push else "git commit --no-verify" if staged else
                            "remove them, or skip the hook once with --no-verify")
            say(f"to publish them anyway, knowingly: {escape_hatch}", markup=False, highlight=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(1)
