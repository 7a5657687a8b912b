"""Plan files in a workspace that no source accounts for (`akmc diff --rev` shows them).

A plan file is accounted for when it verifies and its plan is exactly what the source it names
compiles to. Any other plan file that verifies runs as it stands, so a review must see it: added in
full, or as a diff against the file at the same path on the old side. A file that does not verify
is refused by every host; it is named on stderr and compared no further."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from akm_run.plan import plan_hash, read_file
from akmc.diff import WorkflowDiff, diff
from akmc.workspace import SKIP_DIRS, SUFFIX, display_path, plan_files

Plans = dict[str, dict[str, Any] | None]  # root-relative source path → its plan (None: it has errors)


def unaccounted(base: Path, compiled: Plans) -> dict[str, dict[str, Any]]:
    """Every plan file below `base` (symlinked directories not followed: what they hold is not the
    workspace's) that verifies but is not what its source compiles to, by root-relative path → its plan."""
    found = {}
    for path in plan_files(base, SKIP_DIRS, follow=False):
        if not path.name.endswith(".plan.json") or not path.is_file():
            continue  # a signature, or a FIFO or device that no host reads as a plan either
        relative = path.relative_to(base).as_posix()
        plan, refusal = read_file(path)
        if plan is None:
            print(
                f"akmc: note: {display_path(path)} is not a plan any host accepts ({refusal}); not compared",
                file=sys.stderr,
            )
            continue
        source = compiled.get(str(plan.get("ref")) + SUFFIX)
        if source is None or plan_hash(source) != plan_hash(plan):
            found[relative] = plan
    return found


def changes(old_base: Path, new_base: Path, new: Plans) -> list[WorkflowDiff]:
    """The unaccounted plan files of the new side that the old side did not hold as they are."""
    items = []
    for relative, plan in sorted(unaccounted(new_base, new).items()):
        before, _ = read_file(old_base / relative) if (old_base / relative).is_file() else (None, "")
        if before is None:
            items.append(WorkflowDiff(relative, "added", plan_hash(plan), plan=plan))
        elif plan_hash(before) != plan_hash(plan):
            result = diff(before, plan)
            items.append(WorkflowDiff(relative, "changed", result.new_hash, result))
    return items
