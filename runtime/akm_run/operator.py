"""Operator control of one step (`skip`, `retry`, `pause`, `unpause`), as services over the journal.

`readers` is the retry's reference closure: a pure function of the plan, so every host computes the
same set. `skip` and `retry` change a run's course: they take a run the caller holds the lock of
(never beside a live driver) and whose plan it re-checked. `pause` and `unpause` write one short
transaction without the run lock: a live driver, on any host, reads the flag before each start
(akm_run.decisions.holding). The command line only prints what these return."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from akm_run import core, wording
from akm_run import planformat as pf
from akm_run.journal import Journal
from akm_run.rows import RunRow, StepRow, UnitRow
from akm_run.schemas import schema_errors
from akm_run.wording import Failure

SKIPPABLE = ("pending", "failed", "blocked")


# -- what a step reads ------------------------------------------------------------------------------------


def _read_step(reference: str) -> str | None:
    """The step a reference reads (`steps.<id>.output…`), None for a param."""
    match = pf.REFERENCE.fullmatch(reference)
    return None if match is None else match.group("step")


def references(step: pf.AnyStep) -> set[str]:
    """The steps a step reads: its inputs, a map's subject, a route's subject, a child's bindings
    (a `parallel` block reads nothing itself: its members are steps of their own)."""
    if step["kind"] == "parallel":
        return set()
    read: list[str] = list(step.get("inputs", []))
    if step["kind"] == "route":
        read.append(step["input"])
    else:
        if step["kind"] == "map":
            read.append(step["over"])
        target = step["target"]
        if target["kind"] == "child-workflow":
            read += [b["from"] for b in target.get("bindings", []) if b["kind"] == "reference"]
    return {name for name in map(_read_step, read) if name is not None}


def _chosen(step: pf.AnyStep) -> Iterator[str]:
    """The steps a route chooses between: their course is the route's."""
    if step["kind"] == "route":
        yield from (case["next"] for case in step["cases"])
        if "default" in step:
            yield step["default"]


def blocks(plan: pf.Plan) -> dict[str, str]:
    """Each member of a `parallel` block, to its block."""
    return {m["stepId"]: s["stepId"] for s in plan["steps"] if s["kind"] == "parallel" for m in s["members"]}


def readers(plan: pf.Plan, step_id: str) -> list[str]:
    """The steps `retry STEP` reopens, in plan order: the step, every step that reads a reopened one
    (transitively), and the steps a reopened route chooses between."""
    block_of = blocks(plan)
    retried = _step(plan, step_id)
    reopened = {step_id} | (
        {m["stepId"] for m in retried["members"]} if retried and retried["kind"] == "parallel" else set()
    )
    changed = True
    while changed:  # a fixed point: references only point back, but route targets point ahead
        changed = False
        for step in core.every_step(plan):
            name = step["stepId"]
            if name not in reopened and references(step) & reopened:
                reopened.add(name)
                changed = True
            if name in reopened and not set(_chosen(step)) <= reopened:
                reopened.update(_chosen(step))
                changed = True
            if name in reopened and name in block_of and block_of[name] not in reopened:
                reopened.add(block_of[name])  # a pending block runs its pending members, reuses the rest
                changed = True
    return [s["stepId"] for s in core.every_step(plan) if s["stepId"] in reopened]


def _step(plan: pf.Plan, step_id: str) -> pf.AnyStep | None:
    return next((s for s in core.every_step(plan) if s["stepId"] == step_id), None)


def _settled(run: RunRow) -> Failure | None:
    """A run no operator change can set going again: completed, or abandoned."""
    if run.status == "completed" or (run.failure or {}).get("reason") == "abandoned":
        shown = "abandoned" if run.status == "failed" else run.status
        return wording.run_settled_for_operator(run=run.id, status=shown)
    return None


def _reopen(journal: Journal, plan: pf.Plan, run: RunRow) -> None:
    """Inside the change's transaction: the run is active again unless a step still holds it (one
    blocked, or failed and not continued), when it keeps its status for `resume` or `approve`."""
    if run.status == "active":
        return
    kinds = {s["stepId"]: s["onError"] for s in core.every_step(plan)}
    held = [
        r
        for r in journal.steps(run.id)
        if r.status == "blocked" or (r.status == "failed" and kinds[r.step_id] != "continue")
    ]
    if not held:
        journal.reopen_run(run.id)


# -- skip -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Skip:
    """`akm-run skip`: `output` is the value stated (`given` False: none, the step's output is null)."""

    step_id: str
    by: str
    note: str | None = None
    given: bool = False
    output: Any = None


def skip_refusal(plan: pf.Plan, run: RunRow, current: StepRow, skip: Skip, approve: str) -> Failure | None:
    """Why the step cannot be skipped (`approve`: the command that decides an approval), else None."""
    step = _step(plan, skip.step_id)
    assert step is not None
    if (settled := _settled(run)) is not None:
        return settled
    if step["kind"] == "route":
        return wording.skip_a_route(step=skip.step_id, run=run.id)
    if step["kind"] == "parallel":
        return wording.skip_a_block(step=skip.step_id, run=run.id)
    if step["target"]["kind"] == "approval":
        return wording.skip_an_approval(step=skip.step_id, run=run.id, command=approve)
    if "gate" in step:
        return wording.skip_a_gate(step=skip.step_id, run=run.id)
    if current.status not in SKIPPABLE:
        return wording.step_not_skippable(step=skip.step_id, run=run.id, state=current.status)
    schema = step.get("outputSchema")
    if schema is None:
        return None
    if not skip.given:
        return None if not schema_errors(None, dict(schema)) else wording.skip_needs_output(step=skip.step_id)
    if problems := schema_errors(skip.output, dict(schema)):
        return wording.skip_output_invalid(step=skip.step_id, error="; ".join(problems))
    return None


def skip(journal: Journal, plan: pf.Plan, run: RunRow, skip: Skip) -> None:
    """Skip the step with its stated output (skip_refusal said it may be); a child run it composed
    is left as it is, and its notes say so. A member's block that ended failed or blocked is pending
    again, so that the next drive ends it over its members once more (reusing the settled ones)."""
    note = skip.note
    notes = wording.skipped_by_with_note(by=skip.by, note=note) if note else wording.skipped_by(by=skip.by)
    for unit in journal.child_units(run.id):
        if unit.step_id == skip.step_id and unit.child_run_id is not None and not unit.superseded:
            notes += wording.skipped_child_left(child=unit.child_run_id)
    with journal.transaction():
        journal.skip_by_operator(run.id, skip.step_id, skip.output if skip.given else None, notes, skip.by, note)
        block = blocks(plan).get(skip.step_id)
        ended = journal.step(run.id, block) if block is not None else None
        if block is not None and ended is not None and ended.status in ("failed", "blocked"):
            journal.retry_steps(run.id, skip.step_id, [block], [], skip.by)
        _reopen(journal, plan, run)


# -- retry ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Retry:
    """`akm-run retry`: `unit` limits a map step to that item (its readers reopen all the same)."""

    step_id: str
    by: str
    unit: int | None = None


@dataclass(frozen=True, slots=True)
class Reopening:
    """What a retry reopens: the steps (in plan order) and the units it supersedes."""

    steps: list[str]
    units: list[str]


def retry_refusal(plan: pf.Plan, run: RunRow, current: StepRow, retry: Retry) -> Failure | None:
    step = _step(plan, retry.step_id)
    assert step is not None
    if (run.failure or {}).get("reason") == "abandoned":  # a completed run may be retried, an abandoned one not
        return wording.abandoned_for_good(run=run.id)
    if current.status == "running":
        return wording.retry_running(step=retry.step_id, run=run.id)
    if retry.unit is not None and step["kind"] != "map":
        return wording.retry_unit_not_a_map(step=retry.step_id)
    return None


def unselected(plan: pf.Plan, rows: dict[str, StepRow], reopened: list[str]) -> set[str]:
    """The steps a route that stays settled did not select, a block's members with their block:
    they stay skipped, as it chose."""
    out: set[str] = set()
    for step in plan["steps"]:
        row = rows[step["stepId"]]
        if step["kind"] == "route" and step["stepId"] not in reopened and row.status == "completed":
            out |= {name for name in _chosen(step) if name != row.output}
    return out | {member for member, block in blocks(plan).items() if block in out}


def reopening(journal: Journal, plan: pf.Plan, run: RunRow, retry: Retry) -> Reopening | Failure:
    """The steps and units a retry reopens, computed before anything changes (it is printed first):
    the step's readers, but not those a settled route did not select."""
    closure = readers(plan, retry.step_id)
    passed_over = unselected(plan, {r.step_id: r for r in journal.steps(run.id)}, closure)
    if retry.step_id in passed_over:
        return wording.retry_unselected(step=retry.step_id, run=run.id)
    steps = [name for name in closure if name not in passed_over]
    units: list[str] = []
    for name in steps:
        live = [u for u in journal.units(run.id, name) if not u.superseded]
        if name == retry.step_id and retry.unit is not None:
            items = [u for u in live if u.item_index == retry.unit]
            if not items:
                return wording.retry_no_such_unit(step=name, run=run.id, unit=retry.unit)
            live = items + [u for u in live if _gate_check(u, name)]
        units += [u.unit_id for u in live]
    return Reopening(steps, units)


def _gate_check(unit: UnitRow, step_id: str) -> bool:
    """A gate's check unit (`<step>:gate`, in any loop): it judges the whole step again."""
    return unit.item_index is None and unit.unit_id.startswith(f"{step_id}:gate")


def retry(journal: Journal, run: RunRow, retry: Retry, reopened: Reopening) -> None:
    """Reopen the steps and supersede the units (each runs again as `<journal id>~r<n>`, with the
    same input hash; a composing step's next unit publishes a new child run)."""
    with journal.transaction():
        journal.retry_steps(run.id, retry.step_id, reopened.steps, reopened.units, retry.by)
        if run.status != "active":
            journal.reopen_run(run.id)


# -- pause ------------------------------------------------------------------------------------------------


def pause(journal: Journal, run: RunRow, steps: list[str], by: str, *, now: bool) -> None:
    """Pause the run (no `steps`) or these steps; `now` terminates their units in flight."""
    journal.pause(run.id, steps, {"by": by, "now": now})


def unpause(journal: Journal, run: RunRow, steps: list[str], by: str) -> list[str]:
    """Lift the pauses named (no `steps`: the run's); returns what was paused and is not any more."""
    paused_steps = journal.pauses(run.id)[1]  # the run's own pause, not one of a run above it
    lifted = [s for s in steps if s in paused_steps] if steps else ([] if run.paused is None else ["run"])
    if lifted:
        journal.unpause(run.id, steps and lifted, by)
    return lifted
