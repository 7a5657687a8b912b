"""akm_run.operator: the steps `retry` reopens, computed from the plan's references alone, and what
`skip` accepts as a step's output. No journal: each test states a plan and the set it must give."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run import operator
from akm_run import planformat as pf
from akm_run.rows import RunRow, StepRow
from profiles import examples


def unit(step_id: str, *reads: str, **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"stepId": step_id, "kind": "unit", "onError": "fail"}
    step["target"] = {"kind": "shell", "command": step_id}
    if reads:
        step["inputs"] = [f"steps.{r}.output" for r in reads]
    return {**step, **extra}


def plan(*steps: dict[str, Any]) -> pf.Plan:
    return cast(pf.Plan, {"steps": [{**s, "index": i} for i, s in enumerate(steps)]})


def test_a_step_and_its_readers_transitively_in_plan_order() -> None:
    steps = plan(unit("a"), unit("b", "a"), unit("c"), unit("d", "b"), unit("e", "c", "d"), unit("f", "c"))
    assert operator.readers(steps, "a") == ["a", "b", "d", "e"]
    assert operator.readers(steps, "c") == ["c", "e", "f"]
    assert operator.readers(steps, "f") == ["f"]


def test_a_param_or_a_path_beneath_an_output_reads_as_its_step() -> None:
    reads = unit("b", inputs=["params.who", "steps.a.output.list[2].name"])
    assert operator.readers(plan(unit("a"), reads), "a") == ["a", "b"]


def test_a_map_subject_a_route_subject_and_child_bindings_are_references() -> None:
    fan = {**unit("fan"), "kind": "map", "over": "steps.a.output.items", "concurrency": 2}
    child = unit("child")
    child["target"] = {
        "kind": "child-workflow",
        "ref": "workflows/leaf",
        "bindings": [
            {"name": "n", "kind": "reference", "from": "steps.fan.output"},
            {"name": "x", "kind": "literal", "value": 1},
        ],
    }
    choose: dict[str, Any] = {"stepId": "choose", "kind": "route", "onError": "fail", "input": "steps.child.output"}
    choose["cases"] = [{"match": "x", "next": "left"}]
    choose["default"] = "right"
    steps = plan(unit("a"), fan, child, choose, unit("left"), unit("right"), unit("after"))
    assert operator.readers(steps, "a") == ["a", "fan", "child", "choose", "left", "right"]


def test_the_steps_a_reopened_route_chooses_between_reopen_with_their_readers() -> None:
    choose: dict[str, Any] = {"stepId": "choose", "kind": "route", "onError": "fail", "input": "params.mood"}
    choose["cases"] = [{"match": "a", "next": "left"}]
    steps = plan(choose, unit("left"), unit("reads_left", "left"), unit("other"))
    assert operator.readers(steps, "choose") == ["choose", "left", "reads_left"]


def test_a_reopened_member_reopens_its_block_and_a_retried_block_all_its_members() -> None:
    block: dict[str, Any] = {"stepId": "both", "kind": "parallel", "onError": "fail"}
    block["members"] = [unit("x", "a"), unit("y")]
    steps = plan(unit("a"), block, unit("after_x", "x"), unit("after_y", "y"))
    assert operator.readers(steps, "a") == ["a", "both", "x", "after_x"]  # y is reused as it completed
    assert operator.readers(steps, "y") == ["both", "y", "after_y"]
    assert operator.readers(steps, "both") == ["both", "x", "y", "after_x", "after_y"]
    assert operator.references(cast(pf.Step, block)) == set()


@st.composite
def chains(draw: st.DrawFn) -> tuple[pf.Plan, str]:
    """A plan whose every step reads any earlier steps, and one of its steps."""
    count = draw(st.integers(1, 12))
    steps = []
    for i in range(count):
        reads = draw(st.sets(st.integers(0, i - 1), max_size=3)) if i else set()
        steps.append(unit(f"s{i}", *(f"s{r}" for r in sorted(reads))))
    return plan(*steps), f"s{draw(st.integers(0, count - 1))}"


@settings(max_examples=examples(200))
@given(chains())
def test_the_reopened_set_is_closed_under_reading_and_holds_nothing_else(case: tuple[pf.Plan, str]) -> None:
    steps, retried = case
    reopened = operator.readers(steps, retried)
    assert reopened[0] == retried
    for step in steps["steps"]:
        reads = operator.references(step)
        if reads & set(reopened):
            assert step["stepId"] in reopened
        elif step["stepId"] != retried:
            assert step["stepId"] not in reopened


SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
RUN = RunRow("r", "wf", "t", "h", "{}", "{}", "failed", 0, None, None, None, None, None, None, 0, 0.0, 0.0, None, None)
FAILED = StepRow("probe", 0, "failed", None, None, "exit", "boom", 0, 0, None)


@settings(max_examples=examples(200))
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    )
)
def test_skip_takes_exactly_the_outputs_its_schema_admits(value: Any) -> None:
    steps = plan(unit("probe", outputSchema=SCHEMA))
    refused = operator.skip_refusal(steps, RUN, FAILED, operator.Skip("probe", "ops", given=True, output=value), "x")
    admitted = isinstance(value, dict) and isinstance(value.get("ok"), bool)
    assert (refused is None) == admitted


def test_skip_without_an_output_needs_a_schema_that_admits_null() -> None:
    nothing = operator.Skip("probe", "ops")
    refused = operator.skip_refusal(plan(unit("probe", outputSchema=SCHEMA)), RUN, FAILED, nothing, "x")
    assert refused is not None and refused.exit == 2 and "--output" in refused.text
    nullable = {"anyOf": [SCHEMA, {"type": "null"}]}
    assert operator.skip_refusal(plan(unit("probe", outputSchema=nullable)), RUN, FAILED, nothing, "x") is None
    assert operator.skip_refusal(plan(unit("probe")), RUN, FAILED, nothing, "x") is None


def test_skip_refuses_a_review_control_and_a_settled_step() -> None:
    nothing = operator.Skip("probe", "ops")
    gated = unit("probe", gate={"check": {"kind": "shell", "command": "c"}, "maxLoops": 1})
    approval = {**unit("probe"), "target": {"kind": "approval", "message": "ok?"}}
    done = StepRow("probe", 0, "completed", "1", None, None, None, 0, 0, None)
    for steps, row in ((plan(gated), FAILED), (plan(approval), FAILED), (plan(unit("probe")), done)):
        refused = operator.skip_refusal(steps, RUN, row, nothing, "akm-run approve r probe --reject")
        assert refused is not None and refused.exit == 2


def test_a_settled_route_keeps_the_steps_it_did_not_select_skipped() -> None:
    choose: dict[str, Any] = {"stepId": "choose", "kind": "route", "onError": "fail", "input": "params.mood"}
    choose["cases"] = [{"match": "a", "next": "left"}, {"match": "b", "next": "right"}]
    steps = plan(unit("a"), choose, unit("left", "a"), unit("right", "a"))
    rows = {
        "a": StepRow("a", 0, "completed", "1", None, None, None, 0, 0, None),
        "choose": StepRow("choose", 1, "completed", '"left"', None, None, None, 0, 0, None),
        "left": StepRow("left", 2, "completed", "1", None, None, None, 0, 0, None),
        "right": StepRow("right", 3, "skipped", None, "route choose selected left", None, None, 0, 0, None),
    }
    closure = operator.readers(steps, "a")
    assert closure == ["a", "left", "right"]
    assert operator.unselected(steps, rows, closure) == {"right"}
    assert operator.unselected(steps, rows, operator.readers(steps, "choose")) == set()
