"""The run journal's transitions, written once for every store: named state transitions over the SQL both
dialects share (akm_run.database), each a short transaction that records its event.

Each state change is one short transaction (`with store.transaction():`) and a method named for the
transition (`complete_step`, `fail_attempt`, `reopen_run` …), never a bag of fields. The events table
is append-only; every event kind names the transition it records (migrations.EVENT_KINDS). The stores
are this class on a dialect: akm_run.sqlitestore.SQLiteStore and akm_run.pgstore.PostgresStore."""

from __future__ import annotations

import time
from typing import Any

from akm_run.activity import Beat
from akm_run.deletions import Deletions
from akm_run.exclusive import Exclusion
from akm_run.migrations import EVENT_KINDS
from akm_run.operating import Operating
from akm_run.outbox import Outbox
from akm_run.rows import AttemptFailure, AttemptStatus, RunStatus, StepStatus
from akm_run.strictjson import dumps
from akm_run.tokenstore import Tokens
from akm_run.trust import Signature


class Store(Tokens, Deletions, Exclusion, Outbox, Operating):
    """A run journal (akm_run.journal.Journal): its reads and its transitions, on a dialect's database."""

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
        base: tuple[str, str] | None = None,
        preflight_skipped: bool = False,
    ) -> str:
        """Create a run and its step rows, remembering its workdir and agent command, its base
        (commit, repository) when it uses worktrees, and its signature, in the same transaction; with
        an invocation key, return the existing run instead when one was already published under it
        (the UNIQUE index arbitrates racing publishers). An exclusive top-level plan raises
        exclusive.RunInTheWay while another run holds its key. `preflight_skipped` is recorded in the
        `run.published` event (`--no-preflight`)."""
        started = (workdir, agent_cmd, *(base or (None, None)))
        try:
            return self._publish(
                run_id,
                plan,
                plan_hash,
                params,
                parent_run_id,
                parent_unit_id,
                invocation_key,
                started,
                signature,
                preflight_skipped,
            )
        except self.IntegrityError:
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
        started: tuple[str | None, ...],
        signature: Signature | None,
        preflight_skipped: bool = False,
    ) -> str:
        now = time.time()
        described = (run_id, plan["ref"], plan["title"], plan_hash, dumps(plan), dumps(params))
        with self.transaction():
            if invocation_key is not None:
                row = self._execute("SELECT id FROM runs WHERE invocation_key = ?", (invocation_key,)).fetchone()
                if row is not None:
                    return str(row[0])
            if parent_run_id is None:  # raises RunInTheWay: nothing is published
                self.refuse_second_run(plan, params)
            self._execute(
                "INSERT INTO runs (id, ref, title, plan_hash, plan_json, params_json, status, parent_run_id, "
                "parent_unit_id, invocation_key, created_at, updated_at, workdir, agent_cmd, base_commit, base_repo) "
                "VALUES (?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*described, parent_run_id, parent_unit_id, invocation_key, now, now, *started),
            )
            for step in plan["steps"]:  # a `parallel` block's members: at its index, naming it
                for each, group in [(step, None), *((m, step["stepId"]) for m in step.get("members", []))]:
                    self._execute(
                        'INSERT INTO steps (run_id, step_id, idx, status, updated_at, "group") '
                        "VALUES (?, ?, ?, 'pending', ?, ?)",
                        (run_id, each["stepId"], step["index"], now, group),
                    )
            signed: dict[str, Any] = {"preflight": "skipped"} if preflight_skipped else {}
            if signature is not None:
                signer = signature.signer
                self._execute(
                    "INSERT INTO signatures (run_id, plan_file, signature, principal, fingerprint, allowed_signers) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        signature.plan_file,
                        signature.signature,
                        signer.principal,
                        signer.fingerprint,
                        signature.allowed_signers,
                    ),
                )
                signed["signedBy"] = signer.document()
            self.event(
                run_id, "run.published", ref=plan["ref"], planHash=plan_hash, parentRunId=parent_run_id, **signed
            )
        return run_id

    # The run's transitions. Each records its event; `notes` and `failure` as the transition says.

    def complete_run(self, run_id: str, exported: Any) -> None:
        """The last step completed and the outputs were exported."""
        self._move_run(run_id, "completed", {"exported_json": dumps(exported)}, {})

    def fail_run(self, run_id: str, failure: dict[str, Any], *, clear_notes: bool = False) -> None:
        """A step failed for good (or the run was abandoned); `clear_notes` drops a blocked run's notes."""
        columns: dict[str, Any] = {"failure_json": dumps(failure)}
        data: dict[str, Any] = {"failure": failure}
        if clear_notes:
            columns["notes"] = data["notes"] = None
        self._move_run(run_id, "failed", columns, data)

    def block_run(self, run_id: str, notes: str) -> None:
        """A step blocked: the run waits for a person (the notes say what to do)."""
        self._move_run(run_id, "blocked", {"notes": notes}, {"notes": notes})

    def reopen_run(self, run_id: str) -> None:
        """`resume`: the run is active again, its failure and notes cleared."""
        self._move_run(run_id, "active", {"failure_json": None, "notes": None}, {"failure": None, "notes": None})

    def unblock_run(self, run_id: str) -> None:
        """The last blocked step was decided (`approve`): the run is active again."""
        self._move_run(run_id, "active", {"notes": None}, {"notes": None})

    def abandon_run(self, run_id: str, failure: dict[str, Any]) -> None:
        """`abandon`: the run fails and will not be driven again; nothing stays marked running."""
        with self.transaction():
            self.release_running_steps(run_id)
            self.fail_run(run_id, failure)
        self.event(run_id, "run.abandoned")

    def _move_run(self, run_id: str, status: RunStatus, columns: dict[str, Any], data: dict[str, Any]) -> None:
        sets = ", ".join(["status = ?", "updated_at = ?", *(f"{column} = ?" for column in columns)])
        with self.transaction():
            self._execute(f"UPDATE runs SET {sets} WHERE id = ?", (status, time.time(), *columns.values(), run_id))
            self.event(run_id, "run.reopened" if status == "active" else f"run.{status}", **data)
            if status in ("blocked", "failed", "completed"):
                self._queue_notification(run_id, run_id, status)

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
            "UPDATE runs SET units_dispatched = units_dispatched + 1 WHERE id = ? AND (CAST(? AS INTEGER) IS NULL OR units_dispatched < ?)",
            (run_id, limit, limit),
        )
        return cursor.rowcount == 1

    # -- steps ----------------------------------------------------------------------------------------

    # A step's transitions. Each records its event with the data shown in `status` and `logs`.

    def complete_step(self, run_id: str, step_id: str, output: Any) -> None:
        self._move_step(run_id, step_id, "completed", {"output_json": dumps(output)}, {})

    def fail_step(
        self, run_id: str, step_id: str, reason: str | None, message: str | None, null: bool = False, output: Any = None
    ) -> None:
        """`null`: the step says `on_error = continue`, so its output is stored as null (later steps read
        null). `output`: the partial list of a map that kept going (null at each failed item), stored as is."""
        stored = {"output_json": dumps(output)} if output is not None else {"output_json": "null"} if null else {}
        columns = {"failure_reason": reason, "failure_message": message} | stored
        self._move_step(run_id, step_id, "failed", columns, {"reason": reason, "message": message})

    def block_step(self, run_id: str, step_id: str, notes: str | None, reason: str | None = None) -> None:
        """The step waits for a person; `reason` names why when it is not an approval (gate_rejected …)."""
        columns: dict[str, Any] = {"notes": notes}
        data: dict[str, Any] = {"notes": notes}
        if reason:
            columns["failure_reason"] = data["reason"] = reason
        self._move_step(run_id, step_id, "blocked", columns, data)

    def skip_step(self, run_id: str, step_id: str, notes: str) -> None:
        """A route selected another step."""
        self._move_step(run_id, step_id, "skipped", {"notes": notes}, {"notes": notes})

    def loop_gate(self, run_id: str, step_id: str, iteration: int, loops: int, feedback: str) -> None:
        """A gate check rejected the work: the next iteration runs with its feedback (no event: the
        rejection is recorded as gate.rejected)."""
        columns = {"gate_iteration": iteration, "gate_loops": loops, "gate_feedback": feedback}
        self._move_step(run_id, step_id, "running", columns, None)

    def reject_gate(self, run_id: str, step_id: str, iteration: int, feedback: str) -> None:
        """A gate check rejected iteration `iteration` of the work, with this feedback."""
        self.event(run_id, "gate.rejected", step_id, iteration=iteration, feedback=feedback)

    def reopen_step(self, run_id: str, step_id: str, gate_iteration: int | None = None) -> None:
        """`resume`: back to pending with its gate loop count reset (recorded as run.reopened);
        `gate_iteration` moves a rejected gate on to a new iteration of the work."""
        columns: dict[str, Any] = {"gate_loops": 0, "notes": None, "failure_reason": None, "failure_message": None}
        if gate_iteration is not None:
            columns["gate_iteration"] = gate_iteration
        self._move_step(run_id, step_id, "pending", columns, None)

    def decide_step(self, run_id: str, step_id: str, output: Any, by: str, *, approved: bool) -> None:
        """An approval was decided and the run goes on (approved, or rejected under on_error = continue)."""
        with self.transaction(durable=False):
            self._move_step(
                run_id, step_id, "completed", {"output_json": dumps(output), "notes": None}, {"notes": None}
            )
            self.event(run_id, "step.approved" if approved else "step.rejected", step_id, by=by)

    def reject_step(self, run_id: str, step_id: str, output: Any, message: str, by: str) -> None:
        """An approval was rejected: the step fails with approval_rejected."""
        columns = {
            "output_json": dumps(output),
            "notes": None,
            "failure_reason": "approval_rejected",
            "failure_message": message,
        }
        with self.transaction(durable=False):
            self._move_step(
                run_id, step_id, "failed", columns, {"notes": None, "reason": "approval_rejected", "message": message}
            )
            self.event(run_id, "step.rejected", step_id, by=by)

    def _move_step(
        self, run_id: str, step_id: str, status: StepStatus, columns: dict[str, Any], data: dict[str, Any] | None
    ) -> None:
        sets = ", ".join(["status = ?", "updated_at = ?", *(f"{column} = ?" for column in columns)])
        with self.transaction(durable=False):
            self._execute(
                f"UPDATE steps SET {sets} WHERE run_id = ? AND step_id = ?",
                (status, time.time(), *columns.values(), run_id, step_id),
            )
            if data is not None:
                self.event(run_id, "step.started" if status == "running" else f"step.{status}", step_id, **data)

    # -- units and attempts ---------------------------------------------------------------------------

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

    def claim_attempt(self, run_id: str, unit_id: str, attempt: int, host: str) -> bool:
        """Take a running attempt before its process starts (the worker pool): True for the first
        taker only. An attempt taken before was started by a worker that died, whether or not its
        pid was journaled yet. One statement: its own transaction."""
        rows = self._execute(
            "UPDATE attempts SET host = ? WHERE run_id = ? AND unit_id = ? AND attempt = ? AND status = 'running' "
            "AND host IS NULL",
            (host, run_id, unit_id, attempt),
        )
        return rows.rowcount == 1

    def set_child_run(self, run_id: str, unit_id: str, child_run_id: str) -> None:
        with self.transaction(durable=False):
            self._execute(
                "UPDATE units SET child_run_id = ? WHERE run_id = ? AND unit_id = ?", (child_run_id, run_id, unit_id)
            )

    # An attempt's endings. A completed attempt completes its unit; a failed one fails it when `final`.

    def complete_attempt(
        self,
        run_id: str,
        unit_id: str,
        step_id: str,
        attempt: int,
        output: Any,
        stderr_tail: str | None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        now = time.time()
        stored = None if output is None else dumps(output)  # a `null` stdout keeps no attempt output
        with self.transaction(durable=False):
            self._end_attempt(run_id, unit_id, attempt, "completed", (None, None, stderr_tail, now, stored, None))
            self._usage(run_id, unit_id, attempt, usage)
            self._execute(
                "UPDATE units SET status = 'completed', output_json = ?, failure_reason = NULL, "
                "failure_message = NULL, updated_at = ? WHERE run_id = ? AND unit_id = ?",
                (dumps(output), now, run_id, unit_id),
            )
            self.event(run_id, "unit.completed", step_id, unit_id, attempt=attempt)

    def fail_attempt(
        self,
        run_id: str,
        unit_id: str,
        step_id: str,
        attempt: int,
        failure: AttemptFailure,
        usage: dict[str, Any] | None = None,
    ) -> None:
        now, stored = time.time(), None if failure.output is None else dumps(failure.output)
        with self.transaction(durable=False):
            ended = (failure.reason, failure.exit_code, failure.stderr_tail, now, stored, failure.message)
            self._end_attempt(run_id, unit_id, attempt, "failed", ended)
            self._usage(run_id, unit_id, attempt, usage)
            if failure.final:
                self._execute(
                    "UPDATE units SET status = 'failed', failure_reason = ?, failure_message = ?, updated_at = ? "
                    "WHERE run_id = ? AND unit_id = ?",
                    (failure.reason, failure.message, now, run_id, unit_id),
                )
            self.event(
                run_id, "unit.failed", step_id, unit_id, attempt=attempt, reason=failure.reason, final=failure.final
            )

    def abort_attempt(
        self, run_id: str, unit_id: str, step_id: str, attempt: int, message: str | None, stderr_tail: str | None
    ) -> None:
        """The drive was aborted (signal, run timeout) while the attempt ran; the unit runs again."""
        with self.transaction(durable=False):
            self._end_attempt(
                run_id, unit_id, attempt, "aborted", ("aborted", None, stderr_tail, time.time(), None, message)
            )
            self.event(run_id, "unit.aborted", step_id, unit_id, attempt=attempt)

    def interrupt_attempt(self, run_id: str, unit_id: str, step_id: str, attempt: int) -> None:
        """The attempt's driver died (a crash reclaim) or hit an internal error; the unit runs again."""
        with self.transaction(durable=False):
            self._end_attempt(run_id, unit_id, attempt, "interrupted", (None, None, None, time.time(), None, None))
            self.event(run_id, "unit.interrupted", step_id, unit_id, attempt=attempt)

    def record_activity(self, beats: list[Beat]) -> None:
        """The activity of attempts in flight (one sample of a drive's or a worker's board), with the
        `unit.silent` and `unit.active` events it brings. An attempt that has ended keeps what it had."""
        with self.transaction(durable=False):
            for beat in beats:
                progress = None if beat.progress is None else dumps(beat.progress)
                self._execute(
                    "UPDATE attempts SET last_activity_at = ?, progress_json = ?, progress_ignored = ? "
                    "WHERE run_id = ? AND unit_id = ? AND attempt = ? AND status = 'running'",
                    (beat.last_activity_at, progress, beat.ignored, beat.run_id, beat.unit_id, beat.attempt),
                )
                if beat.event is not None:
                    self.event(beat.run_id, beat.event, beat.step_id, beat.unit_id, **beat.data)
                if beat.event == "unit.silent" and beat.data.get("stretch") == 1:
                    self._queue_notification(self.root_run(beat.run_id), beat.run_id, "stalled")

    def exceed_budget(self, run_id: str, step_id: str, unit_id: str, **data: Any) -> None:
        """`budget.exceeded` (akm_run.tokenstore), and with it the root run's `budget` notification
        when its notifier is told of that event (D4)."""
        with self.transaction(durable=False):
            super().exceed_budget(run_id, step_id, unit_id, **data)
            self._queue_notification(self.root_run(run_id), run_id, "budget")

    def _end_attempt(
        self, run_id: str, unit_id: str, attempt: int, status: AttemptStatus, ended: tuple[Any, ...]
    ) -> None:
        """`ended`: reason, exit code, stderr tail, finish time, output JSON, message."""
        self._execute(
            "UPDATE attempts SET status = ?, reason = ?, exit_code = ?, stderr_tail = ?, finished_at = ?, "
            "output_json = ?, message = ? WHERE run_id = ? AND unit_id = ? AND attempt = ?",
            (status, *ended, run_id, unit_id, attempt),
        )

    # An attempt's worktree (worktree isolation): kept for review when it has changes, else removed.

    def keep_worktree(self, run_id: str, unit_id: str, step_id: str, attempt: int, path: str, changed: int) -> None:
        """The attempt's worktree had `changed` changed files: it stays, its path journaled."""
        with self.transaction(durable=False):
            self._execute(
                "UPDATE attempts SET worktree = ? WHERE run_id = ? AND unit_id = ? AND attempt = ?",
                (path, run_id, unit_id, attempt),
            )
            self.event(run_id, "worktree.retained", step_id, unit_id, attempt=attempt, path=path, changed=changed)

    def remove_worktree(self, run_id: str, unit_id: str, step_id: str, attempt: int, path: str, *, by: str) -> None:
        """The attempt's worktree is gone: `by` is "attempt" (clean when it ended) or "prune"."""
        with self.transaction(durable=False):
            self._execute(
                "UPDATE attempts SET worktree = NULL WHERE run_id = ? AND unit_id = ? AND attempt = ?",
                (run_id, unit_id, attempt),
            )
            self.event(run_id, "worktree.removed", step_id, unit_id, attempt=attempt, path=path, by=by)

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
