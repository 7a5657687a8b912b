"""`akmc plan SOURCE`: compile and print the reviewer's summary (or the full plan as JSON); write nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from akmc import exitcodes


def run(source: Path, *, output_format: str, root: Path | None) -> int:
    from akm_run.plan import plan_hash, render_file
    from akmc.commands.compile import compile_one
    from akmc.render import summary

    _, plan, code = compile_one(source, root)
    if plan is None:
        return code
    if output_format == "json":
        sys.stdout.write(render_file(plan))
    else:
        sys.stdout.write(summary.render(plan, plan_hash(plan)))
    return exitcodes.OK
