"""The journal's transitions of operator control (`akm-run skip`, `retry`, `pause`, `unpause`;
akm_run.operator, operations.md D9), mixed into akm_run.store.Store."""

from __future__ import annotations

import time
from abc import abstractmethod
from typing import Any

from akm_run.database import Database
from akm_run.rows import StepStatus
from akm_run.strictjson import dumps


class Operating(Database):
    """Skip a step by hand, reopen steps for a retry, pause and unpause a run or its steps."""

    @abstractmethod
    def event(
        self, run_id: str, kind: str, step_id: str | None = None, unit_id: str | None = None, **data: Any
    ) -> None:
        """Append an event to the run's journal, inside the caller's transaction."""

    @abstractmethod
    def _move_step(
        self, run_id: str, step_id: str, status: StepStatus, columns: dict[str, Any], data: dict[str, Any] | None
    ) -> None:
        """Set a step's status and columns, recording its event when `data` is given."""

    def skip_by_operator(self, run_id: str, step_id: str, output: Any, notes: str, by: str, note: str | None) -> None:
        """`skip`: the step is skipped with the output the operator stated (null when none)."""
        columns = {"output_json": dumps(output), "notes": notes, "failure_reason": None, "failure_message": None}
        self._move_step(run_id, step_id, "skipped", columns, {"by": by, "note": note, "operator": True})

    def retry_steps(self, run_id: str, step_id: str, steps: list[str], units: list[str], by: str) -> None:
        """`retry`: `steps` back to pending as if never run (their gate loops too), `units` superseded:
        each runs again under its next journal id (identity.retried_id)."""
        now = time.time()
        with self.transaction(durable=False):
            for reopened in steps:
                self._execute(
                    "UPDATE steps SET status = 'pending', output_json = NULL, notes = NULL, failure_reason = NULL, "
                    "failure_message = NULL, gate_iteration = 0, gate_loops = 0, gate_feedback = NULL, "
                    "updated_at = ? WHERE run_id = ? AND step_id = ?",
                    (now, run_id, reopened),
                )
            for unit in units:
                self._execute(
                    "UPDATE units SET superseded = 1, updated_at = ? WHERE run_id = ? AND unit_id = ?",
                    (now, run_id, unit),
                )
            self.event(run_id, "step.reopened", step_id, by=by, steps=steps, units=units)

    def pause(self, run_id: str, steps: list[str], pause: dict[str, Any]) -> None:
        """`pause`: the run (no `steps`) or these steps start nothing new; never under the run lock."""
        self._flag(run_id, steps, dumps(pause), "paused", pause)

    def unpause(self, run_id: str, steps: list[str], by: str) -> None:
        self._flag(run_id, steps, None, "unpaused", {"by": by})

    def _flag(self, run_id: str, steps: list[str], flag: str | None, kind: str, data: dict[str, Any]) -> None:
        with self.transaction():
            if not steps:
                self._execute("UPDATE runs SET paused = ? WHERE id = ?", (flag, run_id))
                self.event(run_id, f"run.{kind}", **data)
            for step_id in steps:
                self._execute("UPDATE steps SET paused = ? WHERE run_id = ? AND step_id = ?", (flag, run_id, step_id))
                self.event(run_id, f"step.{kind}", step_id, **data)
