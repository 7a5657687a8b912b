"""The journal's reads: runs, steps, units, attempts, events and signatures, as rows (akm_run.rows), in
the SQL both dialects share (akm_run.database)."""

from __future__ import annotations

import json
from typing import Any

from akm_run.database import Database
from akm_run.rows import AttemptRow, Event, NotificationRow, RunRow, StepRow, UnitRow
from akm_run.signing import Signer
from akm_run.strictjson import dumps
from akm_run.trust import Signature

RUN_COLUMNS = (
    "id, ref, title, plan_hash, plan_json, params_json, status, current_step, parent_run_id, parent_unit_id, "
    "invocation_key, exported_json, failure_json, notes, units_dispatched, created_at, updated_at, workdir, agent_cmd, "
    "notify_cmd, base_commit, base_repo, paused, tokens_spent, tokens_raised"
)
ATTEMPT_COLUMNS = (
    "attempt, dispatch_id, status, reason, exit_code, pid, host, stderr_tail, started_at, finished_at, output_json, "
    "message, last_activity_at, progress_json, progress_ignored, worktree, usage_json"
)
UNIT_COLUMNS = (
    "unit_id, step_id, item_index, input_hash, status, output_json, failure_reason, failure_message, child_run_id, "
    "superseded"
)
EVENT_COLUMNS = "seq, run_id, kind, step_id, unit_id, data_json, at"
RUN_EVENTS = f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?"
# A run's tree on runs_by_parent, then its events on events_by_run.
TREE = (
    "WITH RECURSIVE tree(id) AS (SELECT id FROM runs WHERE id = ? UNION ALL "
    "SELECT r.id FROM runs r JOIN tree ON r.parent_run_id = tree.id) "
)


class Queries(Database):
    """What a store reads back of the journal."""

    # A dialect may read the tree's events its own way (PostgreSQL: akm_run.pgstore.TREE_EVENTS).
    TREE_EVENTS = (
        TREE
        + f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id IN (SELECT id FROM tree) AND seq > ? ORDER BY seq LIMIT ?"
    )

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
        sql = f"SELECT {RUN_COLUMNS} FROM runs WHERE (? OR parent_run_id IS NULL) AND (CAST(? AS TEXT) IS NULL OR status = ?)"
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

    def steps(self, run_id: str) -> list[StepRow]:
        rows = self._execute(
            "SELECT step_id, idx, status, output_json, notes, failure_reason, failure_message, gate_iteration, "
            'gate_loops, gate_feedback, "group", paused FROM steps WHERE run_id = ? ORDER BY idx, "group" IS NOT NULL',
            (run_id,),
        ).fetchall()
        return [StepRow(*r) for r in rows]

    def units(self, run_id: str, step_id: str) -> list[UnitRow]:
        """A step's units, superseded ones too (akm-run retry), in item order."""
        rows = self._execute(
            f"SELECT {UNIT_COLUMNS} FROM units WHERE run_id = ? AND step_id = ? ORDER BY item_index, unit_id",
            (run_id, step_id),
        ).fetchall()
        return [UnitRow(*r) for r in rows]

    def pauses(self, run_id: str) -> tuple[str | None, dict[str, str]]:
        """What holds a run back (akm-run pause): the pause of the run or of the nearest paused run
        above it (a pause holds its whole tree; JSON text, `runId` naming an ancestor), and its
        paused steps' pauses. One statement: a drive reads it before every start."""
        rows = self._execute(
            "WITH RECURSIVE up(id, parent, paused, depth) AS ("
            "SELECT id, parent_run_id, paused, 0 FROM runs WHERE id = ? UNION ALL "
            "SELECT r.id, r.parent_run_id, r.paused, up.depth + 1 FROM runs r JOIN up ON r.id = up.parent) "
            "SELECT 'run', id, paused, depth FROM up WHERE paused IS NOT NULL UNION ALL "
            "SELECT 'step', step_id, paused, 0 FROM steps WHERE run_id = ? AND paused IS NOT NULL",
            (run_id, run_id),
        ).fetchall()
        held = sorted((depth, name, paused) for kind, name, paused, depth in rows if kind == "run")
        run = None
        if held:
            depth, name, paused = held[0]
            run = paused if depth == 0 else dumps({**json.loads(paused), "runId": name})
        return run, {name: paused for kind, name, paused, _ in rows if kind == "step"}

    def step(self, run_id: str, step_id: str) -> StepRow | None:
        return next((s for s in self.steps(run_id) if s.step_id == step_id), None)

    def unit(self, run_id: str, unit_id: str) -> UnitRow | None:
        row = self._execute(
            f"SELECT {UNIT_COLUMNS} FROM units WHERE run_id = ? AND unit_id = ?", (run_id, unit_id)
        ).fetchone()
        return UnitRow(*row) if row is not None else None

    def child_units(self, run_id: str) -> list[UnitRow]:
        """The units of a run that composed a child run."""
        rows = self._execute(
            f"SELECT {UNIT_COLUMNS} FROM units WHERE run_id = ? AND child_run_id IS NOT NULL", (run_id,)
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
            "u.failure_message, u.child_run_id, u.superseded FROM units u JOIN steps s ON s.run_id = u.run_id AND "
            "s.step_id = u.step_id WHERE u.run_id = ? ORDER BY s.idx, u.item_index, u.created_at, u.unit_id",
            (run_id,),
        ).fetchall()
        attempts: dict[str, list[AttemptRow]] = {}
        for row in self._execute(
            f"SELECT unit_id, {ATTEMPT_COLUMNS} FROM attempts WHERE run_id = ? ORDER BY attempt", (run_id,)
        ):
            attempts.setdefault(row[0], []).append(AttemptRow(*row))
        return [(UnitRow(*u), attempts.get(u[0], [])) for u in units]

    def interrupted_attempts(self, run_id: str) -> list[tuple[str, str, AttemptRow]]:
        """Attempts still marked running: their driver died. (unit id, step id, attempt)."""
        rows = self._execute(
            "SELECT a.unit_id, u.step_id, a.attempt, a.dispatch_id, a.status, a.reason, a.exit_code, a.pid, a.host, "
            "a.stderr_tail, a.started_at FROM attempts a JOIN units u ON u.run_id = a.run_id AND u.unit_id = a.unit_id "
            "WHERE a.run_id = ? AND a.status = 'running'",
            (run_id,),
        ).fetchall()
        return [(r[0], r[1], AttemptRow(r[0], *r[2:])) for r in rows]

    def kept_worktrees(self, run_id: str | None = None) -> list[tuple[str, str, str, AttemptRow]]:
        """Attempts whose worktree was kept for review, of one run or of all: (run id, step id,
        unit id, attempt), oldest first."""
        rows = self._execute(
            f"SELECT a.run_id, u.step_id, a.unit_id, {', '.join('a.' + c for c in ATTEMPT_COLUMNS.split(', '))} "
            "FROM attempts a JOIN units u ON u.run_id = a.run_id AND u.unit_id = a.unit_id "
            "WHERE a.worktree IS NOT NULL AND (CAST(? AS TEXT) IS NULL OR a.run_id = ?) "
            "ORDER BY a.started_at, a.run_id, a.unit_id, a.attempt",
            (run_id, run_id),
        ).fetchall()
        return [(r[0], r[1], r[2], AttemptRow(r[2], *r[3:])) for r in rows]

    def events(self, run_id: str) -> list[tuple[str, str | None, str | None, dict[str, Any]]]:
        rows = self._execute(
            "SELECT kind, step_id, unit_id, data_json FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
        return [(k, s, u, json.loads(d) if d else {}) for k, s, u, d in rows]

    def timeline(self, run_id: str, after: int, *, children: bool, limit: int) -> list[Event]:
        """At most `limit` events of a run (with `children`, of its descendants too) after seq
        `after`, in commit order (`akm-run events`)."""
        sql = self.TREE_EVENTS if children else RUN_EVENTS
        rows = self._execute(sql, (run_id, after, limit)).fetchall()
        return [Event(q, r, k, s, u, json.loads(d) if d else {}, a) for q, r, k, s, u, d, a in rows]

    def published_at(self, run_id: str) -> float | None:
        """When the run was published (its run.published event), or None."""
        row = self._execute(
            "SELECT at FROM events WHERE run_id = ? AND kind = 'run.published' ORDER BY seq LIMIT 1", (run_id,)
        ).fetchone()
        return None if row is None else float(row[0])

    def notifications(self, run_id: str, *, pending: bool = False) -> list[NotificationRow]:
        """A root run's notifications in event order (with `pending`, only those not yet delivered:
        pending, or taken by a sender that may have died)."""
        rows = self._execute(
            "SELECT seq, event, dispatch_id, status, attempts, exit_code, reason, stderr_tail, created_at, sent_at, "
            "claimed_by, claimed_at FROM notifications WHERE run_id = ?"
            + (" AND status IN ('pending', 'sending')" if pending else "")
            + " ORDER BY seq",
            (run_id,),
        ).fetchall()
        return [NotificationRow(*r) for r in rows]

    def event_at(self, seq: int) -> tuple[str, str | None, str | None, dict[str, Any], float] | None:
        """(run id, step id, unit id, data, time) of one event."""
        row = self._execute(
            "SELECT run_id, step_id, unit_id, data_json, at FROM events WHERE seq = ?", (seq,)
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2], json.loads(row[3]) if row[3] else {}, row[4])

    def count_attempts(self, run_id: str) -> int:
        row = self._execute("SELECT COUNT(*) FROM attempts WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0])
