"""`akmc check`: compile and check files and directories, report diagnostics, write nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from akmc import exitcodes
from akmc.compiler import Session
from akmc.diagnostics import ERROR, Diagnostic
from akmc.workspace import SourceError, discover, display_path

FORMATS = ("text", "json")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="akmc check",
        description="Compile and check .akm files and directories (recursively); report diagnostics; write nothing.",
        epilog="Example: akmc check workflows/ --format json",
    )
    parser.add_argument("paths", nargs="*", type=Path, help="files and directories to check (default: .)")
    parser.add_argument("--root", type=Path, help="workspace root (default: nearest akm.toml, else .git)")
    parser.add_argument("--format", dest="output_format", choices=FORMATS, default="text", help="output format")
    parser.add_argument("--strict", action="store_true", help="warnings count as errors")
    parser.add_argument("-q", "--quiet", action="store_true", help="print diagnostics only, no summary line")
    return parser


def main(argv: list[str]) -> int:
    """Parse `akmc check` arguments and run it; argparse's usage errors exit 2."""
    args = build_parser().parse_args(argv)
    return run(args.paths, root=args.root, output_format=args.output_format, quiet=args.quiet, strict=args.strict)


def run(
    paths: list[Path],
    *,
    root: Path | None = None,
    output_format: str = "text",
    quiet: bool = False,
    strict: bool = False,
) -> int:
    session = Session(root)
    files = discover(paths or [Path(".")])
    failed = not _check_all(session, files)
    # A child edit can break the workflows that compose it: check those parents too.
    failed = not _check_all(session, session.dependents(files)) or failed
    results = session.results
    diagnostics = sorted((d for r in results for d in r.report.diagnostics), key=Diagnostic.sort_key)
    sources = {r.display: r.text for r in results if r.text is not None}
    _emit(diagnostics, sources, len(results), output_format, quiet)
    if failed:
        return exitcodes.USAGE
    if any(d.severity == ERROR or strict for d in diagnostics):
        return exitcodes.FINDINGS
    return exitcodes.OK


def _check_all(session: Session, files: list[Path]) -> bool:
    """Check each file; False when one could not be read or the compiler failed on it."""
    ok = True
    for path in files:
        try:
            session.check(path)
        except SourceError as error:
            print(f"akmc: error: {error}", file=sys.stderr)
            ok = False
        except Exception as error:  # noqa: BLE001 - one bad file must not hide the others
            print(
                f"akmc: internal error while checking {display_path(path)}: {type(error).__name__}: {error}",
                file=sys.stderr,
            )
            ok = False
    return ok


def _emit(
    diagnostics: list[Diagnostic], sources: dict[str, str], checked: int, output_format: str, quiet: bool
) -> None:
    if output_format == "json":
        from akmc.render import json as renderer

        sys.stdout.write(renderer.render(diagnostics))
        return
    from akmc.render import text

    sys.stdout.write(text.render(diagnostics, sources, checked, quiet=quiet))
