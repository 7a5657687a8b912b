"""How a worker learns that one of the pool's queues has work before its next poll (docs/scale-out.md,
"How a worker finds work"). Needs the `postgres` extra.

DBOS's queue threads look for work once every polling interval (`--poll`) and sleep in between. A
worker wakes its thread of a queue at once: when a command submits a drive (it sends a PostgreSQL
notification naming the queue, which every worker listens for on a connection of its own), when the
worker's own drive enqueues an attempt (every worker hears of it when this one has no slot for it),
after it took over a silent worker's workflows, and once listening again after its connection was
lost (what was enqueued meanwhile). A woken thread polls as it would at the end of its interval,
unless every slot of the worker is taken: then it polls as soon as one frees here. The interval
stays the upper bound, for whatever nothing announces (a map's slot that frees on another worker, a
notification lost with a connection). So a short `--poll` is no longer what makes a pool quick.

A drive waiting for an attempt is woken the same way when the attempt's workflow ends: in the worker
that ran it, as DBOS releases the workflow after committing its end, and in the other workers by a
notification on a second channel (sent only when no drive of that worker waits for it). Its polls of
the attempt's status are left as the bound for what nothing announces (a workflow cancelled before
it ran, a notification lost with a connection)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import sqlalchemy
from dbos import _dbos as dbos_dbos
from dbos import _queue as dbos_queue

CHANNEL = "akm_run_queues"  # a notification's payload: the name of the queue that has work
ENDS_CHANNEL = "akm_run_ends"  # a notification's payload: the id of an attempt's workflow that ended
LISTEN_CHECK_S = 0.5  # how often the listener looks whether its worker stops
LISTEN_RETRY_S = 1.0  # how long the listener waits before it connects again
_DBOS_QUEUE_THREAD = dbos_queue.queue_worker_thread  # one queue's thread
_DBOS_MANAGER = dbos_queue.queue_thread  # the thread that starts a thread for each queue, once a second


class Wakes:
    """One wake-up event per queue of this worker's, each waited for by that queue's thread, and one
    for DBOS's manager of the queue threads (`added`). A queue woken while this worker runs as many
    of its workflows as it may is `deferred`: its poll could claim nothing, so it waits on until one
    of them ends here (`freed`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[str, threading.Event] = {}
        self._deferred: set[str] = set()
        self._manager = threading.Event()
        self._awaited: dict[str, threading.Event] = {}  # by workflow id: what a drive here waits for
        self.unheard: Callable[[str], None] | None = None  # tells the other workers of an end (`ended`)

    @contextmanager
    def awaiting(self, workflow_id: str, woken: threading.Event) -> Iterator[threading.Event]:
        """Around a drive's wait for an attempt's workflow: `woken` is set once it ended (see `ended`).
        Entered before the attempt is enqueued, so that an end that comes first is not missed."""
        with self._lock:
            self._awaited[workflow_id] = woken
        try:
            yield woken
        finally:
            with self._lock:
                if self._awaited.get(workflow_id) is woken:
                    del self._awaited[workflow_id]

    def ended(self, workflow_id: str, *, here: bool) -> None:
        """An attempt's workflow ended (`here`: in this worker, its end committed). Its drive, if it
        waits in this worker, is woken; an end here that no drive here waits for is told to the other
        workers (`unheard`), whose drive may wait for it."""
        with self._lock:
            woken = self._awaited.get(workflow_id)
        if woken is not None:
            woken.set()
        elif here and self.unheard is not None:
            try:
                self.unheard(workflow_id)
            except Exception:  # noqa: BLE001 - inside DBOS's release of the workflow: its drive polls anyway
                pass

    def event(self, queue: str) -> threading.Event:
        """The queue's event, set when first made: a queue's new thread polls at once, not after one
        interval (a worker's start, a units queue of a width it had not served)."""
        with self._lock:
            if (found := self._events.get(queue)) is None:
                found = self._events[queue] = threading.Event()
                found.set()
            return found

    def wake(self, queue: str) -> None:
        """Wake the queue's thread, if it has one: a new thread polls at once anyway (`event`), and a
        notification naming a queue no thread serves makes nothing."""
        with self._lock:
            found = self._events.get(queue)
        if found is not None:
            found.set()

    def defer(self, queue: str) -> None:
        with self._lock:
            self._deferred.add(queue)

    def undefer(self, queue: str) -> None:
        with self._lock:
            self._deferred.discard(queue)

    def freed(self, queue: str) -> None:
        """A workflow of `queue` ended in this worker: a wake-up deferred for want of a slot is due."""
        with self._lock:
            due = queue in self._deferred
            self._deferred.discard(queue)
        if due:
            self.wake(queue)

    def added(self) -> None:
        """A queue was declared in this worker: its thread starts now, not at the manager's next look."""
        self._manager.set()

    def wake_all(self) -> None:
        """Every queue's thread, and every drive waiting for an attempt (what was announced while
        this worker was not listening)."""
        with self._lock:
            events = [self._manager, *self._events.values(), *self._awaited.values()]
        for event in events:
            event.set()


class _Woken(threading.Event):
    """What DBOS's thread of one queue takes for its stop event: it is set when the worker stops,
    and its `wait(interval)` also ends, early, when the queue is woken with a slot free (a wake-up
    while every slot is taken waits for one: `_deferred`). Only those two are used."""

    def __init__(
        self, stop: threading.Event, wake: threading.Event, *, deferred: Wakes | None = None, queue: Any = None
    ) -> None:
        super().__init__()
        self.stop, self._wake = stop, wake
        self._wakes, self._queue = deferred, queue

    def is_set(self) -> bool:
        return self.stop.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.stop.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or not self._wake.wait(left):
                break  # the interval is up: DBOS's own poll
            # Cleared before the poll that follows: a wake-up sent from now on is for work that poll
            # may not see yet, and wakes the next wait. One sent before is for work that poll sees.
            self._wake.clear()
            if not self._deferred():
                break
        self._wake.clear()
        return self.stop.is_set()

    def _deferred(self) -> bool:
        """Whether the wake-up waits for a slot: this worker runs as many of the queue's workflows as
        DBOS lets it (a workflow that just ended counts until DBOS releases it, after its status is
        committed), so the poll would claim nothing. Deferred first, then counted, so that a release
        in between is not missed."""
        if self._wakes is None or (limit := self._queue._worker_concurrency) is None:
            return False
        self._wakes.defer(self._queue.name)
        if dbos_dbos._get_dbos_instance()._active_workflows_set.count_for_queue(self._queue.name) < limit:
            self._wakes.undefer(self._queue.name)
            return False
        return True


def install(wakes: Wakes, ours: Callable[[str], bool], attempts: Callable[[str], bool]) -> None:
    """Have DBOS's manager of the queue threads, and its threads of the queues `ours` accepts, wait on
    `wakes`, and tell `wakes` when a workflow of this process leaves DBOS's count of its running ones
    (after DBOS() and before its launch: DBOS starts each thread by its module-level name; its other
    queues keep their plain wait), and of the end of a workflow of a queue `attempts` accepts. A worker
    stopping must `wake_all` once it set DBOS's stop events, or its threads sleep out their interval."""

    def manager(stop_event: threading.Event, dbos: Any) -> None:
        _DBOS_MANAGER(_Woken(stop_event, wakes._manager), dbos)

    def queue_thread(stop_event: threading.Event, dbos: Any, queue: Any) -> None:
        stop = stop_event.stop if isinstance(stop_event, _Woken) else stop_event  # the manager's
        if ours(queue.name):
            stop = _Woken(stop, wakes.event(queue.name), deferred=wakes, queue=queue)
        _DBOS_QUEUE_THREAD(stop, dbos, queue)

    active = dbos_dbos._get_dbos_instance()._active_workflows_set
    remove = active._remove

    def removed(key: str, bucket: Any) -> None:
        remove(key, bucket)
        if bucket is not None and ours(bucket[0]):  # (queue, partition): a slot of it is free now
            wakes.freed(bucket[0])
            if attempts(bucket[0]):
                wakes.ended(key, here=True)

    active._remove = removed  # type: ignore[method-assign]
    setattr(dbos_dbos, "queue_thread", manager)  # noqa: B010 - not exported: mypy would refuse the plain assignment
    dbos_queue.queue_worker_thread = queue_thread


def announce(engine: sqlalchemy.Engine, queue: str, channel: str = CHANNEL) -> None:
    """Tell every listening worker that `queue` has work (or, on ENDS_CHANNEL, that the workflow it
    names ended), after it was committed. A database that went away meanwhile loses only the
    announcement: the workers find the work, and the drives the end, at their next poll."""
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(
                sqlalchemy.text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": queue}
            )
    except sqlalchemy.exc.OperationalError:
        pass


class Abort(threading.Event):
    """A drive's abort that also sets each event `linked` to it while linked: a drive waiting for an
    attempt wakes at an abort as it does at the attempt's end, on one event. Set from threads (the
    cancellation watch, the run's timer), never from a signal handler: no Event is safe there."""

    def __init__(self) -> None:
        super().__init__()
        self._linked: set[threading.Event] = set()
        self._guard = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._guard:
            linked = list(self._linked)
        for event in linked:
            event.set()

    @contextmanager
    def linked(self, event: threading.Event) -> Iterator[threading.Event]:
        with self._guard:
            self._linked.add(event)
        if self.is_set():
            event.set()
        try:
            yield event
        finally:
            with self._guard:
                self._linked.discard(event)


class Listener:
    """A worker's connection listening for announcements, on a thread of its own until `stop()`; it
    connects again for as long as the database is away."""

    def __init__(self, url: str, wakes: Wakes) -> None:
        self.url, self.wakes = url, wakes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="akm-wakes", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, application_name="akm-run-wakes") as connection:
                    connection.execute(f"LISTEN {CHANNEL}")
                    connection.execute(f"LISTEN {ENDS_CHANNEL}")
                    self.wakes.wake_all()  # whatever was enqueued, or ended, while this worker was not listening
                    while not self._stop.is_set():
                        for note in connection.notifies(timeout=LISTEN_CHECK_S):
                            if note.channel == ENDS_CHANNEL:
                                self.wakes.ended(note.payload, here=False)
                            else:
                                self.wakes.wake(note.payload)
            except Exception:  # noqa: BLE001 - a lost connection, or anything else that ends the listening
                # Anyone who can connect can notify, so no payload may end this thread for good (a
                # payload that did not decode once did, before akm-run refused SQL_ASCII databases).
                # It listens again; the queues' polls go on meanwhile.
                self._stop.wait(LISTEN_RETRY_S)
