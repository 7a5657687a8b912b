"""What a parent's check reads of a child (`compose.Child`), as JSON the result cache keeps.

A parent compiled against a child's stored interface gets the diagnostics and the plan it would
get from compiling the child: the interface holds the child's params and outputs with their types,
whether it has errors (and its first), its plan's hash, composition chain and embedded size; the
plan itself, the canonical bytes its hash is taken over, is kept beside it. Decoding refuses
anything that is not exactly what `encode` writes, or a plan its hash does not name, so a caller
falls back to compiling the child."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from akm_run.digest import tagged_sha256
from akmc import types as t
from akmc.compose import Child
from akmc.diagnostics import Diagnostic

# What decoding something that is not an interface raises; a caller compiles the child instead.
MALFORMED = (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError)

_Refinements = tuple[tuple[str, Any], ...]
_SCALARS = (str, int, float, bool, type(None))


def encode(child: Child, diagnostic: Callable[[Diagnostic], Any]) -> dict[str, Any]:
    """The interface of a compiled child; its plan (`child.canonical`) is kept beside it."""
    return {
        "ok": child.ok,
        "params": [[name, encode_type(type_), required] for name, (type_, required) in child.params.items()],
        "outputs": [[name, encode_type(type_)] for name, type_ in child.outputs.items()],
        "planHash": child.plan_hash or None,  # set only with a plan
        "embedded": child.embedded,
        "chain": list(child.chain),
        "firstError": diagnostic(child.first_error) if child.first_error is not None else None,
    }


def decode(
    data: dict[str, Any],
    ref: str,
    file: str,
    diagnostic: Callable[[Any], Diagnostic],
    deps: dict[str, str | None],
    plan: bytes,
) -> Child:
    """The child an interface describes, named `ref` and shown as `file`, with `plan` (the bytes
    kept beside it) when it has one. One of MALFORMED when it is not an interface `encode` wrote,
    or `plan` is not the plan its hash names."""
    ok = data["ok"]
    if type(ok) is not bool:
        raise ValueError("ok")
    first = data["firstError"]
    child = Child(ref, file, ok, first_error=diagnostic(first) if first is not None else None, deps=dict(deps))
    for name, type_, required in data["params"]:
        if type(name) is not str or type(required) is not bool:
            raise ValueError("param")
        child.params[name] = (decode_type(type_), required)
    for name, type_ in data["outputs"]:
        if type(name) is not str:
            raise ValueError("output")
        child.outputs[name] = decode_type(type_)
    digest = data["planHash"]
    if digest is None:
        return child
    plan_bytes = bytes(plan)
    if type(digest) is not str or tagged_sha256(plan_bytes) != digest:
        raise ValueError("the plan is not the one its hash names")
    loaded = json.loads(plan_bytes)
    if not isinstance(loaded, dict):
        raise ValueError("plan")
    child.plan, child.plan_hash, child.size, child.canonical = loaded, digest, len(plan_bytes), plan_bytes
    embedded, chain = data["embedded"], data["chain"]
    if type(embedded) is not int or not all(type(r) is str for r in chain):
        raise ValueError("bounds")
    child.embedded, child.chain = embedded, tuple(chain)
    child.reads = {e["path"]: e.get("sha256") for e in loaded["sourceReadSet"]}
    return child


def encode_type(type_: t.Type) -> list[Any]:
    """A type as a JSON list whose first item names its kind."""
    if isinstance(type_, t.Prim):
        return ["prim", type_.name, [list(r) for r in type_.refinements]]
    if isinstance(type_, t.AnyT):
        return ["any"]
    if isinstance(type_, t.ListT):
        return ["list", encode_type(type_.item), [list(r) for r in type_.refinements]]
    if isinstance(type_, t.MapT):
        return ["map", encode_type(type_.value)]
    if isinstance(type_, t.ObjT):
        return ["obj", [[f.name, encode_type(f.type), f.required] for f in type_.fields]]
    if isinstance(type_, t.Lit):
        return ["lit", type_.value]
    return ["union", [encode_type(m) for m in type_.members]]


def decode_type(data: Any) -> t.Type:
    """The type `encode_type` wrote; one of MALFORMED for anything else."""
    kind = data[0]
    if kind == "prim" and type(data[1]) is str:
        return t.Prim(data[1], _refinements(data[2]))
    if kind == "any" and len(data) == 1:
        return t.ANY
    if kind == "list":
        return t.ListT(decode_type(data[1]), _refinements(data[2]))
    if kind == "map":
        return t.MapT(decode_type(data[1]))
    if kind == "obj":
        fields = []
        for name, type_, required in data[1]:
            if type(name) is not str or type(required) is not bool:
                raise ValueError("field")
            fields.append(t.Field(name, decode_type(type_), required))
        return t.ObjT(tuple(fields))
    if kind == "lit" and isinstance(data[1], _SCALARS):
        return t.Lit(data[1])
    if kind == "union":
        return t.UnionT(tuple(decode_type(m) for m in data[1]))
    raise ValueError(f"not a type: {kind!r}")


def _refinements(data: Any) -> _Refinements:
    found = []
    for key, value in data:
        if type(key) is not str or not isinstance(value, _SCALARS):
            raise ValueError("refinement")
        found.append((key, value))
    return tuple(found)
