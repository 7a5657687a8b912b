"""Runs on the worker pool (docs/scale-out.md): the DBOS workflows that drive runs and run their
units, the dispatcher that hands an attempt to whichever worker dequeues it, the `akm-run worker`
process; akm_run.submitting hands drives to them (`run`, `approve`, `resume` with --database). Needs
the `postgres` extra; the plain runtime never imports this module.

A drive workflow is the engine itself (`Engine.drive`), with no DBOS step of its own: its state is
the journal, so a recovered drive starts from the top, re-verifies the stored plan, and re-attaches
to the attempts it had dispatched. An attempt is a workflow of one step on a units queue, under the
attempt's dispatch id: enqueuing it again, from a recovered drive, returns the same workflow."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from dbos import DBOS, EnqueueOptions, WorkflowHandle

from akm_run import exitcodes, isolation, pool, pool_schemas, preflight, retention, units, wakes, wording
from akm_run.children import hold
from akm_run.core import DriveResult, End
from akm_run.dispatch import Request, Settings
from akm_run.drive_errors import drive_failure, given_up
from akm_run.drive_lock import DriveStore
from akm_run.engine import DEFAULT_MAX_CONCURRENCY, Engine, Options
from akm_run.hints import Hints
from akm_run.locks import LockHeld
from akm_run.pgstore import PostgresStore
from akm_run.plan import PlanError
from akm_run.progress import Progress
from akm_run.rows import AttemptRow, RunRow
from akm_run.stopping import Attempts, quiet_cancellations, stop_attempt
from akm_run.storedplans import stored_plan
from akm_run.trust import admission, allowed_signers

DRIVE = "akm-run-drive"  # the workflow functions' names: part of what APP_VERSION pins
UNIT = "akm-run-unit"
# How often a drive looks whether a dispatched attempt ended when nothing woke it: a tenth of the
# attempt's age so far, within these bounds. The end of an attempt wakes its drive (akm_run.wakes), so
# these reads are only the bound for what nothing announces; each is a query on the shared database.
RESULT_POLL_MIN_S = 0.2
RESULT_POLL_MAX_S = 1.0
RECONNECT_PAUSE_S = 0.02  # the first pause of a drive whose database went away (doubled up to 5 s)
# How often a worker lists the queues for units queues other workers declared: DBOS itself looks
# for new queues once a second, so listing more often would only add queries.
ADOPT_QUEUES_S = 1.0
FOLLOW_POLL_S = 0.1  # how often `run` reads the journal of the run it follows
RECONNECT_S = 600.0  # how long a drive waits for a database that went away before it gives up
LIVE = ("PENDING", "ENQUEUED", "DELAYED")  # a workflow that has not ended
# A workflow that ended without a result (an exception, a cancellation, too many recoveries).
ENDED_BADLY = ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


@dataclass(frozen=True, slots=True)
class DriveArgs:
    """One drive of a run, as `run`, `approve` and `resume` submit it: what the command line chose."""

    run_id: str
    workdir: str | None = None  # overrides the run's own
    agent_cmd: str | None = None  # overrides the run's own
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    timeout_ms: int | None = None
    hints: Hints = field(default_factory=Hints)
    preflight: bool = True  # the worker checks its host before the drive (False: --no-preflight)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a drive workflow ended: the engine's result, or why it could not drive (an exit code and
    the message `run` prints, exactly as the SQLite runtime does)."""

    result: DriveResult | None = None
    code: int | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class UnitJob:
    """One attempt handed to the pool: the resolved request and what the drive's settings say."""

    request: Request
    workdir: str
    agent_cmd: str | None


# -- the worker process ---------------------------------------------------------------------------------


@dataclass
class _Host:
    """What this worker process's workflows share."""

    url: str
    workdir: Path  # where units run when the run's own workdir does not exist on this host
    state: Path  # the drives' private scratch directories
    worker: pool.Worker
    client: pool.Client  # enqueues and watches attempts from any thread, outside DBOS's context
    shared_store: PostgresStore  # the unit workflows' journal reads and writes (their pids): see `store`
    attempts: Attempts = field(default_factory=Attempts)  # the attempts running here (akm_run.stopping)
    notify_cmd: str | None = None  # the notifier of the root runs it drives that have none (--notify-cmd)
    declared: set[str] = field(default_factory=set)
    plans: set[tuple[str, str]] = field(default_factory=set)  # (plan hash, SHA-256 of the stored text) verified
    lock: threading.RLock = field(default_factory=threading.RLock)

    def units_queue(self, width: int) -> str:
        """The units queue for steps of this width, declared by this worker the first time."""
        name = pool.units_queue(width)
        with self.lock:
            if name not in self.declared:
                self.worker.declare_units_queue(width)
                self.declared.add(name)
        return name

    @property
    def store(self) -> PostgresStore:
        """The unit workflows' store, connected again once the server dropped its connection (a
        restart, a failover)."""
        with self.lock:
            if self.shared_store.broken:
                self.reconnect()
            return self.shared_store

    def reconnect(self) -> None:
        with self.lock:
            self.shared_store.close()
            self.shared_store = PostgresStore(self.url)

    def verified(self, run_id: str) -> str:
        """Re-verify a run's stored plan before one of its attempts runs here (a recovered attempt
        too): raises PlanError for a tampered one, or a run that no longer exists. Each stored text is
        verified once per worker. Returns the run's status, read with its plan's digest."""
        found = self.store.plan_digest(run_id)
        if found is None:
            raise PlanError("run", f"run {run_id} does not exist")
        digest, status = found
        if digest in self.plans:
            return status
        row = self.store.run(run_id)
        if row is None:
            raise PlanError("run", f"run {run_id} does not exist")
        stored_plan(row)
        # The digest of the text verified, not the one read before it: a row rewritten in between is
        # a text this worker has not verified.
        self.plans.add((row.plan_hash, hashlib.sha256(row.plan_json.encode()).hexdigest()))
        return row.status

    def adopt_queues(self) -> None:
        """Listen on the units queues other workers declared (a map of a width new to this worker)."""
        queues = self.client.list_queues()
        self.worker.overridden(queues)
        self.worker.follow(queues)
        for queue in queues:
            width = queue.name.removeprefix(pool.UNITS_QUEUES)
            if queue.name not in self.declared and width.isdigit() and int(width) > 0:
                self.units_queue(int(width))


_HOST: _Host | None = None


def _here() -> _Host:
    if _HOST is None:
        raise RuntimeError("akm-run's workflows run only inside `akm-run worker`")
    return _HOST


def client(url: str, pool_size: int = 5) -> pool.Client:
    """A DBOS client on the shared database. Its retry warnings stay off a command's stderr: the
    command reports an unusable database itself, once."""
    if _HOST is None:
        logging.getLogger("dbos").setLevel(logging.ERROR)
    return pool.Client(url, pool_size)


def serve(
    url: str,
    executor_id: str,
    *,
    concurrency: int,
    takeover_after_s: float,
    workdir: Path,
    poll_s: float,
    grace_s: float,
    notify_cmd: str | None = None,
) -> int:
    """`akm-run worker`: serve the pool until SIGTERM or SIGINT, then stop gracefully and exit 0."""
    global _HOST
    worker = pool.Worker(
        url, executor_id, concurrency=concurrency, takeover_after_s=takeover_after_s, queue_poll_s=poll_s
    )
    stop = threading.Event()
    # The schemas first, by one worker at a time (an unusable database is one clear error): DBOS's
    # launch then finds them whole and creates nothing.
    store = pool_schemas.prepare(url, worker.say)
    state = Path(tempfile.mkdtemp(prefix="akm-worker-"))
    dbos = client(url, pool_size=4 + 2 * concurrency)
    # The host exists before DBOS launches: launch recovers this worker's drives, and its queues hand
    # it work, at once.
    _HOST = _Host(url, workdir.absolute(), state, worker, dbos, store, Attempts.for_worker(dbos), notify_cmd)
    worker.wakes.unheard = dbos.announce_end
    worker.start()
    hold("worker-launched")  # race testing: DBOS hands out work before `serve` goes on
    quiet_cancellations()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    _HOST.units_queue(1)

    _warn(worker, executor_id)
    print(
        f"akm-run worker {executor_id}: serving {pool.RUNS_QUEUE} and the units queues with {concurrency} "
        f"unit(s) at a time, taking over workers silent for {takeover_after_s:g}s",
        file=sys.stderr,
        flush=True,
    )
    prune_at = time.monotonic()  # $AKM_RUN_RETENTION: as the worker starts, then hourly
    while not stop.wait(ADOPT_QUEUES_S):
        try:
            _HOST.adopt_queues()
            _warn(worker, executor_id)
            if time.monotonic() >= prune_at:
                prune_at = time.monotonic() + retention.POOL_EVERY_S
                _prune(url, state, executor_id)
        except Exception as error:  # noqa: BLE001 - a database that is away for a while: try again
            print(f"akm-run worker {executor_id}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    print(
        f"akm-run worker {executor_id}: stopping (up to {grace_s:g}s for the work in flight)",
        file=sys.stderr,
        flush=True,
    )
    worker.stop(grace_s)
    _HOST.attempts.close(executor_id)
    shutil.rmtree(state, ignore_errors=True)
    sys.stderr.flush()
    os._exit(exitcodes.COMPLETED)  # threads still inside a workflow would keep the interpreter alive


def _warn(worker: pool.Worker, executor_id: str) -> None:
    """Say the settings of this worker that the pool does not hold (pool.Worker.overridden)."""
    for warning in worker.take_warnings():
        print(f"akm-run worker {executor_id}: warning: {warning}", file=sys.stderr, flush=True)


def _prune(url: str, state: Path, executor_id: str) -> None:
    """This worker's turn at $AKM_RUN_RETENTION, said when it deleted runs."""
    if (pruned := retention.pooled(url, state)) is not None and pruned.runs:
        said = wording.retention_said(outcome=wording.pruned_count(count=len(pruned.runs), verb="deleted"))
        print(f"akm-run worker {executor_id}: {said}", file=sys.stderr, flush=True)


# -- drives -----------------------------------------------------------------------------------------------


@DBOS.workflow(name=DRIVE)
def drive_workflow(args: DriveArgs) -> Outcome:
    """A drive of one run on this worker (no step: its durable state is the journal)."""
    return drive_here(_here(), args)


def drive_here(host: _Host, args: DriveArgs) -> Outcome:
    """Drive the run here. A database that goes away meanwhile (a restart, a failover) does not end
    the drive, which nobody might submit again (a detached run): it starts again from the top once
    the database is back, as a recovered drive does, for up to RECONNECT_S."""
    deadline, pause = time.monotonic() + RECONNECT_S, RECONNECT_PAUSE_S
    while True:
        try:
            outcome = _drive_here(host, args)
            hold("drive-ended")
            return outcome
        except Exception as error:  # noqa: BLE001 - every way a drive cannot go on is reported to `run`
            if not pool.lost_connection(error) or time.monotonic() + pause > deadline:
                code, message = drive_failure(error, args.run_id, args.hints)
                return Outcome(code=code, message=message)
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


def _drive_here(host: _Host, args: DriveArgs) -> Outcome:
    store = DriveStore(host.url, args.run_id)
    try:
        row = store.run(args.run_id)
        if row is None:
            return Outcome(code=exitcodes.USAGE, message=f"no run named {args.run_id!r}")
        notify_cmd = row.notify_cmd
        if host.notify_cmd and not row.notify_cmd and row.parent_run_id is None:  # remembered, like --agent-cmd
            store.remember_notifier(args.run_id, notify_cmd := host.notify_cmd)
        workdir, agent_cmd = _settings(row, args)
        if args.preflight and (refused := _preflight_here(host, store, row, workdir, (agent_cmd, notify_cmd))):
            return refused
        options = Options(
            host.state,
            workdir,
            agent_cmd,
            args.max_concurrency,
            args.timeout_ms,
            progress=Progress(),
            hints=args.hints,
            admit=admission(store, args.run_id, allowed_signers(None)),
        )
        dispatcher = PoolDispatcher(host, str(workdir), agent_cmd)
        engine = Engine(store, options, dispatcher.abort, process=dispatcher, pooled=True)
        try:
            with host.attempts.watched(str(DBOS.workflow_id), engine.abort):  # `run` interrupted on any host
                return Outcome(result=engine.drive(args.run_id))
        except UnitWorkflowEnded as error:
            if error.status != "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
                code, message = drive_failure(error, args.run_id, args.hints)
                return Outcome(code=code, message=message)
            what = f"attempt {error.attempt} of unit {error.unit}"
            return Outcome(result=given_up(store, args.run_id, what, args.hints("run", args.run_id)))
        except Exception as error:
            if pool.lost_connection(error):
                raise  # the database went away: see drive_here
            if isinstance(error, LockHeld):
                hold("drive-turned-away")
            code, message = drive_failure(error, args.run_id, args.hints)
            return Outcome(code=code, message=message)
    finally:
        store.close()


def _preflight_here(
    host: _Host, store: PostgresStore, row: RunRow, workdir: Path, commands: tuple[str | None, str | None]
) -> Outcome | None:
    """The worker's own preflight (with its agent command and notifier, `commands`), before the drive
    dispatches anything: on an error, the run stays active, its journal gets `preflight.failed` with
    the findings, and `run` exits 5 with them."""
    if row.status != "active":
        return None
    here = _workdir(str(workdir), host)
    agent_cmd, notify_cmd = commands
    checked = preflight.Host(
        os.environ, here, wording.given_workdir(workdir=here), agent_cmd, None, row.base_commit, notify_cmd=notify_cmd
    )
    findings = preflight.check(stored_plan(row), checked, store.steps(row.id))
    if not preflight.failed(findings):
        return None
    store.event(row.id, "preflight.failed", findings=[finding.document() for finding in findings])
    text = "\n" + preflight.text(findings).rstrip("\n")
    refused = wording.preflight_failed_on_worker(worker=host.worker.executor_id, run=row.id, findings=text)
    return Outcome(code=refused.exit, message=refused.text)


def _settings(row: RunRow, args: DriveArgs) -> tuple[Path, str | None]:
    """The workdir and agent command of a drive: the command line's, else the run's."""
    workdir = Path(args.workdir or row.workdir or ".")
    return workdir, args.agent_cmd or row.agent_cmd


def _workdir(chosen: str, host: _Host) -> Path:
    """Where a unit runs on this host: the run's workdir when this host has it, else the worker's."""
    path = Path(chosen)
    return path if path.is_absolute() and path.is_dir() else host.workdir


class PoolDispatcher:
    """Shell, script and agent attempts as unit workflows: enqueued under the attempt's dispatch id on
    the units queue of its step's width, partitioned by run and step (so a map's concurrency holds
    across every worker), and waited for. Child-workflow units stay with the drive (their child run
    is driven inline, its own attempts dispatched here)."""

    def __init__(self, host: _Host, workdir: str, agent_cmd: str | None) -> None:
        self.host, self.workdir, self.agent_cmd = host, workdir, agent_cmd
        self.abort = wakes.Abort()  # the drive's: it wakes a wait for an attempt, as the attempt's end does

    def dispatch(self, request: Request) -> End:
        client = self.host.client
        workflow_id = attempt_workflow_id(request.dispatch_id, request.attempt)
        queue = self.host.units_queue(request.width)
        options = EnqueueOptions(
            queue_name=queue,
            workflow_name=UNIT,
            workflow_id=workflow_id,
            app_version=pool.APP_VERSION,
            queue_partition_key=f"{request.run_id}/{request.place.step_id}",
        )
        woken = threading.Event()  # the attempt's workflow ended, or the drive was aborted
        with self.host.worker.wakes.awaiting(workflow_id, woken), self.abort.linked(woken):
            handle: WorkflowHandle[End] = client.enqueue(
                options, UnitJob(dataclasses.replace(request, scratch=None), self.workdir, self.agent_cmd)
            )
            with self.host.worker.waiting_for(queue, client.announce):
                return self._result(handle, request, workflow_id, woken)

    def _result(self, handle: WorkflowHandle[End], request: Request, workflow_id: str, woken: threading.Event) -> End:
        """The attempt's End, once its workflow ended (woken at its end, else read every `result_poll_s`)."""
        if (status := handle.get_status()).status in ENDED_BADLY:
            # Re-attached to an attempt whose workflow ended without a result before a drive could
            # record it. Resuming it would only replay the error DBOS keeps for its step: the
            # attempt was interrupted, and the unit runs again as a new attempt (a new workflow).
            return End("interrupted")
        started = time.monotonic()
        while status.status in LIVE:
            woken.wait(result_poll_s(time.monotonic() - started))
            woken.clear()
            status = handle.get_status()  # also what an abort stops: whether the attempt was dequeued yet
            if self.abort.is_set() and status.status in LIVE:  # one that ended meanwhile is kept
                return stop_attempt(self.host.client, self.host.store, request, workflow_id, status.status)
        if status.status in ENDED_BADLY:
            raise UnitWorkflowEnded(request, status.status, status.error)
        ended: End = handle.get_result()
        return ended


def result_poll_s(age_s: float) -> float:
    """How long a drive waits before it looks again whether an attempt this old (seconds since it
    began waiting) ended."""
    return min(RESULT_POLL_MAX_S, max(RESULT_POLL_MIN_S, age_s / 10))


def attempt_workflow_id(dispatch_id: str, attempt: int) -> str:
    """The workflow of one attempt: its dispatch id (new on every retry, kept when an interrupted or
    aborted attempt's unit runs again, as on SQLite) and its number, so that a drive re-attaching to
    an attempt finds its workflow, and a unit run again is a new workflow, never the ended one's."""
    return f"{dispatch_id}/{attempt}"


class UnitWorkflowEnded(Exception):
    """An attempt's workflow ended without a result (an error inside the worker, a cancellation, or
    DBOS giving up after recovering it too many times): the drive cannot go on."""

    def __init__(self, request: Request, status: str, error: BaseException | None) -> None:
        self.status, self.attempt, self.unit = status, request.attempt, request.place.journal
        why = f": {type(error).__name__}: {error}" if error is not None else ""
        if status == "MAX_RECOVERY_ATTEMPTS_EXCEEDED":
            why = " after DBOS recovered it too many times (each worker running it died before its process started)"
        super().__init__(
            f"the workflow of attempt {request.attempt} of unit {request.place.journal} "
            f"({attempt_workflow_id(request.dispatch_id, request.attempt)}) ended {status}{why}"
        )


@DBOS.workflow(name=UNIT)
def unit_workflow(job: UnitJob) -> End:
    """One attempt of a unit, on whichever worker dequeued it."""
    return attempt(job)


@DBOS.step(name="akm-run-attempt", retries_allowed=False)
def attempt(job: UnitJob) -> End:
    """Run the attempt's process here, unless the journal says it must not run: a recorded
    completion is returned (it never runs again); an attempt whose process an earlier run of this
    step started is interrupted (its worker died and DBOS recovered the workflow: its process, if
    still alive on this host, is stopped, and the drive runs the unit again as a new attempt, as a
    crash reclaim does on SQLite); an attempt the journal already ended, or of a run no longer
    active (abandoned meanwhile), does not run."""
    host, request = _here(), job.request
    try:
        status = host.verified(request.run_id)
    except psycopg.OperationalError:  # a connection the server dropped while the worker was idle
        host.reconnect()
        status = host.verified(request.run_id)
    # The usual case first, in one statement: the drive journaled the attempt running and nobody took it.
    claimed = status == "active" and host.store.claim_attempt(*_attempt_of(request), socket.gethostname())
    if not claimed:
        recorded = next(
            (a for a in host.store.attempts(request.run_id, request.place.journal) if a.attempt == request.attempt),
            None,
        )
        if recorded is not None and recorded.status == "completed":
            return End("completed", output=recorded.output, stderr_tail=recorded.stderr_tail)
        if (stopped := _not_to_run(host.store, request, recorded, status)) is not None:
            return stopped
    settings = Settings(_workdir(job.workdir, host), job.agent_cmd, None, Hints())  # worktrees: isolation.py
    return host.attempts.execute(host.store, settings, request)


def _attempt_of(request: Request) -> tuple[str, str, int]:
    return request.run_id, request.place.journal, request.attempt


def _not_to_run(store: PostgresStore, request: Request, recorded: AttemptRow | None, status: str) -> End | None:
    """Why an attempt that did not complete, and that this step could not claim at once, must not run
    now (None: it runs); `status` is its run's."""
    if status != "active":
        return End("aborted", reason="aborted", message=f"run {request.run_id} is {status}: the unit did not run")
    if recorded is not None and recorded.status != "running":
        return End("interrupted", message=f"the journal ended attempt {request.attempt} as {recorded.status}")
    if recorded is not None:  # running, and taken before: by a worker that died
        units.stop_leftover(recorded.pid, recorded.host)
        if request.isolated:  # its worktree, if the dead worker was on this host, settles as a finished one's
            ids = (request.run_id, request.place.journal, request.place.step_id, request.attempt)
            isolation.reclaim(store, isolation.worker_state(), *ids)
        return End("interrupted", message=f"the worker running attempt {request.attempt} died")
    return None
