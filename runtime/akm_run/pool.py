"""The worker pool on PostgreSQL: how akm-run configures DBOS Transact, and how a live worker takes
over the workflows of one that stopped (docs/scale-out.md). Needs the `postgres` extra.

DBOS recovers, by itself, only the workflows of its own executor id when that executor starts
again; noticing that another host died is left to its commercial Conductor service. The pool does
it with a heartbeat per executor in the same database: every worker beats, and any worker that sees
a beat older than the takeover time hands that executor's workflows back to their queues with
DBOS's own recovery call, which is idempotent (only one executor can dequeue a workflow)."""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import sqlalchemy
from dbos import DBOS, DBOSClient, DBOSConfig
from dbos import _sys_db as dbos_sys_db
from dbos._dbos import _get_dbos_instance, _get_or_create_dbos_registry

from akm_run import wakes
from akm_run.pool_schemas import create_executors, usable

APP_NAME = "akm-run"
# DBOS recovers only workflows of the application version that started them, and derives a version
# from the workflow functions' source unless one is given. akm-run pins it, so that upgrading the
# runtime does not strand the workflows in flight; it changes only when the workflow functions
# change incompatibly (their steps, in order), and docs/scale-out.md says how to upgrade then.
APP_VERSION = "akm-run-workflows-1"
TAKEOVER_AFTER_S = 30.0  # default: a worker silent this long is taken over
BEAT_MAX_S = 60.0  # a worker beats at least this often, whatever its takeover time: see `serving`
SERVING_WITHIN_S = 300.0  # a worker that beat this recently serves the database
QUEUE_POLL_S = 1.0  # DBOS's default: how often a worker looks for work on each queue
# How often a worker polls DBOS's internal queue (DBOS: every second). akm-run puts nothing there:
# it holds only workflows started without a queue (a takeover puts a workflow back on its own).
INTERNAL_QUEUE_POLL_S = 10.0
SCHEMA = "akm_run"
RUNS_QUEUE = "akm-runs"  # the drives of runs
UNITS_QUEUES = "akm-units-c"  # + a width: the attempts of steps running that many units at once

# One clock, the database's: hosts' clocks never decide who is dead.
_BEAT = f"""INSERT INTO {SCHEMA}.executors (executor_id, beat) VALUES (%s, now())
    ON CONFLICT (executor_id) DO UPDATE SET beat = now()"""
_SILENT = f"""SELECT executor_id FROM {SCHEMA}.executors
    WHERE beat < now() - make_interval(secs => %s) AND executor_id <> %s ORDER BY executor_id"""
_FORGET = f"""DELETE FROM {SCHEMA}.executors WHERE executor_id = %s AND beat < now() - make_interval(secs => %s)"""


def lost_connection(error: BaseException) -> bool:
    """Whether an error (psycopg's, or SQLAlchemy's around one) says the database went away: a
    connection that failed or broke on the client side (no SQLSTATE), a connection exception (08),
    or the server shutting down (57P). Anything else is no reason to wait for it."""
    cause = getattr(error, "orig", None) or error
    if not isinstance(cause, psycopg.OperationalError):
        return False
    state = cause.sqlstate
    return state is None or state.startswith(("08", "57P"))


def _dbos_should_retry(error: Exception) -> bool:
    """DBOS's rule for retrying a failed database call, widened to `lost_connection`: DBOS 3.4
    retries "connection failed" but not "connection is bad", libpq's error for a Unix socket that
    is gone while the server restarts. The call then raised, and a workflow that ended meanwhile was
    never marked ended: its drive waited on it for ever (tests/e2e/test_pool_hostile.py)."""
    return _dbos_retriable(error) or lost_connection(error)


_dbos_retriable: Callable[[Exception], bool] = dbos_sys_db.retriable_postgres_exception  # type: ignore[attr-defined]
dbos_sys_db.retriable_postgres_exception = _dbos_should_retry  # type: ignore[attr-defined,assignment]  # DBOS is pinned


def dbos_config(database_url: str, executor_id: str, **overrides: Any) -> DBOSConfig:
    """DBOS's configuration for one akm-run process: the shared database, a pinned application
    version, this process's executor id, and quiet logs (stdout is the product)."""
    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": database_url,
        "application_version": APP_VERSION,
        "executor_id": executor_id,
        "log_level": "WARNING",
        # No liveness round trip (`;`) before every transaction: a quarter of an idle worker's statements.
        # A connection the server dropped fails its next statement instead, which DBOS retries on a
        # new connection (`_dbos_should_retry`) or, in a queue thread, at the next poll.
        "db_engine_kwargs": {"pool_pre_ping": False},
    }
    config.update(overrides)  # type: ignore[typeddict-item]
    return config


_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(: |$)")  # `sqlalchemy.exc.OperationalError: …`


class OneLine(logging.Filter):
    """DBOS's log records on a worker's log, each on one line: a traceback DBOS formats into its
    message (a database away, say) is cut to the exception's own line, and a multi-line message is
    joined. An operator reads what failed, as in the worker's own lines, not where in DBOS."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
        head, traceback, trace = message.partition("Traceback (most recent call last):")
        if traceback:
            raised = [line for line in trace.splitlines() if _EXCEPTION_LINE.match(line)]
            head = f"{head} {raised[-1] if raised else ''}"
        kept = (line for line in head.splitlines() if not line.startswith("(Background on this error at"))
        record.msg, record.args = " ".join(" ".join(kept).split()), ()
        record.exc_info = record.exc_text = record.stack_info = None
        return True


class Client(DBOSClient):
    """DBOS's client with the engine DBOS would make for it (its pool, timeouts and session
    settings), but without the liveness round trip before every transaction (see `dbos_config`)."""

    IDLE_IN_TRANSACTION_MS = 60_000  # DBOS's default for its own connections

    def __init__(self, database_url: str, pool_size: int) -> None:
        self.engine = sqlalchemy.create_engine(
            sqlalchemy.make_url(database_url).set(drivername="postgresql+psycopg"),
            pool_size=pool_size,
            max_overflow=0,
            pool_timeout=30,
            pool_pre_ping=False,
            connect_args={"application_name": "dbos_transact_client", "connect_timeout": 10},
        )
        sqlalchemy.event.listen(self.engine, "connect", self._connected)
        try:
            super().__init__(system_database_engine=self.engine, application_name=APP_NAME)
        except BaseException:
            self.engine.dispose()
            raise

    def _connected(self, connection: Any, _record: Any) -> None:
        """As DBOS does for its own: a session idle inside a transaction ends, releasing its locks
        (committed: the pool rolls back a connection it takes back, which would undo a bare SET)."""
        with connection.cursor() as cursor:
            cursor.execute(f"SET idle_in_transaction_session_timeout = {self.IDLE_IN_TRANSACTION_MS}")
        connection.commit()

    def announce(self, queue: str) -> None:
        """Tell the workers that `queue` has work now (akm_run.wakes)."""
        wakes.announce(self.engine, queue)

    def announce_end(self, workflow_id: str) -> None:
        """Tell the workers that an attempt's workflow ended, for a drive that waits for it elsewhere."""
        wakes.announce(self.engine, workflow_id, wakes.ENDS_CHANNEL)

    def destroy(self) -> None:
        super().destroy()
        self.engine.dispose()  # DBOS leaves an engine it was given to its owner


class Liveness:
    """The executors' heartbeats, and the takeover of silent ones. `beat()` at least every third of
    the takeover time; `take_over()`, in a process where DBOS is launched, as often as a worker
    likes (any number of workers may)."""

    def __init__(self, database_url: str, executor_id: str, takeover_after_s: float = TAKEOVER_AFTER_S) -> None:
        self.url = database_url
        self.executor_id = executor_id
        self.takeover_after_s = takeover_after_s
        with psycopg.connect(self.url, autocommit=True) as connection:
            create_executors(connection)  # a worker's pool_schemas.prepare created it already

    def beat(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            connection.execute(_BEAT, (self.executor_id,))

    def silent(self) -> list[str]:
        """The other executors whose last beat is older than the takeover time."""
        with psycopg.connect(self.url, autocommit=True) as connection:
            rows = connection.execute(_SILENT, (self.takeover_after_s, self.executor_id)).fetchall()
        return [row[0] for row in rows]

    def take_over(self) -> Sequence[str]:
        """Hand every silent executor's pending workflows back to their queues (where any live
        worker, this one included, dequeues them), then forget the executor unless it beat again
        meanwhile. Recovery comes first: a worker that dies between the two leaves the executor
        listed, and the next worker repeats the (idempotent) recovery."""
        taken = self.silent()
        for executor in taken:
            DBOS._recover_pending_workflows([executor])
            with psycopg.connect(self.url, autocommit=True) as connection:
                connection.execute(_FORGET, (executor, self.takeover_after_s))
        return taken


def serving(database_url: str, within_s: float = SERVING_WITHIN_S) -> int | None:
    """How many workers beat within `within_s`; None when no worker has ever served the database
    (DBOS's tables are missing or half-made: a client cannot submit anything). Waits while a worker
    creates the schemas (akm_run.pool_schemas)."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        if not usable(connection):
            return None
        beating = connection.execute(
            f"SELECT count(*) FROM {SCHEMA}.executors WHERE beat > now() - make_interval(secs => %s)", (within_s,)
        ).fetchone()
    return int(beating[0]) if beating else 0


def _stop_background_jobs() -> None:
    """End DBOS's background jobs in this worker. Once a second one process of the pool takes an
    advisory lock and sweeps for delayed workflows to enqueue and workflows past their timeout to
    cancel: about half of an idle worker's statements (docs/performance.md). akm-run enqueues
    nothing with a delay and sets no workflow timeout, so neither sweep can find anything; DBOS has
    no setting for them, and its own shutdown ends them by the same event."""
    _get_dbos_instance()._background_jobs_stop_event.set()


def _finish_in_flight(grace_s: float, woken: wakes.Wakes) -> None:
    """What `DBOS.destroy(workflow_completion_timeout_sec=…)` does first, in steps of 50 ms instead of
    whole seconds: stop dequeuing and give the workflows in flight up to `grace_s` to finish. DBOS
    sleeps a second before it first looks, so every worker's stop took a second with nothing in
    flight, and a grace under a second (`int(grace_s)`) was none."""
    dbos = _get_dbos_instance()
    for event in dbos.background_thread_stop_events:  # the queue threads: nothing more is dequeued
        event.set()
    woken.wake_all()  # the pool's queue threads, waiting on their wake-ups, see the stop now
    deadline = time.monotonic() + grace_s
    while dbos._active_workflows_set.activeList() and time.monotonic() < deadline:
        time.sleep(0.05)


def units_queue(map_concurrency: int) -> str:
    """The queue of the units of maps with this concurrency: one per distinct value, because DBOS's
    per-partition limit (the partition being one map) is a property of the queue."""
    return f"{UNITS_QUEUES}{map_concurrency}"


def _ours(name: str) -> bool:
    """Whether a queue is one of the pool's (the runs queue or a units queue)."""
    return name == RUNS_QUEUE or name.startswith(UNITS_QUEUES)


class Worker:
    """One worker process's part in the pool: DBOS launched under its executor id, the runs queue
    declared, heartbeats and takeover on a thread of their own, and a stop that lets the work in
    flight finish for a while. Workflow functions are registered (imported) before `start()`."""

    def __init__(
        self,
        database_url: str,
        executor_id: str,
        *,
        concurrency: int = 4,
        takeover_after_s: float = TAKEOVER_AFTER_S,
        queue_poll_s: float = QUEUE_POLL_S,
        on_takeover: Callable[[str], None] | None = None,
        database_queues: Sequence[str] = (),
        **dbos_overrides: Any,
    ) -> None:
        self.url = database_url
        self.executor_id = executor_id
        self.concurrency = concurrency
        self.takeover_after_s = takeover_after_s
        self.queue_poll_s = queue_poll_s
        self.on_takeover = on_takeover
        self.dbos_overrides = dbos_overrides
        self.database_queues = database_queues  # queues of other code in the process, polled by DBOS's rule
        self._stop = threading.Event()
        self._beating: threading.Thread | None = None
        self.wakes = wakes.Wakes()
        self._waiting: Counter[str] = Counter()  # attempts this worker's drives wait for, by queue
        self._waiting_lock = threading.Lock()
        self._listener = wakes.Listener(database_url, self.wakes)
        self.warnings: list[str] = []  # what the worker should say (once each), taken by its owner
        self._warned: set[str] = set()

    def start(self) -> None:
        logging.getLogger("dbos").addFilter(OneLine())
        DBOS(config=dbos_config(self.url, self.executor_id, **self.dbos_overrides))
        DBOS.listen_queues(self.database_queues)  # the pool's own queues are polled from memory: `_poll`
        _get_or_create_dbos_registry().get_internal_queue()._polling_interval_sec = INTERNAL_QUEUE_POLL_S
        wakes.install(self.wakes, _ours, lambda name: name.startswith(UNITS_QUEUES))
        DBOS.launch()
        _stop_background_jobs()
        self._listener.start()
        self._declare(RUNS_QUEUE)
        liveness = Liveness(self.url, self.executor_id, self.takeover_after_s)
        liveness.beat()
        self._beating = threading.Thread(target=self._beat, args=(liveness,), name="akm-liveness", daemon=True)
        self._beating.start()

    @property
    def beat_s(self) -> float:
        """How often this worker beats: a third of its takeover time, and at least every BEAT_MAX_S
        (a long takeover time must not make a live worker look gone to `serving`)."""
        return min(self.takeover_after_s / 3, BEAT_MAX_S)

    def _beat(self, liveness: Liveness) -> None:
        """Beat and take over, until stopped, whatever the database does meanwhile. After a beat
        failed (the database away, restarting), every worker's last beat may be older than the
        takeover time, the live ones' too: this worker takes none over until it has beaten for a
        whole takeover time again, by when every live worker has beaten too."""
        failed_at: float | None = None
        beating_since = -float("inf")
        while not self._stop.wait(self.beat_s):
            try:
                liveness.beat()
                if failed_at is not None:
                    self.say(f"beating again after {time.monotonic() - failed_at:.0f}s without the database")
                    failed_at, beating_since = None, time.monotonic()
                if time.monotonic() - beating_since < self.takeover_after_s:
                    continue
                for executor in liveness.take_over():
                    self.wakes.wake_all()  # its workflows are back on their queues
                    if self.on_takeover is not None:
                        self.on_takeover(executor)
            except Exception as error:  # noqa: BLE001 - a database away for a while: beat again next time
                if failed_at is None:
                    failed_at = time.monotonic()
                    self.say(f"cannot beat: {type(error).__name__}: {' '.join(str(error).split())[:300]}")

    def say(self, text: str) -> None:
        """One line on the worker's log (stderr), as `akm-run worker` prints its own."""
        print(f"akm-run worker {self.executor_id}: {text}", file=sys.stderr, flush=True)

    def declare_units_queue(self, map_concurrency: int) -> str:
        """Declare (idempotently) the units queue for maps of this concurrency; its name."""
        name = units_queue(map_concurrency)
        self._declare(name, partition_concurrency=map_concurrency, worker_concurrency=self.concurrency)
        self.wakes.added()
        return name

    @contextmanager
    def waiting_for(self, queue: str, announce: Callable[[str], None]) -> Iterator[None]:
        """Around a drive's wait for an attempt it just enqueued on `queue`: wake this worker's
        thread of the queue, and `announce` it to every worker when this one has no slot for it
        (this worker's drives wait for more attempts there than it runs at once, or it runs as many
        as that already). Announcing every attempt would wake every worker for each."""
        with self._waiting_lock:
            self._waiting[queue] += 1
            crowded = self._waiting[queue] > self.concurrency
        self.wakes.wake(queue)
        if crowded or _get_dbos_instance()._active_workflows_set.count_for_queue(queue) >= self.concurrency:
            announce(queue)
        try:
            yield
        finally:
            with self._waiting_lock:
                self._waiting[queue] -= 1

    def _declare(
        self, name: str, partition_concurrency: int | None = None, worker_concurrency: int | None = None
    ) -> None:
        """Declare a queue with this worker's settings, saying so (`warnings`) when they replace
        other values a worker had stored: DBOS keeps one value per queue, for every worker."""
        before = DBOS.retrieve_queue(name)
        self._poll(
            name,
            partition_concurrency=partition_concurrency,
            worker_concurrency=worker_concurrency,
            polling_interval_sec=self.queue_poll_s,
        )
        stored = DBOS.register_queue(
            name,
            partition_concurrency=partition_concurrency,
            worker_concurrency=worker_concurrency,
            polling_interval_sec=self.queue_poll_s,
            on_conflict="always_update",
        )
        self.follow([stored])
        if before is not None:
            for option, theirs, ours in self._settings(before):
                if theirs != ours:
                    self._warn(
                        f"{option} {ours} replaces {theirs}, another worker's, for every worker in the pool: "
                        f"DBOS keeps one value per queue; give every worker the same {option}"
                    )

    @staticmethod
    def _poll(name: str, **settings: Any) -> Any:
        """The queue this worker polls for `name`: one of DBOS's in-memory queues (as its internal
        queue is), created with these settings the first time. DBOS would poll a queue declared in the
        database by reading its row again before every poll, one more transaction per queue per
        poll; the pool's queues keep their settings in the database all the same (one value for the
        whole pool, docs/scale-out.md), which `follow` copies here once a second."""
        registry = _get_or_create_dbos_registry()
        return registry._register_internal_queue(name, **settings)

    def follow(self, queues: Sequence[Any]) -> None:
        """Poll the pool's queues with their settings as stored now (listed or just declared): what a
        worker started since declared holds for this one too, as DBOS's database queues do."""
        registry = _get_or_create_dbos_registry()
        for queue in queues:
            if (polled := registry.internal_queue_map.get(queue.name)) is not None and _ours(queue.name):
                polled._refresh_fields(queue)

    def overridden(self, queues: Sequence[Any]) -> None:
        """Say (`warnings`, once per value) where the pool's queues, as listed now, no longer hold this
        worker's settings: a worker started since declared them with its own, which every worker
        (this one too) now uses."""
        for queue in queues:
            if not _ours(queue.name):
                continue
            for option, theirs, ours in self._settings(queue):
                if theirs != ours:
                    self._warn(
                        f"the pool now uses {option} {theirs}, not this worker's {ours}, for every worker: "
                        f"another worker declared its own (DBOS keeps one value per queue); give every "
                        f"worker the same {option}"
                    )

    def _settings(self, queue: Any) -> list[tuple[str, str, str]]:
        """(option, the queue's stored value, this worker's) for the options a queue stores. DBOS's
        Queue caches them in private fields; its public properties would read the database again."""
        found = [("--poll", f"{queue._polling_interval_sec * 1000:g}ms", f"{self.queue_poll_s * 1000:g}ms")]
        if queue.name.startswith(UNITS_QUEUES) and queue._worker_concurrency is not None:
            found.append(("--concurrency", str(queue._worker_concurrency), str(self.concurrency)))
        return found

    def take_warnings(self) -> list[str]:
        """The warnings not taken yet."""
        taken, self.warnings = self.warnings, []
        return taken

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self.warnings.append(message)

    def stop(self, grace_s: float) -> None:
        """Stop beating and give the workflows in flight up to `grace_s` to finish; those that do
        not stay PENDING under this executor id, for this worker's next start or for a takeover.
        Threads still inside a workflow are not stopped: the process exits with os._exit."""
        self._stop.set()
        self._listener.stop()
        if self._beating is not None:
            self._beating.join()
        _finish_in_flight(grace_s, self.wakes)
        DBOS.destroy(workflow_completion_timeout_sec=0)
