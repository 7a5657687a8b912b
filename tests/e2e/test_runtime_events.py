"""`akm-run events` end to end (runtime.md, "Events"): a run's timeline read back, filtered, grouped
by lane, and followed from another process while a real run proceeds, on both stores."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from helpers import Runtime, doubling_leaf, eventually, source

TWO_WAITS = source("""
    workflow "t" {
      step first {
        shell "touch first-started; while [ ! -e a ]; do sleep 0.05; done"
      }
      step second {
        shell "while [ ! -e b ]; do sleep 0.05; done; echo 7"
      }
    }
""")
PARENT = source("""
    workflow "p" {
      step v {
        shell "echo 3"
      }
      step c {
        uses "workflows/leaf" {
          n = steps.v.output
        }
      }
      step wait {
        approval "ship it?"
      }
    }
""")
FAILS = source("""
    workflow "t" {
      step boom {
        shell "exit 3"
      }
    }
""")


class Lines:
    """A process's stdout read line by line in a thread, so a test can wait for a line to appear."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process, self.lines = process, list[str]()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in list(self.lines)]

    def end(self) -> tuple[int, str]:
        """The exit code and stderr once the process ends by itself."""
        code = self.process.wait(timeout=120)
        self.reader.join(timeout=30)
        assert self.process.stderr is not None
        return code, self.process.stderr.read()


def run_id_of(runtime: Runtime) -> str:
    [[run_id]] = eventually(lambda: runtime.sql("SELECT id FROM runs WHERE parent_run_id IS NULL"), "the run")
    return str(run_id)


def events(runtime: Runtime, *args: str) -> list[dict[str, Any]]:
    result = runtime.akm("events", *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["events"]
    return found


def test_a_follower_prints_events_as_a_run_in_another_process_commits_them(runtime: Runtime) -> None:
    driver = runtime.start("run", runtime.compile("wf.akm", TWO_WAITS))
    eventually(lambda: (runtime.root / "first-started").exists(), "the first step")
    run_id = run_id_of(runtime)
    follower = Lines(runtime.start("events", run_id, "--follow", "--format", "jsonl"))
    eventually(lambda: any(e["kind"] == "unit.dispatched" for e in follower.events()), "the history")
    (runtime.root / "a").touch()
    started = eventually(
        lambda: [e for e in follower.events() if e["kind"] == "step.started" and e["stepId"] == "second"],
        "the second step, printed as it started",
    )
    assert follower.process.poll() is None and started[0]["path"] == [run_id]
    (runtime.root / "b").touch()
    code, stderr = follower.end()
    assert code == 0 and driver.wait(timeout=120) == 0, stderr
    printed = follower.events()
    assert printed == events(runtime, run_id)  # every event, once, in commit order, as the journal holds them
    assert [e["seq"] for e in printed] == sorted({e["seq"] for e in printed})
    assert printed[0]["kind"] == "run.published" and printed[-1]["kind"] == "run.completed"
    assert {e["runId"] for e in printed} == {run_id}
    dispatched = next(e for e in printed if e["kind"] == "unit.dispatched" and e["stepId"] == "second")
    assert dispatched["unitId"] == "second:solo" and dispatched["attempt"] == 1 == dispatched["data"]["attempt"]


def test_a_follower_of_an_aborted_drive_exits_130_and_a_settled_run_exits_as_run_does(runtime: Runtime) -> None:
    driver = runtime.start("run", runtime.compile("wf.akm", TWO_WAITS))
    eventually(lambda: (runtime.root / "first-started").exists(), "the first step")
    run_id = run_id_of(runtime)
    follower = Lines(runtime.start("events", run_id, "--follow"))
    eventually(lambda: any("unit.dispatched" in line for line in follower.lines), "the history")
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=60) == 130
    code, stderr = follower.end()
    assert code == 130 and "Traceback" not in stderr, stderr
    assert any("unit.aborted" in line for line in follower.lines)
    failed = runtime.run_json(runtime.compile("fails.akm", FAILS))[1]["runId"]
    assert runtime.akm("events", failed, "--follow").returncode == 1
    (runtime.root / "a").touch()
    (runtime.root / "b").touch()
    assert runtime.akm("run", run_id).returncode == 0
    assert runtime.akm("events", run_id, "--follow", "--kind", "run.completed").stdout.count("\n") == 1


def test_child_runs_interleave_in_commit_order_each_on_its_lane(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": doubling_leaf("true")})
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", PARENT))
    assert code == 3
    parent = document["runId"]
    [[child]] = runtime.sql("SELECT id FROM runs WHERE parent_run_id = ?", parent)
    everything = events(runtime, parent, "--children")
    assert [e["seq"] for e in everything] == sorted(e["seq"] for e in everything)
    lanes = {tuple(e["path"]) for e in everything}
    assert lanes == {(parent,), (parent, child)}
    assert all(e["path"][-1] == e["runId"] for e in everything)
    own = events(runtime, parent)
    assert own == [e for e in everything if e["runId"] == parent]
    assert events(runtime, child)[0]["path"] == [parent, child]  # a child's own timeline keeps its lane
    followed = runtime.akm("events", parent, "--children", "--follow")
    assert followed.returncode == 3  # blocked at its approval, as `run` said
    child_lines = [line for line in followed.stdout.splitlines() if f"leaf ({child}): " in line]
    assert len(child_lines) == sum(e["runId"] == child for e in everything) and "step.started  double" in (
        child_lines[1] + child_lines[2]
    )
    assert followed.stdout.splitlines()[0].split("  ")[1:3] == ["+0.000s", "run.published"]


def test_since_and_kind_select_events(runtime: Runtime) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", FAILS))
    assert code == 1
    run_id = document["runId"]
    everything = events(runtime, run_id)
    middle = everything[2]["seq"]
    assert events(runtime, run_id, "--since", str(middle)) == [e for e in everything if e["seq"] > middle]
    chosen = events(runtime, run_id, "--kind", "step.*", "--kind", "run.fail?d")
    assert [e["kind"] for e in chosen] == ["step.started", "step.failed", "run.failed"]
    assert chosen[1]["data"]["reason"] == "exit"
    jsonl = runtime.akm("events", "--format", "jsonl", "--kind", "unit.*")  # no RUN: the latest run
    assert [json.loads(line)["kind"] for line in jsonl.stdout.splitlines()] == ["unit.dispatched", "unit.failed"]
    text = runtime.akm("events", run_id, "--kind", "step.failed").stdout
    assert text.endswith("  step.failed  boom (exit)\n") and text.count("\n") == 1


def test_bad_requests_say_what_is_wrong_without_a_traceback(runtime: Runtime, tmp_path: Path) -> None:
    assert "no runs yet" in runtime.akm("events").stderr
    runtime.run_json(runtime.compile("wf.akm", FAILS))
    cases = {
        ("events", "20261130T101500-3fa9c2d1"): "no run named '20261130T101500-3fa9c2d1'",
        ("events", "--kind", "stpe.*"): "--kind 'stpe.*' matches no event kind",
        ("events", "--kind", "step.[a"): "--kind 'step.[a' is not a glob of event kinds",
        ("events", "--kind", "STEP.*"): "is not a glob of event kinds",
        ("events", "--since", "-1"): "--since must be a seq, 0 or more (got -1)",
        ("events", "--since", "abc"): "argument --since: invalid integer value: 'abc'",
        ("events", "--since", "1" + "0" * 20): "is beyond 9007199254740991, the largest integer akm-run keeps",
        ("events", "--format", "yaml"): "invalid choice: 'yaml'",
    }
    for args, said in cases.items():
        result = runtime.akm(*args, "--follow")
        assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr, result


def test_a_follower_waits_for_an_undriven_run_and_a_signal_stops_it_alone(runtime: Runtime) -> None:
    driver = runtime.start("run", runtime.compile("wf.akm", TWO_WAITS))
    eventually(lambda: (runtime.root / "first-started").exists(), "the first step")
    run_id = run_id_of(runtime)
    driver.send_signal(signal.SIGINT)
    assert driver.wait(timeout=60) == 130  # the run is active, and nothing drives it now
    follower = Lines(runtime.start("events", run_id, "--follow", "--format", "jsonl"))
    eventually(lambda: any(e["kind"] == "unit.aborted" for e in follower.events()), "the history")
    assert follower.process.poll() is None  # it waits for a drive
    before = runtime.store().run(run_id)
    follower.process.send_signal(signal.SIGINT)
    code, stderr = follower.end()
    assert code == 130 and stderr == ""
    after = runtime.store().run(run_id)
    assert (
        before is not None and after is not None and (after.status, after.updated_at) == ("active", before.updated_at)
    )
