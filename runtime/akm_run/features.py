"""`plan.features`: the third-edition constructs a plan uses, derived from the plan itself.

A plan that uses a construct says so (docs/plan-format.md, "Features"): the compiler writes the
derived list, the decoder refuses a plan whose declared list differs from it, and a runtime refuses
a plan that needs a feature it does not honour. Nothing is half-honoured. Each construct adds its
detector here and, once the runtime runs it, its name to SUPPORTED.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from akm_run import wording
from akm_run.planformat import Feature, PlanError

# A plan-level key or a step's key that means the plan uses the feature.
PLAN_DETECTORS: Mapping[Feature, Callable[[Mapping[str, Any]], bool]] = {
    "exclusive": lambda plan: "exclusive" in plan["limits"],
    "tokens": lambda plan: "maxTokens" in plan["limits"],
    "notify": lambda plan: "notify" in plan,
}
STEP_DETECTORS: Mapping[Feature, Callable[[Mapping[str, Any]], bool]] = {
    "keepGoing": lambda step: step.get("failFast") is False,
    "parallel": lambda step: step["kind"] == "parallel",
    "stall": lambda step: "stallAfterMs" in step or "onStall" in step,
    "worktree": lambda step: "isolation" in step,
    "tokens": lambda step: "maxTokens" in step,
}

# The features this runtime honours.
SUPPORTED: frozenset[Feature] = frozenset(
    {"exclusive", "keepGoing", "notify", "parallel", "stall", "tokens", "worktree"}
)


def every_step(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The plan's own steps in order, a `parallel` block's members after it (not its children's)."""
    for step in plan["steps"]:
        yield step
        yield from step.get("members", [])


def plans(plan: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The plan and every plan it embeds. (A plan the compiler builds for a workflow with errors,
    which is never written, may hold a child target without its plan.)"""
    yield plan
    for step in every_step(plan):
        target = step.get("target")
        if target is not None and target["kind"] == "child-workflow" and "plan" in target:
            yield from plans(target["plan"])  # a child that did not compile has none (its plan is never written)


def used(plan: Mapping[str, Any]) -> list[Feature]:
    """The sorted names of the constructs the plan or any embedded child uses."""
    found: set[Feature] = set()
    for each in plans(plan):
        found.update(name for name, uses in PLAN_DETECTORS.items() if uses(each))
        for step in every_step(each):
            found.update(name for name, uses in STEP_DETECTORS.items() if uses(step))
    return sorted(found)


def check_declared(plan: Mapping[str, Any], path: str) -> None:
    """The plan's `features` is exactly the derived list (absent when empty); raises PlanError."""
    declared = plan.get("features", [])
    derived = used(plan)
    if declared != derived:
        mismatch = wording.features_mismatch(declared=json.dumps(declared), used=json.dumps(derived))
        raise PlanError(f"{path}.features", mismatch)


def require_supported(plan: Mapping[str, Any]) -> None:
    """Refuse a plan that needs a feature this runtime does not honour (PlanError, exit 4)."""
    for feature in plan.get("features", []):
        if feature not in SUPPORTED:
            raise PlanError("plan.features", wording.feature_unsupported(feature=json.dumps(feature)))
