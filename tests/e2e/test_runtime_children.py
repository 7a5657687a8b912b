"""Child runs end to end: composed workflows run inline as child runs in the same journal."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from helpers import Runtime, doubling_leaf, eventually, source

LOG = 'echo \\"$AKM_RUN_ID $AKM_UNIT_ID\\" >> log'

LEAF = doubling_leaf(LOG)

MIDDLE = source("""
    workflow "middle" {
      params {
        n: int = 4
      }
      outputs {
        leaf = steps.call.output.doubled
      }
      step call {
        uses "workflows/leaf" {
          n = params.n
        }
      }
    }
""")

TOP = source("""
    workflow "top" {
      step first {
        shell "echo 3"
      }
      step mid {
        uses "workflows/middle" {
          n = steps.first.output
        }
      }
      step last {
        shell "cat"
        inputs = [steps.mid.output.leaf]
      }
      outputs {
        result = steps.mid.output.leaf
      }
    }
""")


def _three_levels(runtime: Runtime, leaf: str = LEAF) -> Path:
    runtime.write({"workflows/leaf.akm": leaf, "workflows/middle.akm": MIDDLE})
    return runtime.compile("workflows/top.akm", TOP)


def _child_rows(runtime: Runtime) -> list[tuple[str, str, str | None]]:
    return runtime.sql("SELECT id, ref, parent_run_id FROM runs ORDER BY created_at, id")


def test_three_levels_run_inline_and_exported_results_flow_up(runtime: Runtime) -> None:
    code, document = runtime.run_json(_three_levels(runtime))
    assert code == 0, document
    assert document["exported"] == {"result": 6}
    rows = _child_rows(runtime)
    assert [r[1] for r in rows] == ["workflows/top", "workflows/middle", "workflows/leaf"]
    top, middle, leaf = (r[0] for r in rows)
    assert rows[1][2] == top and rows[2][2] == middle
    mid_step = runtime.store().step(top, "mid")
    assert mid_step is not None and mid_step.output == {"leaf": 6}
    status = json.loads(runtime.akm("status", top, "--format", "json").stdout)
    assert status["children"] == [
        {
            "runId": middle,
            "ref": "workflows/middle",
            "status": "completed",
            "stepId": "mid",
            "children": [{"runId": leaf, "ref": "workflows/leaf", "status": "completed", "stepId": "call"}],
        }
    ]
    text = runtime.akm("status", top).stdout
    assert f"  ✓ {middle}  workflows/middle  (step mid)  completed" in text
    assert f"    ✓ {leaf}  workflows/leaf  (step call)  completed" in text
    listed = json.loads(runtime.akm("list", "--format", "json").stdout)["runs"]
    assert [r["id"] for r in listed] == [top]
    everything = json.loads(runtime.akm("list", "--children", "--format", "json").stdout)["runs"]
    assert [r["id"] for r in everything] == [top, middle, leaf]
    child_status = json.loads(runtime.akm("status", leaf, "--format", "json").stdout)
    assert child_status["run"]["parentRunId"] == middle


def test_a_failed_child_fails_the_parent_naming_the_child(runtime: Runtime) -> None:
    broken = LEAF.replace('shell "', 'shell "exit 4; ')
    code, document = runtime.run_json(_three_levels(runtime, broken))
    assert code == 1
    failure = document["failure"]
    assert failure["stepId"] == "mid" and failure["reason"] == "child_workflow_failed"
    middle = _child_rows(runtime)[1][0]
    assert f"child run {middle}" in failure["message"] and f"akm-run status {middle}" in failure["message"]
    assert "failed at its step call: child_workflow_failed" in failure["message"]


def test_bindings_that_do_not_fit_the_child_fail_publication(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": LEAF})
    src = source("""
        workflow "p" {
          step v {
            shell "echo not-a-number"
          }
          step c {
            uses "workflows/leaf" {
              n = steps.v.output
            }
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", src))
    assert code == 1 and document["failure"]["reason"] == "child_workflow_publish_failed"
    assert "param n" in document["failure"]["message"]
    assert len(_child_rows(runtime)) == 1


APPROVING_LEAF = LEAF.replace("  step double {", '  step ok {\n    approval "Double it?"\n  }\n  step double {')


@pytest.mark.slow
def test_a_blocked_child_blocks_the_parent_until_cleared(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": APPROVING_LEAF})
    src = source("""
        workflow "p" {
          step c {
            uses "workflows/leaf" {
              n = 5
            }
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", src))
    assert code == 3
    parent, child = (r[0] for r in _child_rows(runtime))
    assert document["blocked"] == {
        "stepId": "c",
        "notes": f'Step "c" composes child workflow run {child} (workflows/leaf),\n'
        f'which is blocked at its own step "ok". Nothing in this run advances\n'
        f"until the child does. Clear it with `akm-run approve {child} ok`, then\n"
        f"`akm-run resume {parent}` and `akm-run run {parent}`.",
    }
    status = json.loads(runtime.akm("status", parent, "--format", "json").stdout)
    assert status["steps"][0]["failureReason"] == "child_workflow_blocked"
    assert status["children"][0]["resume"] == {
        "command": f"akm-run approve {child} ok",
        "then": f"akm-run resume {parent} && akm-run run {parent}",
    }
    assert "⚠" in runtime.akm("status", parent).stdout
    assert runtime.akm("approve", child, "ok", "--by", "bo").returncode == 0
    # the parent no longer repeats the child's stale block: it says so and prints its own commands
    notes = json.loads(runtime.akm("status", parent, "--format", "json").stdout)["steps"][0]["notes"]
    # approved, the child is active (on PostgreSQL `approve` also drives it on: it may be completed)
    assert "no longer\nblocked (it is " in notes and f"akm-run resume {parent}" in notes
    assert "Clear it with" not in runtime.run_json(parent)[1]["blocked"]["notes"]
    assert runtime.akm("resume", parent).returncode == 0
    code, document = runtime.run_json(parent)
    assert code == 0, document
    assert document["exported"] == {"runId": parent, "status": "completed"}
    run_row = runtime.store().run(child)
    assert run_row is not None and run_row.status == "completed"
    assert len(_child_rows(runtime)) == 2


def test_nested_blocks_clear_deepest_first(runtime: Runtime) -> None:
    """The worked example of docs/runtime.md: top → middle → leaf, the leaf waits for an approval."""
    code, document = runtime.run_json(_three_levels(runtime, APPROVING_LEAF))
    assert code == 3
    top, middle, leaf = (r[0] for r in _child_rows(runtime))
    assert f"child workflow run {middle} (workflows/middle)" in document["blocked"]["notes"]
    tree = json.loads(runtime.akm("status", top, "--format", "json").stdout)["children"]
    assert tree[0]["status"] == "blocked" and tree[0]["children"][0]["status"] == "blocked"
    assert runtime.akm("approve", leaf, "ok").returncode == 0
    assert runtime.akm("resume", middle).returncode == 0
    assert runtime.akm("resume", top).returncode == 0
    code, document = runtime.run_json(top)
    assert code == 0 and document["exported"] == {"result": 6}
    assert {r.status for r in runtime.store().runs(children=True)} == {"completed"}
    log = Counter(line.split()[1] for line in (runtime.root / "log").read_text().splitlines())
    assert log == {"double:solo": 1}


def test_a_child_run_id_works_with_every_verb(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": APPROVING_LEAF})
    src = source("""
        workflow "p" {
          step c {
            uses "workflows/leaf" {
              n = 5
            }
          }
        }
    """)
    runtime.run_json(runtime.compile("workflows/p.akm", src))
    parent, child = (r[0] for r in _child_rows(runtime))
    assert runtime.akm("status", child).returncode == 0
    assert runtime.akm("run", child).returncode == 3
    assert runtime.akm("resume", child).returncode == 0
    assert runtime.akm("run", child).returncode == 3  # the approval blocks again
    assert runtime.akm("approve", child, "ok").returncode == 0
    assert runtime.akm("run", child).returncode == 0  # driven directly, to completion
    assert runtime.akm("resume", parent).returncode == 0
    assert runtime.run_json(parent)[0] == 0
    other = runtime.compile("workflows/q.akm", src.replace('"p"', '"q"'))
    runtime.run_json(other)
    second_child = _child_rows(runtime)[-1][0]
    assert runtime.akm("abandon", second_child).returncode == 0
    run_row = runtime.store().run(second_child)
    assert run_row is not None and run_row.status == "failed"


# -- crash windows -----------------------------------------------------------------------------------


def _crash(runtime: Runtime, plan: Path, fault: str) -> str:
    runtime.killed(runtime.driver(plan, env=runtime.env(AKM_RUN_FAULT=fault)))
    return _child_rows(runtime)[0][0]


def _units_run(runtime: Runtime) -> Counter[str]:
    path = runtime.root / "log"
    return Counter(line.split()[1] for line in path.read_text().splitlines()) if path.exists() else Counter()


@pytest.mark.parametrize("fault", ["child-published", "child-completed"])
def test_crash_around_a_child_resumes_with_one_child_and_no_rerun(runtime: Runtime, fault: str) -> None:
    runtime.write({"workflows/leaf.akm": LEAF})
    src = source("""
        workflow "p" {
          step c {
            uses "workflows/leaf" {
              n = 5
            }
          }
          step after {
            shell "cat"
            inputs = [steps.c.output.doubled]
          }
        }
    """)
    parent = _crash(runtime, runtime.compile("workflows/p.akm", src), fault)
    rows = _child_rows(runtime)
    assert len(rows) == 2
    before = _units_run(runtime)
    assert before == ({} if fault == "child-published" else {"double:solo": 1})
    runtime.replace_driver()
    code, document = runtime.run_json(parent)
    assert code == 0, document
    assert len(_child_rows(runtime)) == 2, "exactly one child run"
    assert _units_run(runtime) == {"double:solo": 1}, "no child unit ran twice"
    after_step = runtime.store().step(parent, "after")
    assert after_step is not None and after_step.output["inputs"] == {"steps.c.output.doubled": 10}


def test_crash_in_the_middle_of_a_child(runtime: Runtime) -> None:
    crash = source("""
        #!/bin/sh
        echo "$AKM_RUN_ID $AKM_UNIT_ID" >> log
        if [ "$AKM_UNIT_ID" = two:solo ] && [ ! -e crashed ]; then touch crashed; kill -9 -"$(cat driver.pid)"; kill -9 $$; fi
        echo done
    """)
    child = source("""
        workflow "c" {
          step one {
            script "scripts/crash.sh"
          }
          step two {
            script "scripts/crash.sh"
          }
          step three {
            script "scripts/crash.sh"
          }
        }
    """)
    runtime.write({"scripts/crash.sh": crash, "workflows/c.akm": child})
    src = source("""
        workflow "p" {
          step c {
            uses "workflows/c"
          }
        }
    """)
    plan = runtime.compile("workflows/p.akm", src)
    runtime.killed(runtime.driver(plan))
    runtime.replace_driver()
    parent = _child_rows(runtime)[0][0]
    code, document = runtime.run_json(parent)
    assert code == 0, document
    assert _units_run(runtime) == {"one:solo": 1, "two:solo": 2, "three:solo": 1}
    assert len(_child_rows(runtime)) == 2


def _approved_child_of_a_blocked_parent(runtime: Runtime, leaf: str) -> tuple[str, str]:
    """A parent composing `leaf`, blocked on the leaf's approval, which is then given: (parent, child)."""
    runtime.write({"workflows/leaf.akm": leaf})
    src = source("""
        workflow "p" {
          step c {
            uses "workflows/leaf" {
              n = 5
            }
          }
        }
    """)
    assert runtime.run_json(runtime.compile("workflows/p.akm", src))[0] == 3
    parent, child = (r[0] for r in _child_rows(runtime))
    assert runtime.akm("approve", child, "ok").returncode == 0
    return parent, child


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_a_parent_waits_for_the_driver_of_its_child(runtime: Runtime) -> None:
    """A child driven directly while its parent reaches it: the parent's unit waits for that driver
    (its lock ends with it) and then takes the child's result. Nothing runs twice."""
    leaf = APPROVING_LEAF.replace('shell "', 'shell "while [ ! -e go ]; do sleep 0.05; done; ')
    parent, child = _approved_child_of_a_blocked_parent(runtime, leaf)
    holder = runtime.start("run", child)
    release = runtime.root / "busy"
    try:
        eventually(lambda: (runtime.state / "locks" / f"{child}.lock").exists(), "the child's driver holds it")
        assert runtime.akm("resume", parent).returncode == 0
        waiting = runtime.start(
            "run", parent, "--format", "json", env=runtime.env(AKM_RUN_FAULT=f"hold-child-busy:{release}")
        )
        eventually(Path(f"{release}.held").exists, "the parent finds its child being driven")
    finally:
        release.touch()
        (runtime.root / "go").touch()
        holder.communicate(timeout=60)
    out, err = waiting.communicate(timeout=120)
    assert holder.returncode == 0 and waiting.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    log = Counter(line.split()[1] for line in (runtime.root / "log").read_text().splitlines())
    assert log == {"double:solo": 1}


@pytest.mark.sqlite_only
def test_a_child_held_from_another_host_fails_its_parent_busy(runtime: Runtime) -> None:
    """A lock file of another host sharing the state directory cannot be known alive: the parent
    does not wait on it, it fails child_workflow_busy naming the holder, and converges after resume."""
    parent, child = _approved_child_of_a_blocked_parent(runtime, APPROVING_LEAF)
    lock = runtime.state / "locks" / f"{child}.lock"
    lock.parent.mkdir(exist_ok=True)
    lock.write_text(json.dumps({"pid": 4242, "host": "another-host", "started": 0}))
    assert runtime.akm("resume", parent).returncode == 0
    code, document = runtime.run_json(parent)
    assert code == 1 and document["failure"]["reason"] == "child_workflow_busy"
    assert "pid 4242 on another-host" in document["failure"]["message"]
    lock.unlink()
    assert runtime.akm("resume", parent).returncode == 0
    code, document = runtime.run_json(parent)
    assert code == 0 and document["status"] == "completed", document


def test_replaying_a_completed_parent_changes_nothing(runtime: Runtime) -> None:
    plan = _three_levels(runtime)
    code, document = runtime.run_json(plan)
    assert code == 0
    before = runtime.dump()
    assert runtime.run_json(document["runId"]) == (0, document)
    assert runtime.dump() == before
    assert _units_run(runtime) == {"double:solo": 1}


DEPLOY = source(r"""
    workflow "deploy" {
      params {
        environment: string
        version: string
      }
      outputs {
        deployed = steps.deploy.output
      }
      step deploy {
        shell "LOG; python3 -c 'import json,sys; i=json.load(sys.stdin)[\"inputs\"]; print(json.dumps(i[\"params.environment\"] + \"@\" + i[\"params.version\"]))'"
        inputs = [params.environment, params.version]
        output: string
      }
    }
""").replace("LOG", LOG)

FAN_OUT = source("""
    workflow "fan-out" {
      params {
        targets: list[{ name: string, region: string }]
        version: string = "1.2"
      }
      outputs {
        deployed = steps.deploy.output
      }
      step deploy {
        map params.targets {
          uses "workflows/deploy" { environment = item.name  version = params.version }
        }
      }
    }
""")


def test_a_map_over_uses_runs_one_child_per_item_with_that_item_bound(runtime: Runtime) -> None:
    runtime.write({"workflows/deploy.akm": DEPLOY})
    plan = runtime.compile("workflows/fan-out.akm", FAN_OUT)
    binding = json.loads(plan.read_text())["plan"]["steps"][0]["target"]["bindings"][0]
    assert binding == {"name": "environment", "kind": "item", "from": "item.name"}
    targets = [{"name": "staging", "region": "eu"}, {"name": "prod", "region": "us"}, {"name": "dr", "region": "ap"}]
    code, document = runtime.run_json(plan, "--param", f"targets={json.dumps(targets)}")
    assert code == 0, document
    # each child run received its own item, in item order
    assert document["exported"]["deployed"] == [{"deployed": f"{t['name']}@1.2"} for t in targets]
    children = [row for row in _child_rows(runtime) if row[2] is not None]
    assert len(children) == 3 and {ref for _, ref, _ in children} == {"workflows/deploy"}
    rows = runtime.sql("SELECT params_json FROM runs WHERE parent_run_id IS NOT NULL")
    assert sorted(json.loads(p)["environment"] for (p,) in rows) == ["dr", "prod", "staging"]


def test_an_item_path_that_does_not_resolve_fails_the_unit_as_unresolved(runtime: Runtime) -> None:
    runtime.write({"workflows/deploy.akm": DEPLOY})
    plan = runtime.compile(
        "workflows/fan-out.akm",
        FAN_OUT.replace("item.name", "item.missing").replace("list[{ name: string, region: string }]", "list[any]"),
    )
    code, document = runtime.run_json(plan, "--param", 'targets=[{"name": "a"}]')
    assert code != 0
    assert "input_unresolved" in json.dumps(document)
    assert [row for row in _child_rows(runtime) if row[2] is not None] == []


@pytest.mark.sqlite_only  # on the pool each attempt's files are the worker's, in a directory of their own
def test_child_runs_driven_inline_keep_their_units_files_in_the_root_drives_directory(runtime: Runtime) -> None:
    """One private directory per drive, shared by the child runs it drives (docs/runtime.md, "The
    state directory"), removed when the drive ends."""
    where = 'dirname \\"$AKM_CONTEXT\\" >> dirs'
    runtime.write({"workflows/leaf.akm": doubling_leaf(where)})
    src = source("""
        workflow "p" {
          params {
            items: list[int] = [1, 2, 3]
          }
          step own {
            shell "dirname \\"$AKM_CONTEXT\\" >> dirs"
          }
          step fan {
            map params.items {
              concurrency = 2
              uses "workflows/leaf" { n = item }
            }
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", src))
    assert code == 0, document
    dirs = (runtime.root / "dirs").read_text().split()
    assert len(dirs) == 4 and len(set(dirs)) == 1
    assert Path(dirs[0]).name.startswith(f"{document['runId']}.")
    assert not Path(dirs[0]).exists()
