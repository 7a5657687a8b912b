"""The child drive (runtime.md, "Child runs"): a `child-workflow` unit runs its embedded plan as a
child run, inline, inside the parent unit's journaled attempt.

There is no second executor and no second journal: the child is published in the same store and
driven by the same `Engine.drive` a top-level run uses (handed in as `drive`). Nothing raised here
escapes: every ending becomes an honest `End` for the parent's attempt."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from akm_run import core, identity
from akm_run import planformat as pf
from akm_run.core import Aborted, DriveResult, End
from akm_run.locks import LockHeld
from akm_run.params import ParamsError, complete
from akm_run.plan import plan_hash

if TYPE_CHECKING:
    from akm_run.dispatch import Settings
    from akm_run.hints import Hints
    from akm_run.journal import Journal
    from akm_run.rows import RunRow, StepRow

FAULT_VARIABLE = "AKM_RUN_FAULT"
BUSY_PAUSE_S = (0.05, 1.0)  # the first and the longest pause between two tries for a busy child's lock


def fault(point: str) -> None:
    """Crash testing: SIGKILL this driver's process group at a named point when AKM_RUN_FAULT names
    it. Only a driver that leads its own process group obeys, so it can never take its caller along."""
    if os.environ.get(FAULT_VARIABLE) == point and os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)


def hold(point: str) -> None:
    """Race testing: when AKM_RUN_FAULT is `hold-POINT:FILE`, stop at a named point until FILE exists
    (up to a minute), after creating FILE.held to say this process got there."""
    name, _, release = os.environ.get(FAULT_VARIABLE, "").partition(":")
    if name != f"hold-{point}" or not release:
        return
    Path(release + ".held").touch()
    deadline = time.monotonic() + 60
    while not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


@dataclass(frozen=True, slots=True)
class Parent:
    """The parent unit a child run is published for: the same four always name the same child."""

    run_id: str
    step_id: str
    unit: str
    input_hash: str


def drive_child(
    journal: Journal,
    settings: Settings,
    drive: Callable[[str], DriveResult],
    parent: Parent,
    target: pf.ChildTarget,
    bindings: dict[str, Any],
    abort: threading.Event,
) -> tuple[End, str | None]:
    """Publish (or find) the child run of one parent unit and drive it; (outcome, child run id).
    A blocked child is a failed outcome with reason child_workflow_blocked and the notes as message.
    `abort` is the parent drive's: it also ends a wait for a child another driver holds."""
    child_run_id: str | None = None
    try:
        published = _publish(journal, settings, parent, target, bindings)
        if isinstance(published, End):
            return published, None
        child_run_id = published
        row = journal.run(child_run_id)
        if row is None or row.plan_hash != target["planHash"]:  # a row changed behind the journal
            return _failed(
                "child_workflow_publish_failed",
                f"child run {child_run_id} does not run the plan this step embeds ({target['planHash']})",
            ), child_run_id
        fault("child-published")
        try:
            result = _driven(drive, child_run_id, abort)
        except LockHeld as held:
            return _failed(
                "child_workflow_busy",
                f"child run {child_run_id} ({target['ref']}) is being driven by pid {held.pid} on "
                f"{held.holder.get('host')}; resume this run once that driver finishes",
            ), child_run_id
        fault("child-completed")
    except Aborted:
        return End("aborted", reason="aborted", message="the drive was aborted inside the child run"), child_run_id
    except Exception as error:  # noqa: BLE001 - nothing raised inside the child drive escapes it
        message = f"driving child run {child_run_id or '(unpublished)'} failed: {type(error).__name__}: {error}"
        return _failed("child_workflow_drive_failed", message), child_run_id
    return _mapped(result, journal, settings.hints, parent, target["ref"], child_run_id), child_run_id


def _driven(drive: Callable[[str], DriveResult], child_run_id: str, abort: threading.Event) -> DriveResult:
    """Drive the child run. While another live driver holds it (on the pool, the drive `approve` or
    `resume` of the child submitted; a `run` of the child in another terminal), wait for that driver
    to finish and drive the child on from where it left it: its progress is this unit's. Raises
    LockHeld for a holder not known to be alive (a lock file of another host), Aborted when the
    parent's drive is aborted during the wait."""
    pause, longest = BUSY_PAUSE_S
    while True:
        try:
            return drive(child_run_id)
        except LockHeld as held:
            if not held.live:
                raise
            hold("child-busy")
        if abort.wait(pause):
            raise Aborted
        pause = min(2 * pause, longest)


def _publish(
    journal: Journal, settings: Settings, parent: Parent, target: pf.ChildTarget, bindings: dict[str, Any]
) -> str | End:
    """The child run's id (published now, or found under its invocation key), or why there is none."""
    plan = target["plan"]
    if plan_hash(plan) != target["planHash"]:
        return _failed("child_workflow_publish_failed", "the embedded child plan does not match its planHash")
    try:
        params = complete(dict(plan.get("params", {})), bindings)
    except ParamsError as error:
        return _failed("child_workflow_publish_failed", f"bindings do not fit child workflow {target['ref']}: {error}")
    key = identity.invocation_key(parent.run_id, parent.unit, parent.input_hash)
    row = journal.run(parent.run_id)
    base = (row.base_commit, row.base_repo or "") if row is not None and row.base_commit is not None else None
    try:
        child_run_id = journal.publish_run(
            identity.new_run_id(),
            dict(plan),
            target["planHash"],
            params,
            parent_run_id=parent.run_id,
            parent_unit_id=parent.unit,
            invocation_key=key,
            workdir=str(settings.workdir.absolute()),
            agent_cmd=settings.agent_cmd,
            base=base,  # a child's worktrees check out its root's base commit
        )
        journal.set_child_run(parent.run_id, parent.unit, child_run_id)
    except Exception as error:  # noqa: BLE001 - the parent attempt must end honestly
        return _failed("child_workflow_publish_failed", f"cannot publish the child run: {error}")
    return child_run_id


def _failed(reason: str, message: str) -> End:
    return End("failed", reason=reason, message=message)


def _mapped(result: DriveResult, journal: Journal, hints: Hints, parent: Parent, ref: str, child: str) -> End:
    """The child's final status onto the parent unit (the table of runtime.md)."""
    if result.status == "completed":
        return End("completed", output=result.exported)
    if result.status == "aborted":
        return End("aborted", reason="aborted", message=f"the drive was aborted inside child run {child}")
    if result.status == "paused":  # the parent's drive ends paused too (core.Paused)
        held = json.dumps({"runId": child, **(result.paused or {})})
        return End("aborted", reason="paused", message=f"child run {child} is paused", notes=held)
    if result.status == "blocked":
        notes = blocked_notes(journal, hints, parent.run_id, parent.step_id, child)
        return End("failed", reason="child_workflow_blocked", message=notes)
    if result.error is not None:
        return _failed(
            "child_workflow_failed",
            f"child run {child} ({ref}) could not complete: {result.error['code']}: "
            f"{result.error['message']}; see `{hints('status', child)}`",
        )
    failure = result.failure or {}
    return _failed(
        "child_workflow_failed",
        f"child run {child} ({ref}) failed at its step {failure.get('stepId')}: "
        f"{failure.get('reason')}: {failure.get('message')}; see `{hints('status', child)}`",
    )


def blocked_notes(store: Journal, hints: Hints, parent_run_id: str, parent_step: str, child_run_id: str) -> str:
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


def step_notes(store: Journal, hints: Hints, run_id: str, step: StepRow) -> str | None:
    """A step's notes as of now: a step blocked on child runs is described from their current state
    (so a child approved since says so), any other step by its stored notes."""
    if step.status != "blocked" or step.failure_reason != "child_workflow_blocked":
        return step.notes
    children = [
        (u.item_index, u.child_run_id)
        for u in store.child_units(run_id)
        if u.step_id == step.step_id and u.failure_reason == "child_workflow_blocked" and u.child_run_id
    ]
    if not children:
        return step.notes
    if len(children) > 1:  # a map that kept going: every blocked unit, bounded
        listed = [(i or 0, blocked_notes(store, hints, run_id, step.step_id, child)) for i, child in children]
        return core.blocked_units(hints, run_id, sorted(listed))
    return "\n".join(blocked_notes(store, hints, run_id, step.step_id, child) for _, child in children)


def clearing(store: Journal, hints: Hints, run: RunRow) -> tuple[str, list[str]]:
    """(blocked step, the commands that clear a blocked run, deepest first): approve an approval,
    resume a gate, and for a step blocked on its own child, clear that child and resume this run."""
    rows = store.steps(run.id)
    blocked = next((s for s in rows if s.status == "blocked" and s.group is None), None)
    if blocked is None:
        return "?", [hints("resume", run.id)]
    plan: pf.Plan = json.loads(run.plan_json)
    steps = {s["stepId"]: s for s in core.every_step(plan)}
    if steps[blocked.step_id]["kind"] == "parallel":  # what clears it is what clears its first blocked member
        blocked = next((s for s in rows if s.status == "blocked" and s.group == blocked.step_id), blocked)
    step: Any = steps[blocked.step_id]
    kind = step.get("target", {}).get("kind")
    if kind == "approval":
        return blocked.step_id, [hints("approve", run.id, blocked.step_id)]
    if kind == "child-workflow" and blocked.failure_reason == "child_workflow_blocked":
        for unit in store.child_units(run.id):
            grandchild = store.run(unit.child_run_id or "")
            if unit.step_id == blocked.step_id and grandchild is not None and grandchild.status == "blocked":
                return blocked.step_id, [*clearing(store, hints, grandchild)[1], hints("resume", run.id)]
    return blocked.step_id, [hints("resume", run.id)]
