"""What the shared store relies on DBOS Transact for, proven against a real PostgreSQL server with workers
as separate processes (tests/integration/dbosprobe.py), each with its own executor id, configured and
taken over as akm_run.pool does. docs/scale-out.md cites each test by name."""

from __future__ import annotations

import signal

import psycopg
import pytest
from dbos import EnqueueOptions, WorkflowHandle

from helpers import PATIENCE_S, Pool, eventually

pytestmark = pytest.mark.slow


def test_a_run_id_used_as_workflow_id_starts_one_workflow_however_often_it_is_submitted(pool: Pool) -> None:
    pool.worker("w1")
    handles = [pool.enqueue("once", f"try{n}", workflow_id="20261201T030000-0a1b2c3d") for n in range(3)]
    assert {h.get_result() for h in handles} == {"20261201T030000-0a1b2c3d"}
    assert pool.lines("once ") == ["once try0 w1"]  # the later submissions attached to the first


@pytest.mark.parametrize("within", ["parent", "top"])
def test_two_processes_racing_to_start_one_child_key_make_exactly_one_child(pool: Pool, within: str) -> None:
    """Each racer starts the key from a parent workflow of its own, or as a workflow of its own."""
    pool.worker("w1")  # creates the system tables before the racers launch
    key = "sha256:5f0c9e0b7d1c4a2e8b3f6a9d0c1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e"
    racers = [pool.spawn("race", f"racer{n}", pool.url, str(pool.directory), key, within) for n in range(2)]
    eventually(lambda: len(pool.lines("launched ")) == 2, "both racers launched")
    (pool.directory / "start").touch()
    outputs = [r.communicate(timeout=PATIENCE_S) for r in racers]
    assert [r.returncode for r in racers] == [0, 0], outputs
    assert {out for out, _ in outputs} == {f"{key} {key}\n"}  # both got the same child and its result
    assert len(pool.lines(f"once {key} ")) == 1


def test_the_units_of_one_map_spread_over_two_workers(pool: Pool) -> None:
    pool.worker("w1")
    pool.worker("w2")
    executors = pool.enqueue("fan_out", 12).get_result()
    assert sorted(set(executors)) == ["w1", "w2"]
    assert len(pool.lines("unit ")) == 12  # each unit ran once


def test_a_queues_limit_per_worker_is_one_value_for_the_whole_pool(pool: Pool) -> None:
    """Why `--concurrency` cannot differ between workers: DBOS stores a queue's limits in the
    database, and the last worker to declare the queue sets them for every worker."""
    pool.worker("w1", env={"PROBE_UNITS_PER_WORKER": "1"})
    pool.worker("w2", env={"PROBE_UNITS_PER_WORKER": "3"})
    with psycopg.connect(pool.url) as connection:
        limits = connection.execute("SELECT worker_concurrency FROM dbos.queues WHERE name = 'units'").fetchall()
    assert limits == [(3,)]


def test_a_maps_concurrency_bounds_its_units_across_all_workers(pool: Pool) -> None:
    pool.worker("w1")
    pool.worker("w2")
    maps = [pool.enqueue("bounded_map", key, 8) for key in ("run1/fan", "run2/fan")]
    assert [m.get_result() for m in maps] == [8, 8]
    for key in ("run1/fan", "run2/fan"):
        in_flight, most = 0, 0
        for line in pool.lines(f"bounded {key} "):  # one log, in the order the lines were written
            in_flight += 1 if " start " in line else -1
            most = max(most, in_flight)
        assert len(pool.lines(f"bounded {key} start")) == 8 and 1 <= most <= 3  # MAP_CONCURRENCY


def test_a_workflow_of_another_application_version_is_left_to_executors_of_that_version(pool: Pool) -> None:
    pool.worker("w1")
    older: EnqueueOptions = {"queue_name": "runs", "workflow_name": "once", "app_version": "akm-run-workflows-0"}
    stranded: WorkflowHandle[str] = pool.client.enqueue(older, str(pool.directory), "older")
    pool.enqueue("once", "later").get_result()  # the queue moved past it
    assert pool.client.retrieve_workflow(stranded.get_workflow_id()).get_status().status == "ENQUEUED"
    assert pool.lines("once ") == ["once later w1"]


def test_a_sigkilled_workers_workflow_is_taken_over_and_no_completed_step_runs_again(pool: Pool) -> None:
    doomed = pool.worker("w1", takeover_after_s=2)
    handle = pool.enqueue("crashes")
    eventually(lambda: pool.lines("doomed w1"), "the doomed step on w1")
    pool.worker("w2", takeover_after_s=2)
    (pool.directory / "go").touch()
    assert doomed.wait(timeout=PATIENCE_S) == -signal.SIGKILL
    assert handle.get_result() == "w2"
    assert pool.lines("verify ") == ["verify w1", "verify w2"]  # code outside steps runs again
    assert pool.lines("first ") == ["first w1"]  # completed before the kill: never again
    assert pool.lines("doomed ") == ["doomed w1", "doomed w2"]  # interrupted: run again, elsewhere
    assert pool.lines("last ") == ["last w2"]
    assert pool.lines("took-over ") == ["took-over w1 w2"]


def test_a_drive_recovered_from_the_top_reattaches_to_its_dispatched_units_without_running_them_again(
    pool: Pool,
) -> None:
    """The engine can run as a DBOS workflow unchanged: it takes no DBOS step, so a recovery simply
    runs it again from the top (as resuming a run after a crash does on SQLite), and dispatching an
    attempt again under its dispatch id returns the finished unit's result instead of running it."""
    workers = [pool.worker("w1", takeover_after_s=2), pool.worker("w2", takeover_after_s=2)]
    ends = pool.enqueue("drive", 8).get_result()
    assert len(ends) == 8 and set(ends) <= {"w1", "w2"}
    assert sorted(w.returncode for w in workers if w.poll() is not None) == [-signal.SIGKILL]
    assert len(pool.lines("drive ")) == 2  # the first execution and the recovered one
    for item in range(8):
        assert len(pool.lines(f"unit {item} start ")) == 1  # each unit ran once
    assert len(pool.client.list_workflows(workflow_id_prefix="d-")) == 8


def test_a_worker_restarted_with_its_executor_id_finishes_its_own_workflows_at_once(pool: Pool) -> None:
    """How a worker is upgraded: stopped, then started again under the same id; no takeover needed."""
    doomed = pool.worker("w1", takeover_after_s=3600)
    handle = pool.enqueue("crashes")
    eventually(lambda: pool.lines("doomed w1"), "the doomed step on w1")
    (pool.directory / "go").touch()
    assert doomed.wait(timeout=PATIENCE_S) == -signal.SIGKILL
    pool.worker("w1", takeover_after_s=3600)
    assert handle.get_result() == "w1"
    assert pool.lines("first ") == ["first w1"] and pool.lines("last ") == ["last w1"]
    assert pool.lines("doomed ") == ["doomed w1", "doomed w1"] and pool.lines("took-over ") == []


def test_a_workflow_waiting_in_recv_holds_a_thread_and_async_or_ended_ones_do_not(pool: Pool) -> None:
    """The approval-wait design choice: see docs/scale-out.md, "Waiting holds nothing"."""
    worker = pool.worker("w1")
    waiting = 6

    def held() -> int:
        """Threads of the worker that a workflow holds now (the worker counts them on SIGUSR1)."""
        before = len(pool.lines("threads "))
        worker.send_signal(signal.SIGUSR1)
        reports = eventually(lambda: pool.lines("threads ")[before:], "the thread report")
        return int(reports[0].split()[1])

    asynchronous = [pool.enqueue("waits_async") for _ in range(waiting)]
    eventually(lambda: len(pool.lines("waiting-async ")) == waiting, "async waits")
    assert held() == 0

    ended = [pool.enqueue("segment", f"run{n}", None) for n in range(waiting)]
    assert {h.get_result() for h in ended} == {"blocked"}
    assert held() == 0

    synchronous = [pool.enqueue("waits") for _ in range(waiting)]
    eventually(lambda: len(pool.lines("waiting ")) == waiting, "sync waits")
    # One thread per blocked recv, for as long as it waits. Asked until it holds: on a loaded
    # machine one count of the stacks once saw 5 of the 6; a later count saw all of them.
    eventually(lambda: held() == waiting, f"{waiting} threads held by waiting workflows")
    assert held() == waiting
    pending = pool.client.list_workflows(status="PENDING")
    assert sorted(w.name for w in pending) == ["waits"] * waiting + ["waits_async"] * waiting

    for handle in synchronous + asynchronous:  # approve from another process: each wakes on its message
        pool.client.send(handle.get_workflow_id(), "approved", "approval")
    assert {h.get_result() for h in synchronous + asynchronous} == {"approved"}
    resumed = [pool.enqueue("segment", f"run{n}", "approved", workflow_id=f"run{n}/2") for n in range(waiting)]
    assert {h.get_result() for h in resumed} == {"completed"}
    assert held() == 0
