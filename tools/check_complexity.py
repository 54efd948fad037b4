"""The complexity bound `make lint` holds (#51): no function or method under src/ragstead above radon's
cyclomatic complexity 20 (grade C or better). One over it is split into named steps, not waived here.

    python tools/check_complexity.py [--max N] [PATH ...]    (default: src/ragstead)

Prints each function over the bound (file:line, name, grade and complexity) and exits 1 when there is one.
The blocks are radon's (`radon cc`), and the ones it does not show: a function defined inside another (radon
leaves its complexity out of the outer one's) and the methods of a class inside a function or class."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from radon.complexity import add_inner_blocks, cc_rank, cc_visit
from radon.visitors import Function

MAX_COMPLEXITY = 20
ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "ragstead"


def over_bound(paths: Iterable[Path], limit: int = MAX_COMPLEXITY) -> list[str]:
    """One line per function in the Python files under `paths` whose complexity is above `limit`."""
    found = []
    for file in _python_files(paths):
        blocks = add_inner_blocks(cc_visit(file.read_text(encoding="utf-8")))
        found += [f"{_shown(file)}:{block.lineno} {block.fullname} {cc_rank(block.complexity)} ({block.complexity})"
                  for block in sorted(blocks, key=lambda b: b.lineno)
                  if isinstance(block, Function) and block.complexity > limit]
    return found


def _shown(file: Path) -> Path:
    """The file relative to the repository, when it is inside it."""
    real = file.resolve()
    return real.relative_to(ROOT) if real.is_relative_to(ROOT) else file


def _python_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=[SOURCE],
                        help="files or folders (default: src/ragstead)")
    parser.add_argument("--max", type=int, default=MAX_COMPLEXITY, help="the highest complexity allowed")
    args = parser.parse_args(argv)
    found = over_bound(args.paths, args.max)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} function(s) over complexity {args.max}: split each into named steps (#51)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
