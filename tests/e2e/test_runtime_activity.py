"""Unit activity end to end (operations.md D6): real units append progress frames and pulses to
`$AKM_PROGRESS`, `status` shows them while they run, a silent unit gets one `unit.silent` per
silent stretch and a hint, `on_stall = terminate` ends it as a timeout does (reason `stalled`), and
what a unit puts at that path cannot wedge or crash the run. Units wait on files the test creates,
so no assertion depends on how fast the machine is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import Runtime, committed, eventually, source

# A unit that reports, then waits for the test's `go` file (a pulse every 0.2 s keeps it active).
REPORTING = source("""
    workflow "t" {
      step index {
        script "scripts/index.sh"
        stall_after = 1m
      }
    }
""")
INDEX = source("""
    #!/bin/sh
    printf '%s\\n' '{"note": "Indexing", "progress": 240, "total": 1000}' >> "$AKM_PROGRESS"
    printf 'not json\\n[1, 2]\\n{"progress": -1}\\n' >> "$AKM_PROGRESS"
    printf '\\377\\376\\n' >> "$AKM_PROGRESS"
    head -c 10000 /dev/zero | tr '\\0' x >> "$AKM_PROGRESS"; echo >> "$AKM_PROGRESS"
    while [ ! -e go ]; do sleep 0.2; printf '{}\\n' >> "$AKM_PROGRESS"; done
    echo '{"done": true}'
""")


def _status(runtime: Runtime) -> dict[str, Any]:
    result = runtime.akm("status", "--format", "json")
    if "no runs yet" in result.stderr:  # `run` has not published it yet
        return {"steps": []}
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _running(runtime: Runtime, step: str) -> list[dict[str, Any]]:
    steps = {s["stepId"]: s for s in _status(runtime)["steps"]}
    found: list[dict[str, Any]] = steps.get(step, {}).get("running", [])
    return found


def test_progress_frames_show_in_status_and_logs_and_invalid_lines_are_counted(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", REPORTING, {"scripts/index.sh": INDEX})
    driver = runtime.start("run", plan, "--format", "json")
    try:
        [unit] = eventually(
            lambda: [u for u in _running(runtime, "index") if u.get("progress", {}).get("note")], "the frame"
        )
        assert unit["progress"] == {"note": "Indexing", "progress": 240, "total": 1000}
        assert "silent" not in unit and "itemIndex" not in unit
        text = runtime.akm("status").stdout
        assert "→ index  running" in text and '"Indexing"  240/1000  last activity' in text, text
    finally:
        (runtime.root / "go").write_text("")
        _, err = driver.communicate(timeout=120)
    assert driver.returncode == 0, err
    logs = json.loads(runtime.akm("logs", "--format", "json").stdout)
    [attempt] = logs["units"][0]["attempts"]
    assert attempt["progress"] == {"note": "Indexing", "progress": 240, "total": 1000}
    assert attempt["progressIgnored"] == 5 and "lastActivityAt" in attempt
    assert "progress: 5 lines ignored" in runtime.akm("logs").stdout


SILENT = source("""
    workflow "t" {
      step review {
        map params.items {
          script "scripts/quiet.sh"
          stall_after = 1s
        }
      }
      params { items: list[string] = ["a", "b"] }
    }
""")
# Item "b" is silent until the test creates `speak`, pulses once, then is silent again until `go`.
QUIET = source("""
    #!/bin/sh
    item=$(sed -n 's/.*"item": *"\\([a-z]*\\)".*/\\1/p' "$AKM_CONTEXT")
    if [ "$item" = b ]; then
      while [ ! -e speak ]; do sleep 0.1; done
      printf '{}\\n' >> "$AKM_PROGRESS"
      touch spoke
    fi
    while [ ! -e go ]; do sleep 0.1; done
    echo '"ok"'
""")


def _unit_events(runtime: Runtime, run_id: str) -> list[tuple[str, str]]:
    rows = runtime.sql(
        "SELECT kind, unit_id FROM events WHERE run_id = ? AND kind IN ('unit.silent', 'unit.active') ORDER BY seq",
        run_id,
    )
    return [(str(k), str(u)) for k, u in rows]


@pytest.mark.slow
def test_a_silent_unit_gets_one_silent_event_per_stretch_and_status_names_what_to_do(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SILENT, {"scripts/quiet.sh": QUIET})
    driver = runtime.start("run", plan)
    try:
        silent = eventually(
            lambda: len([u for u in _running(runtime, "review") if "silent" in u]) == 2 and 1, "silence"
        )
        assert silent
        run_id = _status(runtime)["run"]["id"]
        text = runtime.akm("status").stdout
        assert "item 1/2" in text and "(silent for" in text and "stall_after 1s)" in text, text
        assert f"akm-run logs {run_id} review --unit 1" in text and f"akm-run pause {run_id} review" in text, text
        assert "let the timeout act" in text
        # status sees silence by the clock; a worker journals it at its next sample (every 5 s at most)
        eventually(lambda: len(_unit_events(runtime, run_id)) == 2, "the first silent stretches journaled")
        (runtime.root / "speak").write_text("")
        eventually(lambda: (runtime.root / "spoke").exists(), "the pulse")
        # b becomes active, then silent again: two stretches of b, one of a
        eventually(lambda: len(_unit_events(runtime, run_id)) >= 4, "the second silent stretch")
    finally:
        (runtime.root / "speak").write_text("")
        (runtime.root / "go").write_text("")
        driver.communicate(timeout=120)
    assert driver.returncode == 0
    events = _unit_events(runtime, run_id)
    units = sorted({u for _, u in events})
    by_unit = {u: [k for k, v in events if v == u] for u in units}
    assert sorted(by_unit.values(), key=len) == [
        ["unit.silent"],
        ["unit.silent", "unit.active", "unit.silent"],
    ]


TERMINATED = source("""
    workflow "t" {
      step hang {
        shell "echo started >&2; sleep 600"
        stall_after = 1s
        on_stall = terminate
        retry = { max = 1, on = [stalled] }
      }
    }
""")


def test_on_stall_terminate_ends_a_silent_attempt_with_reason_stalled_and_retry_on_stalled(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", TERMINATED)
    code, document = runtime.run_json(plan)
    assert code == 1 and document["failure"]["reason"] == "stalled", document
    logs = json.loads(runtime.akm("logs", "--format", "json").stdout)
    attempts = logs["units"][0]["attempts"]
    assert [(a["status"], a["reason"]) for a in attempts] == [("failed", "stalled"), ("failed", "stalled")]
    assert "stall_after of 1s" in attempts[0]["message"] and "SIGTERM" in attempts[0]["message"]
    run_id = document["runId"]
    assert [k for k, _ in _unit_events(runtime, run_id)] == ["unit.silent", "unit.silent"]


# A unit that pulses stays alive past its stall_after; one that only writes stderr does too.
ALIVE = source("""
    workflow "t" {
      step pulses {
        shell "i=0; while [ $i -lt 15 ]; do printf '{}\\\\n' >> \\"$AKM_PROGRESS\\"; sleep 0.2; i=$((i+1)); done; echo 1"
        stall_after = 2s
        on_stall = terminate
      }
      step talks {
        shell "i=0; while [ $i -lt 15 ]; do echo working >&2; sleep 0.2; i=$((i+1)); done; echo 2"
        stall_after = 2s
        on_stall = terminate
      }
    }
""")


@pytest.mark.slow
def test_pulses_and_stderr_count_as_activity(runtime: Runtime) -> None:
    code, document = runtime.run_json(runtime.compile("wf.akm", ALIVE))
    assert code == 0, document
    assert _unit_events(runtime, document["runId"]) == []


# What a unit may do to its progress path: replace it with a link, a fifo, a directory, or a new
# file; write a huge backlog; delete it. None may wedge or crash the run.
HOSTILE = source("""
    #!/bin/sh
    case "$1" in
      link) rm -f "$AKM_PROGRESS"; ln -s /dev/zero "$AKM_PROGRESS" ;;
      fifo) rm -f "$AKM_PROGRESS"; mkfifo "$AKM_PROGRESS" ;;
      dir) rm -f "$AKM_PROGRESS"; mkdir "$AKM_PROGRESS" ;;
      gone) rm -f "$AKM_PROGRESS" ;;
      flood) head -c 3000000 /dev/zero | tr '\\0' '\\n' >> "$AKM_PROGRESS"
             printf '{"note": "last"}\\n' >> "$AKM_PROGRESS" ;;
      new) rm -f "$AKM_PROGRESS"; printf '{"note": "replaced"}\\n' > "$AKM_PROGRESS" ;;
    esac
    sleep 1.5
    echo '"done"'
""")
HOSTILE_WF = source("""
    workflow "t" {
      step each {
        map params.how {
          concurrency = 6
          script "scripts/hostile.sh"
          stall_after = 1m
        }
      }
      params { how: list[string] = ["link", "fifo", "dir", "gone", "flood", "new"] }
    }
""")


def test_what_a_unit_plants_at_its_progress_path_cannot_wedge_the_run(runtime: Runtime) -> None:
    hostile = HOSTILE.replace(
        'case "$1" in', 'how=$(sed -n \'s/.*"item": *"\\([a-z]*\\)".*/\\1/p\' "$AKM_CONTEXT")\ncase "$how" in'
    )
    plan = runtime.compile("wf.akm", HOSTILE_WF, {"scripts/hostile.sh": hostile})
    code, document = runtime.run_json(plan)
    assert code == 0, document
    logs = json.loads(runtime.akm("logs", "--format", "json").stdout)
    notes = {u["itemIndex"]: u["attempts"][-1].get("progress", {}).get("note") for u in logs["units"]}
    assert notes[4] == "last" and notes[5] == "replaced"
    assert all(notes[i] is None for i in range(4))


# A `parallel` block's members and a worktree-isolated step are units like any other: watched for
# silence, ended `stalled` under `on_stall = terminate`, and notified.
WATCHED = source("""
    workflow "t" {
      defaults {
        stall_after = 1s
        on_stall = terminate
      }
      parallel checks {
        fail_fast = false
        step quiet { shell "sleep 600" }
        step isolated {
          shell "test -n \\"$AKM_WORKTREE\\" && sleep 600"
          isolation = worktree
        }
      }
    }
""")


def test_parallel_members_and_worktree_attempts_are_watched_for_silence(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", WATCHED)
    runtime.write({".gitignore": ".akm/\n"})
    committed(runtime.root)
    code, document = runtime.run_json(plan, "--notify-cmd", "cat >> sent.jsonl; echo >> sent.jsonl")
    assert code == 1, document
    sent = [json.loads(line) for line in (runtime.root / "sent.jsonl").read_text().splitlines() if line]
    told = sorted((c["event"], c.get("step", {}).get("stepId", "")) for c in sent)
    assert told == [("failed", "checks"), ("stalled", "isolated"), ("stalled", "quiet")], told
    logs = json.loads(runtime.akm("logs", "--format", "json").stdout)
    reasons = {unit["stepId"]: [a["reason"] for a in unit["attempts"]] for unit in logs["units"]}
    assert reasons == {"quiet": ["stalled"], "isolated": ["stalled"]}, reasons
    assert sorted(k for k, _ in _unit_events(runtime, document["runId"])) == ["unit.silent", "unit.silent"]
