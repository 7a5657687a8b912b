"""`plan.features` (akm_run.features): derived from the plan and its embedded children, declared by
the compiler, checked by the decoder, and refused by a runtime that does not honour one."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from akm_run import features
from akm_run.plan import PlanError, verify_plan
from akm_run.planformat import Feature


def _plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "irVersion": 1,
        "ref": "workflows/w",
        "title": "w",
        "sourceReadSet": [{"path": "workflows/w.akm"}],
        "limits": {"concurrency": 1},
        "steps": [dict(step, index=i) for i, step in enumerate(steps)],
    }


def _shell(step_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "stepId": step_id,
        "kind": "unit",
        "onError": "fail",
        "target": {"kind": "shell", "command": "true"},
        **extra,
    }


@pytest.fixture
def timeouts_are_a_feature(monkeypatch: pytest.MonkeyPatch) -> Feature:
    """Pretend a step's `timeoutMs` were a third-edition construct, to test the mechanism alone."""
    monkeypatch.setattr(features, "STEP_DETECTORS", {"stall": lambda step: "timeoutMs" in step})
    return "stall"


def test_a_plan_using_nothing_new_has_no_features() -> None:
    plan = _plan(_shell("a"))
    assert features.used(plan) == []
    verify_plan(plan)
    features.require_supported(plan)


def test_a_feature_used_by_an_embedded_child_is_the_parent_s_too(timeouts_are_a_feature: Feature) -> None:
    child = _plan(_shell("inner", timeoutMs=5))
    child["features"] = [timeouts_are_a_feature]
    parent = _plan(
        {
            "stepId": "call",
            "kind": "unit",
            "onError": "fail",
            "target": {"kind": "child-workflow", "ref": "workflows/c", "planHash": "sha256:" + "0" * 64, "plan": child},
        }
    )
    assert features.used(parent) == [timeouts_are_a_feature]
    with pytest.raises(PlanError, match=r'plan.features: declares features \[\], but the plan uses \["stall"\]'):
        features.check_declared(parent, "plan")
    parent["features"] = [timeouts_are_a_feature]
    features.check_declared(parent, "plan")


def test_the_declared_list_must_be_sorted_and_unique(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        features, "STEP_DETECTORS", {"stall": lambda s: "timeoutMs" in s, "tokens": lambda s: "timeoutMs" in s}
    )
    plan = _plan(_shell("a", timeoutMs=5))
    for wrong in (["tokens", "stall"], ["stall", "stall", "tokens"], ["stall"]):
        bad = copy.deepcopy(plan)
        bad["features"] = wrong
        with pytest.raises(PlanError, match=r"plan\.features: declares features"):
            verify_plan(bad)
    plan["features"] = ["stall", "tokens"]
    verify_plan(plan)


def test_a_runtime_refuses_a_feature_it_does_not_honour(
    timeouts_are_a_feature: Feature, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _plan(_shell("a", timeoutMs=5))
    plan["features"] = [timeouts_are_a_feature]
    monkeypatch.setattr(features, "SUPPORTED", frozenset())
    with pytest.raises(PlanError) as refused:
        features.require_supported(plan)
    assert str(refused.value) == 'plan.features: plan needs akm-run support for "stall": upgrade akm-run'
    monkeypatch.setattr(features, "SUPPORTED", frozenset({timeouts_are_a_feature}))
    features.require_supported(plan)


def test_isolation_is_the_worktree_feature_and_this_runtime_honours_it() -> None:
    plan = _plan(_shell("a", isolation="worktree"), _shell("b"))
    assert features.used(plan) == ["worktree"]
    plan["features"] = ["worktree"]
    verify_plan(plan)
    features.require_supported(plan)


def test_isolation_on_a_target_that_runs_no_process_is_refused() -> None:
    approval = {"kind": "approval", "message": "ok?"}
    plan = _plan({**_shell("a", isolation="worktree"), "target": approval})
    plan["features"] = ["worktree"]
    with pytest.raises(PlanError, match=r"plan\.steps\[0\]\.isolation: `isolation` is only for shell"):
        verify_plan(plan)


def _map(step_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "stepId": step_id,
        "kind": "map",
        "onError": "fail",
        "over": "params.items",
        "concurrency": 2,
        "target": {"kind": "shell", "command": "true"},
        **extra,
    }


def test_a_map_that_keeps_going_uses_keep_going() -> None:
    plan = _plan(_map("each", failFast=False))
    plan["params"] = {"items": {"schema": {"type": "array"}}}
    assert features.used(plan) == ["keepGoing"]
    with pytest.raises(PlanError, match=r'declares features \[\], but the plan uses \["keepGoing"\]'):
        verify_plan(plan)
    plan["features"] = ["keepGoing"]
    verify_plan(plan)
    features.require_supported(plan)  # this runtime honours it
    plan["steps"][0]["failFast"] = True  # absent when true: never written
    with pytest.raises(PlanError, match=r"plan.steps\[0\].failFast"):
        verify_plan(plan)
