"""What a plan needs (akm_run.needs) and the checks of a host against it (akm_run.preflight), the `git`
check with real repositories in temporary directories."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from akm_run import preflight
from akm_run.needs import Interpreter, interpreter, needs, notifier, program, summary
from akm_run.preflight import Host
from akm_run.rows import StepRow
from helpers import committed, git


@pytest.mark.parametrize(
    ("script", "found"),
    [
        ("#!/bin/sh\necho", Interpreter("/bin/sh")),
        ("#! /bin/bash -eu\n", Interpreter("/bin/bash")),
        ("#!/usr/bin/env python3\n", Interpreter("/usr/bin/env", "python3")),
        ("#!/usr/bin/env -S python3 -u\n", Interpreter("/usr/bin/env", "python3")),
        ("#!/usr/bin/env -i LANG=C node\n", Interpreter("/usr/bin/env", "node")),
        ("#!/usr/bin/env\n", Interpreter("/usr/bin/env", "")),
        ("#!python\n", Interpreter("python")),
        ("#!\n", Interpreter("")),
        ("echo no line\n", None),
        ("", None),
    ],
)
def test_the_interpreter_of_a_scripts_first_line(script: str, found: Interpreter | None) -> None:
    assert interpreter(script) == found


@given(st.text())
def test_any_script_text_gives_an_interpreter_or_none(script: str) -> None:
    found = interpreter(script)
    assert (found is None) == (not script.startswith("#!"))
    if found is not None:
        assert "\n" not in found.text()


def _unit(step_id: str, index: int, target: dict[str, Any], env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"stepId": step_id, "index": index, "onError": "fail", "kind": "unit", "target": target}
    if env:
        step["env"] = env
    return step


SHELL = {"kind": "shell", "command": "true"}
SECRET = [{"name": "T", "kind": "secret", "secret": "TOKEN"}]


def _plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"ref": "wf", "steps": list(steps)}


def test_a_later_target_of_a_route_with_two_targets_is_conditional() -> None:
    route = {"stepId": "pick", "index": 0, "onError": "fail", "kind": "route", "input": "params.x"}
    plan = _plan(
        {**route, "cases": [{"match": 1, "next": "careful"}], "default": "quick"},
        _unit("careful", 1, SHELL, SECRET),
        _unit("quick", 2, SHELL, SECRET),
        _unit("after", 3, {"kind": "agent", "instructions": "go"}),
    )
    found = {(n.step_path, n.kind): n.condition for n in needs(plan)}
    assert found[("careful", "secret")] is not None and found[("careful", "secret")].text() == (
        "route `pick` selects `careful`"
    )
    assert found[("after", "agent")] is None
    one_target = _plan({**route, "cases": [{"match": 1, "next": "careful"}]}, _unit("careful", 1, SHELL, SECRET))
    assert [n.condition for n in needs(one_target)] == [None]  # a route of one target never skips it


def test_a_child_plans_needs_are_named_under_the_parent_step() -> None:
    child = _plan(_unit("hi", 0, SHELL, SECRET), _unit("s", 1, {"kind": "script", "text": "#!/bin/zsh\n"}))
    target = {"kind": "child-workflow", "ref": "workflows/child", "plan": child}
    plan = _plan(_unit("deploy", 0, target))
    assert [(n.kind, n.step_path, n.place) for n in needs(plan)] == [
        ("secret", "deploy/workflows/child:hi", (0, 0)),
        ("interpreter", "deploy/workflows/child:s", (0, 1)),
    ]
    assert summary(plan) == {"secret": ["TOKEN"], "interpreter": ["/bin/zsh"]}
    assert needs(plan, lambda step_id: step_id != "deploy") == []


def test_the_members_of_a_parallel_block_are_needs_at_its_place_under_its_route() -> None:
    route = {"stepId": "pick", "index": 0, "onError": "fail", "kind": "route", "input": "params.x"}
    members = [_unit("lint", 1, SHELL, SECRET), _unit("review", 1, {"kind": "agent", "instructions": "go"})]
    block = {"stepId": "checks", "index": 1, "onError": "fail", "kind": "parallel", "members": members}
    plan = _plan(
        {**route, "cases": [{"match": 1, "next": "checks"}], "default": "other"}, block, _unit("other", 2, SHELL)
    )
    found = [(n.kind, n.step_path, n.place, n.condition is not None) for n in needs(plan)]
    assert found == [("secret", "lint", (1,), True), ("agent", "review", (1,), True)]
    assert needs(plan, lambda step_id: step_id != "lint") == [n for n in needs(plan) if n.step_path == "review"]


def _host(tmp_path: Path, **environ: str) -> Host:
    return Host({"PATH": str(tmp_path), **environ}, tmp_path, "--workdir .", None)


def test_one_finding_per_name_at_the_step_that_needs_it_whatever_a_route_selects(tmp_path: Path) -> None:
    route = {"stepId": "pick", "index": 0, "onError": "fail", "kind": "route", "input": "params.x"}
    plan = _plan(
        {**route, "cases": [{"match": 1, "next": "careful"}], "default": "quick"},
        _unit("careful", 1, SHELL, SECRET),
        _unit("quick", 2, SHELL),
        _unit("always", 3, SHELL, SECRET),
    )
    [finding] = preflight.check(plan, _host(tmp_path))
    assert (finding.severity, finding.step_path) == ("error", "always")
    assert preflight.check(plan, _host(tmp_path, TOKEN="x")) == []


def test_the_agent_command_is_found_from_the_workdir_or_on_path(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.write_text("#!/bin/sh\n")
    plan = _plan(_unit("think", 0, {"kind": "agent", "instructions": "go"}))

    def says(command: str) -> list[str]:
        host = Host({"PATH": str(tmp_path)}, tmp_path, "--workdir .", command)
        return [f.message for f in preflight.check(plan, host)]

    assert says("./agent --x") == ["the agent command's program `./agent` is not an executable file"]
    agent.chmod(0o755)
    assert says("./agent --x") == says("FOO=1 agent") == says(str(agent)) == []
    assert says("nope") == ["the agent command's program `nope` is not on PATH"]
    assert says("  ") == ["the agent command names no program"]


def test_a_finding_never_holds_a_value(tmp_path: Path) -> None:
    env = [*SECRET, {"name": "P", "kind": "passthrough"}]
    plan = _plan(_unit("s", 0, {"kind": "script", "text": "#!/usr/bin/env nothing-here\n"}, env))
    host = Host({"TOKEN": ""}, tmp_path / "gone", "--workdir gone", "secret-agent-value", tmp_path / "f" / "s")
    (tmp_path / "f").write_text("")
    findings = preflight.check(plan, host)
    assert [f.check for f in findings] == ["workdir", "state", "secret", "passthrough", "interpreter"]
    assert "secret-agent-value" not in preflight.text(findings) and os.sep in preflight.text(findings)


@pytest.mark.parametrize(
    ("command", "started"),
    [
        ("curl -d @- $HOOK", "curl"),
        ("LANG=C ./notify.sh 'a b'", "./notify.sh"),
        ("cd hooks && ./post", None),
        ("exec notify", None),
        ("$NOTIFIER --now", None),
        ("", None),
        ("'unclosed quote", "'unclosed"),  # the shell refuses it; the finding names it as written
    ],
)
def test_the_program_a_shell_command_starts(command: str, started: str | None) -> None:
    assert program(command) == started


def _notifying(target: dict[str, Any], env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    plan = _plan(_unit("s", 0, {"kind": "shell", "command": "true"}))
    plan["notify"] = {"on": ["failed"], "target": target, **({"env": env} if env else {})}
    return plan


def test_the_notifiers_needs_and_their_findings(tmp_path: Path) -> None:
    shell = _notifying({"kind": "shell", "command": "notifier --post"}, SECRET)
    assert notifier(shell) == {"secrets": ["TOKEN"], "program": ["notifier"]}
    assert notifier(_plan()) == {} and summary(shell) == {}  # a notifier's needs are not a step's
    messages = [(f.check, f.step_path, f.message) for f in preflight.check(shell, _host(tmp_path))]
    assert messages == [
        ("notify", "notify", "secret `TOKEN` is not set"),
        ("notify", "notify", "the notify command's program `notifier` is not on PATH"),
    ]
    (tmp_path / "notifier").write_text("#!/bin/sh\n")
    (tmp_path / "notifier").chmod(0o755)
    assert preflight.check(shell, _host(tmp_path, TOKEN="x")) == []
    script = _notifying({"kind": "script", "text": "#!/no/such/sh\n"})
    assert notifier(script) == {"interpreter": ["/no/such/sh"]}
    [finding] = preflight.check(script, _host(tmp_path))
    assert finding.message == "the script's interpreter `/no/such/sh` does not exist"


def test_the_hosts_notifier_is_checked_as_the_agent_command_is(tmp_path: Path) -> None:
    plan = _plan(_unit("s", 0, {"kind": "shell", "command": "true"}))

    def says(command: str) -> list[tuple[str | None, str]]:
        host = Host({"PATH": str(tmp_path)}, tmp_path, "--workdir .", None, notify_cmd=command)
        return [(f.step_path, f.message) for f in preflight.check(plan, host)]

    assert says("nope --x") == [(None, "the --notify-cmd program `nope` is not on PATH")]
    assert says("  ") == [(None, "--notify-cmd names no program")]
    assert says("cd /tmp && nope") == says("$HOOK") == []  # what the shell runs itself is not looked up


ISOLATED = {**_unit("fix", 0, {"kind": "agent", "instructions": "go"}), "isolation": "worktree"}


def test_a_step_that_runs_in_worktrees_needs_a_git_work_tree() -> None:
    child = _plan({**_unit("hi", 0, SHELL), "isolation": "worktree"})
    plan = _plan(ISOLATED, _unit("call", 1, {"kind": "child-workflow", "ref": "workflows/child", "plan": child}))
    assert [(n.kind, n.step_path) for n in needs(plan) if n.kind == "git"] == [
        ("git", "fix"),
        ("git", "call/workflows/child:hi"),
    ]
    assert summary(plan) == {"agent": [""], "git": [""]}
    assert "git" not in summary(_plan(_unit("plain", 0, SHELL)))


def _git_findings(plan: dict[str, Any], host: Host) -> list[tuple[str, str, str | None]]:
    return [(f.severity, f.message, f.step_path) for f in preflight.check(plan, host) if f.check == "git"]


def test_the_git_check_wants_a_work_tree_with_a_commit_and_an_existing_run_s_base(tmp_path: Path) -> None:
    plan = _plan(_unit("plain", 0, SHELL), {**ISOLATED, "index": 1})
    outside = _git_findings(plan, _host(tmp_path))
    assert outside == [
        (
            "error",
            f"steps run in git worktrees, but --workdir . cannot give them a base commit: {tmp_path} is not "
            "inside a git work tree",
            "fix",
        )
    ]
    git(tmp_path, "init", "-q")
    [(_, unborn, _)] = _git_findings(plan, _host(tmp_path))
    assert unborn.endswith("has no commit yet (HEAD names none)")
    (tmp_path / "f").write_text("x")
    commit = git(committed(tmp_path), "rev-parse", "HEAD").strip()
    assert _git_findings(plan, _host(tmp_path)) == []
    ran = Host({}, tmp_path, "the run's workdir .", None, None, commit)
    assert _git_findings(plan, ran) == []
    behind = Host({}, tmp_path, "the run's workdir .", None, None, "0" * 40)
    [finding] = [f for f in preflight.check(plan, behind) if f.check == "git"]
    assert finding.message == f"the run's base commit {'0' * 40} is not in the repository of the run's workdir ."
    assert finding.hint.startswith(f"fetch {'0' * 40} into that repository")
    assert _git_findings(plan, Host({}, tmp_path, "w", None, None, "0" * 40, git=False)) == []  # another host's


def test_a_git_finding_of_a_step_a_route_may_skip_is_a_warning_and_a_missing_workdir_is_its_own(
    tmp_path: Path,
) -> None:
    route = {"stepId": "pick", "index": 0, "onError": "fail", "kind": "route", "input": "params.x"}
    plan = _plan(
        {**route, "cases": [{"match": 1, "next": "fix"}], "default": "other"},
        {**ISOLATED, "index": 1},
        _unit("other", 2, SHELL),
    )
    [(severity, message, _)] = _git_findings(plan, _host(tmp_path))
    assert severity == "warning" and message.endswith("needed only if route `pick` selects `fix`")
    gone = Host({}, tmp_path / "gone", "--workdir gone", None)
    assert [f.check for f in preflight.check(plan, gone)] == ["workdir", "agent"]  # no git finding


def test_a_plan_with_token_budgets_and_an_agent_that_can_run_gets_one_usage_reminder(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.write_text("#!/bin/sh\n")
    agent.chmod(0o755)
    route = {"stepId": "pick", "index": 0, "onError": "fail", "kind": "route", "input": "params.x"}
    route |= {"cases": [{"match": "a", "next": "quick"}], "default": "think"}
    think = _unit("think", 2, {"kind": "agent", "instructions": "go"}, None)
    plan = _plan(route, _unit("quick", 1, {"kind": "shell", "command": "true"}), think) | {"features": ["tokens"]}
    host = Host({"PATH": str(tmp_path)}, tmp_path, "--workdir .", "agent")
    [found] = preflight.check(plan, host)
    assert (found.check, found.severity, found.step_path) == ("usage", "info", "think")  # a reminder: no downgrade
    assert not preflight.failed([found]) and "needed only if" not in found.message
    assert preflight.check(plan | {"features": []}, host) == []  # no budget: nothing to remind
    done = StepRow("think", 2, "completed", None, None, None, None, 0, 0, None)
    assert preflight.check(plan, host, [done]) == []  # no agent left to run
