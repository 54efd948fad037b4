"""Start-up: the wall time of whole `ragstead` processes, this checkout against a baseline checkout, in one run.

    python -m bench.startup --base /tmp/base --project /tmp/sample [--repeat 7]

`--base` is a worktree of the baseline commit (`git worktree add /tmp/base COMMIT`); `--project` an indexed copy
of the sample (`ragstead index --root DIR --roots kb,artifacts,docs`). Each repetition runs every command once
under each checkout, interleaved, so both see the same machine load; the table shows medians. Writes
bench/results/startup.{json,md}.

    python -m bench startup [--base /tmp/base] [--repeat 9]

The commands that only read the index (#51): `ls`, `status` and `tags`, run in the folder of a small project
this makes (three notes, `ragstead init` and `ragstead index`), as a person runs them there; CPU and wall time
(medians) and the modules each process ends with (`sys.modules`), beside the baseline checkout when `--base`
names one. Writes bench/results/startup_read.{json,md}.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import write_results

HERE = Path(__file__).resolve().parents[1] / "src"
QUESTION = "what did we decide about the billing database"  # `make demo`'s: alice's notes answer it
# Model keys would send `ask` to an LLM: both runs answer extractively, offline.
LLM_KEYS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "RAGSTEAD_OPENAI_BASE_URL", "RAGSTEAD_GEMINI_BASE_URL")


def commands(project: Path) -> dict[str, list[str]]:
    root = ["--root", str(project), "--user", "alice"]
    return {"--version": ["--version"], "-h": ["-h"], "query -h": ["query", "-h"],
            f"query {QUESTION!r}": ["query", QUESTION, *root],
            f"ask {QUESTION!r}": ["ask", QUESTION, *root, "--extractive"]}


def timed(src: Path, args: list[str], cwd: Path | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one process. CPU time is the steadier number on a shared machine.
    Byte-code is written and used, as from an installed package (PYTHONDONTWRITEBYTECODE would compile every
    module on every start)."""
    env = {k: v for k, v in os.environ.items() if k not in (*LLM_KEYS, "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(src)
    argv = [sys.executable, "-m", "ragstead", *args] if args else [sys.executable, "-c", "pass"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup")
    parser.add_argument("--base", type=Path, required=True, help="a worktree of the baseline commit")
    parser.add_argument("--project", type=Path, required=True, help="an indexed copy of the sample")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    cases = {"python -c pass": [], **commands(args.project)}
    checkouts = {"base": args.base / "src", "this": HERE}
    for case_args in cases.values():  # warm: byte-code compiled, files in the page cache
        for src in checkouts.values():
            timed(src, case_args)
    times: dict[str, dict[str, list[tuple[float, float]]]] = {case: {name: [] for name in checkouts}
                                                                for case in cases}
    for _ in range(args.repeat):
        for case, case_args in cases.items():
            for name, src in checkouts.items():
                times[case][name].append(timed(src, case_args))
    base_commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=args.base).stdout.strip()
    medians = {case: {name: {"wall": round(statistics.median(w for w, _ in runs), 3),
                             "cpu": round(statistics.median(c for _, c in runs), 3)} for name, runs in by.items()}
               for case, by in times.items()}
    table = [["command", f"baseline {base_commit}: wall / CPU (s)", "this commit: wall / CPU (s)",
              "CPU speed-up"]]
    for case, by in medians.items():
        base, this = by["base"], by["this"]
        table.append([f"`{case}`", f"{base['wall']:.3f} / {base['cpu']:.3f}", f"{this['wall']:.3f} / {this['cpu']:.3f}",
                      f"{base['cpu'] / max(this['cpu'], 1e-3):.1f}×"])
    write_results("startup", {"base": base_commit, "repeat": args.repeat, "median_s": medians,
                              "all_s": times}, table)


READ_COMMANDS = ("ls", "status", "tags")
# Runs the CLI as `python -m ragstead ARGS` does, then prints how many modules the process holds on stderr.
COUNT_MODULES = ("import runpy, sys\nsys.argv = ['ragstead', *sys.argv[1:]]\ntry:\n"
                 "    runpy.run_module('ragstead', run_name='__main__', alter_sys=True)\n"
                 "except SystemExit:\n    pass\nprint(len(sys.modules), file=sys.stderr)")


def modules_after(src: Path, args: list[str], cwd: Path) -> int:
    """How many modules a `ragstead ARGS` process (a bare interpreter: no ARGS) has imported when it ends."""
    env = {k: v for k, v in os.environ.items() if k not in (*LLM_KEYS, "PYTHONDONTWRITEBYTECODE")}
    env["PYTHONPATH"] = str(src)
    code = COUNT_MODULES if args else "import sys; print(len(sys.modules), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          check=True)
    return int(done.stderr.strip().splitlines()[-1])


def small_project(folder: Path) -> Path:
    """Three tagged notes in a personal project, initialised and indexed by this checkout's CLI."""
    for i in range(1, 4):
        (folder / f"note{i}.md").write_text(f"---\ntags: [demo, n{i}]\n---\n# Note {i}\n\nWe decided about "
                                            f"billing database number {i}.\n", encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if k not in LLM_KEYS}, "PYTHONPATH": str(HERE)}
    for args in (["init", str(folder), "--owner", "me"], ["index", "--root", str(folder), "--quiet"]):
        subprocess.run([sys.executable, "-m", "ragstead", *args], env=env, check=True, stdout=subprocess.DEVNULL)
    return folder


def read_commands(base: Path | None, repeat: int = 9) -> dict[str, Any]:
    """`ls`, `status` and `tags` in a small project's folder: CPU, wall and modules, beside `base` if given."""
    import tempfile

    checkouts = {"this": HERE, **({"base": base / "src"} if base else {})}
    cases: dict[str, list[str]] = {"python -c pass": [], **{f"ragstead {c}": [c] for c in READ_COMMANDS}}
    with tempfile.TemporaryDirectory(prefix="ragstead-startup-") as scratch:
        project = small_project(Path(scratch))
        for case_args in cases.values():  # warm: byte-code compiled, files in the page cache
            for src in checkouts.values():
                timed(src, case_args, project)
        runs: dict[str, dict[str, list[tuple[float, float]]]] = {c: {n: [] for n in checkouts} for c in cases}
        for _ in range(repeat):
            for case, case_args in cases.items():
                for name, src in checkouts.items():
                    runs[case][name].append(timed(src, case_args, project))
        counts = {case: {name: modules_after(src, case_args, project) for name, src in checkouts.items()}
                  for case, case_args in cases.items()}
    medians = {case: {name: {"wall": round(statistics.median(w for w, _ in times), 3),
                             "cpu": round(statistics.median(c for _, c in times), 3), "modules": counts[case][name]}
                      for name, times in by.items()} for case, by in runs.items()}
    base_commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=base).stdout.strip() if base else ""
    head = ["command", *([f"baseline {base_commit}: CPU / wall (s), modules"] if base else []),
            "this checkout: CPU / wall (s), modules"]
    table = [head] + [[f"`{case}`", *(f"{m[n]['cpu']:.3f} / {m[n]['wall']:.3f}, {m[n]['modules']}"
                                      for n in (("base", "this") if base else ("this",)))]
                      for case, m in medians.items()]
    data = {"base": base_commit, "repeat": repeat, "median_s": medians, "all_s": runs}
    write_results("startup_read", data, table)
    return data


if __name__ == "__main__":
    main()
