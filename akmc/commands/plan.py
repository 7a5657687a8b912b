"""`akmc plan SOURCE|PLAN`: compile (or verify) and print everything the plan will run, for review; write nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from akmc import exitcodes


def run(source: Path, *, output_format: str, summary: bool, root: Path | None) -> int:
    from akm_run.plan import plan_hash, render_file
    from akmc.driver import load_plan

    plan, code = load_plan(source, root)
    if plan is None:
        return code
    if output_format == "json":
        sys.stdout.write(render_file(plan))
    elif summary:
        from akmc.render import summary as renderer

        sys.stdout.write(renderer.render(plan, plan_hash(plan)))
    elif output_format == "markdown":
        from akmc.render import plan as full

        sys.stdout.write(full.render_markdown(plan, plan_hash(plan)))
    else:
        from akmc.render import plan as full

        sys.stdout.write(full.render(plan, plan_hash(plan)))
    return exitcodes.OK
