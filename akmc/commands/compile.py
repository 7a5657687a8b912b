"""`akmc compile`: compile workflows to plan files, or check that committed plans are up to date."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from akm_run.atomic import write_atomically
from akmc import exitcodes
from akmc.compiler import FileResult, Session
from akmc.diagnostics import ERROR, Diagnostic
from akmc.workspace import SourceError, discover, display_path, find_root


def compile_source(
    session: Session, path: Path, display: str | None = None
) -> tuple[FileResult, dict[str, Any] | None]:
    """Compile one source and verify the plan with the runtime's verifier before it is used."""
    from akm_run.plan import PlanError, verify_plan

    result = session.check(path, display)
    if result.plan is None:
        return result, None
    try:
        verify_plan(result.plan)
    except PlanError as error:  # the compiler produced a plan the runtime refuses: a compiler bug
        raise RuntimeError(f"the compiled plan failed verification: {error}") from error
    return result, result.plan


def compile_one(source: Path, root: Path | None) -> tuple[FileResult | None, dict[str, Any] | None, int]:
    """Compile one source for a command: (result, plan, OK) or (…, None, the exit code),
    with diagnostics and read failures already reported on stderr."""
    session = Session(root)
    try:
        result, plan = compile_source(session, source)
    except SourceError as error:
        print(f"akmc: error: {error}", file=sys.stderr)
        return None, None, exitcodes.USAGE
    report_diagnostics(session.results)
    return result, plan, exitcodes.OK if plan is not None else exitcodes.FINDINGS


def report_diagnostics(results: list[FileResult]) -> None:
    """Diagnostics of a compile go to stderr: stdout may carry the plan."""
    from akmc.render import text

    diagnostics = sorted((d for r in results for d in r.report.diagnostics), key=Diagnostic.sort_key)
    if diagnostics:
        sources = {r.display: r.text for r in results if r.text is not None}
        sys.stderr.write(text.render(diagnostics, sources, len(results)))
    for result in results:
        visible = any(d.severity == ERROR for d in result.report.diagnostics)
        if result.plan is None and result.workflow is not None and result.silenced and not visible:
            print(f"akmc: error: {result.display} has errors silenced by `# akmc: ignore` comments; "
                  "a workflow with errors has no plan (see them with `akmc check --no-ignore`)", file=sys.stderr)  # fmt: skip


def run(source: Path, *, output: Path | None, out_dir: Path | None, check: bool, root: Path | None) -> int:
    from akm_run.plan import render_file

    if source.is_dir():
        if out_dir is None:
            print("akmc: error: compiling a directory needs --out-dir", file=sys.stderr)
            return exitcodes.USAGE
        return _directory(source, out_dir, check, root)
    result, plan, code = compile_one(source, root)
    if result is None or plan is None:
        return code
    rendered = render_file(plan)
    if check:
        target = output or _default_out(source, out_dir, result.ref)
        return _compare({target: rendered})
    if output is None:
        sys.stdout.write(rendered)
    else:
        _write(output, rendered)
    return exitcodes.OK


def _default_out(source: Path, out_dir: Path | None, ref: str | None) -> Path:
    if out_dir is not None and ref is not None:
        return out_dir / f"{ref}.plan.json"
    return source.with_suffix(".plan.json")


def _directory(directory: Path, out_dir: Path, check: bool, root: Path | None) -> int:
    from akm_run.plan import render_file

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
        return _compare(wanted)
    for target, rendered in wanted.items():
        _write(target, rendered)
    print(
        f"wrote {len(wanted)} plan file{'s' if len(wanted) != 1 else ''} under {display_path(out_dir)}", file=sys.stderr
    )
    return exitcodes.OK


def _compare(wanted: dict[Path, str]) -> int:
    stale = []
    for target, rendered in sorted(wanted.items()):
        try:
            current = target.read_text(encoding="utf-8")
        except OSError:
            stale.append(f"missing: {display_path(target)}")
            continue
        if current != rendered:
            stale.append(f"stale:   {display_path(target)}")
    for line in stale:
        print(line)
    if stale:
        print(
            f"{len(stale)} plan file{'s are' if len(stale) != 1 else ' is'} not up to date; run `akmc compile` to refresh",
            file=sys.stderr,
        )
        return exitcodes.FINDINGS
    return exitcodes.OK


def _write(target: Path, rendered: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, rendered)
