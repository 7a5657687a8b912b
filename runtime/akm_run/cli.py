"""The `akm-run` command line (argparse: the runtime installs almost nothing)."""

from __future__ import annotations

import argparse
import sys

from akm_run import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="akm-run",
        description="Execute verified akm plan files.",
    )
    parser.add_argument("--version", action="version", version=f"akm-run {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return 0
