"""Load on `POST /v1/query` of a real `ragstead serve` process, from a second process on loopback.

The server indexes the bundled sample plus 300 synthetic notes for one user (real model, real index).
The client runs N threads with keep-alive connections and stops after a request count or a time limit,
whichever comes first. Three runs in one go: no rate limit with the query-embedding cache on, the
same with the cache off (every query embedded), and a rate-limited run (limits per key) that must
show 429s and nothing else besides 200s.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import percentiles, write_results

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sample"
TOPICS = ["heron survey", "billing database", "travel policy", "quarterly report", "kestrel nest", "invoice run",
          "database migration", "team glossary", "pelican census", "release checklist"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ragstead(root: Path, *args: str) -> str:
    return subprocess.run([sys.executable, "-m", "ragstead", *args, "--root", str(root)], check=True,
                          capture_output=True, text=True).stdout


def prepare(workdir: Path) -> tuple[Path, str]:
    root = workdir / "project"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns("rag"))
    notes = root / "kb" / "users" / "loadtest"
    notes.mkdir(parents=True)
    for i in range(300):
        topic = TOPICS[i % len(TOPICS)]
        (notes / f"note-{i:03d}.md").write_text(f"Note {i} about the {topic}: item {i * 7 % 31} needs follow-up "
                                                f"by week {i % 52}, owner {['ann', 'raj', 'li'][i % 3]}.")
    _ragstead(root, "index", "--quiet")
    key = json.loads(_ragstead(root, "keys", "add", "--user", "loadtest", "--json"))["key"]
    return root, key


def client(base: str, key: str, requests: int, seconds: float, threads: int, distinct: int) -> dict[str, Any]:
    """Run in its own process (`python -m bench api-client`): fire requests, collect latencies and statuses."""
    import httpx

    latencies: list[float] = []
    statuses: dict[str, int] = {}
    lock = threading.Lock()
    issued = 0
    deadline = time.perf_counter() + seconds

    def worker(n: int) -> None:
        nonlocal issued
        with httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {key}"}) as http:
            while time.perf_counter() < deadline:
                with lock:
                    if issued >= requests:
                        return
                    i = issued
                    issued += 1
                question = f"{TOPICS[i % len(TOPICS)]} follow-up {i % distinct}"
                started = time.perf_counter()
                try:
                    code = str(http.post("/v1/query", json={"query": question, "top_k": 5}).status_code)
                except httpx.HTTPError as exc:
                    code = type(exc).__name__
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    statuses[code] = statuses.get(code, 0) + 1
                    if code == "200":
                        latencies.append(elapsed)

    started = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - started
    p = percentiles(latencies)
    ordered = sorted(latencies)
    p["p99"] = round(ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))], 3) if ordered else 0.0
    return {"requests": sum(statuses.values()), "seconds": round(wall, 2), "statuses": statuses,
            "ok_per_second": round(statuses.get("200", 0) / wall, 1), "latency_ms": p}


def run_one(root: Path, key: str, serve_args: list[str], load: dict[str, Any]) -> dict[str, Any]:
    port = _port()
    server = subprocess.Popen([sys.executable, "-m", "ragstead", "serve", "--port", str(port), "--root", str(root),
                               *serve_args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx

        for _ in range(300):
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        out = subprocess.run([sys.executable, "-m", "bench", "api-client", "--base", base, "--key", key,
                              "--load", json.dumps(load)], check=True, capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait(timeout=30)


def main(workdir: Path | None, requests: int = 2000, seconds: float = 60.0, threads: int = 8) -> None:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ragstead-api-"))
    root, key = prepare(workdir)
    load = {"requests": requests, "seconds": seconds, "threads": threads, "distinct": 50}
    runs = {
        "no rate limit, embedding cache on": (["--rate-per-minute", "0", "--burst", "0"], load),
        "no rate limit, embedding cache off": (["--rate-per-minute", "0", "--burst", "0", "--embed-cache", "0"],
                                               {**load, "distinct": 10**9}),
        "rate limit 600/min + burst 20/s, cache on": (["--rate-per-minute", "600", "--burst", "20"], load),
    }
    results: dict[str, Any] = {"data": __doc__.split("\n\n")[1].replace("\n", " "), "load": load, "runs": {}}
    for name, (serve_args, run_load) in runs.items():
        results["runs"][name] = run_one(root, key, serve_args, run_load)
    rows = [["run", "requests", "200", "429", "other", "ok req/s", "p50 ms", "p99 ms"]]
    for name, r in results["runs"].items():
        other = sum(v for k, v in r["statuses"].items() if k not in ("200", "429"))
        rows.append([name, str(r["requests"]), str(r["statuses"].get("200", 0)), str(r["statuses"].get("429", 0)),
                     str(other), f"{r['ok_per_second']:.1f}", f"{r['latency_ms']['p50']:.1f}",
                     f"{r['latency_ms']['p99']:.1f}"])
    write_results("api_load", results, rows)
