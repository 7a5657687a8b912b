"""The README's quick start is CI: `.ci/run` runs its two commands as printed, and the demo's own
commands (tasks.DEMO) run here with real processes, twice, from a copy of the examples."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from helpers import REPO, repository_module

MODULES = {"akmc": "akmc", "akm-run": "akm_run"}


def _tasks() -> ModuleType:
    return repository_module("tasks")


def _demo_commands() -> tuple[tuple[str, ...], ...]:
    demo: tuple[tuple[str, ...], ...] = _tasks().DEMO
    return demo


def _command_lines(text: str) -> list[str]:
    """The commands of a shell text, without comments, blank lines and the script's own set-up."""
    lines = (line.split(" #", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith(("#", "set ", "cd "))]


def test_ci_runs_the_readme_quick_start_as_printed() -> None:
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    ci = (REPO / ".ci" / "run").read_text()
    assert _command_lines(quick_start) == ["python3 tasks.py demo", "python3 tasks.py test"]
    assert _command_lines(ci) == _command_lines(quick_start)


@pytest.mark.slow
def test_the_demo_passes_from_a_clean_copy_and_again(tmp_path: Path) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("plans", ".akm-run"))
    for round_ in (1, 2):
        for program, *argv in _demo_commands():
            result = subprocess.run(
                [sys.executable, "-m", MODULES[program], *argv],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert result.returncode == 0, f"round {round_}: {program} {argv}: {result.stdout}\n{result.stderr}"
    listed = subprocess.run(
        [sys.executable, "-m", "akm_run", "list", "--state-dir", "examples/.akm-run", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    runs = json.loads(listed.stdout)["runs"]
    assert [r["status"] for r in runs] == ["completed"] * 4  # checks and notes, twice


def test_each_demo_command_is_printed_so_that_pasting_it_runs_it_again() -> None:
    tasks = _tasks()
    for program, *argv in tasks.DEMO:
        line = tasks.shown((tasks.BIN / program, *argv))
        assert shlex.split(line) == ["+", f".venv/bin/{program}", *argv], line
    assert '\'team=["ada", "grace", "linus"]\'' in tasks.shown((tasks.BIN / "akm-run", *tasks.DEMO[-2][1:]))
