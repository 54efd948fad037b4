"""`make lint`'s complexity bound (#51): tools/check_complexity.py flags a function above radon's complexity 20,
and passes one at it."""

import importlib.util
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "check_complexity.py"


@pytest.fixture(scope="module")
def checker():
    spec = importlib.util.spec_from_file_location("check_complexity", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _branches(name: str, count: int, indent: str = "") -> str:
    """A function of complexity 1 + `count` (one `if` each)."""
    body = "".join(f"{indent}    if x == {i}:\n{indent}        return {i}\n" for i in range(count))
    return f"{indent}def {name}(x):\n{body}{indent}    return -1\n"


def test_a_function_over_twenty_is_listed_and_one_at_twenty_is_not(checker, tmp_path):
    (tmp_path / "mod.py").write_text(_branches("at_twenty", 19) + "\n\n" + _branches("over_twenty", 20))
    found = checker.over_bound([tmp_path])
    assert len(found) == 1 and " over_twenty D (21)" in found[0] and found[0].startswith(f"{tmp_path / 'mod.py'}:")


def test_methods_and_functions_inside_functions_are_named(checker, tmp_path):
    method = "class Shelf:\n" + _branches("sort", 21, indent="    ")
    nested = "def outer(x):\n" + _branches("inner", 21, indent="    ") + "    return inner(x)\n"
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "deep.py").write_text(method + "\n\n" + nested)
    names = {line.split()[1] for line in checker.over_bound([tmp_path])}
    # radon leaves a closure out of the function around it (and `radon cc` shows none): listed on its own, the
    # complexity cannot hide in one.
    assert names == {"Shelf.sort", "outer.inner"}


def test_the_exit_code_says_whether_anything_is_over(checker, tmp_path, capsys):
    (tmp_path / "ok.py").write_text(_branches("fine", 5))
    assert checker.main([str(tmp_path)]) == 0
    (tmp_path / "bad.py").write_text(_branches("tangled", 25))
    assert checker.main([str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "tangled D (26)" in out and "1 function(s) over complexity 20" in err
    assert checker.main(["--max", "30", str(tmp_path)]) == 0
