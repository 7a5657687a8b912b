"""`akmc compile`: compile workflows to plan files, or check that committed plans are up to date."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from akm_run.atomic import write_atomically
from akm_run.plan import render_file
from akmc import exitcodes
from akmc.compiler import Session
from akmc.driver import compile_one, compile_source, report_diagnostics
from akmc.workspace import discover, display_path, find_root, plan_files, read_regular


def run(source: Path, *, output: Path | None, out_dir: Path | None, check: bool, root: Path | None) -> int:
    if source.is_dir():
        if out_dir is None:
            print("akmc: error: compiling a directory needs --out-dir", file=sys.stderr)
            return exitcodes.USAGE
        return _directory(source, out_dir, check, root)
    if output is not None and out_dir is not None:
        print("akmc: error: give -o or --out-dir, not both", file=sys.stderr)
        return exitcodes.USAGE
    result, plan, code = compile_one(source, root)
    if result is None or plan is None:
        return code
    rendered = render_file(plan)
    if check:
        target = output or _default_out(source, out_dir, result.ref)
        return _compare({target: rendered}, _refresh(source, output, out_dir, root))
    if output is None and out_dir is None:
        sys.stdout.write(rendered)
        return exitcodes.OK
    return _write({output or _default_out(source, out_dir, result.ref): rendered})


def _default_out(source: Path, out_dir: Path | None, ref: str | None) -> Path:
    if out_dir is not None and ref is not None:
        return out_dir / f"{ref}.plan.json"
    return source.with_suffix(".plan.json")


def _directory(directory: Path, out_dir: Path, check: bool, root: Path | None) -> int:
    session = Session(root or find_root(directory))
    sources = discover([directory])
    wanted = {}
    for path in sources:
        result, plan = compile_source(session, path)
        if plan is not None and result.ref is not None:
            wanted[out_dir / f"{result.ref}.plan.json"] = render_file(plan)
    report_diagnostics(session.results)
    if len(wanted) != len(sources):
        return exitcodes.FINDINGS
    if check:
        return _compare(wanted, _refresh(directory, None, out_dir, root), _orphans(out_dir, wanted))
    if (code := _write(wanted)) != exitcodes.OK:
        return code
    print(
        f"wrote {len(wanted)} plan file{'s' if len(wanted) != 1 else ''} under {display_path(out_dir)}", file=sys.stderr
    )
    return exitcodes.OK


def _refresh(source: Path, output: Path | None, out_dir: Path | None, root: Path | None) -> str:
    """The command that rewrites the plans `--check` compared: this one, without `--check`."""
    argv = ["akmc", "compile", str(source)]
    argv += ["-o", str(output)] if output is not None else []
    argv += ["--out-dir", str(out_dir)] if out_dir is not None else []
    argv += ["--root", str(root)] if root is not None else []
    return shlex.join(argv)


def _orphans(out_dir: Path, wanted: dict[Path, str]) -> list[Path]:
    """The plan files and signatures under `out_dir` that none of the compiled sources accounts for:
    a gate that signs or ships the directory would otherwise pass along plans nobody reviewed."""
    accounted = {os.path.normpath(t) for t in wanted} | {os.path.normpath(f"{t}.sig") for t in wanted}
    return [p for p in plan_files(out_dir) if os.path.normpath(p) not in accounted]


def _compare(wanted: dict[Path, str], refresh: str, orphans: Sequence[Path] = ()) -> int:
    stale = []
    for target, rendered in sorted(wanted.items()):
        expected = rendered.encode("utf-8")
        try:
            current = read_regular(target, len(expected))  # a FIFO or device in a plan's place is never read
        except FileNotFoundError:
            stale.append(f"missing: {display_path(target)}")
            continue
        except OSError:
            current = b""
        if current != expected:
            stale.append(f"stale:   {display_path(target)}")
    for line in stale:
        print(line)
    for orphan in orphans:
        print(f"orphan:  {display_path(orphan)}")
    if stale:
        print(
            f"{len(stale)} plan file{'s are' if len(stale) != 1 else ' is'} not up to date; run `{refresh}` to refresh",
            file=sys.stderr,
        )
    if orphans:
        them = "them" if len(orphans) != 1 else "it"
        print(
            f"{len(orphans)} file{'s' if len(orphans) != 1 else ''} in the output directory no source compiles to;"
            f" remove {them}, or add the source that compiles to {them}",
            file=sys.stderr,
        )
    return exitcodes.FINDINGS if stale or orphans else exitcodes.OK


def _write(plans: dict[Path, str]) -> int:
    """Write each plan file (its directories made as needed); a path that cannot be written (a file
    where a directory must be, no permission) is a usage error that names it."""
    for target, rendered in plans.items():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(target, rendered)
        except OSError as error:
            print(f"akmc: error: cannot write {display_path(target)}: {error.strerror or error}", file=sys.stderr)
            return exitcodes.USAGE
    return exitcodes.OK
