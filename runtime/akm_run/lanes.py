"""How `status` shows a fan-out: the steps in plan order (a `parallel` block's members under it),
and a map's units as counts, with only the live ones as lanes of their own, at most LANES of them,
so a 500-item map is a few lines, not 500 (operations.md D1, "Progress and status")."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from akm_run import core
from akm_run import planformat as pf
from akm_run.rows import RunRow, UnitRow

LANES = 8  # live units shown one a line; the rest are counted


def plan_order(run: RunRow) -> dict[str, tuple[int, str | None]]:
    """Step id → (its place in source order, the block it stands in)."""
    plan: pf.Plan = json.loads(run.plan_json)
    order: dict[str, tuple[int, str | None]] = {}
    for step in plan["steps"]:
        order[step["stepId"]] = (len(order), None)
        for member in step["members"] if step["kind"] == "parallel" else []:
            order[member["stepId"]] = (len(order), step["stepId"])
    return order


def map_steps(run: RunRow) -> dict[str, bool]:
    """The run's map steps, each with whether it keeps going (`fail_fast = false`)."""
    plan: pf.Plan = json.loads(run.plan_json)
    return {s["stepId"]: s.get("failFast") is False for s in core.every_step(plan) if s["kind"] == "map"}


def shown(keeps_going: bool, status: str, units: list[UnitRow]) -> bool:
    """Whether `status` shows a map's units: while it runs or waits, when it keeps going, or when it
    is a large fan-out (a small settled map reads as it always did)."""
    return keeps_going or status in ("running", "blocked") or len(units) > LANES


def units_summary(units: list[UnitRow], step_status: str) -> dict[str, Any]:
    """A map's units: how many in each status, and the live (running) ones, at most LANES, by item.
    A unit a retry superseded is not counted (its successor is); one still marked running in a
    step that is not running (its drive ended, or died) is counted as `stopped`: nothing runs it."""
    units = [u for u in units if not u.superseded]
    stopped = step_status != "running"
    counts = Counter("stopped" if stopped and u.status == "running" else u.status for u in units)
    live = [] if stopped else [u for u in units if u.status == "running"]
    live.sort(key=lambda u: (u.item_index or 0, u.unit_id))
    statuses = ("completed", "failed", "running", "stopped")
    summary: dict[str, Any] = {"counts": {k: counts[k] for k in statuses if counts[k]}}
    if live:
        summary["running"] = [{"unitId": u.unit_id, "item": u.item_index} for u in live[:LANES]]
    return summary


def summary_lines(summary: dict[str, Any], indent: str) -> list[str]:
    counts = ", ".join(f"{n} {status}" for status, n in summary["counts"].items())
    lines = [f"{indent}units: {counts}"]
    shown = summary.get("running", [])
    lines += [f"{indent}  → item {lane['item']}  {lane['unitId']}" for lane in shown]
    more = summary["counts"].get("running", 0) - len(shown)
    if more > 0:
        lines.append(f"{indent}  … and {more} more running")
    return lines
