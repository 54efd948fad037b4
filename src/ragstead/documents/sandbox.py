"""Files are read in a worker process with a hard budget (#45.3): the loaders' own checks (the clock between pages,
the depth scan, the zip limits) stop the cases they foresee with a clear reason, but a parser can still spend
minutes or gigabytes inside one C call no check runs during (lexbor on deep markup, the e-mail parser on a huge
message). Here the worker runs under an address-space limit (`max_reader_mb`) and a CPU-time limit (the file's
seconds), and the caller kills it when the file's time is up; the file is then skipped with the reason and the
next one gets a fresh worker.

A worker is a `python -m ragstead.documents.sandbox` process reading one JSON request a line on stdin (the path,
the limits, the seconds left) and answering one JSON line on stdout (the loaded document, or the LoadError's
message): JSON, not pickle, so what a worker sends back is data, whatever a hostile file did to it. Workers are
kept between files (starting one costs about a tenth of a second; a read costs a round trip and a JSON copy of the
text) and at most one per core reads at once. `max_reader_mb = 0` reads in the calling process instead.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from ragstead.documents.ids import storable_path
from ragstead.documents.loaders import Budget, LoadedDocument, LoadLimits, load_document
from ragstead.errors import LoadError, UnsupportedFileError

# Past the file's own deadline before its worker is killed: the worker's budget check says why first, if it can.
GRACE_SECONDS = 1.0
# A worker whose address space has grown past this share of the limit (Python keeps its heap's high-water mark,
# and every parser it imported stays mapped) is retired after its answer, and does not start a file with less.
RETIRE_SHARE = 0.5
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # the folder holding `ragstead`, for the worker's path


def load_isolated(path: Path, limits: LoadLimits | None = None, budget: Budget | None = None) -> LoadedDocument:
    """`load_document` in a worker process under the file's memory and time budget: the same document or the
    same LoadError, and a LoadError when the worker runs out of memory or time (it is killed, never waited for)."""
    budget = budget or Budget(limits or LoadLimits(), storable_path(path))
    if budget.limits.max_reader_bytes <= 0 or not _POOL.available:
        return load_document(path, budget=budget)
    budget.tick()
    reply = _read(path, budget)
    if reply.get("retry"):  # that worker had grown too big to start this file under its limit: a fresh one
        reply = _read(path, budget)
    if reply.get("retry"):
        raise LoadError(f"{budget.name}: max_reader_mb ({budget.limits.max_reader_bytes >> 20} MiB) is less than the "
                        "reader needs to start, skipped")
    if "error" in reply:
        raise (UnsupportedFileError if reply.get("unsupported") else LoadError)(reply["error"])
    budget.chars = int(reply["chars"])
    return _document(reply["document"])


def _read(path: Path, budget: Budget) -> dict[str, Any]:
    worker = _POOL.take()
    try:
        return worker.read(path, budget)
    except BaseException:
        worker.kill()
        raise
    finally:
        _POOL.give(worker)


class _Worker:
    """One reader process and its pipes."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH"))
                                                            if p)}
        self.process = subprocess.Popen([sys.executable, "-m", "ragstead.documents.sandbox"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, close_fds=True)
        self.retired = False

    def read(self, path: Path, budget: Budget) -> dict[str, Any]:
        """Ask for one file; the answer, or LoadError when the worker died or ran past the file's time."""
        seconds = max(budget.deadline - time.monotonic(), 0.001)
        request = {"path": os.fsencode(os.path.abspath(path)).hex(), "seconds": seconds,
                   "limits": asdict(budget.limits) | {"seconds": seconds}}
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(json.dumps(request).encode() + b"\n")
            stdin.flush()
        except OSError:
            self.retired = True
            raise LoadError(f"{budget.name}: the file reader stopped; skipped") from None
        line = _line(stdout, budget.deadline + GRACE_SECONDS)
        if line is None:  # the time is up and the worker is still inside the file
            self.kill()
            raise LoadError(f"{budget.name}: took over {budget.limits.seconds:g} s to read (the per-file time budget, "
                            "file_seconds; the reader was stopped), skipped")
        if not line:
            self.kill()
            raise LoadError(f"{budget.name}: the reader ran out of memory or CPU time on it (max_reader_mb, "
                            f"file_seconds: {_death(self.process)}), skipped")
        reply: dict[str, Any] = json.loads(line)
        self.retired = bool(reply.get("retire"))
        return reply

    def kill(self) -> None:
        self.retired = True
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


def _line(stream: IO[bytes], deadline: float) -> bytes | None:
    """One line from the worker by `deadline`: b"" when it closed its end (it died), None when time ran out."""
    descriptor = stream.fileno()
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([descriptor], [], [], left)[0]:
            return None
        block = os.read(descriptor, 1 << 20)
        if not block:
            return b""
        data += block
        if data.endswith(b"\n"):
            return bytes(data)


def _death(process: subprocess.Popen[bytes]) -> str:
    code = process.wait()
    if code < 0:
        import signal

        return f"stopped by {signal.Signals(-code).name}"
    return f"exit code {code}"


class _Pool:
    """Idle workers to reuse, and at most one reading per core."""

    def __init__(self) -> None:
        self.idle: list[_Worker] = []
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(max(os.cpu_count() or 1, 1))
        self.available = _limits_supported()
        atexit.register(self.close)

    def take(self) -> _Worker:
        self.slots.acquire()
        with self.lock:
            while self.idle:
                worker = self.idle.pop()
                if worker.process.poll() is None:
                    return worker
        try:
            return _Worker()
        except BaseException:
            self.slots.release()
            raise

    def give(self, worker: _Worker) -> None:
        try:
            if worker.retired:
                worker.kill()
            else:
                with self.lock:
                    self.idle.append(worker)
        finally:
            self.slots.release()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for worker in idle:
            worker.kill()


def _limits_supported() -> bool:
    try:
        import resource  # noqa: F401 - POSIX only
    except ImportError:
        return False
    return True


_POOL = _Pool()


def _document(raw: dict[str, Any]) -> LoadedDocument:
    inside = [(str(key), _document(document)) for key, document in raw.get("inside", [])]
    return LoadedDocument(**{**raw, "inside": inside})


# -- the worker's side ------------------------------------------------------------------------------------------


def _set_limits(limits: LoadLimits, seconds: float) -> None:
    """This process's address space to `max_reader_bytes`, and its CPU time to what it used plus `seconds` (the
    kernel's SIGXCPU ends it there). Only soft limits move, so each file can set its own."""
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = limits.max_reader_bytes if hard == resource.RLIM_INFINITY else min(limits.max_reader_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    cpu = int(usage.ru_utime + usage.ru_stime + seconds + GRACE_SECONDS) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu if hard == resource.RLIM_INFINITY else min(cpu, hard), hard))


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    limits = LoadLimits(**request["limits"])
    path = Path(os.fsdecode(bytes.fromhex(request["path"])))
    budget = Budget(limits, storable_path(path))
    out_of_memory = {"error": f"{budget.name}: needed over {limits.max_reader_bytes >> 20} MiB of memory to read "
                              "(max_reader_mb), skipped", "retire": True}
    if _address_space() > limits.max_reader_bytes * RETIRE_SHARE:
        return {"retry": True, "retire": True}
    _set_limits(limits, float(request["seconds"]))
    try:
        loaded = load_document(path, budget=budget)
        return {"document": asdict(loaded), "chars": budget.chars}
    except LoadError as exc:
        if isinstance(exc.__cause__, MemoryError):
            return out_of_memory
        return {"error": str(exc), "unsupported": isinstance(exc, UnsupportedFileError)}
    except MemoryError:  # raised outside a loader (reading the bytes, copying the text)
        return out_of_memory


def _address_space() -> int:
    """This process's mapped address space in bytes (what RLIMIT_AS counts); its peak RSS where /proc is not."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def serve() -> None:
    """The worker: answer requests until stdin closes (the caller exited)."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = json.loads(line)
        reply = _answer(request)
        if _address_space() > int(request["limits"]["max_reader_bytes"]) * RETIRE_SHARE:
            reply["retire"] = True
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()
        if reply.get("retire"):
            return


if __name__ == "__main__":
    serve()

