"""How `status` shows a large fan-out (akm_run.lanes): terminal units folded into counts, the live
ones as at most LANES lanes, so a 500-item map is a few lines."""

from __future__ import annotations

from akm_run import lanes
from akm_run.rows import UnitRow, UnitStatus


def _unit(index: int, status: UnitStatus) -> UnitRow:
    return UnitRow(f"fan:{index:04}", "fan", index, "sha256:x", status, None, None, None, None)


def test_a_500_item_map_is_a_few_lines() -> None:
    units = [_unit(i, "completed") for i in range(480)]
    units += [_unit(480 + i, "failed") for i in range(5)]
    units += [_unit(485 + i, "running") for i in range(15)]
    summary = lanes.units_summary(units, "running")
    assert summary["counts"] == {"completed": 480, "failed": 5, "running": 15}
    lines = lanes.summary_lines(summary, "    ")
    assert lines[0] == "    units: 480 completed, 5 failed, 15 running"
    assert lines[1] == "      → item 485  fan:0485"
    assert lines[-1] == "      … and 7 more running"
    assert len(lines) == 1 + lanes.LANES + 1


def test_a_small_settled_map_shows_no_units_unless_it_keeps_going() -> None:
    done = [_unit(i, "completed") for i in range(3)]
    assert not lanes.shown(False, "completed", done)
    assert lanes.shown(True, "completed", done)
    assert lanes.shown(False, "running", done)
    assert lanes.shown(False, "completed", [_unit(i, "completed") for i in range(lanes.LANES + 1)])


def test_units_of_a_step_that_no_longer_runs_are_stopped_and_superseded_ones_are_not_counted() -> None:
    units = [_unit(0, "completed"), _unit(1, "running"), _unit(2, "running")]
    summary = lanes.units_summary(units, "pending")  # the drive ended: nothing runs them
    assert summary == {"counts": {"completed": 1, "stopped": 2}}
    assert lanes.summary_lines(summary, "") == ["units: 1 completed, 2 stopped"]
    retried = [_unit(0, "completed"), _unit(1, "completed")]
    retried[0].superseded = True
    assert lanes.units_summary(retried, "completed")["counts"] == {"completed": 1}
