"""A run's stored plan, re-verified before a drive reads it (a tampered row is refused), and the texts
one engine has verified already."""

from __future__ import annotations

import hashlib
import json
import threading

from akm_run import features
from akm_run import planformat as pf
from akm_run.plan import PlanError, loads_strict, plan_hash, verify_plan
from akm_run.rows import RunRow


def stored_plan(run: RunRow) -> pf.Plan:
    """The run's plan, re-verified: a tampered row is refused (PlanError)."""
    plan = loads_strict(run.plan_json.encode())
    verify_plan(plan)
    features.require_supported(plan)
    if plan_hash(plan) != run.plan_hash:
        raise PlanError("plan", f"stored plan hash {plan_hash(plan)} does not match the run's {run.plan_hash}")
    verified: pf.Plan = json.loads(run.plan_json)
    return verified


class VerifiedPlans:
    """The stored plan texts one engine has verified, by plan hash and the text's SHA-256: a run whose
    stored text is one of them is not verified again (the child runs of a map, which share one child
    plan). A text that differs by one byte is a text not verified yet."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, bytes]] = set()
        self._lock = threading.Lock()  # the child runs of a map are driven on several threads

    def plan(self, run: RunRow) -> pf.Plan:
        """The run's plan, re-verified unless this text was (raises PlanError as `stored_plan`)."""
        key = (run.plan_hash, hashlib.sha256(run.plan_json.encode()).digest())
        with self._lock:
            seen = key in self._seen
        if seen:
            plan: pf.Plan = json.loads(run.plan_json)
            return plan
        plan = stored_plan(run)
        with self._lock:
            self._seen.add(key)
        return plan
