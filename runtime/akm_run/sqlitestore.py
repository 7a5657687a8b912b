"""The run journal on SQLite: one state directory's `state.db`, and lock files beside it.

The dialect under akm_run.store's transitions: sqlite3's own `?` parameters, a write transaction as
`BEGIN IMMEDIATE`, a durable one committed with `synchronous = FULL` (the others with NORMAL, in WAL
mode), the migrations of akm_run.migrations.SQLITE_MIGRATIONS, and the run lock a lock file naming
its holder (akm_run.locks)."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any, Self

from akm_run.database import Rows
from akm_run.locks import LockHeld, RunLock
from akm_run.migrations import SQLITE_MIGRATIONS
from akm_run.stateroot import make_state_dir
from akm_run.store import Store

DB_NAME = "state.db"
BUSY_TIMEOUT_MS = 10_000


class StateReadOnly(Exception):
    """The state directory cannot be written (read-only location, permissions)."""


class SQLiteStore(Store):
    """The run journal of one state directory (akm_run.journal.Journal, on SQLite)."""

    IntegrityError = (sqlite3.IntegrityError,)
    MIGRATIONS = SQLITE_MIGRATIONS

    def __init__(self, state_dir: Path, *, readonly: bool = False) -> None:
        super().__init__()
        self.state_dir = state_dir
        self.path = state_dir / DB_NAME
        if readonly:
            self._db = _open_readonly(self.path)
            if self.schema_version() != len(self.MIGRATIONS):
                raise StateReadOnly(
                    f"{self.path} has schema version {self.schema_version()}, this akm-run reads version "
                    f"{len(self.MIGRATIONS)}, and the state directory cannot be written to upgrade it"
                )
            return
        make_state_dir(state_dir)
        self._db = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")  # durable transactions raise it (see _begin)
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

    def lock(self, run_id: str) -> AbstractContextManager[Any]:
        """The run's driver lock: a lock file in the state directory (raises LockHeld on entry)."""
        return RunLock(self.state_dir, run_id)

    def driven(self, run_id: str) -> bool:
        """Whether a live driver holds the run's lock (one on another host counts as live)."""
        return RunLock(self.state_dir, run_id).driven()

    def hold_for_deletion(self, run_id: str, held: ExitStack) -> bool:
        """The run's lock file and byte, released (and the file removed) once `held` closes."""
        lock = RunLock(self.state_dir, run_id)
        try:
            lock.acquire()
        except LockHeld:
            return False
        held.callback(lock.release)
        return True

    def vacuum(self) -> None:
        self._execute("VACUUM")

    def _serialise_publishers(self, ref: str) -> None:
        """Nothing to do: a write transaction (`BEGIN IMMEDIATE`) already excludes every other writer."""

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> Rows:
        with self._lock:
            return self._db.execute(sql, args)

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

    def _applied(self) -> set[int]:
        self._db.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at REAL)")
        return {row[0] for row in self._db.execute("SELECT version FROM migrations")}

    def _run_script(self, script: str) -> None:
        for statement in _statements(script):
            self._db.execute(statement)

    def _name(self) -> str:
        return str(self.path)


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
    found, current = [], ""
    for line in script.strip().splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            found.append(current.strip())
            current = ""
    if current.strip():
        found.append(current.strip())
    return found
