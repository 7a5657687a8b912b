"""The worker pool end to end: real `akm-run worker` processes (distinct executor ids) on a private
PostgreSQL server, plans compiled by akmc and submitted by a real `akm-run run --database`. Each
unit appends a line to a file, so a test counts where and how often it ran."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from dbos import DBOSClient

from akm_run.pgstore import PostgresStore
from helpers import Runtime, doubling_leaf, eventually, source

pytestmark = pytest.mark.slow

# A unit that records which worker ran it (the worker is its shell's parent) and how often.
MAP = source("""
    workflow "spread" {
      params { items: list[int] = [1, 2, 3, 4, 5, 6, 7, 8] }
      step fan {
        map params.items {
          concurrency = 4
          shell "echo \\"$AKM_UNIT_ID $PPID\\" >> ran; sleep SLEEP; echo $AKM_ATTEMPT"
        }
      }
    }
""")
APPROVAL = source("""
    workflow "waits" {
      step first {
        shell "echo first >> ran; echo 1"
      }
      step ok {
        approval "Ship it?"
      }
      step after {
        shell "echo after >> ran; cat"
        inputs = [steps.ok.output]
      }
    }
""")


def ran(pooled: Runtime) -> list[str]:
    path = pooled.root / "ran"
    return path.read_text().splitlines() if path.exists() else []


def test_the_units_of_one_map_run_on_more_than_one_worker(pooled: Runtime) -> None:
    two = ("--concurrency", "2")  # neither worker holds the whole map
    pids = {pooled.start_worker(name=name, options=two).process.pid for name in ("w1", "w2")}
    plan = pooled.compile("spread.akm", MAP.replace("SLEEP", "0.5"))
    code, document = pooled.run_json(plan)
    assert code == 0, document
    lines = ran(pooled)
    assert len(lines) == 8 and len({line.split()[0] for line in lines}) == 8  # each unit once
    assert {int(line.split()[1]) for line in lines} == pids  # both workers ran some
    status = pooled.akm("status", document["runId"], "--format", "json")
    assert json.loads(status.stdout)["run"]["status"] == "completed"


def test_a_worker_killed_mid_map_is_replaced_and_no_recorded_unit_runs_again(
    pooled: Runtime, database_url: str
) -> None:
    pooled.start_worker(name="doomed")
    plan = pooled.compile("spread.akm", MAP.replace("SLEEP", "0.4"))
    detached = pooled.akm("run", plan, "--detach")
    assert detached.returncode == 0, detached.stderr
    run_id = detached.stdout.strip()
    store = PostgresStore(database_url)

    def completed() -> set[str]:
        return {u.unit_id for u, attempts in store.run_attempts(run_id) if u.status == "completed"}

    eventually(lambda: len(completed()) >= 2, "two units completed")
    pooled.worker("doomed").kill()  # the drive and the units in flight die with it
    recorded = completed()
    pooled.start_worker(name="heir")
    code, document = pooled.run_json(run_id)  # follows the taken-over drive
    assert code == 0, document
    counts = Counter(line.split()[0] for line in ran(pooled))
    assert set(counts) == completed() and len(counts) == 8
    assert all(counts[unit] == 1 for unit in recorded), counts  # a recorded completion never runs again


def test_a_waiting_run_holds_no_workflow_and_approve_continues_it(pooled: Runtime, database_url: str) -> None:
    pooled.start_worker(name="w1")
    plan = pooled.compile("waits.akm", APPROVAL)
    named = {k: v for k, v in pooled.env().items() if k != "AKM_RUN_DATABASE"}  # the hints name what is named
    code, document = pooled.run_json(plan, "--database", database_url, env=named)
    run_id = str(document["runId"])
    assert code == 3 and f"akm-run approve {run_id} ok --database " in str(document["blocked"])
    client = DBOSClient(system_database_url=database_url)
    try:
        assert client.list_workflows(status=["PENDING", "ENQUEUED"]) == []  # nothing waits on a worker
        approved = pooled.akm("approve", run_id, "ok", "--by", "alice", "--database", database_url, env=named)
        # approve submitted the next drive: it says so, and how to follow it, not to continue the run
        follow = f"akm-run run {run_id} --database {shlex.quote(database_url)}"
        assert approved.returncode == 0 and approved.stdout == (
            f"approved step ok of run {run_id}; the worker pool continues the run: follow it with `{follow}`\n"
        ), approved.stdout
        # The command as printed, pasted into a shell: it follows the drive, or reports the run it ended.
        path = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{named.get('PATH', '')}"}
        pasted = subprocess.run(
            follow, shell=True, cwd=pooled.root, env={**named, **path}, capture_output=True, text=True, timeout=120
        )
        assert pasted.returncode == 0 and "completed" in pasted.stdout, pasted.stdout + pasted.stderr
        assert ran(pooled) == ["first", "after"]
        drives = client.list_workflows(workflow_id_prefix=run_id, name="akm-run-drive")
        assert sorted(d.workflow_id for d in drives) == [run_id, f"{run_id}/1"]
    finally:
        client.destroy()


def test_resume_on_the_pool_says_the_pool_continues_the_run(pooled: Runtime, database_url: str) -> None:
    """`resume` submits the next drive on the pool, as `approve` does: it says so and how to follow."""
    pooled.start_worker(name="w1")
    src = source("""
        workflow "flaky" {
          step once {
            shell "echo once >> ran; test -e fixed"
          }
        }
    """)
    plan = pooled.compile("flaky.akm", src)
    named = {k: v for k, v in pooled.env().items() if k != "AKM_RUN_DATABASE"}
    code, document = pooled.run_json(plan, "--database", database_url, env=named)
    run_id = str(document["runId"])
    assert code == 1, document
    (pooled.root / "fixed").touch()
    resumed = pooled.akm("resume", run_id, "--database", database_url, env=named)
    follow = f"akm-run run {run_id} --database {shlex.quote(database_url)}"
    assert resumed.returncode == 0 and resumed.stdout == (
        f"reopened run {run_id}: once pending again; the worker pool continues the run: follow it with `{follow}`\n"
    ), resumed.stdout
    code, document = pooled.run_json(run_id, "--database", database_url, env=named)
    assert code == 0 and ran(pooled) == ["once", "once"], document


def test_a_stored_plan_tampered_while_its_drive_waits_for_recovery_is_refused(
    pooled: Runtime, database_url: str
) -> None:
    pooled.start_worker(name="doomed")
    plan = pooled.compile("waits.akm", APPROVAL.replace("echo first >> ran; echo 1", "echo first >> ran; sleep 30"))
    run_id = pooled.akm("run", plan, "--detach").stdout.strip()
    with psycopg.connect(database_url, autocommit=True) as connection:
        # journaled after the worker's guard learns it: the guard stops the unit the kill leaves
        pid = "SELECT pid FROM akm_run.attempts WHERE pid IS NOT NULL"
        eventually(lambda: connection.execute(pid).fetchall(), "the first unit's pid journaled")
        pooled.worker("doomed").kill()
        connection.execute("UPDATE akm_run.runs SET plan_json = replace(plan_json, 'echo after', 'echo AFTER')")
    pooled.start_worker(name="heir")
    result = pooled.akm("run", run_id)
    assert result.returncode == 4, result.stderr
    assert f"refused run {run_id}: its stored plan does not verify" in result.stderr
    assert ran(pooled) == ["first"]  # the recovered drive ran nothing


LEAF = doubling_leaf("echo leaf >> ran")
TOP = source("""
    workflow "top" {
      step call {
        uses "workflows/leaf" {
          n = 21
        }
      }
      outputs { result = steps.call.output.doubled }
    }
""")


def test_a_worker_killed_as_it_publishes_a_child_run_is_replaced_and_the_run_has_one_child(
    pooled: Runtime,
) -> None:
    doomed = pooled.start_worker(pooled.env(AKM_RUN_FAULT="child-published"), name="doomed")
    doomed.driver = True  # it SIGKILLs itself right there
    pooled.write({"workflows/leaf.akm": LEAF})
    plan = pooled.compile("workflows/top.akm", TOP)
    run_id = pooled.akm("run", plan, "--detach").stdout.strip()
    eventually(lambda: doomed.process.poll() is not None, "the worker died")
    pooled.start_worker(name="heir")
    code, document = pooled.run_json(run_id)
    assert code == 0, document
    assert document["exported"] == {"result": 42}
    listed = json.loads(pooled.akm("list", "--children", "--format", "json").stdout)["runs"]
    assert len(listed) == 2  # the child published before the kill is the one the heir drove
    assert ran(pooled) == ["leaf"]


SAME = source("""
    workflow "same" {
      params { who: string = "ada" }
      outputs { greeting = steps.greet.output }
      step greet {
        shell "echo \\\\\\"hello\\\\\\""
        inputs = [params.who]
      }
      step broken {
        shell "echo oops >&2; exit 3"
        on_error = continue
      }
    }
""")


def normalized(text: str, run_id: str) -> object:
    """A document with what differs from run to run taken out (its run id, times, durations,
    dispatch ids, which derive from the run id, and whether the activity sampler saw a short unit
    before it ended, which the clock decides): what must not differ between stores."""
    text = re.sub(r'"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"', '"TIME"', text.replace(run_id, "RUN"))

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("durationMs", "dispatchId", "lastActivityAt")}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip(json.loads(text))


def test_run_and_status_print_the_same_documents_as_on_sqlite(pooled: Runtime) -> None:
    workspace = Runtime(pooled.root)  # the same workspace on SQLite
    plan = workspace.compile("same.akm", SAME)
    local = workspace.akm("run", plan, "--format", "json")
    local_id = json.loads(local.stdout)["runId"]
    pooled.start_worker(name="w1")
    there = pooled.akm("run", plan, "--format", "json")
    pooled_id = json.loads(there.stdout)["runId"]
    assert (there.returncode, normalized(there.stdout, pooled_id)) == (
        local.returncode,
        normalized(local.stdout, local_id),
    )
    assert there.stderr.splitlines()[0] == "step greet started"
    for verb in ("status", "logs"):
        here = workspace.akm(verb, local_id, "--format", "json")
        there = pooled.akm(verb, pooled_id, "--format", "json")
        assert normalized(there.stdout, pooled_id) == normalized(here.stdout, local_id), verb
