"""A step that fails under `on_error = continue` reads as `null` (operations.md D3.4), on both stores."""

from __future__ import annotations

import json

from helpers import Runtime, source


def test_a_failed_continued_step_reads_as_null(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          defaults { on_error = continue }
          outputs {
            own: { n: int } | null = steps.own.output
            inherited = steps.inherited.output
          }
          step own {
            shell "exit 3"
            output: { n: int }
            on_error = continue
          }
          step inherited {
            shell "exit 4"
          }
          step read {
            shell "cat"
            inputs = [steps.own.output, steps.inherited.output]
            output: any
            on_error = fail
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    assert document["exported"] == {"own": None, "inherited": None}
    store = runtime.store()
    steps = {row.step_id: row for row in store.steps(document["runId"])}
    assert (steps["own"].status, steps["own"].failure_reason) == ("failed", "exit")
    assert steps["own"].output_json == "null" and steps["inherited"].output_json == "null"
    assert steps["read"].output["inputs"] == {"steps.own.output": None, "steps.inherited.output": None}


def test_a_path_beneath_a_failed_continued_step_does_not_resolve(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step own {
            shell "exit 3"
            output: { n: int }
            on_error = continue
          }
          step read {
            shell "cat"
            inputs = [steps.own.output.n]
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 1 and document["failure"] == {
        "stepId": "read",
        "reason": "input_unresolved",
        "message": "steps.own.output.n did not resolve",
    }, json.dumps(document)


def test_a_child_exports_null_for_its_failed_continued_step(runtime: Runtime) -> None:
    """Nested: the child's own step fails and continues, so it exports null; the parent reads it."""
    child = source("""
        workflow "child" {
          outputs { name: string | null = steps.n.output }
          step n { shell "exit 5" output: string  on_error = continue }
        }
    """)
    src = source("""
        workflow "t" {
          outputs { got = steps.c.output.name }
          step c { uses "child" }
        }
    """)
    plan = runtime.compile("wf.akm", src, files={"child.akm": child})
    code, document = runtime.run_json(plan)
    assert code == 0 and document["exported"] == {"got": None}, document
