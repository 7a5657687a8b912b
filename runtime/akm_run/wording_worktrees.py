"""The wording of worktree isolation (akm_run.worktrees, akm_run.isolation, akm_run.kept): base
commits, kept worktrees and `akm-run worktrees`. Part of the wording registry: akm_run.wording
re-exports every template here."""

from __future__ import annotations

from akm_run.exitcodes import USAGE
from akm_run.templates import error, words

__all__ = [
    "base_line",
    "base_moved",
    "dirty_needs_prune",
    "isolation_without_process",
    "kept_worktree",
    "no_base_commit",
    "no_kept_worktrees",
    "removed_worktree",
    "worktree_base_refused",
]


@words("`isolation` is only for shell, script and agent targets (they run a process in a directory)")
def isolation_without_process() -> None: ...
@error(USAGE, "cannot publish {path}: it runs steps in git worktrees, but {reason}; nothing was published")
def worktree_base_refused(*, path: object, reason: str) -> None: ...
@words("run {run} has no base commit (it was published without one): its worktrees cannot be made")
def no_base_commit(*, run: str) -> None: ...
@words("HEAD of {repo} is now {head}; run {run} keeps its base commit {base}")
def base_moved(*, repo: str, head: str, run: str, base: str) -> None: ...
@words("base: {commit} ({repo})")
def base_line(*, commit: str, repo: str) -> None: ...
@words("kept worktree {path} ({changed})")
def kept_worktree(*, path: str, changed: str) -> None: ...
@words("removed worktree {path}")
def removed_worktree(*, path: str) -> None: ...
@words("no kept worktrees")
def no_kept_worktrees() -> None: ...
@error(USAGE, "--dirty goes with --prune: `akm-run worktrees --prune --dirty` removes kept worktrees with changes")
def dirty_needs_prune() -> None: ...
