"""The plan-interpretation core: what a plan means for a run, with no I/O.

Spine order, routes, retry policy, gates, output resolution, bindings and the context a unit is
given are decided here, from the plan, the run's params and its journaled step rows.
akm_run.decisions turns them into what a drive does next, which the engine (akm_run.engine,
akm_run.attempts) journals and dispatches; a second store reuses all of it unchanged."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from akm_run import planformat as pf
from akm_run import wording
from akm_run.digest import canonical_bytes
from akm_run.numbers import normal
from akm_run.rows import StepRow
from akm_run.schemas import schema_errors
from akm_run.strictjson import dumps

# "interrupted": the attempt's process died with its host before it ended (the worker pool); the
# engine finishes the attempt as a crash reclaim does and runs the unit again.
EndStatus = Literal["completed", "failed", "blocked", "aborted", "interrupted", "not_dispatched"]
# A run's status, or aborted, or paused (akm-run pause: nothing more could start; the run stays active).
DriveStatus = Literal["active", "completed", "failed", "blocked", "aborted", "paused"]
Hint = Callable[..., str]  # akm_run.hints.Hints: the command a person types, as text


class Aborted(Exception):
    """The drive was interrupted (signal or run timeout); the run stays active and resumable."""


class Paused(Exception):
    """Nothing more can start: the run, or the step a unit belongs to, is paused (akm-run pause).
    `held` is the pause's document: {"by", "now", "stepId"?, "runId"?}."""

    def __init__(self, held: dict[str, Any]) -> None:
        super().__init__(held.get("by"))
        self.held = held


@dataclass(slots=True)
class End:
    """How a unit attempt, a unit or a step ended: one result type from the process to the spine.

    `message` says why it failed; a blocked step's `notes` say what a person must do. `recorded`
    is set when the step's completion was journaled together with its one unit's. `partial`: the
    output a map that kept going stores although it failed (null at each failed item)."""

    status: EndStatus
    output: Any = None
    reason: str | None = None
    message: str | None = None
    notes: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    recorded: bool = False
    usage: dict[str, Any] | None = None  # the attempt's last usage report (an agent's, operations.md D8)
    partial: list[Any] | None = None


def failed(reason: str, message: str, output: Any = None) -> End:
    return End("failed", output=output, reason=reason, message=message)


# -- values -------------------------------------------------------------------------------------------


def resolve(reference: str, params: Mapping[str, Any], steps: Mapping[str, StepRow]) -> tuple[bool, Any]:
    """(True, value) for a reference that resolves against the run's params and stored outputs.

    A step a route skipped, and one that failed under `on_error = continue` (its stored output is
    null), read as null; a path beneath null does not resolve. So does a member that never started
    in a block that failed and continued: references only point back, so a step still pending when
    it is read is one the spine passed over. A step an operator skipped (akm-run skip) reads as the
    output it was given."""
    if reference.startswith("params."):
        name = reference[len("params.") :]
        return (name in params), params.get(name)
    head, _, rest = reference[len("steps.") :].partition(".output")
    row = steps.get(head)
    if row is not None and row.status == "skipped":  # a route's skip: null; an operator's: the output given
        return walk(row.output, rest)
    if row is not None and row.status == "pending":
        return walk(None, rest)
    if row is None or not (row.status == "completed" or (row.status == "failed" and row.output_json is not None)):
        return False, None
    return walk(row.output, rest)


def walk(value: Any, path: str) -> tuple[bool, Any]:
    """(True, the value at `path`, a run of `.name` and `[n]` segments) when every segment exists."""
    for match in pf.SEGMENT.finditer(path):
        key, index = match.group(1), match.group(2)
        if key is not None and isinstance(value, dict) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return False, None
    return True, value


def step_inputs(
    step: pf.AnyStep, params: Mapping[str, Any], rows: Mapping[str, StepRow]
) -> tuple[dict[str, Any], list[str]]:
    """The values of a step's declared inputs, and what did not resolve."""
    inputs: dict[str, Any] = {}
    missing: list[str] = []
    if step["kind"] == "parallel":  # a block reads nothing itself; its members do
        return inputs, missing
    for reference in step.get("inputs", []):
        ok, value = resolve(reference, params, rows)
        if ok:
            inputs[reference] = value
        else:
            missing.append(f"{reference} did not resolve")
    return inputs, missing


def map_items(step: pf.MemberMap, params: Mapping[str, Any], rows: Mapping[str, StepRow]) -> list[Any] | str:
    """The list a map step runs over, or why there is none."""
    ok, items = resolve(step["over"], params, rows)
    if ok and isinstance(items, list):
        return items
    return f"{step['over']} is not a list" if ok else f"{step['over']} did not resolve"


def bindings(
    target: pf.ChildTarget, item: Any, params: Mapping[str, Any], rows: Mapping[str, StepRow]
) -> tuple[dict[str, Any], list[str]]:
    """A child-workflow target's bindings, resolved: literals as they are, references from the run,
    `item` from the element this unit of a map step handles."""
    bound, missing = {}, []
    for binding in target.get("bindings", []):
        if binding["kind"] == "literal":
            bound[binding["name"]] = normal(binding["value"])
            continue
        if binding["kind"] == "item":
            ok, value = walk(item, binding["from"][len("item") :])
        else:
            ok, value = resolve(binding["from"], params, rows)
        if ok:
            bound[binding["name"]] = value
        else:
            missing.append(f"binding {binding['name']}: {binding['from']} did not resolve")
    return bound, missing


def outputs(
    plan: pf.Plan, run_id: str, params: Mapping[str, Any], rows: Mapping[str, StepRow]
) -> tuple[Any, list[str]]:
    """The run's exported outputs and the problems that keep it from completing."""
    declared = plan.get("outputs")
    if not declared:
        return {"runId": run_id, "status": "completed"}, []
    exported, problems = {}, []
    for name, output in declared.items():
        ok, value = resolve(output["from"], params, rows)
        if not ok:
            problems.append(f"output {name}: {output['from']} did not resolve")
            continue
        errors = schema_errors(value, output["schema"]) if "schema" in output else []
        if errors:
            problems.append(f"output {name}: {errors[0]}")
            continue
        exported[name] = value
    return exported, problems


# -- the spine ----------------------------------------------------------------------------------------


def every_step(plan: pf.Plan) -> list[pf.AnyStep]:
    """The plan's own steps in order, each `parallel` block followed by its members."""
    found: list[pf.AnyStep] = []
    for step in plan["steps"]:
        found.append(step)
        if step["kind"] == "parallel":
            found += step["members"]
    return found


SpineAction = Literal["pass", "blocked", "run"]


def spine_action(step: pf.AnyStep, row: StepRow) -> SpineAction:
    """What the spine does at a step: pass a settled one, stop at a blocked one, or run it."""
    if row.status in ("completed", "skipped") or (row.status == "failed" and step["onError"] == "continue"):
        return "pass"
    return "blocked" if row.status == "blocked" else "run"


def route(step: pf.RouteStep, params: Mapping[str, Any], rows: Mapping[str, StepRow]) -> End:
    """A route step's choice: completed with the id of the step it selects, or failed."""
    ok, value = resolve(step["input"], params, rows)
    if not ok:
        return failed("input_unresolved", f"{step['input']} did not resolve")
    for case in step["cases"]:  # by value (akm_run.numbers): canonical bytes of normal values
        if canonical_bytes(normal(case["match"])) == canonical_bytes(normal(value)):
            return End("completed", output=case["next"])
    if "default" in step:
        return End("completed", output=step["default"])
    return failed("route_no_match", f"no case of the route matches {dumps(value)}")


def not_selected(step: pf.RouteStep, selected: str, rows: Mapping[str, StepRow]) -> list[str]:
    """The route's other targets that are still pending: they are skipped."""
    targets = [c["next"] for c in step["cases"]] + ([step["default"]] if "default" in step else [])
    return [name for name in dict.fromkeys(targets) if name != selected and rows[name].status == "pending"]


def failure(step: pf.AnyStep, end: End) -> dict[str, Any]:
    return {"stepId": step["stepId"], "reason": end.reason, "message": end.message}


# -- units ----------------------------------------------------------------------------------------------


def retry_policy(step: pf.WorkStep, gate_check: bool) -> pf.Retry | None:
    """A step's retry policy applies to its work, never to its gate's check."""
    return None if gate_check else step.get("retry")


def retries_again(retry: pf.Retry | None, reason: str | None, retries: int) -> bool:
    return retry is not None and reason in retry["on"] and retries < retry["max"]


def backoff_ms(retry: pf.Retry, retries: int) -> int:
    """The wait before retry number `retries` (1-based): backoffMs, doubling each time."""
    return int(retry.get("backoffMs", 0)) << max(0, retries - 1)


def unit_end(outcome: End) -> End:
    """A unit's final failure: a blocked child run blocks the step; anything else fails it."""
    status: EndStatus = "blocked" if outcome.reason == "child_workflow_blocked" else "failed"
    return End(status, outcome.output, outcome.reason, outcome.message)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a unit stands: its step, its journal id, and for a map unit its item and index."""

    step_id: str
    journal: str
    item: Any = None
    index: int | None = None


def unit_context(
    run_id: str,
    place: Placement,
    dispatch: str,
    attempt: int,
    inputs: dict[str, Any],
    feedback: str | None,
    gate_output: Any,
) -> dict[str, Any]:
    """The context file of one attempt. Only what the step declares reaches a unit (language-v2.md):
    its inputs, its item, and a gate's feedback; never the run's other params."""
    context: dict[str, Any] = {
        "runId": run_id,
        "stepId": place.step_id,
        "unitId": place.journal,
        "dispatchId": dispatch,
        "attempt": attempt,
        "inputs": inputs,
    }
    if place.index is not None:
        context["item"], context["itemIndex"] = place.item, place.index
    if feedback is not None:
        context["gateFeedback"] = feedback
    if gate_output is not None:
        context["output"] = gate_output
    return context


def map_width(step: pf.MemberMap, plan: pf.Plan, max_concurrency: int) -> int:
    return max(1, min(step["concurrency"], plan["limits"]["concurrency"], max_concurrency))


def map_end(step: pf.MemberMap, ends: Sequence[End | None]) -> End:
    """A map step's end from its units': the first failure, else every block, else the outputs."""
    for index, end in enumerate(ends):
        if end is not None and end.status == "failed":
            return End("failed", reason=end.reason, message=f"item {index}: {end.message}")
    blocked = [end for end in ends if end is not None and end.status == "blocked"]
    if blocked:
        return End("blocked", reason=blocked[0].reason, notes="\n".join(end.message or "" for end in blocked))
    values = [end.output for end in ends if end is not None]
    if "outputSchema" in step:
        problems = schema_errors(values, step["outputSchema"])
        if problems:
            return failed("output_invalid", problems[0])
    return End("completed", output=values)


def kept_going_end(step: pf.MemberMap, ends: Sequence[End | None], hint: Hint, run_id: str) -> End:
    """The end of a map that kept going (`fail_fast = false`), once every unit settled: blocked when
    any unit is (each listed with what clears it), else failed with the list of what completed
    (null at each failed index), else completed (operations.md D3.2)."""
    blocked = [(i, end) for i, end in enumerate(ends) if end is not None and end.status == "blocked"]
    if blocked:
        notes = blocked_units(hint, run_id, [(i, end.message or "") for i, end in blocked])
        return End("blocked", reason=blocked[0][1].reason, notes=notes)
    failures = [(i, end) for i, end in enumerate(ends) if end is None or end.status != "completed"]
    if failures:
        listed = [wording.failed_unit(index=i, reason=(end.reason if end else None) or "?") for i, end in failures]
        message = wording.units_failed(count=len(failures), total=len(ends), units=_bounded(listed, ", ", None))
        partial = [end.output if end is not None and end.status == "completed" else None for end in ends]
        return End("failed", reason="units_failed", message=message, partial=partial)
    return map_end(step, ends)


LISTED = 20  # how many units a note or message of a fan-out names before it counts the rest


def _blocked(count: int, one: str, many: str) -> str:
    return str(wording.one_blocked(what=one) if count == 1 else wording.blocked(count=count, what=many))


def blocked_units(hint: Hint, run_id: str, blocked: Sequence[tuple[int, str]]) -> str:
    """The notes of a fan-out whose units (item index, the unit's own notes) are blocked: each unit
    with what clears it, at most LISTED of them, then how to continue once they are cleared."""
    listed = [f"  {wording.blocked_unit(index=i)}\n{_indented(notes)}" for i, notes in blocked]
    units = _bounded(listed, "\n", hint("status", run_id), "  ")
    then = wording.blocked_then(resume=hint("resume", run_id), run=hint("run", run_id))
    return f"{_blocked(len(blocked), 'unit', 'units')}\n{units}\n{then}"


def block_end(step: pf.ParallelStep, rows: Mapping[str, StepRow], hint: Hint, run_id: str) -> End:
    """A `parallel` block's end once its members settled (or drained), worst first: blocked when a
    member is, else failed when a member failed without `on_error = continue`, else completed with
    `{member: output}`, each as the member itself reads (`resolve`): null for a member a route skipped,
    what a member that failed under `on_error = continue` kept (null, or a keep-going map's list), the
    given output for one an operator skipped (operations.md D1)."""
    members = step["members"]
    blocked = [m["stepId"] for m in members if rows[m["stepId"]].status == "blocked"]
    if blocked:
        listed = [f"  {wording.blocked_member(step=m)}\n{_indented(rows[m].notes or '')}" for m in blocked]
        then = wording.blocked_then(resume=hint("resume", run_id), run=hint("run", run_id))
        notes = (
            f"{_blocked(len(blocked), 'member of the block', 'members of the block')}\n"
            + "\n".join(listed)
            + f"\n{then}"
        )
        return End("blocked", reason=rows[blocked[0]].failure_reason, notes=notes)
    failing = [m["stepId"] for m in members if rows[m["stepId"]].status == "failed" and m["onError"] != "continue"]
    if failing:
        why = ", ".join(wording.failed_member(step=m, reason=rows[m].failure_reason or "?") for m in failing)
        return failed("members_failed", wording.members_failed(count=len(failing), total=len(members), members=why))
    output = {m["stepId"]: resolve(f"steps.{m['stepId']}.output", {}, rows)[1] for m in members}
    return End("completed", output=output)


def _bounded(entries: list[str], separator: str, status: str | None, indent: str = "") -> str:
    """At most LISTED entries, then how many more (and where to see them)."""
    if len(entries) <= LISTED:
        return separator.join(entries)
    more = len(entries) - LISTED
    tail = wording.more_units(count=more, where="" if status is None else f" (`{status}`)")
    return separator.join([*entries[:LISTED], indent + tail])


def _indented(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def item_schema(step: pf.WorkStep) -> pf.Schema | None:
    """The schema each unit's output must meet: a map step's declares its items."""
    if "outputSchema" not in step:
        return None
    return step["outputSchema"].get("items") if step["kind"] == "map" else step["outputSchema"]


# -- approvals and gates --------------------------------------------------------------------------------


def approval_notes(hint: Hint, run_id: str, step_id: str, message: str) -> str:
    return (
        f'Waiting for approval: "{message}"\n'
        f"Approve with `{hint('approve', run_id, step_id)}` "
        f"(or reject with `{hint('approve', run_id, step_id, '--reject')}`), "
        f"then `{hint('run', run_id)}`."
    )


def gate_feedback(check: End) -> str:
    """What a rejecting check printed, handed to the next iteration of the work."""
    return check.output if isinstance(check.output, str) else dumps(check.output)


def gate_exhausted(hint: Hint, run_id: str, loops: int, max_loops: int, feedback: str | None) -> End:
    """The gate rejected the work max_loops + 1 times: the step blocks for a person."""
    quoted = "\n".join(f"  > {line}" for line in (feedback or "(no output)").splitlines()) or "  > (no output)"
    notes = (
        f"The gate check rejected the output {loops + 1} time(s); max_loops is {max_loops}. "
        f"Last feedback:\n{quoted}\n"
        f"Resume with `{hint('resume', run_id)}`, then `{hint('run', run_id)}`."
    )
    return End("blocked", reason="gate_rejected", notes=notes)


# -- drives ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class DriveResult:
    """How one drive ended. `status` is the run's status, or "aborted" (run still active)."""

    run_id: str
    status: DriveStatus
    failure: dict[str, Any] | None = None
    blocked: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    exported: Any = None
    paused: dict[str, Any] | None = None  # status "paused": who paused what ({"by", "stepId"?, "runId"?})


SIGNALLED = "interrupted by a signal"  # why a drive was aborted when `run` got SIGINT or SIGTERM


def aborted(run_id: str, why: str, resume: str) -> DriveResult:
    """How a drive that was aborted (`why`) ends: the run stays active, and `resume` continues it."""
    return DriveResult(
        run_id, "aborted", error={"code": "ABORTED", "message": f"{why}; the run is resumable: {resume}"}
    )
