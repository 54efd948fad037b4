"""The servers: `serve` (the HTTP API) and `mcp` (the Model Context Protocol)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ragstead.cli._app import app
from ragstead.cli._flags import NO_PROJECT_FLAGS, ModelOpt, ProjectFlags, with_project_flags
from ragstead.cli._output import err, library_errors, plural
from ragstead.cli.index import follow_in_background
from ragstead.errors import RagsteadError, require_extra
from ragstead.httpguard import listening

if TYPE_CHECKING:
    from ragstead.knowledge_base import KnowledgeBase

def _page_url(url: str, token: str | None) -> str:
    """The web page's address as `serve` prints it: with the owner's one-time token, Jupyter-style."""
    return f"{url}/?token={token}" if token else f"{url}/"


def _banner_json(url: str, kb: KnowledgeBase, as_user: str | None, token: str | None = None) -> str:
    """What `serve --json` prints on stdout once it accepts requests: the banner as one JSON line."""
    stats = kb.stats()
    return json.dumps({"url": url, "page": _page_url(url, token), "docs": f"{url}/docs", "store": kb.location,
                       "documents": stats.get("documents", 0), "chunks": stats.get("chunks", 0),
                       "model": kb.embedder.name, "auth": as_user is None, "as_user": as_user})


def _banner(url: str, kb: KnowledgeBase, as_user: str | None, token: str | None = None) -> str:
    """What `serve` prints on stderr once it accepts requests."""
    stats = kb.stats()
    auth = (f"off: every request acts as {as_user!r}" if as_user else
            f"on: the page link is {kb.settings.owner_slug}'s key while this server runs; API keys for "
            "others (ragstead keys add)")
    return "\n".join([
        f"ragstead is serving {url}",
        f"  web page  {_page_url(url, token)}",
        f"  API docs  {url}/docs",
        f"  store     {kb.location}",
        f"  index     {plural(stats.get('documents', 0), 'document')}, {plural(stats.get('chunks', 0), 'chunk')}",
        f"  model     {kb.embedder.name}",
        f"  auth      {auth}",
        "  stop      Ctrl+C",
    ])


@app.command(epilog="""Examples:
  ragstead keys add --user alice && ragstead serve
  ragstead serve --no-auth --as-user alice --port 0 --json  # URL as JSON""")
@with_project_flags
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port; the banner shows it).")] = 8000,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="No API keys (loopback only; needs --as-user).")] = False,
    as_user: Annotated[str | None, typer.Option("--as-user", help="With --no-auth: act as this user.")] = None,
    rate_per_minute: Annotated[int, typer.Option(help="Requests per minute per key (0: off).")] = 120,
    burst: Annotated[int, typer.Option(help="Requests per second per key (0: off).")] = 20,
    max_body_bytes: Annotated[int, typer.Option(help="Largest JSON request body.")] = 1_000_000,
    max_upload_bytes: Annotated[int, typer.Option(help="Largest upload.")] = 20_000_000,
    head_timeout: Annotated[float, typer.Option(help="Seconds a connection has to send a request's headers.")] = 10.0,
    body_timeout: Annotated[float, typer.Option(help="Seconds a request has to send its body.")] = 60.0,
    embed_cache: Annotated[int, typer.Option(help="Query vectors kept in an LRU cache (0: off).")] = 1024,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="POST /v1/query's default budget for the "
                                                               "returned text, in tokens (0: none).")] = 8000,
    log_level: Annotated[str, typer.Option("--log-level", help="warning | info (one access line per request) | "
                                                               "debug (also the server's own messages)")] = "info",
    as_json: Annotated[bool, typer.Option("--json", help="Once up, print the banner as one JSON line on stdout "
                                                         "(url, port chosen, store, model) instead.")] = False,
    watch_folders: Annotated[bool, typer.Option("--watch", help="Also keep the index following the configured "
                                                                "roots, as `ragstead watch` does.")] = False,
    model: ModelOpt = None,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Serve the HTTP API (FastAPI + uvicorn); API docs at /docs, served locally (they work offline)."""
    with library_errors():
        require_extra("server")
        from ragstead.api.logging import LOG_LEVELS

        if no_auth and host not in listening.LOOPBACK:
            raise RagsteadError(f"--no-auth is only allowed on loopback ({', '.join(listening.LOOPBACK)}), not "
                                f"{host!r}")
        if no_auth and not as_user:
            raise RagsteadError("--no-auth needs --as-user SLUG: every request then acts as that user")
        if as_user and not no_auth:
            raise RagsteadError("--as-user only applies with --no-auth; with keys, the key decides the user")
        if log_level not in LOG_LEVELS:
            raise RagsteadError(f"--log-level must be warning, info or debug, got {log_level!r}")
        listening.check_seconds(head_timeout=head_timeout, body_timeout=body_timeout)
        sock = listening.bind(host, port)  # before the model loads: a busy port fails at once
        try:
            from ragstead.api import ApiConfig, create_app
            from ragstead.api.serving import serve_api

            kb = project.open(model=model, embed_cache_size=embed_cache)
            # The name it listens on is one the server answers to (the Host check of httpguard/origin.py).
            kb.settings = kb.settings.with_overrides(allowed_hosts=(*kb.settings.allowed_hosts, host))
            import secrets

            # The owner opens the page with this link (Jupyter-style): their key for this server's life only.
            token = None if no_auth else secrets.token_urlsafe(24)
            api_config = ApiConfig(auth=not no_auth, as_user=as_user, rate_per_minute=rate_per_minute, burst=burst,
                                   max_body_bytes=max_body_bytes, max_upload_bytes=max_upload_bytes,
                                   max_tokens=max_tokens, owner_token=token)
            api = create_app(kb, api_config)
            show = _banner_json if as_json else _banner
            bound = listening.listen(sock, host, port, 2048)
            banner = show(f"http://{f'[{host}]' if ':' in host else host}:{bound}", kb, as_user if no_auth else None,
                          token)
        except BaseException:
            sock.close()
            raise
    if no_auth:
        err.print(f"[bold yellow]warning:[/] no authentication: every request acts as {as_user!r}", markup=True)
    stop_watching = follow_in_background(kb) if watch_folders else None
    try:
        serve_api(api, sock, host=host, log_level=log_level, head_seconds=head_timeout, body_seconds=body_timeout,
                  on_started=lambda: typer.echo(banner, err=not as_json))
    finally:
        if stop_watching is not None:
            stop_watching()


@app.command("mcp", epilog="""Examples:
  ragstead mcp --user alice                      # stdio: what Claude Desktop, Cursor and other clients start
  ragstead mcp --user alice --allow-write        # also the ingest and remember tools
  ragstead mcp --user alice --http --port 8765   # streamable HTTP at http://127.0.0.1:8765/mcp""")
@with_project_flags
def mcp_cmd(
    user: Annotated[str | None, typer.Option("--user", help="Whose private documents the client reaches "
                                                            "(default: the project owner).")] = None,
    public_only: Annotated[bool, typer.Option("--public-only", help="Serve public documents instead of the "
                                                                    "user's private ones.")] = False,
    include_archive: Annotated[bool, typer.Option("--include-archive", help="Let clients reach archived "
                                                                            "documents too.")] = False,
    allow_write: Annotated[bool, typer.Option("--allow-write", help="Add the write tools: ingest (URLs) and "
                                                                    "remember.")] = False,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio "
                                                      "(loopback only: there is no authentication).")] = False,
    host: Annotated[str, typer.Option(help="With --http: the loopback interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="With --http: TCP port (0: any free port).")] = 8765,
    log_level: Annotated[str, typer.Option("--log-level", help="warning | info | debug (logs go to stderr)")
                         ] = "warning",
    head_timeout: Annotated[float, typer.Option(help="With --http: seconds a connection has to send a request's "
                                                     "headers.")] = 10.0,
    model: ModelOpt = None,
    project: ProjectFlags = NO_PROJECT_FLAGS,
) -> None:
    """Serve the knowledge base to agents over the Model Context Protocol (stdio, or streamable HTTP).

    The scope is fixed here: tool arguments can narrow it, never widen it. stdout carries only the protocol.
    """
    import logging

    with library_errors():
        levels = {"warning": logging.WARNING, "info": logging.INFO, "debug": logging.DEBUG}
        if log_level not in levels:
            raise RagsteadError(f"--log-level must be warning, info or debug, got {log_level!r}")
        if http and host not in listening.LOOPBACK:
            raise RagsteadError(f"--http serves without authentication, so only on loopback "
                                f"({', '.join(listening.LOOPBACK)}), not {host!r}")
        listening.check_seconds(head_timeout=head_timeout)
        logging.basicConfig(stream=sys.stderr, level=levels[log_level],
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
        sock = listening.bind(host, port) if http else None  # a busy port fails before the model loads
        try:
            try:
                from ragstead.mcp_server import McpScope, run_stdio, serve_http
            except ImportError as exc:
                raise RagsteadError(f"the MCP server needs the mcp package ({exc.name or exc}): "
                                    "pip install 'ragstead[mcp]'") from None

            kb = project.open(model=model)
            scope = McpScope(user or kb.settings.owner_slug, public_only, include_archive, allow_write)
            kb.scope(user=scope.user)  # a valid slug, or one error line
            if not kb.exists():
                if not allow_write:
                    raise RagsteadError(f"no index at {kb.location} yet; run `ragstead index` first (or start "
                                        "with --allow-write to ingest into a new one)")
                kb.create()
            kb.embedder  # noqa: B018 - load the model now, not during the first tool call
            bound = listening.listen(sock, host, port, 128) if sock is not None else 0
        except BaseException:
            if sock is not None:
                sock.close()
            raise
    if sock is None:
        with kb:
            run_stdio(kb, scope)
        return
    err.print(f"ragstead mcp: serving {scope.describe()} at http://{host}:{bound}/mcp (Ctrl+C stops)",
              markup=False, highlight=False)
    with kb:
        serve_http(kb, scope, sock, host=host, log_level=log_level, head_seconds=head_timeout)
