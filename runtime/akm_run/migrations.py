"""The journal's schema, one ordered, append-only list of migrations per dialect, and the event kinds.

Each store runs its own list, written in its own dialect; migration N of one list is the same change as
migration N of the other, under the same version number (tests/unit/test_migrations.py proves that both
lists build the schema earlier releases built). A change to the schema appends one migration to each."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence


class NewerSchema(RuntimeError):
    """A state database written by a newer akm-run: this one must not use it (a usage error)."""


# Ordered and append-only: a released migration is never edited, only followed by a new one.
# tests/unit/test_store.py pins this list.
SQLITE_MIGRATIONS: tuple[str, ...] = (
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
    # Retention (`akm-run prune`, `delete`): an event may be deleted once its run row is gone, and
    # only then; prune deletes a run's rows first and its events after, in one transaction.
    """
    DROP TRIGGER events_append_only_delete;
    CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        WHEN EXISTS (SELECT 1 FROM runs WHERE id = OLD.run_id)
        BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    """,
    # parallel blocks: a step of a `parallel` block names its block (operations.md D1)
    """
    ALTER TABLE steps ADD COLUMN "group" TEXT;
    """,
    # Worktree isolation: the commit and repository a run's worktrees are checked out from, frozen
    # when it is published; the worktree an attempt left behind for review.
    """
    ALTER TABLE runs ADD COLUMN base_commit TEXT;
    ALTER TABLE runs ADD COLUMN base_repo TEXT;
    ALTER TABLE attempts ADD COLUMN worktree TEXT;
    """,
    # operator verbs: a paused run or step, a unit a retry replaced (operations.md D9)
    """
    ALTER TABLE runs ADD COLUMN paused TEXT;
    ALTER TABLE steps ADD COLUMN paused TEXT;
    ALTER TABLE units ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0;
    """,
    # Token budgets (operations.md D8): what each attempt reported, the tokens a run and everything
    # it composes spent, and what `resume --extra-tokens` added to its allowance.
    """
    ALTER TABLE attempts ADD COLUMN usage_json TEXT;
    ALTER TABLE runs ADD COLUMN tokens_spent INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN tokens_raised INTEGER NOT NULL DEFAULT 0;
    """,
    # Unit activity (operations.md D6): when an attempt last showed activity, its latest progress
    # frame (not a history) and how many of its progress lines were invalid. Notifications (D4):
    # the host's notifier remembered on the run, and one row per event to deliver, written in the
    # transaction of the event (so a crash before sending sends on the next drive).
    """
    ALTER TABLE attempts ADD COLUMN last_activity_at REAL;
    ALTER TABLE attempts ADD COLUMN progress_json TEXT;
    ALTER TABLE attempts ADD COLUMN progress_ignored INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN notify_cmd TEXT;
    CREATE TABLE notifications (
        run_id TEXT NOT NULL REFERENCES runs(id),
        seq INTEGER NOT NULL,
        event TEXT NOT NULL CHECK (event IN ('blocked', 'failed', 'completed', 'stalled', 'budget')),
        dispatch_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        exit_code INTEGER,
        reason TEXT,
        stderr_tail TEXT,
        claimed_by TEXT,
        claimed_at REAL,
        created_at REAL NOT NULL,
        sent_at REAL,
        PRIMARY KEY (run_id, seq)
    );
    """,
)

# PostgreSQL's words where SQLite's differ: DOUBLE PRECISION for REAL (PostgreSQL's REAL is 4 bytes,
# and times would lose seconds), BYTEA for BLOB, an identity column for AUTOINCREMENT, and the events'
# append-only guard as trigger functions. tests/unit/test_migrations.py pins this list.
POSTGRES_MIGRATIONS: tuple[str, ...] = (
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
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
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
        updated_at DOUBLE PRECISION NOT NULL,
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
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
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
        started_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        PRIMARY KEY (run_id, unit_id, attempt),
        FOREIGN KEY (run_id, unit_id) REFERENCES units(run_id, unit_id)
    );
    CREATE TABLE events (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        step_id TEXT,
        unit_id TEXT,
        data_json TEXT,
        at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX events_by_run ON events(run_id, seq);
    CREATE FUNCTION events_append_only_update() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION 'events are append-only'; END $$;
    CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION events_append_only_update();
    CREATE FUNCTION events_append_only_delete() RETURNS trigger LANGUAGE plpgsql
        AS $$ BEGIN RAISE EXCEPTION 'events are append-only'; END $$;
    CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        FOR EACH STATEMENT EXECUTE FUNCTION events_append_only_delete();
    """,
    """
    ALTER TABLE runs ADD COLUMN workdir TEXT;
    ALTER TABLE runs ADD COLUMN agent_cmd TEXT;
    ALTER TABLE attempts ADD COLUMN output_json TEXT;
    ALTER TABLE attempts ADD COLUMN message TEXT;
    """,
    """
    CREATE TABLE signatures (
        run_id TEXT PRIMARY KEY REFERENCES runs(id),
        plan_file BYTEA NOT NULL,
        signature BYTEA NOT NULL,
        principal TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        allowed_signers TEXT NOT NULL
    );
    """,
    # The guard checks each row now (a statement-level trigger cannot see the rows), with the
    # journal's schema fixed in the function so that a session on another search_path is refused too.
    """
    DROP TRIGGER events_append_only_delete ON events;
    CREATE OR REPLACE FUNCTION events_append_only_delete() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT
        AS $$ BEGIN
            IF EXISTS (SELECT 1 FROM runs WHERE id = OLD.run_id) THEN
                RAISE EXCEPTION 'events are append-only';
            END IF;
            RETURN OLD;
        END $$;
    CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION events_append_only_delete();
    """,
    # parallel blocks: a step of a `parallel` block names its block (operations.md D1)
    """
    ALTER TABLE steps ADD COLUMN "group" TEXT;
    """,
    """
    ALTER TABLE runs ADD COLUMN base_commit TEXT;
    ALTER TABLE runs ADD COLUMN base_repo TEXT;
    ALTER TABLE attempts ADD COLUMN worktree TEXT;
    """,
    # operator verbs: a paused run or step, a unit a retry replaced (operations.md D9)
    """
    ALTER TABLE runs ADD COLUMN paused TEXT;
    ALTER TABLE steps ADD COLUMN paused TEXT;
    ALTER TABLE units ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0;
    """,
    """
    ALTER TABLE attempts ADD COLUMN usage_json TEXT;
    ALTER TABLE runs ADD COLUMN tokens_spent BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN tokens_raised BIGINT NOT NULL DEFAULT 0;
    """,
    """
    ALTER TABLE attempts ADD COLUMN last_activity_at DOUBLE PRECISION;
    ALTER TABLE attempts ADD COLUMN progress_json TEXT;
    ALTER TABLE attempts ADD COLUMN progress_ignored INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN notify_cmd TEXT;
    CREATE TABLE notifications (
        run_id TEXT NOT NULL REFERENCES runs(id),
        seq BIGINT NOT NULL,
        event TEXT NOT NULL CHECK (event IN ('blocked', 'failed', 'completed', 'stalled', 'budget')),
        dispatch_id TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        exit_code INTEGER,
        reason TEXT,
        stderr_tail TEXT,
        claimed_by TEXT,
        claimed_at DOUBLE PRECISION,
        created_at DOUBLE PRECISION NOT NULL,
        sent_at DOUBLE PRECISION,
        PRIMARY KEY (run_id, seq)
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
    "preflight.failed",  # a worker's preflight found an error: the drive ended before any dispatch
    "worktree.retained",  # an attempt's worktree had changes: kept for review, its path journaled
    "worktree.removed",  # an attempt's worktree was removed (clean after its attempt, or pruned)
    "step.reopened",  # akm-run retry: the step and its readers back to pending, their units superseded
    "step.paused",  # akm-run pause RUN STEP: no new unit of the step starts
    "step.unpaused",
    "run.paused",  # akm-run pause RUN: no new step or unit of the run starts
    "run.unpaused",
    "budget.exceeded",  # a token budget refused a unit before dispatch or ended an attempt past it
    "budget.unmetered",  # an agent unit under a token budget reported no usage (once per step)
    "budget.raised",  # akm-run resume --extra-tokens raised a run's allowance
    "unit.silent",  # a running attempt showed no activity for its step's stall_after (once per silent stretch)
    "unit.active",  # a silent attempt showed activity again
    "notify.sent",  # a notification was delivered (its notifier exited 0)
    "notify.failed",  # a notifier failed or timed out; the run is unchanged
)


def migrate(migrations: Sequence[str], applied: Collection[int], apply: Callable[[int, str], None], store: str) -> None:
    """Bring a store's schema up to date: `apply(version, script)` runs and records each of its
    `migrations` not in `applied`, in order. A store that a newer akm-run wrote (`store` names it in
    the error) is refused before anything is applied."""
    newest = max(applied, default=0)
    if newest > len(migrations):
        raise NewerSchema(f"{store} was written by a newer akm-run (schema version {newest}); upgrade akm-run")
    for version, script in enumerate(migrations, start=1):
        if version not in applied:
            apply(version, script)
