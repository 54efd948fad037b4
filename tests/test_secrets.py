"""Secrets in store settings are never printed: not by `redact`, `describe()`, `location`, an error of opening the
store, nor the output of `ragstead status` / `ragstead index` (real processes), nor the driver's pool logs.

Every server address is 127.0.0.1 on a port that was bound and closed, so each driver fails fast and no test
ever leaves loopback.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli_runner import run_ragstead
from helpers.project import OFFLINE_ENV, write_files
from ragstead.errors import RagsteadError
from ragstead.knowledge_base import open as open_kb
from ragstead.stores.factory import StoreSpec, redact

SECRET = "Zq9-s3cretX"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


PORT = _closed_port()
HOST = f"127.0.0.1:{PORT}"

# (id, spec): each holds SECRET somewhere in a password or a secret parameter.
SPELLINGS = [
    ("url", f"postgresql://u:{SECRET}@{HOST}/db"),
    ("postgres-scheme", f"postgres://u:{SECRET}@{HOST}/db"),
    ("query-password", f"postgresql://u@{HOST}/db?password={SECRET}"),
    ("query-password-middle", f"postgresql://u@{HOST}/db?sslmode=disable&password={SECRET}&application_name=t"),
    ("query-sslpassword", f"postgresql://u@{HOST}/db?sslpassword={SECRET}&sslkey=/tmp/client.key"),
    ("query-unencoded-ampersand", f"postgresql://u@{HOST}/db?password=ab&{SECRET}&sslmode=disable"),
    ("at-in-password", f"postgresql://u:ab@{SECRET}@{HOST}/db"),
    ("colon-in-password", f"postgresql://u:ab:{SECRET}@{HOST}/db"),
    ("slash-in-password", f"postgresql://u:ab/{SECRET}@{HOST}/db"),
    ("question-in-password", f"postgresql://u:ab?{SECRET}@{HOST}/db"),
    ("hash-in-password", f"postgresql://u:ab#{SECRET}@{HOST}/db"),
    ("space-in-password", f"postgresql://u:ab {SECRET}@{HOST}/db"),
    ("percent-encoded", f"postgresql://u:{SECRET}%40x@{HOST}/db"),
    ("dsn", f"host=127.0.0.1 port={PORT} user=u password={SECRET} dbname=db"),
    ("dsn-quoted-space", f"host=127.0.0.1 port={PORT} password='ab {SECRET}' dbname=db"),
    ("dsn-unquoted-space", f"host=127.0.0.1 port={PORT} password=ab {SECRET} dbname=db"),
    ("chroma-user-info", f"chroma+http://u:{SECRET}@{HOST}"),
    ("chroma-slash-in-password", f"chroma+http://u:ab/{SECRET}@{HOST}"),
    ("chroma-token", f"chroma+http://{HOST}?token={SECRET}"),
    ("unknown-scheme", f"mysql://root:{SECRET}@{HOST}/db"),
    ("single-slash-typo", f"postgresql:/u:{SECRET}@{HOST}/db"),
]
IDS = [name for name, _ in SPELLINGS]
SPECS = [spec for _, spec in SPELLINGS]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write_files(root, {"kb/users/alice/note.md": "Alice's note about the billing database."})
    return root


def test_there_are_enough_spellings():
    assert len(SPELLINGS) >= 12 and all(SECRET in spec for spec in SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_redact_masks_every_spelling(spec):
    masked = redact(spec)
    assert SECRET not in masked and "***" in masked, masked
    assert redact(masked) == masked  # idempotent: masking a masked setting changes nothing


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_describe_location_and_the_error_of_opening_never_show_it(spec, project):
    try:
        parsed = StoreSpec.parse(spec, root=project, default_db=project / "kb/rag/ragstead.db")
    except RagsteadError as exc:  # rejected settings: the message names the setting, masked
        assert SECRET not in str(exc) and "***" in str(exc), str(exc)
        return
    assert SECRET not in parsed.describe(), parsed.describe()
    with open_kb(project, store=spec) as kb:
        assert SECRET not in kb.location
    with pytest.raises(RagsteadError) as caught:
        parsed.open()
    assert SECRET not in str(caught.value), str(caught.value)


def test_what_redact_keeps():
    """User names, hosts, file paths and harmless parameters stay readable."""
    assert redact(f"postgresql://u:{SECRET}@db.example:5432/kb") == "postgresql://u:***@db.example:5432/kb"
    assert (redact(f"postgresql://u@h/db?passfile=/home/u/.pgpass&sslkey=/k/c.key&password={SECRET}")
            == "postgresql://u@h/db?passfile=/home/u/.pgpass&sslkey=/k/c.key&password=***")
    assert redact(f"host=h password='a b {SECRET}' dbname=kb") == "host=h password=*** dbname=kb"
    assert redact(f"host=h password={SECRET} sslkey=/k/c.key") == "host=h password=*** sslkey=/k/c.key"
    for safe in ("postgresql://ragstead@127.0.0.1:5432/kb", "chroma:kb/rag/chroma?exact_rows=0", "sqlite",
                 "chroma+http://127.0.0.1:8000?db=kb/rag/team.db", "/srv/kb/rag/ragstead.db"):
        assert redact(safe) == safe


def test_driver_messages_that_echo_a_piece_of_the_password_are_masked():
    spec = f"postgresql://u:p@{SECRET}@127.0.0.1/db"
    echoed = f"failed to resolve host '{SECRET}@127.0.0.1': [Errno -2] Name or service not known"
    assert redact(echoed, spec) == "failed to resolve host '***': [Errno -2] Name or service not known"
    spaced = f"postgresql://u:ab {SECRET}@127.0.0.1/db"
    assert SECRET not in redact(f'unexpected spaces found in "ab {SECRET}", use %20', spaced)
    assert redact('missing "=" after "tail" in connection info string', "host=h password=secrettail tail") == (
        'missing "=" after "***" in connection info string')


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_ragstead(*args, "--root", str(root), env=OFFLINE_ENV)


def test_status_and_index_output_never_show_it(project):
    runs = [(spec, command) for spec in SPECS for command in ("status", "index")]
    results = [_cli(project, command, "--store", spec) for spec, command in runs]  # in-process: one at a time
    for (spec, command), result in zip(runs, results, strict=True):
        output = result.stdout + result.stderr
        assert result.returncode == 2, (command, spec, output)
        assert SECRET not in output, (command, spec, output)
        assert "Traceback" not in output and output.startswith("error: "), (command, spec, output)


def test_an_unreachable_server_prints_exactly_one_error_line(project):
    result = _cli(project, "status", "--store", f"postgresql://u:{SECRET}@{HOST}/db")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and result.stdout == ""
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert SECRET not in result.stderr and "postgresql://u:***@" in lines[0]


def test_the_driver_logs_are_kept_off_stderr_and_masked():
    """With no logging configured the pool's warnings would reach stderr (Python's last resort); an application
    that collects them gets them masked."""
    from ragstead.stores.postgres import DRIVER_LOGGERS, quiet_driver_logs

    quiet_driver_logs()
    quiet_driver_logs()  # idempotent
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("psycopg").handlers)
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    collect = Collect()
    logger = logging.getLogger("psycopg.pool")
    logger.addHandler(collect)
    try:
        logger.warning("error connecting in %r: %s", "pool-1", f"bad dsn password={SECRET} host=h")
    finally:
        logger.removeHandler(collect)
    assert records == ["error connecting in 'pool-1': bad dsn password=*** host=h"]
    assert "psycopg.pool" in DRIVER_LOGGERS


_DIES_MID_RUN = """
import sys
from ragstead.stores.postgres import PostgresStore
store = PostgresStore(sys.argv[1], connect_timeout=3)
print("open", flush=True)
sys.stdin.readline()  # the server is stopped meanwhile
try:
    store.stats()
except Exception as exc:
    print(f"error: {exc}", file=sys.stderr)
store.close()
"""


def test_a_server_that_dies_mid_run_gives_one_error_line_and_no_pool_noise(tmp_path):
    """The pool's worker threads log `discarding closed connection` and `error connecting in 'pool-1'` while
    the server is gone; none of it reaches stderr."""
    import shutil
    import tempfile

    from ragstead.stores.postgres_local import LocalPostgres

    base = Path(tempfile.mkdtemp(prefix="ragstead-test-dies-"))
    base.chmod(0o755)
    server = LocalPostgres(base / "data", durable=False)
    try:
        server.start()
        url = server.create_database("dies").replace("postgresql://ragstead@", f"postgresql://ragstead:{SECRET}@")
        assert SECRET in url  # trust authentication on loopback: the password is accepted and ignored
        child = subprocess.Popen([sys.executable, "-c", _DIES_MID_RUN, url], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=OFFLINE_ENV)
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
        server.stop()
        _, stderr = child.communicate("\n", timeout=120)
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: PostgreSQL store postgresql://ragstead:***@"), stderr
    assert SECRET not in stderr
