"""The drive's decisions: what a run does next, returned as values, with no I/O.

Each function reads the plan, the run's params and its journaled rows (and, for a unit, how its
last attempt ended) and returns what to do: start a step, settle it, dispatch its units, fail a
unit before any attempt, loop or block a gate, retry an attempt, complete or fail a step, wait at
a blocked step, finish the run. The engine (akm_run.engine) and the attempts layer
(akm_run.attempts) journal and dispatch each decision and hand what came of it back here; what a
plan's parts mean (routes, inputs, retries, gate feedback, outputs) is akm_run.core's."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from akm_run import core, identity
from akm_run import planformat as pf
from akm_run.core import End, Hint, Placement
from akm_run.rows import StepRow, StepStatus
from akm_run.strictjson import dumps

Rows = Mapping[str, StepRow]  # the run's step rows by step id, as the drive last journaled them


# -- the spine ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartStep:
    """Run the step at `index`; its start is journaled with the step's first write. The run
    completes together with the `last` step's completion."""

    step: pf.AnyStep
    index: int
    last: bool


@dataclass(frozen=True, slots=True)
class Wait:
    """The run stops at a blocked step (an approval, a gate, a child run) until a person acts."""

    step_id: str
    notes: str


@dataclass(frozen=True, slots=True)
class CompleteStep:
    """Journal a step's completion with its output, and skip the steps a route did not select.
    `journaled`: its one unit's completion already journaled it (only the drive's rows follow)."""

    step: pf.AnyStep
    output: Any
    skipped: tuple[str, ...] = ()
    journaled: bool = False


@dataclass(frozen=True, slots=True)
class Finish:
    """Complete the run with its outputs, together with the last step's completion (`last`)."""

    last: CompleteStep | None = None


@dataclass(frozen=True, slots=True)
class BlockStep:
    """Journal a blocked step; the run then waits at it."""

    step: pf.AnyStep
    end: End


@dataclass(frozen=True, slots=True)
class FailStep:
    """Journal a failed step. `continued` (on_error = continue): its output is null and the run
    goes on; otherwise the run fails with `failure`."""

    step: pf.AnyStep
    end: End
    continued: bool
    failure: dict[str, Any]


def next_step(plan: pf.Plan, rows: Rows, index: int = 0) -> StartStep | Wait | Finish:
    """Where the spine goes from step `index` on: past settled steps to the first it must run,
    or to a blocked one; past the last step, the run finishes."""
    steps = plan["steps"]
    for at in range(index, len(steps)):
        step, row = steps[at], rows[steps[at]["stepId"]]
        action = core.spine_action(step, row)
        if action == "blocked":
            return Wait(step["stepId"], row.notes or "")
        if action == "run":
            return StartStep(step, at, at == len(steps) - 1)
    return Finish()


def step_ended(start: StartStep, ended: End, rows: Rows) -> CompleteStep | Finish | BlockStep | FailStep:
    """What the end of a step the spine started means for the run."""
    step = start.step
    if ended.status == "completed":
        skipped = tuple(core.not_selected(step, ended.output, rows)) if step["kind"] == "route" else ()
        completion = CompleteStep(step, ended.output, skipped, journaled=ended.recorded)
        return Finish(completion) if start.last else completion
    if ended.status == "blocked":
        return BlockStep(step, ended)
    continued = step["onError"] == "continue"
    return FailStep(step, ended, continued, core.failure(step, ended))


def with_step(rows: Rows, step_id: str, status: StepStatus, output_json: str | None) -> dict[str, StepRow]:
    """The rows once a step moved to `status` with the output `output_json` (None: it keeps its own)."""
    row = rows[step_id]
    output = row.output_json if output_json is None else output_json
    return {**rows, step_id: dataclasses.replace(row, status=status, output_json=output)}


def completed(rows: Rows, completion: CompleteStep | None) -> Rows:
    """The rows once a completion is journaled: the step with its output, the skipped ones."""
    if completion is None:
        return rows
    after = with_step(rows, completion.step["stepId"], "completed", dumps(completion.output))
    for name in completion.skipped:
        after = with_step(after, name, "skipped", None)
    return after


def failed_step(rows: Rows, failing: FailStep) -> Rows:
    """The rows once a step failed: under on_error = continue its output reads as null, unless it is
    the partial list of a map that kept going (stored either way)."""
    if failing.end.partial is not None:
        return with_step(rows, failing.step["stepId"], "failed", dumps(failing.end.partial))
    return with_step(rows, failing.step["stepId"], "failed", "null" if failing.continued else None)


def stops_block(block: pf.ParallelStep, member: pf.Member, end: End) -> bool:
    """Whether a member's end stops a fail-fast block from starting anything more: a block, or a
    failure the member does not continue past."""
    if block.get("failFast", True) is False:
        return False
    return end.status == "blocked" or (end.status == "failed" and member["onError"] != "continue")


def block_end(block: pf.ParallelStep, rows: Rows, hint: Hint, run_id: str) -> End:
    """A block's end from its members' journaled rows (akm_run.core.block_end)."""
    return core.block_end(block, rows, hint, run_id)


# -- steps ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settle:
    """The step ends as `end` with no unit of its own to run now (a route's choice, an approval
    waiting, an input that did not resolve, a gate's verdict)."""

    end: End


@dataclass(frozen=True, slots=True)
class RunWork:
    """Run a work step's units for gate iteration `iteration` (`loops` rejections so far); the
    units are given `feedback` from the iteration before."""

    step: pf.WorkStep
    iteration: int = 0
    loops: int = 0
    feedback: str | None = None

    @property
    def given(self) -> str | None:
        """The feedback the units see: none on the first iteration."""
        return self.feedback if self.iteration else None


def step_work(
    step: pf.AnyStep, row: StepRow, params: Mapping[str, Any], rows: Rows, hint: Hint, run_id: str
) -> Settle | RunWork:
    """What running a step means: a route or an approval settles it; a work step runs units, a
    gated one from the iteration its row records (a `parallel` block runs its members instead)."""
    assert step["kind"] != "parallel"
    if step["kind"] == "route":
        return Settle(core.route(step, params, rows))
    if step["target"]["kind"] == "approval":
        notes = core.approval_notes(hint, run_id, step["stepId"], step["target"]["message"])
        return Settle(End("blocked", notes=notes))
    if "gate" not in step:
        return RunWork(step)
    return RunWork(step, row.gate_iteration, row.gate_loops, row.gate_feedback)


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit to run: its step, target and placement, what it reads, and how its end is recorded."""

    step: pf.WorkStep
    target: pf.Target
    place: Placement
    loop: int
    inputs: dict[str, Any]
    feedback: str | None
    schema: pf.Schema | None
    gate_output: Any = None
    gate_check: bool = False  # the unit is a gate's check (never retried)
    completes: bool = False  # the step completes with this unit (journaled together)
    width: int = 1  # how many units of the step run at once


@dataclass(frozen=True, slots=True)
class FailUnit:
    """A unit that fails before any attempt: journaled as failed, never dispatched."""

    step: pf.AnyStep
    place: Placement
    reason: str
    message: str

    @property
    def end(self) -> End:
        return core.failed(self.reason, self.message)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """Run these units to their ends, `width` at a time (a map's), in their order. `keep_going`
    (`fail_fast = false`): a unit that fails or blocks does not stop its siblings."""

    units: tuple[Unit, ...]
    width: int = 1
    keep_going: bool = False


def work_units(
    work: RunWork, params: Mapping[str, Any], rows: Rows, *, last: bool, plan: pf.Plan, max_concurrency: int
) -> Settle | FailUnit | Dispatch:
    """The units of one iteration of a work step: one per item of a map, else one."""
    step, loop, feedback = work.step, work.iteration, work.given
    inputs, missing = core.step_inputs(step, params, rows)
    if step["kind"] == "map":
        items = core.map_items(step, params, rows)
        if missing or isinstance(items, str):
            return Settle(core.failed("input_unresolved", "; ".join(missing or [str(items)])))
        width = core.map_width(step, plan, max_concurrency)
        schema = core.item_schema(step)
        ids = identity.map_unit_ids(step["stepId"], items)
        places = (Placement(step["stepId"], identity.journal_id(ids[i], loop), item, i) for i, item in enumerate(items))
        units = tuple(Unit(step, step["target"], p, loop, inputs, feedback, schema, width=width) for p in places)
        return Dispatch(units, width, keep_going=step.get("failFast", True) is False)
    place = Placement(step["stepId"], identity.journal_id(identity.unit_id(step["stepId"]), loop))
    if missing:
        return FailUnit(step, place, "input_unresolved", "; ".join(missing))
    solo = "gate" not in step and not last  # its output is its one unit's: complete both at once
    unit = Unit(step, step["target"], place, loop, inputs, feedback, core.item_schema(step), completes=solo)
    return Dispatch((unit,))


def work_end(step: pf.WorkStep, ends: Sequence[End | None], hint: Hint, run_id: str) -> End:
    """A work step's end from its units': a map's from all of them, a single unit's block as the step's."""
    if step["kind"] == "map":
        if step.get("failFast", True) is False:
            return core.kept_going_end(step, ends, hint, run_id)
        return core.map_end(step, ends)
    [end] = ends
    assert end is not None
    if end.status == "blocked":
        return End("blocked", reason=end.reason, notes=end.message)
    return end


def gate_check(work: RunWork, output: Any) -> Unit:
    """The gate's check of one iteration's output (a unit of its own, never retried)."""
    step = work.step
    place = Placement(step["stepId"], identity.journal_id(f"{step['stepId']}:gate", work.iteration))
    return Unit(step, step["gate"]["check"], place, work.iteration, {}, work.given, None, output, True)


@dataclass(frozen=True, slots=True)
class RejectGate:
    """The check rejected iteration `iteration` with `feedback`: journal it, then run the work
    again (`then` a RunWork, its loop journaled) or end the step (`then` an End: exhausted)."""

    iteration: int
    feedback: str
    then: RunWork | End


def gate_verdict(work: RunWork, done: End, check: End, hint: Hint, run_id: str) -> Settle | RejectGate:
    """What a gate's check means: a pass settles the step with the work's end, a check that could
    not run fails it, a rejection loops the work or, past max_loops, blocks the step."""
    if check.status == "completed":
        return Settle(done)
    if check.reason != "exit":
        return Settle(End("failed", reason=check.reason, message=f"gate check: {check.message}"))
    feedback, max_loops = core.gate_feedback(check), work.step["gate"]["maxLoops"]
    if work.loops >= max_loops:
        return RejectGate(work.iteration, feedback, core.gate_exhausted(hint, run_id, work.loops, max_loops, feedback))
    return RejectGate(work.iteration, feedback, RunWork(work.step, work.iteration + 1, work.loops + 1, feedback))


# -- units ----------------------------------------------------------------------------------------------


def budget_spent(unit: Unit, limits: pf.Limits) -> FailUnit:
    """A unit the run's unit budget has no room for."""
    message = f"the run has dispatched its limit of {limits.get('maxUnits')} units (max_units)"
    return FailUnit(unit.step, unit.place, "budget_exceeded", message)


def unresolved_bindings(unit: Unit, missing: list[str]) -> FailUnit:
    return FailUnit(unit.step, unit.place, "input_unresolved", "; ".join(missing))


@dataclass(frozen=True, slots=True)
class Redo:
    """The attempt's process died with its host: finish the attempt as a crash reclaim does and run
    the unit again under the same dispatch id (not a retry)."""


@dataclass(frozen=True, slots=True)
class Record:
    """Journal how the attempt ended; with `retry_after_ms` the unit is retried after that wait,
    otherwise its end is final."""

    retry_after_ms: int | None = None


def attempt_verdict(unit: Unit, outcome: End, retries: int) -> Redo | Record:
    """What an attempt's end means for its unit, `retries` retries in."""
    if outcome.status == "interrupted":
        return Redo()
    retry = core.retry_policy(unit.step, unit.gate_check)
    if retry is not None and outcome.status == "failed" and core.retries_again(retry, outcome.reason, retries):
        return Record(core.backoff_ms(retry, retries + 1))
    return Record()
