"""Recovery on the worker pool where it has no SQLite counterpart: DBOS recovering a workflow too many
times, and recovered workflows finding the journal changed meanwhile. Real `akm-run worker` processes
on a private PostgreSQL server; a unit kills its worker (`driver.pid`) as a host dies."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import PATIENCE_S, Runtime, Worker, source

# Side effect first (a line in `log`), then, unless `calm` exists, kill the worker's process group.
KILLER = source("""
    #!/bin/sh
    echo "$AKM_UNIT_ID $AKM_ATTEMPT" >> log
    if [ ! -e calm ]; then
      while [ ! -s driver.pid ]; do sleep 0.01; done
      kill -9 -"$(cat driver.pid)"
      kill -9 $$
    fi
    echo '"done"'
""")
PLAN = 'workflow "w" {\n  step a {\n    script "scripts/killer.sh"\n  }\n}\n'


def _plan(runtime: Runtime, src: str = PLAN, killer: str = KILLER) -> Path:
    """`src` compiled, with `killer` as scripts/killer.sh (frozen into the plan)."""
    runtime.write({"scripts/killer.sh": killer})
    return runtime.compile("wf.akm", src)


def _log(runtime: Runtime) -> list[str]:
    return (runtime.root / "log").read_text().splitlines()


def test_a_drive_the_pool_gives_up_on_leaves_the_run_active_resumable_and_explained(pooled: Runtime) -> None:
    runtime = pooled
    follower = runtime.driver(_plan(runtime), "--format", "json")
    runtime.killed(follower)  # the unit killed the worker that drove the run and ran it
    [run] = runtime.store().runs()
    # As if DBOS had recovered the drive a hundred times, the unit killing its worker every time
    # (DBOS dead-letters a workflow dispatched more than its 100 recovery attempts allow).
    runtime.sql("UPDATE dbos.workflow_status SET recovery_attempts = 101 WHERE workflow_uuid = ?", run.id)
    runtime.replace_driver()  # takes the dead worker over; DBOS gives the drive up instead of running it
    out, err = follower.communicate(timeout=PATIENCE_S)
    assert follower.returncode == 130, out + err  # as an interrupted drive: the run is resumable
    document = json.loads(out)
    assert document["status"] == "active" and document["error"]["code"] == "ABORTED", document
    message = document["error"]["message"]
    assert "gave up" in message and "a:solo (1 time)" in message and f"`akm-run run {run.id}`" in message
    assert "internal error" not in err + message and "Traceback" not in err
    run_row = runtime.store().run(run.id)
    assert run_row is not None and run_row.status == "active"
    (runtime.root / "calm").touch()
    code, document = runtime.run_json(run.id)  # a new drive: the dead worker's attempt is interrupted
    assert code == 0, document
    attempts = runtime.store().attempts(run.id, "a:solo")
    assert [a.status for a in attempts] == ["interrupted", "completed"]
    assert _log(runtime) == ["a:solo 1", "a:solo 2"]


def test_a_recovered_unit_of_a_run_abandoned_meanwhile_does_not_run(pooled: Runtime) -> None:
    runtime = pooled
    follower = runtime.driver(_plan(runtime), "--format", "json")
    runtime.killed(follower)
    [run] = runtime.store().runs()
    assert runtime.akm("abandon", run.id).returncode == 0  # the dead worker's lock went with its connection
    (runtime.root / "calm").touch()  # were the unit run again, it would complete
    runtime.replace_driver()  # recovers the drive and the unit's workflow
    out, _ = follower.communicate(timeout=PATIENCE_S)
    assert follower.returncode == 1 and json.loads(out)["status"] == "failed", out
    assert _log(runtime) == ["a:solo 1"]
    unit_row = runtime.store().unit(run.id, "a:solo")
    assert unit_row is not None and unit_row.status != "completed"


def _drive_with(runtime: Runtime, worker: Worker) -> None:
    """Make `worker` the one a unit kills (`driver.pid`)."""
    worker.driver = True
    (runtime.root / "driver.pid").write_text(str(worker.process.pid))


def test_a_drive_taken_over_twice_in_a_row_finishes_with_each_interruption_recorded(pooled: Runtime) -> None:
    runtime = pooled
    plan = _plan(runtime, killer=KILLER.replace("[ ! -e calm ]", '[ "$AKM_ATTEMPT" -le 2 ]'))
    follower = runtime.driver(plan, "--format", "json")
    runtime.killed(follower)  # attempt 1 killed worker-1
    _drive_with(runtime, runtime.start_worker())  # takes the drive over; attempt 2 kills it too
    runtime.killed(follower)
    runtime.replace_driver()  # the second takeover in a row
    out, err = follower.communicate(timeout=PATIENCE_S)
    assert follower.returncode == 0, out + err
    [run] = runtime.store().runs()
    attempts = runtime.store().attempts(run.id, "a:solo")
    assert [a.status for a in attempts] == ["interrupted", "interrupted", "completed"]
    assert len({a.dispatch_id for a in attempts}) == 1  # crash reclaims, not retries
    assert _log(runtime) == ["a:solo 1", "a:solo 2", "a:solo 3"]


def test_an_attempt_whose_workflow_is_gone_is_interrupted_and_a_recorded_completion_never_runs_again(
    pooled: Runtime,
) -> None:
    runtime = pooled
    runtime.write({"scripts/once.sh": '#!/bin/sh\necho "$AKM_UNIT_ID $AKM_ATTEMPT" >> log\necho 1\n'})
    src = 'workflow "w" {\n  step one {\n    script "scripts/once.sh"\n  }\n  step a {\n    script "scripts/killer.sh"\n  }\n}\n'
    follower = runtime.driver(_plan(runtime, src), "--format", "json")
    runtime.killed(follower)
    [run] = runtime.store().runs()
    assert [a.status for a in runtime.store().attempts(run.id, "one:solo")] == ["completed"]
    # DBOS forgets every attempt's workflow (an operator's clean-up, a restored database): only the
    # journal knows what ran.
    runtime.sql("DELETE FROM dbos.workflow_status WHERE name = 'akm-run-unit'")
    (runtime.root / "calm").touch()
    runtime.replace_driver()
    out, err = follower.communicate(timeout=PATIENCE_S)
    assert follower.returncode == 0, out + err
    assert [a.status for a in runtime.store().attempts(run.id, "a:solo")] == ["interrupted", "completed"]
    assert _log(runtime) == ["one:solo 1", "a:solo 1", "a:solo 2"]


def test_a_steps_duration_is_its_units_own_time_not_the_wait_for_a_takeover(pooled: Runtime) -> None:
    """The first attempt kills its worker; the step then waits for a live worker to take the dead one
    over (--takeover-after) before its unit runs again. The duration `run` shows for the step is the
    time its attempts that ended by themselves ran (docs/scale-out.md), not that wait."""
    runtime = pooled
    plan = _plan(runtime, killer=KILLER.replace("[ ! -e calm ]", '[ "$AKM_ATTEMPT" -le 1 ]'))
    follower = runtime.driver(plan)
    runtime.killed(follower)
    runtime.replace_driver()
    out, err = follower.communicate(timeout=PATIENCE_S)
    assert follower.returncode == 0, out + err
    [run] = runtime.store().runs()
    events = runtime.sql(
        "SELECT kind, (data_json::json->>'attempt')::int, at FROM events WHERE run_id = ? AND kind LIKE 'unit.%'",
        run.id,
    )
    at = {(kind, attempt): float(when) for kind, attempt, when in events}
    ran = at[("unit.completed", 2)] - at[("unit.dispatched", 2)]
    waited = at[("unit.dispatched", 2)] - at[("unit.dispatched", 1)]
    assert ran < waited  # the takeover's wait is the longer: what the test tells apart
    [shown] = [line for line in err.splitlines() if line.startswith("step a completed")]
    assert shown == f"step a completed (took {ran:.3f}s)", err
