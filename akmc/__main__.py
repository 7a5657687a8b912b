"""The `akmc` entry point (console script and `python -m akmc`).

`check` runs in pre-commit hooks on every commit, so it parses its own
arguments with argparse and never imports typer, whose import alone costs more
than checking a file. Every other command goes through the typer app.
"""

import sys


def main() -> None:
    try:
        if sys.argv[1:2] == ["check"]:
            from akmc.commands import check

            sys.exit(check.main(sys.argv[2:]))
        from akmc.cli import app

        app()
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception as error:  # noqa: BLE001 - no input may end in a traceback
        print(f"akmc: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
