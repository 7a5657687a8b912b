"""akm_run.storedplans: a run's stored plan is re-verified before a drive reads it, and an engine
verifies each stored text once (the child runs of a map share one child plan)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from akm_run import storedplans
from akm_run.plan import PlanError, plan_hash
from akm_run.rows import RunRow
from akm_run.storedplans import VerifiedPlans

PLAN: dict[str, Any] = {
    "irVersion": 1,
    "ref": "workflows/t",
    "title": "T",
    "sourceReadSet": [{"path": "workflows/t.akm"}],
    "limits": {"concurrency": 4},
    "steps": [
        {"stepId": "a", "index": 0, "kind": "unit", "onError": "fail", "target": {"kind": "shell", "command": "true"}}
    ],
}


def row(plan: Any, text: str | None = None) -> RunRow:
    stored = json.dumps(plan) if text is None else text
    return RunRow(
        id="r1",
        ref="workflows/t",
        title="T",
        plan_hash=plan_hash(plan),
        plan_json=stored,
        params_json="{}",
        status="active",
        current_step=0,
        parent_run_id=None,
        parent_unit_id=None,
        invocation_key=None,
        exported_json=None,
        failure_json=None,
        notes=None,
        units_dispatched=0,
        created_at=0.0,
        updated_at=0.0,
        workdir=None,
        agent_cmd=None,
    )


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts `stored_plan` verifies."""
    seen: list[str] = []
    verify = storedplans.stored_plan

    def counted(run: RunRow) -> Any:
        seen.append(run.plan_json)
        return verify(run)

    monkeypatch.setattr(storedplans, "stored_plan", counted)
    return seen


def test_a_text_is_verified_once_per_engine_and_read_every_time(verifications: list[str]) -> None:
    plans = VerifiedPlans()
    first, second = plans.plan(row(PLAN)), plans.plan(dataclasses.replace(row(PLAN), id="r2"))
    assert first == second == PLAN
    assert first is not second  # each drive gets a plan of its own to read
    assert len(verifications) == 1
    assert VerifiedPlans().plan(row(PLAN)) == PLAN and len(verifications) == 2  # another engine verifies anew


def test_a_text_that_differs_by_one_byte_is_verified_and_a_tampered_one_refused(verifications: list[str]) -> None:
    plans = VerifiedPlans()
    plans.plan(row(PLAN))
    assert plans.plan(row(PLAN, json.dumps(PLAN, indent=1))) == PLAN  # the same plan, another text
    tampered = json.dumps(PLAN).replace('"true"', '"touch evil"')
    with pytest.raises(PlanError, match="does not match"):
        plans.plan(row(PLAN, tampered))
    with pytest.raises(PlanError):  # refused again: a refusal is not remembered as verified
        plans.plan(row(PLAN, tampered))
    assert len(verifications) == 4
