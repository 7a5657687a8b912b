"""`akmc check`: compile and check files and directories, report diagnostics, write nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from akmc import exitcodes
from akmc.compiler import FileResult, Session
from akmc.config import CheckConfig, ConfigError, code_problem, load
from akmc.diagnostics import ERROR, Diagnostic
from akmc.workspace import SourceError, discover, display_path, find_root

FORMATS = ("text", "json", "github", "sarif")
EPILOG = """examples:
  akmc check                                  check every workflow below .
  akmc check workflows/release.akm            one file, its children and its parents
  akmc check --format sarif > akmc.sarif      for GitHub code scanning
  akmc check --select E --ignore E4           only errors, no composition codes
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="akmc check",
        description="Compile and check .akm files and directories (recursively); report diagnostics; write nothing.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", type=Path, help="files and directories to check (default: .)")
    parser.add_argument("--root", type=Path, help="workspace root (default: nearest akm.toml, else .git)")
    parser.add_argument("--format", dest="output_format", choices=FORMATS, default="text", help="output format")
    parser.add_argument("--strict", action=argparse.BooleanOptionalAction, default=None,
                        help="warnings count as errors (default: [check] strict in akm.toml)")  # fmt: skip
    parser.add_argument("--select", type=_codes, help="report only these codes or prefixes, e.g. E,W700")
    parser.add_argument("--ignore", type=_codes, help="never report these codes or prefixes, e.g. W700,W701")
    parser.add_argument("--include", action="append", metavar="GLOB", help="check only matching workflows")
    parser.add_argument("--exclude", action="append", metavar="GLOB", help="skip matching workflows")
    parser.add_argument("--no-ignore", action="store_true", help="disregard `# akmc: ignore` comments")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write .akmc-cache/")
    parser.add_argument("-q", "--quiet", action="store_true", help="print diagnostics only, no summary line")
    return parser


def _codes(text: str) -> list[str]:
    codes = [c.strip().upper() for c in text.split(",") if c.strip()]
    problem = code_problem(codes)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return codes


def main(argv: list[str]) -> int:
    """Parse `akmc check` arguments and run it; argparse's usage errors exit 2."""
    args = build_parser().parse_args(argv)
    start = args.root or (args.paths[0] if args.paths and args.paths[0].is_dir() else
                          (args.paths[0].parent if args.paths else Path(".")))  # fmt: skip
    root = find_root(start if start.exists() else Path("."), args.root)
    try:
        config = load(root)
    except ConfigError as error:
        print(f"akmc: {error}", file=sys.stderr)
        return exitcodes.USAGE
    for name in ("strict", "select", "ignore", "include", "exclude"):
        if getattr(args, name) is not None:  # the command line wins
            setattr(config, name, getattr(args, name))
    return run(args.paths, root=args.root, config=config, output_format=args.output_format, quiet=args.quiet,
               suppressions=not args.no_ignore, cache=not args.no_cache)  # fmt: skip


def run(
    paths: list[Path],
    *,
    root: Path | None = None,
    config: CheckConfig | None = None,
    output_format: str = "text",
    quiet: bool = False,
    suppressions: bool = True,
    cache: bool = True,
) -> int:
    config = config or CheckConfig()
    session = Session(root, suppressions=suppressions)
    files = _selected(session, paths or [Path(".")], config)
    failed = not _check_all(session, files)
    # A child edit can break the workflows that compose it: check those parents too.
    parents = [p for p in session.dependents(files) if _wanted(session, p, config)]
    failed = not _check_all(session, parents) or failed
    results = [r for r in session.results if _wanted(session, r.path, config)]
    diagnostics = sorted(
        (d for r in results for d in r.report.diagnostics if config.reports(d.code)), key=Diagnostic.sort_key
    )
    _emit(diagnostics, results, output_format, quiet)
    if failed:
        return exitcodes.USAGE
    if any(d.severity == ERROR or config.strict for d in diagnostics):
        return exitcodes.FINDINGS
    return exitcodes.OK


def _selected(session: Session, paths: list[Path], config: CheckConfig) -> list[Path]:
    chosen = []
    for path in discover(paths):
        if _wanted(session, path, config):
            chosen.append(path)
        elif any(path == p for p in paths):
            print(f"akmc: note: {display_path(path)} is excluded by the [check] configuration", file=sys.stderr)
    return chosen


def _wanted(session: Session, path: Path, config: CheckConfig) -> bool:
    if not config.include and not config.exclude:
        return True
    root = session.root or find_root(path.parent)
    try:
        relative = path.resolve().relative_to(root).as_posix()
    except ValueError:
        return True
    return config.checks(relative)


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


def _emit(diagnostics: list[Diagnostic], results: list[FileResult], output_format: str, quiet: bool) -> None:
    if output_format == "json":
        from akmc.render import json as renderer

        sys.stdout.write(renderer.render(diagnostics))
    elif output_format == "github":
        from akmc.render import github

        sys.stdout.write(github.render(diagnostics))
    elif output_format == "sarif":
        from akmc.render import sarif

        sys.stdout.write(sarif.render(diagnostics))
    else:
        from akmc.render import text

        sources = {r.display: r.text for r in results if r.text is not None}
        sys.stdout.write(text.render(diagnostics, sources, len(results), quiet=quiet))
