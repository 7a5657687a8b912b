"""`parallel` blocks end to end (operations.md D1), on both stores: members run at once and are
journaled as steps, the block settles worst first, fail-fast leaves unstarted members pending for
`resume`, and a crash in the middle of a block converges without running a completed unit again."""

from __future__ import annotations

import json
from collections import Counter

from test_runtime_crash import CRASH, _completed_units, _crash_run, _log, _resume

from akm_run.identity import unit_id
from helpers import Runtime, source

# Each member says it started, then waits (up to a minute) until all three have: they overlap by
# construction, and the test reads the overlap from the journal's own timestamps.
MEET = source("""
    #!/bin/sh
    touch "started-$1"
    for _ in $(seq 600); do
      [ -e started-lint ] && [ -e started-test ] && [ -e started-audit ] && break
      sleep 0.1
    done
    echo "\\"$1\\""
""")


def test_three_members_run_at_once(runtime: Runtime) -> None:
    runtime.write({"scripts/meet.sh": MEET})
    src = source("""
        workflow "p" {
          parallel checks {
            step lint { shell "scripts/meet.sh lint" }
            step test { shell "scripts/meet.sh test" }
            step audit { shell "scripts/meet.sh audit" }
          }
          step report { shell "cat" inputs = [steps.checks.output] }
        }
    """)
    code, document = runtime.run_json(runtime.compile("wf.akm", src))
    assert code == 0, document
    run_id = document["runId"]
    attempts = {unit.step_id: tries[0] for unit, tries in runtime.store().run_attempts(run_id)}
    members = [attempts[name] for name in ("lint", "test", "audit")]
    assert max(a.started_at for a in members) < min(a.finished_at or 0 for a in members)  # all three overlapped
    rows = {row.step_id: row for row in runtime.store().steps(run_id)}
    assert [rows[m].group for m in ("checks", "lint", "test", "audit", "report")] == [
        None,
        "checks",
        "checks",
        "checks",
        None,
    ]
    assert rows["checks"].output == {"lint": "lint", "test": "test", "audit": "audit"}
    status = runtime.akm("status", run_id).stdout
    assert (
        "  ✓ checks  completed\n    ✓ lint    completed\n    ✓ test    completed\n    ✓ audit   completed\n" in status
    )


def _failing_block(fail_fast: str) -> str:
    return source(f"""
        workflow "p" {{
          parallel checks {{
            concurrency = 1
            fail_fast = {fail_fast}
            step a {{ shell "echo a >> log; test ! -e broken" }}
            step b {{ shell "echo b >> log; echo 2" }}
            step c {{ shell "echo c >> log; exit 4" on_error = continue }}
          }}
          step after {{ shell "cat" inputs = [steps.checks.output] }}
        }}
    """)


def test_fail_fast_leaves_the_members_it_never_started_pending_for_resume(runtime: Runtime) -> None:
    (runtime.root / "broken").touch()
    code, document = runtime.run_json(runtime.compile("wf.akm", _failing_block("true")))
    assert code == 1, document
    run_id = document["runId"]
    assert document["failure"] == {
        "stepId": "checks",
        "reason": "members_failed",
        "message": "1 of 3 members failed: a (exit)",
    }
    rows = {row.step_id: row for row in runtime.store().steps(run_id)}
    assert [rows[m].status for m in ("a", "b", "c")] == ["failed", "pending", "pending"]
    (runtime.root / "broken").unlink()
    assert runtime.akm("resume", run_id).returncode == 0
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    rows = {row.step_id: row for row in runtime.store().steps(run_id)}
    assert rows["checks"].output == {"a": "", "b": 2, "c": None}  # c failed and continued: null
    assert Counter((runtime.root / "log").read_text().split()) == {"a": 2, "b": 1, "c": 1}


CONTINUED_BLOCK = source("""
    workflow "t" {
      parallel checks {
        concurrency = 1
        on_error = continue
        step a {
          shell "exit 1"
        }
        step b {
          shell "echo 2"
          output: int
        }
      }
      step after {
        shell "cat > /dev/null; echo 1"
        inputs = [steps.b.output]
      }
      outputs {
        b: int | null = steps.b.output
        through = steps.checks.output
      }
    }
""")


def test_a_member_a_continued_block_never_started_reads_as_null(runtime: Runtime) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", CONTINUED_BLOCK))
    assert code == 0, document
    assert document["exported"] == {"b": None, "through": None}  # the failed block itself reads null
    after = runtime.store().step(document["runId"], "after")
    assert after is not None and after.status == "completed"


def test_a_block_that_keeps_going_runs_every_member(runtime: Runtime) -> None:
    (runtime.root / "broken").touch()
    code, document = runtime.run_json(runtime.compile("wf.akm", _failing_block("false")))
    assert code == 1, document
    assert document["failure"]["message"] == "1 of 3 members failed: a (exit)"
    assert Counter((runtime.root / "log").read_text().split()) == {"a": 1, "b": 1, "c": 1}


def test_a_member_waiting_for_an_approval_blocks_the_block_until_approved(runtime: Runtime) -> None:
    src = source("""
        workflow "p" {
          parallel checks {
            step ok { approval "Ship it?" }
            step build { shell "echo built >> log; echo 1" }
          }
          step after { shell "cat" inputs = [steps.checks.output.ok.approved] }
        }
    """)
    code, document = runtime.run_json(runtime.compile("wf.akm", src))
    assert code == 3, document
    run_id = document["runId"]
    assert document["blocked"]["stepId"] == "checks"
    assert "step ok:" in document["blocked"]["notes"] and f"akm-run approve {run_id} ok" in document["blocked"]["notes"]
    assert runtime.akm("approve", run_id, "ok", "--by", "bo").returncode == 0
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert (runtime.root / "log").read_text() == "built\n"  # the completed member was reused


def test_a_route_that_skips_a_block_skips_its_members(runtime: Runtime) -> None:
    src = source("""
        workflow "p" {
          params { mode: string = "quick" }
          outputs { lint = steps.lint.output }
          step pick { route params.mode { "quick" -> done  _ -> checks } }
          parallel checks {
            step lint { shell "echo 1" }
          }
          step done { shell "echo 2" }
        }
    """)
    code, document = runtime.run_json(runtime.compile("wf.akm", src))
    assert code == 0, document
    assert document["exported"] == {"lint": None}
    rows = {row.step_id: row.status for row in runtime.store().steps(document["runId"])}
    assert (rows["checks"], rows["lint"]) == ("skipped", "skipped")


def test_a_crash_in_the_middle_of_a_block_converges(runtime: Runtime) -> None:
    runtime.write({"scripts/crash.sh": CRASH})
    src = source("""
        workflow "p" {
          parallel checks {
            concurrency = 1
            step one { script "scripts/crash.sh" }
            step two { script "scripts/crash.sh" }
            step three { script "scripts/crash.sh" }
          }
        }
    """)
    run_id = _crash_run(runtime, runtime.compile("wf.akm", src), unit_id("two"))
    before = _completed_units(runtime, run_id)
    assert before == [unit_id("one")]
    _resume(runtime, run_id)
    assert _log(runtime) == {unit_id("one"): 1, unit_id("two"): 2, unit_id("three"): 1}
    rows = {row.step_id: row for row in runtime.store().steps(run_id)}
    assert {m: rows[m].status for m in ("checks", "one", "two", "three")} == dict.fromkeys(
        ("checks", "one", "two", "three"), "completed"
    )
    assert json.loads(rows["checks"].output_json or "")["three"] == {"item": None, "fb": 0}


def test_a_crash_in_the_middle_of_a_map_that_keeps_going_converges(runtime: Runtime) -> None:
    runtime.write({"scripts/crash.sh": CRASH})
    src = source("""
        workflow "fan" {
          params { items: list[int] = [1, 2, 3, 4] }
          step fan {
            map params.items { concurrency = 1  fail_fast = false  script "scripts/crash.sh" }
          }
        }
    """)
    run_id = _crash_run(runtime, runtime.compile("wf.akm", src), unit_id("fan", 3, mapped=True))
    before = _completed_units(runtime, run_id)
    assert len(before) == 2
    _resume(runtime, run_id)
    log = _log(runtime)
    assert all(log[unit] == 1 for unit in before)
    fan = runtime.store().step(run_id, "fan")
    assert fan is not None and [o["item"] for o in fan.output] == [1, 2, 3, 4]
