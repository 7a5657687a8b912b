"""`akmc check`: compile and check files and directories, report diagnostics, write nothing."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from akmc import exitcodes
from akmc.cache import Cache, Cached, UsesIndex
from akmc.config import CheckConfig, ConfigError, code_problem, load
from akmc.diagnostics import ERROR, Diagnostic
from akmc.workspace import SourceError, composer_candidates, discover, display_path, find_root, parents

if TYPE_CHECKING:  # the compiler loads only when something must be compiled: a warm check never does
    from akmc.compiler import FileResult, Session

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
    parser.add_argument("-j", "--jobs", type=int, help="worker processes for large trees (default: the CPU count)")
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
    # A check allocates many small objects (syntax trees) and frees them a share at a time; with the
    # default thresholds the collector rescans every live tree thousands of times per share.
    gc.set_threshold(100_000, 50, 100)
    args = build_parser().parse_args(argv)
    overrides = {name: getattr(args, name) for name in ("strict", "select", "ignore", "include", "exclude")}
    return run(args.paths, root=args.root, overrides={k: v for k, v in overrides.items() if v is not None},
               output_format=args.output_format, quiet=args.quiet, suppressions=not args.no_ignore,
               cache=not args.no_cache, jobs=args.jobs)  # fmt: skip


def run(
    paths: list[Path],
    *,
    root: Path | None = None,
    overrides: dict[str, Any] | None = None,
    output_format: str = "text",
    quiet: bool = False,
    suppressions: bool = True,
    cache: bool = True,
    jobs: int | None = None,
) -> int:
    """Check `paths` and their children and parents; print; return the exit code.

    Each file belongs to the workspace of its nearest `akm.toml` (or `--root`): refs resolve, the
    configuration applies and the cache lives there. The command line wins over each akm.toml."""
    named = paths or [Path(".")]
    sources, named_ok = _sources(named)
    workspaces: dict[Path, list[Path]] = {}
    roots: dict[Path, Path] = {}  # directory → workspace root, found once per directory
    for path in sources:
        directory = path.parent
        if directory not in roots:
            roots[directory] = find_root(directory, root)
        workspaces.setdefault(roots[directory], []).append(path)
    if not workspaces:
        workspaces[find_root(Path("."), root)] = []
    results: list[Cached] = []
    diagnostics: list[Diagnostic] = []
    failed, strict_findings, docs_url = not named_ok, False, None
    for workspace, files in workspaces.items():
        try:
            config = load(workspace)
        except ConfigError as error:
            print(f"akmc: {error}", file=sys.stderr)
            return exitcodes.USAGE
        for name, value in (overrides or {}).items():  # the command line wins
            setattr(config, name, value)
        docs_url = docs_url or config.docs_url
        checker = _Checker(workspace, suppressions, Cache(workspace, suppressions) if cache else None, jobs)
        chosen = _selected(workspace, files, named, config)
        failed = not checker.check(chosen) or failed
        # A child edit can break the workflows that compose it: check those parents too.
        parents = [p for p in checker.dependents(chosen) if _wanted(workspace, p, config)]
        failed = not checker.check(parents) or failed
        mine = [r for r in checker.results.values() if _wanted(workspace, r.source.path, config)]
        found = [d for r in mine for d in r.diagnostics if config.reports(d.code)]
        strict_findings = strict_findings or (config.strict and bool(found))
        results += mine
        diagnostics += found
    diagnostics.sort(key=Diagnostic.sort_key)
    # A path that could not be checked leaves no "No problems found" behind its error message.
    _emit(diagnostics, results, output_format, quiet or (failed and not diagnostics), docs_url)
    if failed:
        return exitcodes.USAGE
    if strict_findings or any(d.severity == ERROR for d in diagnostics):
        return exitcodes.FINDINGS
    return exitcodes.OK


def _sources(named: list[Path]) -> tuple[list[Path], bool]:
    """The sources the named paths hold, and False after an error for a path that does not exist or a
    directory without a single `.akm` file (checking nothing is never "No problems found")."""
    found: dict[Path, None] = {}
    ok = True
    for path in named:
        try:
            path.stat()
        except (FileNotFoundError, NotADirectoryError):
            if path.is_symlink():
                print(
                    f"akmc: error: cannot read {display_path(path)}: its symlink target does not exist", file=sys.stderr
                )
            else:
                print(f"akmc: error: {display_path(path)}: no such file or directory", file=sys.stderr)
            ok = False
            continue
        except OSError as error:
            print(f"akmc: error: cannot read {display_path(path)}: {error.strerror or error}", file=sys.stderr)
            ok = False
            continue
        files = discover([path])
        if not files:
            where = "the current directory" if str(path) == "." else display_path(path)
            print(
                f"akmc: error: no .akm files in {where} or below it; name a workflow or its directory", file=sys.stderr
            )
            ok = False
        found.update(dict.fromkeys(files))
    return list(found), ok


class _Checker:
    """Checks files through the result cache, compiling the misses (in parallel when there are many)."""

    def __init__(self, root: Path, suppressions: bool, cache: Cache | None, jobs: int | None) -> None:
        self.root, self.suppressions, self.cache = root, suppressions, cache
        self.jobs = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
        self.results: dict[str, Cached] = {}

    @cached_property
    def session(self) -> Session:
        from akmc.compiler import Session

        return Session(self.root, suppressions=self.suppressions)

    def dependents(self, files: list[Path]) -> list[Path]:
        """The workflows that compose `files`, directly or transitively: candidates from a textual
        scan, confirmed by their real edges — from the cache where it has them, else by parsing."""
        index = UsesIndex(self.root) if self.cache is not None else None
        candidates = composer_candidates(self.root, files, index.refs if index is not None else None)
        if index is not None:
            index.save()
        return parents(files, candidates, self._uses) if candidates else []

    def _uses(self, path: Path) -> list[Path]:
        found = self.results.get(_key(path)) or self._restore_one(path)
        if found is not None:
            return [self.root / u for u in found.uses]
        return self.session.uses_of(path, self.root)

    def check(self, files: list[Path]) -> bool:
        misses = [p for p in files if _key(p) not in self.results and not self._restore(p)]
        if not misses:
            return True
        if len(misses) >= PARALLEL_THRESHOLD:
            return self._in_shares(misses)
        ok = _check_all(self.session, misses)
        for result in self.session.results:
            if _key(result.path) not in self.results:
                self._add(_record(result))
        return ok

    def _add(self, record: Cached) -> None:
        """Keep a fresh record for the report; its cache entry is written now, so that what stays in
        memory until output is the record without its dependencies' hashes."""
        relative = record.source.relative
        if self.cache is not None and relative is not None and record.deps is not None:
            self.cache.store(relative, record.deps, record.diagnostics, record.uses)
        self.results[_key(record.source.path)] = record._replace(deps=None)

    def _restore_one(self, path: Path) -> Cached | None:
        if self.cache is None:
            return None
        relative = self.cache.relative(path)
        return self.cache.load(relative) if relative is not None else None

    def _restore(self, path: Path) -> bool:
        """Take a file and every child it composes from the cache, or nothing."""
        found = self._restore_one(path)
        if found is None or self.cache is None:
            return False
        children = [self.cache.load(c) for c in found.children]
        if any(c is None for c in children):
            return False
        for record in [found, *children]:
            assert record is not None
            self.results.setdefault(_key(record.source.path), record)
        return True

    def _in_shares(self, misses: list[Path]) -> bool:
        """Check many files in shares of about SHARE_FILES, each in a session of its own (in worker
        processes when there is more than one job), so memory holds one share's syntax trees and
        plans at a time per process, not the whole tree's."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from akmc import syntax

        syntax.prepare()  # built once here, inherited by every forked worker
        count = max(self.jobs, -(-len(misses) // SHARE_FILES))
        jobs = [(self.root, self.suppressions, share) for share in _shares(self.root, misses, count)]
        ok = True
        with contextlib.ExitStack() as stack:
            if self.jobs > 1:
                context = multiprocessing.get_context("fork")
                pool = stack.enter_context(ProcessPoolExecutor(max_workers=self.jobs, mp_context=context))
                done = pool.map(_work, jobs)
            else:
                done = map(_work, jobs)
            for share_ok, records in done:
                ok = ok and share_ok
                for record in records:
                    if _key(record.source.path) not in self.results:
                        self._add(record)
        return ok


PARALLEL_THRESHOLD = 24  # below this, starting worker processes costs more than it saves
SHARE_FILES = 200  # files per session when checking many: bounds the memory of each process


def _key(path: Path) -> str:
    """One file, however it was named (lexically: cheap, and the cache names files the same way)."""
    return os.path.abspath(path)


def _shares(root: Path, files: list[Path], count: int) -> list[list[Path]]:
    """Split files into `count` shares keeping each composition tree in one share (a session compiles
    a file's children anyway; splitting a tree would compile them twice), largest trees first."""
    from akmc.sources import ref_file
    from akmc.workspace import uses_refs

    index = {_key(p): i for i, p in enumerate(files)}
    parent = list(range(len(files)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, path in enumerate(files):
        for ref in uses_refs(path):
            j = index.get(_key(ref_file(root, ref)))
            if j is not None:
                parent[find(i)] = find(j)
    groups: dict[int, list[Path]] = {}
    for i, path in enumerate(files):
        groups.setdefault(find(i), []).append(path)
    shares: list[list[Path]] = [[] for _ in range(count)]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(shares, key=len).extend(group)
    return [share for share in shares if share]


def _work(job: tuple[Path, bool, list[Path]]) -> tuple[bool, list[Cached]]:
    """A worker process: check a share of the files in a session of its own."""
    from akmc.compiler import Session

    root, suppressions, files = job
    session = Session(root, suppressions=suppressions)
    ok = _check_all(session, files)
    return ok, [_record(r) for r in session.results]


def _record(result: FileResult) -> Cached:
    """What the cache keeps of a fresh result; `uses` names the children it composes inside the root."""
    from akmc.workspace import real_path, relative_to

    uses = [
        r
        for child, _ in result.edges.values()
        if child is not None and (r := relative_to(real_path(child), result.root))
    ]
    from akmc.render.text import shown_lines

    diagnostics = list(result.report.diagnostics)
    lines = shown_lines(result.text, diagnostics) if result.text is not None else {}
    return Cached(result.source, lines, diagnostics, uses=tuple(uses), deps=result.deps)


def _selected(root: Path, files: list[Path], named: list[Path], config: CheckConfig) -> list[Path]:
    chosen = []
    for path in files:
        if _wanted(root, path, config):
            chosen.append(path)
        elif any(path == p for p in named):
            print(f"akmc: note: {display_path(path)} is excluded by the [check] configuration", file=sys.stderr)
    return chosen


def _wanted(root: Path, path: Path, config: CheckConfig) -> bool:
    if not config.include and not config.exclude:
        return True
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


def _emit(
    diagnostics: list[Diagnostic], results: list[Cached], output_format: str, quiet: bool, docs_url: str | None
) -> None:
    if output_format == "json":
        from akmc.render import json as renderer

        sys.stdout.write(renderer.render(diagnostics))
    elif output_format == "github":
        from akmc.render import github

        sys.stdout.write(github.render(diagnostics))
    elif output_format == "sarif":
        from akmc.render import sarif

        sys.stdout.write(sarif.render(diagnostics, docs_url))
    else:
        from akmc.render import text

        sources = {r.source.display: r.lines for r in results}
        sys.stdout.write(text.render(diagnostics, sources, len(results), quiet=quiet))
