"""akmc/validation.py: the native literal validator decides exactly as JSON Schema does on lowered types."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import example, given, settings
from hypothesis import strategies as st

from akmc import types as t
from akmc.validation import validation_errors
from profiles import examples

NAMES = st.sampled_from(["a", "b", "c", "dry_run"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-5, 5, allow_nan=False),
    st.sampled_from([1.0, 2.0]),
    st.text(alphabet="ab1 ", max_size=4),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=3)),
    max_leaves=8,
)


def _prim() -> st.SearchStrategy[t.Type]:
    bounds = st.integers(0, 3)
    return st.one_of(
        st.builds(
            lambda r: t.Prim("string", tuple(r)),
            st.lists(
                st.one_of(
                    st.tuples(st.just("pattern"), st.sampled_from(["^a", "b$", "[0-9]"])),
                    st.tuples(st.just("min_length"), bounds),
                    st.tuples(st.just("max_length"), bounds),
                ),
                max_size=2,
                unique_by=lambda x: x[0],
            ),
        ),
        st.builds(
            lambda name, r: t.Prim(name, tuple(r)),
            st.sampled_from(["int", "number"]),
            st.lists(
                st.tuples(st.sampled_from(["min", "max"]), st.integers(-3, 3)), max_size=2, unique_by=lambda x: x[0]
            ),
        ),
        st.sampled_from([t.Prim("bool"), t.Prim("null"), t.ANY]),
        st.builds(t.Lit, SCALARS),
    )


TYPES = st.recursive(
    _prim(),
    lambda inner: st.one_of(
        st.builds(
            lambda i, r: t.ListT(i, tuple(r)),
            inner,
            st.lists(
                st.tuples(st.sampled_from(["min_items", "max_items"]), st.integers(0, 3)),
                max_size=2,
                unique_by=lambda x: x[0],
            ),
        ),
        st.builds(t.MapT, inner),
        st.builds(
            lambda fields: t.ObjT(tuple(t.Field(n, ty, req) for n, (ty, req) in fields.items())),
            st.dictionaries(NAMES, st.tuples(inner, st.booleans()), max_size=3),
        ),
        st.builds(lambda members: t.UnionT(tuple(members)), st.lists(inner, min_size=2, max_size=3)),
    ),
    max_leaves=6,
)


@settings(max_examples=examples(400), deadline=None)
@given(TYPES, VALUES)
def test_native_validation_agrees_with_json_schema(kind: t.Type, value: Any) -> None:
    expected = jsonschema.Draft202012Validator(t.schema(kind)).is_valid(value)
    problems = validation_errors(value, kind)
    assert (not problems) == expected, (t.schema(kind), value, problems)


def test_messages_speak_the_language() -> None:
    channel = t.UnionT((t.Lit("stable"), t.Lit("beta")))
    assert validation_errors("nightly", channel) == ['"nightly" is not one of "stable", "beta"']
    version = t.Prim("string", (("pattern", "^[0-9]+$"),))
    assert validation_errors("v1", version) == ['"v1" does not match the pattern "^[0-9]+$"']
    files = t.ListT(t.Prim("string"), (("min_items", 1),))
    assert (
        validation_errors([3], files) == ["the list has 1 items, fewer than 1", "at [0]: 3 is not of type string"][1:]
    )
    assert validation_errors({"a": 1}, t.obj(b=t.ANY)) == ["the required field `b` is missing"]


def _pairwise_fits(a: t.Type, b: t.Type) -> bool:
    """Assignability as it was defined before unions were indexed: member by member, pairwise."""
    if isinstance(a, t.AnyT) or isinstance(b, t.AnyT):
        return True
    if isinstance(a, t.UnionT):
        return all(_pairwise_fits(m, b) for m in a.members)
    if isinstance(b, t.UnionT):
        return any(_pairwise_fits(a, m) for m in b.members)
    if isinstance(a, t.Lit):
        if isinstance(b, t.Lit):
            return t.same(a.value, b.value)  # numbers by value (docs/types.md#numbers)
        return _pairwise_fits(t._base(a), b)
    if isinstance(a, t.Prim) and isinstance(b, t.Prim):
        return a.name == b.name or (a.name == "int" and b.name == "number")
    if isinstance(a, t.ListT) and isinstance(b, t.ListT):
        return _pairwise_fits(a.item, b.item)
    if isinstance(a, t.MapT) and isinstance(b, t.MapT):
        return _pairwise_fits(a.value, b.value)
    if isinstance(a, t.ObjT) and isinstance(b, t.ObjT):
        for wanted in b.fields:
            have = a.field(wanted.name)
            if have is None:
                if wanted.required:
                    return False
                continue
            if (wanted.required and not have.required) or not _pairwise_fits(have.type, wanted.type):
                return False
        return True
    return False


@settings(deadline=None)
@given(TYPES, TYPES)
@example(t.Lit(1), t.UnionT((t.Lit(True), t.Lit("x"))))
@example(t.UnionT((t.Lit(1.0), t.Lit(2))), t.UnionT((t.Lit(1), t.Lit(2))))
@example(t.obj(a=t.Prim("int")), t.UnionT((t.obj(a=t.Lit(1)), t.MapT(t.ANY))))
def test_indexed_assignability_decides_as_the_pairwise_one(a: t.Type, b: t.Type) -> None:
    """Unions are indexed once (`types.Members`); every decision is the one the pairwise definition makes,
    for unions of unions, duplicated members and `1`, `1.0` and `true` alike."""
    assert t.fits(a, b) == _pairwise_fits(a, b)
    assert t.fits(a, a)
    union = t.UnionT((a, b))
    assert t.fits(a, union) and t.fits(b, union) and t.fits(union, t.UnionT((b, union, a)))
