"""Operating akm-run end to end (runtime-v2.md): any directory, remembered settings, untrusted unit
output, approvals and rejections, logs, prompt timeouts, unwritable state. Real `akm-run` processes
and a real state database; each test states a workflow and what an operator must see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import Runtime


def _wf(body: str, title: str = "t", head: str = "") -> str:
    return f'workflow "{title}" {{\n{head}{body}}}\n'


def _akm(*args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "akm_run", *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env,
        timeout=timeout,
    )  # fmt: skip


# -- 1. the unit contract holds from any directory ------------------------------------------------------


SCRIPTED = _wf(
    '  step show {\n    script "scripts/show.sh"\n  }\n'
    '  step wait {\n    approval "go on?"\n  }\n'
    '  step after {\n    script "scripts/show.sh"\n  }\n'
)
SHOW = '#!/bin/sh\nprintf \'{"cwd": "%s", "context": "%s", "script": "%s"}\' "$(pwd)" "$AKM_CONTEXT" "$0"\n'


def test_relative_state_dir_with_another_workdir_gives_units_absolute_paths(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SCRIPTED, files={"scripts/show.sh": SHOW})
    (runtime.root / "units").mkdir()
    env = runtime.env()
    del env["AKM_STATE_DIR"]
    result = _akm("run", plan, "--workdir", "units", "--state-dir", "rel-state", cwd=runtime.root, env=env)
    assert result.returncode == 3, result.stderr
    run_id = result.stdout.split()[1]
    from akm_run.store import Store

    shown = Store(runtime.root / "rel-state").step(run_id, "show").output
    assert shown["cwd"] == str((runtime.root / "units").resolve())
    assert os.path.isabs(shown["context"]) and os.path.isabs(shown["script"])
    assert Path(shown["context"]).parent.parent == (runtime.root / "rel-state" / "scratch").absolute()


def test_a_run_started_in_one_directory_is_resumed_from_another(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", SCRIPTED, files={"scripts/show.sh": SHOW})
    (runtime.root / "units").mkdir()
    elsewhere = runtime.root / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    env = runtime.env()
    del env["AKM_STATE_DIR"]
    started = _akm("run", plan, "--workdir", "units", "--state-dir", "st", cwd=runtime.root, env=env)
    assert started.returncode == 3, started.stderr
    run_id = started.stdout.split()[1]
    approved = _akm("approve", run_id, "wait", "--state-dir", "../../st", cwd=elsewhere, env=env)
    assert approved.returncode == 0, approved.stderr
    resumed = _akm("run", run_id, "--state-dir", "../../st", cwd=elsewhere, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    from akm_run.store import Store

    after = Store(runtime.root / "st").step(run_id, "after").output
    assert after["cwd"] == str((runtime.root / "units").resolve())  # the workdir the run was started with
    assert os.path.isabs(after["context"]) and os.path.isabs(after["script"])


def _printed_commands(text: str) -> list[list[str]]:
    """The `akm-run …` commands quoted in a message, in order, split as a shell would."""
    import re
    import shlex

    return [shlex.split(c) for c in re.findall(r"`(akm-run [^`]+)`", text)]


def _paste(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assert command[0] == "akm-run"
    return _akm(*command[1:], cwd=cwd, env=env)


AGENT_TWICE = _wf(
    '  step first {\n    agent "say hi"\n  }\n'
    '  step wait {\n    approval "go on?"\n  }\n'
    '  step second {\n    agent "say hi again"\n  }\n'
)


def test_runs_remember_workdir_and_agent_and_every_hint_pastes_as_printed(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", AGENT_TWICE)
    (runtime.root / "work").mkdir()
    env = runtime.env()
    del env["AKM_STATE_DIR"]
    agent = 'printf \'"%s"\' "$(pwd)"'
    started = _akm("run", plan, "--state-dir", "custom", "--workdir", "work", "--agent-cmd", agent,
                   "--format", "json", cwd=runtime.root, env=env)  # fmt: skip
    assert started.returncode == 3, started.stderr
    document = json.loads(started.stdout)
    approve, then = _printed_commands(document["blocked"]["notes"])[::2][:2]
    state = str((runtime.root / "custom").absolute())
    assert approve[-2:] == ["--state-dir", state] and then[-2:] == ["--state-dir", state]
    elsewhere = runtime.root / "elsewhere"
    elsewhere.mkdir()
    assert _paste(approve, elsewhere, env).returncode == 0
    finished = _paste(then, elsewhere, env)  # no --workdir, no --agent-cmd: the run's own are used
    assert finished.returncode == 0, finished.stdout + finished.stderr
    from akm_run.store import Store

    store = Store(runtime.root / "custom")
    assert store.step(document["runId"], "second").output == str((runtime.root / "work").resolve())
    # an override on the command line wins over what the run remembers
    (runtime.root / "other").mkdir()
    again = _akm("run", plan, "--state-dir", "custom", "--workdir", "work", "--agent-cmd", agent,
                 "--format", "json", cwd=runtime.root, env=env)  # fmt: skip
    run_id = json.loads(again.stdout)["runId"]
    assert _akm("approve", run_id, "wait", "--state-dir", "custom", cwd=runtime.root, env=env).returncode == 0
    assert _akm("run", run_id, "--state-dir", "custom", "--workdir", "other", cwd=runtime.root, env=env).returncode == 0
    assert store.step(run_id, "second").output == str((runtime.root / "other").resolve())


# -- 5. approvals: rejection, and blocked children name the command that clears them -------------------


REVIEWED = _wf(
    '  step signoff {\n    approval "ship it?"\n  }\n'
    "  step decide {\n    route steps.signoff.output.approved {\n      true -> ship\n      false -> stop\n    }\n  }\n"
    '  step ship {\n    shell "echo shipped"\n  }\n'
    '  step stop {\n    shell "echo stopped"\n  }\n'
)


def test_a_rejected_approval_fails_its_step_with_approval_rejected(runtime: Runtime) -> None:
    plan = runtime.compile("wf.akm", REVIEWED)
    code, document = runtime.run_json(plan)
    assert code == 3 and "--reject" in document["blocked"]["notes"]
    rejected = runtime.akm("approve", document["runId"], "signoff", "--reject", "--by", "kim", "--note", "not yet")
    assert rejected.returncode == 0, rejected.stderr
    code, result = runtime.run_json(document["runId"])
    assert code == 1 and result["failure"]["reason"] == "approval_rejected"
    assert result["failure"]["message"] == "rejected by kim: not yet"
    step = runtime.store().step(document["runId"], "signoff")
    assert step.status == "failed" and step.output == {"approved": False, "by": "kim", "note": "not yet"}


def test_a_rejected_approval_with_on_error_continue_goes_on_with_approved_false(runtime: Runtime) -> None:
    plan = runtime.compile(
        "wf.akm", REVIEWED.replace('approval "ship it?"', 'approval "ship it?"\n    on_error = continue')
    )
    code, document = runtime.run_json(plan)
    assert code == 3
    assert runtime.akm("approve", document["runId"], "signoff", "--reject", "--by", "kim").returncode == 0
    code, result = runtime.run_json(document["runId"])
    assert code == 0, result
    steps = {s.step_id: s for s in runtime.store().steps(document["runId"])}
    assert steps["signoff"].output == {"approved": False, "by": "kim"}
    assert steps["stop"].status == "completed" and steps["ship"].status == "skipped"


CHILD_APPROVAL = _wf(
    '  params {\n    n: int\n  }\n  step ok {\n    approval "go?"\n  }\n  step done {\n    shell "echo done"\n  }\n',
    "leaf",
)
PARENT = _wf(
    '  step c {\n    uses "workflows/leaf" {\n      n = 5\n    }\n  }\n  step after {\n    shell "echo after"\n  }\n',
    "p",
)


def test_following_the_printed_commands_in_order_completes_a_parent_whose_child_waits(runtime: Runtime) -> None:
    runtime.write({"workflows/leaf.akm": CHILD_APPROVAL})
    code, document = runtime.run_json(runtime.compile("workflows/p.akm", PARENT))
    assert code == 3
    commands = _printed_commands(document["blocked"]["notes"])
    assert [c[1] for c in commands] == ["approve", "resume", "run"]
    parent = document["runId"]
    # approving on the parent's composing step names the child's command instead
    misdirected = runtime.akm("approve", parent, "c")
    assert misdirected.returncode == 2 and " ".join(commands[0]) in misdirected.stderr
    for command in commands:
        result = _paste(command, runtime.root, runtime.env())
        assert result.returncode == 0, (command, result.stdout, result.stderr)
    assert runtime.store().run(parent).status == "completed"
    assert runtime.akm("status", parent, "--format", "json").returncode == 0


# -- 11. a mistyped plan path ---------------------------------------------------------------------------


def test_a_mistyped_plan_path_with_params_says_the_file_does_not_exist(runtime: Runtime) -> None:
    for target in ("plans/wf.plan.jsno", "nothere.json", "release"):
        result = runtime.akm("run", target, "--param", "version=1")
        assert result.returncode == 2
        assert f"plan file {target} does not exist" in result.stderr and "params are fixed" not in result.stderr
    assert not runtime.state.exists()
