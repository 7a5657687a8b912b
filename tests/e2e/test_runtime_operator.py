"""Operator control of one step, end to end: `skip`, `retry`, `pause` and `unpause` (docs/runbook.md)
on real `akm-run` processes and either store. What each verb did is read from the journal: the step
rows, the units under their journal ids, and the events with who acted."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from test_runtime_events import Lines, run_id_of

from helpers import PATIENCE_S, Keys, Runtime, eventually, run_cli, source

PROBE = source("""
    workflow "t" {
      step probe {
        shell "exit 3"
        output: { ok: bool }
      }
      step after {
        shell "cat"
        inputs = [steps.probe.output.ok]
      }
    }
""")


def _events(runtime: Runtime, run_id: str, kind: str) -> list[tuple[str | None, dict[str, Any]]]:
    return [(step, data) for k, step, _, data in runtime.store().events(run_id) if k == kind]


def _context(runtime: Runtime, run_id: str, step_id: str) -> Any:
    row = runtime.store().step(run_id, step_id)
    assert row is not None and row.status == "completed", row
    return json.loads(row.output) if isinstance(row.output, str) else row.output


def test_skip_settles_a_failed_step_with_a_checked_output_and_the_run_goes_on(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", PROBE)
    code, document = runtime.run_json(plan)
    assert code == 1, document
    run_id = document["runId"]
    refused = runtime.akm("skip", run_id, "probe")
    assert refused.returncode == 2 and "--output JSON" in refused.stderr, refused.stderr
    refused = runtime.akm("skip", run_id, "probe", "--output", '{"ok": "yes"}')
    assert refused.returncode == 2 and "value.ok" in refused.stderr, refused.stderr
    refused = runtime.akm("skip", run_id, "probe", "--output", '{"ok": true, "ok": false}')
    assert refused.returncode == 2 and "duplicate key" in refused.stderr, refused.stderr
    (runtime.root / "out.json").write_text('{"ok": true}')
    skipped = runtime.akm("skip", run_id, "probe", "--output-file", "out.json", "--by", "alice", "--note", "by hand")
    assert skipped.returncode == 0, skipped.stderr
    assert f"skipped step probe of run {run_id}" in skipped.stdout
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert _context(runtime, run_id, "after")["inputs"] == {"steps.probe.output.ok": True}
    assert _events(runtime, run_id, "step.skipped") == [("probe", {"by": "alice", "note": "by hand", "operator": True})]
    status = runtime.akm("status", run_id)
    assert "↷ probe  skipped" in status.stdout and "skipped by alice: by hand" in status.stdout


REVIEWED = source("""
    workflow "t" {
      step ok {
        approval "go on?"
      }
      step checked {
        shell "echo 1"
        gate {
          check shell "exit 0"
          max_loops = 1
        }
      }
    }
""")


def test_skip_refuses_an_approval_and_a_gated_step(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", REVIEWED)
    code, document = runtime.run_json(plan)
    assert code == 3, document
    run_id = document["runId"]
    approval = runtime.akm("skip", run_id, "ok")
    assert approval.returncode == 2 and f"akm-run approve {run_id} ok --reject" in approval.stderr, approval.stderr
    gated = runtime.akm("skip", run_id, "checked")
    assert gated.returncode == 2 and "gate" in gated.stderr, gated.stderr
    unknown = runtime.akm("skip", run_id, "nope")
    assert unknown.returncode == 2 and "has no step 'nope'" in unknown.stderr
    assert _events(runtime, run_id, "step.skipped") == []


SLOW = source("""
    workflow "t" {
      step one {
        shell "touch one.started; while [ ! -e one.release ]; do sleep 0.05; done; echo 1"
      }
      step two {
        shell "touch two.started; echo 2"
      }
    }
""")


def _live(runtime: Runtime, plan: Path) -> tuple[subprocess.Popen[str], str]:
    """A drive of `plan` in another process, its first unit running (it waits for one.release)."""
    driver = runtime.start("run", plan, "--format", "json")
    eventually(lambda: (runtime.root / "one.started").exists(), "the slow unit to start")
    [run] = runtime.store().runs()
    return driver, run.id


def _ended(driver: subprocess.Popen[str]) -> tuple[int, Any]:
    out, err = driver.communicate(timeout=PATIENCE_S)
    try:
        return driver.returncode, json.loads(out)
    except ValueError:
        raise AssertionError(f"exit {driver.returncode}: {out}\n{err}") from None


def test_skip_and_retry_wait_for_a_live_driver(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SLOW)
    driver, run_id = _live(runtime, plan)
    for verb in ("skip", "retry"):
        refused = runtime.akm(verb, run_id, "two")
        assert refused.returncode == 75, (verb, refused.stderr)
    (runtime.root / "one.release").touch()
    code, document = _ended(driver)
    assert code == 0, document
    assert _events(runtime, run_id, "step.skipped") == [] and _events(runtime, run_id, "step.reopened") == []


def test_pause_stops_a_live_driver_before_its_next_step_and_unpause_lets_it_go_on(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SLOW)
    driver, run_id = _live(runtime, plan)
    paused = runtime.akm("pause", run_id, "--by", "ops")
    assert paused.returncode == 0, paused.stderr
    (runtime.root / "one.release").touch()  # the unit in flight finishes
    code, document = _ended(driver)
    assert code == 3, document
    assert document["status"] == "active" and document["paused"]["by"] == "ops"
    one, two = runtime.store().steps(run_id)
    assert (one.status, two.status) == ("completed", "pending")
    assert runtime.store().unit(run_id, "two:solo") is None and not (runtime.root / "two.started").exists()
    status = runtime.akm("status", run_id)
    assert "‖ paused by ops" in status.stdout
    shown = json.loads(runtime.akm("status", run_id, "--format", "json").stdout)
    assert shown["run"]["paused"] == {"by": "ops", "now": False}
    assert _events(runtime, run_id, "run.paused") == [(None, {"by": "ops", "now": False})]
    lifted = runtime.akm("unpause", run_id, "--by", "ops")
    assert lifted.returncode == 0 and f"akm-run run {run_id}" in lifted.stdout, lifted.stderr
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert _events(runtime, run_id, "run.unpaused") == [(None, {"by": "ops"})]


def test_a_follower_of_a_run_a_pause_stops_exits_3_as_run_does(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SLOW)
    driver, run_id = _live(runtime, plan)
    follower = Lines(runtime.start("events", run_id, "--follow", "--format", "jsonl"))
    eventually(lambda: any("unit.dispatched" in line for line in follower.lines), "the history")
    assert runtime.akm("pause", run_id, "two", "--by", "ops").returncode == 0
    eventually(lambda: any("step.paused" in line for line in follower.lines), "the pause, while the drive runs")
    (runtime.root / "one.release").touch()
    code, document = _ended(driver)
    assert code == 3 and document["status"] == "active", document
    code, stderr = follower.end()
    assert code == 3, (follower.lines, stderr)


def test_pause_now_terminates_the_units_in_flight_and_the_run_stays_resumable(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SLOW)
    driver, run_id = _live(runtime, plan)
    paused = runtime.akm("pause", run_id, "one", "--now", "--by", "ops")
    assert paused.returncode == 0, paused.stderr
    code, document = _ended(driver)
    assert code == 3, document
    assert document["paused"] == {"by": "ops", "now": True, "stepId": "one"}
    [attempt] = runtime.store().attempts(run_id, "one:solo")
    assert attempt.status == "aborted"
    step = runtime.store().step(run_id, "one")
    assert step is not None and step.status == "pending" and step.paused == {"by": "ops", "now": True}
    assert runtime.akm("unpause", run_id, "one").returncode == 0
    (runtime.root / "one.release").touch()
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert [a.status for a in runtime.store().attempts(run_id, "one:solo")] == ["aborted", "completed"]


THREE = source("""
    workflow "t" {
      step probe {
        shell "exit 3"
      }
      step mid {
        shell "echo 2"
      }
      step after {
        shell "echo 3"
      }
    }
""")


def test_a_paused_step_holds_the_spine_there_and_the_steps_before_it_run(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", THREE)
    code, document = runtime.run_json(plan)
    assert code == 1, document
    run_id = document["runId"]
    with runtime.paused():  # on the pool, skip submits the next drive: it waits until the pause is in
        assert runtime.akm("skip", run_id, "probe").returncode == 0
        assert runtime.akm("pause", run_id, "after", "--by", "ops").returncode == 0
    code, document = runtime.run_json(run_id)
    assert code == 3, document
    assert document["paused"] == {"by": "ops", "now": False, "stepId": "after"}
    assert [s.status for s in runtime.store().steps(run_id)] == ["skipped", "completed", "pending"]
    assert runtime.store().unit(run_id, "after:solo") is None
    assert "after  pending   ‖ paused by ops" in runtime.akm("status", run_id).stdout


COUNTED = source("""
    workflow "t" {
      params { items: list[int] = [1, 2, 3] }
      step a {
        shell "echo a >> log; echo 1"
      }
      step fan {
        map params.items {
          concurrency = 1
          script "scripts/item.sh"
        }
      }
      step total {
        shell "echo total >> log; cat"
        inputs = [steps.fan.output]
      }
      step other {
        shell "echo other >> log; echo 0"
      }
      step last {
        shell "echo last >> log; cat"
        inputs = [steps.total.output.inputs]
      }
    }
""")
ITEM = source("""
    #!/bin/sh
    item=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["item"])' < "$AKM_CONTEXT")
    echo "fan $item" >> log
    echo $((item * 2))
""")


def test_retry_reopens_the_step_and_its_readers_and_reruns_their_units_under_new_ids(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", COUNTED, files={"scripts/item.sh": ITEM})
    code, document = runtime.run_json(plan)
    assert code == 0, document
    run_id = document["runId"]
    (runtime.root / "log").write_text("")
    before = runtime.store().unit(run_id, "a:solo")
    retried = runtime.akm("retry", run_id, "a", "--by", "bob")
    assert retried.returncode == 0, retried.stderr
    first = retried.stdout.splitlines()[0]
    assert first == f"retry of step a of run {run_id} reopens: a"
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert (runtime.root / "log").read_text() == "a\n"
    after = runtime.store().unit(run_id, "a:solo~r1")
    superseded = runtime.store().unit(run_id, "a:solo")
    assert before is not None and after is not None and after.input_hash == before.input_hash
    assert superseded is not None and superseded.superseded and not after.superseded
    [(step, data)] = _events(runtime, run_id, "step.reopened")
    assert step == "a" and data == {"by": "bob", "steps": ["a"], "units": ["a:solo"]}


def test_retry_of_one_map_item_reruns_it_and_every_step_that_reads_the_map(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", COUNTED, files={"scripts/item.sh": ITEM})
    code, document = runtime.run_json(plan)
    assert code == 0, document
    run_id = document["runId"]
    (runtime.root / "log").write_text("")
    retried = runtime.akm("retry", run_id, "fan", "--unit", "1")
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.splitlines()[0] == f"retry of step fan of run {run_id} reopens: fan, total, last"
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert (runtime.root / "log").read_text() == "fan 2\ntotal\nlast\n"
    fan = runtime.store().step(run_id, "fan")
    assert fan is not None and fan.output == [2, 4, 6]
    [(_, data)] = _events(runtime, run_id, "step.reopened")
    assert data["steps"] == ["fan", "total", "last"] and len(data["units"]) == 3
    refused = runtime.akm("retry", run_id, "a", "--unit", "0")
    assert refused.returncode == 2 and "map step" in refused.stderr
    refused = runtime.akm("retry", run_id, "fan", "--unit", "7")
    assert refused.returncode == 2 and "no unit for item 7" in refused.stderr


LEAF = source("""
    workflow "leaf" {
      params { n: int = 1 }
      outputs { doubled = steps.double.output }
      step double {
        shell "echo leaf >> log; echo 2"
        inputs = [params.n]
      }
    }
""")
TOP = source("""
    workflow "top" {
      step compose {
        uses "workflows/leaf" {
          n = 3
        }
      }
    }
""")


def test_a_retried_composing_step_publishes_a_new_child_and_the_old_one_stays_visible(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": LEAF})
    plan = runtime.compile("workflows/top.akm", TOP)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    run_id = document["runId"]
    [old] = runtime.store().child_runs(run_id)
    with runtime.paused():  # on the pool, retry submits the next drive: `run` below follows it
        retried = runtime.akm("retry", run_id, "compose", "--by", "bob", "--format", "json")
    assert retried.returncode == 0, retried.stderr
    said = json.loads(retried.stdout)
    assert {k: said[k] for k in ("runId", "stepId", "steps", "units", "by")} == {
        "runId": run_id,
        "stepId": "compose",
        "steps": ["compose"],
        "units": ["compose:solo"],
        "by": "bob",
    }
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    old_child, new_child = runtime.store().child_runs(run_id)
    assert old_child.id == old.id and old_child.status == "completed" and new_child.status == "completed"
    assert new_child.parent_unit_id == "compose:solo~r1"
    listed = runtime.akm("list", "--children", "--format", "json")
    assert {old.id, new_child.id} <= {r["id"] for r in json.loads(listed.stdout)["runs"]}
    # every verb takes a child run id: pause and skip the new child's step
    assert runtime.akm("pause", new_child.id, "double").returncode == 0
    step = runtime.store().step(new_child.id, "double")
    assert step is not None and step.paused is not None


FAN = source("""
    workflow "t" {
      params { items: list[int] = [0, 1, 2] }
      step fan {
        map params.items {
          concurrency = 1
          script "scripts/wait.sh"
        }
      }
    }
""")
WAIT = source("""
    #!/bin/sh
    item=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["item"])' < "$AKM_CONTEXT")
    touch "item$item.started"
    while [ ! -e release ]; do sleep 0.05; done
    echo "$item"
""")


def test_a_paused_map_step_lets_its_unit_in_flight_finish_and_starts_no_other(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", FAN, files={"scripts/wait.sh": WAIT})
    driver = runtime.start("run", plan, "--format", "json")
    eventually(lambda: (runtime.root / "item0.started").exists(), "the first item to start")
    [run] = runtime.store().runs()
    assert runtime.akm("pause", run.id, "fan", "--by", "ops").returncode == 0
    (runtime.root / "release").touch()
    code, document = _ended(driver)
    assert code == 3, document
    units = runtime.store().units(run.id, "fan")
    assert [(u.item_index, u.status) for u in units] == [(0, "completed")]
    assert runtime.akm("unpause", run.id, "fan").returncode == 0
    code, document = runtime.run_json(run.id)
    assert code == 0, document
    fan = runtime.store().step(run.id, "fan")
    assert fan is not None and fan.output == [0, 1, 2]
    assert len(runtime.store().attempts(run.id, units[0].unit_id)) == 1  # reused, not run again


def test_skip_and_retry_recheck_the_signature_and_pause_needs_no_trust(runtime: Runtime, keys: Keys) -> None:
    plan = runtime.compile("workflows/wf.akm", PROBE)
    assert run_cli("sign", plan, "--key", keys.key("ci")).returncode == 0
    code, document = runtime.run_json(plan, "--allowed-signers", keys.allowed("ci"))
    assert code == 1, document
    run_id = document["runId"]
    keys.allowed("ops")  # the signer's key is removed from the recorded allowed signers file
    for verb in (("skip", "probe", "--output", '{"ok": true}'), ("retry", "probe")):
        refused = runtime.akm(*verb[:1], run_id, *verb[1:])
        assert refused.returncode == 4 and "unlisted signer" in refused.stderr, refused.stderr
    assert runtime.akm("pause", run_id).returncode == 0 and runtime.akm("unpause", run_id).returncode == 0
    assert [s.status for s in runtime.store().steps(run_id)] == ["failed", "pending"]


WAITING_LEAF = source("""
    workflow "leaf" {
      step one {
        shell "touch leaf.started; while [ ! -e leaf.release ]; do sleep 0.05; done; echo 1"
      }
      step two {
        shell "touch leaf.two; echo 2"
      }
    }
""")
COMPOSING = source("""
    workflow "top" {
      step compose {
        uses "workflows/leaf"
      }
    }
""")


def test_a_pause_of_a_run_holds_the_child_runs_it_drives(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": WAITING_LEAF})
    plan = runtime.compile("workflows/top.akm", COMPOSING)
    driver = runtime.start("run", plan, "--format", "json")
    eventually(lambda: (runtime.root / "leaf.started").exists(), "the child's unit to start")
    [top] = runtime.store().runs()
    assert runtime.akm("pause", top.id, "--by", "ops").returncode == 0
    (runtime.root / "leaf.release").touch()
    code, document = _ended(driver)
    assert code == 3, document
    assert document["paused"] == {"by": "ops", "now": False, "runId": top.id}
    [child] = runtime.store().child_runs(top.id)
    assert [s.status for s in runtime.store().steps(child.id)] == ["completed", "pending"]
    assert not (runtime.root / "leaf.two").exists()
    assert json.loads(runtime.akm("unpause", child.id, "--format", "json").stdout)["lifted"] == []
    assert runtime.akm("unpause", top.id).returncode == 0
    code, document = runtime.run_json(top.id)
    assert code == 0, document
    assert (runtime.root / "leaf.two").exists()


BLOCK = source("""
    workflow "t" {
      parallel checks {
        step lint { shell "echo 1" }
        step test { shell "echo 2" }
      }
      step report { shell "cat" inputs = [steps.checks.output] }
    }
""")


def test_retry_of_a_member_reruns_it_its_block_and_their_readers_and_reuses_the_other_members(
    runtime: Runtime,
) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", BLOCK))
    assert code == 0, document
    run_id = document["runId"]
    with runtime.paused():  # on the pool, retry submits the next drive: the skip below must not meet it
        retried = runtime.akm("retry", run_id, "lint", "--format", "json")
        assert retried.returncode == 0, retried.stderr
        assert json.loads(retried.stdout)["steps"] == ["checks", "lint", "report"]
        assert runtime.akm("skip", run_id, "checks").returncode == 2  # a block is not skipped: its members are
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    units = [u for name in ("lint", "test") for u in runtime.store().units(run_id, name)]
    assert [(u.unit_id, u.superseded) for u in units] == [
        ("lint:solo", True),
        ("lint:solo~r1", False),
        ("test:solo", False),  # not run again
    ]


KEPT_GOING = source("""
    workflow "t" {
      parallel checks {
        fail_fast = false
        step lint {
          shell "echo '\\"clean\\"'"
          output: string
        }
        step test {
          shell "exit 3"
          output: string
        }
      }
      outputs {
        direct = steps.test.output
        through = steps.checks.output
      }
    }
""")


def test_skipping_the_failed_member_of_a_failed_block_settles_the_block_with_the_given_output(
    runtime: Runtime,
) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", KEPT_GOING))
    assert code == 1 and document["failure"]["reason"] == "members_failed", document
    run_id = document["runId"]
    skipped = runtime.akm("skip", run_id, "test", "--output", '"by hand"')
    assert skipped.returncode == 0, skipped.stderr
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    assert document["exported"] == {"direct": "by hand", "through": {"lint": "clean", "test": "by hand"}}
    assert [u.unit_id for u in runtime.store().units(run_id, "lint")] == ["lint:solo"]  # not run again


def test_a_skip_output_file_must_be_a_bounded_regular_file(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", PROBE)
    code, document = runtime.run_json(plan)
    assert code == 1, document
    run_id = document["runId"]
    fifo = runtime.root / "fifo"
    os.mkfifo(fifo)
    (runtime.root / "large.json").write_text('"' + "x" * (1024 * 1024) + '"')
    (runtime.root / "zero").symlink_to("/dev/zero")
    for given, said in (("fifo", "not a regular file"), ("zero", "not a regular file"), ("large.json", "larger")):
        refused = runtime.akm("skip", run_id, "probe", "--output-file", given, timeout=30)
        assert refused.returncode == 2 and said in refused.stderr, (given, refused.stderr)
    probe = runtime.store().step(run_id, "probe")
    assert probe is not None and probe.status == "failed"


SLOW_MEMBERS = source("""
    workflow "t" {
      parallel build {
        step slow {
          shell "sleep 30"
        }
        step quick {
          shell "sleep 1; echo 1 >> quick.log"
        }
      }
    }
""")


def test_pause_now_of_a_running_member_ends_the_drive_and_the_member_waits(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SLOW_MEMBERS)
    driver = runtime.start("run", plan, "--format", "json")
    run_id = run_id_of(runtime)
    eventually(lambda: (row := runtime.store().step(run_id, "slow")) is not None and row.status == "running", "slow")
    assert runtime.akm("pause", run_id, "slow", "--now").returncode == 0
    out, err = driver.communicate(timeout=PATIENCE_S)
    assert driver.returncode == 3, (out, err)
    slow = runtime.store().step(run_id, "slow")
    assert slow is not None and slow.status != "completed"  # without the pause it would have slept on
    assert [step for step, _ in _events(runtime, run_id, "unit.aborted")].count("slow") == 1


ROUTED_BLOCK = source("""
    workflow "t" {
      params { pick: "block" | "other" = "other" }
      step first {
        shell "echo 1"
        output: int
      }
      step choose {
        route params.pick {
          "block" -> checks
          "other" -> other
        }
      }
      parallel checks {
        step reads {
          shell "cat > /dev/null; echo 2"
          inputs = [steps.first.output]
        }
        step alone {
          shell "echo 3"
        }
      }
      step other {
        shell "echo 4"
      }
    }
""")


def test_retry_leaves_the_members_of_a_block_its_route_did_not_select_skipped(runtime: Runtime) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", ROUTED_BLOCK))
    assert code == 0, document
    run_id = document["runId"]
    with runtime.paused():  # on the pool, retry submits the next drive: the second retry must not meet it
        retried = runtime.akm("retry", run_id, "first", "--format", "json")
        assert retried.returncode == 0 and json.loads(retried.stdout)["steps"] == ["first"], retried.stderr
        refused = runtime.akm("retry", run_id, "alone")
        assert refused.returncode == 2 and "not selected" in refused.stderr, refused.stderr
    code, document = runtime.run_json(run_id)
    assert code == 0, document
    statuses = {row.step_id: row.status for row in runtime.store().steps(run_id)}
    assert statuses == {
        "first": "completed",
        "choose": "completed",
        "checks": "skipped",
        "reads": "skipped",
        "alone": "skipped",
        "other": "completed",
    }
