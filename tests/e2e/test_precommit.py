"""The pre-commit hooks, for real: a temporary git repository whose .pre-commit-config.yaml uses this
repository (copied into a temporary git repository of its own, at a temporary commit) as a hook repo,
and `pre-commit run` installing and running the hooks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import REPO

# One worker runs the module under pytest-xdist: its fixtures install the hook environment once.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pre-commit")]

CHILD = textwrap.dedent("""\
    workflow "child" {
      outputs {
        report = steps.work.output
      }
      step work {
        shell "echo done"
      }
    }
    """)
PARENT = textwrap.dedent("""\
    workflow "parent" {
      step call {
        uses "workflows/child"
      }
      step after {
        shell "cat"
        inputs = [steps.call.output.report]
      }
    }
    """)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This repository's tracked files at a temporary commit: (path, rev)."""
    target = tmp_path_factory.mktemp("hooks") / "akm"
    files = _git(REPO, "ls-files", "--cached", "--others", "--exclude-standard").splitlines()
    for name in files:
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    _git(target, "init", "-q")
    _git(target, "add", "-A")
    _git(target, "-c", "user.email=ci@example.invalid", "-c", "user.name=ci", "commit", "-qm", "hooks")
    return target, _git(target, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One pre-commit cache for the module: the hook environment is installed once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def _user_repo(root: Path, hook_repo: tuple[Path, str]) -> Path:
    """A git repository with a child, its parent, their plans and a pre-commit config, all staged."""
    path, rev = hook_repo
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "dev@example.invalid")
    _git(root, "config", "user.name", "dev")
    (root / "akm.toml").write_text("")
    (root / "workflows").mkdir()
    (root / "workflows" / "child.akm").write_text(CHILD)
    (root / "workflows" / "parent.akm").write_text(PARENT)
    (root / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {path}\n    rev: {rev}\n    hooks:\n      - id: akmc-fmt\n      - id: akmc-check\n"
        "      - id: akmc-plans-up-to-date\n"
    )
    _compile_plans(root)
    _git(root, "add", "-A")
    return root


def _pre_commit(root: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def _compile_plans(root: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "akmc", "compile", "workflows", "--out-dir", "plans"],
        cwd=root,
        check=True,
        capture_output=True,
    )


def test_hooks_pass_fail_on_a_broken_workflow_and_on_a_broken_parent(
    tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    root = _user_repo(tmp_path / "user", hook_repo)
    clean = _pre_commit(root, pre_commit_home, "--all-files")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    _git(root, "commit", "-qm", "workflows and plans")

    # A broken workflow fails the hook with its diagnostic.
    (root / "workflows" / "parent.akm").write_text(
        PARENT.replace("steps.call.output.report", "steps.cal.output.report")
    )
    _git(root, "add", "workflows/parent.akm")
    broken = _pre_commit(root, pre_commit_home)
    assert broken.returncode == 1
    assert "workflows/parent.akm:7:21: error[E203]" in broken.stdout and "did you mean `call`?" in broken.stdout

    # Fixed again: it passes.
    (root / "workflows" / "parent.akm").write_text(PARENT)
    _git(root, "add", "workflows/parent.akm")
    fixed = _pre_commit(root, pre_commit_home)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr

    # Only the child changes, and the change breaks its parent: the commit fails at the parent.
    (root / "workflows" / "child.akm").write_text(CHILD.replace("report =", "summary ="))
    _git(root, "add", "workflows/child.akm")
    child_edit = _pre_commit(root, pre_commit_home)
    assert child_edit.returncode == 1
    assert "workflows/parent.akm:7:" in child_edit.stdout and "error[E407]" in child_edit.stdout


def test_plans_up_to_date_hook_lists_stale_plans(
    tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    root = _user_repo(tmp_path / "user", hook_repo)
    _git(root, "commit", "-qm", "plans")
    (root / "workflows" / "child.akm").write_text(CHILD.replace("echo done", "echo finished"))
    _git(root, "add", "workflows/child.akm")
    stale = _pre_commit(root, pre_commit_home, "akmc-plans-up-to-date")
    assert stale.returncode == 1
    assert "stale:   plans/workflows/child.plan.json" in stale.stdout
    assert "stale:   plans/workflows/parent.plan.json" in stale.stdout  # the parent embeds the child


def test_fmt_hook_rewrites_a_staged_workflow_and_fails_until_it_is_formatted(
    tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    root = _user_repo(tmp_path / "user", hook_repo)
    _git(root, "commit", "-qm", "workflows and plans")
    messy = CHILD.replace("  step work {\n    shell", "  step work {  shell").replace("report =", "report=")
    (root / "workflows" / "child.akm").write_text(messy)
    _git(root, "add", "workflows/child.akm")
    first = _pre_commit(root, pre_commit_home)
    assert first.returncode == 1
    assert "akmc fmt" in first.stdout and "files were modified by this hook" in first.stdout
    assert (root / "workflows" / "child.akm").read_text() == CHILD
    _git(root, "add", "workflows/child.akm")
    again = _pre_commit(root, pre_commit_home)
    assert again.returncode == 0, again.stdout + again.stderr


def test_the_readme_snippet_becomes_a_pinned_config_with_the_command_its_comment_names(
    tmp_path: Path, hook_repo: tuple[Path, str], pre_commit_home: Path
) -> None:
    """No release is tagged yet: the README's `rev: COMMIT` plus the autoupdate its comment names
    gives a config pinned to the hook repository's newest commit."""
    path, rev = hook_repo
    readme = (REPO / "README.md").read_text()
    snippet = readme.split("```yaml\n", 1)[1].split("```", 1)[0]
    root = tmp_path / "user"
    root.mkdir()
    _git(root, "init", "-q")
    (root / ".pre-commit-config.yaml").write_text(snippet.replace("https://example.invalid/akm", str(path)))
    command = snippet.split("`pre-commit ", 1)[1].split("`", 1)[0].split()
    env = {**os.environ, "PRE_COMMIT_HOME": str(pre_commit_home)}
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", *command], cwd=root, capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"rev: {rev}" in (root / ".pre-commit-config.yaml").read_text()
