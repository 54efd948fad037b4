"""Rows from an analytics database, read-only: ClickHouse (clickhouse-connect, over HTTP(S) or an in-process
chDB data folder), PostgreSQL (psycopg) or SQLite, named by a URL whose password never leaves this module.

The query is the user's, and it runs read-only in three independent ways: a statement check here (one SELECT
or WITH statement, no `INTO OUTFILE`), the engine's own read-only mode (ClickHouse `readonly=1`, a PostgreSQL
READ ONLY transaction holding a server-side cursor, SQLite `mode=ro` plus an authorizer that allows reads
only), and the driver's one-statement rule. Every failure is a `SourceError` with a one-line reason.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from ragstead.ingest.base import SourceError

_REASON_CHARS = 300  # of an engine's message in a one-line reason

# clickhouse-connect logs connection failures itself; with no handler anywhere Python would print them bare on
# stderr next to our one-line reason. A NullHandler keeps them out; an application's own logging still sees them.
logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())


# -- the source URL --------------------------------------------------------------------------------------

_CLICKHOUSE_SCHEMES = {"clickhouse": False, "clickhouses": True}  # scheme -> TLS
_POSTGRES_SCHEMES = ("postgresql", "postgres")
_CLICKHOUSE_OPTIONS = ("verify", "ca_cert")


@dataclass(frozen=True)
class DataSource:
    """A parsed source URL. `url` never holds the password; `secret` is kept only to scrub it from messages."""

    engine: str  # "clickhouse" | "chdb" | "postgresql" | "sqlite"
    url: str
    raw: str = field(repr=False)
    secret: str = field(default="", repr=False)
    host: str = ""
    port: int = 0
    username: str = ""
    database: str = ""
    path: Path | None = None
    tls: bool = False
    options: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return {"clickhouse": "ClickHouse", "chdb": "chDB", "postgresql": "PostgreSQL", "sqlite": "SQLite"}[self.engine]

    @property
    def where(self) -> str:
        return str(self.path) if self.path is not None else f"{self.host}:{self.port}"


def _redacted(parts: Any, host: str, port: int | None) -> str:
    user = f"{quote(unquote(parts.username), safe='')}@" if parts.username else ""
    host_part = f"[{host}]" if ":" in host else host
    netloc = f"{user}{host_part}" + (f":{port}" if port else "")
    query = "&".join(f"{k}={v}" for k, v in parse_qsl(parts.query) if k.lower() not in ("password", "sslpassword"))
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")


def _local_path(parts: Any) -> Path:
    if parts.netloc:
        raise SourceError(f"{parts.scheme}: URLs name a local path, as {parts.scheme}:///abs/path or "
                          f"{parts.scheme}:relative/path")
    text = unquote(parts.path)
    if not text or text in (":memory:", "/:memory:"):
        raise SourceError(f"{parts.scheme}: URL has no database path")
    return Path(text)


def parse_source(source: str) -> DataSource:
    """Parse `clickhouse[s]://user:pass@host:port/db`, `chdb:///path/to/data`, `postgresql://…`,
    `sqlite:///abs/path.db` or `sqlite:relative/path.db`. The password is never part of `url`."""
    try:
        parts = urlsplit(source.strip())
        port = parts.port
        host = parts.hostname or ""
    except ValueError as exc:  # a port that is not a number, an unbalanced [ ]
        raise SourceError(f"malformed source URL ({scrubbed(str(exc), ())})") from None
    scheme = parts.scheme.lower()
    if scheme in _CLICKHOUSE_SCHEMES:
        return _clickhouse_source(source, parts, host, port)
    if scheme in _POSTGRES_SCHEMES:
        return _postgres_source(source, parts, host, port)
    if scheme in ("sqlite", "chdb"):
        path = _local_path(parts)
        return DataSource(scheme, f"{scheme}://{path.as_posix()}" if path.is_absolute() else f"{scheme}:{path}",
                          source, path=path)
    shown = scheme or "none"
    raise SourceError(f"unsupported source scheme {shown!r}: use clickhouse://, clickhouses://, chdb://, "
                      "postgresql:// or sqlite://")


def _clickhouse_source(source: str, parts: Any, host: str, port: int | None) -> DataSource:
    """A `clickhouse[s]://` source: its options checked against the known ones; it needs a host, and its port
    defaults to the HTTP interface's (8123, 8443 with TLS)."""
    tls = _CLICKHOUSE_SCHEMES[parts.scheme.lower()]
    options = tuple(parse_qsl(parts.query))
    unknown = [k for k, _ in options if k not in _CLICKHOUSE_OPTIONS]
    if unknown:
        raise SourceError(f"unknown option {unknown[0]!r} in the ClickHouse URL (known: "
                          f"{', '.join(_CLICKHOUSE_OPTIONS)})")
    if not host:
        raise SourceError("the ClickHouse URL has no host: clickhouse://user:password@host:8123/database")
    port = port or (8443 if tls else 8123)
    return DataSource("clickhouse", _redacted(parts, host, port), source, unquote(parts.password or ""), host=host,
                      port=port, username=unquote(parts.username or "default"),
                      database=unquote(parts.path.strip("/")), tls=tls, options=options)


def _postgres_source(source: str, parts: Any, host: str, port: int | None) -> DataSource:
    """A `postgresql://` source: a host in the URL or its `host=` option; the password from the URL, else its
    `password=` option."""
    if not host and "host=" not in parts.query:
        raise SourceError("the PostgreSQL URL has no host: postgresql://user:password@host:5432/database")
    pw_option = dict(parse_qsl(parts.query)).get("password", "")
    return DataSource("postgresql", _redacted(parts, host, port), source,
                      unquote(parts.password or "") or pw_option, host=host, port=port or 5432,
                      username=unquote(parts.username or ""), database=unquote(parts.path.strip("/")))


# -- one read-only statement -----------------------------------------------------------------------------

_DIALECT_BACKSLASH = {"clickhouse": True, "chdb": True, "postgresql": False, "sqlite": False}


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def _in_name(out: list[str]) -> bool:
    """True when the code so far ends inside a name or number: PostgreSQL allows `$` within identifiers
    (`a$b$`), where it starts no dollar quote."""
    return bool(out) and bool(re.match(r"[A-Za-z0-9_$]", out[-1][-1:]))


def _escape_string_prefix(sql: str, quote: int) -> bool:
    """Whether the `'` at `quote` opens a PostgreSQL escape string: E'…' with the E a token of its own. In
    `name'\'` the e ends a type name (a typed literal, `name '\'`): the string is a plain one, a backslash and
    its end, and reading it as E'…' hid the rest of the query from the function check (#45)."""
    return quote > 0 and sql[quote - 1] in "eE" and not (quote > 1 and re.match(r"[A-Za-z0-9_$]", sql[quote - 2]))


def _code_only(sql: str, engine: str) -> str:
    """The statement with every comment, string literal and quoted identifier blanked out, so a keyword or
    `;` found in what is left is real SQL. Lexes as the engine does: backslash escapes in ClickHouse strings,
    $tag$ quoting in PostgreSQL, `#` comments in ClickHouse."""
    out: list[str] = []
    i = 0
    while i < len(sql):
        i, piece = _next_piece(sql, i, engine, out)
        out.append(piece)
    return "".join(out)


def _next_piece(sql: str, i: int, engine: str, out: list[str]) -> tuple[int, str]:
    """Where the lexer goes on after position `i`, and what it keeps of what it passed: a blank for a
    comment, a quoted span as `_quoted` keeps it, else the one character. `out`: the code so far."""
    ch = sql[i]
    if sql.startswith("--", i) or (ch == "#" and engine in ("clickhouse", "chdb")):
        end = sql.find("\n", i)
        return (len(sql) if end < 0 else end), " "
    if sql.startswith("/*", i):
        end = sql.find("*/", i + 2)
        if end < 0:
            raise SourceError("the query has an unterminated /* comment")
        return end + 2, " "
    if ch in "'\"`" or (ch == "[" and engine == "sqlite"):
        return _quoted(sql, i, engine)
    if ch == "$" and engine == "postgresql" and not _in_name(out) \
            and (tag := re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", sql[i:])):
        end = sql.find(tag.group(0), i + len(tag.group(0)))
        if end < 0:
            raise SourceError("the query has an unterminated $$ quote")
        return end + len(tag.group(0)), " x "
    return i + 1, ch


def _quoted(sql: str, i: int, engine: str) -> tuple[int, str]:
    """The quoted span opening at `i` (a string, or a name in "", `` or []): the position past it and what is
    kept of it. A quoted name stays visible when it is a plain identifier, so `"lo_export"(…)` meets the
    function check; anything else quoted is blanked."""
    ch = sql[i]
    if ch == '"' and engine == "postgresql" and sql[max(0, i - 2) : i].upper() == "U&":
        raise SourceError("the query has a Unicode-escaped identifier (U&\"…\"): spell names plainly")
    j = _closing_quote(sql, i, engine)
    name = sql[i + 1 : j]
    return j + 1, (f" {name} " if ch != "'" and _PLAIN_NAME.fullmatch(name) else " x ")


def _closing_quote(sql: str, i: int, engine: str) -> int:
    """The position of the quote closing the one at `i`: a doubled quote is part of the span, and so is a
    backslash escape where the engine reads them (ClickHouse strings, PostgreSQL E'…')."""
    close = "]" if sql[i] == "[" else sql[i]
    escapes = _DIALECT_BACKSLASH[engine] or (engine == "postgresql" and close == "'" and _escape_string_prefix(sql, i))
    j, n = i + 1, len(sql)
    while j < n:
        if escapes and sql[j] == "\\":
            j += 2
            continue
        if sql[j] == close:
            if close != "]" and sql.startswith(close * 2, j):
                j += 2
                continue
            break
        j += 1
    if j >= n:
        raise SourceError("the query has an unterminated quote")
    return j


# PostgreSQL functions with effects outside the READ ONLY transaction, which does not stop them (checked on a
# real server: lo_export of an existing large object writes a server file, pg_terminate_backend ends a
# session, set_config/pg_read_file/pg_notify all run), and those that run a query given as a string, which
# this check cannot see into. The role's privileges are the real bound (docs/ingest.md): this list is a
# second one for a user who connects as a superuser anyway.
_PG_DENIED_FUNCTIONS = re.compile(
    r"\b(lo_\w+|pg_(?:terminate|cancel|signal)_backend|pg_read_(?:binary_)?file|pg_ls_\w+|pg_stat_file|"
    r"pg_file_\w+|pg_write\w*|pg_logdir_ls|pg_reload_conf|pg_rotate_logfile|pg_promote|pg_switch_wal|"
    r"pg_(?:start|stop)_backup|pg_backup_\w+|pg_create_\w+|pg_drop_replication_slot|pg_replication_\w+|"
    r"pg_logical_\w+|pg_notify|pg_advisory_\w+|pg_try_advisory_\w+|pg_stat_reset\w*|pg_import_\w+|"
    r"dblink\w*|set_config|query_to_xml\w*|cursor_to_xml\w*|table_to_xml\w*|schema_to_xml\w*|"
    r"database_to_xml\w*|ts_stat|ts_rewrite)\s*\(", re.IGNORECASE)
_SQLITE_DENIED_FUNCTIONS = re.compile(r"\b(load_extension|writefile|readfile|edit|fts3_tokenizer)\s*\(",
                                      re.IGNORECASE)
_DENIED_FUNCTIONS = {"postgresql": _PG_DENIED_FUNCTIONS, "sqlite": _SQLITE_DENIED_FUNCTIONS}


def check_functions(query: str, engine: str) -> None:
    """Refuse a query calling a function with side effects outside the database (PostgreSQL large-object
    file export, signalling other sessions, server files, settings, a query run from a string)."""
    denied = _DENIED_FUNCTIONS.get(engine)
    found = denied.search(_code_only(query, engine)) if denied is not None else None
    if found:
        raise SourceError(f"the query calls {found.group(1).lower()}(), which acts outside the database: "
                          "dossiers run read-only")


def check_read_only_statement(query: str, engine: str) -> None:
    """Refuse anything but one SELECT (or WITH … SELECT) statement, before it reaches the engine."""
    if not query or not query.strip():
        raise SourceError("the query is empty: give a SELECT statement")
    check_functions(query, engine)
    code = _code_only(query, engine).strip().rstrip(";").strip()
    if ";" in code:
        raise SourceError("the query holds more than one statement: give one SELECT")
    first = re.match(r"[\s(]*([A-Za-z_]+)", code)
    keyword = first.group(1).upper() if first else ""
    if keyword not in ("SELECT", "WITH"):
        shown = keyword or "no statement"
        raise SourceError(f"only a SELECT query can make dossiers (this one starts with {shown}); "
                          "they are read-only")
    if engine in ("clickhouse", "chdb") and re.search(r"\bINTO\s+OUTFILE\b", code, re.IGNORECASE):
        raise SourceError("INTO OUTFILE writes a file: dossiers run read-only")


# -- engine errors as one-line reasons --------------------------------------------------------------------


def scrubbed(message: str, secrets: Iterable[str]) -> str:
    """One line, no password: every secret (and its URL-encoded form) and any `user:pass@` replaced."""
    text = " ".join(str(message).split())
    for secret in secrets:
        if secret:
            for form in {secret, quote(secret, safe=""), quote(secret)}:
                text = text.replace(form, "***")
    text = re.sub(r"(://[^/\s:@]*):[^@\s/]*@", r"\1:***@", text)
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _network_reason(message: str) -> str | None:
    lowered = message.lower()
    for needle, reason in (("connection refused", "connection refused"), ("timed out", "timed out"),
                           ("timeout", "timed out"), ("name or service not known", "unknown host"),
                           ("nodename nor servname", "unknown host"), ("failed to resolve", "unknown host"),
                           ("temporary failure in name resolution", "unknown host"),
                           ("certificate", "TLS error"), ("ssl", "TLS error"), ("no route to host", "no route to host"),
                           ("network is unreachable", "network unreachable"),
                           ("connection reset", "connection reset"), ("remote end closed", "connection closed")):
        if needle in lowered:
            return reason
    return None


_CH_EXCEPTION = re.compile(r"Code:\s*(\d+)[.,]\s*(?:e\.displayText\(\) = )?(?:DB::Exception:\s*)+(.*)", re.S)
_CH_TAIL = re.compile(r"(?:,\s*e\.what\(\) = .*|\s*\(version [^)]*\).*|\s*\(for url .*|\s*\([A-Z_]+\)\s*$)", re.S)
_CH_AUTH = {192, 193, 194, 516}  # UNKNOWN_USER, WRONG_PASSWORD, REQUIRED_PASSWORD, AUTHENTICATION_FAILED
_CH_READONLY = 164
_CH_TIMEOUT = 159


def _clickhouse_error(exc: BaseException, src: DataSource, connecting: bool) -> SourceError:
    message = scrubbed(str(exc), (src.secret,))
    found = _CH_EXCEPTION.search(message)
    if found:
        code, detail = int(found.group(1)), _CH_TAIL.sub("", found.group(2)).strip().rstrip(".")
        if code in _CH_AUTH or "status 401" in message:
            return SourceError(f"{src.label} at {src.where} refused the credentials of user {src.username!r}")
        if code == _CH_READONLY:
            return SourceError(f"{src.label} refused the query: it would write, and dossiers are read-only ({detail})")
        if code == _CH_TIMEOUT:
            return SourceError(f"{src.label}: the query took longer than the query timeout")
        if connecting and code == 47 and "readonly" in detail:
            return SourceError(f"{src.label} at {src.where} is too old for clickhouse-connect (its system.settings "
                               "has no readonly column): upgrade the server")
        return SourceError(f"{src.label} error {code}: {scrubbed(detail, (src.secret,))}")
    network = _network_reason(message)
    if network == "timed out" and not connecting:
        return SourceError(f"{src.label}: the query took longer than the query timeout")
    if network:
        return SourceError(f"cannot reach {src.label} at {src.where}: {network}")
    if "status 401" in message or "status 403" in message:
        return SourceError(f"{src.label} at {src.where} refused the credentials of user {src.username!r}")
    return SourceError(f"{src.label}: {message}")


# -- fetching rows ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    connect_timeout: float
    query_timeout: float
    max_rows: int


def _too_many(limits: Limits) -> SourceError:
    return SourceError(f"the query returned more than {limits.max_rows} rows: narrow it (WHERE, LIMIT) or raise "
                       "max_rows")


def _fetch_clickhouse(src: DataSource, query: str, limits: Limits) -> tuple[list[str], list[tuple[Any, ...]]]:
    try:
        import clickhouse_connect
    except ImportError:
        raise SourceError("clickhouse-connect is not installed: pip install 'ragstead[clickhouse]'") from None
    try:
        if src.engine == "chdb":
            if src.path is None or not src.path.is_dir():  # chDB would create an empty database there
                raise SourceError(f"no chDB data folder at {src.path}")
            # Nothing else can time the in-process engine out; on a server the socket timeout does (a readonly
            # ClickHouse account may not change max_execution_time, so it is not sent there).
            settings = {"max_execution_time": max(1, math.ceil(limits.query_timeout)), "readonly": 1}
            client = clickhouse_connect.get_client(interface="chdb", path=str(src.path), settings=settings)
        else:
            options = dict(src.options)
            extra: dict[str, Any] = {}
            if "verify" in options:
                extra["verify"] = options["verify"].lower() not in ("false", "0", "no")
            if "ca_cert" in options:
                extra["ca_cert"] = options["ca_cert"]
            client = clickhouse_connect.get_client(
                host=src.host, port=src.port, username=src.username, password=src.secret,
                database=src.database or None, secure=src.tls, connect_timeout=limits.connect_timeout,
                send_receive_timeout=limits.query_timeout, settings={"readonly": 1}, autogenerate_session_id=False,
                **extra)
    except SourceError:
        raise
    except ImportError as exc:  # chdb:// without the chdb package
        raise SourceError(f"chDB is not installed ({scrubbed(str(exc), ())}): pip install 'ragstead[chdb]'") from None
    except Exception as exc:
        raise _clickhouse_error(exc, src, connecting=True) from None
    rows: list[tuple[Any, ...]] = []
    try:
        with client.query_row_block_stream(query) as stream:
            columns = list(stream.source.column_names)
            for block in stream:
                rows.extend(tuple(row) for row in block)
                if len(rows) > limits.max_rows:
                    raise _too_many(limits)
    except SourceError:
        raise
    except Exception as exc:
        raise _clickhouse_error(exc, src, connecting=False) from None
    finally:
        client.close()
    return columns, rows


def _fetch_postgresql(src: DataSource, query: str, limits: Limits) -> tuple[list[str], list[tuple[Any, ...]]]:
    try:
        import psycopg
    except ImportError:
        raise SourceError("psycopg is not installed: pip install 'ragstead[postgres]'") from None
    secrets = (src.secret,)
    try:
        # libpq's connect_timeout is whole seconds, at least 2.
        conn = psycopg.connect(src.raw, connect_timeout=max(2, math.ceil(limits.connect_timeout)), autocommit=False)
    except psycopg.Error as exc:
        reason = _network_reason(str(exc))
        if "password authentication failed" in str(exc) or "authentication failed" in str(exc):
            raise SourceError(f"{src.label} at {src.where} refused the credentials of user "
                              f"{src.username!r}") from None
        if reason:
            raise SourceError(f"cannot reach {src.label} at {src.where}: {reason}") from None
        raise SourceError(f"cannot connect to {src.label} at {src.where}: {_pg_reason(exc, secrets)}") from None
    try:
        conn.read_only = True  # the transaction the first statement opens is BEGIN READ ONLY
        _check_role(conn, src)
        conn.execute("SELECT set_config('statement_timeout', %s, true)",
                     [f"{max(1, math.ceil(limits.query_timeout * 1000))}ms"])
        # A server-side cursor: DECLARE accepts one SELECT or VALUES, with no data-modifying WITH, and streams
        # the rows, so the row cap is checked without loading them all.
        with conn.cursor(name="ragstead_dossiers") as cursor:
            cursor.execute(query)
            columns = [col.name for col in cursor.description or []]
            rows = [tuple(r) for r in cursor.fetchmany(limits.max_rows + 1)]
        if len(rows) > limits.max_rows:
            raise _too_many(limits)
    except SourceError:
        raise
    except psycopg.errors.QueryCanceled:
        raise SourceError(f"{src.label}: the query took longer than the query timeout") from None
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        raise SourceError(f"{src.label} refused the query: it would write, and dossiers are read-only "
                          f"({_pg_reason(exc, secrets)})") from None
    except psycopg.Error as exc:
        raise SourceError(f"{src.label} rejected the query: {_pg_reason(exc, secrets)}") from None
    finally:
        conn.close()  # without a commit: the read-only transaction is rolled back
    return columns, rows


# Predefined roles whose members act on the server outside the database, whatever the transaction: write or read
# its files (COPY, lo_export, pg_read_file), run programs there, signal other sessions.
_SERVER_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_signal_backend", "pg_write_server_files")
ROLE_HELP = "docs/ingest.md#postgresql-a-role-for-dossiers"


def _check_role(conn: Any, src: DataSource) -> None:
    """Refuse to run the query as a superuser or as a member of a role in _SERVER_ROLES: the function check is a
    deny-list, and a deny-list has gaps (#45: a typed literal and ts_rewrite got lo_export and pg_terminate_backend
    past it); a role that cannot act outside the database is the bound that holds."""
    row = conn.execute(
        "SELECT current_user::text, r.rolsuper, ARRAY(SELECT g.rolname::text FROM pg_roles g WHERE g.rolname = ANY(%s) "
        "AND pg_has_role(current_user, g.oid, 'MEMBER') ORDER BY g.rolname) FROM pg_roles r "
        "WHERE r.rolname = current_user", [list(_SERVER_ROLES)]).fetchone()
    user, superuser, granted = (row[0], bool(row[1]), list(row[2])) if row else (src.username, False, [])
    if superuser or granted:
        what = "a superuser" if superuser else f"a member of {', '.join(granted)}"
        raise SourceError(f"{src.label} user {user!r} is {what}, which can act outside the database "
                          "(server files, other sessions); dossiers run as a role that can only read: create one "
                          f"({ROLE_HELP})")


def _pg_reason(exc: BaseException, secrets: Sequence[str]) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    return scrubbed(primary or str(exc), secrets)


# The SQLite operations a read-only query needs; the authorizer denies every other one (writes, ATTACH,
# PRAGMA, schema changes) whatever the statement check let through.
_SQLITE_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                   getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def _sqlite_authorizer(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _SQLITE_ALLOWED else sqlite3.SQLITE_DENY


def _fetch_sqlite(src: DataSource, query: str, limits: Limits) -> tuple[list[str], list[tuple[Any, ...]]]:
    assert src.path is not None
    if not src.path.is_file():
        raise SourceError(f"no SQLite database at {src.path}")
    uri = f"file:{quote(str(src.path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=limits.connect_timeout)
    except sqlite3.Error as exc:
        raise SourceError(f"cannot open the SQLite database at {src.path}: {scrubbed(str(exc), ())}") from None
    deadline = time.monotonic() + limits.query_timeout
    timed_out = False

    def past_deadline() -> int:
        nonlocal timed_out
        timed_out = time.monotonic() > deadline
        return 1 if timed_out else 0

    try:
        conn.execute("PRAGMA query_only = ON")
        conn.set_authorizer(_sqlite_authorizer)
        conn.set_progress_handler(past_deadline, 10_000)
        cursor = conn.execute(query)
        columns = [d[0] for d in cursor.description or []]
        rows = [tuple(r) for r in cursor.fetchmany(limits.max_rows + 1)]
    except sqlite3.DatabaseError as exc:
        if timed_out:
            raise SourceError(f"{src.label}: the query took longer than the query timeout") from None
        message = scrubbed(str(exc), ())
        if "not authorized" in message or "readonly" in message or "read-only" in message:
            raise SourceError(f"{src.label} refused the query: it would write, and dossiers are read-only "
                              f"({message})") from None
        raise SourceError(f"{src.label} rejected the query: {message}") from None
    except sqlite3.Warning as exc:  # "You can only execute one statement at a time."
        raise SourceError(f"{src.label} rejected the query: {scrubbed(str(exc), ())}") from None
    finally:
        conn.close()
    if len(rows) > limits.max_rows:
        raise _too_many(limits)
    return columns, rows


_FETCHERS: dict[str, Callable[[DataSource, str, Limits], tuple[list[str], list[tuple[Any, ...]]]]] = {
    "clickhouse": _fetch_clickhouse, "chdb": _fetch_clickhouse, "postgresql": _fetch_postgresql,
    "sqlite": _fetch_sqlite,
}


def fetch_rows(src: DataSource, query: str, limits: Limits) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(column names, rows) of `query` on `src`, run read-only; at most `limits.max_rows` rows, else a
    SourceError. Call `check_read_only_statement` first: the engines refuse writes too, but less clearly."""
    check_functions(query, src.engine)  # the engines' read-only modes do not stop these
    return _FETCHERS[src.engine](src, query, limits)
