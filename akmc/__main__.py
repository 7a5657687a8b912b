"""The `akmc` entry point (console script and `python -m akmc`).

`check` runs in pre-commit hooks on every commit, so it parses its own
arguments with argparse and never imports typer, whose import alone costs more
than checking a file. Every other command goes through the typer app.
"""

import sys


def main() -> None:
    if sys.argv[1:2] == ["check"]:
        from akmc.commands import check

        sys.exit(check.main(sys.argv[2:]))
    from akmc.cli import app

    app()


if __name__ == "__main__":
    main()
