"""Retention end to end (docs/runtime.md, "Retention"): `akm-run prune` and `akm-run delete` on both
stores, with real runs: settled runs go with their child runs, rows, events and files; active and
blocked runs stay; the events table stays append-only for the runs that remain; `$AKM_RUN_RETENTION`
prunes after a drive."""

from __future__ import annotations

import json
import time

import pytest

from helpers import Runtime, doubling_leaf, source

DAY = 86_400.0

LEAF = doubling_leaf("true")
TOP = source("""
    workflow "top" {
      step call {
        uses "workflows/leaf" {
          n = 2
        }
      }
    }
""")
WAITS = source("""
    workflow "waits" {
      step wait {
        approval "go on?"
      }
    }
""")
FAILS = source("""
    workflow "fails" {
      step boom {
        shell "exit 3"
      }
    }
""")
TABLES = ("runs", "steps", "units", "attempts", "events", "signatures", "notifications")
NOTIFIED = ("--notify-cmd", "true")  # the host's notifier: a notification row per block or failure


def _run(runtime: Runtime, plan: str, expected: int, *options: str) -> str:
    code, document = runtime.run_json(runtime.root / "plans" / plan, *options)
    assert code == expected, document
    return str(document["runId"])


def _age(runtime: Runtime, days: float, *run_ids: str) -> None:
    """Forge the runs' last update (and their child runs') `days` ago."""
    for run_id in run_ids:
        runtime.sql(
            "UPDATE runs SET updated_at = ? WHERE id = ? OR parent_run_id = ?", time.time() - days * DAY, run_id, run_id
        )


def _rows(runtime: Runtime, run_ids: list[str]) -> dict[str, int]:
    marks = ", ".join("?" for _ in run_ids)
    return {
        table: runtime.sql(
            f"SELECT COUNT(*) FROM {table} WHERE {'id' if table == 'runs' else 'run_id'} IN ({marks})", *run_ids
        )[0][0]
        for table in TABLES
    }


def _journal(runtime: Runtime) -> dict[str, str]:
    """An old completed run with a child run, an old failed one, an old abandoned one, an old
    blocked one, and a recent completed one."""
    runtime.write({"workflows/leaf.akm": LEAF})
    for name, text in (("workflows/top.akm", TOP), ("waits.akm", WAITS), ("fails.akm", FAILS)):
        runtime.compile(name, text)
    runs = {
        "completed": _run(runtime, "top.plan.json", 0),
        "failed": _run(runtime, "fails.plan.json", 1, *NOTIFIED),
        "abandoned": _run(runtime, "waits.plan.json", 3, *NOTIFIED),
        "blocked": _run(runtime, "waits.plan.json", 3, *NOTIFIED),
        "recent": _run(runtime, "top.plan.json", 0),
    }
    assert runtime.akm("abandon", runs["abandoned"]).returncode == 0
    _age(runtime, 40, *(runs[k] for k in ("completed", "failed", "abandoned", "blocked")))
    return runs


def test_prune_deletes_old_settled_runs_with_everything_they_left_and_keeps_the_rest(runtime: Runtime) -> None:
    runs = _journal(runtime)
    child = runtime.sql("SELECT id FROM runs WHERE parent_run_id = ?", runs["completed"])[0][0]
    dry = runtime.akm("prune", "--older-than", "30d", "--dry-run", "--format", "json")
    assert dry.returncode == 0, dry.stderr
    listed = json.loads(dry.stdout)
    assert [r["id"] for r in listed["wouldDelete"]] == [runs["completed"], runs["failed"], runs["abandoned"]]
    assert listed["kept"] == {"blocked": 1} and _rows(runtime, [runs["completed"]])["runs"] == 1
    assert _rows(runtime, [runs["failed"], runs["abandoned"]])["notifications"] == 3  # failed; blocked, failed
    if runtime.sqlite:  # what a drive of it left under the state directory, and a kept worktree
        (runtime.state / "scratch" / f"{child}.999").mkdir(parents=True)
        (runtime.state / "worktrees" / runs["completed"] / "src").mkdir(parents=True)
    text = runtime.akm("prune", "--older-than", "30d")
    assert text.returncode == 0, text.stderr
    assert f"deleted run {runs['completed']} (workflows/top, completed, last updated " in text.stdout
    assert "2 run(s) with its child runs)" in text.stdout and "3 run(s) deleted" in text.stdout
    assert "1 blocked run(s) kept; abandon them first" in text.stdout
    gone = [runs["completed"], child, runs["failed"], runs["abandoned"]]
    assert _rows(runtime, gone) == dict.fromkeys(TABLES, 0)
    kept = _rows(runtime, [runs["blocked"], runs["recent"]])
    assert kept["runs"] == 2 and kept["events"] > 0 and kept["steps"] > 0 and kept["notifications"] == 1
    assert runtime.akm("status", runs["recent"]).returncode == 0
    if runtime.sqlite:
        assert list((runtime.state / "scratch").iterdir()) == []
        assert list((runtime.state / "worktrees").iterdir()) == []
    again = json.loads(runtime.akm("prune", "--older-than", "30d", "--format", "json").stdout)
    assert again["deleted"] == [] and again["kept"] == {"blocked": 1}


def test_prune_options(runtime: Runtime) -> None:
    runs = _journal(runtime)
    missing = runtime.akm("prune")
    assert missing.returncode == 2 and "--older-than" in missing.stderr
    for bad, said in (
        (("--older-than", "1month"), "--older-than: invalid age '1month'"),
        (("--older-than", "1d", "--status", "done"), "--status takes completed, failed, abandoned"),
        (("--older-than", "1d", "--status", ""), "--status takes completed, failed, abandoned"),
        (("--older-than", "1d", "--keep-last", "-1"), "argument --keep-last: invalid count value: '-1'"),
    ):
        result = runtime.akm("prune", *bad, "--dry-run")
        assert result.returncode == 2 and said in result.stderr, result.stderr
    failed = json.loads(
        runtime.akm("prune", "--older-than", "30d", "--status", "failed", "--dry-run", "--format", "json").stdout
    )
    assert [r["id"] for r in failed["wouldDelete"]] == [runs["failed"], runs["abandoned"]]
    abandoned = json.loads(
        runtime.akm("prune", "--older-than", "30d", "--status", "abandoned", "--dry-run", "--format", "json").stdout
    )
    assert [(r["id"], r["status"]) for r in abandoned["wouldDelete"]] == [(runs["abandoned"], "abandoned")]
    of_ref = json.loads(
        runtime.akm(
            "prune", "--older-than", "1d", "--ref", "workflows/top", "--keep-last", "1", "--dry-run", "--format", "json"
        ).stdout
    )
    assert [r["id"] for r in of_ref["wouldDelete"]] == [runs["completed"]] and of_ref["kept"] == {}
    vacuumed = runtime.akm("prune", "--older-than", "30d", "--vacuum")
    assert vacuumed.returncode == 0 and "3 run(s) deleted" in vacuumed.stdout, vacuumed.stderr


def test_delete_takes_one_settled_top_level_run(runtime: Runtime) -> None:
    runs = _journal(runtime)
    child = runtime.sql("SELECT id FROM runs WHERE parent_run_id = ?", runs["recent"])[0][0]
    of_child = runtime.akm("delete", child)
    assert of_child.returncode == 2
    assert (
        f"run {child} is a child run of {runs['recent']}: delete its top-level run with `akm-run delete {runs['recent']}"
        in of_child.stderr
    )
    unsettled = runtime.akm("delete", runs["blocked"])
    assert unsettled.returncode == 2
    assert (
        f"run {runs['blocked']} is blocked: abandon it first with `akm-run abandon {runs['blocked']}"
        in unsettled.stderr
    )
    assert runtime.akm("delete", "no-such-run").returncode == 2
    deleted = runtime.akm("delete", runs["recent"], "--format", "json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout) == {"deleted": runs["recent"], "runs": [runs["recent"], child]}
    assert _rows(runtime, [runs["recent"], child]) == dict.fromkeys(TABLES, 0)
    assert _rows(runtime, [runs["blocked"]])["events"] > 0


def test_events_stay_append_only_for_runs_that_remain(runtime: Runtime) -> None:
    runs = _journal(runtime)
    refused = "events are append-only"
    for statement in (
        "UPDATE events SET kind = 'run.completed' WHERE run_id = ?",
        "DELETE FROM events WHERE run_id = ?",
    ):
        for run_id in (runs["blocked"], runs["completed"]):  # a live run's, a settled one's
            with pytest.raises(Exception, match=refused):
                runtime.sql(statement, run_id)
    store = runtime.store()
    with store.transaction():
        store.delete_tree(store.run_tree(runs["failed"]))
    with pytest.raises(Exception, match=refused):  # a deleted run's events: still never updated
        runtime.sql("UPDATE events SET kind = 'run.completed' WHERE kind = 'run.published'")
    assert _rows(runtime, [runs["failed"]])["events"] == 0


@pytest.mark.sqlite_only
def test_retention_prunes_after_each_drive(runtime: Runtime) -> None:
    runs = _journal(runtime)
    bad = runtime.akm("run", runtime.root / "plans" / "fails.plan.json", env=runtime.env(AKM_RUN_RETENTION="soon"))
    assert bad.returncode == 2 and "$AKM_RUN_RETENTION: invalid age 'soon'" in bad.stderr
    env = runtime.env(AKM_RUN_RETENTION="30d")
    driven = runtime.akm("run", runtime.root / "plans" / "fails.plan.json", env=env)
    assert driven.returncode == 1, driven.stderr
    assert "retention ($AKM_RUN_RETENTION): 3 run(s) deleted" in driven.stderr
    left = {row[0] for row in runtime.sql("SELECT id FROM runs WHERE parent_run_id IS NULL")}
    assert runs["blocked"] in left and runs["recent"] in left and runs["failed"] not in left and len(left) == 3


def test_a_paused_run_is_never_pruned_nor_deleted_even_once_it_failed(runtime: Runtime) -> None:
    runs = _journal(runtime)
    assert runtime.akm("pause", runs["failed"], "--by", "ops").returncode == 0
    _age(runtime, 40, runs["failed"])  # the pause updated it
    listed = json.loads(runtime.akm("prune", "--older-than", "30d", "--dry-run", "--format", "json").stdout)
    assert runs["failed"] not in [r["id"] for r in listed["wouldDelete"]]
    assert listed["kept"] == {"blocked": 1, "paused": 1}
    text = runtime.akm("prune", "--older-than", "30d")
    assert text.returncode == 0 and "1 paused run(s) kept; unpause them first" in text.stdout, text.stderr
    refused = runtime.akm("delete", runs["failed"])
    assert refused.returncode == 2
    assert f"run {runs['failed']} is paused: lift the pause with `akm-run unpause {runs['failed']}" in refused.stderr
    assert _rows(runtime, [runs["failed"]])["runs"] == 1
    assert runtime.akm("unpause", runs["failed"]).returncode == 0
    assert runtime.akm("delete", runs["failed"]).returncode == 0
    assert _rows(runtime, [runs["failed"]]) == dict.fromkeys(TABLES, 0)
