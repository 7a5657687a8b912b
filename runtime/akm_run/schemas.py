"""Embedded JSON Schemas (param, output and step types): what a plan may carry, and validation."""

from __future__ import annotations

import functools
import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from akm_run import wording
from akm_run.numbers import normal
from akm_run.patterns import unsafe
from akm_run.planformat import MAX_INT, PlanError


def type_name(value: Any) -> str:
    """A JSON value's type in JSON's words."""
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def json_value(value: Any, path: str) -> None:
    """Any JSON value; integers within ±(2^53 − 1)."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str | float):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_INT:
                raise PlanError(where, wording.integer_outside(integer=item))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        else:
            raise PlanError(where, wording.unexpected_type(type=type_name(item)))


def check_schema(value: Any, path: str) -> None:
    """A JSON Schema a plan may carry: draft 2020-12, references inside itself, bounded patterns."""
    if not isinstance(value, dict):
        raise PlanError(path, wording.expected(expected="a JSON Schema object", found=type_name(value)))
    json_value(value, path)
    # Imported here, as in _validator_class: jsonschema costs about 60 ms to import, paid only by
    # a process that checks or validates a schema (not by `akmc check`, nor by `akm-run status`).
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as error:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        raise PlanError(path + where, wording.invalid_schema(error=error.message)) from error
    _schema_refs(value, path)
    _patterns(value, path)


_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")
_VALUES = ("const", "enum", "default", "examples")
_ELSEWHERE = ("$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor")


def _schema_refs(schema: dict[str, Any], path: str) -> None:
    """Every `$ref` is a JSON pointer into the same schema (`#` or `#/…`) that names a schema, and
    no chain of references comes back to where it started without descending into the value (such
    a schema never finishes validating anything)."""
    nodes: dict[str, Any] = {}
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, pointer = stack.pop()
        if isinstance(node, dict):
            nodes[pointer] = node
            for key, child in node.items():
                if key in _VALUES:  # plain JSON values, not schemas
                    continue
                stack.append((child, f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"))
        elif isinstance(node, list):
            stack.extend((child, f"{pointer}/{i}") for i, child in enumerate(node))

    def where(pointer: str) -> str:
        return path + "".join(f".{part}" for part in pointer.split("/")[1:])

    edges: dict[str, list[str]] = {}
    for pointer, node in nodes.items():
        for key in _ELSEWHERE:
            if key in node and not (key == "$id" and pointer == ""):
                raise PlanError(where(pointer), wording.unsupported_keyword(key=key))
        targets = []
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
                raise PlanError(where(pointer) + ".$ref", wording.ref_outside(ref=json.dumps(ref)))
            target = urllib.parse.unquote(ref[1:])
            if target not in nodes and not isinstance(_pointer_value(schema, target), bool):
                raise PlanError(where(pointer) + ".$ref", wording.ref_unknown(ref=json.dumps(ref)))
            targets.append(target)
        for key in _IN_PLACE:
            child = node.get(key)
            if isinstance(child, dict) and key != "dependentSchemas":
                targets.append(f"{pointer}/{key}")
            elif isinstance(child, list):
                targets += [f"{pointer}/{key}/{i}" for i in range(len(child))]
            elif isinstance(child, dict):
                targets += [f"{pointer}/{key}/{k.replace('~', '~0').replace('/', '~1')}" for k in child]
        edges[pointer] = [t for t in targets if t in nodes]
    _no_cycle(edges, where)


def _pointer_value(schema: Any, pointer: str) -> Any:
    """The value at a JSON pointer, or None."""
    node = schema
    for part in pointer.split("/")[1:] if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _no_cycle(edges: dict[str, list[str]], where: Callable[[str], str]) -> None:
    """Refuse a cycle in the in-place reference graph (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    for start in edges:
        if state.get(start):
            continue
        path = [(start, iter(edges[start]))]
        state[start] = 1
        while path:
            node, children = path[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                path.pop()
            elif state.get(child) == 1:
                raise PlanError(where(node), wording.ref_loop())
            elif not state.get(child):
                state[child] = 1
                path.append((child, iter(edges[child])))


def _patterns(schema: Any, path: str) -> None:
    """Every `pattern` in a schema is one whose matching time is bounded (akm_run.patterns)."""
    if isinstance(schema, list):
        for i, item in enumerate(schema):
            _patterns(item, f"{path}[{i}]")
    if not isinstance(schema, dict):
        return
    for key, item in schema.items():
        if key == "pattern" and isinstance(item, str):
            why = unsafe(item)
            if why is not None:
                raise PlanError(f"{path}.pattern", wording.unsafe_pattern(pattern=json.dumps(item), why=why))
        elif key not in _VALUES:
            _patterns(item, f"{path}.{key}")


@functools.cache
def _validator_class() -> Any:
    """Draft 2020-12 by the numeric rule of akm_run.numbers: an `integer` is an int (values are
    normalised before they are validated, so `1.0` is one, and `1e300` is not)."""
    import jsonschema  # about 60 ms: imported on the first validation, not with the module

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine("integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool))
    return jsonschema.validators.extend(base, type_checker=checker)


def _validator(schema: dict[str, Any]) -> Any:
    return _validator_class()(schema)


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Validation errors of `value` (as the value it is: akm_run.numbers) against a plan schema,
    each naming where it failed."""
    errors = sorted(_validator(schema).iter_errors(normal(value)), key=lambda e: list(e.absolute_path))
    out = []
    for error in errors:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        out.append(wording.invalid_value(where="value" + where if where else "value", error=error.message))
    return out


def default_fits(value: Any, schema: dict[str, Any], path: str) -> None:
    """Refuse a param default that its own schema rejects."""
    error = next(iter(_validator(schema).iter_errors(normal(value))), None)
    if error is not None:
        raise PlanError(path, wording.default_misfit(error=error.message))
