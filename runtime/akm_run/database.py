"""The SQLite database under a store: connection, pragmas, short transactions, migrations."""

from __future__ import annotations

import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, Self

from akm_run.migrations import MIGRATIONS, migrate

DB_NAME = "state.db"
BUSY_TIMEOUT_MS = 10_000


class StateReadOnly(Exception):
    """The state directory cannot be written (read-only location, permissions)."""


class Rows(Protocol):
    """What a statement returns, as the store reads it (a sqlite3 or a psycopg cursor)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Database:
    """One state directory's database. Safe to share between the threads of one driver:
    statements are serialised by a lock, and each transaction is short."""

    # What a statement raises when it breaks a UNIQUE constraint.
    IntegrityError: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        self.state_dir = state_dir
        self.path = state_dir / DB_NAME
        self._lock = threading.RLock()
        self._depth = 0
        if readonly:
            self._db = _open_readonly(self.path)
            if self.schema_version() != len(MIGRATIONS):
                raise StateReadOnly(
                    f"{self.path} has schema version {self.schema_version()}, this akm-run reads version "
                    f"{len(MIGRATIONS)}, and the state directory cannot be written to upgrade it"
                )
            return
        state_dir.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")  # durable transactions raise it (see transaction)
        self._db.execute("PRAGMA foreign_keys = ON")
        # Checkpoint the WAL into the database every ~40 MB instead of every ~4 MB: each checkpoint
        # syncs, and the default made them a third of a unit's journaling cost. The last connection
        # to close checkpoints whatever remains.
        self._db.execute("PRAGMA wal_autocheckpoint = 10000")
        self._migrate()

    @classmethod
    def for_reading(cls, state_dir: Path) -> Self:
        """The store, for commands that only read (status, list, logs): opened as usual, or
        read-only when the state directory cannot be written."""
        if not writable(state_dir):
            return cls(state_dir, readonly=True)
        return cls(state_dir)

    def close(self) -> None:
        self._db.close()

    # -- transactions and migrations --------------------------------------------------------------

    @contextmanager
    def transaction(self, durable: bool = True) -> Iterator[None]:
        """One short write transaction (BEGIN IMMEDIATE); nested uses join the outer one.

        A durable commit is fsynced (it survives power loss); the others reach the operating system
        before the call returns (they survive any crash of akm-run) and are fsynced by the next
        durable commit or checkpoint. Runs are published and settled durably; the unit journal is
        not, because losing its last entries to a power cut only repeats a unit, which dispatch
        (at-least-once) already allows, and a process it started died with the machine."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._begin(durable)
            self._depth = 1
            try:
                yield
            except BaseException:
                self._end("ROLLBACK", durable)
                raise
            else:
                self._end("COMMIT", durable)
            finally:
                self._depth = 0

    def _begin(self, durable: bool) -> None:
        if durable:
            self._db.execute("PRAGMA synchronous = FULL")
        self._db.execute("BEGIN IMMEDIATE")

    def _end(self, statement: str, durable: bool) -> None:
        try:
            self._db.execute(statement)
        finally:
            if durable:
                self._db.execute("PRAGMA synchronous = NORMAL")

    def _migrate(self) -> None:
        with self.transaction():
            self._db.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at REAL)")
            applied = {row[0] for row in self._db.execute("SELECT version FROM migrations")}
            migrate(applied, self._apply, str(self.path))

    def _apply(self, version: int, script: str) -> None:
        for statement in _statements(script):
            self._db.execute(statement)
        self._db.execute("INSERT INTO migrations VALUES (?, ?)", (version, time.time()))

    def schema_version(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(version) FROM migrations").fetchone()
        return int(row[0] or 0)

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> Rows:
        with self._lock:
            return self._db.execute(sql, args)


def writable(state_dir: Path) -> bool:
    """Whether a state directory (or, before it exists, the directory it would be made in) can be
    written: a probe file is created and removed (permission bits alone do not show a read-only mount)."""
    existing = state_dir.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return False
    try:
        fd, probe = tempfile.mkstemp(prefix=".akm-run-probe-", dir=existing)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


def _open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection; where SQLite cannot even create its shared-memory file beside the
    database (a read-only location), the database is read as an immutable snapshot."""
    if not path.exists():
        raise StateReadOnly(f"{path} does not exist")
    uri = path.absolute().as_uri()
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=False)


def _statements(script: str) -> list[str]:
    """Split a migration into statements (sqlite3.complete_statement keeps triggers whole)."""
    statements, current = [], ""
    for line in script.strip().splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements
