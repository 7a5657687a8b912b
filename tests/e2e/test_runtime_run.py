"""akm-run end to end: real workspaces compiled by akmc, run by a real `akm-run` process with a real
state database. Each test states a workflow and what the run must do."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import socket
import sqlite3
import stat
import struct
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

import pytest

from akmc.compiler import Session
from helpers import Runtime, eventually, source

ECHO_CONTEXT = source("""
    workflow "ctx" {
      params { who: string = "ada" }
      step show {
        shell "cat"
        inputs = [params.who]
      }
    }
""")


# -- only verified plans run --------------------------------------------------------------------------


@pytest.mark.before_store
def test_a_tampered_plan_is_refused_before_anything_is_written(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step touch {
            shell "touch touched"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    plan.write_text(plan.read_text().replace("touch touched", "touch TOUCHED"))
    result = runtime.akm("run", plan)
    assert result.returncode == 4 and "refused" in result.stderr and "planHash" in result.stderr
    assert runtime.untouched() and not (runtime.root / "TOUCHED").exists()


def test_expect_hash_pins_the_reviewed_plan(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step ok {
            shell "true"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    wrong = "sha256:" + "0" * 64
    assert runtime.akm("run", plan, "--expect-hash", wrong).returncode == 4
    assert runtime.untouched()
    right = json.loads(plan.read_text())["planHash"]
    assert runtime.akm("run", plan, "--expect-hash", right).returncode == 0


def test_a_tampered_stored_plan_is_refused_on_every_drive(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step wait {
            approval "ok?"
          }
          step after {
            shell "touch after"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 3
    runtime.sql("UPDATE runs SET plan_json = replace(plan_json, 'touch after', 'touch evil')")
    assert runtime.akm("approve", document["runId"], "wait").returncode == 4
    result = runtime.akm("run", document["runId"])
    assert result.returncode == 4 and "does not verify" in result.stderr
    assert not (runtime.root / "evil").exists()


# -- params --------------------------------------------------------------------------------------------


PARAMS = source("""
    workflow "t" {
      params {
        n: int(min: 1)
        flag: bool = false
        tags: list[string] = []
        name: "a" | "b" = "a"
      }
      step show {
        shell "cat"
        inputs = [params.n, params.flag, params.tags, params.name]
      }
    }
""")


def test_params_are_parsed_by_type_with_defaults(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", PARAMS)
    code, document = runtime.run_json(plan, "--param", "n=3", "--param", 'tags=["x", "y"]')
    assert code == 0, document
    show_step = runtime.store().step(document["runId"], "show")
    assert show_step is not None
    context = show_step.output
    assert context["inputs"] == {"params.n": 3, "params.flag": False, "params.tags": ["x", "y"], "params.name": "a"}
    (runtime.root / "p.json").write_text('{"n": 5, "flag": true}')
    code, document = runtime.run_json(plan, "--params-file", "p.json", "--param", "name=b")
    show_step = runtime.store().step(document["runId"], "show")
    assert show_step is not None and show_step.output["inputs"]["params.name"] == "b"
    assert show_step.output["inputs"]["params.flag"] is True


@pytest.mark.before_store
def test_bad_params_exit_two_and_publish_nothing(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", PARAMS)
    for args in (
        ["--param", "n=0"],
        ["--param", "n=x"],
        [],
        ["--param", "nn=1"],
        ["--param", "n=1", "--param", "name=c"],
    ):
        result = runtime.akm("run", plan, *args)
        assert result.returncode == 2 and "bad params" in result.stderr, (args, result.stderr)
    assert runtime.untouched()


# -- the unit process contract -------------------------------------------------------------------------


def test_context_on_stdin_and_at_akm_context_and_the_akm_variables(runtime: Runtime) -> None:
    runtime.write(
        {
            "scripts/ctx.sh": source("""
                #!/bin/sh
                set -eu
                cmp - "$AKM_CONTEXT" >/dev/null
                printf '{"same": true, "run": "%s", "step": "%s", "unit": "%s", "dispatch": "%s", "attempt": "%s"}' "$AKM_RUN_ID" "$AKM_STEP_ID" "$AKM_UNIT_ID" "$AKM_DISPATCH_ID" "$AKM_ATTEMPT"
            """)
        }
    )
    src = source("""
        workflow "t" {
          step show {
            script "scripts/ctx.sh"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    show_step = runtime.store().step(document["runId"], "show")
    assert show_step is not None
    output = show_step.output
    assert output["same"] is True and output["run"] == document["runId"]
    assert output["step"] == "show" and output["unit"] == "show:solo" and output["attempt"] == "1"
    assert output["dispatch"].startswith("d-")


def test_context_document_shape(runtime: Runtime) -> None:
    """A unit sees its step's declared inputs and nothing else: no other param reaches it."""
    plan = runtime.compile(
        "wf.akm",
        ECHO_CONTEXT.replace('who: string = "ada"', 'who: string = "ada"\n    hidden: string = "not-for-units"'),
    )
    code, document = runtime.run_json(plan)
    assert code == 0
    show_step = runtime.store().step(document["runId"], "show")
    assert show_step is not None
    context = show_step.output
    assert set(context) == {"runId", "stepId", "unitId", "dispatchId", "attempt", "inputs"}
    assert context["inputs"] == {"params.who": "ada"} and "not-for-units" not in json.dumps(context)


def test_environment_is_minimal_and_env_entries_resolve_at_dispatch(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step env {
            shell "env"
            env {
              LIT = "plain"
              KEEP = passthrough
              TOKEN = secret("MY_TOKEN")
            }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    env = runtime.unit_env(KEEP="kept", LEAK="leaked", MY_TOKEN="s3cr3t-value")
    code, document = runtime.run_json(plan, env=env)
    assert code == 0
    env_step = runtime.store().step(document["runId"], "env")
    assert env_step is not None
    lines = env_step.output.splitlines()
    names = {line.split("=", 1)[0] for line in lines}
    assert "LEAK" not in names and "MY_TOKEN" not in names
    assert "LIT=plain" in lines and "KEEP=kept" in lines
    assert "TOKEN=***" in lines  # the secret reached the unit but was redacted from what is stored
    assert "s3cr3t-value" not in runtime.dump(everything=True)


def test_a_missing_secret_fails_the_unit_naming_the_variable(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step s {
            shell "true"
            env { T = secret("NOT_SET_ANYWHERE") }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan, "--no-preflight")  # preflight would refuse it before publishing
    assert code == 1
    assert document["failure"]["reason"] == "secret_missing" and "NOT_SET_ANYWHERE" in document["failure"]["message"]


def test_stdout_rules(runtime: Runtime) -> None:
    src = source(r"""
        workflow "t" {
          step text {
            shell "printf 'hello\\n'"
          }
          step json {
            shell "echo '{\"a\": 1}'"
          }
          step typed {
            shell "echo '{\"a\": \"x\"}'"
            output: { a: int }
            on_error = continue
          }
          step big {
            shell "head -c 1048577 /dev/zero | tr '\\0' a"
            on_error = continue
          }
          step noisy {
            shell "echo oops >&2; exit 3"
            on_error = continue
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    store = runtime.store()
    text_step = store.step(document["runId"], "text")
    assert text_step is not None and text_step.output == "hello"
    json_step = store.step(document["runId"], "json")
    assert json_step is not None and json_step.output == {"a": 1}
    typed_step = store.step(document["runId"], "typed")
    assert typed_step is not None and typed_step.failure_reason == "output_invalid"
    big_step = store.step(document["runId"], "big")
    assert big_step is not None and big_step.failure_reason == "output_too_large"
    noisy = store.step(document["runId"], "noisy")
    assert noisy is not None and noisy.failure_reason == "exit" and "exit status 3" in (noisy.failure_message or "")
    [attempt] = store.attempts(document["runId"], "noisy:solo")
    assert attempt.exit_code == 3 and attempt.stderr_tail == "oops\n"


def test_script_runs_from_a_private_file_by_its_shebang(runtime: Runtime) -> None:
    runtime.write(
        {
            "scripts/who.py": source("""
                #!/usr/bin/env python3
                import json, os, stat, sys
                mode = stat.S_IMODE(os.stat(sys.argv[0]).st_mode)
                print(json.dumps({"mode": oct(mode), "python": True}))
            """)
        }
    )
    src = source("""
        workflow "t" {
          step py {
            script "scripts/who.py"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    (runtime.root / "scripts" / "who.py").write_text("#!/bin/sh\necho changed\n")  # the plan froze the bytes
    code, document = runtime.run_json(plan)
    assert code == 0
    py_step = runtime.store().step(document["runId"], "py")
    assert py_step is not None and py_step.output == {"mode": oct(0o700), "python": True}


def test_agent_gets_instructions_on_stdin(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step think {
            agent "Summarise the input."
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan, "--no-preflight")  # preflight would refuse it before publishing
    assert code == 1 and document["failure"]["reason"] == "agent_unavailable"
    code, document = runtime.run_json(plan, "--agent-cmd", "cat")
    think_step = runtime.store().step(document["runId"], "think")
    assert code == 0 and think_step is not None and think_step.output == "Summarise the input."
    code, document = runtime.run_json(plan, env=runtime.unit_env(AKM_AGENT_CMD="tr a-z A-Z"))
    think_step = runtime.store().step(document["runId"], "think")
    assert think_step is not None and think_step.output == "SUMMARISE THE INPUT."


# -- execution -----------------------------------------------------------------------------------------


def test_map_keeps_item_order_and_bounds_concurrency(runtime: Runtime) -> None:
    runtime.write(
        {
            "scripts/slot.sh": source("""
                #!/bin/sh
                set -eu
                mkdir -p slots
                touch "slots/$AKM_DISPATCH_ID"
                ls slots | wc -l >> seen
                sleep 0.3
                rm "slots/$AKM_DISPATCH_ID"
                python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["item"] * 2))' < "$AKM_CONTEXT"
            """)
        }
    )
    src = source("""
        workflow "t" {
          params { items: list[int] = [5, 1, 4, 2, 3, 6] }
          step fan {
            map params.items {
              concurrency = 2
              script "scripts/slot.sh"
            }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    fan_step = runtime.store().step(document["runId"], "fan")
    assert fan_step is not None and fan_step.output == [10, 2, 8, 4, 6, 12]
    seen = [int(n) for n in (runtime.root / "seen").read_text().split()]
    assert max(seen) <= 2 and len(seen) == 6
    code, document = runtime.run_json(plan, "--max-concurrency", "1")
    assert max(int(n) for n in (runtime.root / "seen").read_text().split()[6:]) == 1


def test_route_skips_the_unselected_targets(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          params { mood: "a" | "b" | "c" = "a" }
          step pick {
            route params.mood {
              "a" -> left
              "b" -> right
            }
          }
          step left {
            shell "echo left"
          }
          step right {
            shell "echo right"
          }
          step after {
            shell "echo after"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan, "--param", "mood=b")
    assert code == 0
    statuses = {s.step_id: s.status for s in runtime.store().steps(document["runId"])}
    assert statuses == {"pick": "completed", "left": "skipped", "right": "completed", "after": "completed"}
    code, document = runtime.run_json(plan, "--param", "mood=c")
    assert code == 1 and document["failure"]["reason"] == "route_no_match"


def test_retry_gets_a_new_dispatch_id_and_succeeds(runtime: Runtime) -> None:
    runtime.write(
        {
            "scripts/flaky.sh": source("""
                #!/bin/sh
                if [ ! -e tried ]; then touch tried; exit 7; fi
                echo ok
            """)
        }
    )
    src = source("""
        workflow "t" {
          step f {
            script "scripts/flaky.sh"
            retry = { max = 2, on = [exit] }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    attempts = runtime.store().attempts(document["runId"], "f:solo")
    assert [a.status for a in attempts] == ["failed", "completed"]
    assert attempts[0].dispatch_id != attempts[1].dispatch_id


def test_unit_timeout_kills_the_whole_process_group(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step slow {
            shell "sleep 30 & echo $! > child.pid; wait"
            timeout = 1s
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 1 and document["failure"]["reason"] == "timeout"
    child = int((runtime.root / "child.pid").read_text())
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_on_error_continue_and_max_units(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          params { items: list[int] = [1, 2, 3] }
          limits { max_units = 3 }
          step bad {
            shell "exit 1"
            on_error = continue
          }
          step fan {
            map params.items {
              shell "true"
            }
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 1 and document["failure"]["reason"] == "budget_exceeded"
    bad_step = runtime.store().step(document["runId"], "bad")
    assert bad_step is not None and bad_step.status == "failed"


SKIPPING = """
    workflow "t" {
      params { go: string = "y" }
      outputs {
        skipped: string | null = steps.one.output
      }
      step pick {
        route params.go {
          "x" -> one
          _ -> two
        }
      }
      step one {
        shell "echo '{\\"n\\": 1}'"
      }
      step two {
        shell "echo 2"
      }
      step read {
        shell "python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[\\"inputs\\"]))'"
        inputs = [READ]
      }
    }
"""


def test_a_skipped_step_reads_as_null_as_the_checker_types_it(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", source(SKIPPING.replace("READ", "steps.one.output")))
    code, document = runtime.run_json(plan)
    assert code == 0, document
    read_step = runtime.store().step(document["runId"], "read")
    assert read_step is not None and read_step.output == {"steps.one.output": None}
    assert document["exported"] == {"skipped": None}  # `string | null`, as the checker accepted


def test_a_path_beneath_a_skipped_step_does_not_resolve(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", source(SKIPPING.replace("READ", "steps.one.output.n")))
    code, document = runtime.run_json(plan)
    assert code == 1 and document["failure"] == {
        "stepId": "read",
        "reason": "input_unresolved",
        "message": "steps.one.output.n did not resolve",
    }


def test_outputs_are_validated_in_the_completing_transaction(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          outputs {
            count: string = steps.n.output
          }
          step n {
            shell "echo 5"
          }
        }
    """)
    runtime.write({"wf.akm": src})
    assert Session(runtime.root).check(runtime.root / "wf.akm").plan is not None
    plan = runtime.compile("wf.akm")
    code, document = runtime.run_json(plan)
    assert code == 1 and document["error"]["code"] == "WORKFLOW_OUTPUT_INVALID" and document["status"] == "active"
    assert "count" in document["error"]["message"]
    store = runtime.store()
    run_row = store.run(document["runId"])
    assert run_row is not None and run_row.status == "active"
    n_step = store.step(document["runId"], "n")
    assert n_step is not None and n_step.status != "completed"
    assert not [e for e in store.events(document["runId"]) if e[0] in ("step.completed", "run.completed")]


def test_exported_result_without_outputs(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "true"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 0 and document["exported"] == {"runId": document["runId"], "status": "completed"}


# -- gates and approvals ----------------------------------------------------------------------------------


GATED = source(r"""
    workflow "t" {
      step draft {
        shell "python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps({\"n\": len(c.get(\"gateFeedback\") or \"\")}))'"
        gate {
          check shell "python3 scripts/check.py"
          max_loops = 2
        }
      }
    }
""")
CHECK = source("""
    import json, os, sys
    ctx = json.load(open(os.environ['AKM_CONTEXT']))
    limit = int(open('limit').read())
    if ctx['output']['n'] >= limit:
        sys.exit(0)
    print('x' * (ctx['output']['n'] + 1))
    sys.exit(1)
""")


def test_gate_feeds_back_until_it_passes(runtime: Runtime) -> None:
    runtime.write({"scripts/check.py": CHECK, "limit": "2"})
    plan = runtime.compile("wf.akm", GATED)
    code, document = runtime.run_json(plan)
    assert code == 0, document
    store = runtime.store()
    draft_step = store.step(document["runId"], "draft")
    assert draft_step is not None and draft_step.output == {"n": 2}
    assert store.unit(document["runId"], "draft:solo~l2") is not None


def test_gate_blocks_after_max_loops_and_resume_reopens(runtime: Runtime) -> None:
    runtime.write({"scripts/check.py": CHECK, "limit": "9"})
    plan = runtime.compile("wf.akm", GATED)
    code, document = runtime.run_json(plan)
    assert code == 3 and document["blocked"]["stepId"] == "draft"
    assert "> xxx" in document["blocked"]["notes"] and "akm-run resume" in document["blocked"]["notes"]
    run_id = document["runId"]
    status = json.loads(runtime.akm("status", run_id, "--format", "json").stdout)
    assert status["steps"][0]["failureReason"] == "gate_rejected"
    code, again = runtime.run_json(run_id)  # the engine never resumes a blocked run by itself
    assert (
        code == 3
        and again["blocked"]["stepId"] == "draft"
        and again["blocked"]["notes"] == document["blocked"]["notes"]
    )
    (runtime.root / "limit").write_text("3")
    assert runtime.akm("resume", run_id).returncode == 0
    code, document = runtime.run_json(run_id)
    assert code == 0, document


def test_approval_blocks_until_approved(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step ok {
            approval "Ship it?"
          }
          step after {
            shell "cat"
            inputs = [steps.ok.output]
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    run_id = document["runId"]
    assert code == 3 and f"akm-run approve {run_id} ok" in document["blocked"]["notes"]
    assert runtime.akm("approve", run_id, "after").returncode == 2
    approved = runtime.akm("approve", run_id, "ok", "--by", "alice", "--note", "fine")
    assert approved.returncode == 0, approved.stderr
    # on PostgreSQL `approve` also submits the next drive, which may have ended already
    run_row = runtime.store().run(run_id)
    assert run_row is not None and run_row.status in ("active", "completed")
    code, document = runtime.run_json(run_id)
    assert code == 0
    after_step = runtime.store().step(run_id, "after")
    assert after_step is not None
    after = after_step.output
    assert after["inputs"]["steps.ok.output"] == {"approved": True, "by": "alice", "note": "fine"}


# -- locks, status, list, abandon ---------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_a_second_driver_exits_75_and_a_dead_holder_is_reclaimed(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step ok {
            approval "wait"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, document = runtime.run_json(plan)
    assert code == 3
    run_id = document["runId"]
    lock = runtime.state / "locks" / f"{run_id}.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock.write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "started": 0}))
        result = runtime.akm("run", run_id)
        assert result.returncode == 75 and str(holder.pid) in result.stderr
        assert runtime.akm("abandon", run_id).returncode == 75
    finally:
        holder.kill()
        holder.wait()
    assert runtime.akm("run", run_id).returncode == 3  # the dead holder's lock is reclaimed
    assert not lock.exists()


def test_status_list_and_abandon(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "true"
          }
          step ok {
            approval "wait"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    _, blocked = runtime.run_json(plan)
    src = source("""
        workflow "other" {
          step fail {
            shell "exit 2"
          }
        }
    """)
    other = runtime.compile("other.akm", src)
    _, failed = runtime.run_json(other)
    text = runtime.akm("status", blocked["runId"]).stdout
    assert "✓ a " in text and "⚠ ok" in text and "Waiting for approval" in text
    document = json.loads(runtime.akm("status", blocked["runId"], "--format", "json").stdout)
    assert document["run"]["status"] == "blocked" and [s["status"] for s in document["steps"]] == [
        "completed",
        "blocked",
    ]
    assert "children" not in document
    listed = json.loads(runtime.akm("list", "--status", "failed", "--format", "json").stdout)
    assert [r["id"] for r in listed["runs"]] == [failed["runId"]]
    assert runtime.akm("abandon", blocked["runId"]).returncode == 0
    run_row = runtime.store().run(blocked["runId"])
    assert run_row is not None and run_row.status == "failed"
    assert runtime.akm("run", blocked["runId"]).returncode == 1


def test_what_a_unit_prints_never_drives_the_terminal(runtime: Runtime) -> None:
    """A unit's stderr in `run`'s result, `status` and `logs` has its escape sequences written out,
    in text and in JSON (where json.dumps leaves DEL and the C1 controls raw, U+009B among them, an
    8-bit CSI): a unit cannot clear the screen, retitle the terminal or write to its clipboard."""
    plan = runtime.compile(
        "wf.akm",
        source(r"""
        workflow "t" {
          step bad {
            shell "printf '\\033[2J\\033]0;pwned\\007oops\\302\\2332J\\n' >&2; exit 3"
          }
        }
    """),
    )
    result = runtime.akm("run", plan)
    assert result.returncode == 1 and "oops" in result.stdout
    [run] = runtime.store().runs()
    shown = [result, runtime.akm("status", run.id), runtime.akm("logs", run.id), runtime.akm("logs", run.id, "bad")]
    shown += [runtime.akm(*verb, "--format", "json") for verb in (("status", run.id), ("logs", run.id, "bad"))]
    for each in shown:
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", each.stdout + each.stderr), each.stdout
    assert "\\x1b[2J\\x1b]0;pwned\\x07oops\\x9b2J" in result.stdout
    [attempt] = json.loads(shown[-1].stdout)["units"][0]["attempts"]
    assert attempt["stderrTail"] == "\x1b[2J\x1b]0;pwned\x07oops\x9b2J\n"  # JSON escapes, the text intact
    missing = runtime.akm("run", "p\x1b[2J.json")  # an error message quoting what it was given
    assert missing.returncode == 2 and "plan file p\\x1b[2J.json does not exist" in missing.stderr


def test_no_progress_decoration_when_not_a_terminal(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "true"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    result = runtime.akm("run", plan)
    assert result.returncode == 0 and "\r" not in result.stdout + result.stderr and "\033" not in result.stderr
    assert result.stderr.splitlines()[0] == "step a started"


@pytest.mark.sqlite_only
def test_state_database_is_wal_with_migrations_recorded(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "true"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    assert runtime.akm("run", plan).returncode == 0
    with sqlite3.connect(runtime.state / "state.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM migrations").fetchone()[0] >= 1
    assert stat.S_ISDIR(os.stat(runtime.state / "locks").st_mode)


def test_an_approval_in_a_map_approves_every_item(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          params { items: list[string] = ["a", "b"] }
          step ok {
            map params.items {
              approval "Ship this one?"
            }
          }
          step after {
            shell "cat"
            inputs = [steps.ok.output[1].by]
          }
        }
    """)
    code, document = runtime.run_json(runtime.compile("wf.akm", src))
    assert code == 3
    assert runtime.akm("approve", document["runId"], "ok", "--by", "kim").returncode == 0
    code, document = runtime.run_json(document["runId"])
    assert code == 0, document
    after_step = runtime.store().step(document["runId"], "after")
    assert after_step is not None and after_step.output["inputs"] == {"steps.ok.output[1].by": "kim"}


@pytest.mark.before_store
def test_a_missing_workdir_is_refused_before_anything_is_published(runtime: Runtime) -> None:
    src = source("""
        workflow "t" {
          step a {
            shell "true"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    result = runtime.akm("run", plan, "--workdir", "nowhere")  # the preflight's `workdir` check
    assert result.returncode == 5 and "--workdir nowhere is not a directory" in result.stderr and runtime.untouched()
    unchecked = runtime.akm("run", plan, "--workdir", "nowhere", "--no-preflight")  # a usage error then
    assert unchecked.returncode == 2 and "not a directory" in unchecked.stderr and runtime.untouched()


@pytest.mark.sqlite_only
def test_a_corrupt_state_database_is_a_clear_error(runtime: Runtime) -> None:
    runtime.state.mkdir()
    (runtime.state / "state.db").write_text("not a database")
    for args in (["list"], ["status", "r1"]):
        result = runtime.akm(*args)
        assert result.returncode == 2 and "state.db cannot be used" in result.stderr
        assert "Traceback" not in result.stderr
    assert (runtime.state / "state.db").read_text() == "not a database"  # nothing overwritten


def on_a_terminal(
    runtime: Runtime, *args: str | Path, columns: int = 0, when: tuple[str, Callable[[], None]] | None = None
) -> tuple[int, str]:
    """`akm-run ARGS` with stdout and stderr on a real pseudo-terminal, `columns` wide (0: it does not
    say): the exit code and all that was written. `when` (text, action): the action is taken once,
    as soon as the text was written."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    runtime.pool()
    process = subprocess.Popen(
        [sys.executable, "-m", "akm_run", *map(str, args)],
        cwd=runtime.root,
        env=runtime.env(),
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
        if when is not None and when[0].encode() in seen:
            when[1]()
            when = None
    code = process.wait(timeout=120)
    os.close(leader)
    return code, seen.decode()


def drawn(text: str) -> list[str]:
    """Each state of the live progress line, in the order drawn (what came before the first and
    after the line was cleared for good left out)."""
    return text.split("\r\033[K")[1:-1]


def test_progress_is_drawn_only_on_a_terminal(runtime: Runtime) -> None:
    """On a terminal (a real pseudo-terminal here) a one-line progress display is drawn on stderr."""
    src = source("""
        workflow "t" {
          step a {
            shell "sleep 0.3"
          }
          step b {
            shell "true"
          }
        }
    """)
    plan = runtime.compile("wf.akm", src)
    code, text = on_a_terminal(runtime, "run", plan)
    assert code == 0
    assert "steps 0/2 done, at a, 1 unit in flight" in text and "steps 1/2 done, at b, 0 units in flight" in text
    assert "completed" in text


NESTED = {
    "workflows/c3.akm": source("""
        workflow "c3" {
          step deep {
            shell "true"
          }
        }
    """),
    **{
        f"workflows/c{n}.akm": source(f"""
            workflow "c{n}" {{
              step down {{
                uses "workflows/c{n + 1}" {{}}
              }}
            }}
        """)
        for n in (1, 2)
    },
}
NESTED_TOP = source("""
    workflow "top" {
      step down {
        uses "workflows/c1" {}
      }
      step after {
        shell "true"
      }
    }
""")


def nested_runs(runtime: Runtime) -> list[str]:
    """The `where` of the child runs, outermost first (a nested run's child is published after it)."""
    rows = runtime.sql("SELECT ref, id FROM runs WHERE parent_run_id IS NOT NULL ORDER BY created_at")
    return [f"{ref} ({run_id}): " for ref, run_id in rows]


def test_child_runs_nested_three_deep_show_each_step_as_it_goes(runtime: Runtime) -> None:
    runtime.write(NESTED)
    plan = runtime.compile("workflows/top.akm", NESTED_TOP)
    result = runtime.akm("run", plan)
    assert result.returncode == 0, result.stderr
    c1, c2, c3 = nested_runs(runtime)
    assert [line.split(" (took ")[0] for line in result.stderr.splitlines()] == [
        "step down started",
        f"{c1}step down started",
        f"{c2}step down started",
        f"{c3}step deep started",
        f"{c3}step deep completed",
        f"{c2}step down completed",
        f"{c1}step down completed",
        "step down completed",
        "step after started",
        "step after completed",
    ]


def test_the_live_line_of_nested_child_runs_is_one_line_with_the_true_counts(runtime: Runtime) -> None:
    """Every unit a parent waits on is in flight (its child run's unit too); once a step that drove a
    child run ends, the line is the parent's again; the line is cut to the terminal's width."""
    runtime.write(NESTED)
    plan = runtime.compile("workflows/top.akm", NESTED_TOP)
    code, text = on_a_terminal(runtime, "run", plan, columns=60)
    assert code == 0, text
    c1, c2, c3 = nested_runs(runtime)

    def units(n: int) -> str:
        return f"{n} unit{'s' if n != 1 else ''} in flight"

    expected = [
        f"steps 0/2 done, at down, {units(0)}",
        f"steps 0/2 done, at down, {units(1)}",
        f"steps 0/1 done, at {c1}down, {units(1)}",
        f"steps 0/1 done, at {c1}down, {units(2)}",
        f"steps 0/1 done, at {c2}down, {units(2)}",
        f"steps 0/1 done, at {c2}down, {units(3)}",
        f"steps 0/1 done, at {c3}deep, {units(3)}",
        f"steps 0/1 done, at {c3}deep, {units(4)}",
        f"steps 0/1 done, at {c3}deep, {units(3)}",
        f"steps 1/1 done, at {c3}deep, {units(3)}",
        f"steps 1/1 done, at {c3}deep, {units(2)}",
        f"steps 1/1 done, at {c2}down, {units(2)}",
        f"steps 1/1 done, at {c2}down, {units(1)}",
        f"steps 1/1 done, at {c1}down, {units(1)}",
        f"steps 1/1 done, at {c1}down, {units(0)}",
        f"steps 1/2 done, at down, {units(0)}",
        f"steps 1/2 done, at after, {units(0)}",
        f"steps 1/2 done, at after, {units(1)}",
        f"steps 1/2 done, at after, {units(0)}",
        f"steps 2/2 done, at after, {units(0)}",
    ]
    assert drawn(text) == [line[:59] for line in expected]


def test_the_live_line_of_a_map_of_200_units_counts_each_unit_once(runtime: Runtime) -> None:
    items = ", ".join(str(i) for i in range(200))
    plan = runtime.compile(
        "wf.akm",
        source(f"""
        workflow "t" {{
          params {{ items: list[int] = [{items}] }}
          step m {{
            map params.items {{
              shell "true"
            }}
          }}
        }}
    """),
    )
    code, text = on_a_terminal(runtime, "run", plan, "--max-concurrency", "8")
    assert code == 0, text
    states = drawn(text)
    counts = [
        int(m.group(2))
        for m in (re.fullmatch(r"steps ([01])/1 done, at m, (\d+) units? in flight", s) for s in states)
        if m
    ]
    assert len(counts) == len(states) == 1 + 2 * 200 + 1, states[:5]  # the step, each unit's start and end
    assert max(counts) <= 8 and min(counts) == 0 and counts[-1] == 0
    assert states[-1] == "steps 1/1 done, at m, 0 units in flight"


def test_run_of_a_run_whose_run_was_killed_draws_from_where_the_run_is(runtime: Runtime) -> None:
    """On SQLite the killed `run` was the driver, and the next one drives on; on the pool it only
    followed, and the next one follows the drive under way. Either way it draws the same."""
    plan = runtime.compile(
        "wf.akm",
        source("""
        workflow "t" {
          step a {
            shell "true"
          }
          step b {
            shell "touch b-started; while [ ! -e release ]; do sleep 0.05; done"
          }
          step c {
            shell "true"
          }
        }
    """),
    )
    first = runtime.start("run", plan)
    eventually(lambda: (runtime.root / "b-started").exists(), "step b to start")
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    [run] = runtime.store().runs()
    release = (", 1 unit in flight", (runtime.root / "release").touch)  # b ends once the new `run` drew it
    code, text = on_a_terminal(runtime, "run", run.id, when=release)
    assert code == 0, text
    assert drawn(text)[:2] == ["steps 1/3 done, at b, 0 units in flight", "steps 1/3 done, at b, 1 unit in flight"]
    assert drawn(text)[-1] == "steps 3/3 done, at c, 0 units in flight"
