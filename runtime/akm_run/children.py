"""The child drive (runtime.md, "Child runs"): a `child-workflow` unit runs its embedded plan as a
child run, inline, inside the parent unit's journaled attempt.

There is no second executor and no second journal: the child is published in the same store and
driven by the same `Engine.drive` a top-level run uses. Nothing raised here escapes: every ending
becomes an honest `Outcome` for the parent's attempt."""

from __future__ import annotations

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
        child_step = (result.blocked or {}).get("stepId") or _blocked_step(engine, child)
        notes = (
            f'Step "{parent_step}" composes child workflow run {child} ({ref}),\n'
            f'which is blocked at its own step "{child_step}". Nothing in this run advances\n'
            f"until the child does. Clear it with `akm-run resume {child}`, then\n"
            f"`akm-run resume {parent_run_id}` and `akm-run run {parent_run_id}`."
        )
        return Outcome("failed", reason="child_workflow_blocked", message=notes)
    if result.error is not None:
        return _failed("child_workflow_failed",
                       f"child run {child} ({ref}) could not complete: {result.error['code']}: "
                       f"{result.error['message']}; see `akm-run status {child}`")  # fmt: skip
    failure = result.failure or {}
    return _failed("child_workflow_failed",
                   f"child run {child} ({ref}) failed at its step {failure.get('stepId')}: "
                   f"{failure.get('reason')}: {failure.get('message')}; see `akm-run status {child}`")  # fmt: skip


def _blocked_step(engine: Engine, child: str) -> str:
    return next((s.step_id for s in engine.store.steps(child) if s.status == "blocked"), "?")
