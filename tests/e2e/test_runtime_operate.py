"""Operating akm-run end to end (runtime-v2.md): any directory, remembered settings, untrusted unit
output, approvals and rejections, logs, prompt timeouts, unwritable state. Real `akm-run` processes
and a real state database; each test states a workflow and what an operator must see."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import pytest

from akm_run.plan import render_file
from akm_run.sqlitestore import SQLiteStore
from helpers import Runtime, eventually, source


def _wf(body: str, title: str = "t", head: str = "") -> str:
    return f'workflow "{title}" {{\n{head}{body}}}\n'


def _akm(*args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "akm_run", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


# -- 1. the unit contract holds from any directory ------------------------------------------------------


SCRIPTED = source("""
    workflow "t" {
      step show {
        script "scripts/show.sh"
      }
      step wait {
        approval "go on?"
      }
      step after {
        script "scripts/show.sh"
      }
    }
""")
SHOW = source("""
    #!/bin/sh
    printf '{"cwd": "%s", "context": "%s", "script": "%s"}' "$(pwd)" "$AKM_CONTEXT" "$0"
""")


@pytest.mark.sqlite_only
def test_relative_state_dir_with_another_workdir_gives_units_absolute_paths(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SCRIPTED, files={"scripts/show.sh": SHOW})
    (runtime.root / "units").mkdir()
    env = runtime.env()
    del env["AKM_STATE_DIR"]
    result = _akm("run", plan, "--workdir", "units", "--state-dir", "rel-state", cwd=runtime.root, env=env)
    assert result.returncode == 3, result.stderr
    run_id = result.stdout.split()[1]
    show_step = SQLiteStore(runtime.root / "rel-state").step(run_id, "show")
    assert show_step is not None
    shown = show_step.output
    assert shown["cwd"] == str((runtime.root / "units").resolve())
    assert os.path.isabs(shown["context"]) and os.path.isabs(shown["script"])
    assert Path(shown["context"]).parent.parent == (runtime.root / "rel-state" / "scratch").absolute()


@pytest.mark.sqlite_only
def test_a_run_started_in_one_directory_is_resumed_from_another(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SCRIPTED, files={"scripts/show.sh": SHOW})
    (runtime.root / "units").mkdir()
    elsewhere = runtime.root / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    env = runtime.env()
    del env["AKM_STATE_DIR"]
    started = _akm("run", plan, "--workdir", "units", "--state-dir", "st", cwd=runtime.root, env=env)
    assert started.returncode == 3, started.stderr
    run_id = started.stdout.split()[1]
    approved = _akm("approve", run_id, "wait", "--state-dir", "../../st", cwd=elsewhere, env=env)
    assert approved.returncode == 0, approved.stderr
    resumed = _akm("run", run_id, "--state-dir", "../../st", cwd=elsewhere, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after_step = SQLiteStore(runtime.root / "st").step(run_id, "after")
    assert after_step is not None
    after = after_step.output
    assert after["cwd"] == str((runtime.root / "units").resolve())  # the workdir the run was started with
    assert os.path.isabs(after["context"]) and os.path.isabs(after["script"])


def _printed_commands(text: str) -> list[list[str]]:
    """The `akm-run …` commands quoted in a message, in order, split as a shell would."""
    return [shlex.split(c) for c in re.findall(r"`(akm-run [^`]+)`", text)]


def _paste(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert command[0] == "akm-run"
    return _akm(*command[1:], cwd=cwd, env=env)


AGENT_TWICE = source("""
    workflow "t" {
      step first {
        agent "say hi"
      }
      step wait {
        approval "go on?"
      }
      step second {
        agent "say hi again"
      }
    }
""")


@pytest.mark.sqlite_only
def test_runs_remember_workdir_and_agent_and_every_hint_pastes_as_printed(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", AGENT_TWICE)
    (runtime.root / "work").mkdir()
    env = runtime.env()
    del env["AKM_STATE_DIR"]
    agent = 'printf \'"%s"\' "$(pwd)"'
    start = ("run", plan, "--state-dir", "custom", "--workdir", "work", "--agent-cmd", agent, "--format", "json")
    started = _akm(*start, cwd=runtime.root, env=env)
    assert started.returncode == 3, started.stderr
    document = json.loads(started.stdout)
    approve, then = _printed_commands(document["blocked"]["notes"])[::2][:2]
    state = str((runtime.root / "custom").absolute())
    assert approve[-2:] == ["--state-dir", state] and then[-2:] == ["--state-dir", state]
    elsewhere = runtime.root / "elsewhere"
    elsewhere.mkdir()
    assert _paste(approve, elsewhere, env).returncode == 0
    finished = _paste(then, elsewhere, env)  # no --workdir, no --agent-cmd: the run's own are used
    assert finished.returncode == 0, finished.stdout + finished.stderr
    store = SQLiteStore(runtime.root / "custom")
    second_step = store.step(document["runId"], "second")
    assert second_step is not None and second_step.output == str((runtime.root / "work").resolve())
    # an override on the command line wins over what the run remembers
    (runtime.root / "other").mkdir()
    again = _akm(*start, cwd=runtime.root, env=env)
    run_id = json.loads(again.stdout)["runId"]
    assert _akm("approve", run_id, "wait", "--state-dir", "custom", cwd=runtime.root, env=env).returncode == 0
    assert _akm("run", run_id, "--state-dir", "custom", "--workdir", "other", cwd=runtime.root, env=env).returncode == 0
    second_step = store.step(run_id, "second")
    assert second_step is not None and second_step.output == str((runtime.root / "other").resolve())


# -- 5. approvals: rejection, and blocked children name the command that clears them -------------------


REVIEWED = source("""
    workflow "t" {
      step signoff {
        approval "ship it?"
      }
      step decide {
        route steps.signoff.output.approved {
          true -> ship
          false -> stop
        }
      }
      step ship {
        shell "echo shipped"
      }
      step stop {
        shell "echo stopped"
      }
    }
""")


def test_a_rejected_approval_fails_its_step_with_approval_rejected(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", REVIEWED)
    code, document = runtime.run_json(plan)
    assert code == 3 and "--reject" in document["blocked"]["notes"]
    rejected = runtime.akm("approve", document["runId"], "signoff", "--reject", "--by", "kim", "--note", "not yet")
    assert rejected.returncode == 0, rejected.stderr
    code, result = runtime.run_json(document["runId"])
    assert code == 1 and result["failure"]["reason"] == "approval_rejected"
    assert result["failure"]["message"] == "rejected by kim: not yet"
    step = runtime.store().step(document["runId"], "signoff")
    assert (
        step is not None
        and step.status == "failed"
        and step.output == {"approved": False, "by": "kim", "note": "not yet"}
    )


def test_a_rejected_approval_with_on_error_continue_goes_on_with_approved_false(runtime: Runtime) -> None:
    plan = runtime.compile(
        "wf.akm", REVIEWED.replace('approval "ship it?"', 'approval "ship it?"\n    on_error = continue')
    )
    code, document = runtime.run_json(plan)
    assert code == 3
    assert runtime.akm("approve", document["runId"], "signoff", "--reject", "--by", "kim").returncode == 0
    code, result = runtime.run_json(document["runId"])
    assert code == 0, result
    steps = {s.step_id: s for s in runtime.store().steps(document["runId"])}
    assert steps["signoff"].output == {"approved": False, "by": "kim"}
    assert steps["stop"].status == "completed" and steps["ship"].status == "skipped"


CHILD_APPROVAL = source("""
    workflow "leaf" {
      params {
        n: int
      }
      step ok {
        approval "go?"
      }
      step done {
        shell "echo done"
      }
    }
""")
PARENT = source("""
    workflow "p" {
      step c {
        uses "workflows/leaf" {
          n = 5
        }
      }
      step after {
        shell "echo after"
      }
    }
""")


def test_following_the_printed_commands_in_order_completes_a_parent_whose_child_waits(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": CHILD_APPROVAL})
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", PARENT))
    assert code == 3
    commands = _printed_commands(document["blocked"]["notes"])
    assert [c[1] for c in commands] == ["approve", "resume", "run"]
    parent = document["runId"]
    # approving on the parent's composing step names the child's command instead
    misdirected = runtime.akm("approve", parent, "c")
    assert misdirected.returncode == 2 and " ".join(commands[0]) in misdirected.stderr
    for command in commands:
        result = _paste(command, runtime.root, runtime.env())
        assert result.returncode == 0, (command, result.stdout, result.stderr)
    run_row = runtime.store().run(parent)
    assert run_row is not None and run_row.status == "completed"
    assert runtime.akm("status", parent, "--format", "json").returncode == 0


# -- 11. a mistyped plan path ---------------------------------------------------------------------------


def test_a_mistyped_plan_path_with_params_says_the_file_does_not_exist(runtime: Runtime) -> None:
    for target in ("plans/wf.plan.jsno", "nothere.json", "release"):
        result = runtime.akm("run", target, "--param", "version=1")
        assert result.returncode == 2
        assert f"plan file {target} does not exist" in result.stderr and "params are fixed" not in result.stderr
    assert runtime.untouched()


# -- 3. unit output is untrusted input --------------------------------------------------------------------


def _strict(text: str) -> object:
    """Parse as standard JSON only (NaN, Infinity and duplicate keys are errors)."""

    def refuse(name: str) -> object:
        raise AssertionError(f"{name} is not standard JSON")

    return json.loads(text, parse_constant=refuse)


UNTRUSTED = {
    "deep": ('python3 -c \'print("["*100000+"]"*100000)\'', "nesting deeper than 64 levels"),
    "nan": ("printf NaN", "NaN is not JSON"),
    "infinity": ("printf '[1, -Infinity]'", "-Infinity is not JSON"),
    "duplicate": ("""printf '{"a": 1, "a": 2}'""", 'duplicate key "a"'),
    "huge": ("python3 -c 'print(\"9\"*5000)'", "(5000 digits) is outside ±(2^53 − 1)"),
    "past the limit": ("printf 9007199254740993", "integer 9007199254740993 is outside"),
    "overflow": ("printf 1e999", "number 1e999 is too large"),
}


def test_output_that_is_not_strict_json_is_output_invalid_and_never_crashes_the_driver(runtime: Runtime) -> None:
    body = "".join(
        f'  step s{i} {{\n    shell "{command.replace(chr(34), chr(92) + chr(34))}"\n    on_error = continue\n  }}\n'
        for i, (command, _) in enumerate(UNTRUSTED.values())
    )
    plan = runtime.compile("wf.akm", _wf(body + '  step after {\n    shell "echo fine"\n  }\n'))
    code, document = runtime.run_json(plan)
    assert code == 0, document
    steps = {s.step_id: s for s in runtime.store().steps(document["runId"])}
    for i, (name, (_, why)) in enumerate(UNTRUSTED.items()):
        step = steps[f"s{i}"]
        assert step.status == "failed" and step.failure_reason == "output_invalid", name
        assert "not strict JSON" in (step.failure_message or "") and why in (step.failure_message or ""), name
    status = runtime.akm("status", document["runId"], "--format", "json")
    assert status.returncode == 0 and _strict(status.stdout)
    assert _strict(runtime.akm("logs", document["runId"], "--format", "json").stdout)


@pytest.mark.before_store
def test_params_that_are_not_strict_json_are_bad_params(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          params {
            x: number = 1
            v: any = 1
          }
          step s {
            shell "true"
            inputs = [params.x, params.v]
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    for pair in ("x=NaN", "x=Infinity", "x=1e999", "v=[NaN]", 'v={"a": 1, "a": 2}', "x=" + "9" * 5000):
        result = runtime.akm("run", plan, "--param", pair)
        assert result.returncode == 2 and "bad params" in result.stderr and "Traceback" not in result.stderr, pair
    assert runtime.untouched()


def test_an_internal_error_during_a_drive_exits_70_and_leaves_the_run_resumable(runtime: Runtime) -> None:
    # The first unit replaces a directory of the runtime's with a file, once: on SQLite the state
    # directory's `scratch` (the next unit's context cannot be written; a drive's own directory in it
    # the runtime makes again), on the pool its own attempt's (the worker cannot clean it up, and the
    # attempt's workflow ends in an error). Either way the drive stops with an internal error, which no
    # unit should be able to cause, and `run RUN` finishes the run.
    src = source("""
        workflow "t" {
          step break {
            shell "test -e broke && exit 0; touch broke; d=$(dirname $AKM_CONTEXT); p=$(dirname $d); [ $(basename $p) = scratch ] && d=$p; rm -rf $d; touch $d"
          }
          step next {
            shell "echo next"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    result = runtime.akm("run", plan, "--format", "json")
    assert result.returncode == 70, result.stdout + result.stderr
    assert "internal error" in result.stderr and "Traceback" not in result.stderr
    run_id = runtime.store().runs()[0].id
    assert f"`akm-run run {run_id}`" in result.stderr
    store = runtime.store()
    run_row = store.run(run_id)
    assert run_row is not None and run_row.status == "active"
    assert {a.status for u in ("next",) for a in store.attempts(run_id, u)} <= {"interrupted"}
    next_step = store.step(run_id, "next")
    assert next_step is not None and next_step.status == "pending"  # nothing shows running once the drive ended
    again = runtime.akm("run", run_id)  # `break` completed and is reused; `next` now runs
    assert again.returncode == 0, again.stderr
    next_step = store.step(run_id, "next")
    assert next_step is not None and next_step.output == "next"
    if runtime.sqlite:  # the drive's scratch directory is in the state directory
        assert list((runtime.state / "scratch").iterdir()) == []  # what the sabotage left is cleared


# -- 6. nothing shows running when nothing runs --------------------------------------------------------------


def test_no_step_shows_running_after_an_invalid_output_or_an_abandon(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          outputs {
            n: int = steps.last.output
          }
          step first {
            shell "echo 1"
          }
          step last {
            shell "echo not-a-number"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 1 and document["error"]["code"] == "WORKFLOW_OUTPUT_INVALID"
    status = json.loads(runtime.akm("status", document["runId"], "--format", "json").stdout)
    assert "running" not in {s["status"] for s in status["steps"]}, status["steps"]
    assert "→" not in runtime.akm("status", document["runId"]).stdout.split("steps:")[1]
    assert runtime.akm("abandon", document["runId"]).returncode == 0
    status = json.loads(runtime.akm("status", document["runId"], "--format", "json").stdout)
    assert status["run"]["status"] == "failed" and "running" not in {s["status"] for s in status["steps"]}


def _driver_with_a_unit_running(runtime: Runtime, plan: Path, unit: str) -> tuple[subprocess.Popen[str], str]:
    """Start `akm-run run PLAN` (its units' process leading its own session) and wait until `unit`'s
    process is journaled."""

    def started() -> str | None:
        runs = runtime.store().runs() if not runtime.untouched() else []
        return runs[0].id if runs and any(a.pid for a in runtime.store().attempts(runs[0].id, unit)) else None

    driver = runtime.driver(plan)
    return driver, eventually(started, f"{unit} to start")


def test_a_killed_driver_leaves_no_step_shown_running(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step slow {
            shell "test -f done || { touch done; sleep 30; }"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    driver, run_id = _driver_with_a_unit_running(runtime, plan, "slow:solo")
    runtime.kill_driver()
    runtime.killed(driver)
    status = json.loads(runtime.akm("status", run_id, "--format", "json").stdout)
    [slow] = status["steps"]
    assert slow["status"] == "pending" and f"`akm-run run {run_id}`" in slow["notes"]
    assert "→" not in runtime.akm("status", run_id).stdout.split("steps:")[1]
    runtime.replace_driver()
    assert runtime.akm("run", run_id).returncode == 0  # reclaims the attempt and stops the leftover unit


# -- 9. logs, status of the latest run, progress without a terminal ------------------------------------------


LOGGED = source(r"""
    workflow "t" {
      params {
        names: list[string] = ["a", "b"]
      }
      step greet {
        map params.names {
          shell "echo oops-$AKM_ATTEMPT >&2; test $AKM_ATTEMPT = 2 && printf '\"hi\"' || exit 3"
        }
        retry = { max = 1, on = [exit] }
      }
      step tell {
        shell "echo the token is $TOKEN >&2; echo $TOKEN"
        env { TOKEN = secret("LOG_TOKEN") }
      }
    }
""")


def test_logs_show_every_attempt_with_output_stderr_and_timing_redacted(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", LOGGED)
    code, document = runtime.run_json(plan, env=runtime.unit_env(LOG_TOKEN="s3cr3t-value"))
    assert code == 0, document
    run_id = document["runId"]
    logs = json.loads(runtime.akm("logs", run_id, "--format", "json").stdout)
    greet = [u for u in logs["units"] if u["stepId"] == "greet"]
    assert [u["itemIndex"] for u in greet] == [0, 1]
    first = greet[0]["attempts"]
    assert [(a["attempt"], a["status"], a.get("reason"), a.get("exitCode")) for a in first] == [
        (1, "failed", "exit", 3),
        (2, "completed", None, None),
    ]
    assert first[0]["stderrTail"] == "oops-1\n" and first[1]["output"] == "hi"
    assert all(a["durationMs"] >= 0 and a["startedAt"].endswith("Z") for a in first)
    tell = next(u for u in logs["units"] if u["stepId"] == "tell")["attempts"][0]
    assert "s3cr3t-value" not in json.dumps(logs) and tell["output"] == "***"
    assert tell["stderrTail"] == "the token is ***\n"
    one = json.loads(runtime.akm("logs", run_id, "greet", "--unit", "1", "--attempt", "2", "--format", "json").stdout)
    assert [(u["itemIndex"], [a["attempt"] for a in u["attempts"]]) for u in one["units"]] == [(1, [2])]
    text = runtime.akm("logs", run_id, "greet").stdout
    assert "attempt 1  failed  exit  exit 3" in text and "| oops-1" in text and 'stdout: "hi"' in text
    assert runtime.akm("logs", run_id, "nope").returncode == 2


def test_status_and_logs_without_a_run_show_the_latest_top_level_run(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "echo one"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    runtime.run_json(plan)
    _, second = runtime.run_json(plan)
    status = json.loads(runtime.akm("status", "--format", "json").stdout)
    assert status["run"]["id"] == second["runId"]
    assert json.loads(runtime.akm("logs", "--format", "json").stdout)["runId"] == second["runId"]


def test_without_a_terminal_each_step_start_and_end_is_one_plain_line_on_stderr(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "echo one"
          }
          step b {
            shell "exit 2"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    result = runtime.akm("run", plan, env=runtime.env(NO_COLOR="1"))
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "step a started",
        "step a completed",
        "step b started",
        "step b failed",
    ]
    assert all("took" in line for line in lines if not line.endswith("started"))
    assert "\033" not in result.stderr and "\r" not in result.stderr


# -- 10. unwritable or vanished state --------------------------------------------------------------------------


class _User(TypedDict, total=False):
    """subprocess.run's arguments for the user a process runs as."""

    user: int
    group: int


def _as_another_user() -> _User:
    """Root ignores permission bits: the read-only checks run as `nobody` then."""
    return {"user": 65534, "group": 65534} if os.geteuid() == 0 else {}


@pytest.mark.sqlite_only
def test_a_read_only_state_dir_refuses_runs_and_still_reads(runtime: Runtime, tmp_path: Path) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "echo one"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0
    shared = Path(tempfile.mkdtemp(prefix="akm-ro-"))
    try:
        shared.chmod(0o755)
        shutil.copytree(runtime.state, shared / "state")
        shutil.copy(plan, shared / "wf.plan.json")
        for path in [shared / "state", *(shared / "state").rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        (shared / "state").chmod(0o555)
        env = {"PATH": os.environ["PATH"], "HOME": str(shared), "AKM_STATE_DIR": str(shared / "state")}

        def as_reader(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "akm_run", *args],
                cwd=shared,
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
                **_as_another_user(),
            )

        before = (shared / "state" / "state.db").read_bytes()
        refused = as_reader("run", "wf.plan.json")
        assert refused.returncode == 5 and "cannot be written" in refused.stderr, refused.stderr
        assert "nothing was published" in refused.stderr and "Traceback" not in refused.stderr
        again = as_reader("run", document["runId"])
        assert again.returncode == 5 and "cannot be written" in again.stderr, again.stderr
        assert (shared / "state" / "state.db").read_bytes() == before
        status = as_reader("status", document["runId"], "--format", "json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["run"]["status"] == "completed"
        listed = as_reader("list", "--format", "json")
        assert [r["id"] for r in json.loads(listed.stdout)["runs"]] == [document["runId"]]
        logs = as_reader("logs", "--format", "json")
        assert logs.returncode == 0 and json.loads(logs.stdout)["units"][0]["attempts"][0]["output"] == "one"
    finally:
        for path in [shared, *shared.rglob("*")]:
            path.chmod(stat.S_IRWXU)
        shutil.rmtree(shared)


@pytest.mark.sqlite_only
def test_a_unit_that_deletes_the_state_dir_fails_the_drive_with_exit_70(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step wipe {
            shell "rm -rf $STATE"
            env { STATE = passthrough }
          }
          step next {
            shell "echo next"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    result = runtime.akm("run", plan, env=runtime.env(STATE=str(runtime.state)))
    assert result.returncode == 70, result.stdout + result.stderr
    assert "was removed while run" in result.stderr and "Traceback" not in result.stderr


# -- 7. prompt timeouts: the driver reaps its own child -------------------------------------------------------


def test_a_unit_that_stops_on_sigterm_is_not_waited_on_for_the_grace_period(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step polite {
            shell "sleep 30"
            timeout = 1s
            on_error = continue
          }
          step stubborn {
            shell "trap '' TERM; sleep 30"
            timeout = 1s
            on_error = continue
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    steps = {s.step_id: s for s in runtime.store().steps(document["runId"])}
    assert steps["polite"].failure_reason == "timeout"
    # a leader that exited on SIGTERM is reaped at once, so nothing is left for SIGKILL
    assert (steps["polite"].failure_message or "").endswith("exceeded its timeout of 1000 ms; stopped by SIGTERM")
    assert (steps["stubborn"].failure_message or "").endswith("killed by SIGKILL after the 1 s grace period")


def test_an_aborted_drive_stops_its_units_and_stays_resumable(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step slow {
            shell "sleep 30"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    driver, run_id = _driver_with_a_unit_running(runtime, plan, "slow:solo")
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(timeout=60) == 130
    attempt = runtime.store().attempts(run_id, "slow:solo")[0]
    assert attempt.status == "aborted" and attempt.message == "the drive was aborted; stopped by SIGTERM"
    run_row = runtime.store().run(run_id)
    assert run_row is not None and run_row.status == "active"


# -- 4. verification covers what the runtime relies on -------------------------------------------------------


def _tampered(plan_file: Path, change: Callable[[dict[str, Any]], object]) -> Path:
    """The plan with `change(plan)` applied and its hash recomputed: only verification can refuse it."""
    plan = json.loads(plan_file.read_text())["plan"]
    change(plan)
    out = plan_file.with_name("tampered.plan.json")
    out.write_text(render_file(plan))
    return out


SCHEMA_CASES = {
    "self reference": (lambda p: p["params"]["n"].update(schema={"$ref": "#"}), "plan.params.n.schema", "loops back"),
    "reference outside": (
        lambda p: p["params"]["n"].update(schema={"$ref": "https://example.invalid/s"}),
        "plan.params.n.schema.$ref",
        "does not point inside",
    ),
    "dangling reference": (
        lambda p: p["steps"][0].update(outputSchema={"$ref": "#/$defs/none"}),
        "plan.steps[0].outputSchema.$ref",
        "does not name a schema",
    ),
    "reference cycle": (
        lambda p: p["params"]["n"].update(
            schema={"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}
        ),
        "plan.params.n.schema",
        "loops back",
    ),
    "not a schema": (
        lambda p: p["params"]["n"].update(schema={"type": "strin"}),
        "plan.params.n.schema",
        "invalid JSON Schema",
    ),
    "default that does not fit": (
        lambda p: p["params"]["n"].update(default="x"),
        "plan.params.n.default",
        "does not fit",
    ),
}


@pytest.mark.before_store
def test_verify_refuses_schemas_the_runtime_could_not_use(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          params {
            n: int = 1
          }
          step s {
            shell "echo 1"
            inputs = [params.n]
            output: int
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    for name, (change, path, why) in SCHEMA_CASES.items():
        tampered = _tampered(plan, change)
        verified = runtime.akm("verify", tampered)
        assert verified.returncode == 4 and path in verified.stderr and why in verified.stderr, (name, verified.stderr)
        ran = runtime.akm("run", tampered)
        assert ran.returncode == 4 and "Traceback" not in ran.stderr, name
    assert runtime.untouched()


@pytest.mark.before_store
def test_a_number_with_thousands_of_digits_in_a_plan_is_a_refusal(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step s {
            shell "true"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    text = plan.read_text()
    huge = plan.with_name("huge.plan.json")
    huge.write_text(text.replace('"concurrency": ', '"concurrency": ' + "9" * 5000 + ', "x": ', 1))
    for verb in ("verify", "run"):
        result = runtime.akm(verb, huge)
        assert result.returncode == 4 and "(5000 digits) is outside" in result.stderr, result.stderr
