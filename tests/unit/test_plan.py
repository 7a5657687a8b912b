"""The runtime's plan format: canonical bytes, hashes, and refusal of every tampered plan."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from akm_run.plan import MAX_FILE_BYTES, PlanError, canonical_bytes, plan_hash, render_file, verify_file
from helpers import REPO

GOLDEN = REPO / "golden" / "corpus" / "plans" / "workflows" / "everything.plan.json"


def golden() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(GOLDEN.read_text())
    return document


def rehash(document: dict[str, Any]) -> bytes:
    """Re-sign a mutated plan so that only the mutation is under test."""
    document["planHash"] = plan_hash(document["plan"])
    return json.dumps(document).encode()


def test_canonical_bytes_sort_keys_and_drop_whitespace() -> None:
    assert canonical_bytes({"b": 1, "a": [1.5, "é"]}) == '{"a":[1.5,"é"],"b":1}'.encode()


def test_hash_ignores_formatting() -> None:
    document = golden()
    compact = json.dumps(document, separators=(",", ":")).encode()
    assert plan_hash(verify_file(compact)) == document["planHash"]


Mutation = Callable[[dict[str, Any]], None]
MUTATIONS: dict[str, tuple[Mutation, str | None]] = {  # None: a leaf changed, which only the hash catches
    "unknown key": (lambda p: p["steps"][0].update(foo=1), 'plan.steps[0].foo: unknown key "foo"'),
    "missing key": (lambda p: p.pop("title"), 'plan: missing key "title"'),
    "empty optional": (lambda p: p["steps"][0].update(inputs=[]), "plan.steps[0].inputs: must be absent"),
    "wrong type": (lambda p: p["limits"].update(concurrency="8"), "plan.limits.concurrency: expected an integer"),
    "bool for int": (lambda p: p["limits"].update(concurrency=True), "plan.limits.concurrency: expected an integer"),
    "out of bounds": (lambda p: p["limits"].update(concurrency=65), "plan.limits.concurrency: 65 is outside"),
    "bad step id": (lambda p: p["steps"][0].update(stepId="1bad"), "plan.steps[0].stepId:"),
    "bad enum": (lambda p: p["steps"][0].update(onError="retry"), "plan.steps[0].onError: expected one of"),
    "bad target kind": (lambda p: p["steps"][0]["target"].update(kind="exec"), "plan.steps[0].target.kind:"),
    "reordered steps": (lambda p: p["steps"].reverse(), "plan.steps[0].index: is 7"),
    "duplicate step": (lambda p: p["steps"][1].update(stepId="collect"), "plan.steps[1].stepId: duplicate step id"),
    "later reference": (
        lambda p: p["steps"][0].update(inputs=["steps.publish.output"]),
        'plan.steps[0].inputs[0]: "steps.publish.output" does not name an earlier step',
    ),
    "unknown param": (lambda p: p["steps"][0].update(inputs=["params.nope"]), "names an undeclared param"),
    "route backwards": (
        lambda p: p["steps"][2]["cases"][0].update(next="collect"),
        "plan.steps[2].cases[0].next: route target",
    ),
    "script bytes": (lambda p: p["steps"][0]["target"].update(sha256="sha256:" + "0" * 64), None),
    "bad schema": (
        lambda p: p["params"]["count"].update(schema={"type": "integr"}),
        "plan.params.count.schema.type: invalid JSON Schema",
    ),
    "huge integer": (lambda p: p["limits"].update(maxUnits=2**60), "plan.limits.maxUnits"),
    "unsorted env": (lambda p: p["steps"][7]["env"].reverse(), "plan.steps[7].env: entries must be sorted"),
    "leaf string": (
        lambda p: p["steps"][7]["target"].update(command=7),
        "plan.steps[7].target.command: expected a string",
    ),
    # an unhashable tag used to raise TypeError out of the decoder (found by test_plan_format)
    "list as a kind": (lambda p: p["steps"][0].update(kind=[]), "plan.steps[0].kind: expected one of"),
    "object as onError": (lambda p: p["steps"][0].update(onError={}), "plan.steps[0].onError: expected one of"),
    # `features` must be exactly what the plan uses (akm_run.features): this plan uses none
    "undue feature": (
        lambda p: p.update(features=["parallel"]),
        'plan.features: declares features ["parallel"], but the plan uses []',
    ),
    "empty features": (lambda p: p.update(features=[]), "plan.features: must be absent rather than empty"),
    "unknown feature": (lambda p: p.update(features=["teleport"]), "plan.features[0]: expected one of"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_tampered_plans_are_refused_naming_the_path(name: str) -> None:
    mutate, expected = MUTATIONS[name]
    document = golden()
    mutate(document["plan"])
    if expected is None:  # a leaf changed without re-signing: the hash catches it
        data = json.dumps(document).encode()
        expected = "planHash: does not match the plan"
    else:
        data = rehash(document)
    with pytest.raises(PlanError) as refused:
        verify_file(data)
    assert expected in str(refused.value)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"format": "akm-plan", "format": "akm-plan"}', 'file: duplicate key "format"'),
        (b'{"format": NaN}', "file: NaN is not JSON"),
        (b"[]", "file: expected an object"),
        (b'{"format": "akm-plan", "planHash": "x", "plan": {}, "extra": 1}', "extra: unknown envelope key"),
        (b"\xff", "file: not UTF-8"),
        (b" " * (MAX_FILE_BYTES + 1), "file: larger than"),
        (b"[" * 100_000, "file: nested too deeply"),
    ],
    ids=["duplicate-keys", "nan", "not-object", "envelope-key", "not-utf8", "oversized", "deep"],
)
def test_malformed_files_are_refused(data: bytes, expected: str) -> None:
    with pytest.raises(PlanError) as refused:
        verify_file(data)
    assert expected in str(refused.value)


def test_every_leaf_change_changes_the_hash_or_is_refused() -> None:
    document = golden()
    leaves: list[tuple[list[Any], Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*path, key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, [*path, index])
        else:
            leaves.append((path, node))

    walk(document["plan"], [])
    assert len(leaves) > 100
    for path, value in leaves:
        mutated = copy.deepcopy(document)
        holder = mutated["plan"]
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = "tampered" if not isinstance(value, str) else value + "x"
        with pytest.raises(PlanError):
            verify_file(json.dumps(mutated).encode())


def test_expect_hash_pins_the_reviewed_plan() -> None:
    data = GOLDEN.read_bytes()
    verify_file(data, golden()["planHash"])
    with pytest.raises(PlanError, match="was expected"):
        verify_file(data, "sha256:" + "0" * 64)


def test_render_file_is_pretty_sorted_with_trailing_newline() -> None:
    rendered = render_file(golden()["plan"])
    assert rendered == GOLDEN.read_text() and rendered.endswith("}\n")
