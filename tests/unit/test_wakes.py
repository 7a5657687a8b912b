"""The wake-ups of a worker's queue threads (akm_run.wakes), without DBOS: what a thread's wait
returns, and when."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from dbos import _dbos as dbos_dbos

from akm_run.wakes import Abort, Wakes, _Woken

LONG_S = 60.0  # a wait that returned before this was woken (or stopped); nothing here waits it out


def test_a_new_queues_first_wait_returns_at_once_and_the_next_one_waits_for_a_wake() -> None:
    wakes, stop = Wakes(), threading.Event()
    woken = _Woken(stop, wakes.event("akm-runs"))
    assert woken.wait(LONG_S) is False  # set when made: a new thread polls at once
    assert woken.wait(0.01) is False  # cleared by the first wait: nothing woke it
    assert not wakes.event("akm-runs").is_set()


def test_a_wake_ends_a_wait_in_progress_and_is_not_lost_between_two_waits() -> None:
    wakes, stop = Wakes(), threading.Event()
    woken = _Woken(stop, wakes.event("akm-runs"))
    woken.wait(0)
    waker = threading.Timer(0.05, wakes.wake, args=("akm-runs",))
    waker.start()
    assert woken.wait(LONG_S) is False  # woken, not stopped
    waker.join()
    wakes.wake("akm-runs")  # during the poll that follows: for work that poll may miss
    assert wakes.event("akm-runs").is_set()
    assert woken.wait(LONG_S) is False


def test_a_wake_of_a_queue_no_thread_serves_makes_no_event() -> None:
    wakes = Wakes()
    for name in ("", "no-such-queue", "x" * 8000):
        wakes.wake(name)
    wakes.event("akm-units-c1").clear()
    wakes.wake_all()
    assert wakes.event("akm-units-c1").is_set()
    assert set(wakes._events) == {"akm-units-c1"}


def test_a_stop_ends_every_wait_and_says_so() -> None:
    wakes, stop = Wakes(), threading.Event()
    woken = [_Woken(stop, wakes.event(name)) for name in ("akm-runs", "akm-units-c4")]
    for each in woken:
        each.wait(0)
    results: list[bool] = []
    threads = [threading.Thread(target=lambda w=w: results.append(w.wait(LONG_S))) for w in woken]
    for thread in threads:
        thread.start()
    stop.set()
    wakes.wake_all()  # as a stopping worker does once it set DBOS's stop events
    for thread in threads:
        thread.join(LONG_S)
    assert results == [True, True]
    assert all(each.is_set() for each in woken)  # DBOS's loop checks is_set() between its polls


class _Running:
    """DBOS's count of the workflows running in this process, by queue, as the deferral reads it."""

    def __init__(self) -> None:
        self.count = 0

    def count_for_queue(self, queue: str) -> int:
        return self.count


def test_a_wake_while_every_slot_is_taken_waits_for_a_workflow_to_end_here(monkeypatch: pytest.MonkeyPatch) -> None:
    running = _Running()
    monkeypatch.setattr(dbos_dbos, "_get_dbos_instance", lambda: SimpleNamespace(_active_workflows_set=running))
    wakes, stop = Wakes(), threading.Event()
    queue = SimpleNamespace(name="akm-units-c4", _worker_concurrency=2)
    woken = _Woken(stop, wakes.event(queue.name), deferred=wakes, queue=queue)
    woken.wait(0)
    running.count = 2  # full: a poll now would claim nothing
    wakes.freed(queue.name)  # a workflow ended before any wake-up was deferred: nothing is due
    assert not wakes.event(queue.name).is_set()
    results: list[bool] = []
    waiter = threading.Thread(target=lambda: results.append(woken.wait(LONG_S)))
    waiter.start()
    wakes.wake(queue.name)  # an attempt enqueued: deferred, not polled for
    waiter.join(0.2)
    assert waiter.is_alive() and not results
    running.count = 1
    wakes.freed(queue.name)  # the slot DBOS released: the deferred wake-up is due now
    waiter.join(LONG_S)
    assert results == [False]


def test_a_full_queue_still_polls_when_its_interval_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    running = _Running()
    running.count = 9
    monkeypatch.setattr(dbos_dbos, "_get_dbos_instance", lambda: SimpleNamespace(_active_workflows_set=running))
    wakes, stop = Wakes(), threading.Event()
    queue = SimpleNamespace(name="akm-units-c1", _worker_concurrency=1)
    woken = _Woken(stop, wakes.event(queue.name), deferred=wakes, queue=queue)
    assert woken.wait(0.05) is False  # woken at once (a new queue), deferred, then the interval ended


def test_an_attempts_end_wakes_the_drive_that_waits_for_it_and_no_other() -> None:
    wakes, told = Wakes(), list[str]()
    wakes.unheard = told.append
    mine, other = threading.Event(), threading.Event()
    with wakes.awaiting("d-1/1", mine), wakes.awaiting("d-2/1", other):
        wakes.ended("d-1/1", here=True)
        assert mine.is_set() and not other.is_set()
    assert told == []  # a drive here heard it: nobody else is told


def test_an_end_that_comes_before_the_wait_is_not_lost() -> None:
    wakes, woken = Wakes(), threading.Event()
    with wakes.awaiting("d-1/1", woken):  # entered before the attempt is enqueued
        wakes.ended("d-1/1", here=True)
        assert woken.wait(LONG_S)


def test_an_end_here_that_no_drive_here_waits_for_is_told_to_the_other_workers_once() -> None:
    wakes, told = Wakes(), list[str]()
    wakes.unheard = told.append
    wakes.ended("d-1/1", here=True)
    wakes.ended("d-9/1", here=False)  # heard from another worker: not told again
    with wakes.awaiting("d-2/1", threading.Event()):
        pass
    wakes.ended("d-2/1", here=True)  # its drive stopped waiting: the entry went with it
    assert told == ["d-1/1", "d-2/1"]
    assert wakes._awaited == {}


def test_a_failing_announcement_of_an_end_is_swallowed() -> None:
    """It runs inside DBOS's release of the workflow: the drive elsewhere reads the status anyway."""
    wakes = Wakes()

    def broken(_: str) -> None:
        raise RuntimeError("the database is away")

    wakes.unheard = broken
    wakes.ended("d-1/1", here=True)


def test_wake_all_wakes_the_drives_waiting_for_attempts_too() -> None:
    """After the listener connected again: an end announced meanwhile was not heard."""
    wakes, woken = Wakes(), threading.Event()
    with wakes.awaiting("d-1/1", woken):
        wakes.wake_all()
        assert woken.is_set()


def test_an_abort_sets_every_event_linked_to_it_while_linked() -> None:
    abort, first, second, late = Abort(), threading.Event(), threading.Event(), threading.Event()
    with abort.linked(first):
        pass
    with abort.linked(second):
        abort.set()
        assert second.is_set() and not first.is_set()
    with abort.linked(late):  # linked after the abort: set at once
        assert late.is_set()
    assert abort.is_set()
