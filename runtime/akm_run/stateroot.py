"""Where the state directory is when no command line or variable names it: found from the current
directory within its project (docs/runtime.md, "The state directory")."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

STATE_DIR_NAME = ".akm-run"
DATABASE = "state.db"
# The markers of a project root, strongest first: the same rule as the compiler's workspace root
# (akmc.workspace.find_root; a test holds the two to one answer, as the runtime never imports akmc).
ROOT_MARKERS = ("akm.toml", ".git")


def _holds(directory: Path, name: str, *, file: bool = False) -> bool:
    """Whether `directory/name` exists (is a file, with `file`); an unreadable one does not."""
    try:
        return (directory / name).is_file() if file else (directory / name).exists()
    except OSError:
        return False


def project_root(start: Path) -> Path | None:
    """The nearest ancestor of `start` (itself included) holding `akm.toml`, else the nearest holding
    `.git`; None when no ancestor holds either."""
    ancestors = [start, *start.parents]
    for marker in ROOT_MARKERS:
        for directory in ancestors:
            if _holds(directory, marker):
                return directory
    return None


def located(cwd: Path) -> Path:
    """The state directory of a command run in `cwd` (absolute) with no --state-dir and no
    $AKM_STATE_DIR: the nearest ancestor's `.akm-run/` that holds a state database, looking no higher
    than the project root; else the project root's `.akm-run/`; else `cwd/.akm-run/`."""
    root = project_root(cwd)
    ancestors = [cwd, *cwd.parents]
    within = ancestors[: ancestors.index(root) + 1] if root is not None else [cwd]
    for directory in within:
        if _holds(directory / STATE_DIR_NAME, DATABASE, file=True):
            return directory / STATE_DIR_NAME
    return (root if root is not None else cwd) / STATE_DIR_NAME


def default_state_dir() -> Path:
    """The state directory a bare command uses here: $AKM_STATE_DIR, else the one `located` finds
    from the current directory."""
    if variable := os.environ.get("AKM_STATE_DIR"):
        return Path(variable)
    try:
        cwd = Path.cwd()
    except OSError:  # the current directory was removed: nothing to walk up from
        return Path(STATE_DIR_NAME)
    return located(cwd)


def make_state_dir(directory: Path) -> None:
    """Create the state directory (and its parents) when it is missing; one this creates gets a
    `.gitignore` of `*`, so a project never commits its runs (a user's later edit of it is kept)."""
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        return
    with contextlib.suppress(OSError):  # the journal works without it
        (directory / ".gitignore").write_text("*\n", encoding="utf-8")
