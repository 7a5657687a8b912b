"""The fork server (tests/forkserver.py) runs an `akm-run` command as `python -m akm_run` would: what
the end-to-end tests read of a command (its exit code or signal, its two streams, its environment,
working directory and session, its output as it is written) is the same whichever way it was
started. Each test runs both ways."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import forkserver
import pytest

from helpers import Runtime, eventually, unit_processes

AKM_RUN = [sys.executable, "-m", "akm_run"]
SLEEPER = 'workflow "sleeper" {\n  step nap {\n    shell "echo napping >&2; sleep 60"\n  }\n}\n'


@pytest.fixture(params=["fork", "exec"])
def spawn(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(forkserver.SPAWN_VARIABLE, request.param)
    return str(request.param)


@pytest.fixture
def sleeper(tmp_path: Path) -> tuple[Runtime, Path]:
    runtime = Runtime(tmp_path)
    return runtime, runtime.compile("sleeper.akm", SLEEPER)


def test_a_forked_command_is_the_servers_child() -> None:
    process = forkserver.popen([*AKM_RUN, "--version"], text=True, stdout=subprocess.PIPE)
    assert isinstance(process, forkserver.Forked)
    out, _ = process.communicate(timeout=60)
    assert out.startswith("akm-run ") and process.returncode == 0
    with pytest.raises(ChildProcessError):
        os.waitpid(process.pid, os.WNOHANG)  # not this process's: the server reaped it


def test_exit_codes_and_both_streams_come_back(spawn: str, tmp_path: Path) -> None:
    refused = forkserver.run([*AKM_RUN, "nonsense"], cwd=tmp_path, timeout=60)
    assert refused.returncode == 2
    assert refused.stdout == "" and "invalid choice: 'nonsense'" in refused.stderr
    listed = forkserver.run([*AKM_RUN, "list", "--state-dir", tmp_path / "state"], timeout=60)
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "no runs\n", "")


def test_environment_and_working_directory_are_the_commands(spawn: str, tmp_path: Path) -> None:
    """`run` keeps its journal in AKM_STATE_DIR, a relative one under its cwd, and its unit runs there
    with the command's PATH; the next command, in another directory, finds neither."""
    runtime = Runtime(tmp_path)
    plan = runtime.compile("greet.akm", 'workflow "greet" {\n  step say {\n    shell "greet > ../said"\n  }\n}\n')
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "greet").write_text("#!/bin/sh\necho hello from the PATH\n")
    (tmp_path / "bin" / "greet").chmod(0o755)
    (tmp_path / "here").mkdir()
    env = {**os.environ, "AKM_STATE_DIR": "relative-state", "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    result = forkserver.run([*AKM_RUN, "run", plan], cwd=tmp_path / "here", env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "here" / "relative-state").is_dir()
    assert (tmp_path / "said").read_text() == "hello from the PATH\n"
    listed = forkserver.run([*AKM_RUN, "list", "--state-dir", "relative-state"], cwd=tmp_path, timeout=60)
    assert (listed.returncode, listed.stdout) == (0, "no runs\n"), listed.stderr
    assert str(tmp_path / "bin") not in os.environ["PATH"]


def test_a_missing_working_directory_is_refused_as_popen_refuses_it(spawn: str, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        forkserver.run([*AKM_RUN, "--version"], cwd=tmp_path / "missing", timeout=60)


def test_a_driver_leads_its_session_and_its_kill_reads_minus_the_signal(
    spawn: str, sleeper: tuple[Runtime, Path]
) -> None:
    runtime, plan = sleeper
    driver = runtime.driver(plan)
    assert os.getpgid(driver.pid) == driver.pid
    with pytest.raises(subprocess.TimeoutExpired):
        driver.wait(timeout=0.05)
    assert driver.poll() is None
    eventually(lambda: runtime.akm("list").stdout.count("active") == 1, "the run is published")
    os.killpg(driver.pid, signal.SIGKILL)
    runtime.killed(driver)
    assert driver.returncode == -signal.SIGKILL
    _kill_units(runtime)


def test_a_command_outside_a_session_is_no_group_leader(spawn: str, sleeper: tuple[Runtime, Path]) -> None:
    runtime, plan = sleeper
    follower = runtime.start("run", plan)
    try:
        assert os.getpgid(follower.pid) != follower.pid
    finally:
        follower.terminate()
        follower.communicate(timeout=60)
    assert follower.returncode not in (None, 0)
    _kill_units(runtime)


def test_unbuffered_output_reaches_its_file_as_it_is_written(spawn: str, sleeper: tuple[Runtime, Path]) -> None:
    """A worker's log is read while it runs (PYTHONUNBUFFERED, as the tests' workers have it): here a
    driver's, whose unit's stderr line it shows while the unit still sleeps."""
    runtime, plan = sleeper
    log = runtime.root / "driver.log"
    with log.open("w") as out:
        driver = forkserver.popen(
            [*AKM_RUN, "run", plan],
            cwd=runtime.root,
            env=runtime.env(PYTHONUNBUFFERED="1"),
            text=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    eventually(lambda: "nap" in log.read_text(), "the driver's progress line")
    assert driver.poll() is None
    os.killpg(driver.pid, signal.SIGKILL)
    assert driver.wait(timeout=60) == -signal.SIGKILL
    _kill_units(runtime)


def test_arguments_that_are_not_utf8_arrive_as_given(spawn: str, tmp_path: Path) -> None:
    name = os.fsdecode(b"plan-\xff.json")
    (tmp_path / name).write_text("{}")
    result = forkserver.run([*AKM_RUN, "verify", tmp_path / name], timeout=60)
    assert result.returncode == 2, result.stderr
    assert "plan-\\xff" in result.stderr, result.stderr  # the name as given, its odd byte escaped


def test_any_other_command_is_started_as_popen_starts_it() -> None:
    process = forkserver.popen(
        [sys.executable, "-c", "import os; print(os.getppid())"], text=True, stdout=subprocess.PIPE
    )
    out, _ = process.communicate(timeout=60)
    assert getattr(process, "_replies", None) is None and int(out) == os.getpid()


def _kill_units(runtime: Runtime) -> None:
    """The sleeping unit a killed driver leaves (it leads a session of its own)."""
    for pid in unit_processes(under=runtime.root):
        os.kill(pid, signal.SIGKILL)


def test_an_environment_larger_than_one_read_arrives_whole(spawn: str, tmp_path: Path) -> None:
    bulk = {f"BULK_{i}": "x" * 100_000 for i in range(4)}  # each under exec's limit for one string
    env = {**os.environ, "AKM_STATE_DIR": str(tmp_path / "state"), **bulk}
    result = forkserver.run([*AKM_RUN, "list"], env=env, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, "no runs\n", "")
