"""How a unit's process stops on the worker pool (docs/scale-out.md, "Stopping units"): the attempts
running on one worker, stopped when their workflow is cancelled (an aborted drive, an abandoned run)
or at the end of the worker's grace period, the drive's side of an abort, and a drive aborted when
the `run` following it is interrupted. Needs the `postgres` extra; only the pool (akm_run.drives,
akm_run.submitting) imports it."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dbos import DBOS, DBOSClient
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError

from akm_run import exitcodes, notify, units, wording
from akm_run.activity import POOL_PERIOD_S, Beat, Board
from akm_run.console import fail, on_signals
from akm_run.core import End
from akm_run.dispatch import ProcessDispatcher, Settings
from akm_run.guard import Guard
from akm_run.hints import Hints
from akm_run.templates import Failure

if TYPE_CHECKING:
    from akm_run.dispatch import Request
    from akm_run.pgstore import PostgresStore

CANCEL_POLL_S = 0.1  # how often a worker looks whether an attempt it runs was cancelled (a stop)
POLL_S = 0.02  # how often an aborted drive looks whether the worker journaled the stop
# How long an aborted drive waits for the worker running its attempt to stop it and journal that:
# the stop's grace period, and time for the worker to notice and write.
STOPPED_WAIT_S = units.KILL_GRACE_SECONDS + 10.0


@dataclass
class Running:
    """An attempt running on this worker: its abort, and its process group once it started."""

    guard: Guard | None
    abort: threading.Event = field(default_factory=threading.Event)
    pid: int | None = None

    def spawned(self, pid: int) -> None:
        self.pid = pid
        if self.guard is not None:
            self.guard.started(pid)


@dataclass
class Attempts:
    """The attempts running on this worker, by workflow id, and the guard of their process groups."""

    guard: Guard | None = None
    running: dict[str, Running] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)  # the grace period is over
    lock: threading.Lock = field(default_factory=threading.Lock)
    watching: threading.Event = field(default_factory=threading.Event)  # set: the watch ends
    board: Board | None = None  # the activity of the attempts running here, journaled every 5 s at most

    @classmethod
    def for_worker(cls, client: DBOSClient) -> Attempts:
        """A worker's attempts, guarded, with a thread that watches for their cancellation."""
        attempts = cls(Guard())
        threading.Thread(
            target=attempts.watch, args=(client, attempts.watching), name="akm-cancelled", daemon=True
        ).start()
        return attempts

    def execute(self, store: PostgresStore, settings: Settings, request: Request) -> End:
        """Run an attempt's process here, registered while it runs (see `ended`)."""
        workflow_id = str(DBOS.workflow_id)
        running = self.run(workflow_id)
        with self.lock:
            if self.board is None:
                self.board = Board(functools.partial(_activity, store), POOL_PERIOD_S)
        try:
            ended = ProcessDispatcher(store, settings, running.abort, running.spawned, self.board).dispatch(request)
        finally:
            self.done(workflow_id)
        return self.ended(store, request, ended)

    def close(self, executor_id: str) -> None:
        """The worker's grace period is over: stop what still runs, and say so."""
        if stopped := self.stop_units():
            print(
                f"akm-run worker {executor_id}: stopped {stopped} unit(s) still running after the grace period; "
                f"they run again on a takeover or on this worker's next start",
                file=sys.stderr,
                flush=True,
            )
        self.watching.set()

    def run(self, workflow_id: str) -> Running:
        """Register an attempt that starts running here (`done` when it ends)."""
        with self.lock:
            running = self.running[workflow_id] = Running(self.guard)
        return running

    @contextmanager
    def watched(self, workflow_id: str, abort: threading.Event) -> Iterator[None]:
        """A drive running here inside the block, aborted (`abort` set) once its workflow is
        cancelled: `run` interrupted on any host (see `interrupt`)."""
        with self.lock:
            self.running[workflow_id] = Running(None, abort)
        try:
            yield
        finally:
            self.done(workflow_id)

    def done(self, workflow_id: str) -> None:
        with self.lock:
            running = self.running.pop(workflow_id, None)
        if running is not None and running.pid is not None and self.guard is not None:
            self.guard.ended(running.pid)

    def watch(self, client: DBOSClient, stop: threading.Event) -> None:
        """Stop the attempts running here whose workflow was cancelled (an aborted drive, an abandoned
        run): DBOS only marks a cancelled workflow, its running step goes on."""
        while not stop.wait(CANCEL_POLL_S):
            with self.lock:
                ids = list(self.running)
            if not ids:
                continue
            try:
                cancelled = client.list_workflows(
                    workflow_ids=ids, status="CANCELLED", load_input=False, load_output=False
                )
            except Exception:  # noqa: BLE001 - a database that is away for a while: look again
                continue
            with self.lock:
                for workflow in cancelled:
                    if (running := self.running.get(str(workflow.workflow_id))) is not None:
                        running.abort.set()

    def stop_units(self) -> int:
        """At the end of the grace period: stop the units still running here (SIGTERM, then SIGKILL),
        recording nothing, so their workflows stay this worker's for a takeover; how many."""
        self.stopping.set()
        with self.lock:
            pids = [r.pid for r in self.running.values() if r.pid is not None]
        units.stop_groups(pids)
        return len(pids)

    def ended(self, store: PostgresStore, request: Request, ended: End) -> End:
        """What the attempt's step returns once its process ended: nothing after the grace period
        (the step waits for the worker's exit; the takeover runs the unit again); an attempt stopped
        because its workflow was cancelled has its abort journaled here, where it was stopped."""
        if self.stopping.is_set():
            threading.Event().wait()
        if ended.status != "aborted":
            return ended
        row = store.run(request.run_id)
        if row is not None and (row.failure or {}).get("reason") == "abandoned":
            ended.message = (ended.message or "").replace("the drive was aborted", "the run was abandoned", 1)
        store.abort_attempt(
            request.run_id,
            request.place.journal,
            request.place.step_id,
            request.attempt,
            ended.message,
            ended.stderr_tail,
        )
        return dataclasses.replace(ended, recorded=True)


def _activity(store: PostgresStore, beats: list[Beat]) -> None:
    """A worker's sample of the activity of its units: journaled, and a first silence notified."""
    store.record_activity(beats)
    notify.stalled_soon(store, beats, Hints())


def stop_attempt(client: DBOSClient, store: PostgresStore, request: Request, workflow_id: str, status: str) -> End:
    """The drive was aborted while its attempt was on the pool: cancel the attempt's workflow (a
    queued one never starts), and wait for the worker running it to stop its process and journal
    the abort, as the SQLite driver does; if it does not in time (a worker gone), the abort is the
    drive's to journal."""
    client.cancel_workflow(workflow_id)
    deadline = time.monotonic() + STOPPED_WAIT_S
    while status != "ENQUEUED" and time.monotonic() < deadline:
        row = next(a for a in store.attempts(request.run_id, request.place.journal) if a.attempt == request.attempt)
        if row.status != "running":
            return End("aborted", reason="aborted", message=row.message, stderr_tail=row.stderr_tail, recorded=True)
        time.sleep(POLL_S)
    where = "before the unit started" if status == "ENQUEUED" else "while the unit ran"
    return End("aborted", reason="aborted", message=f"the drive was aborted {where} on the pool")


# How long `run` waits, after its first SIGINT or SIGTERM, for the drive to be stopped: past
# interrupt()'s own bound, the database is not answering (a second signal ends `run` at once).
GIVE_UP_S = STOPPED_WAIT_S + 10.0


def on_stop_signals(stop: threading.Event, run_id: str, hints: Hints) -> None:
    """`run` following a drive: the first signal sets `stop` (the drive is aborted), and if the
    database does not answer meanwhile, `run` ends GIVE_UP_S later, or at a second signal, exit 130:
    a DBOS call to an unreachable server retries for ever, and a signal must end the command."""

    def give_up() -> None:
        said = wording.signalled_while_database_gone(seconds=GIVE_UP_S, run=run_id, command=hints("status", run_id))
        code = fail(Failure(said, exitcodes.INTERRUPTED))
        sys.stderr.flush()
        os._exit(code)  # the main thread is inside a call that does not return

    def stopped(signum: int, frame: object) -> None:
        if stop.is_set():
            give_up()
        stop.set()
        timer = threading.Timer(GIVE_UP_S, give_up)
        timer.daemon = True  # a `run` that ends meanwhile ends as it would have
        timer.start()

    on_signals(stopped)


def interrupt(client: DBOSClient, store: PostgresStore, workflow_id: str, run_id: str) -> None:
    """`run` interrupted (SIGINT, SIGTERM) while it followed drive `workflow_id`: cancel the drive,
    whose worker then aborts it as a signal aborts a drive on SQLite (its attempts stopped and
    journaled `aborted`, the run left active and resumable), and wait until no drive holds the run
    (a queued drive never starts). Bounded: a drive whose worker is gone holds nothing."""
    client.cancel_workflow(workflow_id)
    deadline = time.monotonic() + STOPPED_WAIT_S + 5.0
    while store.driven(run_id) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def quiet_cancellations() -> None:
    """DBOS logs the end of a cancelled workflow as an error with a traceback: for an attempt, it is
    a stop this worker carried out (and journaled), not an error."""

    def not_a_cancellation(record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, DBOSAwaitedWorkflowCancelledError | DBOSWorkflowCancelledError)

    logging.getLogger("dbos").addFilter(not_a_cancellation)
