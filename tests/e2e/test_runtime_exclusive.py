"""Exclusive runs end to end (docs/runtime.md, "Exclusive runs"): `run PLAN` of a workflow with
`limits { exclusive = … }` is refused, with nothing published, while an active or blocked top-level
run holds its key, naming that run and the commands to continue or drop it; two submitters racing
cannot both pass; child runs are never checked; without `exclusive`, runs go on side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from akm_run.pgstore import EXCLUSIVE_SPACE
from helpers import Runtime, eventually, source
from profiles import examples


def _release(exclusive: str) -> str:
    return source(f"""
        workflow "release" {{
          params {{
            environment: "staging" | "prod" = "staging"
          }}
          {exclusive}
          step wait {{
            approval "ship to {{environment}}?"
            inputs = [params.environment]
          }}
        }}
    """)


def _top_level(runtime: Runtime) -> list[tuple[str, str]]:
    return [
        (str(i), str(s))
        for i, s in runtime.sql("SELECT id, status FROM runs WHERE parent_run_id IS NULL ORDER BY created_at, id")
    ]


def test_a_second_run_of_an_exclusive_workflow_is_refused_until_the_first_settles(runtime: Runtime) -> None:
    plan = runtime.compile("release.akm", _release("limits { exclusive = true }"))
    code, first = runtime.run_json(plan)
    assert code == 3, first
    run_id = first["runId"]
    refused = runtime.akm("run", plan, "--param", "environment=prod")
    assert refused.returncode == 2 and refused.stdout == ""
    assert (
        f"release is exclusive: run {run_id} is blocked; continue it with `akm-run run {run_id}` "
        f"or drop it with `akm-run abandon {run_id}`" in refused.stderr
    )
    assert _top_level(runtime) == [(run_id, "blocked")]  # nothing published
    assert runtime.akm("abandon", run_id).returncode == 0
    code, second = runtime.run_json(plan)
    assert code == 3, second
    assert [status for _, status in _top_level(runtime)] == ["failed", "blocked"]


def test_exclusive_per_param_value_lets_other_values_run(runtime: Runtime) -> None:
    plan = runtime.compile("release.akm", _release("limits { exclusive = params.environment }"))
    code, staging = runtime.run_json(plan)  # the default value counts
    assert code == 3, staging
    code, prod = runtime.run_json(plan, "--param", "environment=prod")
    assert code == 3, prod
    refused = runtime.akm("run", plan, "--param", "environment=staging")
    assert refused.returncode == 2
    assert f'release (environment = "staging") is exclusive: run {staging["runId"]} is blocked' in refused.stderr
    assert len(_top_level(runtime)) == 2


def test_without_exclusive_runs_of_one_workflow_go_on_side_by_side(runtime: Runtime) -> None:
    plan = runtime.compile("release.akm", _release(""))
    for _ in range(2):
        code, document = runtime.run_json(plan)
        assert code == 3, document
    assert [status for _, status in _top_level(runtime)] == ["blocked", "blocked"]


def test_child_runs_are_never_checked(runtime: Runtime) -> None:
    runtime.write({"workflows/gate.akm": _release("limits { exclusive = true }").replace('"release"', '"gate"')})
    parent = runtime.compile(
        "parent.akm",
        source("""
        workflow "parent" {
          step call {
            uses "workflows/gate" {}
          }
        }
    """),
    )
    assert json.loads(parent.read_text())["plan"]["features"] == ["exclusive"]
    for _ in range(2):
        code, document = runtime.run_json(parent)
        assert code == 3, document
    children = runtime.sql("SELECT status FROM runs WHERE parent_run_id IS NOT NULL")
    assert [s for (s,) in children] == ["blocked", "blocked"]


@pytest.mark.slow
def test_two_submitters_racing_cannot_both_pass(runtime: Runtime) -> None:
    plan = runtime.compile("release.akm", _release("limits { exclusive = true }"))
    for _ in range(examples(10, at_least=2)):
        racers = [runtime.start("run", plan, "--format", "json") for _ in range(2)]
        ended = [(racer.wait(timeout=120), racer.communicate()) for racer in racers]
        assert sorted(code for code, _ in ended) == [2, 3], ended
        [(won, _)] = [(json.loads(out)["runId"], err) for code, (out, err) in ended if code == 3]
        [(_, lost)] = [(out, err) for code, (out, err) in ended if code == 2]
        assert f"is exclusive: run {won} is " in lost  # active or already blocked
        assert [i for i, s in _top_level(runtime) if s == "blocked"] == [won]
        assert runtime.akm("abandon", won).returncode == 0


def test_on_postgres_a_submitter_waits_for_the_one_between_its_check_and_its_commit(pooled: Runtime) -> None:
    """Deterministic: the first submitter stops after its check, before its commit; the second then
    either waits for the publishers' lock (and is refused once the first commits) or, were there no
    lock, would pass its own check meanwhile: it must be seen waiting, never past its check."""
    plan = pooled.compile("release.akm", _release("limits { exclusive = true }"))
    first_go, second_go = pooled.root / "first-go", pooled.root / "second-go"
    first = pooled.start("run", plan, "--format", "json", env=pooled.env(AKM_RUN_FAULT=f"hold-exclusive:{first_go}"))
    eventually(lambda: Path(f"{first_go}.held").exists(), "the first submitter past its check")
    second = pooled.start("run", plan, "--format", "json", env=pooled.env(AKM_RUN_FAULT=f"hold-exclusive:{second_go}"))
    waiting = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = ?"
    eventually(
        lambda: Path(f"{second_go}.held").exists() or pooled.sql(waiting, EXCLUSIVE_SPACE)[0][0] == 1,
        "the second submitter waiting for the lock (or, wrongly, past its check)",
    )
    assert not Path(f"{second_go}.held").exists(), "the second submitter passed its check beside the first"
    first_go.touch()
    second_go.touch()
    assert second.wait(timeout=120) == 2, second.communicate()
    assert first.wait(timeout=120) == 3, first.communicate()
    assert "is exclusive: run " in second.communicate()[1]
    assert len(_top_level(pooled)) == 1
