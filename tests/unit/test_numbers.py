"""akm_run.numbers: the numeric rule every value of a run follows (docs/types.md#numbers)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run import strictjson
from akm_run.digest import canonical_bytes
from akm_run.numbers import normal, number
from akm_run.planformat import MAX_INT
from akmc.types import same
from profiles import examples

NUMBERS = st.one_of(
    st.integers(-MAX_INT, MAX_INT),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**53, -(2.0**53), float(MAX_INT), 1e300]),
)
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.text(max_size=3), NUMBERS),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=2), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=examples(300))
@given(VALUES)
def test_parsing_gives_the_normal_form_and_it_is_the_same_value(value: Any) -> None:
    parsed = strictjson.loads(json.dumps(value))
    assert canonical_bytes(parsed) == canonical_bytes(normal(value))
    assert same(parsed, value)  # the checker's equality: nothing changed but how it is written
    assert canonical_bytes(normal(parsed)) == canonical_bytes(parsed)


def test_integral_numbers_within_the_exact_range_are_integers() -> None:
    assert [number(1.0), number(-0.0), number(float(MAX_INT))] == [1, 0, MAX_INT]
    assert all(type(n) is int for n in (number(1.0), number(-0.0)))
    assert type(number(2.0**53)) is float and type(number(1e300)) is float and number(2.5) == 2.5
    assert normal({"a": [1.0, {"b": -0.0}], "c": True}) == {"a": [1, {"b": 0}], "c": True}
    assert normal(True) is True and type(normal([True])[0]) is bool


def test_normalising_any_depth_never_recurses() -> None:
    deep: Any = 1.0
    for _ in range(100_000):
        deep = [deep]
    out = normal(deep)
    for _ in range(100_000):
        out = out[0]
    assert out == 1 and type(out) is int


def test_a_plan_file_keeps_its_numbers_as_written() -> None:
    assert type(strictjson.loads("[1.0]", as_values=False)[0]) is float
