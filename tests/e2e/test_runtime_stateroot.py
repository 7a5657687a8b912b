"""Project-root state (runtime.md, "The state directory"): a bare `akm-run` finds the project's state
from any of its subdirectories, a state directory git never stages, and none found outside the
project. Real git repositories and `akm-run` processes in temporary directories, no AKM_STATE_DIR."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from helpers import Runtime, git, run_cli, source

WAITS = source("""
    workflow "t" {
      step hello {
        shell "true"
      }
      step wait {
        approval "go on?"
      }
    }
""")


def plan_file(tmp_path: Path) -> Path:
    """A compiled plan that runs one shell step, then waits for an approval (kept outside the projects)."""
    (tmp_path / "plans-src").mkdir()
    return Runtime(tmp_path / "plans-src").compile("wf.akm", WAITS)


def akm(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A bare `akm-run ARGS` in `cwd`: no variable names a state directory or a database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKM_")}
    return run_cli(*args, cwd=cwd, module="akm_run", env=env)


def listed(cwd: Path) -> tuple[list[str], str]:
    """The ids `akm-run list` prints in `cwd`, and what it said on stderr."""
    result = akm("list", "--format", "json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return [r["id"] for r in json.loads(result.stdout)["runs"]], result.stderr


def started(plan: Path, cwd: Path, *extra: str) -> tuple[str, str]:
    """Run the plan in `cwd` until its approval blocks it: (its run id, the notes it printed)."""
    result = akm("run", plan, "--format", "json", *extra, cwd=cwd)
    assert result.returncode == 3, result.stdout + result.stderr
    document = json.loads(result.stdout)
    return document["runId"], document["blocked"]["notes"]


def test_a_run_from_a_subdirectory_lives_at_the_project_root_and_git_ignores_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src" / "deep").mkdir(parents=True)
    (project / "README").write_text("hello\n")
    git(project, "init", "-q", "-b", "main")
    run_id, notes = started(plan_file(tmp_path), project / "src" / "deep")
    assert (project / ".akm-run" / "state.db").is_file() and not (project / "src" / "deep" / ".akm-run").exists()
    assert (project / ".akm-run" / ".gitignore").read_text() == "*\n"
    assert f"akm-run approve {run_id} wait" in notes and "--state-dir" not in notes  # it works bare, here
    ids, said = listed(project / "src")
    assert ids == [run_id] and said == f"state: {project / '.akm-run'}\n"
    ids, said = listed(project)
    assert ids == [run_id] and said == ""  # the current directory's own: nothing to say
    status = akm("status", cwd=project / "src" / "deep")
    assert status.returncode == 0 and run_id in status.stdout and f"state: {project / '.akm-run'}" in status.stderr
    git(project, "add", "-A")
    assert git(project, "diff", "--cached", "--name-only").split() == ["README"]


def test_an_existing_state_directory_in_a_subdirectory_keeps_its_runs(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "tools" / "bin").mkdir(parents=True)
    (project / "akm.toml").write_text("")
    old = project / "tools" / ".akm-run"
    run_id, _ = started(plan_file(tmp_path), project, "--state-dir", str(old))
    assert listed(project / "tools" / "bin") == ([run_id], f"state: {old}\n")
    assert listed(project) == ([], "")  # the project root has no state directory of its own


def test_a_state_directory_in_a_parent_project_or_home_is_not_picked_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "outer" / "inner" / "src").mkdir(parents=True)
    plan = plan_file(tmp_path)
    started(plan, home)  # no project at all: ./.akm-run of the home directory
    assert (home / ".akm-run" / "state.db").is_file()
    git(home / "outer", "init", "-q")
    outer, _ = started(plan, home / "outer")
    git(home / "outer" / "inner", "init", "-q")
    # Where a bare command would put the project's state, not the parent project's runs:
    assert listed(home / "outer" / "inner" / "src") == ([], f"state: {home / 'outer' / 'inner' / '.akm-run'}\n")
    inner, notes = started(plan, home / "outer" / "inner" / "src")
    assert (home / "outer" / "inner" / ".akm-run" / "state.db").is_file() and "--state-dir" not in notes
    assert listed(home / "outer" / "inner")[0] == [inner] and listed(home / "outer")[0] == [outer]


def test_a_hint_names_the_state_directory_a_bare_command_would_miss(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    elsewhere = tmp_path / "elsewhere"
    run_id, notes = started(plan_file(tmp_path), project, "--state-dir", str(elsewhere))
    assert f"akm-run approve {run_id} wait --state-dir {elsewhere}" in notes
    assert (elsewhere / ".gitignore").read_text() == "*\n"
    assert listed(project) == ([], "")
