"""akm_run.strictjson: the one strict reader of what enters a run (plan files, params, unit output)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run.planformat import MAX_INT
from akm_run.strictjson import MAX_VALUE_DEPTH, NotStrict, depth, dumps, loads
from profiles import examples

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_INT, MAX_INT)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(VALUES)
def test_strict_values_round_trip(value: Any) -> None:
    assert loads(json.dumps(value)) == value
    assert loads(dumps(value)) == value


@settings(max_examples=examples(300))
@given(st.text(alphabet='[]{}",:0123456789.eE-+ aNInfinty\\', max_size=80))
def test_any_text_is_a_value_or_a_value_error(text: str) -> None:
    try:
        value = loads(text)
    except ValueError:  # JSONDecodeError (not JSON) or NotStrict (JSON, but not strict)
        return
    dumps(value)  # standard JSON, so it can be stored and printed
    assert _depth(value) <= MAX_VALUE_DEPTH


@given(st.integers(min_value=1, max_value=500))
def test_depth_ignores_brackets_inside_strings(n: int) -> None:
    text = json.dumps(["[" * n + "{" * n])
    assert loads(text) == ["[" * n + "{" * n]
    if 2 * n + 1 > MAX_VALUE_DEPTH:  # past the bracket count, the scanner measures the real depth
        assert depth(text) == 1


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("NaN", "NaN is not JSON"),
        ("[Infinity]", "Infinity is not JSON"),
        ('{"a": 1, "a": 1}', 'duplicate key "a"'),
        (str(MAX_INT + 1), "is outside ±(2^53 − 1)"),
        (str(-MAX_INT - 1), "is outside ±(2^53 − 1)"),
        ("1" * 5000, "(5000 digits)"),
        ("1e400", "too large to represent"),
        ("[" * (MAX_VALUE_DEPTH + 1) + "]" * (MAX_VALUE_DEPTH + 1), "nesting deeper than 64 levels"),
        ("[" * 200_000 + "]" * 200_000, "nesting deeper than 64 levels"),
    ],
)
def test_json_that_is_not_strict_says_why(text: str, why: str) -> None:
    with pytest.raises(NotStrict) as refused:
        loads(text)
    assert why in str(refused.value)


def test_the_limits_themselves_are_accepted() -> None:
    nested = "[" * MAX_VALUE_DEPTH + "]" * MAX_VALUE_DEPTH
    assert _depth(loads(nested)) == MAX_VALUE_DEPTH
    assert loads(str(MAX_INT)) == MAX_INT and loads(str(-MAX_INT)) == -MAX_INT


def test_dumps_refuses_what_is_not_standard_json() -> None:
    with pytest.raises(ValueError):
        dumps(float("nan"))


@pytest.mark.parametrize(
    "text", ['"\\ud800"', '["a", {"b": "x\\udfffy"}]', '{"\\udc00": 1}', '"\\ude00\\ud83d"', '"\ud800"']
)
def test_a_lone_surrogate_is_not_strict(text: str) -> None:
    with pytest.raises(NotStrict, match="surrogate"):
        loads(text)


def test_a_surrogate_pair_is_its_character() -> None:
    assert loads('{"k\\ud83d\\ude00": "\\uD83D\\uDE00"}') == {"k\U0001f600": "\U0001f600"}


@settings(max_examples=examples(200))
@given(
    st.recursive(
        st.text(st.characters(codec=None), max_size=6),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(st.characters(codec=None), max_size=3), inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_what_loads_returns_is_always_utf8_text(value: Any) -> None:
    try:
        parsed = loads(json.dumps(value))
    except NotStrict:
        return
    dumps(parsed).encode("utf-8")  # every store, file and terminal can hold it
