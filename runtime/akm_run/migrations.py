"""The state database's schema: an ordered, append-only list of migrations, and the event kinds."""

from __future__ import annotations

from collections.abc import Callable, Collection


class NewerSchema(RuntimeError):
    """A state database written by a newer akm-run: this one must not use it (a usage error)."""


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


def migrate(applied: Collection[int], apply: Callable[[int, str], None], store: str) -> None:
    """Bring a store's schema up to date: `apply(version, script)` runs and records each migration
    not in `applied`, in order. A store that a newer akm-run wrote (`store` names it in the error)
    is refused before anything is applied."""
    newest = max(applied, default=0)
    if newest > len(MIGRATIONS):
        raise NewerSchema(f"{store} was written by a newer akm-run (schema version {newest}); upgrade akm-run")
    for version, script in enumerate(MIGRATIONS, start=1):
        if version not in applied:
            apply(version, script)
