"""`akmc plan SOURCE|PLAN`: compile (or verify) and print the reviewer's summary (or the full plan as JSON); write nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from akmc import exitcodes


def run(source: Path, *, output_format: str, root: Path | None) -> int:
    from akm_run.plan import plan_hash, render_file
    from akmc.commands.verify import load_plan
    from akmc.render import summary

    plan, code = load_plan(source, root)
    if plan is None:
        return code
    if output_format == "json":
        sys.stdout.write(render_file(plan))
    else:
        sys.stdout.write(summary.render(plan, plan_hash(plan)))
    return exitcodes.OK
