"""The state store: one SQLite database (WAL), append-only migrations, and every SQL statement.

Each state change is one short transaction (`with store.transaction():`). The events table is
append-only; every event kind names the transition it records (see EVENT_KINDS)."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from akm_run.signing import Signer
from akm_run.strictjson import dumps
from akm_run.trust import Signature

DB_NAME = "state.db"
BUSY_TIMEOUT_MS = 10_000

# Ordered and append-only: a released migration is never edited, only followed by a new one.
# tests/unit/test_store.py pins this list.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        ref TEXT NOT NULL,
        title TEXT NOT NULL,
        plan_hash TEXT NOT NULL,
        plan_json TEXT NOT NULL,
        params_json TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('active', 'completed', 'failed', 'blocked')),
        current_step INTEGER NOT NULL DEFAULT 0,
        parent_run_id TEXT REFERENCES runs(id),
        parent_unit_id TEXT,
        invocation_key TEXT UNIQUE,
        exported_json TEXT,
        failure_json TEXT,
        notes TEXT,
        units_dispatched INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX runs_by_parent ON runs(parent_run_id);
    CREATE TABLE steps (
        run_id TEXT NOT NULL REFERENCES runs(id),
        step_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        status TEXT NOT NULL
            CHECK (status IN ('pending', 'running', 'completed', 'failed', 'blocked', 'skipped')),
        output_json TEXT,
        notes TEXT,
        failure_reason TEXT,
        failure_message TEXT,
        gate_iteration INTEGER NOT NULL DEFAULT 0,
        gate_loops INTEGER NOT NULL DEFAULT 0,
        gate_feedback TEXT,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, step_id)
    );
    CREATE TABLE units (
        run_id TEXT NOT NULL REFERENCES runs(id),
        unit_id TEXT NOT NULL,
        step_id TEXT NOT NULL,
        item_index INTEGER,
        input_hash TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
        output_json TEXT,
        failure_reason TEXT,
        failure_message TEXT,
        child_run_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (run_id, unit_id)
    );
    CREATE TABLE attempts (
        run_id TEXT NOT NULL,
        unit_id TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        dispatch_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'aborted', 'interrupted')),
        reason TEXT,
        exit_code INTEGER,
        pid INTEGER,
        host TEXT,
        stderr_tail TEXT,
        started_at REAL NOT NULL,
        finished_at REAL,
        PRIMARY KEY (run_id, unit_id, attempt),
        FOREIGN KEY (run_id, unit_id) REFERENCES units(run_id, unit_id)
    );
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        step_id TEXT,
        unit_id TEXT,
        data_json TEXT,
        at REAL NOT NULL
    );
    CREATE INDEX events_by_run ON events(run_id, seq);
    CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    """,
    # Runs remember how they were started (`resume`, `approve` and `run RUN` reuse it); each
    # attempt keeps what its unit printed and why it failed (`akm-run logs`).
    """
    ALTER TABLE runs ADD COLUMN workdir TEXT;
    ALTER TABLE runs ADD COLUMN agent_cmd TEXT;
    ALTER TABLE attempts ADD COLUMN output_json TEXT;
    ALTER TABLE attempts ADD COLUMN message TEXT;
    """,
    # Signed runs (signing.md): the signed file's exact bytes and the signature, so every re-drive
    # re-checks them; the allowed signers file they were checked against, read again by re-drives.
    """
    CREATE TABLE signatures (
        run_id TEXT PRIMARY KEY REFERENCES runs(id),
        plan_file BLOB NOT NULL,
        signature BLOB NOT NULL,
        principal TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        allowed_signers TEXT NOT NULL
    );
    """,
)

EVENT_KINDS = (
    "run.published",  # a run row was created (top level or child)
    "run.completed",
    "run.failed",
    "run.blocked",
    "run.reopened",  # resume: blocked or failed steps back to pending
    "run.abandoned",
    "step.started",
    "step.completed",
    "step.failed",
    "step.blocked",
    "step.skipped",  # a route did not select it
    "step.approved",
    "step.rejected",  # akm-run approve --reject
    "unit.dispatched",  # an attempt started (a new unit, a retry or a crash reclaim)
    "unit.completed",
    "unit.failed",  # an attempt failed; `final` says whether the unit failed for good
    "unit.aborted",  # an attempt ended by an abort (signal, run timeout)
    "unit.interrupted",  # a crash reclaim found the attempt still marked running
    "gate.rejected",
)

RUN_COLUMNS = (
    "id, ref, title, plan_hash, plan_json, params_json, status, current_step, parent_run_id, parent_unit_id, "
    "invocation_key, exported_json, failure_json, notes, units_dispatched, created_at, updated_at, workdir, agent_cmd"
)


@dataclass(slots=True)
class RunRow:
    id: str
    ref: str
    title: str
    plan_hash: str
    plan_json: str
    params_json: str
    status: str
    current_step: int
    parent_run_id: str | None
    parent_unit_id: str | None
    invocation_key: str | None
    exported_json: str | None
    failure_json: str | None
    notes: str | None
    units_dispatched: int
    created_at: float
    updated_at: float
    workdir: str | None  # absolute; None for runs published before it was stored
    agent_cmd: str | None

    @property
    def params(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.params_json)
        return value

    @property
    def exported(self) -> Any:
        return None if self.exported_json is None else json.loads(self.exported_json)

    @property
    def failure(self) -> dict[str, Any] | None:
        return None if self.failure_json is None else json.loads(self.failure_json)


@dataclass(slots=True)
class StepRow:
    step_id: str
    idx: int
    status: str
    output_json: str | None
    notes: str | None
    failure_reason: str | None
    failure_message: str | None
    gate_iteration: int
    gate_loops: int
    gate_feedback: str | None

    @property
    def output(self) -> Any:
        return None if self.output_json is None else json.loads(self.output_json)


@dataclass(slots=True)
class UnitRow:
    unit_id: str
    step_id: str
    item_index: int | None
    input_hash: str
    status: str
    output_json: str | None
    failure_reason: str | None
    failure_message: str | None
    child_run_id: str | None

    @property
    def output(self) -> Any:
        return None if self.output_json is None else json.loads(self.output_json)


@dataclass(slots=True)
class AttemptRow:
    unit_id: str
    attempt: int
    dispatch_id: str
    status: str
    reason: str | None
    exit_code: int | None
    pid: int | None
    host: str | None
    stderr_tail: str | None
    started_at: float = 0.0
    finished_at: float | None = None
    output_json: str | None = None
    message: str | None = None

    @property
    def output(self) -> Any:
        return None if self.output_json is None else json.loads(self.output_json)


ATTEMPT_COLUMNS = (
    "attempt, dispatch_id, status, reason, exit_code, pid, host, stderr_tail, started_at, finished_at, output_json, "
    "message"
)


class StateReadOnly(Exception):
    """The state directory cannot be written (read-only location, permissions)."""


class Store:
    """The state database of one state directory. Safe to share between the threads of one driver:
    statements are serialised by a lock, and each transaction is short."""

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
    def for_reading(cls, state_dir: Path) -> Store:
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
            if durable:
                self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._depth = 0
                if durable:
                    self._db.execute("PRAGMA synchronous = NORMAL")

    def _migrate(self) -> None:
        with self.transaction():
            self._db.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at REAL)")
            applied = {row[0] for row in self._db.execute("SELECT version FROM migrations")}
            for version, script in enumerate(MIGRATIONS, start=1):
                if version in applied:
                    continue
                for statement in _statements(script):
                    self._db.execute(statement)
                self._db.execute("INSERT INTO migrations VALUES (?, ?)", (version, time.time()))
            newest = max(applied, default=0)
            if newest > len(MIGRATIONS):
                raise RuntimeError(
                    f"{self.path} was written by a newer akm-run (schema version {newest}); upgrade akm-run"
                )

    def schema_version(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT MAX(version) FROM migrations").fetchone()
        return int(row[0] or 0)

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    def event(
        self, run_id: str, kind: str, step_id: str | None = None, unit_id: str | None = None, **data: Any
    ) -> None:
        assert kind in EVENT_KINDS, kind
        self._execute(
            "INSERT INTO events (run_id, kind, step_id, unit_id, data_json, at) VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, kind, step_id, unit_id, dumps(data) if data else None, time.time()),
        )

    # -- runs -----------------------------------------------------------------------------------------

    def publish_run(
        self,
        run_id: str,
        plan: dict[str, Any],
        plan_hash: str,
        params: dict[str, Any],
        *,
        parent_run_id: str | None = None,
        parent_unit_id: str | None = None,
        invocation_key: str | None = None,
        workdir: str | None = None,
        agent_cmd: str | None = None,
        signature: Signature | None = None,
    ) -> str:
        """Create a run and its step rows, remembering its workdir and agent command (and its
        signature, in the same transaction); with an invocation key, return the existing run instead
        when one was already published under it (the UNIQUE index arbitrates racing publishers)."""
        started = (workdir, agent_cmd)
        try:
            return self._publish(
                run_id, plan, plan_hash, params, parent_run_id, parent_unit_id, invocation_key, started, signature
            )
        except sqlite3.IntegrityError:
            if invocation_key is None:
                raise
            row = self._execute("SELECT id FROM runs WHERE invocation_key = ?", (invocation_key,)).fetchone()
            return str(row[0])

    def _publish(
        self,
        run_id: str,
        plan: dict[str, Any],
        plan_hash: str,
        params: dict[str, Any],
        parent_run_id: str | None,
        parent_unit_id: str | None,
        invocation_key: str | None,
        started: tuple[str | None, str | None],
        signature: Signature | None,
    ) -> str:
        now = time.time()
        with self.transaction():
            if invocation_key is not None:
                row = self._execute("SELECT id FROM runs WHERE invocation_key = ?", (invocation_key,)).fetchone()
                if row is not None:
                    return str(row[0])
            self._execute(
                "INSERT INTO runs (id, ref, title, plan_hash, plan_json, params_json, status, parent_run_id, "
                "parent_unit_id, invocation_key, created_at, updated_at, workdir, agent_cmd) "
                "VALUES (?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?)",
                (run_id, plan["ref"], plan["title"], plan_hash, dumps(plan), dumps(params), parent_run_id,
                 parent_unit_id, invocation_key, now, now, *started),
            )  # fmt: skip
            for step in plan["steps"]:
                self._execute(
                    "INSERT INTO steps (run_id, step_id, idx, status, updated_at) VALUES (?, ?, ?, 'pending', ?)",
                    (run_id, step["stepId"], step["index"], now),
                )
            signed: dict[str, Any] = {}
            if signature is not None:
                self._execute(
                    "INSERT INTO signatures (run_id, plan_file, signature, principal, fingerprint, allowed_signers) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (run_id, signature.plan_file, signature.signature, signature.signer.principal,
                     signature.signer.fingerprint, signature.allowed_signers),
                )  # fmt: skip
                signed["signedBy"] = signature.signer.document()
            self.event(
                run_id, "run.published", ref=plan["ref"], planHash=plan_hash, parentRunId=parent_run_id, **signed
            )
        return run_id

    def signature(self, run_id: str) -> Signature | None:
        """The signature a run was published with (top-level runs only), or None."""
        row = self._execute(
            "SELECT plan_file, signature, principal, fingerprint, allowed_signers FROM signatures WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        return None if row is None else Signature(bytes(row[0]), bytes(row[1]), Signer(row[2], row[3]), row[4])

    def run(self, run_id: str) -> RunRow | None:
        row = self._execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        return RunRow(*row) if row is not None else None

    def runs(self, *, children: bool = False, status: str | None = None) -> list[RunRow]:
        sql = f"SELECT {RUN_COLUMNS} FROM runs WHERE (? OR parent_run_id IS NULL) AND (? IS NULL OR status = ?)"
        rows = self._execute(sql + " ORDER BY created_at, id", (children, status, status)).fetchall()
        return [RunRow(*r) for r in rows]

    def latest_run(self) -> RunRow | None:
        """The most recently published top-level run."""
        row = self._execute(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 1"
        ).fetchone()
        return RunRow(*row) if row is not None else None

    def child_runs(self, parent_run_id: str) -> list[RunRow]:
        rows = self._execute(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE parent_run_id = ? ORDER BY created_at, id", (parent_run_id,)
        ).fetchall()
        return [RunRow(*r) for r in rows]

    def set_run_status(self, run_id: str, status: str, **fields: Any) -> None:
        """Move a run to `status` (with its failure, exported result or notes) and record the event."""
        columns = {"failure": "failure_json", "exported": "exported_json", "notes": "notes"}
        sets, args = ["status = ?", "updated_at = ?"], [status, time.time()]
        for key, value in fields.items():
            sets.append(f"{columns[key]} = ?")
            args.append(value if key == "notes" or value is None else dumps(value))
        with self.transaction():
            self._execute(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", (*args, run_id))
            kind = {"active": "run.reopened", "completed": "run.completed", "failed": "run.failed"}.get(status)
            self.event(run_id, kind or f"run.{status}", **{k: v for k, v in fields.items() if k != "exported"})

    def start_step(self, run_id: str, step_id: str, index: int) -> None:
        """The spine reaches a step: it becomes the run's current step and starts running."""
        now = time.time()
        with self.transaction(durable=False):
            self._execute("UPDATE runs SET current_step = ?, updated_at = ? WHERE id = ?", (index, now, run_id))
            self._execute(
                "UPDATE steps SET status = 'running', updated_at = ? WHERE run_id = ? AND step_id = ?",
                (now, run_id, step_id),
            )
            self.event(run_id, "step.started", step_id)

    def release_running_steps(self, run_id: str) -> None:
        """A drive ended (or the run was abandoned): steps still marked running go back to pending."""
        with self.transaction(durable=False):
            self._execute(
                "UPDATE steps SET status = 'pending', updated_at = ? WHERE run_id = ? AND status = 'running'",
                (time.time(), run_id),
            )

    def count_dispatch(self, run_id: str, limit: int | None) -> bool:
        """Count one more dispatched unit against `limits.maxUnits`; False when the budget is spent."""
        cursor = self._execute(
            "UPDATE runs SET units_dispatched = units_dispatched + 1 WHERE id = ? AND (? IS NULL OR units_dispatched < ?)",
            (run_id, limit, limit),
        )
        return cursor.rowcount == 1

    # -- steps ----------------------------------------------------------------------------------------

    def steps(self, run_id: str) -> list[StepRow]:
        rows = self._execute(
            "SELECT step_id, idx, status, output_json, notes, failure_reason, failure_message, gate_iteration, "
            "gate_loops, gate_feedback FROM steps WHERE run_id = ? ORDER BY idx",
            (run_id,),
        ).fetchall()
        return [StepRow(*r) for r in rows]

    def step(self, run_id: str, step_id: str) -> StepRow | None:
        return next((s for s in self.steps(run_id) if s.step_id == step_id), None)

    def set_step(self, run_id: str, step_id: str, status: str, *, event: bool = True, **fields: Any) -> None:
        """Move a step to `status`; `output` is stored as JSON, the other fields as given."""
        sets, args = ["status = ?", "updated_at = ?"], [status, time.time()]
        for key, value in fields.items():
            column = {"output": "output_json", "reason": "failure_reason", "message": "failure_message",
                      "notes": "notes", "gate_iteration": "gate_iteration", "gate_loops": "gate_loops",
                      "gate_feedback": "gate_feedback"}[key]  # fmt: skip
            sets.append(f"{column} = ?")
            args.append(dumps(value) if key == "output" else value)
        with self.transaction(durable=False):
            self._execute(
                f"UPDATE steps SET {', '.join(sets)} WHERE run_id = ? AND step_id = ?", (*args, run_id, step_id)
            )
            if event and status != "pending":  # back to pending only on reopen, recorded as run.reopened
                data = {k: v for k, v in fields.items() if k in ("reason", "message", "notes")}
                self.event(run_id, f"step.{status}" if status != "running" else "step.started", step_id, **data)

    # -- units and attempts ---------------------------------------------------------------------------

    def unit(self, run_id: str, unit_id: str) -> UnitRow | None:
        row = self._execute(
            "SELECT unit_id, step_id, item_index, input_hash, status, output_json, failure_reason, failure_message, "
            "child_run_id FROM units WHERE run_id = ? AND unit_id = ?",
            (run_id, unit_id),
        ).fetchone()
        return UnitRow(*row) if row is not None else None

    def child_units(self, run_id: str) -> list[UnitRow]:
        """The units of a run that composed a child run."""
        rows = self._execute(
            "SELECT unit_id, step_id, item_index, input_hash, status, output_json, failure_reason, failure_message, "
            "child_run_id FROM units WHERE run_id = ? AND child_run_id IS NOT NULL",
            (run_id,),
        ).fetchall()
        return [UnitRow(*r) for r in rows]

    def attempts(self, run_id: str, unit_id: str) -> list[AttemptRow]:
        rows = self._execute(
            f"SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? AND unit_id = ? ORDER BY attempt",
            (run_id, unit_id),
        ).fetchall()
        return [AttemptRow(unit_id, *r) for r in rows]

    def run_attempts(self, run_id: str) -> list[tuple[UnitRow, list[AttemptRow]]]:
        """Every unit of a run (in step order, then item order) with its attempts."""
        units = self._execute(
            "SELECT u.unit_id, u.step_id, u.item_index, u.input_hash, u.status, u.output_json, u.failure_reason, "
            "u.failure_message, u.child_run_id FROM units u JOIN steps s ON s.run_id = u.run_id AND "
            "s.step_id = u.step_id WHERE u.run_id = ? ORDER BY s.idx, u.item_index, u.created_at, u.unit_id",
            (run_id,),
        ).fetchall()
        attempts: dict[str, list[AttemptRow]] = {}
        for row in self._execute(
            f"SELECT unit_id, {ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? ORDER BY attempt", (run_id,)
        ):
            attempts.setdefault(row[0], []).append(AttemptRow(*row))
        return [(UnitRow(*u), attempts.get(u[0], [])) for u in units]

    def begin_attempt(
        self,
        run_id: str,
        unit_id: str,
        step_id: str,
        item_index: int | None,
        input_hash: str,
        dispatch_id: str,
        *,
        new_unit: bool,
        max_units: int | None = None,
    ) -> int:
        """Journal the start of an attempt; a `new_unit` counts against `max_units`. Returns the
        attempt number, or 0 when the run's unit budget is spent."""
        now = time.time()
        with self.transaction(durable=False):
            if new_unit and not self.count_dispatch(run_id, max_units):
                return 0
            row = self._execute(
                "SELECT COALESCE(MAX(attempt), 0) FROM attempts WHERE run_id = ? AND unit_id = ?", (run_id, unit_id)
            ).fetchone()
            attempt = int(row[0]) + 1
            self._execute(
                "INSERT INTO units (run_id, unit_id, step_id, item_index, input_hash, status, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, ?, 'running', ?, ?) ON CONFLICT (run_id, unit_id) DO UPDATE SET "
                "status = 'running', input_hash = excluded.input_hash, updated_at = excluded.updated_at",
                (run_id, unit_id, step_id, item_index, input_hash, now, now),
            )
            self._execute(
                "INSERT INTO attempts (run_id, unit_id, attempt, dispatch_id, status, started_at) "
                "VALUES (?, ?, ?, ?, 'running', ?)",
                (run_id, unit_id, attempt, dispatch_id, now),
            )
            self.event(run_id, "unit.dispatched", step_id, unit_id, attempt=attempt, dispatchId=dispatch_id)
        return attempt

    def attempt_process(self, run_id: str, unit_id: str, attempt: int, pid: int, host: str) -> None:
        """Record the process of a running attempt, so a crash reclaim can stop a leftover one.
        One statement: its own transaction."""
        self._execute(
            "UPDATE attempts SET pid = ?, host = ? WHERE run_id = ? AND unit_id = ? AND attempt = ?",
            (pid, host, run_id, unit_id, attempt),
        )

    def set_child_run(self, run_id: str, unit_id: str, child_run_id: str) -> None:
        with self.transaction(durable=False):
            self._execute(
                "UPDATE units SET child_run_id = ? WHERE run_id = ? AND unit_id = ?", (child_run_id, run_id, unit_id)
            )

    def finish_attempt(
        self,
        run_id: str,
        unit_id: str,
        step_id: str,
        attempt: int,
        status: str,
        *,
        reason: str | None = None,
        message: str | None = None,
        exit_code: int | None = None,
        stderr_tail: str | None = None,
        output: Any = None,
        final: bool = True,
    ) -> None:
        """Finish an attempt; `final` also settles the unit (completed with its output, or failed)."""
        now, stored = time.time(), None if output is None else dumps(output)
        with self.transaction(durable=False):
            self._execute(
                "UPDATE attempts SET status = ?, reason = ?, exit_code = ?, stderr_tail = ?, finished_at = ?, "
                "output_json = ?, message = ? WHERE run_id = ? AND unit_id = ? AND attempt = ?",
                (status, reason, exit_code, stderr_tail, now, stored, message, run_id, unit_id, attempt),
            )
            if status == "completed":
                self._execute(
                    "UPDATE units SET status = 'completed', output_json = ?, failure_reason = NULL, "
                    "failure_message = NULL, updated_at = ? WHERE run_id = ? AND unit_id = ?",
                    (dumps(output), now, run_id, unit_id),
                )
                self.event(run_id, "unit.completed", step_id, unit_id, attempt=attempt)
            elif status == "failed":
                if final:
                    self._execute(
                        "UPDATE units SET status = 'failed', failure_reason = ?, failure_message = ?, updated_at = ? "
                        "WHERE run_id = ? AND unit_id = ?",
                        (reason, message, now, run_id, unit_id),
                    )
                self.event(run_id, "unit.failed", step_id, unit_id, attempt=attempt, reason=reason, final=final)
            else:
                self.event(run_id, f"unit.{status}", step_id, unit_id, attempt=attempt)

    def fail_unit(
        self, run_id: str, unit_id: str, step_id: str, item_index: int | None, reason: str, message: str
    ) -> None:
        """A unit that fails before any attempt (input_unresolved, budget_exceeded, secret_missing …)."""
        now = time.time()
        with self.transaction(durable=False):
            self._execute(
                "INSERT INTO units (run_id, unit_id, step_id, item_index, input_hash, status, failure_reason, "
                "failure_message, created_at, updated_at) VALUES (?, ?, ?, ?, '', 'failed', ?, ?, ?, ?) "
                "ON CONFLICT (run_id, unit_id) DO UPDATE SET status = 'failed', failure_reason = excluded.failure_reason, "
                "failure_message = excluded.failure_message, updated_at = excluded.updated_at",
                (run_id, unit_id, step_id, item_index, reason, message, now, now),
            )
            self.event(run_id, "unit.failed", step_id, unit_id, reason=reason, final=True)

    def interrupted_attempts(self, run_id: str) -> list[tuple[str, str, AttemptRow]]:
        """Attempts still marked running: their driver died. (unit id, step id, attempt)."""
        rows = self._execute(
            "SELECT a.unit_id, u.step_id, a.attempt, a.dispatch_id, a.status, a.reason, a.exit_code, a.pid, a.host, "
            "a.stderr_tail, a.started_at FROM attempts a JOIN units u ON u.run_id = a.run_id AND u.unit_id = a.unit_id "
            "WHERE a.run_id = ? AND a.status = 'running'",
            (run_id,),
        ).fetchall()
        return [(r[0], r[1], AttemptRow(r[0], *r[2:])) for r in rows]

    def events(self, run_id: str) -> list[tuple[str, str | None, str | None, dict[str, Any]]]:
        rows = self._execute(
            "SELECT kind, step_id, unit_id, data_json FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        return [(k, s, u, json.loads(d) if d else {}) for k, s, u, d in rows]

    def count_attempts(self, run_id: str) -> int:
        row = self._execute("SELECT COUNT(*) FROM attempts WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0])


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
