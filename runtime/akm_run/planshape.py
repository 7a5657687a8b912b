"""The plan format's typed definition (akm_run.planformat) read as data: one description of every
record, key, bound and pattern, from which the strict decoder (akm_run.plan) and the published JSON
Schema (akmc.planschema) are both built, so neither can drift from the definition or each other."""

from __future__ import annotations

import functools
import re
import typing
from typing import Any, Literal, NamedTuple, NotRequired, Required, Union, get_args, get_origin, get_type_hints

from akm_run import planformat as pf
from akm_run import wording


class String(NamedTuple):
    pattern: re.Pattern[str] | None


class Integer(NamedTuple):
    low: int
    high: int


class Const(NamedTuple):
    value: Any


class OneOf(NamedTuple):
    values: tuple[str, ...]


class Array(NamedTuple):
    item: Node
    low: int
    high: int
    sorted_by: str | None


class Mapping(NamedTuple):
    """An object whose keys all match `key` and whose values are all `item`."""

    key: re.Pattern[str]
    item: Node
    high: int


class Tagged(NamedTuple):
    """One of several records, told apart by the constant value of their `tag` key."""

    tag: str
    variants: dict[str, Ref]


class Either(NamedTuple):
    """One of a few values of different JSON types (`true` or a record), told apart by their type."""

    members: tuple[Node, ...]


class Ref(NamedTuple):
    """One of the definition's records, by name (records refer to each other, a plan to itself)."""

    name: str


class JsonValue(NamedTuple):
    """Any JSON value."""


class JsonSchema(NamedTuple):
    """A JSON Schema (draft 2020-12)."""


Node = Union[String, Integer, Const, OneOf, Array, Mapping, Tagged, Either, Ref, JsonValue, JsonSchema]


class Record(NamedTuple):
    """A closed object: its required and optional keys, each with its value's description, in the
    definition's order. Optional keys are absent rather than empty, except the `values` keys,
    which carry user data (a param default may well be `[]`)."""

    name: str
    required: dict[str, Node]
    optional: dict[str, Node]
    values: frozenset[str]


class Description(NamedTuple):
    root: str
    records: dict[str, Record]


def describe(root: Any) -> Description:
    """The description of `root` (a typed dict of akm_run.planformat) and every record it reaches."""
    records: dict[str, Record] = {}
    _record(root, records)
    return Description(root.__name__, records)


def _record(shape: Any, records: dict[str, Record]) -> Ref:
    name = shape.__name__
    if name not in records:
        records[name] = Record(name, {}, {}, frozenset())  # a placeholder while its fields refer back
        required, optional = pf.keys(shape)
        hints = get_type_hints(shape, include_extras=True)
        fields = {key: _node(_unwrap(hint), records) for key, hint in hints.items()}
        records[name] = Record(
            name,
            {key: node for key, node in fields.items() if key in required},
            {key: node for key, node in fields.items() if key in optional},
            pf.VALUE_KEYS & optional,
        )
    return Ref(name)


def _unwrap(hint: Any) -> Any:
    return get_args(hint)[0] if get_origin(hint) in (NotRequired, Required) else hint


def _node(hint: Any, records: dict[str, Record]) -> Node:
    metadata: tuple[Any, ...] = ()
    if get_origin(hint) is typing.Annotated:
        hint, metadata = get_args(hint)[0], hint.__metadata__
    meta = {type(m): m for m in metadata}
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return JsonValue()
    if pf.IsSchema in meta:
        return JsonSchema()
    if hint is str:
        pattern = meta.get(pf.Pattern)
        return String(pattern.regex if pattern else None)
    if hint is int:
        bounds = meta[pf.Range]  # every integer in a plan is bounded
        return Integer(bounds.low, bounds.high)
    if origin is Literal:
        return Const(args[0]) if len(args) == 1 else OneOf(args)
    if origin is list:
        items = meta.get(pf.Items, pf.Items())
        order = meta.get(pf.SortedBy)
        return Array(_node(args[0], records), items.low, items.high, order.key if order else None)
    if origin is dict:
        key = _node(args[0], records)
        assert isinstance(key, String) and key.pattern is not None, "a mapping's keys have a pattern"
        return Mapping(key.pattern, _node(args[1], records), meta[pf.Entries].high)
    if origin is Union and not all(typing.is_typeddict(member) for member in args):
        return Either(tuple(_node(member, records) for member in args))
    if origin is Union:
        return _tagged(args, records)
    if typing.is_typeddict(hint):
        return _record(hint, records)
    raise TypeError(wording.unknown_plan_type(hint=hint))


def _tagged(members: tuple[Any, ...], records: dict[str, Record]) -> Tagged:
    """A union of typed dicts, told apart by the one key that is a constant in each (`kind`)."""
    hints = [get_type_hints(member, include_extras=True) for member in members]
    tags = [k for k in hints[0] if all(get_origin(h.get(k)) is Literal and len(get_args(h[k])) == 1 for h in hints)]
    assert len(tags) == 1, f"a union of records needs one constant key to tell them apart: {members!r}"
    tag = tags[0]
    return Tagged(tag, {get_args(h[tag])[0]: _record(m, records) for m, h in zip(members, hints, strict=True)})


@functools.cache
def plan() -> Description:
    """The description of a plan (built on first use: a command that never reads a plan never pays
    for reading the definition)."""
    return describe(pf.Plan)
