"""akmc/types.py: the native literal validator decides exactly as JSON Schema does on lowered types."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from akmc import types as t
from profiles import examples

NAMES = st.sampled_from(["a", "b", "c", "dry_run"])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5, allow_nan=False), st.sampled_from([1.0, 2.0]),
    st.text(alphabet="ab1 ", max_size=4),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(NAMES, inner, max_size=3)),
    max_leaves=8,
)


def _prim() -> st.SearchStrategy[t.Type]:
    bounds = st.integers(0, 3)
    return st.one_of(
        st.builds(lambda r: t.Prim("string", tuple(r)), st.lists(st.one_of(
            st.tuples(st.just("pattern"), st.sampled_from(["^a", "b$", "[0-9]"])),
            st.tuples(st.just("min_length"), bounds), st.tuples(st.just("max_length"), bounds)), max_size=2, unique_by=lambda x: x[0])),
        st.builds(lambda name, r: t.Prim(name, tuple(r)), st.sampled_from(["int", "number"]), st.lists(
            st.tuples(st.sampled_from(["min", "max"]), st.integers(-3, 3)), max_size=2, unique_by=lambda x: x[0])),
        st.sampled_from([t.Prim("bool"), t.Prim("null"), t.ANY]),
        st.builds(t.Lit, SCALARS),
    )  # fmt: skip


TYPES = st.recursive(
    _prim(),
    lambda inner: st.one_of(
        st.builds(lambda i, r: t.ListT(i, tuple(r)), inner, st.lists(
            st.tuples(st.sampled_from(["min_items", "max_items"]), st.integers(0, 3)), max_size=2, unique_by=lambda x: x[0])),
        st.builds(t.MapT, inner),
        st.builds(lambda fields: t.ObjT(tuple(t.Field(n, ty, req) for n, (ty, req) in fields.items())),
                  st.dictionaries(NAMES, st.tuples(inner, st.booleans()), max_size=3)),
        st.builds(lambda members: t.UnionT(tuple(members)), st.lists(inner, min_size=2, max_size=3)),
    ),
    max_leaves=6,
)  # fmt: skip


@settings(max_examples=examples(400), deadline=None)
@given(TYPES, VALUES)
def test_native_validation_agrees_with_json_schema(kind: t.Type, value: Any) -> None:
    expected = jsonschema.Draft202012Validator(t.schema(kind)).is_valid(value)
    problems = t.validation_errors(value, kind)
    assert (not problems) == expected, (t.schema(kind), value, problems)


def test_messages_speak_the_language() -> None:
    channel = t.UnionT((t.Lit("stable"), t.Lit("beta")))
    assert t.validation_errors("nightly", channel) == ['"nightly" is not one of "stable", "beta"']
    version = t.Prim("string", (("pattern", "^[0-9]+$"),))
    assert t.validation_errors("v1", version) == ['"v1" does not match the pattern "^[0-9]+$"']
    files = t.ListT(t.Prim("string"), (("min_items", 1),))
    assert (
        t.validation_errors([3], files) == ["the list has 1 items, fewer than 1", "at [0]: 3 is not of type string"][1:]
    )
    assert t.validation_errors({"a": 1}, t.obj(b=t.ANY)) == ["the required field `b` is missing"]
