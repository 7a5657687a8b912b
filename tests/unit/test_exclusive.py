"""`limits.exclusive` in the plan format (akm_run.planformat): decoded strictly, described by the
published schema, and named in `plan.features`."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from akm_run import features
from akm_run.exclusive import key_param
from akm_run.plan import PlanError, envelope, verify_plan
from akmc.planschema import plan_file_schema


def _plan(exclusive: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "irVersion": 1,
        "ref": "workflows/w",
        "title": "w",
        "sourceReadSet": [{"path": "workflows/w.akm"}],
        "limits": {"concurrency": 1, "exclusive": exclusive},
        "params": {"env": {"schema": {"type": "string"}}},
        "steps": [
            {
                "stepId": "a",
                "index": 0,
                "kind": "unit",
                "onError": "fail",
                "target": {"kind": "shell", "command": "true"},
            }
        ],
        "features": ["exclusive"],
    }
    return plan


@pytest.mark.parametrize("exclusive", [True, {"param": "env"}])
def test_true_or_a_declared_param_is_accepted_by_the_decoder_and_the_schema(exclusive: Any) -> None:
    plan = _plan(exclusive)
    verify_plan(plan)
    jsonschema.validate(envelope(plan), plan_file_schema())
    assert features.used(plan) == ["exclusive"] and "exclusive" in features.SUPPORTED
    assert key_param(plan) == (True, None if exclusive is True else "env")


@pytest.mark.parametrize(
    ("exclusive", "refused"),
    [
        (False, "plan.limits.exclusive: expected true"),
        ("env", "plan.limits.exclusive: expected true"),
        ({"param": "env", "also": 1}, "plan.limits.exclusive"),
        ({"param": "1x"}, "plan.limits.exclusive.param"),
        ({"param": "other"}, 'plan.limits.exclusive.param: "params.other" names an undeclared param'),
    ],
)
def test_anything_else_is_refused(exclusive: Any, refused: str) -> None:
    with pytest.raises(PlanError) as error:
        verify_plan(_plan(exclusive))
    assert str(error.value).startswith(refused)


def test_an_exclusive_plan_must_declare_the_feature() -> None:
    plan = copy.deepcopy(_plan(True))
    del plan["features"]
    with pytest.raises(PlanError, match=r"plan\.features"):
        verify_plan(plan)
    no_key = copy.deepcopy(plan)
    del no_key["limits"]["exclusive"]
    verify_plan(no_key)
    assert key_param(no_key) == (False, None)
