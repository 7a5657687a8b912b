"""Recovery on the worker pool where it has no SQLite counterpart: DBOS recovering a workflow too many
times, and recovered workflows finding the journal changed meanwhile. Real `akm-run worker` processes
on a private PostgreSQL server; a unit kills its worker (`driver.pid`) as a host dies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import PATIENCE_S, Runtime, source

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


@pytest.fixture
def pooled(database_url: str, tmp_path: Path) -> Iterator[Runtime]:
    """A Runtime on the PostgreSQL store whose workers the test starts (`runtime.driver`)."""
    runtime = Runtime(tmp_path, database_url)
    runtime.write({"scripts/killer.sh": KILLER})
    yield runtime
    problems = runtime.close()
    assert not problems, "\n".join([*problems, *(w.output() for w in runtime.workers)])


def _log(runtime: Runtime) -> list[str]:
    return (runtime.root / "log").read_text().splitlines()


def test_a_drive_the_pool_gives_up_on_leaves_the_run_active_resumable_and_explained(pooled: Runtime) -> None:
    runtime = pooled
    follower = runtime.driver(runtime.compile("wf.akm", PLAN), "--format", "json")
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
    assert runtime.store().run(run.id).status == "active"
    (runtime.root / "calm").touch()
    code, document = runtime.run_json(run.id)  # a new drive: the dead worker's attempt is interrupted
    assert code == 0, document
    attempts = runtime.store().attempts(run.id, "a:solo")
    assert [a.status for a in attempts] == ["interrupted", "completed"]
    assert _log(runtime) == ["a:solo 1", "a:solo 2"]


def test_a_recovered_unit_of_a_run_abandoned_meanwhile_does_not_run(pooled: Runtime) -> None:
    runtime = pooled
    follower = runtime.driver(runtime.compile("wf.akm", PLAN), "--format", "json")
    runtime.killed(follower)
    [run] = runtime.store().runs()
    assert runtime.akm("abandon", run.id).returncode == 0  # the dead worker's lock went with its connection
    (runtime.root / "calm").touch()  # were the unit run again, it would complete
    runtime.replace_driver()  # recovers the drive and the unit's workflow
    out, _ = follower.communicate(timeout=PATIENCE_S)
    assert follower.returncode == 1 and json.loads(out)["status"] == "failed", out
    assert _log(runtime) == ["a:solo 1"]
    assert runtime.store().unit(run.id, "a:solo").status != "completed"
