"""Strict JSON for everything that enters a run from outside: plan files, params and unit output.

Strict means standard JSON and nothing a later step could trip on: no NaN or Infinity, no
duplicate keys, no lone surrogate (`"\\ud800"` is JSON syntax but no Unicode text: no store, file or
terminal can hold it), integers within ±(2^53 − 1) (what every JSON reader agrees on), finite numbers,
and for values a unit produces, nesting at most 64 deep. Parsing never recurses past the limit.
Numbers are parsed as the values they are (akm_run.numbers: `1.0` is the integer 1), except in
a plan file, whose bytes its hash covers."""

from __future__ import annotations

import json
import re
from typing import Any

from akm_run import wording
from akm_run.numbers import number
from akm_run.planformat import MAX_INT

MAX_VALUE_DEPTH = 64
_INT_DIGITS = len(str(MAX_INT))
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class NotStrict(ValueError):
    """Text that is JSON, or starts out as JSON, but not strict JSON; the message says why."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise NotStrict(wording.duplicate_key(key=_shown(json.dumps(key, ensure_ascii=False))))
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise NotStrict(wording.not_json_constant(name=name))


def _int(text: str) -> int:
    if len(text.lstrip("-")) > _INT_DIGITS or abs(int(text)) > MAX_INT:
        shown = text if len(text) <= 24 else f"{text[:20]}… ({len(text.lstrip('-'))} digits)"
        raise NotStrict(wording.integer_outside(integer=shown))
    return int(text)


def _bounded_int(text: str) -> int:
    """An integer left for a later check to place (plans name the path), but never thousands of digits."""
    if len(text.lstrip("-")) > 2 * _INT_DIGITS:
        return _int(text)
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        shown = text if len(text) <= 24 else f"{text[:20]}…"
        raise NotStrict(wording.number_too_large(number=shown))
    return value


def _value(text: str) -> int | float:
    return number(_float(text))


def depth(text: str) -> int:
    """How deeply arrays and objects nest in `text` (brackets inside strings do not count); with
    few brackets, their count (an upper bound that is already within every limit)."""
    if text.count("[") + text.count("{") <= MAX_VALUE_DEPTH:
        return text.count("[") + text.count("{")  # an upper bound, enough to pass
    deepest = level = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            level += 1
            deepest = max(deepest, level)
        elif token in "]}":
            level -= 1
    return deepest


def loads(text: str, max_depth: int | None = MAX_VALUE_DEPTH, *, int_check: bool = True, as_values: bool = True) -> Any:
    """Parse strict JSON. Raises json.JSONDecodeError when `text` is not JSON at all and NotStrict
    when it is JSON (or begins as JSON) but breaks a rule above. Without `int_check`, integers
    past the limit (but not absurdly long ones) are left for the caller's own check. Without
    `as_values`, numbers keep the form they are written in (`1.0` stays a float)."""
    if max_depth is not None and text.lstrip()[:1] in ("[", "{") and depth(text) > max_depth:
        raise NotStrict(wording.nesting_too_deep(limit=max_depth))
    if (found := _SURROGATE.search(text)) is not None:
        raise NotStrict(wording.lone_surrogate_in_text(surrogate=_shown(found.group()), offset=found.start()))
    try:
        value = json.loads(
            text,
            object_pairs_hook=_pairs,
            parse_constant=_constant,
            parse_int=_int if int_check else _bounded_int,
            parse_float=_value if as_values else _float,
        )
    except RecursionError:
        raise NotStrict(wording.nested_too_deeply()) from None
    if _SURROGATE_ESCAPE.search(text) is not None:  # a pair is one character; a lone half is none
        _no_lone_surrogate(value)
    return value


def _shown(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if _SURROGATE.match(c) else c for c in text)


def _no_lone_surrogate(value: Any) -> None:
    """Raise NotStrict for a string (or key) in `value` that holds a lone surrogate; no recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if (found := _SURROGATE.search(item)) is not None:  # the string itself is not quoted: it may hold a secret
                raise NotStrict(wording.lone_surrogate_in_string(surrogate=_shown(found.group())))
        elif isinstance(item, dict):
            pending += item.keys()
            pending += item.values()
        elif isinstance(item, list):
            pending += item


def dumps(value: Any) -> str:
    """Compact, sorted, standard JSON (NaN and Infinity are refused: ValueError)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
