"""Notifications from the host's notifier end to end (operations.md D4): `--notify-cmd` and
`$AKM_RUN_NOTIFY_CMD` fire on blocked, failed (an abandon included) and stalled, once per event, to
the root run, with a secret-free context; a failing notifier is journaled and changes nothing of
the run; a drive killed between sending and recording sends again with the same dispatch id."""

from __future__ import annotations

import http.server
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from akm_run.locks import pid_alive
from helpers import REPO, Runtime, eventually, source

BLOCKING = source("""
    workflow "t" {
      step build { shell "echo 1" }
      step signoff { approval "Ship it?" }
    }
""")
# Appends the context it was given (stdin) and its dispatch id, one JSON line per call.
RECORD = (
    'python3 -c \'import json, os, sys; c = json.load(sys.stdin); c["env"] = os.environ["AKM_DISPATCH_ID"]; '
    'c["file"] = json.load(open(os.environ["AKM_CONTEXT"]))["runId"]; '
    'open("sent.jsonl", "a").write(json.dumps(c) + "\\n")\''
)


def _sent(root: Path) -> list[dict[str, Any]]:
    path = root / "sent.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _notifications(runtime: Runtime, run_id: str) -> list[dict[str, Any]]:
    result = runtime.akm("logs", run_id, "--notifications", "--format", "json")
    assert result.returncode == 0, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["notifications"]
    return found


def test_a_blocked_run_notifies_once_with_the_commands_that_clear_it(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", BLOCKING)
    code, document = runtime.run_json(plan, "--notify-cmd", RECORD)
    assert code == 3 and document["status"] == "blocked"
    run_id = document["runId"]
    [sent] = _sent(runtime.root)
    assert sent["event"] == "blocked" and sent["runId"] == run_id == sent["file"] and sent["status"] == "blocked"
    assert sent["step"] == {"stepId": "signoff", "reason": "blocked"}
    assert any(c.startswith(f"akm-run approve {run_id} signoff") for c in sent["commands"])
    assert {"ref", "title", "planHash", "at", "notes"} <= set(sent) and sent["env"] == sent["dispatchId"]
    code, _ = runtime.run_json(run_id)  # still blocked: the same event is not notified again
    assert code == 3 and len(_sent(runtime.root)) == 1
    [row] = _notifications(runtime, run_id)
    assert (row["event"], row["status"], row["attempts"], row["dispatchId"]) == ("blocked", "sent", 1, sent["env"])


def test_a_failing_notifier_is_journaled_and_changes_nothing_of_the_run(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", BLOCKING)
    env = runtime.env(AKM_RUN_NOTIFY_CMD="echo 'webhook said no' >&2; exit 7")
    result = runtime.akm("run", plan, "--format", "json", env=env)
    assert result.returncode == 3, result.stderr
    run_id = json.loads(result.stdout)["runId"]
    [row] = _notifications(runtime, run_id)
    assert (row["status"], row["exitCode"], row["stderrTail"]) == ("failed", 7, "webhook said no\n")
    status = runtime.akm("status", run_id).stdout
    assert f"notification failed: blocked → exit 7 (akm-run logs {run_id} --notifications)" in status
    assert "status: blocked" in status
    kinds = [k for (k,) in runtime.sql("SELECT kind FROM events WHERE run_id = ? ORDER BY seq", run_id)]
    assert kinds[-2:] == ["run.blocked", "notify.failed"]


def test_a_notifier_killed_by_a_signal_is_said_to_be(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", BLOCKING)
    result = runtime.akm("run", plan, "--format", "json", env=runtime.env(AKM_RUN_NOTIFY_CMD="kill -9 $$"))
    assert result.returncode == 3, result.stderr
    run_id = json.loads(result.stdout)["runId"]
    [row] = _notifications(runtime, run_id)
    assert (row["status"], row["exitCode"]) == ("failed", -9)  # the JSON keeps the process's own code
    assert "notification failed: blocked → killed by signal 9" in runtime.akm("status", run_id).stdout
    assert "failed   killed by signal 9" in runtime.akm("logs", run_id, "--notifications").stdout


def test_an_abandoned_run_notifies_failed(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", BLOCKING)
    code, document = runtime.run_json(plan, "--notify-cmd", RECORD)
    assert code == 3
    assert runtime.akm("abandon", document["runId"]).returncode == 0
    first, second = _sent(runtime.root)
    assert (first["event"], second["event"]) == ("blocked", "failed")
    assert second["step"]["reason"] == "abandoned" and second["status"] == "failed"


STALLING = source("""
    workflow "t" {
      step hang {
        shell "sleep 600"
        stall_after = 1s
        on_stall = terminate
      }
    }
""")


def test_a_stalled_unit_notifies_stalled_then_failed(runtime: Runtime) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", STALLING), "--notify-cmd", RECORD)
    assert code == 1 and document["failure"]["reason"] == "stalled"
    events = [s["event"] for s in _sent(runtime.root)]
    assert events == ["stalled", "failed"]
    stalled = _sent(runtime.root)[0]
    assert stalled["step"]["stepId"] == "hang" and any("akm-run logs" in c for c in stalled["commands"])
    timeline = runtime.akm("events", document["runId"], "--kind", "unit.silent", "--kind", "notify.*")
    assert timeline.returncode == 0, timeline.stderr
    silent, *told = timeline.stdout.splitlines()
    assert "unit.silent  hang hang:solo attempt 1 silent " in silent
    assert [line.split("  ")[2] for line in told] == ["notify.sent", "notify.sent"]
    assert all(" of event " in line for line in told)


# The first call records what it was sent, then kills the drive that runs it before the drive can
# journal the delivery; every later call only records.
KILLING = RECORD + '; if [ ! -e killed ]; then touch killed; kill -9 "$PPID"; fi'


@pytest.mark.sqlite_only  # on the pool the drive's process is a worker, whose recovery scale-out tests cover
def test_a_drive_killed_after_sending_sends_again_with_the_same_dispatch_id(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", BLOCKING)
    killed = runtime.akm("run", plan, "--notify-cmd", KILLING)
    assert killed.returncode == -signal.SIGKILL
    [first] = _sent(runtime.root)
    run_id = first["runId"]
    assert [r["status"] for r in _notifications(runtime, run_id)] == ["sending"]  # its sender died
    code, _ = runtime.run_json(run_id)
    assert code == 3
    first, again = _sent(runtime.root)
    assert again["dispatchId"] == first["dispatchId"] == again["env"] and again["event"] == "blocked"
    [row] = _notifications(runtime, run_id)
    assert row["status"] == "sent"


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Receiver.received.append((dict(self.headers), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_example_webhook_notifier_posts_the_context_with_its_dispatch_id(runtime: Runtime) -> None:
    _Receiver.received.clear()
    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        plan = runtime.compile("wf.akm", BLOCKING)
        script = REPO / "examples" / "notifiers" / "webhook.sh"
        env = runtime.unit_env(WEBHOOK_URL=f"http://127.0.0.1:{server.server_port}/hook")
        result = runtime.akm("run", plan, "--notify-cmd", str(script), env=env)
        assert result.returncode == 3, result.stderr
    finally:
        server.shutdown()
        thread.join()
    [(headers, body)] = _Receiver.received
    context = json.loads(body)
    assert context["event"] == "blocked" and headers["Idempotency-Key"] == context["dispatchId"]


# The plan's own notifier: sent on completion with the exported outputs, its env as a unit's (a
# secret from the runtime's environment, never in the context), bounded by its timeout and retried.
NOTIFYING = source("""
    workflow "t" {
      notify {
        on = [completed]
        shell "echo \\"$HOOK\\" > hook.txt; cat >> sent.jsonl; echo >> sent.jsonl"
        env { HOOK = secret("NOTIFY_HOOK") }
      }
      outputs { answer = steps.build.output }
      step build { shell "echo 42" }
    }
""")
HANGING = source("""
    workflow "t" {
      notify {
        on = [completed, failed]
        shell "echo tried >> tries.txt; sleep 30"
        timeout = 1s
        retry = { max = 1, on = [timeout] }
      }
      step build { shell "echo 1" }
    }
""")


def test_the_plans_notifier_is_sent_completed_with_its_secret_env(runtime: Runtime) -> None:
    env = runtime.unit_env(NOTIFY_HOOK="https://hooks.example.com/secret-token")
    result = runtime.akm("run", runtime.compile("wf.akm", NOTIFYING), "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    [sent] = _sent(runtime.root)
    assert sent["event"] == "completed" and sent["exported"] == {"answer": 42}
    assert "secret-token" not in json.dumps(sent)
    assert (runtime.root / "hook.txt").read_text() == "https://hooks.example.com/secret-token\n"


def test_a_hanging_notifier_is_bounded_by_its_timeout_and_retried_and_the_run_is_unchanged(runtime: Runtime) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", HANGING))
    assert code == 0 and document["status"] == "completed"
    [row] = _notifications(runtime, document["runId"])
    assert (row["event"], row["status"], row["reason"]) == ("completed", "failed", "timeout")
    assert (runtime.root / "tries.txt").read_text() == "tried\ntried\n"
    status = runtime.akm("status", document["runId"]).stdout
    assert "notification failed: completed → timeout" in status


PARENT = source("""
    workflow "parent" {
      step review { uses "child" }
    }
""")
CHILD = source("""
    workflow "child" {
      notify {
        on = [blocked]
        shell "echo child >> child-notified.txt"
      }
      step signoff { approval "Ship it?" }
    }
""")


def test_a_childs_block_notifies_the_root_once_with_the_chain(runtime: Runtime) -> None:
    plan = runtime.compile("parent.akm", PARENT, {"child.akm": CHILD})
    code, document = runtime.run_json(plan, "--notify-cmd", RECORD)
    assert code == 3
    [sent] = _sent(runtime.root)
    assert sent["event"] == "blocked" and sent["runId"] == document["runId"]
    root, child = sent["chain"]
    assert (root["runId"], root["stepId"]) == (document["runId"], "review")
    assert (child["ref"], child["stepId"]) == ("child", "signoff")
    assert any("akm-run approve " + child["runId"] + " signoff" in c for c in sent["commands"])
    assert not (runtime.root / "child-notified.txt").exists()  # a child's own notify runs only top-level


def test_a_workers_notifier_is_remembered_on_the_runs_it_drives(pooled: Runtime) -> None:
    pooled.start_worker(options=("--notify-cmd", RECORD))
    code, document = pooled.run_json(pooled.compile("wf.akm", BLOCKING))
    assert code == 3
    [sent] = _sent(pooled.root)
    assert sent["event"] == "blocked" and sent["runId"] == document["runId"]
    [(remembered,)] = pooled.sql("SELECT notify_cmd FROM runs WHERE id = ?", document["runId"])
    assert remembered == RECORD


WAITING = source("""
    workflow "t" {
      step wait {
        shell "while [ ! -e go ]; do sleep 0.1; done; echo 1"
        stall_after = 1s
      }
    }
""")


@pytest.mark.slow
def test_a_stalled_notification_arrives_while_the_silent_unit_still_runs(runtime: Runtime) -> None:
    driver = runtime.start("run", runtime.compile("wf.akm", WAITING), "--notify-cmd", RECORD)
    try:
        [sent] = eventually(lambda: _sent(runtime.root), "the stalled notification")
        assert sent["event"] == "stalled" and sent["step"]["stepId"] == "wait" and sent["status"] == "active"
    finally:
        (runtime.root / "go").write_text("")
        driver.communicate(timeout=120)
    assert driver.returncode == 0 and len(_sent(runtime.root)) == 1
    [row] = _notifications(runtime, sent["runId"])
    assert (row["event"], row["status"], row["attempts"]) == ("stalled", "sent", 1)


# A notifier that leaves a process of its own session behind, holding its stderr open (until `go`
# exists, at most a minute), and exits 0; once `slow` exists it hangs past its timeout instead.
HOLDER = source("""
    #!/bin/sh
    setsid sh -c 'echo $$ >> held.pid; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done' &
    echo told >&2
    if [ -e slow ]; then sleep 600; fi
""")
HOLDING = source("""
    workflow "t" {
      notify {
        on = [blocked, completed]
        script "scripts/notify.sh"
        timeout = 2s
      }
      step ok { approval "ok?" }
    }
""")


def _held(root: Path) -> list[int]:
    path = root / "held.pid"
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def test_a_notifier_is_decided_by_its_exit_not_by_a_process_holding_its_stderr(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", HOLDING, {"scripts/notify.sh": HOLDER})
    try:
        code, document = runtime.run_json(plan)
        assert code == 3, document
        run_id = document["runId"]
        [held] = eventually(lambda: _held(runtime.root), "the held process's pid")
        assert pid_alive(held)  # the drive went on with the notifier's stderr still open
        [row] = _notifications(runtime, run_id)
        assert (row["event"], row["status"], row["exitCode"]) == ("blocked", "sent", 0)
        (runtime.root / "slow").write_text("")  # before the approval: on the pool a worker goes on at once
        approved = runtime.akm("approve", run_id, "ok", "--by", "ada")
        assert approved.returncode == 0, approved.stderr  # the drive let go of the run's lock
        code, document = runtime.run_json(run_id)
        assert code == 0 and document["status"] == "completed", document
        _, row = _notifications(runtime, run_id)
        assert (row["event"], row["status"], row["reason"], row["stderrTail"]) == (
            "completed",
            "failed",
            "timeout",
            "told\n",
        )
        assert all(pid_alive(pid) for pid in _held(runtime.root))  # bounded by the timeout, not by them
    finally:
        (runtime.root / "go").write_text("")


NOISY = source("""
    workflow "t" {
      notify {
        on = [completed]
        shell "yes 'notifier noise' | head -c 100000000 >&2; echo last words >&2; exit 1"
      }
      step build { shell "echo 1" }
    }
""")
PEAK = "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"


@pytest.mark.sqlite_only  # measures the driver, the process that sends a run's `completed` on SQLite
def test_a_notifiers_stderr_is_kept_as_a_bounded_tail(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", NOISY)
    command = [sys.executable, "-c", PEAK, sys.executable, "-m", "akm_run", "run", str(plan)]
    measured = subprocess.run(command, cwd=runtime.root, env=runtime.env(), capture_output=True, text=True, check=True)
    peak_kib = int(measured.stdout.split()[-1])
    assert peak_kib * 1024 < 100_000_000  # the driver never held what the notifier wrote
    [run] = json.loads(runtime.akm("list", "--format", "json").stdout)["runs"]
    [row] = _notifications(runtime, run["id"])
    assert (row["status"], row["exitCode"]) == ("failed", 1)
    tail = row["stderrTail"]
    assert "\nnotifier noise\n" in tail and tail.endswith("last words\n") and len(tail.encode()) <= 4096
