"""The type language: types from the AST (E306), JSON Schema lowering, assignability, path typing.

Values are validated against a type in `akmc.validation`."""

from __future__ import annotations

import json
import re
from typing import Any, Union

from akm_run.numbers import number
from akm_run.patterns import unsafe
from akmc import ast, messages
from akmc.diagnostics import Report, did_you_mean, position
from akmc.records import build, record

PRIMITIVES = {"string": "string", "int": "integer", "number": "number", "bool": "boolean", "null": "null"}
REFINEMENTS = {
    "string": {"pattern": "pattern", "min_length": "minLength", "max_length": "maxLength"},
    "int": {"min": "minimum", "max": "maximum"},
    "number": {"min": "minimum", "max": "maximum"},
    "list": {"min_items": "minItems", "max_items": "maxItems"},
}
TYPE_NAMES = [*PRIMITIVES, "any", "list", "map", "true", "false"]


@record(frozen=True)
class Prim:
    name: str  # string | int | number | bool | null
    refinements: tuple[tuple[str, Any], ...] = ()


@record(frozen=True)
class AnyT:
    pass


@record(frozen=True)
class ListT:
    item: Type
    refinements: tuple[tuple[str, Any], ...] = ()


@record(frozen=True)
class MapT:
    value: Type


@record(frozen=True)
class Field:
    name: str
    type: Type
    required: bool


@record(frozen=True)
class ObjT:
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)


@record(frozen=True)
class Lit:
    value: str | int | float | bool | None


@record(frozen=True)
class UnionT:
    members: tuple[Type, ...]


build()


Type = Union[Prim, AnyT, ListT, MapT, ObjT, Lit, UnionT]
ANY = AnyT()
STRING = Prim("string")


def obj(**fields: Type) -> ObjT:
    return ObjT(tuple(Field(k, v, True) for k, v in fields.items()))


APPROVAL_OUTPUT = ObjT((Field("approved", Prim("bool"), True), Field("by", STRING, True), Field("note", STRING, False)))
RUN_RESULT = obj(runId=STRING, status=STRING)


# -- from the AST ---------------------------------------------------------------------


def from_ast(node: ast.TypeExpr, report: Report) -> Type:
    """The type a type expression denotes; problems are E306 (or E201 for duplicate fields)."""
    if isinstance(node, ast.UnionType):
        return UnionT(tuple(from_ast(m, report) for m in node.members))
    if isinstance(node, ast.LiteralType):
        return Lit(node.literal.value)
    if isinstance(node, ast.ObjectType):
        fields: dict[str, Field] = {}
        for decl in node.fields:
            if decl.name.text in fields:
                message = messages.duplicate_name(what="field", name=decl.name.text, first="an earlier field")
                report.add(message, decl.name.span)
                continue
            fields[decl.name.text] = Field(decl.name.text, from_ast(decl.type, report), not decl.optional)
        return ObjT(tuple(fields.values()))
    return _named(node, report)


def _named(node: ast.NamedType, report: Report) -> Type:
    name = node.name.text
    if name in ("true", "false"):
        return Lit(name == "true")
    if name not in PRIMITIVES and name not in ("any", "list", "map"):
        report.add(messages.unknown_type(name=name), node.name.span, help=did_you_mean(name, TYPE_NAMES))
        return ANY
    if name in ("list", "map") and node.arg is None:
        report.add(messages.needs_element_type(name=name), node.span)
        return ANY
    if name not in ("list", "map") and node.arg is not None:
        report.add(messages.no_element_type(name=name), node.arg.span)
    refinements = _refinements(name, node, report)
    if name == "any":
        return ANY
    if name == "list":
        assert node.arg is not None
        return ListT(from_ast(node.arg, report), refinements)
    if name == "map":
        assert node.arg is not None
        return MapT(from_ast(node.arg, report))
    return Prim(name, refinements)


def _refinements(name: str, node: ast.NamedType, report: Report) -> tuple[tuple[str, Any], ...]:
    allowed = REFINEMENTS.get(name, {})
    seen: dict[str, Any] = {}
    for refinement in node.refinements:
        key = refinement.name.text
        if key not in allowed:
            takes = ", ".join(f"`{k}`" for k in allowed) or "no refinements"
            message = messages.foreign_refinement(name=name, key=key, takes=takes)
            report.add(message, refinement.name.span, help=did_you_mean(key, set(allowed)))
            continue
        if key in seen:
            message = messages.duplicate_name(what="refinement", name=key, first="an earlier one")
            report.add(message, refinement.name.span)
            continue
        value = refinement.value
        literal = value.value if isinstance(value, ast.Literal) else None
        if key == "pattern":
            if not isinstance(literal, str):
                report.add(messages.pattern_not_string(), value.span)
                continue
            try:
                re.compile(literal)
            except (re.error, RecursionError, OverflowError) as error:
                report.add(messages.invalid_pattern(error=str(error)), value.span)
                continue
            why = unsafe(literal)
            if why is not None:
                report.add(messages.slow_pattern(why=why), value.span)
                continue
        elif key in ("min", "max"):
            wrong = isinstance(literal, bool) or not isinstance(literal, int | float)
            if wrong or (name == "int" and isinstance(literal, float)):
                kind = "an integer" if name == "int" else "a number"
                report.add(messages.refinement_kind(key=key, name=name, kind=kind), value.span)
                continue
        elif isinstance(literal, bool) or not isinstance(literal, int) or literal < 0:
            report.add(messages.refinement_not_count(key=key), value.span)
            continue
        seen[key] = literal
    low, high = ("min", "max") if name in ("int", "number") else ("min_length", "max_length")
    if name == "list":
        low, high = "min_items", "max_items"
    if low in seen and high in seen and seen[low] > seen[high]:
        message = messages.refinement_bounds(low=low, low_value=seen[low], high=high, high_value=seen[high])
        report.add(message, node.span)
    return tuple(seen.items())


# -- JSON Schema -------------------------------------------------------------------------------


def schema(t: Type) -> dict[str, Any]:
    """Lower a type to JSON Schema (table in the language reference)."""
    if isinstance(t, AnyT):
        return {}
    if isinstance(t, Prim):
        out: dict[str, Any] = {"type": PRIMITIVES[t.name]}
        out.update((REFINEMENTS[t.name][k], v) for k, v in t.refinements)
        return out
    if isinstance(t, ListT):
        out = {"type": "array", "items": schema(t.item)}
        out.update((REFINEMENTS["list"][k], v) for k, v in t.refinements)
        return out
    if isinstance(t, MapT):
        return {"type": "object", "additionalProperties": schema(t.value)}
    if isinstance(t, ObjT):
        out = {"type": "object", "properties": {f.name: schema(f.type) for f in t.fields}}
        required = [f.name for f in t.fields if f.required]
        if required:
            out["required"] = required
        return out
    if isinstance(t, Lit):
        return {"const": t.value}
    if all(isinstance(m, Lit) and isinstance(m.value, str) for m in t.members):
        return {"enum": [m.value for m in t.members if isinstance(m, Lit)]}
    return {"anyOf": [schema(m) for m in t.members]}


def same(a: Any, b: Any) -> bool:
    """JSON equality, numbers by value (akm_run.numbers): 1 == 1.0 and -0.0 == 0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def literal_key(value: Any) -> tuple[str, Any]:
    """A literal's value as a key that two literals share exactly when `same` says they are equal:
    `1`, `1.0` and `-0.0`/`0` are one number; `true` is a bool, never the number 1."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", number(value) if isinstance(value, float) else value)
    return (type(value).__name__, value)


# -- assignability and paths ----------------------------------------------------------------------


def _base(t: Lit) -> Prim:
    value = t.value
    if value is None:
        return Prim("null")
    if isinstance(value, bool):
        return Prim("bool")
    if isinstance(value, int) or (isinstance(value, float) and isinstance(number(value), int)):
        return Prim("int")  # 2.0 is the integer 2
    if isinstance(value, float):
        return Prim("number")
    return STRING


def fits(a: Type, b: Type) -> bool:
    """Whether every value of `a` may stand where `b` is expected (structural, gradual)."""
    if isinstance(a, AnyT) or isinstance(b, AnyT):
        return True
    if isinstance(b, UnionT):
        return Members(b).admit(a)
    if isinstance(a, UnionT):
        return all(fits(m, b) for m in a.members)
    if isinstance(a, Lit):
        if isinstance(b, Lit):
            return same(a.value, b.value)
        return fits(_base(a), b)
    if isinstance(a, Prim) and isinstance(b, Prim):
        return a.name == b.name or (a.name == "int" and b.name == "number")
    if isinstance(a, ListT) and isinstance(b, ListT):
        return fits(a.item, b.item)
    if isinstance(a, MapT) and isinstance(b, MapT):
        return fits(a.value, b.value)
    if isinstance(a, ObjT) and isinstance(b, ObjT):
        have_fields: dict[str, Field] = {}
        for f in a.fields:
            have_fields.setdefault(f.name, f)  # the first of a name, as `ObjT.field` finds it
        for wanted in b.fields:
            have = have_fields.get(wanted.name)
            if have is None:
                if wanted.required:
                    return False
                continue
            if (wanted.required and not have.required) or not fits(have.type, wanted.type):
                return False
        return True
    return False


def _flat(t: Type) -> list[Type]:
    """The members of a union, unions within it flattened (a type that is no union stands alone)."""
    out: list[Type] = []
    stack = [t]
    while stack:
        top = stack.pop()
        if isinstance(top, UnionT):
            stack.extend(reversed(top.members))
        else:
            out.append(top)
    return out


def _key(t: Type) -> tuple[Any, ...]:
    """A type's shape, without what `fits` ignores (refinements): two types of one key fit each other."""
    if isinstance(t, Lit):
        return ("lit", *literal_key(t.value))
    if isinstance(t, Prim):
        return ("prim", t.name)
    if isinstance(t, ListT):
        return ("list", _key(t.item))
    if isinstance(t, MapT):
        return ("map", _key(t.value))
    if isinstance(t, ObjT):
        return ("obj", tuple((f.name, f.required, _key(f.type)) for f in t.fields))
    if isinstance(t, UnionT):
        return ("union", tuple(_key(m) for m in t.members))
    return ("any",)


class Members:
    """The members of a union indexed once, so that `admit` answers `fits(a, union)` without
    comparing `a` with every member: a union of N members checked against one of N was N² checks."""

    __slots__ = ("any", "keys", "prims", "shaped")

    def __init__(self, union: Type) -> None:
        members = _flat(union)
        self.any = any(isinstance(m, AnyT) for m in members)
        self.keys = {_key(m) for m in members}
        self.prims = {m.name for m in members if isinstance(m, Prim)}
        self.shaped: dict[type, list[Type]] = {}  # the list, map and object members, by class
        for m in members:
            if isinstance(m, ListT | MapT | ObjT):
                self.shaped.setdefault(type(m), []).append(m)

    def admit(self, a: Type) -> bool:
        """`fits(a, union)`: every member of `a` fits some member of the union."""
        return self.any or all(self._one(m) for m in _flat(a))

    def _one(self, a: Type) -> bool:
        if isinstance(a, AnyT):
            return True
        if isinstance(a, Lit | Prim):
            if isinstance(a, Lit) and _key(a) in self.keys:
                return True
            name = _base(a).name if isinstance(a, Lit) else a.name
            return name in self.prims or (name == "int" and "number" in self.prims)
        if _key(a) in self.keys:
            return True
        return any(fits(a, m) for m in self.shaped.get(type(a), ()))


def is_scalar(t: Type) -> bool:
    """Whether every value of the type is a string, a number, a bool or null (no list, map or object)."""
    return all(isinstance(member, Prim | Lit) for member in _flat(t))


def literals(t: Type) -> list[Lit] | None:
    """The finite set of literal values a type can take, or None when it is open."""
    if isinstance(t, Lit):
        return [t]
    if isinstance(t, Prim) and t.name == "bool":
        return [Lit(True), Lit(False)]
    if isinstance(t, Prim) and t.name == "null":
        return [Lit(None)]
    if isinstance(t, UnionT):
        out: list[Lit] = []
        seen: set[tuple[Any, ...]] = set()  # by `literal_key`: `1` and `1.0` are one value, `true` another
        for member in t.members:
            more = literals(member)
            if more is None:
                return None
            for m in more:
                if _key(m) not in seen:
                    seen.add(_key(m))
                    out.append(m)
        return out
    return None


def describe(t: Type) -> str:
    """A type as the user would write it."""
    if isinstance(t, AnyT):
        return "any"
    if isinstance(t, Prim):
        return t.name
    if isinstance(t, ListT):
        return f"list[{describe(t.item)}]"
    if isinstance(t, MapT):
        return f"map[{describe(t.value)}]"
    if isinstance(t, ObjT):
        inner = ", ".join(f"{f.name}{'' if f.required else '?'}: {describe(f.type)}" for f in t.fields)
        return "{ " + inner + " }" if inner else "{}"
    if isinstance(t, Lit):
        return json.dumps(t.value)
    return " | ".join(describe(m) for m in t.members)


def step_into(t: Type, segment: ast.Segment, ref: str, report: Report) -> Type | None:
    """The type at `segment` below `t`, or None after reporting E301/E302."""
    if isinstance(t, AnyT):
        return ANY
    if isinstance(t, UnionT):
        # A path into a union is typed by the members that have it (null members are skipped:
        # reading through an optional value fails at run time, not at compile time).
        quiet = Report(report.file)
        found = [r for m in t.members if not _is_null(m) and (r := step_into(m, segment, ref, quiet)) is not None]
        if found:
            return found[0] if len(found) == 1 else UnionT(tuple(found))
    if segment.field is not None:
        if isinstance(t, ObjT):
            field = t.field(segment.field)
            if field is None:
                names = ", ".join(f"`{f.name}`" for f in t.fields) or "none"
                report.add(
                    messages.no_field(field=segment.field, type=describe(t), ref=ref),
                    segment.span,
                    help=(did_you_mean(segment.field, [f.name for f in t.fields]) or f"fields that exist: {names}"),
                )
                return None
            return field.type
        if isinstance(t, MapT):
            return t.value
        report.add(messages.field_of_scalar(field=segment.field, type=describe(t)), segment.span)
        return None
    if isinstance(t, ListT):
        return t.item
    report.add(messages.index_of_non_list(index=segment.index, type=describe(t)), segment.span)
    return None


def _is_null(t: Type) -> bool:
    return (isinstance(t, Prim) and t.name == "null") or (isinstance(t, Lit) and t.value is None)


NULL = Lit(None)  # fits both `null` spellings: the type name and the literal


def or_null(t: Type) -> Type:
    """`t | null` (t itself when it already admits null)."""
    if isinstance(t, AnyT) or fits(NULL, t):
        return t
    members = t.members if isinstance(t, UnionT) else (t,)
    return UnionT((*members, NULL))


def element(t: Type) -> Type:
    """The element type of a list type (`is_list(t)` holds)."""
    if isinstance(t, ListT):
        return t.item
    if isinstance(t, UnionT):
        items = tuple(element(m) for m in t.members)
        return items[0] if len(set(items)) == 1 else UnionT(items)
    return ANY


def is_list(t: Type) -> bool:
    if isinstance(t, AnyT | ListT):
        return True
    if isinstance(t, UnionT):
        return all(is_list(m) for m in t.members)
    return False


def value_of(node: ast.Value) -> Any:
    """The JSON value of a literal, list or object value."""
    if isinstance(node, ast.Literal):
        return node.value
    if isinstance(node, ast.ListValue):
        return [value_of(v) for v in node.items]
    if isinstance(node, ast.ObjectValue):
        return {k.text: value_of(v) for k, v in node.entries}
    if isinstance(node, ast.Duration):
        return node.ms
    return node.text


def reported(node: ast.Value | ast.Reference) -> bool:
    """Whether a value holds a literal the parser already reported (E102), which no later check judges."""
    if isinstance(node, ast.Literal):
        return node.invalid
    if isinstance(node, ast.ListValue):
        return any(reported(v) for v in node.items)
    if isinstance(node, ast.ObjectValue):
        return any(reported(v) for _, v in node.entries)
    if isinstance(node, ast.Duration):
        return node.ms < 0
    return False


def where(span: ast.Span) -> str:
    return position(span)
