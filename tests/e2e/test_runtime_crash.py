"""Crashes and interruptions: the process executing the units (the driver on SQLite, a worker on
PostgreSQL) has its process group SIGKILLed at marked points (by the unit itself, right after its side
effect and before it can be journaled); then `akm-run run RUN` resumes (on PostgreSQL, with a new
worker that takes the dead one's work over). Every case must converge to the same result without
re-running a completed unit."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from akm_run.identity import unit_id
from helpers import Runtime, eventually, source, unit_processes

# Side effect first (a line in `log`), then, once, kill the driver's process group and the unit itself.
CRASH = source("""
    #!/bin/sh
    echo "$AKM_UNIT_ID $AKM_DISPATCH_ID" >> log
    if [ "$AKM_UNIT_ID" = "$(cat crash-at 2>/dev/null)" ] && [ ! -e crashed ]; then
      touch crashed
      while [ ! -s driver.pid ]; do sleep 0.01; done
      kill -9 -"$(cat driver.pid)"
      kill -9 $$
    fi
    exec python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps({"item": c.get("item"), "fb": len(c.get("gateFeedback") or "")}))' < "$AKM_CONTEXT"
""")


def _crash_run(runtime: Runtime, plan: Path, crash_at: str) -> str:
    """Run `plan` and let the unit `crash_at` kill the process executing the units; returns the run id."""
    (runtime.root / "crash-at").write_text(crash_at)
    runtime.killed(runtime.driver(plan))
    [run] = runtime.store().runs()
    assert run.status == "active"
    return run.id


def _log(runtime: Runtime) -> Counter[str]:
    return Counter(line.split()[0] for line in (runtime.root / "log").read_text().splitlines())


def _completed_units(runtime: Runtime, run_id: str) -> list[str]:
    rows = runtime.sql("SELECT unit_id FROM units WHERE run_id = ? AND status = 'completed' ORDER BY unit_id", run_id)
    return [r[0] for r in rows]


def _resume(runtime: Runtime, run_id: str) -> None:
    runtime.replace_driver()
    code, document = runtime.run_json(run_id)
    assert code == 0, document


def test_crash_after_a_side_effect_before_its_journal_write(runtime: Runtime) -> None:
    runtime.write({"scripts/crash.sh": CRASH})
    steps = "".join(f'  step {s} {{\n    script "scripts/crash.sh"\n  }}\n' for s in ("a", "b", "c"))
    plan = runtime.compile("wf.akm", f'workflow "spine" {{\n{steps}}}\n')
    run_id = _crash_run(runtime, plan, "b:solo")
    if runtime.sqlite:  # the driver's files in the state directory
        assert [p.name for p in (runtime.state / "scratch").iterdir()] != []  # left behind by the crash
    before = _completed_units(runtime, run_id)
    assert before == ["a:solo"]
    _resume(runtime, run_id)
    log = _log(runtime)
    assert log == {"a:solo": 1, "b:solo": 2, "c:solo": 1}  # b's side effect repeats: at-least-once
    attempts = runtime.store().attempts(run_id, "b:solo")
    assert [a.status for a in attempts] == ["interrupted", "completed"]
    assert attempts[0].dispatch_id == attempts[1].dispatch_id  # a crash reclaim keeps the dispatch id
    dispatches = [line.split()[1] for line in (runtime.root / "log").read_text().splitlines() if line.startswith("b:")]
    assert len(set(dispatches)) == 1
    if runtime.sqlite:
        assert not (runtime.state / "locks" / f"{run_id}.lock").exists()
        assert not list((runtime.state / "scratch").iterdir())  # the dead driver's unit files are gone too


def test_a_crash_during_a_retry_backoff_retries_on_resume_under_the_retrys_dispatch_id(runtime: Runtime) -> None:
    src = source("""
        workflow "flaky" {
          step flaky {
            shell "echo \\"$AKM_DISPATCH_ID\\" >> log; test -e failed || { touch failed; exit 1; }; echo done"
            retry = { max = 2, on = [exit], backoff = 1m }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    driver = runtime.driver(plan)

    def failed_once() -> str | None:
        runs = [] if runtime.untouched() else runtime.store().runs()
        attempts = runtime.store().attempts(runs[0].id, "flaky:solo") if runs else []
        return runs[0].id if [a.status for a in attempts] == ["failed"] else None

    run_id = eventually(failed_once, "the first attempt to fail")  # the drive now waits out the backoff
    runtime.kill_driver()
    runtime.killed(driver)
    _resume(runtime, run_id)  # no backoff left to wait: the retry runs at once
    attempts = runtime.store().attempts(run_id, "flaky:solo")
    assert [a.status for a in attempts] == ["failed", "completed"]
    assert attempts[0].dispatch_id != attempts[1].dispatch_id  # a retry, not a crash reclaim
    assert (runtime.root / "log").read_text().split() == [a.dispatch_id for a in attempts]
    flaky_step = runtime.store().step(run_id, "flaky")
    assert flaky_step is not None and flaky_step.output == "done"


def test_crash_in_the_middle_of_a_map(runtime: Runtime) -> None:
    runtime.write({"scripts/crash.sh": CRASH})
    items = [1, 2, 3, 4, 5, 6]
    src = source("""
        workflow "fan" {
          params { items: list[int] = [1, 2, 3, 4, 5, 6] }
          step fan {
            map params.items {
              concurrency = 2
              script "scripts/crash.sh"
            }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    run_id = _crash_run(runtime, plan, unit_id("fan", 4, mapped=True))
    before = _completed_units(runtime, run_id)
    assert before, "some units completed before the crash"
    _resume(runtime, run_id)
    log = _log(runtime)
    for unit in before:
        assert log[unit] == 1, f"{unit} completed before the crash and must not run again"
    fan_step = runtime.store().step(run_id, "fan")
    assert fan_step is not None
    output = fan_step.output
    assert [o["item"] for o in output] == items


def test_crash_during_a_gate_loop(runtime: Runtime) -> None:
    runtime.write(
        {
            "scripts/crash.sh": CRASH,
            "scripts/check.sh": '#!/bin/sh\npython3 -c \'import json,os,sys; c=json.load(open(os.environ["AKM_CONTEXT"])); sys.exit(0) if c["output"]["fb"] else (print("again"), sys.exit(1))\'\n',
        }
    )
    src = source("""
        workflow "gated" {
          step draft {
            script "scripts/crash.sh"
            gate {
              check script "scripts/check.sh"
              max_loops = 2
            }
          }
          step after {
            script "scripts/crash.sh"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    run_id = _crash_run(runtime, plan, "draft:solo~l1")
    before = _completed_units(runtime, run_id)
    assert before == ["draft:solo"]  # the first check rejected it; the loop's second work unit crashed
    unit_row = runtime.store().unit(run_id, "draft:gate")
    assert unit_row is not None and unit_row.status == "failed"
    _resume(runtime, run_id)
    log = _log(runtime)
    assert log["draft:solo"] == 1 and log["draft:solo~l1"] == 2 and log["after:solo"] == 1
    draft_step = runtime.store().step(run_id, "draft")
    assert draft_step is not None and draft_step.output == {"item": None, "fb": len("again")}


def test_crash_during_a_gate_check(runtime: Runtime) -> None:
    runtime.write({"scripts/crash.sh": CRASH})
    src = source("""
        workflow "gated" {
          step draft {
            script "scripts/crash.sh"
            gate {
              check script "scripts/crash.sh"
              max_loops = 1
            }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    run_id = _crash_run(runtime, plan, "draft:gate")  # the check crashes the driver after its side effect
    _resume(runtime, run_id)
    assert _log(runtime) == {"draft:solo": 1, "draft:gate": 2}  # the work is reused, the check runs again
    assert [a.status for a in runtime.store().attempts(run_id, "draft:gate")] == ["interrupted", "completed"]
    draft_step = runtime.store().step(run_id, "draft")
    assert draft_step is not None and draft_step.output == {"item": None, "fb": 0}


def _start(runtime: Runtime, *args: str) -> subprocess.Popen[str]:
    return runtime.start("run", *args, "--format", "json")


def _wait_for(path: Path, seconds: float = 30) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_aborts_running_units_and_leaves_a_resumable_run(runtime: Runtime, signum: int) -> None:
    """SIGINT or SIGTERM to `run` aborts the drive wherever it runs: on SQLite `run` is the driver; on
    PostgreSQL it follows a drive on a worker, which it cancels, and the worker stops the unit."""
    src = source("""
        workflow "slow" {
          step first {
            shell "echo first"
          }
          step slow {
            shell "touch started; if [ -e fast ]; then echo done; else sleep 30; fi"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    driver = _start(runtime, str(plan))
    _wait_for(runtime.root / "started")
    driver.send_signal(signum)
    out, _ = driver.communicate(timeout=30)
    assert driver.returncode == 130
    document = json.loads(out)
    assert document["status"] == "active" and document["error"]["code"] == "ABORTED"
    run_id = document["runId"]
    [stopped] = runtime.store().attempts(run_id, "slow:solo")
    assert (stopped.status, stopped.message) == ("aborted", "the drive was aborted; stopped by SIGTERM")
    assert document["error"]["message"].startswith("interrupted by a signal; the run is resumable: akm-run run ")
    if runtime.sqlite:
        assert not (runtime.state / "locks" / f"{run_id}.lock").exists()
    else:
        assert not runtime.store().driven(run_id)  # the drive ended: nothing holds the run
    (runtime.root / "fast").touch()
    _resume(runtime, run_id)
    attempts = runtime.store().attempts(run_id, "slow:solo")
    assert [a.status for a in attempts] == ["aborted", "completed"]
    assert attempts[0].dispatch_id == attempts[1].dispatch_id
    assert len(runtime.store().attempts(run_id, "first:solo")) == 1


def test_the_run_timeout_interrupts_and_resume_finishes(runtime: Runtime) -> None:
    src = source("""
        workflow "slow" {
          step slow {
            shell "if [ -e fast ]; then echo done; else sleep 30; fi"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan, "--timeout", "1s")
    assert code == 130 and "timeout" in document["error"]["message"]
    assert unit_processes(document["runId"]) == []  # stopped before the drive ended, wherever it ran
    [aborted] = runtime.store().attempts(document["runId"], "slow:solo")
    assert (aborted.status, aborted.message) == ("aborted", "the drive was aborted; stopped by SIGTERM")
    (runtime.root / "fast").touch()
    _resume(runtime, document["runId"])
    attempts = runtime.store().attempts(document["runId"], "slow:solo")
    assert [a.status for a in attempts] == ["aborted", "completed"]
    slow_step = runtime.store().step(document["runId"], "slow")
    assert slow_step is not None and slow_step.output == "done"  # the unit was stopped, and ran again


def test_replaying_a_completed_run_dispatches_nothing(runtime: Runtime) -> None:
    runtime.write({"scripts/crash.sh": CRASH})
    src = source("""
        workflow "w" {
          step a {
            script "scripts/crash.sh"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0
    again = runtime.run_json(document["runId"])
    assert again == (0, document)
    assert _log(runtime) == {"a:solo": 1}
    assert runtime.store().count_attempts(document["runId"]) == 1
