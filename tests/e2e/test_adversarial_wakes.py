"""The pool's drives woken at an attempt's end (akm_run.wakes: Wakes.ended, the `akm_run_ends`
channel) under attack: anyone who can connect can notify, with the ids of attempts in flight."""

from __future__ import annotations

import json
import signal
from collections import Counter

import psycopg

from akm_run import wakes
from helpers import Runtime, eventually, source, unit_processes

# Each unit waits for the test's go-ahead (a file), so what it sees is never a matter of time.
HELD = source("""
    workflow "held" {
      params { items: list[int] = [1, 2] }
      step fan {
        map params.items {
          concurrency = 2
          shell "echo \\"start $AKM_UNIT_ID\\" >> ran; while [ ! -e go ]; do sleep 0.05; done; echo \\"end $AKM_UNIT_ID\\" >> ran; echo 1"
        }
      }
    }
""")


def _ran(pooled: Runtime, what: str) -> Counter[str]:
    path = pooled.root / "ran"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split()[1] for line in lines if line.startswith(what + " "))


def _in_flight(pooled: Runtime, run_id: str) -> list[str]:
    """The workflow ids of the run's attempts journaled running (drives.attempt_workflow_id)."""
    rows = pooled.sql("SELECT dispatch_id, attempt FROM attempts WHERE run_id = ? AND status = 'running'", run_id)
    return sorted(f"{dispatch}/{attempt}" for dispatch, attempt in rows)


def test_forged_ends_of_attempts_in_flight_end_nothing(pooled: Runtime) -> None:
    """Two workers of one unit each, so that one attempt runs where its drive waits and one on the
    other worker: a flood of notifications naming each attempt's workflow (and odd ones) wakes their
    drive, which finds the attempt still running and waits on; each unit runs once, to its end."""
    workers = [pooled.start_worker(name=name, options=("--concurrency", "1")) for name in ("a", "b")]
    plan = pooled.compile("held.akm", HELD)
    follower = pooled.start("run", plan, "--format", "json")
    eventually(lambda: sum(_ran(pooled, "start").values()) == 2, "a unit running on each worker")
    [run_id] = [row[0] for row in pooled.sql("SELECT id FROM runs")]
    ids = _in_flight(pooled, run_id)
    assert len(ids) == 2
    assert pooled.database is not None
    with psycopg.connect(pooled.database, autocommit=True) as anyone:
        for _ in range(300):
            for payload in (*ids, ids[0] + " ", ids[0].upper(), run_id, "/".join(ids)):
                anyone.execute("SELECT pg_notify(%s, %s)", (wakes.ENDS_CHANNEL, payload))
    # Read after the flood was heard (a query of each worker's own comes after it on the server).
    assert _in_flight(pooled, run_id) == ids
    assert follower.poll() is None and _ran(pooled, "end") == Counter()
    (pooled.root / "go").touch()
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    assert _ran(pooled, "start") == _ran(pooled, "end") and set(_ran(pooled, "end").values()) == {1}
    assert unit_processes(run_id) == []
    assert not [worker for worker in workers if "Traceback" in worker.output()]


def _attempt_workflows(pooled: Runtime) -> list[str]:
    """The statuses of the attempts' workflows (each test's database holds one run)."""
    assert pooled.database is not None
    with psycopg.connect(pooled.database) as connection:
        rows = connection.execute(
            "SELECT status FROM dbos.workflow_status WHERE name = 'akm-run-unit' AND workflow_uuid LIKE 'd-%'"
        ).fetchall()
    return sorted(row[0] for row in rows)


def test_sigint_to_run_while_attempts_are_queued_stops_them_all(pooled: Runtime) -> None:
    """A worker of one unit and a map of three: one attempt runs and two are queued when `run` is
    interrupted. The running one is stopped, the queued ones never start, and the run resumes."""
    worker = pooled.start_worker(name="one", options=("--concurrency", "1"))
    plan = pooled.compile("held.akm", HELD.replace("[1, 2]", "[1, 2, 3]").replace("concurrency = 2", "concurrency = 3"))
    follower = pooled.start("run", plan, "--format", "json")
    eventually(lambda: sum(_ran(pooled, "start").values()) == 1, "a unit running")
    [run_id] = [row[0] for row in pooled.sql("SELECT id FROM runs")]
    eventually(lambda: len(_in_flight(pooled, run_id)) == 3, "three attempts journaled, two of them queued")
    follower.send_signal(signal.SIGINT)
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 130, (out, err)
    eventually(lambda: unit_processes(run_id) == [], "the running unit stopped")
    settled = eventually(
        lambda: (found := _attempt_workflows(pooled)) and not {"ENQUEUED", "PENDING"} & set(found) and found,
        "every attempt's workflow ended",
    )
    assert len(settled) == 3, settled
    assert _ran(pooled, "start").total() == 1 and _ran(pooled, "end") == Counter()
    (pooled.root / "go").touch()
    resumed = pooled.akm("resume", run_id)  # a detached drive
    assert resumed.returncode == 0, resumed.stderr
    eventually(lambda: pooled.sql("SELECT status FROM runs WHERE id = ?", run_id) == [("completed",)], "resumed")
    assert _ran(pooled, "end").total() == 3
    assert "Traceback" not in worker.output()


def test_an_attempt_whose_worker_was_killed_away_from_its_drive_runs_again_once(pooled: Runtime) -> None:
    """Its end is never announced: the worker that took over its workflow interrupts it (the claim
    fails: the dead worker had taken it), the drive hears that end and runs the unit again."""
    for name in ("a", "b"):
        pooled.start_worker(name=name, options=("--concurrency", "1"))
    plan = pooled.compile("held.akm", HELD)
    follower = pooled.start("run", plan, "--format", "json")
    eventually(lambda: sum(_ran(pooled, "start").values()) == 2, "a unit running on each worker")
    [run_id] = [row[0] for row in pooled.sql("SELECT id FROM runs")]
    assert pooled.database is not None
    with psycopg.connect(pooled.database) as connection:
        query = "SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s"
        [(driver,)] = connection.execute(query, (run_id,)).fetchall()
    other = pooled.worker("b" if driver == "a" else "a")
    other.kill()
    (pooled.root / "go").touch()
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    tried = sorted(tuple(a.status for a in attempts) for _, attempts in pooled.store().run_attempts(run_id))
    assert tried == [("completed",), ("interrupted", "completed")], tried
    assert unit_processes(run_id) == []


def test_listeners_killed_while_attempts_run_on_both_workers_lose_no_end(pooled: Runtime) -> None:
    """Every worker's listening connection is terminated while each runs a unit of the run: the ends
    told while nobody listens are found by the drive's own polls, or on listening again."""
    assert pooled.database is not None
    for name in ("a", "b"):
        pooled.start_worker(name=name, options=("--concurrency", "1"))
    plan = pooled.compile("held.akm", HELD)
    follower = pooled.start("run", plan, "--format", "json")
    eventually(lambda: sum(_ran(pooled, "start").values()) == 2, "a unit running on each worker")
    kill = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'akm-run-wakes'"
    with psycopg.connect(pooled.database, autocommit=True) as admin:
        assert len(admin.execute(kill).fetchall()) == 2
        (pooled.root / "go").touch()
        admin.execute(kill)  # and again, should one have listened again by now
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    assert _ran(pooled, "end") == _ran(pooled, "start")


def test_a_run_abandoned_while_an_attempt_is_queued_never_runs_it(pooled: Runtime) -> None:
    """Its drive's worker dies with one unit running on each worker and one queued; the run is
    abandoned. The queued attempt never starts: whether abandon cancels its workflow first or the
    worker dequeues it first (its step then reads the run's status with its plan's digest)."""
    for name in ("a", "b"):
        pooled.start_worker(name=name, options=("--concurrency", "1", "--takeover-after", "1h"))
    plan = pooled.compile("held.akm", HELD.replace("[1, 2]", "[1, 2, 3]").replace("concurrency = 2", "concurrency = 3"))
    detached = pooled.akm("run", plan, "--detach")
    assert detached.returncode == 0, detached.stderr
    run_id = detached.stdout.strip()
    eventually(lambda: sum(_ran(pooled, "start").values()) == 2, "a unit running on each worker")
    eventually(lambda: len(_in_flight(pooled, run_id)) == 3, "the third attempt queued")
    assert pooled.database is not None
    with psycopg.connect(pooled.database) as connection:
        query = "SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s"
        [(driver,)] = connection.execute(query, (run_id,)).fetchall()
    pooled.worker(driver).kill()
    result = eventually(lambda: (r := pooled.akm("abandon", run_id)).returncode != 75 and r, "the run's lock")
    assert result.returncode == 0, result.stderr
    eventually(lambda: unit_processes(run_id) == [], "the other worker's unit stopped")
    eventually(
        lambda: (found := _attempt_workflows(pooled)) and not {"ENQUEUED", "PENDING"} & set(found) and found,
        "every attempt's workflow ended",
    )
    assert _ran(pooled, "start").total() == 2 and _ran(pooled, "end") == Counter()
