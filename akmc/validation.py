"""Native validation of a JSON value against a type: the decisions JSON Schema makes on `schema(t)`."""

from __future__ import annotations

import json
import re
from typing import Any

from akm_run.numbers import number
from akmc.types import AnyT, ListT, Lit, MapT, Prim, Type, UnionT, describe, same


def validation_errors(value: Any, t: Type) -> list[str]:
    """Why `value` does not validate against the lowered schema of `t` (empty when it does).

    Native, so that checking a param default never loads a JSON Schema library; it decides exactly
    as JSON Schema does on the schemas `schema(t)` produces (tests/unit/test_types.py compares the two)."""
    problems: list[str] = []
    _validate(value, t, "", problems)
    return problems


_JSON_TYPES = {"string": (str,), "int": (int,), "number": (int, float), "bool": (bool,), "null": (type(None),)}


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _is(value: Any, name: str) -> bool:
    if name in ("int", "number") and isinstance(value, bool):
        return False
    if name == "int" and isinstance(value, float):
        return isinstance(number(value), int)  # integral, within ±(2^53 − 1)
    return isinstance(value, _JSON_TYPES[name])


def _validate(value: Any, t: Type, where: str, problems: list[str]) -> None:
    at = f"at {where}: " if where else ""
    if isinstance(t, AnyT):
        return
    if isinstance(t, Lit):
        if not same(value, t.value):
            problems.append(f"{at}{_shown(value)} is not {describe(t)}")
        return
    if isinstance(t, UnionT):
        if any(not validation_errors(value, m) for m in t.members):
            return
        if all(isinstance(m, Lit) for m in t.members):
            problems.append(f"{at}{_shown(value)} is not one of {', '.join(describe(m) for m in t.members)}")
        else:
            problems.append(f"{at}{_shown(value)} does not match {describe(t)}")
        return
    if isinstance(t, Prim):
        if not _is(value, t.name):
            problems.append(f"{at}{_shown(value)} is not of type {t.name}")
            return
        for key, limit in t.refinements:
            if key == "pattern" and not re.search(limit, value):
                problems.append(f"{at}{_shown(value)} does not match the pattern {_shown(limit)}")
            elif key == "min_length" and len(value) < limit:
                problems.append(f"{at}{_shown(value)} is shorter than {limit} characters")
            elif key == "max_length" and len(value) > limit:
                problems.append(f"{at}{_shown(value)} is longer than {limit} characters")
            elif key == "min" and value < limit:
                problems.append(f"{at}{_shown(value)} is less than the minimum {limit}")
            elif key == "max" and value > limit:
                problems.append(f"{at}{_shown(value)} is greater than the maximum {limit}")
        return
    if isinstance(t, ListT):
        if not isinstance(value, list):
            problems.append(f"{at}{_shown(value)} is not a list")
            return
        for key, limit in t.refinements:
            if key == "min_items" and len(value) < limit:
                problems.append(f"{at}the list has {len(value)} items, fewer than {limit}")
            elif key == "max_items" and len(value) > limit:
                problems.append(f"{at}the list has {len(value)} items, more than {limit}")
        for index, item in enumerate(value):
            _validate(item, t.item, f"{where}[{index}]", problems)
        return
    if not isinstance(value, dict):
        problems.append(f"{at}{_shown(value)} is not an object")
        return
    if isinstance(t, MapT):
        for key in value:
            _validate(value[key], t.value, f"{where}.{key}", problems)
        return
    for f in t.fields:
        if f.name in value:
            _validate(value[f.name], f.type, f"{where}.{f.name}", problems)
        elif f.required:
            problems.append(f"{at}the required field `{f.name}` is missing")
