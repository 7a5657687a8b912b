"""The engine in process: a real SQLite journal, a fake dispatcher in place of unit processes.

Each test states a plan and what its units print, and asserts what the run did: which units ran in
which order with which context, what the journal holds, how the run ended."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from akm_run import operations
from akm_run.core import DriveResult, End
from akm_run.dispatch import Request
from akm_run.engine import Engine, Options
from akm_run.hints import Hints
from akm_run.identity import new_run_id
from akm_run.plan import plan_hash, verify_plan
from akm_run.progress import Progress
from akm_run.sqlitestore import SQLiteStore
from akm_run.storedplans import stored_plan

Behaviour = Callable[[Request], End]


class FakeDispatcher:
    """Runs no process: each step's units end as `behaviour[stepId]` says (default: print null)."""

    def __init__(self, **behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    def dispatch(self, request: Request) -> End:
        with self._lock:
            self.requests.append(request)
        key = request.place.step_id + (":gate" if ":gate" in request.place.journal else "")
        return self.behaviour.get(key, prints(None))(request)

    def ran(self) -> list[str]:
        return [r.place.journal for r in self.requests]


def prints(value: Any) -> Behaviour:
    return lambda request: End("completed", output=value)


def fails(reason: str = "exit", message: str = "it failed", output: Any = None) -> Behaviour:
    return lambda request: End("failed", output=output, reason=reason, message=message, exit_code=1)


def in_turn(*behaviours: Behaviour) -> Behaviour:
    """The first behaviour for the first attempt, the next for the next, the last for all after."""
    calls = iter(behaviours)
    last = [behaviours[-1]]

    def behave(request: Request) -> End:
        last[0] = next(calls, last[0])
        return last[0](request)

    return behave


def unit(step_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "stepId": step_id,
        "kind": "unit",
        "onError": "fail",
        "target": {"kind": "shell", "command": step_id},
        **extra,
    }


def plan(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    numbered = [{**step, "index": i} for i, step in enumerate(steps)]
    out = {
        "irVersion": 1,
        "ref": "workflows/t",
        "title": "T",
        "sourceReadSet": [{"path": "workflows/t.akm"}],
        "limits": {"concurrency": 4},
        "steps": numbered,
        **extra,
    }
    verify_plan(out)
    return out


class Runtime:
    def __init__(self, state: Path, fake: FakeDispatcher) -> None:
        self.store = SQLiteStore(state)
        self.fake = fake
        self.options = Options(state, progress=Progress(), hints=Hints())

    def publish(self, the_plan: dict[str, Any], params: dict[str, Any] | None = None) -> str:
        return self.store.publish_run(new_run_id(), the_plan, plan_hash(the_plan), params or {})

    def drive(self, run_id: str) -> DriveResult:
        return Engine(self.store, self.options, process=self.fake).drive(run_id)

    def steps(self, run_id: str) -> dict[str, str]:
        return {s.step_id: s.status for s in self.store.steps(run_id)}


MakeRuntime = Callable[[FakeDispatcher], Runtime]


@pytest.fixture
def runtime(tmp_path: Path) -> MakeRuntime:
    return lambda fake: Runtime(tmp_path / "state", fake)


def test_steps_run_in_spine_order_and_outputs_resolve_from_their_outputs(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(a=prints({"n": 1}), b=prints([10, 20]), c=prints("done")))
    run_id = rt.publish(
        plan(
            unit("a"),
            unit("b", inputs=["steps.a.output.n"]),
            unit("c"),
            outputs={"first": {"from": "steps.b.output[1]"}, "last": {"from": "steps.c.output"}},
        )
    )
    result = rt.drive(run_id)
    assert (result.status, result.exported) == ("completed", {"first": 20, "last": "done"})
    assert rt.fake.ran() == ["a:solo", "b:solo", "c:solo"]
    assert rt.fake.requests[1].context["inputs"] == {"steps.a.output.n": 1}  # only what b declares
    assert rt.steps(run_id) == {"a": "completed", "b": "completed", "c": "completed"}


def test_a_route_runs_the_step_it_selects_and_skips_the_others(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(pick=prints("right")))
    route = {
        "stepId": "r",
        "kind": "route",
        "onError": "fail",
        "input": "steps.pick.output",
        "cases": [{"match": "left", "next": "left"}, {"match": "right", "next": "right"}],
    }
    run_id = rt.publish(plan(unit("pick"), route, unit("left"), unit("right")))
    assert rt.drive(run_id).status == "completed"
    assert rt.fake.ran() == ["pick:solo", "right:solo"]
    assert rt.steps(run_id) == {"pick": "completed", "r": "completed", "left": "skipped", "right": "completed"}


def test_a_route_that_matches_nothing_fails_the_run(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(pick=prints("up")))
    route = {
        "stepId": "r",
        "kind": "route",
        "onError": "fail",
        "input": "steps.pick.output",
        "cases": [{"match": "left", "next": "left"}],
    }
    result = rt.drive(rt.publish(plan(unit("pick"), route, unit("left"))))
    assert result.failure is not None
    assert (result.status, result.failure["reason"]) == ("failed", "route_no_match")


def test_a_unit_is_retried_for_the_reasons_its_step_names_with_a_new_dispatch_id(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(a=in_turn(fails(), fails(), prints("ok"))))
    run_id = rt.publish(plan(unit("a", retry={"max": 2, "on": ["exit"]})))
    assert rt.drive(run_id).status == "completed"
    assert [r.attempt for r in rt.fake.requests] == [1, 2, 3]
    assert len({r.context["dispatchId"] for r in rt.fake.requests}) == 3
    attempts = rt.store.attempts(run_id, "a:solo")
    assert [a.status for a in attempts] == ["failed", "failed", "completed"]


def test_a_failure_the_retry_policy_does_not_name_is_final(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(a=fails("timeout")))
    result = rt.drive(rt.publish(plan(unit("a", retry={"max": 3, "on": ["exit"]}))))
    assert result.failure is not None
    assert (result.status, result.failure["reason"], len(rt.fake.requests)) == ("failed", "timeout", 1)


def test_retries_stop_at_max(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(a=fails()))
    result = rt.drive(rt.publish(plan(unit("a", retry={"max": 2, "on": ["exit"]}))))
    assert (result.status, len(rt.fake.requests)) == ("failed", 3)


def test_a_gate_reruns_the_work_with_the_checks_feedback_until_it_passes(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(w=prints("draft"), **{"w:gate": in_turn(fails(output="too short"), prints("ok"))}))
    gate = {"check": {"kind": "shell", "command": "check"}, "maxLoops": 3}
    run_id = rt.publish(plan(unit("w", gate=gate)))
    assert rt.drive(run_id).status == "completed"
    assert rt.fake.ran() == ["w:solo", "w:gate", "w:solo~l1", "w:gate~l1"]
    second = rt.fake.requests[2]
    assert second.context["gateFeedback"] == "too short"
    assert rt.fake.requests[1].context["output"] == "draft"  # the check sees the work's output


def test_a_gate_that_keeps_rejecting_blocks_the_step_after_max_loops(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(**{"w:gate": fails(output="no")}))
    gate = {"check": {"kind": "shell", "command": "check"}, "maxLoops": 1}
    run_id = rt.publish(plan(unit("w", gate=gate)))
    result = rt.drive(run_id)
    assert result.status == "blocked"
    assert result.blocked is not None
    assert "rejected the output 2 time(s)" in result.blocked["notes"]
    w_step = rt.store.step(run_id, "w")
    assert w_step is not None and w_step.failure_reason == "gate_rejected"


def test_a_gate_check_is_never_retried(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(**{"w:gate": fails("timeout")}))
    gate = {"check": {"kind": "shell", "command": "check"}, "maxLoops": 1}
    result = rt.drive(rt.publish(plan(unit("w", gate=gate, retry={"max": 3, "on": ["timeout"]}))))
    assert result.failure is not None
    assert result.failure["reason"] == "timeout" and rt.fake.ran() == ["w:solo", "w:gate"]


def test_a_step_that_may_fail_lets_the_run_go_on(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(a=fails()))
    run_id = rt.publish(plan(unit("a", onError="continue"), unit("b")))
    assert rt.drive(run_id).status == "completed"
    assert rt.steps(run_id) == {"a": "failed", "b": "completed"}


def test_an_unresolved_input_fails_the_step_without_dispatching_it(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(a=prints({})))
    result = rt.drive(rt.publish(plan(unit("a"), unit("b", inputs=["steps.a.output.missing"]))))
    assert result.failure is not None
    assert (result.failure["reason"], rt.fake.ran()) == ("input_unresolved", ["a:solo"])


def test_an_output_that_does_not_fit_its_schema_keeps_the_run_active(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(a=prints("text")))
    run_id = rt.publish(plan(unit("a"), outputs={"n": {"from": "steps.a.output", "schema": {"type": "integer"}}}))
    result = rt.drive(run_id)
    assert result.error is not None
    assert (result.status, result.error["code"]) == ("active", "WORKFLOW_OUTPUT_INVALID")
    run_row = rt.store.run(run_id)
    assert run_row is not None and run_row.status == "active"
    assert rt.steps(run_id) == {"a": "pending"}  # the last step's completion rolled back with it


def test_a_map_runs_one_unit_per_item_and_keeps_their_order(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(items=prints([3, 1, 2]), sq=lambda r: End("completed", output=r.context["item"] ** 2)))
    mapped = {**unit("sq"), "kind": "map", "over": "steps.items.output", "concurrency": 2}
    run_id = rt.publish(plan(unit("items"), mapped, outputs={"all": {"from": "steps.sq.output"}}))
    result = rt.drive(run_id)
    assert result.exported == {"all": [9, 1, 4]}
    indexes = sorted(r.context["itemIndex"] for r in rt.fake.requests if r.place.step_id == "sq")
    assert indexes == [0, 1, 2]


def test_a_completed_unit_is_never_dispatched_again_after_an_internal_error(runtime: MakeRuntime) -> None:
    def broken(request: Request) -> End:
        raise RuntimeError("the dispatcher broke")

    rt = runtime(FakeDispatcher(a=prints(1), b=broken))
    run_id = rt.publish(plan(unit("a"), unit("b"), unit("c")))
    with pytest.raises(RuntimeError):
        rt.drive(run_id)
    assert [a.status for a in rt.store.attempts(run_id, "b:solo")] == ["interrupted"]
    assert rt.steps(run_id)["b"] == "pending"  # nothing stays running once a drive ends
    rt.fake.behaviour["b"] = prints(2)
    assert rt.drive(run_id).status == "completed"
    assert rt.fake.ran() == ["a:solo", "b:solo", "b:solo", "c:solo"]


def test_a_crashed_drives_running_attempt_is_reclaimed_as_interrupted(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher())
    run_id = rt.publish(plan(unit("a")))
    rt.store.begin_attempt(run_id, "a:solo", "a", None, "sha256:h", "d-1", new_unit=True)  # the driver died here
    assert rt.drive(run_id).status == "completed"
    assert [a.status for a in rt.store.attempts(run_id, "a:solo")] == ["interrupted", "completed"]


def test_the_unit_budget_fails_the_unit_past_max_units(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher())
    the_plan = plan(unit("a"), unit("b"))
    the_plan["limits"]["maxUnits"] = 1
    result = rt.drive(rt.publish(the_plan))
    assert result.failure is not None
    assert (result.failure["stepId"], result.failure["reason"]) == ("b", "budget_exceeded")
    assert rt.fake.ran() == ["a:solo"]


def test_an_approval_blocks_until_decided_and_the_decision_is_its_output(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher())
    approval = {**unit("ok"), "target": {"kind": "approval", "message": "ship?"}}
    run_id = rt.publish(plan(approval, outputs={"by": {"from": "steps.ok.output.by"}}))
    assert rt.drive(run_id).status == "blocked"
    row = rt.store.run(run_id)
    assert row is not None and 'Waiting for approval: "ship?"' in (row.notes or "")
    decision = operations.Decision("ok", "alice", approved=True)
    assert operations.decide(rt.store, stored_plan(row), row, decision) is False  # the run goes on
    result = rt.drive(run_id)
    assert (result.status, result.exported, rt.fake.ran()) == ("completed", {"by": "alice"}, [])


def test_a_child_workflow_runs_as_a_child_run_through_the_same_dispatcher(runtime: MakeRuntime) -> None:
    rt = runtime(FakeDispatcher(inner=lambda r: End("completed", output=r.context["runId"])))
    child = plan(
        unit("inner"),
        params={"who": {"schema": {"type": "string"}}},
        outputs={"ran": {"from": "steps.inner.output"}, "who": {"from": "params.who"}},
    )
    target = {
        "kind": "child-workflow",
        "ref": "workflows/t",
        "planHash": plan_hash(child),
        "plan": child,
        "bindings": [{"name": "who", "kind": "literal", "value": "bob"}],
    }
    run_id = rt.publish(plan({**unit("call"), "target": target}, outputs={"got": {"from": "steps.call.output"}}))
    result = rt.drive(run_id)
    [child_run] = rt.store.child_runs(run_id)
    assert result.status == "completed"
    assert result.exported == {"got": {"ran": child_run.id, "who": "bob"}}
    assert rt.fake.ran() == ["inner:solo"] and child_run.status == "completed"
    assert rt.drive(run_id).status == "completed" and len(rt.fake.requests) == 1  # settled: nothing reruns
