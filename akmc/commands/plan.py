"""`akmc plan SOURCE`: compile and print the reviewer's summary (or the full plan as JSON); write nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from akmc import exitcodes
from akmc.workspace import SourceError


def run(source: Path, *, output_format: str, root: Path | None) -> int:
    from akm_run.plan import plan_hash, render_file
    from akmc.commands.compile import compile_source, report_diagnostics
    from akmc.render import summary

    try:
        result, plan = compile_source(source, root)
    except SourceError as error:
        print(f"akmc: error: {error}", file=sys.stderr)
        return exitcodes.USAGE
    report_diagnostics([result])
    if plan is None:
        return exitcodes.FINDINGS
    if output_format == "json":
        sys.stdout.write(render_file(plan))
    else:
        sys.stdout.write(summary.render(plan, plan_hash(plan)))
    return exitcodes.OK
