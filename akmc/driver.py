"""The services commands share: compile a source to a verified plan, load a plan from a source or a
plan file, report a compile's diagnostics. Commands call these, never each other."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from akm_run.plan import PlanError, read_file, verify_plan
from akmc import exitcodes
from akmc.diagnostics import ERROR, Diagnostic
from akmc.render import text
from akmc.workspace import SourceError

if TYPE_CHECKING:
    from akmc.compiler import FileResult, Session


def compile_source(
    session: Session, path: Path, display: str | None = None
) -> tuple[FileResult, dict[str, Any] | None]:
    """Compile one source and verify the plan with the runtime's verifier before it is used."""
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
    # The compiler's stages cost about 70 ms of start-up, which a command given a plan file never needs.
    from akmc.compiler import Session

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
    diagnostics = sorted((d for r in results for d in r.report.diagnostics), key=Diagnostic.sort_key)
    if diagnostics:
        sources = {r.display: r.text for r in results if r.text is not None}
        sys.stderr.write(text.render(diagnostics, sources, len(results)))
    for result in results:
        visible = any(d.severity == ERROR for d in result.report.diagnostics)
        if result.plan is None and result.workflow is not None and result.silenced and not visible:
            print(
                f"akmc: error: {result.display} has errors silenced by `# akmc: ignore` comments; "
                "a workflow with errors has no plan (see them with `akmc check --no-ignore`)",
                file=sys.stderr,
            )


def load_plan(path: Path, root: Path | None) -> tuple[dict[str, Any] | None, int]:
    """A source (compiled) or a plan file (verified): (plan, OK), or (None, the exit code) with
    the diagnostics or the refusal already reported on stderr."""
    if path.suffix == ".akm":
        _, plan, code = compile_one(path, root)
        return plan, code
    verified, refusal = read_file(path, None)
    if verified is None:
        print(f"akmc: refused {path}: {refusal}", file=sys.stderr)
        return None, exitcodes.REFUSED
    return dict(verified), exitcodes.OK
