"""Worktree isolation (docs/runtime.md, "Worktrees"): git, run as a subprocess with bounded time.

A run whose steps say `isolation = worktree` freezes its base commit when it is published (`base`);
each attempt of such a step runs in a detached worktree of the workdir's repository at that commit,
under the state directory (`add`), which is removed afterwards when `git status` finds nothing
(`settle`) and kept, for review, when it does. Every failure is a `GitError` that says what failed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT_SECONDS = 60.0  # a worktree of a large repository takes a while to check out
DIRECTORY = "worktrees"  # under the state directory


class GitError(Exception):
    """A git command failed, or git could not run: the message says which and why."""


class Unavailable(GitError):
    """The run's base commit is not in the workdir's repository (a clone that is behind)."""


@dataclass(frozen=True, slots=True)
class Base:
    """A run's frozen base: the commit its worktrees check out and the repository it came from."""

    commit: str
    repo: str


def git(args: Sequence[str], cwd: Path, timeout: float = GIT_TIMEOUT_SECONDS) -> str:
    """Run `git -C cwd args…` and return its stdout; raises GitError with git's own last words."""
    argv = ["git", "-C", str(cwd), *args]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (no `git` on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"`git {' '.join(args)}` did not finish within {timeout:g} s") from None
    except OSError as error:
        raise GitError(f"cannot run git: {error.strerror or error}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise GitError(f"`git {' '.join(args)}` failed: {last}")
    return done.stdout


def base(workdir: Path) -> Base:
    """The commit `HEAD` names in the workdir's repository, and that repository's root. Raises
    GitError when the workdir is not inside a git work tree or its `HEAD` names no commit yet."""
    if not workdir.is_dir():
        raise GitError(f"{workdir} is not a directory")
    try:
        root = git(["rev-parse", "--show-toplevel"], workdir).strip()
    except GitError:
        raise GitError(f"{workdir} is not inside a git work tree") from None
    try:
        commit = git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], workdir).strip()
    except GitError:
        raise GitError(f"the repository at {root} has no commit yet (HEAD names none)") from None
    return Base(commit, root)


def head(workdir: Path) -> str | None:
    """The commit `HEAD` names now, or None when there is none (or no repository)."""
    try:
        return base(workdir).commit
    except GitError:
        return None


def has_commit(workdir: Path, commit: str) -> bool:
    """Whether the workdir's repository holds `commit` (a clone that is behind may not)."""
    try:
        git(["cat-file", "-e", f"{commit}^{{commit}}"], workdir)
    except GitError:
        return False
    return True


def path_for(state_dir: Path, run_id: str, unit_id: str, attempt: int) -> Path:
    """Where one attempt's worktree lives: `<state>/worktrees/<run>/<unit>~a<attempt>`."""
    return state_dir.absolute() / DIRECTORY / run_id / f"{unit_id}~a{attempt}"


def add(workdir: Path, path: Path, commit: str) -> None:
    """A detached worktree of the workdir's repository at `commit`, at `path` (private, 0700).
    Raises Unavailable when the repository lacks the commit, GitError for anything else."""
    if not has_commit(workdir, commit):
        raise Unavailable(f"the base commit {commit} is not in the repository at {workdir}; fetch it there")
    _private_parents(path)
    with _serialized(path):
        path.parent.mkdir(mode=0o700, exist_ok=True)  # here: a removal empties it and removes it
        git(["worktree", "add", "--detach", "--quiet", str(path), commit], workdir)
    path.chmod(0o700)


_THREADS = threading.Lock()


@contextlib.contextmanager
def _serialized(path: Path) -> Iterator[None]:
    """One `git worktree add` or `remove` at a time under one worktrees directory: git refuses one
    that runs while another holds the repository's locks, and a run's directory is removed once
    empty only while no worktree is being added to it. A thread lock within this process, a file
    lock (`<worktrees>/.lock`) between processes."""
    with _THREADS, open(path.parent.parent / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _private_parents(path: Path) -> None:
    """Create `<state>/worktrees/` private, and ignored by any repository the state directory
    stands in: a `.gitignore` of `*` keeps the worktrees out of the user's `git status`."""
    root = path.parent.parent
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    parent, own = root.parent.lstat(), root.lstat()
    if parent.st_uid != os.getuid() or root.is_symlink() or own.st_uid != os.getuid() or own.st_mode & 0o077:
        raise GitError(f"{root} is not a private directory of this user: no worktree is made there")
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")


def changes(path: Path) -> list[str]:
    """What `git status --porcelain` lists in a worktree (ignored files are disposable: not listed)."""
    out = git(["status", "--porcelain", "--untracked-files=all"], path)
    return [line[3:] for line in out.splitlines() if line.strip()]


def remove(path: Path) -> None:
    """Remove a worktree and git's record of it (and its run's directory once that is empty)."""
    with _serialized(path):
        git(["worktree", "remove", "--force", str(path)], path)
        with contextlib.suppress(OSError):
            path.parent.rmdir()


def prune(repo: Path) -> None:
    """Drop git's records of worktrees whose directories are gone (`git worktree prune`)."""
    git(["worktree", "prune"], repo)


def present(path: Path) -> bool:
    """Whether the worktree akm-run made is at `path`: a directory, not a link that a unit left in
    its place (git would follow it into whatever it names, the user's own checkout say)."""
    return path.is_dir() and not path.is_symlink()


def drop_link(path: Path) -> None:
    """A link a unit left in place of its worktree (the worktree itself is gone): removed, never
    followed."""
    if path.is_symlink():
        path.unlink(missing_ok=True)


def settle(path: Path) -> list[str] | None:
    """After an attempt: remove the worktree when `git status` is empty and return None, else keep
    it and return what changed. A directory that is already gone (or a link in its place) settles
    as removed."""
    drop_link(path)
    if not present(path):
        return None
    changed = changes(path)
    if changed:
        return changed
    remove(path)
    return None
