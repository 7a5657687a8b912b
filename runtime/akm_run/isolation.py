"""An isolated attempt's worktree, journaled: made before the attempt, settled after it (removed when
clean, kept and journaled when not), settled the same way after a crash, and the base commit that a
run freezes when it is published (docs/runtime.md, "Worktrees")."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from akm_run import features, wording, worktrees
from akm_run.core import End
from akm_run.journal import Journal
from akm_run.rows import RunRow
from akm_run.wording import Failure

if TYPE_CHECKING:
    from akm_run.dispatch import Request, Settings

UNAVAILABLE = "worktree_unavailable"


def uses_worktrees(plan: Any) -> bool:
    """Whether a run of this plan (or of a child it embeds) runs attempts in worktrees."""
    return "worktree" in features.used(plan)


def freeze_base(plan: Any, workdir: Path) -> tuple[str, str] | None:
    """The (commit, repository root) a run of `plan` started in `workdir` freezes, None when it
    uses no worktrees. Raises worktrees.GitError when the workdir cannot give one."""
    if not uses_worktrees(plan):
        return None
    found = worktrees.base(workdir)
    return found.commit, found.repo


def publishing_base(plan: Any, workdir: Path, path: Path) -> tuple[str, str] | Failure | None:
    """What `run PLAN` (the plan file at `path`) freezes on its new run: freeze_base's answer, or the
    refusal to print when the workdir cannot give a base (nothing is published then)."""
    try:
        return freeze_base(plan, workdir)
    except worktrees.GitError as error:
        return wording.worktree_base_refused(path=path, reason=str(error))


def isolated(
    journal: Journal, settings: Settings, request: Request, execute: Callable[[Request, Path, dict[str, str]], End]
) -> End:
    """Run one attempt with `execute(request, cwd, env)` in a fresh worktree at the run's base
    commit, then settle the worktree. A worktree that cannot be made fails the unit (not retried)."""
    row = journal.run(request.run_id)
    commit = row.base_commit if row is not None else None
    if commit is None:
        return End("failed", reason=UNAVAILABLE, message=wording.no_base_commit(run=request.run_id))
    state = settings.state_dir or worker_state()
    path = _fresh(worktrees.path_for(state, request.run_id, request.place.journal, request.attempt))
    try:
        worktrees.add(settings.workdir, path, commit)
    except worktrees.GitError as error:
        return End("failed", reason=UNAVAILABLE, message=str(error))
    try:
        return execute(request, path, {"AKM_WORKTREE": str(path), "AKM_BASE_COMMIT": commit})
    finally:
        settle(journal, (request.run_id, request.place.journal, request.place.step_id, request.attempt), path)


def worker_state() -> Path:
    """Where a pool worker keeps worktrees: a directory of this user's that outlives the worker (its
    own scratch directory is removed when it stops, and a kept worktree is there for review)."""
    return Path(tempfile.gettempdir()) / f"akm-run-{os.getuid()}"


def _fresh(path: Path) -> Path:
    """`path`, or the first free `path.N` beside it when an earlier driver left one there."""
    candidate, n = path, 1
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


def settle(journal: Journal, attempt: tuple[str, str, str, int], path: Path) -> None:
    """After an attempt (run, unit, step, number): remove its worktree when `git status` lists
    nothing, else keep it and journal its path; a worktree git cannot read is kept. A link a unit
    left in its place is removed, never followed (worktrees.settle)."""
    if not path.is_dir() and not path.is_symlink():
        return
    run_id, unit_id, step_id, number = attempt
    try:
        changed = worktrees.settle(path)
    except worktrees.GitError as error:
        print(f"akm-run: {error}", file=sys.stderr)  # git's own words, naming the worktree
        changed = []
    if changed is None:
        journal.remove_worktree(run_id, unit_id, step_id, number, str(path), by="attempt")
    else:
        journal.keep_worktree(run_id, unit_id, step_id, number, str(path), len(changed))


def reclaim(journal: Journal, state_dir: Path, run_id: str, unit_id: str, step_id: str, number: int) -> None:
    """An interrupted attempt's worktree (its driver died) is settled as a finished one's is."""
    settle(journal, (run_id, unit_id, step_id, number), worktrees.path_for(state_dir, run_id, unit_id, number))


def say_if_moved(row: RunRow, workdir: Path) -> None:
    """A drive of a run with a base commit says, once, when the workdir's HEAD has moved since."""
    if row.base_commit is None or row.parent_run_id is not None:
        return
    now = worktrees.head(workdir)
    if now is not None and now != row.base_commit:
        moved = wording.base_moved(repo=str(workdir), head=now[:7], run=row.id, base=row.base_commit[:7])
        print(f"akm-run: {moved}", file=sys.stderr, flush=True)
