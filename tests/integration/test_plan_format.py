"""The one definition of the plan format: the decoder and `akmc schema` are both built from the
description of akm_run.planformat, and accept and refuse the same plans at each limit."""

from __future__ import annotations

import copy
import functools
import json
from typing import Any, get_args, is_typeddict

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run import planformat as pf
from akm_run.plan import PlanError, render_file, verify_plan
from akm_run.planshape import describe
from akmc.planschema import plan_file_schema
from helpers import REPO
from profiles import examples


def _typed_dicts() -> list[type]:
    """The records of the definition (the bases `_Step` and `_Work` only lend their keys)."""
    return [value for name, value in vars(pf).items() if is_typeddict(value) and not name.startswith("_")]


def test_the_description_reaches_every_record_of_the_definition() -> None:
    """No typed dict of the definition is left out of the decoder and the schema."""
    described = describe(pf.PlanFile).records
    assert sorted(described) == sorted(shape.__name__ for shape in _typed_dicts())


@pytest.mark.parametrize("shape", _typed_dicts(), ids=lambda s: s.__name__)
def test_the_schema_has_the_key_sets_of_the_definition(shape: type) -> None:
    required, optional = pf.keys(shape)
    document = _schema()
    found = document if shape.__name__ == "PlanFile" else document["$defs"][shape.__name__]
    assert set(found["required"]) == required and set(found["properties"]) == required | optional


def test_retry_reasons_and_on_error_are_their_literal_types() -> None:
    assert pf.RETRY_REASONS == get_args(pf.RetryReason)
    assert pf.ON_ERROR == get_args(pf.OnError)


# -- the decoder and the schema agree ---------------------------------------------------------------


@functools.cache
def _schema() -> dict[str, Any]:
    return plan_file_schema()


def _base() -> dict[str, Any]:
    return {
        "irVersion": 1,
        "ref": "workflows/limits",
        "title": "Limits",
        "sourceReadSet": [{"path": "workflows/limits.akm"}],
        "params": {"p": {"schema": {"type": "string"}}},
        "outputs": {"o": {"from": "steps.work.output"}},
        "limits": {"concurrency": 4, "maxUnits": 10, "timeoutMs": 1000},
        "steps": [
            {
                "stepId": "work",
                "index": 0,
                "kind": "map",
                "onError": "fail",
                "over": "steps.list.output",
                "concurrency": 2,
                "target": {"kind": "shell", "command": "true"},
                "gate": {"check": {"kind": "shell", "command": "true"}, "maxLoops": 2},
                "retry": {"max": 2, "on": ["exit"], "backoffMs": 10},
                "timeoutMs": 1000,
            },
        ],
    }


def _with_list_step(plan: dict[str, Any]) -> dict[str, Any]:
    """The base plan, whose map step reads an earlier step (the decoder checks that it exists)."""
    plan["steps"].insert(
        0,
        {
            "stepId": "list",
            "index": 0,
            "kind": "unit",
            "onError": "fail",
            "target": {"kind": "shell", "command": "echo []"},
        },
    )
    for i, step in enumerate(plan["steps"]):
        step["index"] = i
    return plan


def _verdicts(plan: dict[str, Any]) -> tuple[bool, bool]:
    """(the decoder accepts, the published schema accepts)."""
    try:
        verify_plan(copy.deepcopy(plan))
        decoded = True
    except PlanError:
        decoded = False
    document = json.loads(render_file(plan))
    schema_ok = jsonschema.Draft202012Validator(_schema()).is_valid(document)
    return decoded, schema_ok


def _set(plan: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    node = plan
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return plan


# (where in the plan, lowest allowed, highest allowed); the map step stands at steps[1]
BOUNDS = [
    (("limits", "concurrency"), 1, pf.MAX_CONCURRENCY),
    (("limits", "maxUnits"), 1, pf.MAX_INT),
    (("limits", "timeoutMs"), pf.MIN_DURATION_MS, pf.MAX_TIMEOUT_MS),
    (("steps", 1, "timeoutMs"), pf.MIN_DURATION_MS, pf.MAX_TIMEOUT_MS),
    (("steps", 1, "concurrency"), 1, pf.MAX_CONCURRENCY),
    (("steps", 1, "retry", "max"), 1, pf.MAX_RETRY),
    (("steps", 1, "retry", "backoffMs"), pf.MIN_DURATION_MS, pf.MAX_TIMEOUT_MS),
    (("steps", 1, "gate", "maxLoops"), 1, pf.MAX_LOOPS),
]


def test_the_base_plan_is_accepted_by_both() -> None:
    assert _verdicts(_with_list_step(_base())) == (True, True)


@pytest.mark.parametrize(
    ("path", "low", "high"), BOUNDS, ids=lambda p: ".".join(map(str, p)) if isinstance(p, tuple) else ""
)
def test_both_accept_every_limit_and_refuse_one_past_it(path: tuple[Any, ...], low: int, high: int) -> None:
    for value, accepted in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
        plan = _set(_with_list_step(_base()), path, value)
        assert _verdicts(plan) == (accepted, accepted), (path, value)


@pytest.mark.parametrize(
    ("key", "limit"), [("params", pf.MAX_PARAMS), ("outputs", pf.MAX_OUTPUTS)], ids=["params", "outputs"]
)
def test_both_bound_the_number_of_params_and_outputs(key: str, limit: int) -> None:
    for count, accepted in ((limit, True), (limit + 1, False)):
        plan = _with_list_step(_base())
        entry = {"schema": {"type": "string"}} if key == "params" else {"from": "steps.work.output"}
        plan[key] = {f"n{i}": dict(entry) for i in range(count)}
        assert _verdicts(plan) == (accepted, accepted), count


def test_both_bound_the_number_of_steps() -> None:
    for count, accepted in ((pf.MAX_STEPS, True), (pf.MAX_STEPS + 1, False)):
        plan = _base()
        plan.pop("outputs")
        plan["steps"] = [
            {
                "stepId": f"s{i}",
                "index": i,
                "kind": "unit",
                "onError": "fail",
                "target": {"kind": "shell", "command": "true"},
            }
            for i in range(count)
        ]
        assert _verdicts(plan)[1] is accepted
        if accepted:
            assert _verdicts(plan)[0]
        else:  # the decoder refuses it too (its index runs past the bound as well)
            assert not _verdicts(plan)[0]


@settings(max_examples=examples(150), deadline=None)
@given(path=st.sampled_from([b[0] for b in BOUNDS]), value=st.integers(min_value=-5, max_value=pf.MAX_INT + 5))
def test_decoder_and_schema_agree_on_any_integer_at_any_limit(path: tuple[Any, ...], value: int) -> None:
    decoded, schema_ok = _verdicts(_set(_with_list_step(_base()), path, value))
    assert decoded == schema_ok


_names = st.text(alphabet="aZ_9-.é$ ", min_size=0, max_size=6)


@settings(max_examples=examples(150), deadline=None)
@given(name=_names, where=st.sampled_from(["param", "stepId", "env", "secret"]))
def test_decoder_and_schema_agree_on_names(name: str, where: str) -> None:
    plan = _with_list_step(_base())
    if where == "param":
        plan["params"] = {name: {"schema": {"type": "string"}}}
    elif where == "stepId":
        plan["steps"][1]["stepId"] = name
        plan["outputs"] = {"o": {"from": "steps.list.output"}}
    else:
        entry = (
            {"name": name, "kind": "passthrough"} if where == "env" else {"name": "E", "kind": "secret", "secret": name}
        )
        plan["steps"][1]["env"] = [entry]
    decoded, schema_ok = _verdicts(plan)
    assert decoded == schema_ok


NULLABLE_NOWHERE = [
    ("description",),
    ("params",),
    ("outputs",),
    ("limits", "maxUnits"),
    ("limits", "timeoutMs"),
    ("steps", 1, "retry"),
    ("steps", 1, "gate"),
    ("steps", 1, "timeoutMs"),
    ("steps", 1, "inputs"),
    ("steps", 1, "retry", "backoffMs"),
    ("sourceReadSet", 0, "sha256"),
]


@pytest.mark.parametrize("path", NULLABLE_NOWHERE, ids=lambda p: ".".join(map(str, p)))
def test_both_refuse_an_optional_key_that_is_null(path: tuple[Any, ...]) -> None:
    assert _verdicts(_set(_with_list_step(_base()), path, None)) == (False, False)


# -- any plan: the decoder never accepts what the schema refuses ----------------------------------------

_PLANS = sorted((REPO / "golden").rglob("*.plan.json")) + sorted((REPO / "examples").rglob("*.plan.json"))
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.just(""),
    st.just([]),
    st.just({}),
    st.text(max_size=8),
    st.sampled_from([0, 1, -1, pf.MAX_INT, pf.MAX_INT + 1, pf.MAX_TIMEOUT_MS, pf.MAX_TIMEOUT_MS + 1, 64, 65, 256]),
    st.sampled_from(["sha256:" + "0" * 64, "steps.x.output", "params.p", "a/b", "shell", "map", "route"]),
)


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value, the value itself excluded."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in items:
        found.append((*path, key))
        found += _places(child, (*path, key))
    return found


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_the_decoder_accepts_no_plan_the_schema_refuses(data: st.DataObject) -> None:
    """Any golden or example plan with one value replaced, or one key dropped or added: whatever the
    decoder accepts, the published schema accepts too (the decoder checks more: references, sorting,
    embedded hashes)."""
    source = data.draw(st.sampled_from(_PLANS), label="plan")
    plan = json.loads(source.read_text(encoding="utf-8"))["plan"]
    path = data.draw(st.sampled_from(_places(plan)), label="path")
    node = plan
    for key in path[:-1]:
        node = node[key]
    change = data.draw(st.sampled_from(["replace", "drop", "add"]), label="change")
    if change == "drop" and isinstance(node, dict):
        del node[path[-1]]
    elif change == "add" and isinstance(node, dict):
        node[data.draw(st.sampled_from(["extra", "kind", "default", "path"]), label="key")] = data.draw(_values)
    else:
        node[path[-1]] = data.draw(_values, label="value")
    decoded, schema_ok = _verdicts(plan)
    assert schema_ok or not decoded
