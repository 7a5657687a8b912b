"""The run journal on PostgreSQL: akm_run.store's transitions over psycopg, in a schema of their own
(docs/scale-out.md), shared by every host. Needs the `postgres` extra.

The dialect under the shared SQL: its `?` parameters as psycopg's `%s`, `BEGIN`/`COMMIT` on an
autocommit connection, a non-durable transaction as `synchronous_commit = off` (as SQLite's
`synchronous = NORMAL`), the migrations of akm_run.migrations.POSTGRES_MIGRATIONS applied by one host
at a time, and the run lock a session advisory lock that the server releases when its holder's
connection dies."""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

import psycopg

from akm_run.database import Rows
from akm_run.deletions import RUN_TABLES
from akm_run.locks import LockHeld
from akm_run.migrations import POSTGRES_MIGRATIONS
from akm_run.queries import EVENT_COLUMNS, TREE
from akm_run.rows import Event
from akm_run.store import Store

SCHEMA = "akm_run"
# Advisory locks of runs: (LOCK_SPACE, hashtext(run id)), apart from anything else on the server.
LOCK_SPACE = 0x616B6D  # "akm"

# Publishers of one exclusive ref, one at a time: (EXCLUSIVE_SPACE, hashtext(ref)), for a transaction.
EXCLUSIVE_SPACE = 0x616B6E  # "akn", beside the runs' LOCK_SPACE

# One worker of the pool at a time prunes ($AKM_RUN_RETENTION): a single-key advisory lock, apart
# from the runs' two-key ones.
RETENTION_LOCK = 0x616B6D_7265_74  # "akm" "ret"

# A run's tree on runs_by_parent, then its events on events_by_run (PostgresStore.progress_events).
PROGRESS_EVENTS = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = %s UNION ALL SELECT r.id FROM runs r JOIN tree "
    "ON r.parent_run_id = tree.id) SELECT seq, run_id, kind, step_id, unit_id, data_json, at FROM events "
    "WHERE run_id = ANY(ARRAY(SELECT id FROM tree)) AND seq > %s ORDER BY seq"
)


@functools.lru_cache(maxsize=512)
def placeholders(sql: str) -> str:
    """A statement of the shared SQL, in DB-API's qmark style, in psycopg's format style: each `?`
    outside a quoted literal becomes `%s`, and every `%` is doubled so that psycopg reads it as itself."""
    pieces: list[str] = []
    quoted = False
    for char in sql:
        quoted ^= char == "'"  # a quote doubled inside a literal leaves it and enters it again
        pieces.append("%%" if char == "%" else "%s" if char == "?" and not quoted else char)
    return "".join(pieces)


def _connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection in the journal's schema, named for `pg_stat_activity`."""
    name = f"akm-run {socket.gethostname()} {os.getpid()}"[:63]
    connection = psycopg.connect(url, autocommit=True, application_name=name)
    connection.execute(f"SET search_path TO {SCHEMA}")
    return connection


def text_encoded(connection: psycopg.Connection[Any]) -> None:
    """Refuse a database that does not hold text as UTF-8 (SQL_ASCII: it stores any bytes as text,
    and psycopg returns its text as bytes, which neither the journal nor SQLAlchemy and DBOS read),
    before anything is created in it: as the database being unusable, named (the error is
    psycopg's), not as an internal error."""
    row = connection.execute("SHOW server_encoding").fetchone()
    encoding = row[0] if row is not None else "unknown"
    if isinstance(encoding, bytes):  # how psycopg returns text from a SQL_ASCII database
        encoding = encoding.decode("ascii", "replace")
    if encoding.upper() != "UTF8":
        raise psycopg.NotSupportedError(
            f"its encoding is {encoding}, and akm-run needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8')"
        )


class PostgresStore(Store):
    """The run journal in a PostgreSQL database (akm_run.journal.Journal), shared by every host."""

    IntegrityError = (psycopg.errors.IntegrityError,)
    MIGRATIONS = POSTGRES_MIGRATIONS
    # `akm-run events --children`: the tree read through an array, as PROGRESS_EVENTS reads it.
    TREE_EVENTS = (
        TREE + f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ANY(ARRAY(SELECT id FROM tree)) AND seq > ? "
        "ORDER BY seq LIMIT ?"
    )

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url
        self._pg = _connect(url)
        try:
            text_encoded(self._pg)
        except BaseException:
            self._pg.close()
            raise
        self._migrate()

    def close(self) -> None:
        self._pg.close()

    def progress_events(self, run_id: str, after: int) -> list[Event]:
        """A run's and its child runs' events after event `after` (a seq), oldest first: what `run`
        draws progress from while a worker drives the run. One query, indexed: the run's tree on
        runs_by_parent, then its events on events_by_run. (Joined to the tree instead of read through
        an array, the events table was hashed whole: the planner cannot tell how few runs a recursive
        query yields; bench/follow_cost.py measures it.)"""
        with self._lock:
            found = self._pg.execute(PROGRESS_EVENTS, (run_id, after)).fetchall()
        return [Event(q, r, k, s, u, json.loads(d or "{}"), a) for q, r, k, s, u, d, a in found]

    def plan_digest(self, run_id: str) -> tuple[tuple[str, str], str] | None:
        """(plan hash, SHA-256 of the stored plan text in UTF-8, hex) of a run, whether its plan
        changed, cheaply, and its status, without its plan's text."""
        with self._lock:
            row = self._pg.execute(
                "SELECT plan_hash, encode(sha256(convert_to(plan_json, 'UTF8')), 'hex'), status FROM runs WHERE id = %s",
                (run_id,),
            ).fetchone()
        return None if row is None else ((str(row[0]), str(row[1])), str(row[2]))

    @property
    def broken(self) -> bool:
        """Whether the server dropped this store's connection (it cannot be used again)."""
        return bool(self._pg.broken or self._pg.closed)

    def _begin(self, durable: bool) -> None:
        self._pg.execute("BEGIN")
        if not durable:  # reaches the server before the call returns, as on SQLite; fsynced later
            self._pg.execute("SET LOCAL synchronous_commit TO OFF")

    def _end(self, statement: str, durable: bool) -> None:
        self._pg.execute(statement)

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> Rows:
        with self._lock:
            return self._pg.execute(placeholders(sql), args)

    def _applied(self) -> set[int]:
        # One migrating process at a time, whichever host it runs on.
        self._pg.execute("SELECT pg_advisory_xact_lock(%s, 0)", (LOCK_SPACE,))
        # Created only when missing: even IF NOT EXISTS needs the right to create, which a user
        # of a database its administrator set up does not have (docs/scale-out.md).
        if not table_exists(self._pg, f"{SCHEMA}.migrations"):
            self._pg.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            self._pg.execute(
                "CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)"
            )
        return {row[0] for row in self._pg.execute("SELECT version FROM migrations")}

    def _run_script(self, script: str) -> None:
        self._pg.execute(script.encode())  # several statements, as one unparameterised query

    def _name(self) -> str:
        return "the database"

    @contextmanager
    def lock(self, run_id: str, wait_s: float = 0.0) -> Iterator[None]:
        """The run's driver lock: an advisory lock on a connection of its own, which the server
        releases when that connection ends, however its process ended. Raises LockHeld when another
        holds it, after waiting up to `wait_s` for it (a pooled drive: see drives.DriveStore)."""
        with _connect(self.url) as connection:
            if wait_s > 0:
                try:
                    connection.execute(f"SET lock_timeout = {max(1, int(wait_s * 1000))}")
                    connection.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (LOCK_SPACE, run_id))
                except psycopg.errors.LockNotAvailable:
                    raise LockHeld(run_id, _holder(connection, run_id), live=True) from None
            else:
                taken = connection.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_SPACE, run_id))
                if not ((row := taken.fetchone()) and row[0]):
                    raise LockHeld(run_id, _holder(connection, run_id), live=True)
            try:
                yield
            finally:
                # Released here, not only as the connection ends: the server ends a session after
                # its client has gone, so a command started at once could still find the run locked.
                with suppress(psycopg.Error):
                    connection.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (LOCK_SPACE, run_id))

    def hold_for_deletion(self, run_id: str, held: ExitStack) -> bool:
        """The run's advisory lock for this transaction: a driver's session lock on the run excludes
        it, and a driver that comes after the commit finds the run gone."""
        with self._lock:
            row = self._pg.execute(
                "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", (LOCK_SPACE, run_id)
            ).fetchone()
        return bool(row and row[0])

    def _serialise_publishers(self, ref: str) -> None:
        """A transaction-level advisory lock on the ref: the next publisher's check waits for this
        one's commit, and then sees its run (each statement reads what was committed before it)."""
        self._execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (EXCLUSIVE_SPACE, ref))

    def vacuum(self) -> None:
        with self._lock:
            for table in (*RUN_TABLES, "runs", "events"):
                self._pg.execute(f"VACUUM {table}")

    @contextmanager
    def retention_turn(self) -> Iterator[bool]:
        """Whether this store took the pool's retention lock (held inside the block): False while
        another worker prunes."""
        with self._lock:
            row = self._pg.execute("SELECT pg_try_advisory_lock(%s)", (RETENTION_LOCK,)).fetchone()
        taken = bool(row and row[0])
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    self._pg.execute("SELECT pg_advisory_unlock(%s)", (RETENTION_LOCK,))

    def driven(self, run_id: str) -> bool:
        """Whether a driver on any host holds the run's lock (a dead one's was released with its
        connection). Looked up, never taken: a drive starting meanwhile is not turned away."""
        with self._lock:
            return bool(_holder(self._pg, run_id))


def table_exists(connection: psycopg.Connection[Any], table: str) -> bool:
    """Whether a table (schema-qualified) exists and this user may see it."""
    row = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()
    return bool(row and row[0])


def _holder(connection: psycopg.Connection[Any], run_id: str) -> dict[str, Any]:
    """Who holds a run's lock, as LockHeld names it: the holder's host and pid, and since when."""
    row = connection.execute(
        "SELECT a.application_name, extract(epoch FROM a.backend_start) FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND l.classid = %s AND l.objid = hashtext(%s)::oid AND l.objsubid = 2",
        (LOCK_SPACE, run_id),
    ).fetchone()
    if row is None:
        return {}
    _, host, pid = [*str(row[0]).split(" "), "", "", ""][:3]
    return {"host": host, "pid": int(pid) if pid.isdigit() else None, "started": float(row[1])}
