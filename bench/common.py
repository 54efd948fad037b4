"""Shared helpers: timing, peak RSS, and writing results as JSON + a markdown table."""

from __future__ import annotations

import json
import platform
import resource
import statistics
import subprocess
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
DEFAULT_SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def percentiles(values_ms: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values_ms)
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "n": 0}
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p95": round(p95, 3), "n": len(ordered)}


class Timer:
    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def read_into_page_cache(files: Iterable[Path]) -> None:
    """Read each file once, so the OS page cache holds it when the measurements start."""
    for file in files:
        if file.is_file():
            with open(file, "rb", buffering=0) as handle:
                while handle.read(1 << 24):
                    pass


def write_project(root: Path, files: dict[str, str], config: str = "") -> Path:
    """A project folder holding `files` (path -> text) and, when given, `config` as its ragstead.toml."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if config:
        (root / "ragstead.toml").write_text(config, encoding="utf-8")
    return root


def machine() -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    import os

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    return {"commit": commit or None, "python": platform.python_version(), "cpus": os.cpu_count(),
            "ram_gb": round(ram / 2**30, 1) or None, "machine": platform.machine(),
            "date": datetime.now(UTC).isoformat(timespec="seconds")}


def write_results(name: str, data: dict[str, Any], table: list[list[str]]) -> Path:
    """Write bench/results/<name>.json and <name>.md (a markdown table) and print the table."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"machine": machine(), **data}
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2))
    lines = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
    lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
    markdown = "\n".join(lines) + "\n"
    (RESULTS / f"{name}.md").write_text(f"<!-- {data['machine']} -->\n" + markdown)
    print(markdown)
    return RESULTS / f"{name}.json"


def beir_eval(dataset: Path, split: str, index: str, report: Path, *options: str, show: bool = True) -> dict[str, Any]:
    """`ragstead eval` on a BEIR split over the index (file or store spec) `index`, in its own process, with
    modes vector, lexical and hybrid at k 1, 5, 10, 100; returns the JSON report. `show`: print its table."""
    import sys

    subprocess.run(
        [sys.executable, "-m", "ragstead", "eval", "--beir", str(dataset), "--split", split,
         "--modes", "vector,lexical,hybrid", "--k", "1,5,10,100", "--index-db", index, *options,
         "--report-json", str(report), "--quiet", "--root", str(RESULTS / ".cache")],
        check=True, stdout=None if show else subprocess.DEVNULL,
    )
    return json.loads(report.read_text())
