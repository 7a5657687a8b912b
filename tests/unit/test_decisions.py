"""akm_run.decisions: what a drive does next, decided from a plan, params and journal rows alone.

No journal and no dispatcher: each test states rows and an end, and asserts the decision value."""

from __future__ import annotations

import json
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run import decisions, features
from akm_run import planformat as pf
from akm_run.core import End
from akm_run.decisions import (
    BlockStep,
    CompleteStep,
    Dispatch,
    FailStep,
    FailUnit,
    Finish,
    Record,
    Redo,
    RejectGate,
    RunWork,
    Settle,
    StartStep,
    Wait,
)
from akm_run.hints import Hints
from akm_run.plan import verify_plan
from akm_run.rows import StepRow, StepStatus
from profiles import examples

HINT = Hints()
GATE = {"check": {"kind": "shell", "command": "check"}, "maxLoops": 2}


def unit(step_id: str, **extra: Any) -> dict[str, Any]:
    target = {"kind": "shell", "command": step_id}
    return {"stepId": step_id, "kind": "unit", "onError": "fail", "target": target, **extra}


def mapped(step_id: str, over: str, concurrency: int = 2, **extra: Any) -> dict[str, Any]:
    return {**unit(step_id), "kind": "map", "over": over, "concurrency": concurrency, **extra}


def route(step_id: str, source: str, *targets: str) -> dict[str, Any]:
    cases = [{"match": name, "next": name} for name in targets]
    return {"stepId": step_id, "kind": "route", "onError": "fail", "input": source, "cases": cases}


def plan(*steps: dict[str, Any], concurrency: int = 4, params: tuple[str, ...] = ()) -> pf.Plan:
    numbered = [{**step, "index": i} for i, step in enumerate(steps)]
    out: Any = {
        "irVersion": 1,
        "ref": "workflows/t",
        "title": "T",
        "sourceReadSet": [{"path": "workflows/t.akm"}],
        "limits": {"concurrency": concurrency},
        "steps": numbered,
    }
    if params:
        out["params"] = {name: {"schema": {}} for name in params}
    if features.used(out):
        out["features"] = features.used(out)
    verify_plan(out)
    return cast(pf.Plan, out)


def work(the_plan: pf.Plan, index: int = 0) -> pf.WorkStep:
    """A step of the plan that runs units (the tests' plans say which ones do)."""
    step = the_plan["steps"][index]
    assert step["kind"] in ("unit", "map")
    return step


def row(step_id: str, status: StepStatus = "pending", output: Any = None, **extra: Any) -> StepRow:
    fields: dict[str, Any] = {"notes": None, "gate_iteration": 0, "gate_loops": 0, "gate_feedback": None, **extra}
    output_json = None if output is None else json.dumps(output)
    return StepRow(
        step_id,
        0,
        status,
        output_json,
        fields["notes"],
        None,
        None,
        fields["gate_iteration"],
        fields["gate_loops"],
        fields["gate_feedback"],
    )


def rows(*given: StepRow) -> dict[str, StepRow]:
    return {r.step_id: r for r in given}


# -- the spine ----------------------------------------------------------------------------------------


def test_the_spine_passes_settled_steps_and_starts_the_first_it_must_run() -> None:
    the_plan = plan(unit("a"), unit("b", onError="continue"), unit("c"), unit("d"))
    journal = rows(row("a", "completed", 1), row("b", "failed"), row("c", "skipped"), row("d"))
    reached = decisions.next_step(the_plan, journal)
    assert isinstance(reached, StartStep) and (reached.step["stepId"], reached.index, reached.last) == ("d", 3, True)


def test_a_failed_step_that_does_not_continue_is_run_again() -> None:
    reached = decisions.next_step(plan(unit("a"), unit("b")), rows(row("a", "failed"), row("b")))
    assert isinstance(reached, StartStep) and (reached.index, reached.last) == (0, False)


def test_the_spine_waits_at_a_blocked_step_with_its_notes() -> None:
    journal = rows(row("a", "completed", 1), row("b", "blocked", notes="approve it"), row("c"))
    assert decisions.next_step(plan(unit("a"), unit("b"), unit("c")), journal) == Wait("b", "approve it")


def test_the_spine_finishes_past_the_last_step_and_looks_only_from_where_it_is() -> None:
    the_plan = plan(unit("a"), unit("b"))
    assert decisions.next_step(the_plan, rows(row("a", "completed", 1), row("b", "completed", 2))) == Finish()
    assert decisions.next_step(the_plan, rows(row("a"), row("b", "completed", 2)), 1) == Finish()


STATUSES: list[StepStatus] = ["pending", "running", "completed", "failed", "blocked", "skipped"]


@settings(max_examples=examples(200))
@given(st.lists(st.tuples(st.sampled_from(STATUSES), st.booleans()), min_size=1, max_size=6))
def test_the_spine_stops_at_the_first_step_that_is_not_settled(shape: list[tuple[StepStatus, bool]]) -> None:
    steps = [unit(f"s{i}", onError="continue" if continues else "fail") for i, (_, continues) in enumerate(shape)]
    journal = rows(*(row(f"s{i}", status) for i, (status, _) in enumerate(shape)))
    settled = [s == "completed" or s == "skipped" or (s == "failed" and c) for s, c in shape]
    reached = decisions.next_step(plan(*steps), journal)
    if all(settled):
        assert reached == Finish()
        return
    first = settled.index(False)
    if shape[first][0] == "blocked":
        assert reached == Wait(f"s{first}", "")
    else:
        assert isinstance(reached, StartStep) and reached.index == first and reached.last == (first == len(shape) - 1)


def test_a_completed_step_is_completed_and_the_last_one_with_the_run() -> None:
    the_plan = plan(unit("a"), unit("b"))
    first, last = decisions.next_step(the_plan, rows(row("a"), row("b"))), StartStep(the_plan["steps"][1], 1, True)
    assert isinstance(first, StartStep)
    journal = rows(row("a"), row("b"))
    assert decisions.step_ended(first, End("completed", 7), journal) == CompleteStep(first.step, 7)
    journaled = decisions.step_ended(first, End("completed", 7, recorded=True), journal)
    assert isinstance(journaled, CompleteStep) and journaled.journaled
    assert decisions.step_ended(last, End("completed", 8), journal) == Finish(CompleteStep(last.step, 8))


def test_a_route_skips_the_pending_steps_it_did_not_select() -> None:
    the_plan = plan(unit("pick"), route("r", "steps.pick.output", "x", "y", "z"), unit("x"), unit("y"), unit("z"))
    journal = rows(row("pick", "completed", "y"), row("r"), row("x"), row("y"), row("z", "completed", 1))
    ended = decisions.step_ended(StartStep(the_plan["steps"][1], 1, False), End("completed", "y"), journal)
    assert isinstance(ended, CompleteStep) and ended.skipped == ("x",)  # z already ran
    after = decisions.completed(journal, ended)
    assert {name: r.status for name, r in after.items()} == {
        "pick": "completed",
        "r": "completed",
        "x": "skipped",
        "y": "pending",
        "z": "completed",
    }
    assert after["r"].output == "y" and journal["r"].status == "pending"  # the rows given stay as they were


def test_a_failed_step_fails_the_run_unless_it_continues_with_a_null_output() -> None:
    the_plan = plan(unit("a"), unit("b", onError="continue"))
    end = End("failed", reason="exit", message="it failed")
    failing = decisions.step_ended(StartStep(the_plan["steps"][0], 0, False), end, rows(row("a")))
    assert failing == FailStep(
        the_plan["steps"][0], end, False, {"stepId": "a", "reason": "exit", "message": "it failed"}
    )
    continued = decisions.step_ended(StartStep(the_plan["steps"][1], 1, True), end, rows(row("b")))
    assert isinstance(continued, FailStep) and continued.continued
    after = decisions.failed_step(rows(row("a"), row("b")), continued)
    assert (after["b"].status, after["b"].output_json) == ("failed", "null")


def test_a_blocked_step_is_blocked() -> None:
    the_plan = plan(unit("a"))
    end = End("blocked", reason="gate_rejected", notes="look")
    assert decisions.step_ended(StartStep(the_plan["steps"][0], 0, True), end, rows(row("a"))) == BlockStep(
        the_plan["steps"][0], end
    )


# -- steps ----------------------------------------------------------------------------------------------


def test_a_route_and_an_approval_settle_without_units_of_their_own() -> None:
    the_plan = plan(
        unit("pick"),
        route("r", "steps.pick.output", "x"),
        unit("x"),
        {**unit("ok"), "target": {"kind": "approval", "message": "ship?"}},
    )
    journal = rows(row("pick", "completed", "x"), row("r"), row("x"), row("ok"))
    chosen = decisions.step_work(the_plan["steps"][1], journal["r"], {}, journal, HINT, "R")
    assert chosen == Settle(End("completed", output="x"))
    waiting = decisions.step_work(the_plan["steps"][3], journal["ok"], {}, journal, HINT, "R")
    assert isinstance(waiting, Settle) and waiting.end.status == "blocked"
    notes = waiting.end.notes or ""
    assert 'Waiting for approval: "ship?"' in notes and "akm-run approve R ok" in notes


def test_a_gated_step_runs_from_the_iteration_its_row_records() -> None:
    step = work(plan(unit("w", gate=GATE)))
    fresh = decisions.step_work(step, row("w"), {}, rows(row("w")), HINT, "R")
    assert isinstance(fresh, RunWork) and fresh == RunWork(step) and fresh.given is None
    later = row("w", gate_iteration=2, gate_loops=1, gate_feedback="too short")
    resumed = decisions.step_work(step, later, {}, rows(later), HINT, "R")
    assert isinstance(resumed, RunWork) and resumed == RunWork(step, 2, 1, "too short")
    assert resumed.given == "too short"
    reopened = row("w", gate_loops=1, gate_feedback="old")  # the first iteration again: no feedback reaches it
    first = decisions.step_work(step, reopened, {}, rows(reopened), HINT, "R")
    assert isinstance(first, RunWork)
    planned = decisions.work_units(first, {}, {}, last=False, plan=plan(unit("w", gate=GATE)), max_concurrency=1)
    assert isinstance(planned, Dispatch) and planned.units[0].feedback is None


def test_a_single_unit_completes_its_step_unless_it_is_gated_or_the_last() -> None:
    the_plan = plan(unit("a", inputs=["params.n"]), unit("g", gate=GATE), params=("n",))
    a, g = work(the_plan, 0), work(the_plan, 1)
    planned = decisions.work_units(RunWork(a), {"n": 3}, {}, last=False, plan=the_plan, max_concurrency=16)
    assert isinstance(planned, Dispatch) and len(planned.units) == 1
    [one] = planned.units
    assert (one.place.journal, one.inputs, one.completes, one.width) == ("a:solo", {"params.n": 3}, True, 1)
    last = decisions.work_units(RunWork(a), {"n": 3}, {}, last=True, plan=the_plan, max_concurrency=16)
    gated = decisions.work_units(RunWork(g, 1, 1, "fix it"), {}, {}, last=False, plan=the_plan, max_concurrency=16)
    assert isinstance(last, Dispatch) and not last.units[0].completes
    assert isinstance(gated, Dispatch) and not gated.units[0].completes
    assert (gated.units[0].place.journal, gated.units[0].feedback) == ("g:solo~l1", "fix it")


def test_an_unresolved_input_fails_a_single_unit_before_dispatch_and_a_map_step_outright() -> None:
    the_plan = plan(unit("a", inputs=["params.missing"]), mapped("m", "params.items"), params=("missing", "items"))
    a, m = work(the_plan, 0), work(the_plan, 1)
    failing = decisions.work_units(RunWork(a), {}, {}, last=False, plan=the_plan, max_concurrency=16)
    assert isinstance(failing, FailUnit) and (failing.place.journal, failing.reason) == ("a:solo", "input_unresolved")
    assert failing.end == End("failed", reason="input_unresolved", message="params.missing did not resolve")
    not_a_list = decisions.work_units(RunWork(m), {"items": 3}, {}, last=False, plan=the_plan, max_concurrency=16)
    assert not_a_list == Settle(End("failed", reason="input_unresolved", message="params.items is not a list"))


def test_a_map_dispatches_one_unit_per_item_in_order_at_the_narrowest_width() -> None:
    the_plan = plan(mapped("m", "params.items", concurrency=8), concurrency=3, params=("items",))
    step = work(the_plan)
    planned = decisions.work_units(
        RunWork(step), {"items": ["x", "y"]}, {}, last=True, plan=the_plan, max_concurrency=16
    )
    assert isinstance(planned, Dispatch) and planned.width == 3
    assert [(u.place.item, u.place.index, u.width, u.completes) for u in planned.units] == [
        ("x", 0, 3, False),
        ("y", 1, 3, False),
    ]
    assert len({u.place.journal for u in planned.units}) == 2
    narrow = decisions.work_units(RunWork(step), {"items": []}, {}, last=True, plan=the_plan, max_concurrency=2)
    assert narrow == Dispatch((), 2)


def test_a_single_units_block_blocks_the_step_with_its_message_as_notes() -> None:
    step = work(plan(unit("a")))
    blocked = End("blocked", reason="child_workflow_blocked", message="the child waits")
    end = decisions.work_end(step, [blocked], Hints(), "R")
    assert end == End("blocked", reason="child_workflow_blocked", notes="the child waits")


# -- gates ----------------------------------------------------------------------------------------------


def test_a_gate_check_sees_the_output_and_the_feedback_of_its_iteration() -> None:
    step = work(plan(unit("w", gate=GATE)))
    check = decisions.gate_check(RunWork(step, 1, 1, "more"), "draft")
    assert (check.place.journal, check.gate_output, check.feedback, check.gate_check) == (
        "w:gate~l1",
        "draft",
        "more",
        True,
    )


def test_a_gate_passes_fails_loops_and_then_blocks() -> None:
    step = work(plan(unit("w", gate=GATE)))
    done = End("completed", "draft")
    assert decisions.gate_verdict(RunWork(step), done, End("completed"), HINT, "R") == Settle(done)
    broken = decisions.gate_verdict(RunWork(step), done, End("failed", reason="timeout", message="slow"), HINT, "R")
    assert broken == Settle(End("failed", reason="timeout", message="gate check: slow"))
    rejected = End("failed", output="too short", reason="exit")
    again = decisions.gate_verdict(RunWork(step, 1, 1, "x"), done, rejected, HINT, "R")
    assert again == RejectGate(1, "too short", RunWork(step, 2, 2, "too short"))
    exhausted = decisions.gate_verdict(RunWork(step, 2, 2, "x"), done, rejected, HINT, "R")
    assert isinstance(exhausted, RejectGate) and isinstance(exhausted.then, End)
    assert (exhausted.iteration, exhausted.then.status, exhausted.then.reason) == (2, "blocked", "gate_rejected")
    assert "rejected the output 3 time(s); max_loops is 2" in (exhausted.then.notes or "")


# -- attempts -------------------------------------------------------------------------------------------


def test_an_attempt_is_retried_for_the_reasons_named_with_a_doubling_wait_up_to_max() -> None:
    retry = {"max": 2, "on": ["exit"], "backoffMs": 100}
    the_plan = plan(unit("a", retry=retry, gate=GATE))
    planned = decisions.work_units(RunWork(work(the_plan)), {}, {}, last=True, plan=the_plan, max_concurrency=1)
    assert isinstance(planned, Dispatch)
    one, exit_failure = planned.units[0], End("failed", reason="exit")
    assert [decisions.attempt_verdict(one, exit_failure, n) for n in range(3)] == [Record(100), Record(200), Record()]
    assert decisions.attempt_verdict(one, End("failed", reason="timeout"), 0) == Record()
    assert decisions.attempt_verdict(one, End("completed"), 0) == Record()
    check = decisions.gate_check(RunWork(work(the_plan)), None)
    assert decisions.attempt_verdict(check, exit_failure, 0) == Record()  # a gate's check is never retried


def test_an_attempt_whose_host_died_is_done_again_not_retried() -> None:
    the_plan = plan(unit("a"))
    planned = decisions.work_units(RunWork(work(the_plan)), {}, {}, last=True, plan=the_plan, max_concurrency=1)
    assert isinstance(planned, Dispatch)
    assert decisions.attempt_verdict(planned.units[0], End("interrupted"), 5) == Redo()
    budget = decisions.budget_spent(planned.units[0], {"concurrency": 1, "maxUnits": 4})
    assert (budget.reason, budget.message) == (
        "budget_exceeded",
        "the run has dispatched its limit of 4 units (max_units)",
    )


# -- a map that keeps going (fail_fast = false) ---------------------------------------------------------


def _keeps_going() -> pf.MemberMap:
    step = work(plan(mapped("m", "params.items", failFast=False), params=("items",)))
    assert step["kind"] == "map"
    return step


def test_a_map_that_keeps_going_dispatches_saying_so() -> None:
    the_plan = plan(mapped("m", "params.items", failFast=False), params=("items",))
    planned = decisions.work_units(
        RunWork(work(the_plan)), {"items": [1, 2]}, {}, last=True, plan=the_plan, max_concurrency=2
    )
    assert isinstance(planned, Dispatch) and planned.keep_going


def test_failed_units_fail_the_step_with_the_partial_list_in_item_order() -> None:
    ends = [
        End("completed", output="a"),
        End("failed", reason="exit", message="exit 3"),
        End("completed", output="c"),
        End("failed", reason="timeout", message="timed out"),
    ]
    end = decisions.work_end(_keeps_going(), ends, Hints(), "R")
    assert end == End(
        "failed",
        reason="units_failed",
        message="2 of 4 units failed: item 1 (exit), item 3 (timeout)",
        partial=["a", None, "c", None],
    )


def test_a_blocked_unit_blocks_the_step_once_all_settled_and_the_notes_are_bounded() -> None:
    ends = [End("blocked", reason="child_workflow_blocked", message=f"clear child {i}") for i in range(25)]
    ends.insert(3, End("failed", reason="exit", message="exit 1"))
    end = decisions.work_end(_keeps_going(), ends, Hints(), "R")
    assert (end.status, end.reason) == ("blocked", "child_workflow_blocked")
    lines = (end.notes or "").splitlines()
    assert lines[:3] == ["25 units are blocked:", "  item 0:", "    clear child 0"]
    assert "  item 4:" in lines and "  item 3:" not in lines  # item 3 failed: it is not blocked
    assert lines[-2:] == [
        "  … and 5 more (`akm-run status R`)",
        "Once they are cleared, `akm-run resume R` and `akm-run run R` drive them all on at once (what completed is reused).",
    ]
    assert len(lines) == 1 + 2 * 20 + 2


def test_a_long_failure_message_names_twenty_units_then_counts_the_rest() -> None:
    ends = [End("failed", reason="exit", message="no") for _ in range(23)]
    end = decisions.work_end(_keeps_going(), ends, Hints(), "R")
    assert (end.message or "").endswith("item 19 (exit), … and 3 more")
    assert end.partial == [None] * 23
