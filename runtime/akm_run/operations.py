"""Run-state changes a person asks for (`resume`, `approve`, `abandon`), as services over the journal.

Each takes a run already locked and checked by the caller and returns what it did; the command line
only prints it. Nothing here runs a unit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from akm_run import core, wording
from akm_run import planformat as pf
from akm_run.journal import Journal
from akm_run.rows import RunRow, StepRow
from akm_run.wording import Failure

ABANDONED = {"stepId": None, "reason": "abandoned", "message": wording.abandoned_by_command()}


def reopen(journal: Journal, run: RunRow) -> list[str]:
    """Blocked and failed steps back to pending (gate loop counts reset), the run active again;
    returns the reopened step ids. A rejected gate's next drive runs a new iteration of the work."""
    reopened = []
    with journal.transaction():
        for step in journal.steps(run.id):
            if step.status in ("blocked", "failed"):
                rejected_gate = step.gate_feedback is not None and step.status == "blocked"
                journal.reopen_step(run.id, step.step_id, step.gate_iteration + 1 if rejected_gate else None)
                reopened.append(step.step_id)
        journal.reopen_run(run.id)
    return reopened


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's decision on an approval step."""

    step_id: str
    by: str
    approved: bool
    note: str | None = None


def approval_refusal(plan: pf.Plan, run: RunRow, current: StepRow | None, decision: Decision) -> Failure | None:
    """Why a decision cannot be taken on this step, or None when it can."""
    step = next((s for s in core.every_step(plan) if s["stepId"] == decision.step_id), None)
    if step is None or step["kind"] == "route" or step["kind"] == "parallel" or step["target"]["kind"] != "approval":
        return wording.no_approval_step(run=run.id, step=decision.step_id)
    if run.status in ("completed", "failed"):  # an abandoned run leaves its gate blocked: still settled
        return wording.run_not_waiting(run=run.id, status=run.status)
    if current is None or current.status != "blocked":
        state = current.status if current else "unknown"
        return wording.step_not_waiting(step=decision.step_id, run=run.id, state=state)
    return None


def decide(journal: Journal, plan: pf.Plan, run: RunRow, decision: Decision) -> bool:
    """Record an approval decision on a blocked approval step (approval_refusal said it may be taken).
    Returns whether the run failed: a rejection fails the step, and the run, unless the step has
    on_error = continue (then the run goes on with `approved: false`)."""
    step = next(s for s in core.every_step(plan) if s["stepId"] == decision.step_id)
    assert step["kind"] not in ("route", "parallel")
    approval: dict[str, Any] = {"approved": decision.approved, "by": decision.by}
    if decision.note:
        approval["note"] = decision.note
    output: Any = approval
    if step["kind"] == "map":  # one decision per item, like any map step's output
        ok, items = core.resolve(step["over"], run.params, {s.step_id: s for s in journal.steps(run.id)})
        output = [approval] * len(items) if ok and isinstance(items, list) else [approval]
    failed = not decision.approved and step["onError"] != "continue"
    with journal.transaction():
        if failed:
            by, note = decision.by, decision.note
            message = wording.rejected_by_with_note(by=by, note=note) if note else wording.rejected_by(by=by)
            journal.reject_step(run.id, decision.step_id, output, message, decision.by)
            failure = {"stepId": decision.step_id, "reason": "approval_rejected", "message": message}
            journal.fail_run(run.id, failure, clear_notes=True)
        else:
            journal.decide_step(run.id, decision.step_id, output, decision.by, approved=decision.approved)
            _reopen_block(journal, plan, run.id, decision.step_id)
            if not any(s.status == "blocked" for s in journal.steps(run.id)):
                journal.unblock_run(run.id)
    return failed


def _reopen_block(journal: Journal, plan: pf.Plan, run_id: str, member: str) -> None:
    """A decided member of a `parallel` block: once none of its members waits, the block is
    pending again, so the next drive settles it (its decided member is reused)."""
    block = next(
        (s for s in plan["steps"] if s["kind"] == "parallel" and member in {m["stepId"] for m in s["members"]}), None
    )
    if block is None:
        return
    rows = {s.step_id: s for s in journal.steps(run_id)}
    if rows[block["stepId"]].status == "blocked" and all(
        rows[m["stepId"]].status != "blocked" for m in block["members"]
    ):
        journal.reopen_step(run_id, block["stepId"])


def abandon(journal: Journal, run: RunRow) -> bool:
    """Fail a run that is not settled yet, for good; False when it already completed or failed."""
    if run.status in ("completed", "failed"):
        return False
    journal.abandon_run(run.id, dict(ABANDONED))
    return True
