"""A `map` under `fail_fast = false` runs every item whatever its siblings do (operations.md D3.2),
on both stores: failures are recorded and the partial list stored, blocked units do not stop
their siblings, and `resume` reuses what completed."""

from __future__ import annotations

import json
from collections import Counter

from helpers import Runtime, source

# Each unit logs its item, then fails for the items listed in the file `failing` (if any).
SCRIPT = """#!/bin/sh
i=$(python3 -c 'import json, os; print(json.load(open(os.environ["AKM_CONTEXT"]))["item"])')
echo "$i" >> log
if [ -f failing ] && grep -qx "$i" failing; then exit 3; fi
echo "{\\"n\\": $i}"
"""


def _workflow(fail_fast: str, on_error: str) -> str:
    return source(f"""
        workflow "t" {{
          params {{ items: list[int] = [0, 1, 2, 3, 4, 5] }}
          outputs {{ got = steps.after.output }}
          step work {{
            map params.items {{
              concurrency = 1
              fail_fast = {fail_fast}
              script "scripts/unit.sh"
            }}
            output: list[{{ n: int }}]
            on_error = {on_error}
          }}
          step after {{ shell "cat" inputs = [steps.work.output] }}
        }}
    """)


def _logged(runtime: Runtime) -> Counter[str]:
    return Counter((runtime.root / "log").read_text().split())


def test_every_item_runs_and_the_partial_list_is_stored(runtime: Runtime) -> None:
    runtime.write({"scripts/unit.sh": SCRIPT, "failing": "1\n4\n"})
    code, document = runtime.run_json(runtime.compile("wf.akm", _workflow("false", "continue")))
    assert code == 0, document
    assert _logged(runtime) == Counter(str(i) for i in range(6))  # every item, each once
    rows = {row.step_id: row for row in runtime.store().steps(document["runId"])}
    work = rows["work"]
    assert (work.status, work.failure_reason) == ("failed", "units_failed")
    assert work.failure_message == "2 of 6 units failed: item 1 (exit), item 4 (exit)"
    partial = [{"n": 0}, None, {"n": 2}, {"n": 3}, None, {"n": 5}]
    assert json.loads(work.output_json or "") == partial
    assert document["exported"]["got"]["inputs"] == {"steps.work.output": partial}


def test_fail_fast_stops_at_the_first_failure(runtime: Runtime) -> None:
    """The default, for contrast: with one unit at a time nothing starts after item 1 fails."""
    runtime.write({"scripts/unit.sh": SCRIPT, "failing": "1\n"})
    code, document = runtime.run_json(runtime.compile("wf.akm", _workflow("true", "fail")))
    assert code == 1 and document["failure"]["message"].startswith("item 1:"), document
    assert _logged(runtime) == Counter(["0", "1"])


def test_resume_reuses_completed_units_and_runs_failed_ones_again(runtime: Runtime) -> None:
    runtime.write({"scripts/unit.sh": SCRIPT, "failing": "2\n3\n"})
    code, document = runtime.run_json(runtime.compile("wf.akm", _workflow("false", "fail")))
    assert code == 1, document
    run_id = document["runId"]
    assert document["failure"] == {
        "stepId": "work",
        "reason": "units_failed",
        "message": "2 of 6 units failed: item 2 (exit), item 3 (exit)",
    }
    (runtime.root / "failing").unlink()
    assert runtime.akm("resume", run_id).returncode == 0
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert document["exported"]["got"]["inputs"] == {"steps.work.output": [{"n": i} for i in range(6)]}
    assert _logged(runtime) == Counter({"0": 1, "1": 1, "2": 2, "3": 2, "4": 1, "5": 1})


LEAF = source("""
    workflow "leaf" {
      params { n: int }
      outputs { doubled = steps.double.output }
      step ok { approval "Double it?" }
      step double {
        shell "python3 -c 'import json, os; print(2 * json.load(open(os.environ[\\"AKM_CONTEXT\\"]))[\\"inputs\\"][\\"params.n\\"])'"
        inputs = [params.n]
      }
    }
""")


def test_a_map_of_blocking_children_starts_every_child_and_clears_in_one_round(runtime: Runtime) -> None:
    """Each child waits for an approval; every child starts at once, so one round (approve each,
    resume, run) completes the parent, not one round per child."""
    runtime.write({"workflows/leaf.akm": LEAF})
    src = source("""
        workflow "p" {
          params { items: list[int] = [1, 2, 3] }
          outputs { doubled = steps.each.output }
          step each {
            map params.items {
              concurrency = 1
              fail_fast = false
              uses "workflows/leaf" { n = item }
            }
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", src))
    assert code == 3, document
    parent = document["runId"]
    children = [row[0] for row in runtime.sql("SELECT id FROM runs WHERE parent_run_id = ? ORDER BY id", parent)]
    assert len(children) == 3  # every child started although the first blocked
    notes = document["blocked"]["notes"]
    assert notes.startswith("3 units are blocked:\n  item 0:\n")
    for child in children:
        assert f"`akm-run approve {child} ok`" in notes
    assert notes.endswith(
        f"Once they are cleared, `akm-run resume {parent}` and `akm-run run {parent}` "
        "drive them all on at once (what completed is reused)."
    )
    with runtime.paused():
        for child in children:
            assert runtime.akm("approve", child, "ok").returncode == 0
    assert runtime.akm("resume", parent).returncode == 0
    code, document = runtime.run_json(parent)
    assert code == 0, document
    assert document["exported"] == {"doubled": [{"doubled": 2}, {"doubled": 4}, {"doubled": 6}]}
