"""`akmc diff OLD NEW` and `akmc diff --rev REV [PATH…]`: the semantic diff of plans, each side a plan
file or a source; with `--rev`, every workflow of the workspace at a git revision against the working tree."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from akm_run.plan import plan_hash
from akmc import exitcodes
from akmc.diff import PlanDiff, WorkflowDiff, diff
from akmc.driver import compile_source, load_plan, report_diagnostics
from akmc.planfiles import changes
from akmc.render import diff as renderer
from akmc.revision import RevisionError, materialise
from akmc.workspace import SourceError, discover, display_path, find_root


def run(paths: list[Path], *, revision: str | None, output_format: str, root: Path | None) -> int:
    """Exit 0 when the plans are equal, 1 when they differ, 2 when a side has errors (4: a refused plan file)."""
    if revision is not None:
        return _revision(revision, paths, output_format, root)
    if len(paths) != 2:
        print("akmc: error: diff takes OLD and NEW (plan files or sources), or --rev REV [PATH…]", file=sys.stderr)
        return exitcodes.USAGE
    sides = [_load(path, root) for path in paths]
    if sides[0][0] is None or sides[1][0] is None:
        return max(code for _, code in sides)
    result = diff(sides[0][0], sides[1][0])
    item = WorkflowDiff(result.new_ref, "equal" if result.equal else "changed", result.new_hash, result)
    _write([item], result, "", output_format, f"run `akmc diff {paths[0]} {paths[1]}` to see everything")
    return exitcodes.OK if result.equal else exitcodes.FINDINGS


def _load(path: Path, root: Path | None) -> tuple[dict[str, Any] | None, int]:
    plan, code = load_plan(path, root)
    # a source with errors is an error, not a difference
    return plan, exitcodes.USAGE if code == exitcodes.FINDINGS else code


def _write(items: list[WorkflowDiff], single: PlanDiff | None, revision: str, output_format: str, how: str) -> None:
    if output_format == "json":
        document = (
            single.to_json()
            if single is not None
            else {
                "equal": all(i.status == "equal" for i in items),
                "revision": revision,
                "workflows": [i.to_json() for i in items],
            }
        )
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    elif output_format == "markdown":
        sys.stdout.write(renderer.render_markdown(items, revision, how))
    elif single is not None:
        sys.stdout.write(renderer.render(single))
    else:
        sys.stdout.write(renderer.render_workspace(items, revision))


def _revision(revision: str, paths: list[Path], output_format: str, root: Path | None) -> int:
    workspace = find_root(Path.cwd(), root)
    wanted = []
    for path in paths:
        try:
            wanted.append(path.resolve().relative_to(workspace).as_posix())
        except ValueError:
            print(f"akmc: error: {path} is outside the workspace {workspace}", file=sys.stderr)
            return exitcodes.USAGE
    with tempfile.TemporaryDirectory(prefix="akmc-rev-") as scratch:
        try:
            old_root = materialise(workspace, revision, Path(scratch).resolve())
        except RevisionError as error:
            print(f"akmc: error: {error}", file=sys.stderr)
            return exitcodes.USAGE
        sides = [_side(old_root, f"{revision}:", wanted), _side(workspace, "", wanted)]
        plans = [] if wanted or any(p is None for p in sides[1].values()) else changes(old_root, workspace, sides[1])
    if any(plan is None for side in sides for plan in side.values()):
        print("akmc: error: a workflow has errors on one side; nothing is compared", file=sys.stderr)
        return exitcodes.USAGE
    if wanted and not (sides[0] or sides[1]):
        print(
            f"akmc: error: no workflow under {' '.join(map(str, paths))} at {revision} or in the working tree",
            file=sys.stderr,
        )
        return exitcodes.USAGE
    items = []
    for relative in sorted(sides[0].keys() | sides[1].keys()):
        before, after = sides[0].get(relative), sides[1].get(relative)
        if before is None and after is not None:
            items.append(WorkflowDiff(relative, "added", plan_hash(after), plan=after))
        elif after is None and before is not None:
            items.append(WorkflowDiff(relative, "removed", plan_hash(before)))
        elif before is not None and after is not None:
            result = diff(before, after)
            items.append(WorkflowDiff(relative, "equal" if result.equal else "changed", result.new_hash, result))
    items += plans  # plan files no source accounts for run as they stand: a review must see them
    shown = " ".join(str(p) for p in paths)
    _write(
        items,
        None,
        revision,
        output_format,
        f"run `akmc diff --rev {revision}{' ' + shown if shown else ''}` to see everything",
    )
    return exitcodes.OK if all(i.status == "equal" for i in items) else exitcodes.FINDINGS


def _side(base: Path, label: str, wanted: list[str]) -> dict[str, dict[str, Any] | None]:
    """Every wanted workflow under `base` by root-relative path → its plan, or None when it has errors
    (reported on stderr). Files of the old revision are named `REV:path`."""
    # late: the compiler's stages cost about 70 ms, which a diff of two plan files never needs
    from akmc.compiler import Session

    session = Session(base, display=_named(base, label) if label else display_path)
    found: dict[str, dict[str, Any] | None] = {}
    for source in discover([base]):
        relative = source.relative_to(base).as_posix()
        if wanted and not any(relative == w or relative.startswith(w.rstrip("/") + "/") for w in wanted):
            continue
        try:
            _, found[relative] = compile_source(session, source)
        except SourceError as error:
            print(f"akmc: error: {error}", file=sys.stderr)
            found[relative] = None
    report_diagnostics(session.results)
    return found


def _named(base: Path, label: str) -> Callable[[Path], str]:
    """Files of the old revision named `REV:path` (relative to the workspace root), not by where they were read."""

    def name(path: Path) -> str:
        try:
            return label + Path(os.path.abspath(path)).relative_to(base).as_posix()
        except ValueError:
            return label + path.as_posix()

    return name
