"""The plan format (irVersion 1): strict decoding, canonical bytes, hashing, verification.

The format itself (limits, patterns, key sets) is stated in akm_run.planformat; this module decodes
against it. The compiler verifies every plan it writes here, and the runtime runs nothing it has not
accepted.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from akm_run import features, strictjson, wording
from akm_run.digest import canonical_bytes, tagged_sha256
from akm_run.planformat import (
    FORMAT,
    ISOLATED_TARGETS,
    MAX_DEPTH,
    MAX_EMBEDDED_BYTES,
    MAX_FILE_BYTES,
    MAX_PLAN_BYTES,
    REF,
    REFERENCE,
    SHA256,
    PlanError,
)
from akm_run.schemas import check_schema, default_fits, json_value, type_name

if TYPE_CHECKING:
    from akm_run import planshape

__all__ = [
    "MAX_DEPTH",
    "MAX_EMBEDDED_BYTES",
    "MAX_FILE_BYTES",
    "MAX_PLAN_BYTES",
    "REF",
    "PlanError",
    "canonical_bytes",
    "plan_hash",
    "read_bytes",
    "read_file",
    "render_file",
    "sha256_of",
    "verify_file",
    "verify_plan",
]

sha256_of = tagged_sha256  # the name the compiler imports


# -- canonical form -------------------------------------------------------------------


def plan_hash(plan: Mapping[str, Any]) -> str:
    """`sha256:` + hex SHA-256 of the plan object's canonical bytes."""
    return tagged_sha256(canonical_bytes(plan))


def envelope(plan: Mapping[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, "planHash": plan_hash(plan), "plan": plan}


def render_file(plan: Mapping[str, Any]) -> str:
    """A plan file: pretty-printed, sorted keys, trailing newline (it diffs well in review)."""
    return json.dumps(envelope(plan), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# -- strict JSON ------------------------------------------------------------------------


def loads_strict(data: bytes) -> Any:
    """Parse strict JSON (strictjson): UTF-8, no duplicate keys, no NaN or Infinity, no integer
    past ±(2^53 − 1); raises PlanError naming why."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PlanError("file", wording.not_utf8(byte=error.start)) from error
    try:
        return strictjson.loads(text, max_depth=None, int_check=False, as_values=False)
    except json.JSONDecodeError as error:
        raise PlanError("file", wording.not_json(error=error.msg, line=error.lineno, column=error.colno)) from error
    except strictjson.NotStrict as error:
        raise PlanError("file", str(error)) from error


# -- structural decoding ---------------------------------------------------------------

Check = Callable[[Any, str], None]


def _string(pattern: re.Pattern[str] | None = None, nonempty: bool = False) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, str):
            raise PlanError(path, wording.expected(expected="a string", found=type_name(value)))
        if pattern is not None and not pattern.fullmatch(value):
            raise PlanError(path, wording.no_match(value=json.dumps(value), pattern=pattern.pattern))
        if nonempty and not value:
            raise PlanError(path, wording.empty_string())

    return check


def _integer(low: int, high: int) -> Check:
    def check(value: Any, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PlanError(path, wording.expected(expected="an integer", found=type_name(value)))
        if not low <= value <= high:
            raise PlanError(path, wording.outside(value=value, low=low, high=high))

    return check


def _const(expected: Any) -> Check:
    def check(value: Any, path: str) -> None:
        if type(value) is not type(expected) or value != expected:
            raise PlanError(path, wording.expected(expected=json.dumps(expected), found=json.dumps(value)))

    return check


def _one_of(*choices: str) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, str) or value not in choices:
            raise PlanError(
                path,
                wording.expected_one_of(choices=", ".join(json.dumps(c) for c in choices), found=json.dumps(value)),
            )

    return check


def _list(item: Check, *, low: int, high: int) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, list):
            raise PlanError(path, wording.expected(expected="an array", found=type_name(value)))
        if not low <= len(value) <= high:
            raise PlanError(path, wording.item_count(low=low, high=high, count=len(value)))
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
            raise PlanError(path, wording.expected(expected="an object", found=type_name(value)))
        for key in value:
            if key not in required and key not in optional:
                raise PlanError(f"{path}.{key}", wording.unknown_key(key=json.dumps(key)))
        for key, sub in required.items():
            if key not in value:
                raise PlanError(path, wording.missing_key(key=json.dumps(key)))
            sub(value[key], f"{path}.{key}")
        for key, sub in optional.items():
            if key in value:
                if key not in values and value[key] in ({}, [], None, ""):
                    raise PlanError(f"{path}.{key}", wording.empty_optional())
                sub(value[key], f"{path}.{key}")

    return check


def _mapping(key_pattern: re.Pattern[str], item: Check, *, high: int) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise PlanError(path, wording.expected(expected="an object", found=type_name(value)))
        if len(value) > high:
            raise PlanError(path, wording.too_many_entries(limit=high, count=len(value)))
        for key, element in value.items():
            if not key_pattern.fullmatch(key):
                raise PlanError(f"{path}.{key}", wording.invalid_name(key=json.dumps(key)))
            item(element, f"{path}.{key}")

    return check


def _tagged(tag: str, variants: Mapping[str, Check]) -> Check:
    def check(value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise PlanError(path, wording.expected(expected="an object", found=type_name(value)))
        kind = value.get(tag)
        if not isinstance(kind, str) or kind not in variants:
            choices = ", ".join(json.dumps(k) for k in variants)
            raise PlanError(f"{path}.{tag}", wording.expected_one_of(choices=choices, found=json.dumps(kind)))
        variants[kind](value, path)

    return check


def _either(members: list[tuple[bool, Check]]) -> Check:
    """(whether the member is an object, its check): the member of the value's kind decides."""

    def check(value: Any, path: str) -> None:
        for is_object, each in members:
            if is_object == isinstance(value, dict):
                each(value, path)
                return
        members[0][1](value, path)  # no member of its kind: the first says what was expected

    return check


def _sorted_unique(key: str) -> Check:
    def check(value: Any, path: str) -> None:
        names = [entry[key] for entry in value]
        if names != sorted(names) or len(set(names)) != len(names):
            raise PlanError(path, wording.unsorted(key=key))

    return check


def _all(*checks: Check) -> Check:
    def check(value: Any, path: str) -> None:
        for each in checks:
            each(value, path)

    return check


class _Decoder:
    """The strict decoder of one description (akm_run.planshape): a check per node, a record's
    check built once and shared by every place that refers to it (a child plan is a plan)."""

    def __init__(self, description: planshape.Description) -> None:
        self.records = description.records
        self.checks: dict[str, Check] = {}
        self.root = self.record(description.root)

    def record(self, name: str) -> Check:
        if name not in self.checks:
            self.checks[name] = lambda value, path: built(value, path)  # refers back while it is built
            found = self.records[name]
            built = _record(
                {key: self.node(node) for key, node in found.required.items()},
                {key: self.node(node) for key, node in found.optional.items()},
                found.values,
            )
            self.checks[name] = built
        return self.checks[name]

    def node(self, node: planshape.Node) -> Check:
        build: Callable[[Any], Check] = getattr(self, type(node).__name__.lower())
        return build(node)

    def ref(self, node: planshape.Ref) -> Check:
        return self.record(node.name)

    def string(self, node: planshape.String) -> Check:
        return _string(node.pattern)

    def integer(self, node: planshape.Integer) -> Check:
        return _integer(node.low, node.high)

    def const(self, node: planshape.Const) -> Check:
        return _const(node.value)

    def oneof(self, node: planshape.OneOf) -> Check:
        return _one_of(*node.values)

    def array(self, node: planshape.Array) -> Check:
        items = _list(self.node(node.item), low=node.low, high=node.high)
        return items if node.sorted_by is None else _all(items, _sorted_unique(node.sorted_by))

    def mapping(self, node: planshape.Mapping) -> Check:
        return _mapping(node.key, self.node(node.item), high=node.high)

    def tagged(self, node: planshape.Tagged) -> Check:
        return _tagged(node.tag, {kind: self.record(ref.name) for kind, ref in node.variants.items()})

    def either(self, node: planshape.Either) -> Check:
        return _either([(type(member).__name__ == "Ref", self.node(member)) for member in node.members])

    def jsonvalue(self, node: planshape.JsonValue) -> Check:
        return json_value

    def jsonschema(self, node: planshape.JsonSchema) -> Check:
        return check_schema


@functools.cache
def _decode_plan() -> Check:
    """The structural check of a plan object, built from the definition on first use."""
    # Imported here: `akmc check` imports this module but decodes no plan, and planshape's dozen
    # NamedTuple classes (built with `exec`) cost about 2 ms of that start-up.
    from akm_run import planshape

    return _Decoder(planshape.plan()).root


# -- semantic integrity ------------------------------------------------------------------------


def _semantics(plan: dict[str, Any], path: str) -> None:
    features.check_declared(plan, path)
    params = plan.get("params", {})
    exclusive = plan["limits"].get("exclusive")
    if isinstance(exclusive, dict) and exclusive["param"] not in params:
        reference = json.dumps(f"params.{exclusive['param']}")
        raise PlanError(f"{path}.limits.exclusive.param", wording.undeclared_param(reference=reference))
    for name, param in params.items():
        if "default" in param:
            default_fits(param["default"], param["schema"], f"{path}.params.{name}.default")
    index_of: dict[str, int] = {}  # a member's is its block's: it reads what is before the block
    placed = _placed(plan, path)
    for where, step, i in placed:
        if "index" in step and step["index"] != i:
            raise PlanError(f"{where}.index", wording.misplaced_step(index=step["index"], position=i))
        if step["stepId"] in index_of:
            raise PlanError(f"{where}.stepId", wording.duplicate_step(step=json.dumps(step["stepId"])))
        index_of[step["stepId"]] = i
    members = {step["stepId"] for where, step, _ in placed if "index" not in step}

    def reads(reference: str, where: str, before: int) -> None:
        match = REFERENCE.fullmatch(reference)
        assert match is not None  # the structural pass checked the pattern
        if match.group("param") is not None and match.group("param") not in params:
            raise PlanError(where, wording.undeclared_param(reference=json.dumps(reference)))
        step = match.group("step")
        if step is not None and index_of.get(step, before) >= before:
            raise PlanError(where, wording.not_earlier(reference=json.dumps(reference)))

    for where, step, i in placed:
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
                if index_of.get(target, -1) <= i or target in members:
                    raise PlanError(at, wording.route_not_later(target=json.dumps(target)))
        target = step.get("target")
        if "isolation" in step and (target is None or target["kind"] not in ISOLATED_TARGETS):
            raise PlanError(f"{where}.isolation", wording.isolation_without_process())
        if target is not None and target["kind"] == "child-workflow":
            _child_bindings(target, f"{where}.target", i, reads, step["kind"] == "map")
    for name, output in plan.get("outputs", {}).items():
        reads(output["from"], f"{path}.outputs.{name}.from", len(plan["steps"]))


def _placed(plan: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any], int]]:
    """(JSON path, step, spine index) of every step: a `parallel` block, then its members."""
    placed = []
    for i, step in enumerate(plan["steps"]):
        placed.append((f"{path}.steps[{i}]", step, i))
        placed += [(f"{path}.steps[{i}].members[{j}]", m, i) for j, m in enumerate(step.get("members", []))]
    return placed


def _child_bindings(
    target: dict[str, Any], path: str, index: int, reads: Callable[[str, str, int], None], mapped: bool
) -> None:
    child_params = target["plan"].get("params", {})
    bound = set()
    for j, binding in enumerate(target.get("bindings", [])):
        if binding["name"] not in child_params:
            raise PlanError(f"{path}.bindings[{j}].name", wording.child_has_no_param(name=json.dumps(binding["name"])))
        if binding["kind"] == "reference":
            reads(binding["from"], f"{path}.bindings[{j}].from", index)
        if binding["kind"] == "item" and not mapped:
            raise PlanError(f"{path}.bindings[{j}].from", wording.item_outside_map())
        bound.add(binding["name"])
    for name, param in child_params.items():
        if "default" not in param and name not in bound:
            raise PlanError(f"{path}.bindings", wording.child_param_unbound(name=json.dumps(name)))


def _hashes(plan: dict[str, Any], path: str, depth: int, embedded: list[int]) -> None:
    """Each embedded child's planHash matches its plan; depth and total embedded bytes stay in bounds."""
    for at, step, _ in _placed(plan, path):
        target = step.get("target")
        if target is None or target["kind"] != "child-workflow":
            continue
        where = f"{at}.target"
        if depth + 1 > MAX_DEPTH:
            raise PlanError(where, wording.composition_too_deep(limit=MAX_DEPTH))
        data = canonical_bytes(target["plan"])
        embedded[0] += len(data)
        if embedded[0] > MAX_EMBEDDED_BYTES:
            raise PlanError(where, wording.embedded_too_large(limit=MAX_EMBEDDED_BYTES))
        if sha256_of(data) != target["planHash"]:
            raise PlanError(f"{where}.planHash", wording.embedded_hash_mismatch())
        _semantics(target["plan"], f"{where}.plan")
        _hashes(target["plan"], f"{where}.plan", depth + 1, embedded)


def verify_plan(plan: Any, path: str = "plan") -> dict[str, Any]:
    """Decode a plan object strictly and check its integrity; raises PlanError."""
    _decode_plan()(plan, path)
    if len(canonical_bytes(plan)) > MAX_PLAN_BYTES:
        raise PlanError(path, wording.plan_too_large(limit=MAX_PLAN_BYTES))
    _semantics(plan, path)
    _hashes(plan, path, 0, [0])
    verified: dict[str, Any] = plan
    return verified


def verify_file(data: bytes, expect_hash: str | None = None) -> dict[str, Any]:
    """Verify a plan file's bytes; returns the plan object or raises PlanError."""
    if len(data) > MAX_FILE_BYTES:
        raise PlanError("file", wording.larger_than(limit=MAX_FILE_BYTES))
    document = loads_strict(data)
    if not isinstance(document, dict):
        raise PlanError("file", wording.expected(expected="an object", found=type_name(document)))
    for key in document:
        if key not in ("format", "planHash", "plan"):
            raise PlanError(key, wording.unknown_envelope_key(key=json.dumps(key)))
    for key in ("format", "planHash", "plan"):
        if key not in document:
            raise PlanError("file", wording.missing_envelope_key(key=json.dumps(key)))
    _const(FORMAT)(document["format"], "format")
    _string(SHA256)(document["planHash"], "planHash")
    plan = verify_plan(document["plan"])
    actual = plan_hash(plan)
    if document["planHash"] != actual:
        raise PlanError("planHash", wording.hash_mismatch(actual=actual))
    if expect_hash is not None and expect_hash != actual:
        raise PlanError("planHash", wording.unexpected_hash(actual=actual, expected=expect_hash))
    return plan


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """A plan file's bytes, read once (everything that verifies or signs them uses this copy);
    at most one byte past the size limit, so verify_file refuses a huge file. Raises PlanError."""
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise PlanError("file", wording.unreadable(path=os.fspath(path), why=error.strerror or error)) from None


def read_file(path: str | os.PathLike[str], expect_hash: str | None = None) -> tuple[dict[str, Any] | None, str]:
    """Read and verify a plan file: (plan, "") when it verifies, else (None, why it is refused)."""
    try:
        return verify_file(read_bytes(path), expect_hash), ""
    except PlanError as error:
        return None, str(error)
