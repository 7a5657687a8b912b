"""The child drive (runtime.md, "Child runs"): a `child-workflow` unit runs its embedded plan as a
child run, inline, inside the parent unit's journaled attempt.

There is no second executor and no second journal: the child is published in the same store and
driven by the same `Engine.drive` a top-level run uses. Nothing raised here escapes: every ending
becomes an honest `Outcome` for the parent's attempt."""

from __future__ import annotations

import json
import os
import signal
from typing import TYPE_CHECKING, Any

from akm_run import identity
from akm_run.locks import LockHeld
from akm_run.params import ParamsError, complete
from akm_run.plan import plan_hash
from akm_run.units import Outcome

if TYPE_CHECKING:
    from akm_run.engine import Engine
    from akm_run.hints import Hints
    from akm_run.store import RunRow, StepRow, Store

FAULT_VARIABLE = "AKM_RUN_FAULT"


def fault(point: str) -> None:
    """Crash testing: SIGKILL this driver's process group at a named point when AKM_RUN_FAULT names
    it. Only a driver that leads its own process group obeys, so it can never take its caller along."""
    if os.environ.get(FAULT_VARIABLE) == point and os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)


def drive_child(
    engine: Engine,
    parent_run_id: str,
    parent_step: str,
    unit: str,
    unit_input_hash: str,
    target: dict[str, Any],
    bindings: dict[str, Any],
) -> tuple[Outcome, str | None]:
    """Publish (or find) the child run of one parent unit and drive it; (outcome, child run id).
    A blocked child is a failed outcome with reason child_workflow_blocked and the notes as message."""
    from akm_run.engine import Aborted

    child_run_id: str | None = None
    try:
        plan = target["plan"]
        if plan_hash(plan) != target["planHash"]:
            return _failed("child_workflow_publish_failed", "the embedded child plan does not match its planHash"), None
        try:
            params = complete(plan.get("params", {}), bindings)
        except ParamsError as error:
            return _failed(
                "child_workflow_publish_failed", f"bindings do not fit child workflow {target['ref']}: {error}"
            ), None
        key = identity.invocation_key(parent_run_id, unit, unit_input_hash)
        try:
            child_run_id = engine.store.publish_run(
                identity.new_run_id(), plan, target["planHash"], params,
                parent_run_id=parent_run_id, parent_unit_id=unit, invocation_key=key,
                workdir=str(engine.options.workdir.absolute()), agent_cmd=engine.options.agent_cmd,
            )  # fmt: skip
            engine.store.set_child_run(parent_run_id, unit, child_run_id)
            published = engine.store.run(child_run_id)
        except Exception as error:  # noqa: BLE001 - the parent attempt must end honestly
            return _failed("child_workflow_publish_failed", f"cannot publish the child run: {error}"), None
        if published is None or published.plan_hash != target["planHash"]:  # a row changed behind the journal
            return _failed("child_workflow_publish_failed",
                           f"child run {child_run_id} does not run the plan this step embeds "
                           f"({target['planHash']})"), child_run_id  # fmt: skip
        fault("child-published")
        try:
            result = engine.drive(child_run_id)
        except LockHeld as held:
            return _failed("child_workflow_busy",
                           f"child run {child_run_id} ({target['ref']}) is being driven by pid {held.pid} on "
                           f"{held.holder.get('host')}; resume this run once that driver finishes"), child_run_id  # fmt: skip
        fault("child-completed")
    except Aborted:
        return Outcome("aborted", reason="aborted", message="the drive was aborted inside the child run"), child_run_id
    except Exception as error:  # noqa: BLE001 - nothing raised inside the child drive escapes it
        message = f"driving child run {child_run_id or '(unpublished)'} failed: {type(error).__name__}: {error}"
        return _failed("child_workflow_drive_failed", message), child_run_id
    return _mapped(result, engine, parent_run_id, parent_step, target["ref"], child_run_id), child_run_id


def _failed(reason: str, message: str) -> Outcome:
    return Outcome("failed", reason=reason, message=message)


def _mapped(result: Any, engine: Engine, parent_run_id: str, parent_step: str, ref: str, child: str) -> Outcome:
    """The child's final status onto the parent unit (the table of runtime.md)."""
    if result.status == "completed":
        return Outcome("completed", output=result.exported)
    if result.status == "aborted":
        return Outcome("aborted", reason="aborted", message=f"the drive was aborted inside child run {child}")
    if result.status == "blocked":
        notes = blocked_notes(engine.store, engine.options.hints, parent_run_id, parent_step, child)
        return Outcome("failed", reason="child_workflow_blocked", message=notes)
    if result.error is not None:
        return _failed("child_workflow_failed",
                       f"child run {child} ({ref}) could not complete: {result.error['code']}: "
                       f"{result.error['message']}; see `{engine.options.hints('status', child)}`")  # fmt: skip
    failure = result.failure or {}
    return _failed("child_workflow_failed",
                   f"child run {child} ({ref}) failed at its step {failure.get('stepId')}: "
                   f"{failure.get('reason')}: {failure.get('message')}; see `{engine.options.hints('status', child)}`")  # fmt: skip


def blocked_notes(store: Store, hints: Hints, parent_run_id: str, parent_step: str, child_run_id: str) -> str:
    """The notes of a step whose child run blocked, as of now: the commands that really clear the
    child (deepest first), then the parent's resume and run; or, once the child is no longer
    blocked, that it is not and the parent's own commands."""
    child = store.run(child_run_id)
    assert child is not None
    then = f"`{hints('resume', parent_run_id)}` and `{hints('run', parent_run_id)}`"
    if child.status != "blocked":
        return (
            f'Step "{parent_step}" composes child workflow run {child.id} ({child.ref}), which is no longer\n'
            f"blocked (it is {child.status}). Continue with {then}."
        )
    child_step, clear = clearing(store, hints, child)
    return (
        f'Step "{parent_step}" composes child workflow run {child.id} ({child.ref}),\n'
        f'which is blocked at its own step "{child_step}". Nothing in this run advances\n'
        f"until the child does. Clear it with {', then '.join(f'`{c}`' for c in clear)}, then\n"
        f"{then}."
    )


def step_notes(store: Store, hints: Hints, run_id: str, step: StepRow) -> str | None:
    """A step's notes as of now: a step blocked on child runs is described from their current state
    (so a child approved since says so), any other step by its stored notes."""
    if step.status != "blocked" or step.failure_reason != "child_workflow_blocked":
        return step.notes
    children = [
        u.child_run_id
        for u in store.child_units(run_id)
        if u.step_id == step.step_id and u.failure_reason == "child_workflow_blocked" and u.child_run_id
    ]
    if not children:
        return step.notes
    return "\n".join(blocked_notes(store, hints, run_id, step.step_id, child) for child in children)


def clearing(store: Store, hints: Hints, run: RunRow) -> tuple[str, list[str]]:
    """(blocked step, the commands that clear a blocked run, deepest first): approve an approval,
    resume a gate, and for a step blocked on its own child, clear that child and resume this run."""
    blocked = next((s for s in store.steps(run.id) if s.status == "blocked"), None)
    if blocked is None:
        return "?", [hints("resume", run.id)]
    plan = json.loads(run.plan_json)
    step = next(s for s in plan["steps"] if s["stepId"] == blocked.step_id)
    kind = step.get("target", {}).get("kind")
    if kind == "approval":
        return blocked.step_id, [hints("approve", run.id, blocked.step_id)]
    if kind == "child-workflow" and blocked.failure_reason == "child_workflow_blocked":
        for unit in store.child_units(run.id):
            grandchild = store.run(unit.child_run_id or "")
            if unit.step_id == blocked.step_id and grandchild is not None and grandchild.status == "blocked":
                return blocked.step_id, [*clearing(store, hints, grandchild)[1], hints("resume", run.id)]
    return blocked.step_id, [hints("resume", run.id)]
