"""akm_run.worktrees with real git repositories in temporary directories: the base a workdir
gives, worktrees at a commit, what `settle` keeps and removes, and the errors that name their cause."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from akm_run import worktrees
from helpers import committed, git


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "tracked.txt").write_text("one\n")
    (root / ".gitignore").write_text("build/\n")
    return committed(root)


def test_the_base_is_head_and_the_repository_root(repo: Path) -> None:
    (repo / "sub").mkdir()
    base = worktrees.base(repo / "sub")
    assert base == worktrees.Base(git(repo, "rev-parse", "HEAD").strip(), str(repo.resolve()))


def test_a_directory_outside_git_or_without_a_commit_gives_no_base(tmp_path: Path) -> None:
    with pytest.raises(worktrees.GitError, match="is not inside a git work tree"):
        worktrees.base(tmp_path)
    git(tmp_path, "init", "-q")
    with pytest.raises(worktrees.GitError, match="has no commit yet"):
        worktrees.base(tmp_path)
    assert worktrees.head(tmp_path) is None


def test_a_worktree_at_the_base_is_private_and_settles_by_its_status(repo: Path, tmp_path: Path) -> None:
    commit = worktrees.base(repo).commit
    (repo / "tracked.txt").write_text("moved on\n")
    git(repo, "commit", "-qam", "later")
    clean = worktrees.path_for(tmp_path / "state", "r1", "a:solo", 1)
    worktrees.add(repo, clean, commit)
    assert (clean / "tracked.txt").read_text() == "one\n"  # the base, not HEAD
    assert stat.S_IMODE(clean.stat().st_mode) == 0o700 and stat.S_IMODE(clean.parent.stat().st_mode) == 0o700
    (clean / "build").mkdir()
    (clean / "build" / "out.o").write_text("ignored")
    assert worktrees.settle(clean) is None and not clean.exists()  # ignored output is disposable
    dirty = worktrees.path_for(tmp_path / "state", "r1", "a:solo", 2)
    worktrees.add(repo, dirty, commit)
    (dirty / "tracked.txt").write_text("changed\n")
    (dirty / "new" / "deep").mkdir(parents=True)
    (dirty / "new" / "deep" / "file").write_text("x")
    assert sorted(worktrees.settle(dirty) or []) == ["new/deep/file", "tracked.txt"] and dirty.is_dir()
    worktrees.remove(dirty)
    worktrees.prune(repo)
    assert git(repo, "worktree", "list").count("\n") == 1


def test_a_commit_the_repository_lacks_is_unavailable(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(worktrees.Unavailable, match="is not in the repository"):
        worktrees.add(repo, tmp_path / "state" / "worktrees" / "r" / "u~a1", "0" * 40)


def test_a_worktrees_directory_others_can_read_is_refused(repo: Path, tmp_path: Path) -> None:
    (tmp_path / "state" / "worktrees").mkdir(parents=True)
    os.chmod(tmp_path / "state" / "worktrees", 0o755)
    with pytest.raises(worktrees.GitError, match="is not a private directory"):
        worktrees.add(repo, worktrees.path_for(tmp_path / "state", "r", "u", 1), worktrees.base(repo).commit)


def test_git_that_cannot_run_says_so(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(worktrees.GitError, match="git is not installed"):
        worktrees.git(["status"], repo)
