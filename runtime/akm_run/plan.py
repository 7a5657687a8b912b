"""The plan format (irVersion 1): strict decoding, canonical bytes, hashing, verification.

This module is the one definition of a valid plan. The compiler verifies every
plan it writes with it, and the runtime runs nothing it has not accepted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import canonicaljson

from akm_run.strictjson import MAX_INT

FORMAT = "akm-plan"
IR_VERSION = 1
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_PLAN_BYTES = 4 * 1024 * 1024
MAX_EMBEDDED_BYTES = 1024 * 1024
MAX_DEPTH = 8
MAX_STEPS = 256
MAX_PARAMS = 64
MAX_OUTPUTS = 64
MAX_CONCURRENCY = 64
MAX_TIMEOUT_MS = 24 * 3600 * 1000
MAX_RETRY = 10
MAX_LOOPS = 10
RETRY_REASONS = ("exit", "timeout", "spawn_error", "output_invalid")

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
STEP_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
REF = re.compile(r"[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*")
SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
# The current element of a `map` step, in the bindings of its child-workflow target only.
ITEM_REFERENCE = re.compile(r"item(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*")
REFERENCE = re.compile(
    r"params\.(?P<param>[A-Za-z_][A-Za-z0-9_]*)"
    r"|steps\.(?P<step>[A-Za-z_][A-Za-z0-9_-]*)\.output(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*"
)


class PlanError(Exception):
    """A plan was refused. `str()` names the JSON path of the first failure."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


# -- canonical form -------------------------------------------------------------------


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON encoding that hashes are taken over."""
    encoded: bytes = canonicaljson.encode_canonical_json(value)
    return encoded


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def plan_hash(plan: Mapping[str, Any]) -> str:
    """`sha256:` + hex SHA-256 of the plan object's canonical bytes."""
    return sha256_of(canonical_bytes(plan))


def envelope(plan: Mapping[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "planHash": plan_hash(plan), "plan": plan}


def render_file(plan: Mapping[str, Any]) -> str:
    """A plan file: pretty-printed, sorted keys, trailing newline (it diffs well in review)."""
    return json.dumps(envelope(plan), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# -- strict JSON ------------------------------------------------------------------------


def loads_strict(data: bytes) -> Any:
    """Parse strict JSON (strictjson): UTF-8, no duplicate keys, no NaN or Infinity, no integer
    past ±(2^53 − 1); raises PlanError naming why."""
    from akm_run import strictjson

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlanError("file", f"not UTF-8 (byte {error.start})") from error
    try:
        return strictjson.loads(text, max_depth=None, int_check=False)
    except json.JSONDecodeError as error:
        raise PlanError("file", f"not JSON: {error.msg} at line {error.lineno} column {error.colno}") from error
    except strictjson.NotStrict as error:
        raise PlanError("file", str(error)) from error


# -- structural decoding ---------------------------------------------------------------

Check = Callable[[Any, str], None]


def _fail(path: str, message: str) -> PlanError:
    return PlanError(path, message)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def _string(pattern: re.Pattern[str] | None = None, nonempty: bool = False) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, str):
            raise _fail(path, f"expected a string, found {_type_name(value)}")
        if pattern is not None and not pattern.fullmatch(value):
            raise _fail(path, f"{json.dumps(value)} does not match {pattern.pattern}")
        if nonempty and not value:
            raise _fail(path, "must not be empty (optional fields are absent, never empty)")

    return check


def _integer(low: int, high: int) -> Check:
    def check(value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(path, f"expected an integer, found {_type_name(value)}")
        if not low <= value <= high:
            raise _fail(path, f"{value} is outside [{low}, {high}]")

    return check


def _const(expected: Any) -> Check:
    def check(value: Any, path: str) -> None:
        if type(value) is not type(expected) or value != expected:
            raise _fail(path, f"expected {json.dumps(expected)}, found {json.dumps(value)}")

    return check


def _one_of(*choices: str) -> Check:
    def check(value: Any, path: str) -> None:
        if value not in choices or not isinstance(value, str):
            raise _fail(path, f"expected one of {', '.join(json.dumps(c) for c in choices)}, found {json.dumps(value)}")

    return check


def _json_value(value: Any, path: str) -> None:
    """Any JSON value; integers within ±(2^53 − 1)."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool) or item is None or isinstance(item, str | float):
            continue
        if isinstance(item, int):
            if abs(item) > MAX_INT:
                raise _fail(where, f"integer {item} is outside ±(2^53 − 1)")
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, dict):
            stack.extend((v, f"{where}.{k}") for k, v in item.items())
        else:
            raise _fail(where, f"unexpected {_type_name(item)}")


def _schema(value: Any, path: str) -> None:
    if not isinstance(value, dict):
        raise _fail(path, f"expected a JSON Schema object, found {_type_name(value)}")
    _json_value(value, path)
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as error:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        raise _fail(path + where, f"invalid JSON Schema: {error.message}") from error
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
                raise _fail(where(pointer), f"{key} is not supported in plan schemas (use $ref to #/$defs/…)")
        targets = []
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
                raise _fail(where(pointer) + ".$ref", f"{json.dumps(ref)} does not point inside this schema")
            target = urllib.parse.unquote(ref[1:])
            if target not in nodes and not isinstance(_pointer_value(schema, target), bool):
                raise _fail(where(pointer) + ".$ref", f"{json.dumps(ref)} does not name a schema in this schema")
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
                raise _fail(where(node), "$ref loops back to itself without descending into the value")
            elif not state.get(child):
                state[child] = 1
                path.append((child, iter(edges[child])))


def _patterns(schema: Any, path: str) -> None:
    """Every `pattern` in a schema is one whose matching time is bounded (akm_run.patterns)."""
    from akm_run.patterns import unsafe

    if isinstance(schema, list):
        for i, item in enumerate(schema):
            _patterns(item, f"{path}[{i}]")
    if not isinstance(schema, dict):
        return
    for key, item in schema.items():
        if key == "pattern" and isinstance(item, str):
            why = unsafe(item)
            if why is not None:
                raise _fail(f"{path}.pattern", f"{json.dumps(item)} may backtrack catastrophically: {why}")
        elif key not in _VALUES:
            _patterns(item, f"{path}.{key}")


def _list(item: Check, *, low: int = 0, high: int = MAX_INT) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise _fail(path, f"expected an array, found {_type_name(value)}")
        if not low <= len(value) <= high:
            raise _fail(path, f"expected {low} to {high} items, found {len(value)}")
        for i, element in enumerate(value):
            item(element, f"{path}[{i}]")

    return check


def _record(
    required: Mapping[str, Check], optional: Mapping[str, Check] | None = None, values: frozenset[str] = frozenset()
) -> Check:
    """An object with a closed key set; optional keys must not be empty, except
    the `values` keys, which carry user data (a param default may well be `[]`)."""
    optional = optional or {}

    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, found {_type_name(value)}")
        for key in value:
            if key not in required and key not in optional:
                raise _fail(f"{path}.{key}", f"unknown key {json.dumps(key)}")
        for key, sub in required.items():
            if key not in value:
                raise _fail(path, f"missing key {json.dumps(key)}")
            sub(value[key], f"{path}.{key}")
        for key, sub in optional.items():
            if key in value:
                if key not in values and value[key] in ({}, [], None, ""):
                    raise _fail(f"{path}.{key}", "must be absent rather than empty")
                sub(value[key], f"{path}.{key}")

    return check


def _mapping(item: Check, *, high: int) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, found {_type_name(value)}")
        if len(value) > high:
            raise _fail(path, f"at most {high} entries, found {len(value)}")
        for key, element in value.items():
            if not NAME.fullmatch(key):
                raise _fail(f"{path}.{key}", f"{json.dumps(key)} is not a valid name")
            item(element, f"{path}.{key}")

    return check


def _tagged(tag: str, variants: Mapping[str, Check]) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise _fail(path, f"expected an object, found {_type_name(value)}")
        kind = value.get(tag)
        if kind not in variants or not isinstance(kind, str):
            choices = ", ".join(json.dumps(k) for k in variants)
            raise _fail(f"{path}.{tag}", f"expected one of {choices}, found {json.dumps(kind)}")
        variants[kind](value, path)

    return check


def _sorted_unique(key: str) -> Check:
    def check(value: Any, path: str) -> None:
        names = [entry[key] for entry in value]
        if names != sorted(names) or len(set(names)) != len(names):
            raise _fail(path, f"entries must be sorted by {key} and unique")

    return check


def _all(*checks: Check) -> Check:
    def check(value: Any, path: str) -> None:
        for each in checks:
            each(value, path)

    return check


_reference = _string(REFERENCE)
_duration = _integer(1, MAX_TIMEOUT_MS)
_shell = _record({"kind": _const("shell"), "command": _string()})
_script = _record({"kind": _const("script"), "path": _string(REF), "sha256": _string(SHA256), "text": _string()})
_agent = _record({"kind": _const("agent"), "instructions": _string()}, {"path": _string(REF)})
_approval = _record({"kind": _const("approval"), "message": _string()})
_binding = _tagged(
    "kind",
    {
        "literal": _record({"name": _string(NAME), "kind": _const("literal"), "value": _json_value}),
        "reference": _record({"name": _string(NAME), "kind": _const("reference"), "from": _reference}),
        "item": _record({"name": _string(NAME), "kind": _const("item"), "from": _string(ITEM_REFERENCE)}),
    },
)
_child = _record(
    {
        "kind": _const("child-workflow"),
        "ref": _string(REF),
        "planHash": _string(SHA256),
        "plan": lambda value, path: _plan(value, path),
    },
    {"bindings": _all(_list(_binding, low=1), _sorted_unique("name"))},
)
_target = _tagged(
    "kind", {"shell": _shell, "script": _script, "agent": _agent, "approval": _approval, "child-workflow": _child}
)
_check_target = _tagged("kind", {"shell": _shell, "script": _script})
_env_entry = _tagged(
    "kind",
    {
        "literal": _record({"name": _string(NAME), "kind": _const("literal"), "value": _string()}),
        "secret": _record({"name": _string(NAME), "kind": _const("secret"), "secret": _string(NAME)}),
        "passthrough": _record({"name": _string(NAME), "kind": _const("passthrough")}),
    },
)
_retry = _record(
    {"max": _integer(1, MAX_RETRY), "on": _list(_one_of(*RETRY_REASONS), low=1, high=len(RETRY_REASONS))},
    {"backoffMs": _duration},
)
_common = {
    "stepId": _string(STEP_ID),
    "index": _integer(0, MAX_STEPS - 1),
    "kind": _string(),
    "onError": _one_of("fail", "continue"),
}
_work = {
    "inputs": _list(_reference, low=1),
    "outputSchema": _schema,
    "gate": _record({"check": _check_target, "maxLoops": _integer(1, MAX_LOOPS)}),
    "retry": _retry,
    "timeoutMs": _duration,
    "env": _all(_list(_env_entry, low=1), _sorted_unique("name")),
}
_step = _tagged(
    "kind",
    {
        "unit": _record({**_common, "target": _target}, _work),
        "map": _record(
            {**_common, "target": _target, "over": _reference, "concurrency": _integer(1, MAX_CONCURRENCY)}, _work
        ),
        "route": _record(
            {
                **_common,
                "input": _reference,
                "cases": _list(_record({"match": _json_value, "next": _string(STEP_ID)}, values=frozenset({"match"}))),
            },
            {"default": _string(STEP_ID), "inputs": _list(_reference, low=1), "outputSchema": _schema},
        ),
    },
)
_PLAN: Check = _record(
    {
        "irVersion": _const(IR_VERSION),
        "ref": _string(REF),
        "title": _string(),
        # `.akm` sources by path only, scripts and prompt files with their sha256
        "sourceReadSet": _all(
            _list(_record({"path": _string(REF)}, {"sha256": _string(SHA256)}), low=1), _sorted_unique("path")
        ),
        "limits": _record(
            {"concurrency": _integer(1, MAX_CONCURRENCY)},
            {"maxUnits": _integer(1, MAX_INT), "timeoutMs": _duration},
        ),
        "steps": _list(_step, high=MAX_STEPS),
    },
    {
        "description": _string(),
        "params": _mapping(
            _record({"schema": _schema}, {"default": _json_value, "description": _string()}, frozenset({"default"})),
            high=MAX_PARAMS,
        ),
        "outputs": _mapping(_record({"from": _reference}, {"schema": _schema}), high=MAX_OUTPUTS),
    },
)


def _plan(value: Any, path: str) -> None:
    _PLAN(value, path)


# -- semantic integrity ------------------------------------------------------------------------


def _semantics(plan: dict[str, Any], path: str) -> None:
    params = plan.get("params", {})
    for name, param in params.items():
        if "default" in param:
            _default_fits(param["default"], param["schema"], f"{path}.params.{name}.default")
    index_of: dict[str, int] = {}
    for i, step in enumerate(plan["steps"]):
        where = f"{path}.steps[{i}]"
        if step["index"] != i:
            raise _fail(f"{where}.index", f"is {step['index']}, but the step stands at position {i}")
        if step["stepId"] in index_of:
            raise _fail(f"{where}.stepId", f"duplicate step id {json.dumps(step['stepId'])}")
        index_of[step["stepId"]] = i

    def reads(reference: str, where: str, before: int) -> None:
        match = REFERENCE.fullmatch(reference)
        assert match is not None  # the structural pass checked the pattern
        if match.group("param") is not None and match.group("param") not in params:
            raise _fail(where, f"{json.dumps(reference)} names an undeclared param")
        step = match.group("step")
        if step is not None and index_of.get(step, before) >= before:
            raise _fail(where, f"{json.dumps(reference)} does not name an earlier step")

    for i, step in enumerate(plan["steps"]):
        where = f"{path}.steps[{i}]"
        for j, reference in enumerate(step.get("inputs", [])):
            reads(reference, f"{where}.inputs[{j}]", i)
        if step["kind"] == "map":
            reads(step["over"], f"{where}.over", i)
        if step["kind"] == "route":
            reads(step["input"], f"{where}.input", i)
            nexts = [(f"{where}.cases[{j}].next", c["next"]) for j, c in enumerate(step["cases"])]
            if "default" in step:
                nexts.append((f"{where}.default", step["default"]))
            for at, target in nexts:
                if index_of.get(target, -1) <= i:
                    raise _fail(at, f"route target {json.dumps(target)} is not a later step")
        target = step.get("target")
        if target is not None and target["kind"] == "child-workflow":
            _child_bindings(target, f"{where}.target", i, reads, step["kind"] == "map")
    for name, output in plan.get("outputs", {}).items():
        reads(output["from"], f"{path}.outputs.{name}.from", len(plan["steps"]))


def _default_fits(value: Any, schema: dict[str, Any], path: str) -> None:
    from jsonschema import Draft202012Validator

    error = next(iter(Draft202012Validator(schema).iter_errors(value)), None)
    if error is not None:
        raise _fail(path, f"the default does not fit the param's schema: {error.message}")


def _child_bindings(
    target: dict[str, Any], path: str, index: int, reads: Callable[[str, str, int], None], mapped: bool
) -> None:
    child_params = target["plan"].get("params", {})
    bound = set()
    for j, binding in enumerate(target.get("bindings", [])):
        if binding["name"] not in child_params:
            raise _fail(f"{path}.bindings[{j}].name", f"child has no param {json.dumps(binding['name'])}")
        if binding["kind"] == "reference":
            reads(binding["from"], f"{path}.bindings[{j}].from", index)
        if binding["kind"] == "item" and not mapped:
            raise _fail(f"{path}.bindings[{j}].from", "`item` is only defined in the target of a map step")
        bound.add(binding["name"])
    for name, param in child_params.items():
        if "default" not in param and name not in bound:
            raise _fail(f"{path}.bindings", f"required child param {json.dumps(name)} is not bound")


def _hashes(plan: dict[str, Any], path: str, depth: int, embedded: list[int]) -> None:
    """Each embedded child's planHash matches its plan; depth and total embedded bytes stay in bounds."""
    for i, step in enumerate(plan["steps"]):
        target = step.get("target")
        if target is None or target["kind"] != "child-workflow":
            continue
        where = f"{path}.steps[{i}].target"
        if depth + 1 > MAX_DEPTH:
            raise _fail(where, f"composition deeper than {MAX_DEPTH} levels")
        data = canonical_bytes(target["plan"])
        embedded[0] += len(data)
        if embedded[0] > MAX_EMBEDDED_BYTES:
            raise _fail(where, f"embedded child plans exceed {MAX_EMBEDDED_BYTES} bytes in total")
        if sha256_of(data) != target["planHash"]:
            raise _fail(f"{where}.planHash", "does not match the embedded plan")
        _semantics(target["plan"], f"{where}.plan")
        _hashes(target["plan"], f"{where}.plan", depth + 1, embedded)


def verify_plan(plan: Any, path: str = "plan") -> dict[str, Any]:
    """Decode a plan object strictly and check its integrity; raises PlanError."""
    _PLAN(plan, path)
    if len(canonical_bytes(plan)) > MAX_PLAN_BYTES:
        raise _fail(path, f"canonical size exceeds {MAX_PLAN_BYTES} bytes")
    _semantics(plan, path)
    _hashes(plan, path, 0, [0])
    verified: dict[str, Any] = plan
    return verified


def verify_file(data: bytes, expect_hash: str | None = None) -> dict[str, Any]:
    """Verify a plan file's bytes; returns the plan object or raises PlanError."""
    if len(data) > MAX_FILE_BYTES:
        raise PlanError("file", f"larger than {MAX_FILE_BYTES} bytes")
    document = loads_strict(data)
    if not isinstance(document, dict):
        raise PlanError("file", f"expected an object, found {_type_name(document)}")
    for key in document:
        if key not in ("format", "planHash", "plan"):
            raise PlanError(key, f"unknown envelope key {json.dumps(key)}")
    for key in ("format", "planHash", "plan"):
        if key not in document:
            raise PlanError("file", f"missing envelope key {json.dumps(key)}")
    _const(FORMAT)(document["format"], "format")
    _string(SHA256)(document["planHash"], "planHash")
    plan = verify_plan(document["plan"])
    actual = plan_hash(plan)
    if document["planHash"] != actual:
        raise PlanError("planHash", f"does not match the plan (recomputed {actual})")
    if expect_hash is not None and expect_hash != actual:
        raise PlanError("planHash", f"is {actual}, but {expect_hash} was expected (--expect-hash)")
    return plan


def read_file(path: str | os.PathLike[str], expect_hash: str | None = None) -> tuple[dict[str, Any] | None, str]:
    """Read and verify a plan file: (plan, "") when it verifies, else (None, why it is refused)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        return None, f"cannot read {os.fspath(path)}: {error.strerror or error}"
    try:
        return verify_file(data, expect_hash), ""
    except PlanError as error:
        return None, str(error)
