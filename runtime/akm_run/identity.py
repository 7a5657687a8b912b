"""Identities of plan.md: unit ids, journal ids, unit input hashes, dispatch ids, invocation keys."""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any

from akm_run.plan import canonical_bytes, sha256_of


def unit_id(step_id: str, item: Any = None, mapped: bool = False) -> str:
    """`<stepId>:solo`, or `<stepId>:<16 hex of sha256(canonical(item))>` for a map unit (the unit
    of the first item of its value; map_unit_ids names the others)."""
    if not mapped:
        return f"{step_id}:solo"
    return f"{step_id}:{hashlib.sha256(canonical_bytes(item)).hexdigest()[:16]}"


def map_unit_ids(step_id: str, items: list[Any]) -> list[str]:
    """The unit id of each item of a map, in item order. Equal items are separate units: the first
    keeps `unit_id`, the n-th equal one (n ≥ 2) is `<that id>.<n>`. The same list always gives the
    same ids, and a list of distinct items the ids it always had."""
    seen: dict[str, int] = {}
    ids = []
    for item in items:
        unit = unit_id(step_id, item, mapped=True)
        seen[unit] = seen.get(unit, 0) + 1
        ids.append(unit if seen[unit] == 1 else f"{unit}.{seen[unit]}")
    return ids


def journal_id(unit: str, loop: int) -> str:
    """The journal id of a unit inside gate loop iteration `loop` (0 is the first run of the work)."""
    return unit if loop == 0 else f"{unit}~l{loop}"


def retried_id(journal: str, retry: int) -> str:
    """The journal id of a unit after `retry` operator retries (akm-run retry): a superseded unit's
    next one is `<journal id>~r<n>`, as a gate loop's is `~l<n>`."""
    return journal if retry == 0 else f"{journal}~r{retry}"


def input_hash(
    target: dict[str, Any],
    params: dict[str, Any],
    inputs: dict[str, Any],
    item: Any = None,
    bindings: dict[str, Any] | None = None,
    gate_feedback: str | None = None,
) -> str:
    """The unit input hash; it covers an embedded child plan through the target."""
    return sha256_of(
        canonical_bytes(
            {
                "v": "akm.unit/1",
                "target": target,
                "params": params,
                "inputs": inputs,
                "item": item,
                "bindings": bindings,
                "gateFeedback": gate_feedback,
            }
        )
    )


def invocation_key(parent_run_id: str, parent_unit_id: str, unit_input_hash: str) -> str:
    """The same three inputs always name the same child run."""
    return sha256_of(
        canonical_bytes(
            {
                "v": "akm.child/1",
                "parentRunId": parent_run_id,
                "parentUnitId": parent_unit_id,
                "unitInputHash": unit_input_hash,
            }
        )
    )


def dispatch_id(run_id: str, journal: str, retry: int) -> str:
    """Stable across a crash reclaim (same retry count), new on every explicit retry."""
    digest = hashlib.sha256(f"akm.dispatch/1\0{run_id}\0{journal}\0{retry}".encode()).hexdigest()
    return f"d-{digest[:24]}"


def new_run_id() -> str:
    """Sortable by creation time, unique by its random suffix."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)
