"""`akmc plan SOURCE|PLAN`: compile (or verify) and print everything the plan will run, for review; write nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from akm_run.plan import plan_hash, render_file
from akmc import exitcodes
from akmc.driver import load_plan
from akmc.render import plan as full
from akmc.render import summary as renderer


def run(source: Path, *, output_format: str, summary: bool, root: Path | None) -> int:
    plan, code = load_plan(source, root)
    if plan is None:
        return code
    if output_format == "json":
        sys.stdout.write(render_file(plan))
    elif summary:
        sys.stdout.write(renderer.render(plan, plan_hash(plan)))
    elif output_format == "markdown":
        sys.stdout.write(full.render_markdown(plan, plan_hash(plan)))
    else:
        sys.stdout.write(full.render(plan, plan_hash(plan)))
    return exitcodes.OK
