"""tasks.py's set-up of system tools: Graphviz, ssh-keygen and PostgreSQL are installed where they may be, once, and never silently missing."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers import REPO, repository_module


def _tasks() -> ModuleType:
    return repository_module("tasks")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    seen: list[tuple[str, ...]] = []

    def run(argv: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append(tuple(argv))
        assert kwargs["env"]["DEBIAN_FRONTEND"] == "noninteractive" and kwargs["check"] is True
        return subprocess.CompletedProcess(argv, 0)

    monkeypatch.setattr(subprocess, "run", run)
    return seen


def test_graphviz_is_installed_with_apt_when_dot_is_missing_and_root(
    calls: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = _tasks()
    monkeypatch.setattr(tasks.shutil, "which", lambda name: None if name == "dot" else f"/usr/bin/{name}")
    monkeypatch.setattr(tasks.os, "geteuid", lambda: 0)
    tasks.system_tools()
    assert calls == [
        ("apt-get", "update", "-q"),
        ("apt-get", "install", "-y", "-q", "--no-install-recommends", "graphviz"),
    ]


def test_nothing_is_installed_when_dot_is_there(calls: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = _tasks()
    monkeypatch.setattr(tasks.shutil, "which", lambda name: f"/usr/bin/{name}")
    tasks.system_tools()
    assert calls == []


def test_without_root_it_says_what_is_missing(
    calls: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = _tasks()
    monkeypatch.setattr(tasks.shutil, "which", lambda name: None if name == "dot" else f"/usr/bin/{name}")
    monkeypatch.setattr(tasks.os, "geteuid", lambda: 1000)
    tasks.system_tools()
    assert calls == [] and "apt-get install graphviz" in capsys.readouterr().err


def test_the_test_command_sets_up_system_tools() -> None:
    source = (REPO / "tasks.py").read_text()
    body = source[source.index("def test() -> int:") :]
    assert body.index("system_tools()") < body.index('"pytest"')
    assert "python3 tasks.py test" in (REPO / ".ci" / "run").read_text()


def test_every_missing_tool_comes_in_one_install(calls: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = _tasks()
    monkeypatch.setattr(
        tasks.shutil, "which", lambda name: None if name in ("dot", "ssh-keygen") else f"/usr/bin/{name}"
    )
    monkeypatch.setattr(tasks.os, "geteuid", lambda: 0)
    tasks.system_tools()
    assert calls[-1] == ("apt-get", "install", "-y", "-q", "--no-install-recommends", "graphviz", "openssh-client")


def test_the_suite_runs_in_parallel_and_the_caller_can_run_it_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = _tasks()
    monkeypatch.setattr(tasks.os, "cpu_count", lambda: 2)
    parallel = ["-n", "4", "--dist", "loadgroup", "--durations=30"]  # two workers per core, the slowest named
    assert tasks.pytest_args([]) == parallel
    assert tasks.pytest_args(["-n0", "-x"]) == [*parallel, "-n0", "-x"]  # the last -n wins
    serial = ["--durations=30", "-p", "no:xdist", "-k", "syntax"]
    assert tasks.pytest_args(["-p", "no:xdist", "-k", "syntax"]) == serial
    assert tasks.pytest_args(["-pno:xdist"]) == ["--durations=30", "-pno:xdist"]
    monkeypatch.setattr(tasks.os, "cpu_count", lambda: 8)
    assert tasks.pytest_args([])[:2] == ["-n", "16"]


def test_ci_runs_the_thorough_hypothesis_profile_and_a_contributor_the_fast_one() -> None:
    tasks = _tasks()
    assert "--hypothesis-profile=thorough" in tasks.pytest_args([], ci=True)
    assert not any(arg.startswith("--hypothesis-profile") for arg in tasks.pytest_args([]))
    # The caller's own choice comes last, so it wins over CI's.
    assert tasks.pytest_args(["--hypothesis-profile=fast"], ci=True)[-1] == "--hypothesis-profile=fast"


def without_postgres_on_path(tasks: ModuleType, monkeypatch: pytest.MonkeyPatch, debian_dirs: list[str]) -> None:
    server = ("initdb", "pg_ctl")
    monkeypatch.setattr(tasks.shutil, "which", lambda name: None if name in server else f"/usr/bin/{name}")
    monkeypatch.setattr(tasks.glob, "glob", lambda pattern: debian_dirs if pattern == tasks.POSTGRES_BIN else [])
    monkeypatch.setattr(tasks.os, "geteuid", lambda: 0)


def test_postgresql_is_installed_once_when_its_server_programs_are_missing(
    calls: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = _tasks()
    without_postgres_on_path(tasks, monkeypatch, [])
    tasks.system_tools()
    assert calls[-1] == ("apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql")


def test_debians_versioned_directory_counts_as_installed(
    calls: list[tuple[str, ...]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tasks = _tasks()
    for program in ("initdb", "pg_ctl"):
        (tmp_path / program).write_text("#!/bin/sh\n")
        (tmp_path / program).chmod(0o755)
    without_postgres_on_path(tasks, monkeypatch, [str(tmp_path)])
    tasks.system_tools()
    assert calls == []


def test_the_test_environment_has_the_postgres_extra() -> None:
    source = (REPO / "tasks.py").read_text()
    assert '"./runtime[postgres]"' in source[source.index("def setup() -> None:") : source.index("def demo")]
