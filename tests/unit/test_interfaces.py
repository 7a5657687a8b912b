"""akmc.interfaces: a child's interface as the cache keeps it, decoded exactly or refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akmc import interfaces
from akmc import types as t
from akmc.compiler import Session
from akmc.diagnostics import Diagnostic
from akmc.spans import Span
from helpers import source
from profiles import examples

SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8)
REFINEMENTS = st.lists(st.tuples(st.sampled_from(["pattern", "min", "max_length"]), SCALARS), max_size=2).map(tuple)
TYPES: st.SearchStrategy[t.Type] = st.recursive(
    st.builds(t.Prim, st.sampled_from(["string", "int", "number", "bool", "null"]), REFINEMENTS)
    | st.just(t.ANY)
    | st.builds(t.Lit, SCALARS),
    lambda inner: (
        st.builds(t.ListT, inner, REFINEMENTS)
        | st.builds(t.MapT, inner)
        | st.builds(
            t.ObjT, st.lists(st.builds(t.Field, st.text(max_size=5), inner, st.booleans()), max_size=3).map(tuple)
        )
        | st.builds(t.UnionT, st.lists(inner, min_size=2, max_size=3).map(tuple))
    ),
    max_leaves=12,
)
JSON = st.recursive(
    SCALARS | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


def _through_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


@given(TYPES)
@settings(max_examples=examples(200))
def test_a_type_survives_the_round_trip(type_: t.Type) -> None:
    assert interfaces.decode_type(_through_json(interfaces.encode_type(type_))) == type_


def _diagnostic(data: Any) -> Diagnostic:
    """The cache's own decoder takes file names and codes from the entry; here a fixed shape."""
    code, message = data
    return Diagnostic(str(code), str(message), "f.akm", Span(1, 1, 1, 2, 0, 1), None, ())


@given(
    st.fixed_dictionaries(
        {},
        optional={k: JSON for k in ("ok", "params", "outputs", "plan", "planHash", "embedded", "chain", "firstError")},
    )
    | JSON
)
@settings(max_examples=examples(300))
def test_anything_but_an_interface_is_refused_never_a_crash(data: Any) -> None:
    try:
        interfaces.decode(data, "r", "r.akm", _diagnostic, {}, b"{}")
    except interfaces.MALFORMED:
        pass


@pytest.mark.parametrize("broken", [False, True])
def test_a_compiled_child_survives_the_round_trip_and_its_plan_is_checked(tmp_path: Path, broken: bool) -> None:
    (tmp_path / "akm.toml").write_text("")
    text = source("""
        workflow "child" {
          params {
            version: string(pattern: "^[0-9]+$")
            channel: "stable" | "beta" = "stable"
          }

          outputs {
            files = steps.list.output.files
          }

          step list {
            shell "echo"
            inputs = [params.version, params.channel]
            output: { files: list[string], count: int(min: 0) }
          }
        }
    """)
    (tmp_path / "child.akm").write_text(text.replace("params.channel]", "steps.nope.output]") if broken else text)
    child = Session(tmp_path).check(tmp_path / "child.akm").child
    assert child is not None and child.ok is not broken

    def encode(d: Diagnostic) -> Any:
        return [d.code, d.message]

    def decode(data: Any) -> Diagnostic:
        first = child.first_error
        assert first is not None and data == encode(first)
        return first

    stored = _through_json(interfaces.encode(child, encode))
    deps: dict[str, str | None] = {"child.akm": "sha256:0"}
    again = interfaces.decode(stored, child.ref, child.file, decode, deps, child.canonical)
    for name in ("ref", "file", "ok", "params", "outputs", "plan", "plan_hash", "size", "canonical", "first_error"):
        assert getattr(again, name) == getattr(child, name), name
    assert again.output_type == child.output_type and again.reads == child.reads and again.deps == deps
    if stored["planHash"] is not None:
        forged = child.canonical.replace(b'"echo"', b'"echo forged"')
        with pytest.raises(ValueError, match="hash"):
            interfaces.decode(stored, child.ref, child.file, decode, deps, forged)
