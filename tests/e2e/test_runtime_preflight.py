"""Preflight: `akm-run run` checks the host before anything is published, `akm-run preflight` alone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import Runtime, source

FIRST = """
          step first {
            shell "touch touched"
          }
"""

# Each check: the step it adds after `first`, the options of `run`, and what the finding says.
CHECKS = {
    "secret": (
        'step s {\n shell "true"\n env { T = secret("AKM_TEST_PREFLIGHT_UNSET") }\n }',
        (),
        "secret `AKM_TEST_PREFLIGHT_UNSET` is not set",
    ),
    "agent": ('step s {\n agent "Summarise."\n }', (), "no agent command is configured"),
    "agent-program": (
        'step s {\n agent "Summarise."\n }',
        ("--agent-cmd", "no-such-agent-akm --fast"),
        "the agent command's program `no-such-agent-akm` is not on PATH",
    ),
    "interpreter-env": (
        'step s {\n script "scripts/s.py"\n }',
        (),
        "`no-such-python-akm` (the script's `#!/usr/bin/env no-such-python-akm`) is not on PATH",
    ),
    "interpreter-absolute": (
        'step s {\n script "scripts/t.sh"\n }',
        (),
        "the script's interpreter `/no/such/shell` does not exist",
    ),
    "workdir": ('step s {\n shell "true"\n }', ("--workdir", "missing"), "--workdir missing is not a directory"),
    "git": (
        'step s {\n shell "true"\n isolation = worktree\n }',
        (),
        "[git] s: steps run in git worktrees, but --workdir . cannot give them a base commit:",
    ),
}
SCRIPTS = {
    "scripts/s.py": "#!/usr/bin/env no-such-python-akm\nprint(1)\n",
    "scripts/t.sh": "#!/no/such/shell\necho 1\n",
}


def _plan(runtime: Runtime, steps: str, name: str = "wf.akm") -> Path:
    return runtime.compile(name, f'workflow "t" {{\n{FIRST}\n{steps}\n}}\n', files=SCRIPTS)


def _nothing_published(runtime: Runtime) -> None:
    assert runtime.untouched()
    listed = runtime.akm("list", "--format", "json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["runs"] == []
    assert not (runtime.root / "touched").exists()  # the first step never ran


@pytest.mark.parametrize("case", sorted(CHECKS))
def test_each_check_refuses_the_run_before_anything_is_published(runtime: Runtime, case: str) -> None:
    steps, options, says = CHECKS[case]
    refused = runtime.akm("run", _plan(runtime, steps), *options)
    assert refused.returncode == 5, refused.stderr
    assert "akm-run: preflight failed: nothing was published" in refused.stderr
    assert says in refused.stderr and "Traceback" not in refused.stderr
    _nothing_published(runtime)


@pytest.mark.sqlite_only
def test_a_state_directory_that_cannot_be_written_is_a_finding(runtime: Runtime) -> None:
    (runtime.root / "a-file").write_text("")
    plan = _plan(runtime, 'step s {\n shell "true"\n }')
    refused = runtime.akm("run", plan, "--state-dir", "a-file/state")
    assert refused.returncode == 5 and "[state] state directory a-file/state cannot be written" in refused.stderr
    assert not (runtime.root / "touched").exists() and not (runtime.root / ".state").exists()


def _findings(text: str) -> list[dict[str, Any]]:
    """The findings of the text form, as the JSON form spells them."""
    found = []
    for head, hint in re.findall(r"^(\S.*)\n    hint: (.*)$", text, re.M):
        severity, check, rest = re.fullmatch(r"(\w+) \[(\w+)\] (.*)", head).groups()  # type: ignore[union-attr]
        path, _, message = rest.partition(": ") if re.match(r"[\w/:.-]+: ", rest) else (None, "", rest)
        found.append({"check": check, "severity": severity, "stepPath": path, "message": message, "hint": hint})
    return found


@pytest.mark.sqlite_only
def test_text_and_json_say_the_same_findings_and_never_a_value(runtime: Runtime) -> None:
    steps = """
          step s {
            script "scripts/s.py"
            env {
              T = secret("AKM_TEST_PREFLIGHT_EMPTY")
              K = secret("AKM_TEST_PREFLIGHT_KEPT")
              P = passthrough
            }
          }
          step think {
            agent "Summarise."
          }
    """
    plan = _plan(runtime, steps)
    env = runtime.env(AKM_TEST_PREFLIGHT_EMPTY="", AKM_TEST_PREFLIGHT_KEPT="hunter2-value")
    text = runtime.akm("preflight", plan, "--workdir", "missing", env=env)
    as_json = runtime.akm("preflight", plan, "--workdir", "missing", "--format", "json", env=env)
    assert text.returncode == as_json.returncode == 5, text.stderr
    document = json.loads(as_json.stdout)
    assert document["ok"] is False and _findings(text.stdout) == document["findings"]
    assert [(f["check"], f["severity"], f["stepPath"]) for f in document["findings"]] == [
        ("workdir", "error", None),
        ("secret", "error", "s"),
        ("passthrough", "warning", "s"),
        ("interpreter", "error", "s"),
        ("agent", "error", "think"),
    ]
    assert "`AKM_TEST_PREFLIGHT_EMPTY` is set but empty" in text.stdout
    refused = runtime.akm("run", plan, "--workdir", "missing", "--format", "json", env=env)
    assert refused.returncode == 5 and json.loads(refused.stdout) == document
    for shown in (text, as_json, refused):
        assert "hunter2-value" not in shown.stdout + shown.stderr
    _nothing_published(runtime)


CHILD = source("""
    workflow "child" {
      step hi {
        shell "echo hi"
        env { T = secret("AKM_TEST_PREFLIGHT_CHILD") }
      }
    }
""")


@pytest.mark.sqlite_only
def test_a_childs_needs_are_checked_under_the_parent_step(runtime: Runtime) -> None:
    top = source("""
        workflow "top" {
          step first {
            shell "touch touched"
          }
          step deploy {
            uses "workflows/child" {}
          }
        }
    """)
    plan = runtime.compile("workflows/top.akm", top, files={"workflows/child.akm": CHILD})
    checked = runtime.akm("preflight", plan, "--format", "json")
    assert checked.returncode == 5
    [finding] = json.loads(checked.stdout)["findings"]
    assert finding["stepPath"] == "deploy/workflows/child:hi" and finding["check"] == "secret"
    _nothing_published(runtime)


ROUTED = source("""
    workflow "t" {
      params { careful: bool = false }
      step pick {
        route params.careful {
          true -> careful
          false -> quick
        }
      }
      step careful {
        shell "true"
        env { T = secret("AKM_TEST_PREFLIGHT_ROUTED") }
      }
      step quick {
        shell "echo quick"
      }
    }
""")


def test_a_step_a_route_may_skip_makes_its_errors_warnings(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", ROUTED)
    checked = runtime.akm("preflight", plan, "--format", "json")
    assert checked.returncode == 0, checked.stderr
    [finding] = json.loads(checked.stdout)["findings"]
    assert finding["severity"] == "warning" and finding["stepPath"] == "careful"
    assert finding["message"].endswith("; needed only if route `pick` selects `careful`")
    result = runtime.akm("run", plan, "--format", "json")
    assert result.returncode == 0 and json.loads(result.stdout)["status"] == "completed"
    assert "needed only if route `pick` selects `careful`" in result.stderr  # warnings are said, and it runs


APPROVED = source("""
    workflow "t" {
      step a {
        shell "true"
        env { A = secret("AKM_TEST_PREFLIGHT_A") }
      }
      step signoff {
        approval "ship it?"
      }
      step b {
        shell "true"
        env { B = secret("AKM_TEST_PREFLIGHT_B") }
      }
    }
""")


@pytest.mark.sqlite_only
def test_an_existing_run_is_checked_for_the_steps_that_can_still_run(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", APPROVED)
    both = runtime.env(AKM_TEST_PREFLIGHT_A="a", AKM_TEST_PREFLIGHT_B="b")
    code, document = runtime.run_json(plan, env=both)
    assert code == 3, document
    run_id = document["runId"]
    checked = runtime.akm("preflight", run_id, "--format", "json")  # neither secret is set now
    assert checked.returncode == 5
    assert [f["stepPath"] for f in json.loads(checked.stdout)["findings"]] == ["b"]  # `a` completed
    assert runtime.akm("approve", run_id, "signoff", "--by", "ada").returncode == 0
    before = runtime.dump()
    refused = runtime.akm("run", run_id)
    assert refused.returncode == 5 and f"preflight failed: run {run_id} was not changed" in refused.stderr
    assert "`AKM_TEST_PREFLIGHT_B` is not set" in refused.stderr
    assert runtime.dump() == before
    driven = runtime.akm("run", run_id, "--format", "json", env=both)
    assert driven.returncode == 0 and json.loads(driven.stdout)["status"] == "completed"


def test_no_preflight_publishes_with_a_warning_and_says_so_in_the_journal(runtime: Runtime) -> None:
    plan = _plan(runtime, CHECKS["secret"][0])
    result = runtime.akm("run", plan, "--no-preflight", "--format", "json")
    assert result.returncode == 1, result.stderr
    assert "warning: --no-preflight" in result.stderr
    document = json.loads(result.stdout)
    assert document["failure"]["reason"] == "secret_missing" and (runtime.root / "touched").exists()
    [[data]] = runtime.sql("SELECT data_json FROM events WHERE kind = 'run.published'")
    assert json.loads(data)["preflight"] == "skipped"


def test_a_worker_preflights_its_own_host_and_dispatches_nothing_when_it_fails(pooled: Runtime) -> None:
    pooled.start_worker(name="bare")  # without the secret the submitting host has
    plan = _plan(pooled, CHECKS["secret"][0])
    equipped = pooled.env(AKM_TEST_PREFLIGHT_UNSET="s3cr3t-on-the-submitter")
    result = pooled.akm("run", plan, env=equipped)
    assert result.returncode == 5, result.stderr
    assert "preflight failed on worker bare: nothing was dispatched" in result.stderr
    assert "error [secret] s: secret `AKM_TEST_PREFLIGHT_UNSET` is not set" in result.stderr
    assert "s3cr3t-on-the-submitter" not in result.stdout + result.stderr + pooled.dump()
    [(run_id, status)] = pooled.sql("SELECT id, status FROM runs")
    assert status == "active" and not (pooled.root / "touched").exists()
    kinds = [kind for (kind,) in pooled.sql("SELECT kind FROM events WHERE run_id = ? ORDER BY seq", run_id)]
    assert kinds == ["run.published", "preflight.failed"]
    [[data]] = pooled.sql("SELECT data_json FROM events WHERE kind = 'preflight.failed'")
    [finding] = json.loads(data)["findings"]
    assert finding == {
        "check": "secret",
        "severity": "error",
        "stepPath": "s",
        "message": "secret `AKM_TEST_PREFLIGHT_UNSET` is not set",
        "hint": "set AKM_TEST_PREFLIGHT_UNSET in the environment akm-run starts in (preflight never shows its value)",
    }
    pooled.stop_workers()
    pooled.start_worker(env=equipped, name="equipped")
    driven = pooled.akm("run", run_id, "--format", "json", env=equipped)
    assert driven.returncode == 0 and json.loads(driven.stdout)["status"] == "completed", driven.stderr


def test_approve_on_the_pool_preflights_before_it_changes_the_run(pooled: Runtime) -> None:
    both = pooled.env(AKM_TEST_PREFLIGHT_A="a", AKM_TEST_PREFLIGHT_B="b")
    pooled.start_worker(env=both)
    code, document = pooled.run_json(pooled.compile("wf.akm", APPROVED), env=both)
    assert code == 3, document
    run_id = document["runId"]
    before = pooled.dump()
    refused = pooled.akm("approve", run_id, "signoff", "--by", "ada")  # this host lacks B
    assert refused.returncode == 5 and f"preflight failed: run {run_id} was not changed" in refused.stderr
    assert "error [secret] b: secret `AKM_TEST_PREFLIGHT_B` is not set" in refused.stderr
    assert pooled.dump() == before
    assert pooled.akm("approve", run_id, "signoff", "--by", "ada", env=both).returncode == 0
    driven = pooled.akm("run", run_id, "--format", "json", env=both)
    assert driven.returncode == 0 and json.loads(driven.stdout)["status"] == "completed", driven.stderr


def test_no_preflight_reaches_the_worker_too(pooled: Runtime) -> None:
    pooled.start_worker(name="bare")
    result = pooled.akm("run", _plan(pooled, CHECKS["secret"][0]), "--no-preflight", "--format", "json")
    assert result.returncode == 1 and json.loads(result.stdout)["failure"]["reason"] == "secret_missing"
    assert (pooled.root / "touched").exists()  # no check anywhere: the first step ran, the second failed
    assert [kind for (kind,) in pooled.sql("SELECT kind FROM events WHERE kind LIKE 'preflight%'")] == []


def test_retry_on_the_pool_preflights_the_steps_it_reopens_before_it_changes_the_run(pooled: Runtime) -> None:
    both = pooled.env(AKM_TEST_PREFLIGHT_A="a", AKM_TEST_PREFLIGHT_B="b")
    pooled.start_worker(env=both)
    code, document = pooled.run_json(pooled.compile("wf.akm", APPROVED), env=both)
    assert code == 3, document
    run_id = document["runId"]
    assert pooled.akm("approve", run_id, "signoff", "--by", "ada", env=both).returncode == 0
    driven = pooled.akm("run", run_id, "--format", "json", env=both)
    assert driven.returncode == 0 and json.loads(driven.stdout)["status"] == "completed", driven.stderr
    before = pooled.dump()
    refused = pooled.akm("retry", run_id, "b", "--by", "ada", env=pooled.env(AKM_TEST_PREFLIGHT_A="a"))
    assert refused.returncode == 5 and f"preflight failed: run {run_id} was not changed" in refused.stderr
    assert "error [secret] b: secret `AKM_TEST_PREFLIGHT_B` is not set" in refused.stderr
    assert pooled.dump() == before  # b had completed: the step it reopens is checked all the same
    retried = pooled.akm("retry", run_id, "b", "--by", "ada", "--no-preflight")
    assert retried.returncode == 0 and "preflight" in retried.stderr, retried.stderr
    driven = pooled.akm("run", run_id, "--format", "json", env=both)
    assert driven.returncode == 0 and json.loads(driven.stdout)["status"] == "completed", driven.stderr


NOTIFIED = source("""
    workflow "t" {
      notify {
        on = [failed]
        shell "no-such-notifier-akm --post"
        env { HOOK = secret("AKM_TEST_PREFLIGHT_HOOK") }
      }
      step first { shell "touch touched" }
    }
""")
SCRIPTED = source("""
    workflow "t" {
      notify {
        on = [blocked]
        script "scripts/t.sh"
      }
      step first { shell "touch touched" }
    }
""")


@pytest.mark.sqlite_only
@pytest.mark.before_store
def test_the_notifiers_are_checked_as_units_are_before_anything_is_published(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", NOTIFIED)
    options = ("--notify-cmd", "no-such-host-notifier-akm 'a b'")
    text = runtime.akm("preflight", plan, *options)
    as_json = runtime.akm("preflight", plan, *options, "--format", "json")
    assert text.returncode == as_json.returncode == 5, text.stderr
    document = json.loads(as_json.stdout)
    assert _findings(text.stdout) == document["findings"]
    assert [(f["check"], f["severity"], f["stepPath"], f["message"]) for f in document["findings"]] == [
        ("notify", "error", None, "the --notify-cmd program `no-such-host-notifier-akm` is not on PATH"),
        ("notify", "error", "notify", "secret `AKM_TEST_PREFLIGHT_HOOK` is not set"),
        ("notify", "error", "notify", "the notify command's program `no-such-notifier-akm` is not on PATH"),
    ]
    env = runtime.env(AKM_RUN_NOTIFY_CMD="no-such-host-notifier-akm")  # the host's notifier from the environment
    refused = runtime.akm("run", plan, "--format", "json", env=env)
    assert refused.returncode == 5 and "akm-run: preflight failed: nothing was published" in refused.stderr
    assert json.loads(refused.stdout)["findings"][0]["message"].startswith("the --notify-cmd program")
    scripted = runtime.akm("run", runtime.compile("scripted.akm", SCRIPTED, files=SCRIPTS))
    assert scripted.returncode == 5
    assert "error [notify] notify: the script's interpreter `/no/such/shell` does not exist" in scripted.stderr
    _nothing_published(runtime)
    hooked = runtime.env(AKM_TEST_PREFLIGHT_HOOK="x", AKM_RUN_NOTIFY_CMD="true")
    fine = runtime.akm("preflight", runtime.compile("fine.akm", NOTIFYING_SHELL), env=hooked)
    assert fine.returncode == 0 and "preflight: ok" in fine.stdout, fine.stdout


NOTIFYING_SHELL = source("""
    workflow "t" {
      notify {
        on = [failed]
        shell "cd . && echo \\"$HOOK\\" >> hook.txt"
        env { HOOK = secret("AKM_TEST_PREFLIGHT_HOOK") }
      }
      step first { shell "true" }
    }
""")
