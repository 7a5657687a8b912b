"""Map items are values, and each item is its own unit: equal items (equal as JSON values: 1 and
1.0, objects whose keys are written in another order) run as separate units with their own
dispatch ids, results and child runs, on both stores, through a crash and a resume."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import Runtime, source
from profiles import examples

# The unit logs its unit and dispatch ids, then prints its item and index (and, once, when its
# index is in `crash-at`, kills the process executing the units right after that side effect).
UNIT = source("""
    #!/bin/sh
    index=$(python3 -c 'import json,os; print(json.load(open(os.environ["AKM_CONTEXT"]))["itemIndex"])')
    echo "$AKM_UNIT_ID $AKM_DISPATCH_ID $index" >> log
    if [ "$index" = "$(cat crash-at 2>/dev/null)" ] && [ ! -e crashed ]; then
      touch crashed
      while [ ! -s driver.pid ]; do sleep 0.01; done
      kill -9 -"$(cat driver.pid)"
      kill -9 $$
    fi
    exec python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps({"index": c["itemIndex"], "item": c["item"]}))' < "$AKM_CONTEXT"
""")


def _fan(item_type: str = "any", concurrency: int = 4) -> str:
    return source(f"""
        workflow "fan" {{
          params {{ items: list[{item_type}] }}
          outputs {{ results = steps.fan.output }}
          step fan {{
            map params.items {{
              concurrency = {concurrency}
              script "scripts/unit.sh"
            }}
          }}
        }}
    """)


def _plan(runtime: Runtime, item_type: str = "any", concurrency: int = 4) -> Path:
    runtime.write({"scripts/unit.sh": UNIT})
    return runtime.compile("wf.akm", _fan(item_type, concurrency))


def _log(runtime: Runtime) -> list[tuple[str, str, int]]:
    log = runtime.root / "log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [(unit, dispatch, int(index)) for unit, dispatch, index in (line.split() for line in lines)]


def _units(runtime: Runtime, run_id: str) -> list[tuple[str, int, str]]:
    rows = runtime.sql("SELECT unit_id, item_index, status FROM units WHERE run_id = ? ORDER BY item_index", run_id)
    return [(u, i, s) for u, i, s in rows]


def _run(runtime: Runtime, plan: Path, items: list[Any]) -> dict[str, Any]:
    code, document = runtime.run_json(plan, "--param", f"items={json.dumps(items)}")
    assert code == 0 and isinstance(document, dict), document
    return document


def _each_its_own_unit(runtime: Runtime, run_id: str, count: int) -> None:
    """`count` units, one per item index, each dispatched once under its own unit and dispatch id."""
    units = _units(runtime, run_id)
    assert [i for _, i, _ in units] == list(range(count))
    assert all(s == "completed" for _, _, s in units)
    assert len({u for u, _, _ in units}) == count
    log = _log(runtime)
    assert sorted(index for _, _, index in log) == list(range(count))
    assert len({unit for unit, _, _ in log}) == count and len({d for _, d, _ in log}) == count


def test_equal_items_are_each_their_own_unit(runtime: Runtime) -> None:
    items = ["a", "b", "a", "a", {"k": 1, "l": [1, 2]}, {"l": [1, 2], "k": 1}]
    document = _run(runtime, _plan(runtime), items)
    assert document["exported"]["results"] == [{"index": i, "item": item} for i, item in enumerate(items)]
    _each_its_own_unit(runtime, document["runId"], len(items))
    # the first of equal items keeps the unit id a list of distinct items gives it
    units = [u for u, _, _ in _units(runtime, document["runId"])]
    assert units[0].startswith("fan:") and units[2].startswith(units[0]) and units[3].startswith(units[0])
    assert units[5].startswith(units[4])


def test_items_equal_only_as_numbers_are_one_value_and_separate_units(runtime: Runtime) -> None:
    items = [1, 1.0, -0.0, 0, 2.5, {"n": 1.0}, {"n": 1}]
    document = _run(runtime, _plan(runtime, "any"), items)
    normal = [1, 1, 0, 0, 2.5, {"n": 1}, {"n": 1}]
    results = document["exported"]["results"]
    assert results == [{"index": i, "item": item} for i, item in enumerate(normal)]
    assert [type(r["item"]) for r in results[:4]] == [int] * 4  # stored as integers, not 1.0 or -0.0
    _each_its_own_unit(runtime, document["runId"], len(items))


@pytest.mark.slow
def test_hundreds_of_equal_items_run_as_as_many_units(runtime: Runtime) -> None:
    src = source("""
        workflow "many" {
          params { items: list[string] }
          step fan {
            map params.items {
              concurrency = 16
              shell "cat"
            }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    count = examples(1000, at_least=100)  # a thousand in CI, a fifth of it in a contributor's run
    code, document = runtime.run_json(plan, "--param", f"items={json.dumps(['same'] * count)}")
    assert code == 0, document
    fan_step = runtime.store().step(document["runId"], "fan")
    assert fan_step is not None
    output = fan_step.output
    assert [o["itemIndex"] for o in output] == list(range(count))
    assert len({o["unitId"] for o in output}) == count and len({o["dispatchId"] for o in output}) == count
    assert len(_units(runtime, document["runId"])) == count


@pytest.mark.slow
def test_a_crash_in_a_map_of_equal_items_keeps_each_items_own_result(runtime: Runtime) -> None:
    plan = _plan(runtime, "int", concurrency=2)
    (runtime.root / "crash-at").write_text("3")
    runtime.killed(runtime.driver(plan, "--param", f"items={json.dumps([7] * 6)}"))
    [run] = runtime.store().runs()
    before = [u for u, _, s in _units(runtime, run.id) if s == "completed"]
    assert before, "some units completed before the crash"
    runtime.replace_driver()
    code, document = runtime.run_json(run.id)
    assert code == 0, document
    fan_step = runtime.store().step(run.id, "fan")
    assert fan_step is not None and fan_step.output == [{"index": i, "item": 7} for i in range(6)]
    ran = Counter(unit for unit, _, _ in _log(runtime))
    assert all(ran[unit] == 1 for unit in before), "a unit completed before the crash ran again"
    assert ran[next(u for u, i, _ in _units(runtime, run.id) if i == 3)] == 2  # the crashed one: at-least-once
    assert len(ran) == 6  # every item ran under its own unit id (one running beside it may have run twice)
    assert len(_units(runtime, run.id)) == 6


DEPLOY = source("""
    workflow "deploy" {
      params { environment: string }
      outputs { deployed = steps.deploy.output }
      step deploy {
        shell "echo \\"$AKM_RUN_ID\\" >> children; python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[\\"inputs\\"][\\"params.environment\\"]))'"
        inputs = [params.environment]
        output: string
      }
    }
""")

FAN_OUT = source("""
    workflow "fan-out" {
      params { targets: list[string] }
      outputs { deployed = steps.deploy.output }
      step deploy {
        map params.targets {
          uses "workflows/deploy" { environment = item }
        }
      }
    }
""")


def test_a_map_over_uses_with_equal_items_runs_a_child_per_item(runtime: Runtime) -> None:
    runtime.write({"workflows/deploy.akm": DEPLOY})
    plan = runtime.compile("workflows/fan-out.akm", FAN_OUT)
    targets = ["eu", "eu", "us", "eu"]
    code, document = runtime.run_json(plan, "--param", f"targets={json.dumps(targets)}")
    assert code == 0, document
    assert document["exported"]["deployed"] == [{"deployed": t} for t in targets]
    children = runtime.sql("SELECT id FROM runs WHERE parent_run_id IS NOT NULL")
    assert len(children) == 4
    assert sorted((runtime.root / "children").read_text().split()) == sorted(c for (c,) in children)


# Values that are equal to one another in every way JSON allows, and some that are not.
_VALUES = st.sampled_from([1, 1.0, -0.0, 0, "a", None, [1, 2], [1.0, 2], {"k": 1, "l": 2}, {"l": 2, "k": 1.0}])


def _normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


@settings(
    max_examples=examples(10, at_least=2), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=st.lists(_VALUES, max_size=6))
def test_a_map_over_repeated_items_completes_with_each_items_result(runtime: Runtime, items: list[Any]) -> None:
    (runtime.root / "log").unlink(missing_ok=True)
    document = _run(runtime, _plan(runtime), items)
    assert document["exported"]["results"] == [{"index": i, "item": _normal(x)} for i, x in enumerate(items)]
    _each_its_own_unit(runtime, document["runId"], len(items))


# A child's unit: logs its child run, and the second child to run kills the process executing the
# units (once), right after that side effect.
CHILD_UNIT = source("""
    #!/bin/sh
    echo "$AKM_RUN_ID" >> children
    if [ "$(wc -l < children)" -eq 2 ] && [ ! -e crashed ]; then
      touch crashed
      while [ ! -s driver.pid ]; do sleep 0.01; done
      kill -9 -"$(cat driver.pid)"
      kill -9 $$
    fi
    exec python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["inputs"]["params.environment"]))' < "$AKM_CONTEXT"
""")


@pytest.mark.slow
def test_a_crash_in_a_map_over_uses_with_equal_items_resumes_each_items_own_child(runtime: Runtime) -> None:
    child = source("""
        workflow "deploy" {
          params { environment: string }
          outputs { deployed = steps.deploy.output }
          step deploy {
            script "scripts/child.sh"
            inputs = [params.environment]
            output: string
          }
        }
    """)
    runtime.write({"workflows/deploy.akm": child, "scripts/child.sh": CHILD_UNIT})
    one_at_a_time = FAN_OUT.replace("map params.targets {", "map params.targets {\n      concurrency = 1")
    plan = runtime.compile("workflows/fan-out.akm", one_at_a_time)
    runtime.killed(runtime.driver(plan, "--param", 'targets=["eu", "eu", "eu"]'))
    [(run_id,)] = runtime.sql("SELECT id FROM runs WHERE parent_run_id IS NULL")
    runtime.replace_driver()
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert document["exported"]["deployed"] == [{"deployed": "eu"}] * 3
    children = [
        c for (c,) in runtime.sql("SELECT id FROM runs WHERE parent_run_id IS NOT NULL ORDER BY created_at, id")
    ]
    assert len(set(children)) == 3
    ran = Counter((runtime.root / "children").read_text().split())
    assert sorted(ran.values()) == [1, 1, 2]  # the first child is reused, the crashed one runs again as itself
