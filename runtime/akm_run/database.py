"""The seam between the journal's SQL, written once (akm_run.queries, akm_run.store), and the database
dialect under it (akm_run.sqlitestore, akm_run.pgstore).

A dialect supplies: a connection that runs one statement in DB-API's qmark style (`?` parameters),
each dialect turning them into its driver's; how a durable and a non-durable transaction begin and
end; its own migration list (akm_run.migrations), how a migration script runs, and how a migrating
process finds the versions applied; the run lock; what a statement raises when it breaks a UNIQUE
constraint. Everything else is common: nested short transactions, the migrations' order and records,
every query and transition. What both dialects spell alike needs no seam: the upserts (`ON CONFLICT …
DO UPDATE SET … = excluded.…`), `COALESCE`, and a parameter's type given by `CAST(? AS …)` where
PostgreSQL cannot infer it."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar, Protocol

from akm_run.migrations import migrate


class Rows(Protocol):
    """What a statement returns, as the store reads it (a sqlite3 or a psycopg cursor)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Database(ABC):
    """One journal's database. Safe to share between the threads of one driver: statements are
    serialised by a lock, and each transaction is short."""

    # What a statement raises when it breaks a UNIQUE constraint.
    IntegrityError: ClassVar[tuple[type[Exception], ...]]
    # The dialect's migrations, in order (version N is the Nth).
    MIGRATIONS: ClassVar[Sequence[str]]

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0

    # -- the dialect ------------------------------------------------------------------------------

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def lock(self, run_id: str) -> AbstractContextManager[Any]:
        """The run's driver lock (raises locks.LockHeld on entry while another holds it)."""

    @abstractmethod
    def driven(self, run_id: str) -> bool:
        """Whether a live driver holds the run's lock."""

    @abstractmethod
    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> Rows:
        """One statement with `?` parameters, serialised by the store's lock."""

    @abstractmethod
    def _begin(self, durable: bool) -> None: ...

    @abstractmethod
    def _end(self, statement: str, durable: bool) -> None:
        """COMMIT or ROLLBACK (`statement`) the transaction `_begin(durable)` began."""

    @abstractmethod
    def _applied(self) -> set[int]:
        """In the migrating transaction: the versions applied, the migrations table created first
        where it is missing."""

    @abstractmethod
    def _run_script(self, script: str) -> None:
        """One migration of the dialect's list: several statements."""

    @abstractmethod
    def _name(self) -> str:
        """The store, as an error names it."""

    # -- transactions and migrations --------------------------------------------------------------

    @contextmanager
    def transaction(self, durable: bool = True) -> Iterator[None]:
        """One short write transaction; nested uses join the outer one.

        A durable commit is fsynced (it survives power loss); the others reach the server or the
        operating system before the call returns (they survive any crash of akm-run) and are fsynced
        by the next durable commit or checkpoint. Runs are published and settled durably; the unit
        journal is not, because losing its last entries to a power cut only repeats a unit, which
        dispatch (at-least-once) already allows, and a process it started died with the machine."""
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

    def _migrate(self) -> None:
        """Apply, in one transaction, every migration of the dialect's list not applied yet."""
        with self.transaction():
            migrate(self.MIGRATIONS, self._applied(), self._apply, self._name())

    def _apply(self, version: int, script: str) -> None:
        self._run_script(script)
        self._execute("INSERT INTO migrations VALUES (?, ?)", (version, time.time()))

    def schema_version(self) -> int:
        row = self._execute("SELECT MAX(version) FROM migrations").fetchone()
        return int(row[0] or 0) if row else 0
