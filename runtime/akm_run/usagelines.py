"""A usage report, one line of a unit's progress channel (operations.md D8): read by the token
budgets (akm_run.budgets) and counted as activity by the heartbeat reader (akm_run.activity)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from akm_run import strictjson
from akm_run.planformat import MAX_INT

MAX_LINE_BYTES = 4096  # a line of the progress channel, as D6 bounds it
# What every usage line holds: its key as written, or the backslash of an escape that spells it.
MARKS = (b"usage", b"\\")


@dataclass(frozen=True, slots=True)
class Usage:
    """One usage report: the tokens counted and every field as the unit reported it."""

    tokens: int
    fields: dict[str, Any]


def usage_of(line: bytes) -> Usage | None:
    """The usage a line of the progress channel reports, or None when it is not a valid usage line:
    a strict JSON object `{"usage": {...}}` of at most 4 KiB whose `usage` holds `input_tokens` and
    `output_tokens` as integers ≥ 0 (further fields are kept as they are, except that an integer
    past 2^53 - 1, which no store or JSON reader keeps exactly, is held at 2^53 - 1)."""
    if len(line) > MAX_LINE_BYTES or not any(mark in line for mark in MARKS):
        return None  # the second test spares a flood of pulses a JSON parse per line
    try:  # integers past 2^53 - 1 are read, then held at it: a count that large spends any budget
        value = strictjson.loads(line.decode("utf-8"), max_depth=8, int_check=False)
    except (UnicodeDecodeError, ValueError):  # json.JSONDecodeError and NotStrict are ValueErrors
        return None
    if not isinstance(value, dict) or list(value) != ["usage"] or not isinstance(value["usage"], dict):
        return None
    usage = _held(value["usage"])
    counts = [usage.get("input_tokens"), usage.get("output_tokens")]
    tokens = [n for n in counts if isinstance(n, int) and not isinstance(n, bool) and n >= 0]
    return Usage(min(sum(tokens), MAX_INT), usage) if len(tokens) == 2 else None


def _held(value: Any) -> Any:
    """`value` with every integer past ±(2^53 - 1) held at that bound."""
    if isinstance(value, dict):
        return {key: _held(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_held(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        return MAX_INT if value > 0 else -MAX_INT
    return value
