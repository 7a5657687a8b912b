"""`akmc diff OLD NEW`: the semantic diff of two plans, each given as a plan file or a source."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from akmc import exitcodes


def run(old: Path, new: Path, *, output_format: str, root: Path | None) -> int:
    """Exit 0 when the plans are equal, 1 when they differ, and the loader's code when one fails."""
    from akmc.commands.verify import load_plan
    from akmc.diff import diff

    before, code = load_plan(old, root)
    if before is None:
        return code
    after, code = load_plan(new, root)
    if after is None:
        return code
    result = diff(before, after)
    if output_format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        from akmc.render import diff as renderer

        sys.stdout.write(renderer.render(result))
    return exitcodes.OK if result.equal else exitcodes.FINDINGS
