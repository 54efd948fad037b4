"""`python -m ragstead` and the `ragstead` console script.

`ragstead --version` alone answers here, before the CLI loads typer and rich (about 0.1 s of CPU, most of the
start-up); everything else, `--version` among other arguments included, goes to the typer app in cli/
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        from ragstead import __version__

        print(f"ragstead {__version__}")  # the same line as the app's --version callback
        return
    from ragstead.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
