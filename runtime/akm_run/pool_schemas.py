"""The pool's schemas on PostgreSQL (docs/scale-out.md): the run journal's (akm_run), the workers'
heartbeats (akm_run.executors) and DBOS's system schema (dbos), created or migrated by one worker at a
time and never used half-made. Needs the `postgres` extra.

DBOS applies its migrations one transaction each, so a process that reads its tables meanwhile finds
some of them, or some of their columns, missing; and DBOS's own migration lock gives up after 30 s
and migrates beside its holder. A worker therefore creates every schema under one session advisory
lock of its own, and a command that submits to the pool first takes that lock shared: it waits while
a worker creates the schemas, then finds them whole, or finds them missing or half-made (no worker
finished creating them: one killed midway leaves them to the next) and says that no worker has
served the database yet. The server releases the lock with its holder's connection, however that
process ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
from dbos import DBOS
from dbos._migration import get_dbos_migrations

from akm_run.children import hold
from akm_run.pgstore import SCHEMA, PostgresStore, table_exists, text_encoded

# A single bigint key: never one of the (LOCK_SPACE, n) pairs of the journal's and runs' locks.
SCHEMAS_LOCK = 0x616B6D_736368  # "akm" "sch"
SCHEMAS_WAIT_S = 600  # how long a command waits for a worker that creates the schemas
SCHEMAS_POLL_S = 0.1  # how often a waiting process tries the schemas' lock again
DBOS_SCHEMA = "dbos"
DBOS_VERSION = len(get_dbos_migrations(DBOS_SCHEMA, True))  # the system schema version this DBOS needs
EXECUTORS = (
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.executors (
        executor_id text PRIMARY KEY,
        beat timestamptz NOT NULL
    )""",
)


class SchemasBusy(Exception):
    """Another process held the schemas' lock for longer than a command waits."""


def create_executors(connection: psycopg.Connection[Any]) -> None:
    """The heartbeats' table, when missing (created only then: see PostgresStore._applied)."""
    if not table_exists(connection, f"{SCHEMA}.executors"):
        for statement in EXECUTORS:
            connection.execute(statement)


def prepare(url: str, say: Callable[[str], None]) -> PostgresStore:
    """A worker's start: every schema of the pool created or migrated, by one worker at a time (the
    others wait, saying so); the journal, open. Nothing is created where everything exists, so a
    user without the right to create uses a database an administrator set up."""
    with psycopg.connect(url, autocommit=True) as connection:
        text_encoded(connection)
        if not _take(connection, "pg_try_advisory_lock"):
            say("waiting for another worker to create the pool's schemas")
            while not _take(connection, "pg_try_advisory_lock"):
                time.sleep(SCHEMAS_POLL_S)
        hold("schema-locked")
        store = PostgresStore(url)  # the journal: one transaction, under its own migration lock
        try:
            create_executors(connection)
            if not whole(connection):
                DBOS.migrate(url, schema=DBOS_SCHEMA)
        except BaseException:
            store.close()
            raise
        return store  # the lock ends with the connection


def usable(connection: psycopg.Connection[Any]) -> bool:
    """Whether the pool's schemas are whole, once no worker is creating them: DBOS's system schema at
    the version this DBOS needs (or a newer one, a newer worker's) and the heartbeats' table. Raises
    SchemasBusy when a worker takes longer than SCHEMAS_WAIT_S to create them, and refuses a database
    not encoded in UTF-8 (`text_encoded`)."""
    text_encoded(connection)
    deadline = time.monotonic() + SCHEMAS_WAIT_S
    while not _take(connection, "pg_try_advisory_lock_shared"):
        hold("schema-busy")
        if time.monotonic() > deadline:
            raise SchemasBusy(
                f"another akm-run worker has been creating the pool's schemas for {SCHEMAS_WAIT_S}s; "
                "try again once it serves"
            )
        time.sleep(SCHEMAS_POLL_S)
    try:
        return whole(connection)
    finally:
        connection.execute("SELECT pg_advisory_unlock_shared(%s)", (SCHEMAS_LOCK,))


def _take(connection: psycopg.Connection[Any], function: str) -> bool:
    """Try the schemas' lock once. Waiting is polled, never a statement that blocks: a session waiting
    inside a statement holds a snapshot, and DBOS's online migrations (CREATE INDEX CONCURRENTLY)
    wait for every snapshot to end, so the holder would wait for its waiter for ever."""
    row = connection.execute(f"SELECT {function}(%s)", (SCHEMAS_LOCK,)).fetchone()
    return bool(row and row[0])


def whole(connection: psycopg.Connection[Any]) -> bool:
    """Whether DBOS's system schema is at this DBOS's version or newer, and the heartbeats' table exists."""
    if not table_exists(connection, f"{DBOS_SCHEMA}.dbos_migrations"):
        return False
    row = connection.execute(f"SELECT max(version) FROM {DBOS_SCHEMA}.dbos_migrations").fetchone()
    current = bool(row and row[0] is not None and row[0] >= DBOS_VERSION)
    return current and table_exists(connection, f"{SCHEMA}.executors")
