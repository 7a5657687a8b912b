"""The submitting side of the worker pool (docs/scale-out.md): `run`, `approve` and `resume` with
--database hand a run's next drive to the pool (akm_run.drives) and, for `run`, follow it to its end
from the journal. Needs the `postgres` extra; the plain runtime never imports this module."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from dbos import DBOSClient, EnqueueOptions, WorkflowHandle

from akm_run import exitcodes, pool, stopping
from akm_run.core import SIGNALLED, aborted
from akm_run.drive_errors import drive_failure, given_up
from akm_run.drive_lock import took_lock
from akm_run.drives import DRIVE, ENDED_BADLY, FOLLOW_POLL_S, LIVE, DriveArgs, Outcome, client
from akm_run.engine import settled
from akm_run.hints import Hints
from akm_run.pgstore import PostgresStore
from akm_run.plan import PlanError
from akm_run.pool_schemas import SchemasBusy
from akm_run.progress import FromJournal, Progress
from akm_run.rows import RunRow
from akm_run.storedplans import stored_plan


class NoPool(Exception):
    """No worker has ever served the database: nothing can be submitted to it."""


def _serving(url: str, args: DriveArgs) -> int:
    """How many workers serve the database now, once no worker is creating its schemas (the first
    command of a first deployment waits for the first worker). Raises NoPool when no worker has
    served it: its schemas are missing or half-made, and nothing can be submitted."""
    try:
        workers = pool.serving(url)
    except SchemasBusy as error:
        raise NoPool(str(error)) from None
    if workers is None:
        raise NoPool(
            f"no `akm-run worker` has served this database yet: start one (`{args.hints('worker')}`), "
            f"then `{args.hints('run', args.run_id)}`"
        )
    return workers


def _warn_idle(workers: int, args: DriveArgs) -> None:
    """Warn when no worker beats now: what is submitted waits for one."""
    if workers == 0:
        print(
            f"akm-run: no worker is serving this database now; run {args.run_id} waits until one starts "
            f"(`{args.hints('worker')}`)",
            file=sys.stderr,
            flush=True,
        )


def submit(dbos: pool.Client, args: DriveArgs, *, changed: bool = False) -> str:
    """Submit the run's next drive, or find the one under way; its workflow id. The first drive's id
    is the run id, the n-th continuation's `RUN/n`, n counting the drives the database holds: two
    hosts submitting at once compute the same id and start one drive. After a command `changed` the
    run under its lock, a live drive that already took the lock counts for nothing: it may be about
    to end on what it read before (docs/scale-out.md)."""
    drives = _drives(dbos, args.run_id)
    live = [str(d.workflow_id) for d in drives if d.status in LIVE]
    if changed:
        live = [w for w in live if not took_lock(dbos, w)]
    if live:
        return live[0]
    workflow_id = args.run_id if not drives else f"{args.run_id}/{len(drives)}"
    options = EnqueueOptions(
        queue_name=pool.RUNS_QUEUE, workflow_name=DRIVE, workflow_id=workflow_id, app_version=pool.APP_VERSION
    )
    workflow_id = str(dbos.enqueue(options, args).get_workflow_id())
    dbos.announce(pool.RUNS_QUEUE)  # a worker takes it now, not at its next poll
    return workflow_id


def _drives(dbos: DBOSClient, run_id: str) -> list[Any]:
    """The drive workflows of a run, oldest first."""
    return list(dbos.list_workflows(workflow_id_prefix=run_id, name=DRIVE, load_input=False, load_output=False))


def follow(url: str, store: PostgresStore, args: DriveArgs, progress: Progress, stop: threading.Event) -> Outcome:
    """Submit the run's next drive and follow it to its end, drawing from the journal what its
    driver draws on SQLite (from where the run is, for a run already under way). `stop` set (a
    signal) aborts the drive wherever it runs, as a signal aborts a drive on SQLite."""
    shown = FromJournal(progress, store.run)
    try:
        workers = _serving(url, args)  # before DBOS's tables are read: they may be in the making
    except NoPool:
        if (row := store.run(args.run_id)) is not None and row.status != "active":
            return _settled(store, row, args.hints)  # ended without a pool (abandoned): nothing to drive
        raise
    dbos = client(url)
    try:
        # The drives first, then the run, and the live drive found is followed: a drive that settled the
        # run and ended between the two reads must not look like an active run left undriven (resubmitted).
        live = [str(d.workflow_id) for d in _drives(dbos, args.run_id) if d.status in LIVE]
        row = store.run(args.run_id)
        if row is not None and row.status != "active" and not live:
            return _settled(store, row, args.hints)  # nothing to drive: no worker needed
        _warn_idle(workers, args)
        shown.catch_up(store.progress_events(args.run_id, 0))  # before submitting: the new drive is drawn whole
        handle: WorkflowHandle[Outcome] = dbos.retrieve_workflow(live[0] if live else submit(dbos, args))
        while True:
            status = handle.get_status().status
            _report(store, args.run_id, shown)
            if status not in LIVE:
                break
            if stop.wait(FOLLOW_POLL_S):  # as a signal to SQLite's driver: the drive is aborted
                stopping.interrupt(dbos, store, handle.get_workflow_id(), args.run_id)
                if (status := handle.get_status().status) in ("SUCCESS", "ERROR"):
                    break  # it ended by itself first (DBOS cancels no ended workflow)
                _report(store, args.run_id, shown)
                return Outcome(result=aborted(args.run_id, SIGNALLED, args.hints("run", args.run_id)))
        if status in ENDED_BADLY:
            return _ended_badly(store, args, status)
        outcome: Outcome = handle.get_result()
        return outcome
    finally:
        dbos.destroy()


def _ended_badly(store: PostgresStore, args: DriveArgs, status: str) -> Outcome:
    """A drive whose workflow ended without a result. When DBOS gave up recovering it, its worker
    died every time it drove the run (as a unit that kills its host makes it do): the run stays
    active and resumable, as on SQLite when such a unit kills the driver, and the journal's
    interrupted attempts name the units that were running. Anything else is an internal error."""
    resume = args.hints("run", args.run_id)
    if status != "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
        return Outcome(
            code=exitcodes.INTERNAL,
            message=f"the drive of run {args.run_id} ended {status}; the run stays active and resumable: `{resume}`",
        )
    return Outcome(result=given_up(store, args.run_id, "the drive of this run", resume))


def _settled(store: PostgresStore, row: RunRow, hints: Hints) -> Outcome:
    """A run that is not active, as a drive would report it (its stored plan re-verified first)."""
    try:
        stored_plan(row)
    except PlanError as error:
        code, message = drive_failure(error, row.id, hints)
        return Outcome(code=code, message=message)
    return Outcome(result=settled(row, store, hints))


def _report(store: PostgresStore, run_id: str, shown: FromJournal) -> None:
    """Draw what the run and its child runs journaled since the last poll. Every event of a run's
    tree is written by its one driver, on one connection, so they commit in the order of their seq:
    reading past the last seq seen misses none."""
    shown.show(store.progress_events(run_id, shown.after))


def submit_once(url: str, args: DriveArgs, *, changed: bool = False) -> str:
    """`run --detach`, `approve` and `resume`: submit the run's next drive and return its id; the
    pool continues the run. `changed`: the caller changed the run under its lock (see `submit`)."""
    _warn_idle(_serving(url, args), args)
    dbos = client(url)
    try:
        return submit(dbos, args, changed=changed)
    finally:
        dbos.destroy()


def drive_pending(url: str) -> Callable[[str], bool]:
    """For `akm-run events --follow`: whether a drive of a run is still on its way (enqueued, running,
    or waiting for the pool to recover it from a dead worker), asked once its driver let go of it."""

    def pending(run_id: str) -> bool:
        dbos = client(url)
        try:
            return any(d.status in LIVE for d in _drives(dbos, run_id))
        finally:
            dbos.destroy()

    return pending
