"""`akmc graph SOURCE|PLAN`: the plan as a Mermaid or Graphviz DOT picture; write nothing."""

from __future__ import annotations

import sys
from pathlib import Path

from akmc import exitcodes
from akmc.driver import load_plan
from akmc.render import graph


def run(source: Path, *, output_format: str, depth: int, root: Path | None) -> int:
    plan, code = load_plan(source, root)
    if plan is None:
        return code
    render = graph.dot if output_format == "dot" else graph.mermaid
    sys.stdout.write(render(plan, depth))
    return exitcodes.OK
