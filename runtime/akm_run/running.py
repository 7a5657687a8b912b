"""The units a run has in flight, as `status` shows them (operations.md D6): how long each has run,
its latest progress frame, its last activity, and, once silent for its step's `stall_after`, the
commands to look at it and act. Wall clock decides what is shown here, never what is journaled."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from akm_run import core, durations, wording
from akm_run.hints import Hints
from akm_run.rows import RunRow, StepRow
from akm_run.store import Store


@dataclass(frozen=True, slots=True)
class InFlight:
    """One attempt in flight, as of `now`."""

    unit_id: str
    item_index: int | None
    items: int | None  # how many items its map step has, when its subject resolves
    started_at: float
    last_activity_at: float
    progress: dict[str, Any] | None
    stall_after_ms: int | None
    now: float

    @property
    def quiet_s(self) -> float:
        return max(0.0, self.now - self.last_activity_at)

    @property
    def silent(self) -> bool:
        return self.stall_after_ms is not None and self.quiet_s * 1000 >= self.stall_after_ms

    def document(self, iso: Callable[[float], str], commands: list[str]) -> dict[str, Any]:
        """`{unitId, itemIndex?, items?, startedAt, lastActivityAt, runningMs, quietMs, progress?,
        silent?: {forMs, stallAfterMs, commands}}`; `commands` look at the unit and act on it."""
        entry: dict[str, Any] = {
            "unitId": self.unit_id,
            "startedAt": iso(self.started_at),
            "lastActivityAt": iso(self.last_activity_at),
            "runningMs": round(max(0.0, self.now - self.started_at) * 1000),
            "quietMs": round(self.quiet_s * 1000),
        }
        if self.item_index is not None:
            entry["itemIndex"] = self.item_index
            if self.items is not None:
                entry["items"] = self.items
        if self.progress is not None:
            entry["progress"] = self.progress
        if self.silent:
            silent = {"forMs": round(self.quiet_s * 1000), "stallAfterMs": self.stall_after_ms, "commands": commands}
            entry["silent"] = silent
        return entry

    def commands(self, run_id: str, step_id: str, hints: Hints) -> list[str]:
        """What a person runs to look at a silent unit, and to pause its step."""
        unit = str(self.item_index or 0)
        return [hints("logs", run_id, step_id, "--unit", unit), hints("pause", run_id, step_id)]


def running_units(
    store: Store, run: RunRow, rows: list[StepRow], now: float | None = None
) -> dict[str, list[InFlight]]:
    """Step id → its attempts in flight, in item order."""
    now = time.time() if now is None else now
    running = {r.step_id for r in rows if r.status == "running"}
    if not running:
        return {}
    steps = {s["stepId"]: s for s in json.loads(run.plan_json)["steps"]}
    totals = {step_id: _items(steps[step_id], run, rows) for step_id in running}
    found: dict[str, list[InFlight]] = {}
    for unit, attempts in store.run_attempts(run.id):
        attempt = attempts[-1] if attempts else None
        if unit.step_id not in running or attempt is None or attempt.status != "running":
            continue
        last = attempt.last_activity_at or attempt.started_at
        stall = steps[unit.step_id].get("stallAfterMs")
        flight = InFlight(
            unit.unit_id, unit.item_index, totals[unit.step_id], attempt.started_at, last, attempt.progress, stall, now
        )
        found.setdefault(unit.step_id, []).append(flight)
    return found


def _items(step: dict[str, Any], run: RunRow, rows: list[StepRow]) -> int | None:
    """How many items a map step has (None for a unit step, or when its subject does not resolve)."""
    if step["kind"] != "map":
        return None
    items = core.map_items(step, run.params, {r.step_id: r for r in rows})  # type: ignore[arg-type]
    return len(items) if isinstance(items, list) else None


def line(entry: dict[str, Any]) -> tuple[str, list[str]]:
    """(what a step's line adds, the lines under it) for one running unit of `status --format json`:
    `running 12m04s  item 3/10 "Indexing" 240/1000  last activity 9m ago  (silent for 9m; stall_after 5m)`."""
    text = f"running {_clock(entry['runningMs'] / 1000)}"
    if "itemIndex" in entry:
        text += f"  item {entry['itemIndex']}" + (f"/{entry['items']}" if "items" in entry else "")
    frame = entry.get("progress", {})
    if "note" in frame:
        text += "  " + json.dumps(frame["note"], ensure_ascii=False)
    if "progress" in frame:
        text += f"  {frame['progress']:g}" + (f"/{frame['total']:g}" if "total" in frame else "")
    elif "total" in frame:
        text += f"  of {frame['total']:g}"
    quiet = entry["quietMs"] / 1000
    text += f"  last activity {_ago(quiet)}"
    if "silent" not in entry:
        return text, []
    silent = entry["silent"]
    text += "  " + wording.silent_for(silent=_short(quiet), stall=durations.format_ms(silent["stallAfterMs"]))
    logs, pause = silent["commands"]
    return text, [wording.silent_hint(logs=logs, pause=pause)]


def _clock(seconds: float) -> str:
    """12m04s, 1h02m03s, 9s."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _short(seconds: float) -> str:
    """The largest whole unit: 9m, 2h, 40s."""
    whole = int(seconds)
    if whole >= 3600:
        return f"{whole // 3600}h"
    return f"{whole // 60}m" if whole >= 60 else f"{whole}s"


def _ago(seconds: float) -> str:
    return "just now" if seconds < 1 else f"{_short(seconds)} ago"
