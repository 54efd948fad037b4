"""`python tests/helpers/core_only.py PYPROJECT ARGS...`: ragstead's CLI as on a core install (`pip install
ragstead`, no extra): every installed package outside the closure of pyproject's core requirements is unimportable,
so the test venv (which has every extra) stands in for a fresh core venv."""

import contextlib
import importlib.abc
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(req: str) -> str:
    return canonical(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req).group(0))


def core_closure(pyproject: Path) -> set[str]:
    """The distributions a core install brings: the core requirements and theirs, extras' requirements left out."""
    todo = [requirement(req) for req in tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]]
    closure: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in closure:
            continue
        closure.add(dist)
        with contextlib.suppress(md.PackageNotFoundError):  # a requirement for another platform or Python
            todo += [requirement(req) for req in md.requires(dist) or [] if "extra ==" not in req]
    return closure


class Block(importlib.abc.MetaPathFinder):
    def __init__(self, blocked: set[str]) -> None:
        self.blocked = blocked

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.split(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {fullname!r} (not in the core install)", name=fullname)


if __name__ == "__main__":
    closure = core_closure(Path(sys.argv[1]))
    blocked = {module for module, dists in md.packages_distributions().items()
               if module != "ragstead" and not {canonical(d) for d in dists} & closure}
    sys.meta_path.insert(0, Block(blocked))
    sys.argv = ["ragstead", *sys.argv[2:]]
    from ragstead.__main__ import main

    main()
