"""JSON numbers are values: the one numeric rule of the checker, the validator and the runtime.

Two numbers are equal when their mathematical values are (`1.0` is `1`, `-0.0` is `0`). A number
with an integral value within ±(2^53 − 1) is an integer, and is kept as one: a unit that prints
`1.0` for an `int` output stores `1`. Non-finite numbers never occur (JSON has none). Normalising
a value this way gives every JSON value one canonical form, so comparing canonical bytes (route
cases, map item ids) is comparing values."""

from __future__ import annotations

from typing import Any

from akm_run.planformat import MAX_INT


def number(value: float) -> int | float:
    """A parsed JSON number as the value it is: integral within ±(2^53 − 1) → that integer."""
    if value.is_integer() and abs(value) <= MAX_INT:
        return int(value)
    return value


def normal(value: Any) -> Any:
    """A copy of `value` with every number as `number` makes it (without recursion, so any depth
    a plan may carry is fine)."""
    if isinstance(value, float):
        return number(value)
    if not isinstance(value, list | dict):
        return value
    holder: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(holder, 0, value)]
    while stack:
        parent, key, item = stack.pop()
        if isinstance(item, float):
            parent[key] = number(item)
        elif isinstance(item, list):
            parent[key] = items = list(item)
            stack.extend((items, i, v) for i, v in enumerate(items) if isinstance(v, float | list | dict))
        elif isinstance(item, dict):
            parent[key] = fields = dict(item)
            stack.extend((fields, k, v) for k, v in fields.items() if isinstance(v, float | list | dict))
    return holder[0]
