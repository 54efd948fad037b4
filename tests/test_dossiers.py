"""Analytics rows -> dossiers (ragstead.ingest.dossiers, ragstead.ingest.sql_rows), against real engines:
ClickHouse SQL on the chDB engine through clickhouse-connect's own client, a real `clickhouse-server` for the
network path (credentials, reachability), the session's PostgreSQL, and SQLite files.

Row values are hostile here: front matter injections, traversal in user slugs and file names, statements that
write. Nothing may land outside artifacts/dossiers/<user>/, and the password appears in no message or file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import stat
import tempfile
import uuid
from datetime import date
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
import yaml

from conftest import CLICKHOUSE_PASSWORD
from ragstead.documents.loaders import load_document
from ragstead.documents.metadata import derive_metadata
from ragstead.ingest.base import SourceError
from ragstead.ingest.dossiers import dossier_name, markdown_inline, render_dossiers
from ragstead.ingest.sql_rows import Limits, check_read_only_statement, fetch_rows, parse_source

clickhouse_connect = pytest.importorskip("clickhouse_connect")
pytest.importorskip("chdb", reason="chDB (pip install chdb) runs the ClickHouse engine in-process")

WALLET_1 = "0x9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
WALLET_2 = "0xAbCdEf0123456789abcdef0123456789ABCDEF01"
WALLET_3 = "0x1111111111111111111111111111111111111111"
INJECTION = "fine\n---\nis_private: false\nuser_slug: bob\ntags: [public]\n---\n# Injected heading\n```"
TRADES = [  # user_slug, proxy_wallet, day, market, pnl, size, note
    ("alice", WALLET_1, "2025-05-20", "election", "120.50", 10.0, "steady"),
    ("alice", WALLET_1, "2025-05-21", "sports | live", "-310.00", 25.5, INJECTION),
    ("alice", WALLET_2, "2025-05-20", "crypto", "5.25", 1.0, None),
    ("bob", WALLET_3, "2025-05-20", "election", "42.00", 3.0, "bob's only"),
    ("../../etc", WALLET_3, "2025-05-22", "x", "1.00", 1.0, "evil"),
    ("", WALLET_3, "2025-05-22", "x", "1.00", 1.0, "nobody's"),
    ("alice/../../tmp", WALLET_3, "2025-05-22", "x", "1.00", 1.0, "traversal"),
]
QUERY = "SELECT * FROM trades ORDER BY day, user_slug, proxy_wallet"


def front_matter(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    block = text[4:text.index("\n---\n", 4)]
    return yaml.safe_load(block)


def all_files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def chdb_source(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A chDB data folder (the ClickHouse engine, in-process) holding `trades`; its chdb:// URL."""
    folder = tmp_path_factory.mktemp("chdb") / "data"
    folder.mkdir()
    writer = clickhouse_connect.get_client(interface="chdb", path=str(folder))
    writer.command("CREATE TABLE trades (user_slug String, proxy_wallet String, day Date, market String, "
                   "pnl Decimal(12, 2), size Float64, note Nullable(String)) ENGINE = MergeTree ORDER BY day")
    writer.insert("trades", [(u, w, date.fromisoformat(d), m, Decimal(p), s, n) for u, w, d, m, p, s, n in TRADES],
                  column_names=["user_slug", "proxy_wallet", "day", "market", "pnl", "size", "note"])
    writer.close()
    return f"chdb://{folder}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


# -- ClickHouse SQL on the chDB engine ------------------------------------------------------------------------


def test_rows_grouped_by_wallet_become_one_dossier_each_in_the_owners_folder(chdb_source: str, root: Path) -> None:
    run = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet")

    assert run.rows == len(TRADES)
    assert sorted(run.written) == sorted([
        f"artifacts/dossiers/alice/{WALLET_1}.md",
        f"artifacts/dossiers/alice/{dossier_name(WALLET_2)}.md",
        f"artifacts/dossiers/bob/{WALLET_3}.md",
    ])
    assert run.unchanged == []
    # Everything written is under artifacts/dossiers/<user>/, and only the three dossiers were written.
    assert all_files(root) == sorted(run.written)

    dossier = root / f"artifacts/dossiers/alice/{WALLET_1}.md"
    fields = front_matter(dossier)
    assert fields == {
        "title": f"proxy_wallet {WALLET_1}", "user": "alice", "group_by": "proxy_wallet", "group": WALLET_1,
        "subject": WALLET_1, "source_url": chdb_source, "source_type": "Dossier", "query_hash": run.query_hash,
        "rows": 2, "rendered_at": fields["rendered_at"], "tags": ["dossier"],
    }
    text = dossier.read_text(encoding="utf-8")
    assert "| pnl | 2 | -310.00 | 120.50 | -94.75 | -189.50 |" in text  # Decimal summary, exact
    assert "| size | 2 | 10 | 25.5 | 17.75 | 35.5 |" in text
    assert "sports \\| live" in text  # a pipe in a value does not split the table cell

    # What the indexer makes of it: a private dossier of alice's, about this wallet, tagged dossier.
    meta = derive_metadata(f"artifacts/dossiers/alice/{WALLET_1}.md", None)
    assert (meta.doc_type, meta.is_private, meta.user_slug, meta.subject) == ("dossier", True, "alice", WALLET_1)
    loaded = load_document(dossier)
    assert loaded.tags == ["dossier"]
    assert loaded.title == f"proxy_wallet {WALLET_1}"
    assert loaded.subject == WALLET_1  # the index's `subject`: what the dossier is about
    assert loaded.text.lstrip().startswith(f"# proxy_wallet {WALLET_1}")


def test_a_value_cannot_inject_front_matter_or_markdown_structure(chdb_source: str, root: Path) -> None:
    run = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet")
    dossier = root / f"artifacts/dossiers/alice/{WALLET_1}.md"
    text = dossier.read_text(encoding="utf-8")

    # The front matter is exactly ours: the value's "---", is_private, user_slug and tags stayed in the body.
    assert set(front_matter(dossier)) == {"title", "user", "group_by", "group", "subject", "source_url", "source_type",
                                          "query_hash", "rows", "rendered_at", "tags"}
    assert text.count("\n---\n") == 1 and text.startswith("---\n")
    assert "is_private" not in text.split("\n---\n", 1)[0]
    assert "fine --- is_private: false user_slug: bob tags: \\[public\\] --- # Injected heading ```" not in text
    body_lines = text.split("\n---\n", 1)[1].splitlines()
    assert not any(line.startswith(("# Injected", "---", "```", "is_private")) for line in body_lines)
    # The whole hostile value sits on one table row.
    row = next(line for line in body_lines if "Injected heading" in line)
    assert row.startswith("| 2025-05-21 |") and row.endswith(" |")
    loaded = load_document(dossier)
    assert loaded.tags == ["dossier"] and "public" not in loaded.tags
    assert derive_metadata(run.written[0], None).is_private


@pytest.mark.parametrize("value", [
    "---", "# heading", "> quote", "- item", "1. first", "```", "~~~", "***", "[ref]: http://x", "a|b", "<script>",
    "two\nlines", "cr\rlf", "sep\u2028line", "nel\x85line", "  indented", "back\\|slash",
])
def test_markdown_inline_makes_any_value_one_safe_line(value: str) -> None:
    text = markdown_inline(value)
    assert "\n" not in text and "\r" not in text and "\u2028" not in text and "\x85" not in text
    assert not text.startswith(("#", ">", "- ", "1.", "```", "~~~", "***", "[", "<", " "))
    assert "|" not in text.replace("\\|", "")
    assert "<" not in text.replace("\\<", "")


def test_a_rerun_with_the_same_rows_leaves_every_file_untouched(chdb_source: str, root: Path) -> None:
    first = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet")
    before = {p: (root / p).stat() for p in first.written}

    second = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet")

    assert second.written == [] and sorted(second.unchanged) == sorted(first.written)
    for rel, st in before.items():
        now = (root / rel).stat()
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    # Another template changes the text: those files are rewritten, atomically (a new inode, no temp left).
    third = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet",
                            template="# {{ title }}\n\n{{ row_count }} rows for {{ user }}\n")
    assert sorted(third.written) == sorted(first.written)
    assert (root / first.written[0]).read_text().endswith("rows for alice\n")
    assert all(not p.name.startswith(".") for p in (root / "artifacts").rglob("*"))


def test_dossiers_are_private_on_disk(chdb_source: str, root: Path) -> None:
    run = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet")
    for rel in run.written:
        assert stat.S_IMODE((root / rel).stat().st_mode) == 0o600
        assert stat.S_IMODE((root / rel).parent.stat().st_mode) == 0o700


def test_rows_without_a_valid_user_are_skipped_and_reported(chdb_source: str, root: Path) -> None:
    run = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet")
    reasons = {s.row: s.reason for s in run.skipped}
    assert reasons == {
        5: "no user in column 'user_slug'",  # ORDER BY day, user_slug: '' sorts first
        6: "user '../../etc' in column 'user_slug' is not a valid user slug",
        7: "user 'alice/../../tmp' in column 'user_slug' is not a valid user slug",
    }
    assert not (root.parent / "etc").exists() and not (root.parent / "tmp").exists()
    assert {p.split("/")[2] for p in all_files(root)} == {"alice", "bob"}


def test_one_dossier_per_row_and_per_date(chdb_source: str, root: Path) -> None:
    per_row = render_dossiers(chdb_source, query="SELECT user_slug, proxy_wallet, market, pnl FROM trades "
                              "WHERE user_slug = 'alice' ORDER BY day, market", root=root, kind="trade")
    assert per_row.written == [  # named by the first column after the user's, in query order
        f"artifacts/dossiers/alice/{dossier_name(WALLET_2)}-trade.md",  # crypto
        f"artifacts/dossiers/alice/{WALLET_1}-trade.md",  # election
        f"artifacts/dossiers/alice/{WALLET_1}-2-trade.md",  # sports: the same wallet again, numbered
    ]
    by_day = render_dossiers(chdb_source, query="SELECT user_slug, day, market, pnl FROM trades "
                             "WHERE user_slug IN ('alice', 'bob') ORDER BY day", root=root, group_by="day")
    assert sorted(by_day.written) == ["artifacts/dossiers/alice/2025-05-20.md",
                                      "artifacts/dossiers/alice/2025-05-21.md", "artifacts/dossiers/bob/2025-05-20.md"]
    # The date in the path is the dossier's date for the date filters.
    assert derive_metadata(by_day.written[0], None).created_at.startswith("2025-05-2")
    assert front_matter(root / "artifacts/dossiers/alice/2025-05-20.md")["group"] == "2025-05-20"


def test_user_limits_the_rows_to_one_user_and_owns_a_result_without_a_user_column(chdb_source: str,
                                                                                  root: Path) -> None:
    run = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet", user="bob")
    assert run.written == [f"artifacts/dossiers/bob/{WALLET_3}.md"]
    assert "row belongs to user 'alice', not 'bob'" in {s.reason for s in run.skipped}

    own = render_dossiers(chdb_source, query="SELECT market, sum(pnl) AS pnl FROM trades GROUP BY market "
                          "ORDER BY market", root=root, group_by="market", user="carol")
    assert all(p.startswith("artifacts/dossiers/carol/") for p in own.written) and len(own.written) == 4


def test_unknown_group_or_user_column_is_a_one_line_error(chdb_source: str, root: Path) -> None:
    with pytest.raises(SourceError, match=r"group_by column 'wallet' is not in the query's result \(columns: "
                                          r"user_slug, proxy_wallet, day"):
        render_dossiers(chdb_source, query=QUERY, root=root, group_by="wallet")
    with pytest.raises(SourceError, match="user_column column 'owner' is not in the query's result"):
        render_dossiers(chdb_source, query=QUERY, root=root, user_column="owner")
    with pytest.raises(SourceError, match="more than one column named 'pnl'"):
        render_dossiers(chdb_source, query="SELECT user_slug, pnl, size AS pnl FROM trades", root=root)
    assert all_files(root) == []


@pytest.mark.parametrize("statement", [
    "DROP TABLE trades",
    "INSERT INTO trades (user_slug) VALUES ('mallory')",
    "SELECT 1; DROP TABLE trades",
    "SELECT 1 /* ; */ ; TRUNCATE TABLE trades",
    "ALTER TABLE trades DELETE WHERE 1",
    "SELECT * FROM trades INTO OUTFILE 'stolen.csv'",
])
def test_statements_that_write_are_refused(chdb_source: str, root: Path, statement: str) -> None:
    with pytest.raises(SourceError) as error:
        render_dossiers(chdb_source, query=statement, root=root)
    assert "\n" not in str(error.value)
    assert all_files(root) == []
    assert fetch_rows(parse_source(chdb_source), "SELECT count() FROM trades", Limits(10, 60, 10))[1] == [
        (len(TRADES),)]
    assert not Path("stolen.csv").exists()


@pytest.mark.parametrize("statement", ["INSERT INTO trades (user_slug) VALUES ('mallory')", "DROP TABLE trades",
                                       "CREATE TABLE t2 (x Int8) ENGINE = Memory"])
def test_the_engine_refuses_writes_even_past_the_statement_check(chdb_source: str, statement: str) -> None:
    # fetch_rows without check_read_only_statement: the engine is the second, independent guard (readonly=1
    # refuses the INSERT; the streaming query interface refuses DDL before readonly is even consulted).
    src = parse_source(chdb_source)
    with pytest.raises(SourceError) as error:
        fetch_rows(src, statement, Limits(10, 60, 100))
    if statement.startswith("INSERT"):
        assert "would write, and dossiers are read-only" in str(error.value)
    _, rows = fetch_rows(src, "SELECT count() AS n FROM trades", Limits(10, 60, 100))
    assert rows == [(len(TRADES),)]
    assert fetch_rows(src, "SELECT count() FROM system.tables WHERE name = 't2'", Limits(10, 60, 10))[1] == [(0,)]


def test_sql_errors_and_too_many_rows_are_one_line_reasons(chdb_source: str, root: Path) -> None:
    with pytest.raises(SourceError, match=r"^chDB error 47: Unknown expression identifier `nosuch`") as error:
        render_dossiers(chdb_source, query="SELECT nosuch FROM trades", root=root)
    assert "\n" not in str(error.value)
    with pytest.raises(SourceError, match="returned more than 50 rows: narrow it"):
        render_dossiers(chdb_source, query="SELECT 'alice' AS user_slug, number FROM numbers(1000)", root=root,
                        max_rows=50)
    run = render_dossiers(chdb_source, query="SELECT 'alice' AS user_slug, number FROM numbers(50)", root=root,
                          group_by="user_slug", max_rows=50, table_rows=10)
    table = (root / run.written[0]).read_text().split("## Rows", 1)[1]
    assert sum(line.startswith("| ") for line in table.splitlines()) == 2 + 10  # header, rule, 10 of 50 rows
    assert "40 more rows not shown." in table
    with pytest.raises(SourceError, match="no chDB data folder at"):
        render_dossiers(f"chdb://{root}/missing", query="SELECT 1", root=root)
    assert not (root / "missing").exists()


def test_templates_run_in_a_sandbox_and_an_error_writes_nothing(chdb_source: str, root: Path,
                                                                 tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="template error in the dossier"):
        render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet",
                        template="{{ row.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(SourceError, match=r"template error in the dossier .*'nosuch' is undefined"):
        render_dossiers(chdb_source, query=QUERY, root=root, template="{{ nosuch }}")
    with pytest.raises(SourceError, match=r"^template line 2: "):
        render_dossiers(chdb_source, query=QUERY, root=root, template="ok\n{% for %}")
    with pytest.raises(SourceError, match=r"pass a pathlib\.Path"):
        render_dossiers(chdb_source, query=QUERY, root=root, template="templates/dossier.md.j2")
    assert all_files(root) == []

    template = tmp_path / "dossier.md.j2"
    template.write_text("# {{ key }}\n\n{% for r in rows %}{{ r.note | paragraphs }}\n\n{% endfor %}", encoding="utf-8")
    run = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet", template=template)
    text = (root / f"artifacts/dossiers/alice/{WALLET_1}.md").read_text()
    body = text.split("\n---\n", 1)[1]
    assert "\\---" in body and "\\# Injected heading" in body and "\n---\n" not in body
    assert set(front_matter(root / run.written[0])) >= {"user", "tags"}


def test_file_names_are_safe_distinct_and_capped() -> None:
    keys = ["../x/..\\y", "..", ".hidden", "a/b", "a-b", "Café/東京 — report", "x" * 400, "CON", "", None, "nul"]
    names = [dossier_name(k) for k in keys]
    assert len(set(names)) == len(names)
    for name in names:
        assert "/" not in name and "\\" not in name and not name.startswith((".", "-")) and name not in ("", "..")
        assert len(name.encode("utf-8")) <= 100
    assert dossier_name("a-b") == "a-b" and dossier_name("2025-05-20") == "2025-05-20"
    assert dossier_name(WALLET_1) == WALLET_1


def test_a_user_folder_that_leads_outside_is_not_written(chdb_source: str, root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "artifacts/dossiers").mkdir(parents=True)
    (root / "artifacts/dossiers/bob").symlink_to(outside)
    run = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet")
    assert list(outside.iterdir()) == []
    assert not any(p.startswith("artifacts/dossiers/bob/") for p in run.written)
    assert any("artifacts/dossiers/bob leads outside" in s.reason for s in run.skipped)


# -- a real ClickHouse server over HTTP -----------------------------------------------------------------------


def server_url(server: dict, password: str) -> str:
    return f"clickhouse://{server['user']}:{quote(password, safe='')}@{server['host']}:{server['port']}/default"


def test_wrong_password_is_refused_without_showing_it(clickhouse_server: dict, root: Path) -> None:
    wrong = "Wr0ng/secret@pass"
    with pytest.raises(SourceError) as error:
        render_dossiers(server_url(clickhouse_server, wrong), query="SELECT 1", root=root)
    message = str(error.value)
    assert message == (f"ClickHouse at 127.0.0.1:{clickhouse_server['port']} refused the credentials of user "
                       "'analyst'")
    assert wrong not in message and quote(wrong, safe="") not in message


def test_the_real_server_answers_the_client_and_the_password_stays_hidden(clickhouse_server: dict,
                                                                          root: Path) -> None:
    # The right password passes authentication (the server answers the client's first queries). Debian's
    # clickhouse-server is 18.16, older than clickhouse-connect supports: the reason says so, in one line.
    url = server_url(clickhouse_server, CLICKHOUSE_PASSWORD)
    try:
        run = render_dossiers(url, query="SELECT 'alice' AS user_slug, 1 AS n", root=root, group_by="user_slug")
    except SourceError as error:
        message = str(error)
        assert "too old for clickhouse-connect" in message, message
        assert "refused the credentials" not in message
    else:  # a newer server: the dossier is written and its source has no password
        assert front_matter(root / run.written[0])["source_url"] == (
            f"clickhouse://analyst@127.0.0.1:{clickhouse_server['port']}/default")
        message = (root / run.written[0]).read_text()
    assert CLICKHOUSE_PASSWORD not in message and quote(CLICKHOUSE_PASSWORD, safe="") not in message
    assert parse_source(url).url == f"clickhouse://analyst@127.0.0.1:{clickhouse_server['port']}/default"


def test_an_unreachable_server_is_a_one_line_reason(root: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(SourceError, match=rf"^cannot reach ClickHouse at 127\.0\.0\.1:{port}: connection refused$"):
        render_dossiers(f"clickhouse://analyst:hunter2@127.0.0.1:{port}/db", query="SELECT 1", root=root,
                        connect_timeout=2)


# -- PostgreSQL ------------------------------------------------------------------------------------------------


def _as_role(url: str, role: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))


@pytest.fixture
def pg_trades(pg_url: str) -> str:
    """The trades table, and the URL of a role made as docs/ingest.md says, which can only read it (the server's
    superuser URL is refused)."""
    role = f"dossiers_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE trades (user_slug text, proxy_wallet text, day date, market text, "
                     "pnl numeric(12, 2), size double precision, note text)")
        with conn.cursor() as cursor:
            cursor.executemany("INSERT INTO trades VALUES (%s, %s, %s, %s, %s, %s, %s)", TRADES)
        conn.execute("CREATE SEQUENCE trade_ids")
        conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION")
        conn.execute(f"GRANT SELECT ON trades TO {role}")
        conn.execute(f"GRANT USAGE, SELECT, UPDATE ON SEQUENCE trade_ids TO {role}")  # nextval: READ ONLY refuses it
    return _as_role(pg_url, role)


@pytest.mark.parametrize("granted", [None, "pg_write_server_files", "pg_signal_backend", "pg_read_server_files",
                                     "pg_execute_server_program", "through another role"])
def test_postgresql_refuses_a_role_that_can_act_outside_the_database(pg_url: str, pg_trades: str, root: Path,
                                                                     granted: str | None) -> None:
    """The function check is a deny-list with gaps; the role is the bound: a superuser, or a member of a role that
    writes or reads server files, runs server programs or signals other sessions, runs nothing (#45)."""
    url = pg_url  # the server's superuser
    if granted is not None:
        role = f"dossiers_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER")
            conn.execute(f"GRANT SELECT ON trades TO {role}")
            if granted == "through another role":
                conn.execute(f"CREATE ROLE {role}_ops NOLOGIN")
                conn.execute(f"GRANT pg_signal_backend TO {role}_ops")
                conn.execute(f"GRANT {role}_ops TO {role}")
            else:
                conn.execute(f"GRANT {granted} TO {role}")
        url = _as_role(pg_url, role)
    refused = "a superuser" if granted is None else (
        "pg_signal_backend" if granted == "through another role" else granted)
    with pytest.raises(SourceError, match=rf"is (a member of )?{refused}.*postgresql-a-role-for-dossiers") as error:
        render_dossiers(url, query=QUERY, root=root)
    assert "\n" not in str(error.value)
    assert not (root / "artifacts").exists()  # nothing ran, nothing was written
    assert render_dossiers(pg_trades, query=QUERY, root=root).written  # the reader role is fine


@pytest.mark.parametrize("query", [
    "SELECT name'\\' AS a, lo_export(1, '/tmp/x') AS b",  # `name'\'` is a typed literal, not E'...'
    "SELECT ts_rewrite('a'::tsquery, 'SELECT pg_terminate_backend(1)')",
])
def test_postgresql_deny_list_bypasses_of_the_probe_are_refused(query: str) -> None:
    with pytest.raises(SourceError, match="acts outside the database"):
        check_read_only_statement(query, "postgresql")


def test_postgresql_rows_become_dossiers(pg_trades: str, root: Path) -> None:
    run = render_dossiers(pg_trades, query="SELECT * FROM trades WHERE note LIKE '%' OR note IS NULL "
                          "ORDER BY day, user_slug", root=root, group_by="proxy_wallet")
    assert sorted(run.written) == sorted([f"artifacts/dossiers/alice/{WALLET_1}.md",
                                          f"artifacts/dossiers/alice/{dossier_name(WALLET_2)}.md",
                                          f"artifacts/dossiers/bob/{WALLET_3}.md"])
    assert len(run.skipped) == 3
    text = (root / f"artifacts/dossiers/alice/{WALLET_1}.md").read_text()
    assert "| pnl | 2 | -310.00 | 120.50 | -94.75 | -189.50 |" in text
    assert "is_private" not in text.split("\n---\n", 1)[0]


@pytest.mark.parametrize("statement", [
    "WITH gone AS (DELETE FROM trades RETURNING *) SELECT * FROM gone",
    "SELECT 1; DROP TABLE trades",
    "SELECT 1; COMMIT; DROP TABLE trades",
    "SELECT * INTO copy FROM trades",
    "DELETE FROM trades",
    "SELECT nextval('trade_ids')",  # a SELECT with a side effect: the READ ONLY transaction refuses it
])
def test_postgresql_runs_read_only_even_past_the_statement_check(pg_trades: str, statement: str) -> None:
    src = parse_source(pg_trades)
    with pytest.raises(SourceError) as error:
        fetch_rows(src, statement, Limits(10, 60, 100))
    assert "\n" not in str(error.value)
    with psycopg.connect(pg_trades) as conn:
        assert conn.execute("SELECT count(*) FROM trades").fetchone() == (len(TRADES),)
        assert conn.execute("SELECT to_regclass('copy')").fetchone() == (None,)
        assert conn.execute("SELECT is_called FROM trade_ids").fetchone() == (False,)
    if "nextval" in statement:
        assert "would write, and dossiers are read-only" in str(error.value)


def test_postgresql_errors_are_one_line_and_never_show_the_password(pg_url: str, root: Path) -> None:
    parts = urlsplit(pg_url)
    url = f"postgresql://{parts.username}:{quote('S3cr3t!pw/@', safe='')}@{parts.hostname}:{parts.port}/no_such_db"
    with pytest.raises(SourceError) as error:
        render_dossiers(url, query="SELECT 1", root=root)
    assert "S3cr3t" not in str(error.value) and "\n" not in str(error.value)
    assert "no_such_db" in str(error.value)


def test_postgresql_query_timeout(pg_trades: str, root: Path) -> None:
    with pytest.raises(SourceError, match="took longer than the query timeout"):
        render_dossiers(pg_trades, query="SELECT 'alice' AS user_slug, pg_sleep(30)", root=root, query_timeout=0.3)


# -- SQLite ----------------------------------------------------------------------------------------------------


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    path = tmp_path / "analytics.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE trades (user_slug, proxy_wallet, day, market, pnl, size, note)")
        conn.executemany("INSERT INTO trades VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(u, w, d, m, float(p), s, n) for u, w, d, m, p, s, n in TRADES])
    conn.close()
    return path


def test_sqlite_rows_become_dossiers(sqlite_db: Path, root: Path) -> None:
    run = render_dossiers(f"sqlite://{sqlite_db}", query=QUERY, root=root, group_by="day")
    assert sorted(run.written) == ["artifacts/dossiers/alice/2025-05-20.md", "artifacts/dossiers/alice/2025-05-21.md",
                                   "artifacts/dossiers/bob/2025-05-20.md"]
    assert front_matter(root / run.written[0])["source_url"] == f"sqlite://{sqlite_db}"


@pytest.mark.parametrize("statement", [
    "INSERT INTO trades (user_slug) VALUES ('mallory')",
    "SELECT 1; DROP TABLE trades",
    "ATTACH DATABASE 'other.db' AS other",
    "PRAGMA journal_mode = DELETE",
    "CREATE TABLE t2 (x)",
])
def test_sqlite_runs_read_only_even_past_the_statement_check(sqlite_db: Path, statement: str) -> None:
    digest = hashlib.sha256(sqlite_db.read_bytes()).hexdigest()
    src = parse_source(f"sqlite://{sqlite_db}")
    with pytest.raises(SourceError):
        check_read_only_statement(statement, "sqlite")
    with pytest.raises(SourceError) as error:
        fetch_rows(src, statement, Limits(10, 60, 100))
    assert "\n" not in str(error.value)
    assert hashlib.sha256(sqlite_db.read_bytes()).hexdigest() == digest
    assert not (sqlite_db.parent / "other.db").exists() and not Path("other.db").exists()


def test_sqlite_missing_file_timeout_and_bad_urls(sqlite_db: Path, root: Path, tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no SQLite database at"):
        render_dossiers(f"sqlite://{tmp_path}/none.db", query="SELECT 1", root=root)
    assert not (tmp_path / "none.db").exists()
    with pytest.raises(SourceError, match="took longer than the query timeout"):
        render_dossiers(f"sqlite://{sqlite_db}", query="WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 "
                        "FROM c) SELECT 'alice' AS user_slug, max(n) FROM c", root=root, query_timeout=0.2)
    for url, reason in [("ftp://host/db", "unsupported source scheme 'ftp'"),
                        ("clickhouse://u:p@host:notaport/db", "malformed source URL"),
                        ("clickhouse:///db", "has no host"),
                        ("clickhouse://h/db?password=x", "unknown option 'password'"),
                        ("sqlite://host/x.db", "name a local path")]:
        with pytest.raises(SourceError, match=reason) as error:
            render_dossiers(url, query="SELECT 1", root=root)
        assert ":p@" not in str(error.value)


@pytest.mark.parametrize("call", ["lo_export({oid}, '{out}')", "pg_catalog.lo_export ({oid}, '{out}')",
                                  "\"lo_export\"({oid}, '{out}')", "LO_EXPORT/**/({oid}, '{out}')"])
def test_postgresql_lo_export_cannot_write_a_server_file(pg_trades: str, root: Path, tmp_path: Path,
                                                         call: str) -> None:
    """A READ ONLY transaction does not stop lo_export of an existing large object (checked on this server):
    the function check does, whatever the spelling."""
    with psycopg.connect(pg_trades, autocommit=True) as conn:
        oid = conn.execute("SELECT lo_from_bytea(0, 'pwned')").fetchone()[0]
    out = Path(tempfile.mkdtemp(prefix="ragstead-lo-")) / "written"
    out.parent.chmod(0o777)  # the server may run as another user: nothing but the check may stop the write
    query = f"SELECT 'alice' AS user_slug, {call.format(oid=oid, out=out)} AS n"
    try:
        with pytest.raises(SourceError, match="lo_export"):
            render_dossiers(pg_trades, query=query, root=root)
        with pytest.raises(SourceError, match="lo_export"):
            fetch_rows(parse_source(pg_trades), query, Limits(10, 60, 100))
        assert not out.exists()
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


@pytest.mark.parametrize("function", ["pg_terminate_backend", "pg_cancel_backend"])
def test_postgresql_cannot_signal_another_session(pg_trades: str, root: Path, function: str) -> None:
    with psycopg.connect(pg_trades, autocommit=True) as other:
        pid = other.info.backend_pid
        with pytest.raises(SourceError, match=function):
            render_dossiers(pg_trades, query=f"SELECT 'alice' AS user_slug, {function}({pid})", root=root)
        assert other.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("query", ["SELECT set_config('search_path', 'x', false)",
                                   "SELECT pg_read_file('/etc/hostname')", "SELECT pg_notify('c', 'x')",
                                   "SELECT * FROM dblink('x', 'DELETE FROM t')",
                                   "SELECT query_to_xml('SELECT lo_export(1, ''/tmp/x'')', true, false, '')"])
def test_postgresql_functions_acting_outside_the_database_are_refused(query: str) -> None:
    with pytest.raises(SourceError, match="acts outside the database"):
        check_read_only_statement(query, "postgresql")


# -- the statement check ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["clickhouse", "postgresql", "sqlite"])
@pytest.mark.parametrize("query", [
    "SELECT 1",
    "select 1;",
    "  -- a comment; DROP TABLE x\n SELECT 1",
    "/* DELETE; */ WITH a AS (SELECT 1) SELECT * FROM a",
    "(SELECT 1) UNION ALL (SELECT 2)",
    "SELECT 'a;b', \"c;d\" FROM t WHERE x = 'it''s; fine'",
    "SELECT lo_exporter, \"pg_read_file\" FROM t",
])
def test_read_statements_pass_the_check(engine: str, query: str) -> None:
    check_read_only_statement(query, engine)


@pytest.mark.parametrize(("engine", "query"), [
    ("postgresql", "SELECT 'a\\'; DROP TABLE t; --'"),  # no backslash escapes in standard strings
    ("postgresql", "SELECT $x$ ; $x$; DROP TABLE t"),
    ("postgresql", "SELECT 1 AS a$x$; DROP TABLE t; SELECT 1 AS b$x$"),  # `$` inside a name quotes nothing
    ("postgresql", "SELECT U&\"lo\\005fexport\"(1, '/tmp/x')"),
    ("clickhouse", "SELECT 1 # ; \n; DROP TABLE t"),
    ("sqlite", "SELECT [a;b]; DROP TABLE t"),
    ("clickhouse", "SHOW TABLES"),
    ("postgresql", "COPY t TO '/tmp/x'"),
    ("postgresql", ""),
    ("clickhouse", "SELECT 'unterminated"),
])
def test_the_statement_check_lexes_like_the_engine(engine: str, query: str) -> None:
    with pytest.raises(SourceError):
        check_read_only_statement(query, engine)


def test_the_result_as_json(chdb_source: str, root: Path) -> None:
    data = render_dossiers(chdb_source, query=QUERY, root=root, group_by="proxy_wallet").to_dict()
    assert set(data) == {"source", "query_hash", "rows", "written", "unchanged", "skipped"}
    assert data["skipped"][1] == {"row": 6, "reason": "user '../../etc' in column 'user_slug' is not a valid user slug"}
    assert os.sep not in "".join(p.replace("/", "") for p in data["written"])


# -- through kb.ingest and the CLI ---------------------------------------------------------------------------


def test_kb_ingest_renders_indexes_and_scopes_the_dossiers(chdb_source: str, root: Path, hashing_embedder) -> None:
    import ragstead

    with ragstead.open(root, embedder=hashing_embedder, auto_tags=False) as kb:
        result = kb.ingest([chdb_source], query=QUERY, group_by="proxy_wallet").results[0]
        assert result.status == "added", result.to_dict()
        assert result.url == chdb_source and "3 dossiers from" in (result.title or "")
        assert [s["reason"] for s in result.targets["default"]["skipped"]]  # the hostile rows, reported
        alice = {h.file_path for h in kb.search("election sports crypto pnl", user="alice", k=10).hits}
        assert alice and all(p.startswith("artifacts/dossiers/alice/") for p in alice)
        bob = {h.file_path for h in kb.search("election sports crypto pnl", user="bob", k=10).hits}
        assert bob and all(p.startswith("artifacts/dossiers/bob/") for p in bob)
        assert kb.ingest([chdb_source], query=QUERY, group_by="proxy_wallet").results[0].status == "unchanged"


def test_the_cli_renders_dossiers_from_sqlite_and_never_prints_the_url_password(tmp_path: Path, cli) -> None:
    from helpers.project import Project

    database = tmp_path / "analytics.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE wallets (user_slug TEXT, proxy_wallet TEXT, pnl REAL)")
        db.executemany("INSERT INTO wallets VALUES (?, ?, ?)", [("alice", WALLET_1, 12.5), ("bob", WALLET_3, -4.0)])
    project = Project.__new__(Project)
    project.root = tmp_path / "p"
    project.root.mkdir()
    done = cli(project, "ingest", f"sqlite:///{database}", "--query", "SELECT * FROM wallets", "--group-by",
               "proxy_wallet", "--json")
    result = json.loads(done.stdout)["results"][0]
    assert result["status"] == "added" and len(result["targets"]["default"]["dossiers"]) == 2
    listed = json.loads(cli(project, "ls", "--user", "alice", "--json").stdout)
    assert [d["doc_type"] for d in listed["documents"]] == ["dossier"]
    failed = cli(project, "ingest", "postgresql://reader:s3cret@127.0.0.1:1/x", "--query", "SELECT 1", expect=3)
    assert "s3cret" not in failed.stdout + failed.stderr and failed.stdout.startswith("failed: ")
