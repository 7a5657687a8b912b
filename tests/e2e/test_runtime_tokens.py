"""Token budgets at runtime (operations.md D8), with a scripted fake agent as the agent command: it
reports usage on `AKM_PROGRESS`, reads `AKM_MAX_TOKENS`, and lingers when it is past its budget so
that the runtime ends it. Each test runs on both stores."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from helpers import REPO, Runtime, committed, source

# Spends its map item's number of tokens (100 for a single unit); the prompt says how it behaves:
# "fail" exits 1 after reporting, "silent" reports nothing. Past AKM_MAX_TOKENS it lingers, so the
# runtime must end it. Once, the item named in `crash-at` kills the process executing the units.
AGENT = source("""
    import json, os, signal, sys, time

    prompt = sys.stdin.read()
    context = json.load(open(os.environ["AKM_CONTEXT"]))
    item = context.get("item")
    tokens = item if isinstance(item, int) else 100
    if os.path.exists("crash-at") and open("crash-at").read() == str(item) and not os.path.exists("crashed"):
        open("crashed", "w").close()
        while not os.path.exists("driver.pid") or not open("driver.pid").read():
            time.sleep(0.01)
        os.killpg(int(open("driver.pid").read()), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    if "silent" not in prompt:
        with open(os.environ["AKM_PROGRESS"], "a") as progress:
            progress.write('{"note": "thinking", "progress": 1, "total": 2}\\n{}\\nnot json\\n')
            usage = {"input_tokens": tokens - 10, "output_tokens": 10, "cost_usd": 0.25}
            progress.write(json.dumps({"usage": usage}) + "\\n")
    left = int(os.environ.get("AKM_MAX_TOKENS", "-1"))
    if 0 <= left < tokens:
        time.sleep(60)
    if "fail" in prompt:
        sys.exit(1)
    print(json.dumps({"left": left}))
""")

FAN = source("""
    workflow "fan" {
      params { costs: list[int] = [100, 100, 100, 100] }
      limits { max_tokens = 250 }
      step fan {
        map params.costs { agent "spend"  concurrency = 1 }
      }
    }
""")


def _agent(runtime: Runtime) -> tuple[str, str]:
    runtime.write({"scripts/agent.py": AGENT})
    return "--agent-cmd", f"{sys.executable} scripts/agent.py"


def _spent(runtime: Runtime, run_id: str) -> tuple[int, int]:
    [(spent, raised)] = runtime.sql("SELECT tokens_spent, tokens_raised FROM runs WHERE id = ?", run_id)
    return int(spent), int(raised)


def _kinds(runtime: Runtime, run_id: str, prefix: str = "budget.") -> list[tuple[str, dict[str, Any]]]:
    return [(kind, data) for kind, _, _, data in runtime.store().events(run_id) if kind.startswith(prefix)]


def test_a_run_budget_ends_the_attempt_past_it_and_resume_raises_it(runtime: Runtime) -> None:
    plan, agent = runtime.compile("fan.akm", FAN), _agent(runtime)
    code, document = runtime.run_json(plan, *agent)
    run_id = document["runId"]
    assert code == 1 and document["failure"]["reason"] == "budget_exceeded", document
    assert "reported 100 tokens, past the 50 left of its token budget" in document["failure"]["message"]
    assert _spent(runtime, run_id) == (300, 0)  # the overshoot: what the unit in flight reported
    logs = runtime.akm("logs", run_id, "--format", "json")
    attempts = [u["attempts"] for u in json.loads(logs.stdout)["units"]]
    assert [a[0]["output"]["left"] for a in attempts[:2]] == [250, 150]  # AKM_MAX_TOKENS, the smallest left
    assert attempts[0][0]["usage"] == {"input_tokens": 90, "output_tokens": 10, "cost_usd": 0.25}
    assert attempts[2][0]["reason"] == "budget_exceeded"
    status = runtime.akm("status", run_id)
    assert "tokens 300 / 250 (120%)" in status.stdout, status.stdout

    for extra, said in (("99999999999999999999999", "is beyond 9007199254740991"), (str(2**53 - 1), "past")):
        refused = runtime.akm("resume", run_id, "--extra-tokens", extra)
        assert refused.returncode == 2 and said in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    assert _spent(runtime, run_id) == (300, 0)  # nothing raised
    raised = runtime.akm("resume", run_id, "--extra-tokens", "300", "--by", "ops")
    assert raised.returncode == 0 and "by 300: 550 tokens" in raised.stdout, raised.stderr
    code, document = runtime.run_json(run_id, *agent)
    assert code == 0, document
    assert _spent(runtime, run_id) == (500, 300)
    kinds = _kinds(runtime, run_id)
    assert [k for k, _ in kinds] == ["budget.exceeded", "budget.raised"]
    assert kinds[1][1] == {"by": "ops", "extra": 300}
    assert "tokens 500 / 550 (90%)" in runtime.akm("status", run_id).stdout


def test_an_agent_in_a_worktree_reports_usage_and_is_held_to_its_budget(runtime: Runtime) -> None:
    """AKM_PROGRESS and AKM_MAX_TOKENS reach a unit whose working directory is its own worktree."""
    src = FAN.replace('agent "spend"  concurrency = 1', 'agent "spend"  concurrency = 1  isolation = worktree')
    plan = runtime.compile("fan.akm", src)
    runtime.write({"scripts/agent.py": AGENT, ".gitignore": ".workers/\n"})
    committed(runtime.root)
    agent = ("--agent-cmd", f"{sys.executable} {runtime.root / 'scripts' / 'agent.py'}")
    code, document = runtime.run_json(plan, *agent)
    run_id = document["runId"]
    assert code == 1 and document["failure"]["reason"] == "budget_exceeded", document
    assert _spent(runtime, run_id) == (300, 0)
    attempts = [u["attempts"] for u in json.loads(runtime.akm("logs", run_id, "--format", "json").stdout)["units"]]
    assert [a[0]["output"]["left"] for a in attempts[:2]] == [250, 150]
    assert attempts[1][0]["usage"] == {"input_tokens": 90, "output_tokens": 10, "cost_usd": 0.25}
    assert attempts[2][0]["reason"] == "budget_exceeded"
    assert [kind for kind, _ in _kinds(runtime, run_id, "worktree.")] == ["worktree.removed"] * 3


def test_a_unit_budget_counts_every_attempt_and_is_never_retried(runtime: Runtime) -> None:
    src = source("""
        workflow "one" {
          step review {
            agent "fail"
            max_tokens = 150
            retry = 3
          }
        }
    """)
    plan, agent = runtime.compile("one.akm", src), _agent(runtime)
    code, document = runtime.run_json(plan, *agent)
    assert code == 1 and document["failure"]["reason"] == "budget_exceeded", document
    attempts = runtime.store().attempts(document["runId"], "review:solo")
    assert [(a.status, a.reason) for a in attempts] == [("failed", "exit"), ("failed", "budget_exceeded")]
    assert _spent(runtime, document["runId"]) == (200, 0)


def test_a_spent_budget_refuses_the_unit_before_it_starts(runtime: Runtime) -> None:
    src = FAN.replace("max_tokens = 250", "max_tokens = 200")
    plan, agent = runtime.compile("fan.akm", src), _agent(runtime)
    code, document = runtime.run_json(plan, *agent)
    run_id = document["runId"]
    assert code == 1 and document["failure"]["reason"] == "budget_exceeded"
    assert (
        "token budget of run" in document["failure"]["message"] and "--extra-tokens N" in document["failure"]["message"]
    )
    units = runtime.sql("SELECT COUNT(*) FROM attempts WHERE run_id = ?", run_id)
    assert units == [(2,)]  # the third unit never started
    assert _spent(runtime, run_id) == (200, 0)


def test_a_tree_budget_counts_child_runs_and_an_unmetered_agent_warns(runtime: Runtime) -> None:
    child = 'workflow "child" {\n  step a {\n    agent "spend"\n  }\n  step b {\n    agent "silent"\n  }\n}\n'
    parent = source("""
        workflow "parent" {
          limits { max_tokens = 1000 }
          step first {
            uses "child"
          }
          step second {
            uses "child"
          }
        }
    """)
    runtime.write({"child.akm": child})
    plan, agent = runtime.compile("parent.akm", parent), _agent(runtime)
    code, document = runtime.run_json(plan, *agent)
    assert code == 0, document
    run_id = document["runId"]
    assert _spent(runtime, run_id)[0] == 200  # both children's agents count against the parent
    children = runtime.sql("SELECT tokens_spent FROM runs WHERE parent_run_id = ?", run_id)
    assert sorted(int(r[0]) for r in children) == [100, 100]
    status = runtime.akm("status", run_id).stdout
    assert "tokens 200 / 1,000 (20%)" in status
    child_ids = [r[0] for r in runtime.sql("SELECT id FROM runs WHERE parent_run_id = ?", run_id)]
    for child_id in child_ids:  # once per step, in the run whose agent reported nothing
        assert [k for k, _ in _kinds(runtime, child_id)] == ["budget.unmetered"]
        assert "agent units report no usage: max_tokens cannot bind" in runtime.akm("status", child_id).stdout


def test_spend_survives_a_crash_after_an_attempt_ended(runtime: Runtime) -> None:
    src = FAN.replace("max_tokens = 250", "max_tokens = 1000").replace("[100, 100,", "[100, 99,")
    plan, agent = runtime.compile("fan.akm", src), _agent(runtime)
    (runtime.root / "crash-at").write_text("99")  # the second unit kills the driver as it starts, once
    runtime.killed(runtime.driver(plan, *agent))
    [run] = runtime.store().runs()
    assert _spent(runtime, run.id) == (100, 0)  # journaled with the first attempt's end
    runtime.replace_driver()
    code, document = runtime.run_json(run.id, *agent)
    assert code == 0, document
    assert _spent(runtime, run.id) == (399, 0)  # nothing lost, nothing counted twice


# What `claude -p --output-format json` prints: one result object with its cost and usage.
FAKE_CLAUDE = source("""
    #!/bin/sh
    cat > prompt.txt
    echo '{"type": "result", "subtype": "success", "is_error": false, "result": "looks good",'\\
    ' "total_cost_usd": 0.0421, "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 300,'\\
    ' "cache_read_input_tokens": 500, "output_tokens": 150}}'
""")


def test_the_claude_adapter_in_the_docs_reports_usage(runtime: Runtime) -> None:
    adapter = (REPO / "examples" / "adapters" / "claude_usage.py").read_text()
    runtime.write({"adapters/claude_usage.py": adapter, "bin/claude": FAKE_CLAUDE})
    (runtime.root / "bin" / "claude").chmod(0o755)
    src = 'workflow "review" {\n  limits { max_tokens = 100_000 }\n  step review {\n    agent "review it"\n  }\n}\n'
    plan = runtime.compile("review.akm", src)
    env = runtime.unit_env(PATH=f"{runtime.root / 'bin'}:{os.environ['PATH']}")
    code, document = runtime.run_json(plan, "--agent-cmd", f"{sys.executable} adapters/claude_usage.py", env=env)
    assert code == 0, document
    [attempt] = runtime.store().attempts(document["runId"], "review:solo")
    assert attempt.output == "looks good"
    assert attempt.usage == {
        "input_tokens": 2000,
        "output_tokens": 150,
        "cached_input_tokens": 800,
        "cost_usd": 0.0421,
    }
    assert "Token budget for this task: 100000 tokens" in (runtime.root / "prompt.txt").read_text()
    assert "tokens 2,150 / 100,000 (2%)" in runtime.akm("status", document["runId"]).stdout
    assert "cost_usd 0.0421" in runtime.akm("logs", document["runId"]).stdout


USAGE_FINDING = {
    "check": "usage",
    "severity": "info",
    "stepPath": "fan",
    "message": "the plan has token budgets (max_tokens): they bind only if the agent command reports usage",
    "hint": 'have the agent command (or its adapter) write {"usage": {"input_tokens": N, "output_tokens": N}}'
    " lines to $AKM_PROGRESS",
}


def test_preflight_reminds_a_budgeted_plan_that_its_agent_must_report_usage(runtime: Runtime) -> None:
    plan, agent = runtime.compile("fan.akm", FAN), _agent(runtime)
    text = runtime.akm("preflight", plan, *agent)
    as_json = runtime.akm("preflight", plan, *agent, "--format", "json")
    assert text.returncode == as_json.returncode == 0, text.stderr
    assert json.loads(as_json.stdout) == {"ok": True, "findings": [USAGE_FINDING]}
    head = f"info [usage] fan: {USAGE_FINDING['message']}\n    hint: {USAGE_FINDING['hint']}\n"
    assert text.stdout == head
    unbudgeted = runtime.compile("free.akm", FAN.replace("limits { max_tokens = 250 }", ""))
    assert json.loads(runtime.akm("preflight", unbudgeted, *agent, "--format", "json").stdout)["findings"] == []
    shells = runtime.compile("shells.akm", FAN.replace('agent "spend"', 'shell "true"'))
    assert json.loads(runtime.akm("preflight", shells, "--format", "json").stdout)["findings"] == []


def test_run_says_the_reminder_on_stderr_and_goes_on(runtime: Runtime) -> None:
    plan, agent = runtime.compile("fan.akm", FAN.replace("250", "1_000")), _agent(runtime)
    ran = runtime.akm("run", plan, *agent)
    assert ran.returncode == 0, ran.stderr
    assert f"info [usage] fan: {USAGE_FINDING['message']}" in ran.stderr
    settled = json.loads(runtime.akm("list", "--format", "json").stdout)["runs"][0]["id"]
    again = runtime.akm("preflight", settled, *agent, "--format", "json")  # nothing left to run: no reminder
    assert again.returncode == 0 and json.loads(again.stdout)["findings"] == [], again.stdout


NOTIFIED = source("""
    workflow "fan" {
      notify {
        on = [budget]
        shell "cat >> sent.jsonl; echo >> sent.jsonl"
      }
      params { costs: list[int] = [100, 100, 100] }
      limits { max_tokens = 150 }
      step fan {
        map params.costs { agent "spend"  concurrency = 1 }
      }
    }
""")


def test_a_spent_budget_notifies_the_plans_notifier_of_budget(runtime: Runtime) -> None:
    code, document = runtime.run_json(runtime.compile("fan.akm", NOTIFIED), *_agent(runtime))
    assert code == 1 and document["failure"]["reason"] == "budget_exceeded", document
    sent = [json.loads(line) for line in (runtime.root / "sent.jsonl").read_text().splitlines() if line]
    assert [s["event"] for s in sent] == ["budget"]  # once: the attempt past the budget ended the map
    logs = json.loads(runtime.akm("logs", document["runId"], "--notifications", "--format", "json").stdout)
    assert [(n["event"], n["status"]) for n in logs["notifications"]] == [("budget", "sent")]


# An agent whose last usage line is hard to find: behind megabytes of other lines and before more
# ("backlog"), or in the file that replaced ("replace") or truncated ("truncate") the one whose
# lines the driver has read (with an earlier usage line in it), a second and a half into the attempt.
HIDING = source("""
    import json, os, sys, time

    how, path = sys.stdin.read(), os.environ["AKM_PROGRESS"]
    def usage(tokens):
        return json.dumps({"usage": {"input_tokens": tokens - 100, "output_tokens": 100}}) + "\\n"
    if "backlog" in how:
        with open(path, "a") as progress:
            progress.write("{}\\n" * (3 << 20) + usage(4100) + '{"note": "wrapping up"}\\n' * (1 << 18))
    else:
        with open(path, "a") as progress:
            progress.write("".join(json.dumps({"note": f"working {i}"}) + "\\n" for i in range(100)) + usage(150))
        time.sleep(1.5)
        if "replace" in how:
            os.unlink(path)
        with open(path, "w") as progress:
            progress.write(usage(5000))
    print(json.dumps("done"))
""")
HIDDEN = source("""
    workflow "t" {
      step backlog {
        agent "backlog"
        max_tokens = 1_000_000
      }
      step replace {
        agent "replace"
        max_tokens = 1_000_000
      }
      step truncate {
        agent "truncate"
        max_tokens = 1_000_000
      }
    }
""")


def test_the_last_usage_line_counts_behind_a_backlog_and_in_a_replaced_or_truncated_file(runtime: Runtime) -> None:
    runtime.write({"scripts/hiding.py": HIDING})
    plan = runtime.compile("t.akm", HIDDEN)
    code, document = runtime.run_json(plan, "--agent-cmd", f"{sys.executable} scripts/hiding.py")
    assert code == 0, document
    logs = json.loads(runtime.akm("logs", document["runId"], "--format", "json").stdout)
    usage = {u["stepId"]: u["attempts"][0]["usage"]["input_tokens"] + 100 for u in logs["units"]}
    assert usage == {"backlog": 4100, "replace": 5000, "truncate": 5000}
    assert _spent(runtime, document["runId"]) == (14100, 0)


REPORTING = source("""
    workflow "t" {
      limits { max_tokens = 1000 }
      step report { script "scripts/report.sh" }
      step review { agent "spend" }
    }
""")


def test_a_shell_units_usage_line_is_not_metered(runtime: Runtime) -> None:
    report = '#!/bin/sh\necho \'{"usage": {"input_tokens": 2000, "output_tokens": 0}}\' >> "$AKM_PROGRESS"\necho 1\n'
    plan, agent = runtime.compile("t.akm", REPORTING, {"scripts/report.sh": report}), _agent(runtime)
    code, document = runtime.run_json(plan, *agent)
    assert code == 0, document
    assert _spent(runtime, document["runId"]) == (100, 0)  # the agent's 100 tokens, nothing of the script's
    logs = json.loads(runtime.akm("logs", document["runId"], "--format", "json").stdout)
    assert ["usage" in u["attempts"][0] for u in logs["units"]] == [False, True]
