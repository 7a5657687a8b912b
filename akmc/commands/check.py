"""`akmc check`: compile and check files and directories, report diagnostics, write nothing."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from akmc import checkcache, checkfiles, exitcodes, shares
from akmc.cache import Cache, Cached, UsesIndex
from akmc.config import CheckConfig, ConfigError, code_problem, load
from akmc.render.stream import Output
from akmc.sources import ref_file
from akmc.workspace import (
    SourceError,
    composer_candidates,
    display_path,
    find_root,
    parents,
    uses_refs,
)

# COMPILER_IMPORT: the parser and the compiler's stages (akmc.syntax, akmc.compiler: about 70 ms of
# start-up) are imported only when something must be compiled: a check answered from the cache never is.
if TYPE_CHECKING:
    from akmc.compiler import Session

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
    parser.add_argument(
        "--strict",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="warnings count as errors (default: [check] strict in akm.toml)",
    )
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
    return run(
        args.paths,
        root=args.root,
        overrides={k: v for k, v in overrides.items() if v is not None},
        output_format=args.output_format,
        quiet=args.quiet,
        suppressions=not args.no_ignore,
        cache=not args.no_cache,
        jobs=args.jobs,
    )


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
    configuration applies and the cache lives there. The command line wins over each akm.toml.
    Results are printed in sorted file order as soon as every file sorted before them is done."""
    named = paths or [Path(".")]
    sources, named_ok = checkfiles.sources(named)
    found = _checkers(sources, named, root, overrides or {}, suppressions, cache, jobs)
    if found is None:
        return exitcodes.USAGE
    checkers, docs_url = found
    out = Output(output_format, docs_url)
    failed = not named_ok
    try:
        # Every workspace's files, cached results and shares are known before the first share is
        # checked, so that the output's order is settled (files from all workspaces interleave).
        for checker, chosen in checkers:
            checker.plan(chosen, out)
        out.start()
        for checker, _ in checkers:
            failed = not checker.run(out) or failed
        # A path that could not be checked leaves no "No problems found" behind its error message.
        out.finish(quiet or (failed and not out.diagnostics))
    except KeyboardInterrupt:
        print("akmc: interrupted", file=sys.stderr)  # what was printed ends with a whole line
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        out.abandon()  # the reader went away (`akmc check | head`): stop quietly
        return exitcodes.BROKEN_PIPE
    if failed:
        return exitcodes.USAGE
    if out.strict_findings or out.errors:
        return exitcodes.FINDINGS
    return exitcodes.OK


def _checkers(
    sources: list[Path],
    named: list[Path],
    root: Path | None,
    overrides: dict[str, Any],
    suppressions: bool,
    cache: bool,
    jobs: int | None,
) -> tuple[list[tuple[_Checker, list[Path]]], str | None] | None:
    """A checker per workspace with the files it checks, and the docs URL for SARIF; None after an
    invalid akm.toml was reported."""
    workspaces: dict[Path, list[Path]] = {}
    roots: dict[Path, Path] = {}  # directory → workspace root, found once per directory
    for path in sources:
        directory = path.parent
        if directory not in roots:
            roots[directory] = find_root(directory, root)
        workspaces.setdefault(roots[directory], []).append(path)
    if not workspaces:
        workspaces[find_root(Path("."), root)] = []
    checkers: list[tuple[_Checker, list[Path]]] = []
    docs_url = None
    for workspace, files in workspaces.items():
        try:
            config = load(workspace)
        except ConfigError as error:
            print(f"akmc: {error}", file=sys.stderr)
            return None
        for name, value in (overrides or {}).items():  # the command line wins
            setattr(config, name, value)
        docs_url = docs_url or config.docs_url
        checker = _Checker(workspace, suppressions, Cache(workspace, suppressions) if cache else None, jobs, config)
        checkers.append((checker, checkfiles.selected(workspace, files, named, config)))
    return checkers, docs_url


class _Checker:
    """Checks one workspace's files through the result cache, compiling the misses in shares taken
    in sorted file order (in worker processes when there are many), and hands each result to the
    output."""

    def __init__(
        self, root: Path, suppressions: bool, cache: Cache | None, jobs: int | None, config: CheckConfig
    ) -> None:
        self.root, self.suppressions, self.cache, self.config = root, suppressions, cache, config
        self.jobs = jobs if jobs is not None else min(os.cpu_count() or 1, 8)
        self.seen: set[str] = set()  # every file whose result was handed over (or kept out)
        self.kept: set[str] = set()  # every file whose fresh result went to the cache
        self.named: set[str] = set()  # the files asked for: each is reported with every child it composes
        self.shares: list[tuple[int, list[Path]]] = []  # (its number in the output, its files)
        self.files: list[Path] = []  # the files named and their parents, in sorted order
        self.restoring: int | None = None  # the output's number for the pass over the cache
        self.index = UsesIndex(root) if cache is not None else None  # every workflow's `uses` refs
        self._displays: dict[str, str] = {}

    @cached_property
    def session(self) -> Session:
        from akmc.compiler import Session  # COMPILER_IMPORT

        return Session(self.root, suppressions=self.suppressions, interfaces=checkcache.interfaces(self.cache))

    def plan(self, chosen: list[Path], out: Output) -> None:
        """Find the parents that compose `chosen` and register with the output every file the
        check may report: those and the children their text names, transitively."""
        # A child edit can break the workflows that compose it: check those parents too.
        parents = [p for p in self.dependents(chosen) if checkfiles.wanted(self.root, p, self.config)]
        files = list(dict.fromkeys([*chosen, *parents]))
        self.named = {_key(p) for p in chosen}
        self.files = sorted(files, key=self._display)
        self.restoring = out.share(self._reach(self.files)) if self.files else None

    def run(self, out: Output) -> bool:
        """Hand over what the cache answers, in sorted file order (so the output streams), then
        check the rest in shares cut in sorted file order; False when a file could not be read
        or checked."""
        misses = [p for p in self.files if not self._restore(p, out)]
        if misses:
            count = 1 if len(misses) < PARALLEL_THRESHOLD else max(self.jobs, -(-len(misses) // SHARE_FILES))
            index = self.index  # the refs `plan` recorded: no file is read again to cut the shares
            refs = (lambda p: index.refs_at(_key(p))) if index is not None else uses_refs
            for share in shares.cut(self.root, misses, count, refs):
                self.shares.append((out.share(self._reach(share)), share))
        if self.index is not None:
            self.index.save()
        self.index, self._displays = None, {}  # planning is over: neither grows with the files any more
        if self.restoring is not None:
            out.done(self.restoring)  # the shares now own what is still to come
        if not self.shares:
            return True
        if len(self.shares) == 1:  # few files: in this process, with the session that found the parents
            number, files = self.shares[0]
            ok = _check_all(self.session, files)
            self._hand_over(files, [checkcache.record(r) for r in self.session.results], out)
            out.done(number)
            return ok
        return self._in_shares(out)

    def _display(self, path: Path) -> str:
        """How diagnostics name `path` (`display_path`), computed once per file."""
        key = os.fspath(path)
        found = self._displays.get(key)
        if found is None:
            found = self._displays[key] = display_path(path)
        return found

    def _reach(self, files: list[Path]) -> set[str]:
        """How diagnostics name `files` and every file the text of the named ones says they compose,
        transitively: the results a check of `files` may report (of a parent found for them, only
        its own). The text's refs come from the `uses` index where the cache keeps one (no
        unchanged file is read)."""
        root = self.root.resolve()
        found = {self._display(p) for p in files if (k := _key(p)) not in self.named and k not in self.seen}
        visited: set[str] = set()
        pending = [p for p in files if _key(p) in self.named]
        while pending:
            path = pending.pop()
            key = _key(path)
            if key in visited:
                continue
            visited.add(key)
            if key not in self.seen:
                found.add(self._display(path))
            for ref in self.index.refs_at(key) if self.index is not None else uses_refs(path):
                child = ref_file(root, ref)
                if os.path.isfile(child):
                    pending.append(child)
        return found

    def dependents(self, files: list[Path]) -> list[Path]:
        """The workflows that compose `files`, directly or transitively: candidates from a textual
        scan, confirmed by their real edges — from the cache where it has them, else by parsing."""
        index = self.index
        candidates = composer_candidates(self.root, files, index.refs if index is not None else None)
        return parents(files, candidates, self._uses) if candidates else []

    def _uses(self, path: Path) -> list[Path]:
        found = self._restore_one(path)
        if found is not None:
            return [self.root / u for u in found.uses]
        return self.session.uses_of(path, self.root)

    def _hand_over(self, files: list[Path], records: list[Cached], out: Output) -> None:
        """Keep every fresh result of a check of `files` in the cache, and report the named files
        with every child they compose (fresh, or from the cache when the check read only their
        interface), and each parent found for them alone: its other children were not asked about."""
        found = {_key(r.source.path): r for r in records}  # by resolved path, as a session names them
        for each in records:
            self._keep(each)
        for path in files:
            real = os.path.realpath(path)
            if _key(path) not in self.named:
                alone = found.get(real)
                if alone is not None:
                    self._deliver(alone, out)
                continue
            visited: set[str] = set()
            pending = [Path(real)]
            while pending:
                key = _key(pending.pop())
                if key in visited:
                    continue
                visited.add(key)
                record = found.get(key) or self._restore_one(Path(key))
                if record is not None:
                    self._deliver(record, out)
                    pending += [self.root / u for u in record.uses]

    def _keep(self, record: Cached) -> None:
        """Write a fresh result's cache entry (once per file), so that nothing keeps its
        dependencies' hashes; then let the cache forget the file."""
        key, relative = _key(record.source.path), record.source.relative
        if key in self.kept or self.cache is None or relative is None:
            return
        self.kept.add(key)
        if record.deps is not None:
            self.cache.store(relative, record.deps, record.diagnostics, record.uses, record.child)
        self.cache.forget(relative)

    def _deliver(self, record: Cached, out: Output) -> None:
        """Hand one result to the output (the first for each file)."""
        key = _key(record.source.path)
        if key in self.seen:
            return
        self.seen.add(key)
        self._keep(record)
        if checkfiles.wanted(self.root, record.source.path, self.config):
            found = [d for d in record.diagnostics if self.config.reports(d.code)]
            out.add(record.source.display, record.lines, found, self.config.strict)

    def _restore_one(self, path: Path) -> Cached | None:
        if self.cache is None:
            return None
        relative = self.cache.relative(path)
        return self.cache.load(relative) if relative is not None else None

    def _restore(self, path: Path, out: Output) -> bool:
        """Hand over a file and every child it composes from the cache, or nothing."""
        if _key(path) in self.seen:
            return True
        found = self._restore_one(path)
        if found is None or self.cache is None:
            return False
        root = self.cache.root
        # a parent found for the named files is reported alone (`_hand_over`)
        named = found.children if _key(path) in self.named else ()
        children = [self.cache.load(c) for c in named if _key(root / c) not in self.seen]
        if any(c is None for c in children):
            return False
        for record in [found, *children]:
            assert record is not None
            self._deliver(record, out)
        return True

    def _in_shares(self, out: Output) -> bool:
        """Check the shares, each in a session of its own (in worker processes when there is more
        than one job), so memory holds one share's syntax trees and plans at a time per process.
        Results are taken share by share in sorted order; a share is given only the files no
        earlier share has produced yet (a child it compiled for its parent)."""
        from akmc import syntax  # COMPILER_IMPORT

        syntax.prepare()  # built once here, inherited by every forked worker
        if self.jobs <= 1:
            ok = True
            for number, files in self.shares:
                ok = self._take(number, files, _work(self._job(files)), out) and ok
            return ok
        return self._in_workers(list(self.shares), out)

    def _job(self, files: list[Path]) -> tuple[Path, bool, list[Path]]:
        return self.root, self.suppressions, [p for p in files if _key(p) not in self.seen]

    def _take(self, number: int, files: list[Path], done: tuple[bool, list[Cached]], out: Output) -> bool:
        ok, records = done
        self._hand_over(files, records, out)
        out.done(number)
        return ok

    def _in_workers(self, pending: list[tuple[int, list[Path]]], out: Output) -> bool:
        ok = True
        with shares.Pool(self.jobs, _work) as pool:
            for index, done in pool.ordered(len(pending), lambda index: self._job(pending[index][1])):
                number, files = pending[index]
                if done is shares.DIED:  # its worker died twice on it: killed, out of memory
                    first = display_path(files[0]) if files else "?"
                    print(
                        f"akmc: error: a worker process died while checking {len(files)} file(s) from {first} "
                        "on; their results are missing",
                        file=sys.stderr,
                    )
                    out.done(number)
                    ok = False
                    continue
                ok = self._take(number, files, done, out) and ok
        return ok


PARALLEL_THRESHOLD = 24  # below this, starting worker processes costs more than it saves
SHARE_FILES = 100  # files per session when checking many: bounds the memory of each process


def _key(path: Path) -> str:
    """One file, however it was named (lexically: cheap, and the cache names files the same way)."""
    return os.path.abspath(path)


def _work(job: tuple[Path, bool, list[Path]]) -> tuple[bool, list[Cached]]:
    """A worker process: check a share of the files in a session of its own. (It compiles every
    child: shares are taken when many files changed, and the cache's interfaces save little then.)

    A share's syntax trees, models and plans hold no reference cycles: reference counting frees
    them with the session. The cyclic collector would only scan them over and over as they pile up
    (about 15% of a cold check's CPU), so it is paused until the session is gone; a cycle made in the
    meantime (Lark explaining a syntax error) is collected after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _work_session(job)  # its session is freed on return, before the collector resumes
    finally:
        if enabled:
            gc.enable()


def _work_session(job: tuple[Path, bool, list[Path]]) -> tuple[bool, list[Cached]]:
    from akmc.compiler import Session  # COMPILER_IMPORT

    root, suppressions, files = job
    session = Session(root, suppressions=suppressions)
    ok = _check_all(session, files)
    return ok, [checkcache.record(r) for r in session.results]


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
