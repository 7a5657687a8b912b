"""Retention's selection and deletion (akm_run.retention) on a real SQLite journal: what `prune
--dry-run` lists is exactly what a real prune deletes, for any journal and any rule; active and
blocked runs never go; a run's tree and files go with it; the pool prunes one worker at a time."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from akm_run import retention
from akm_run.durations import parse_age
from akm_run.pgstore import RETENTION_LOCK, PostgresStore
from akm_run.sqlitestore import SQLiteStore
from akm_run.store import Store
from profiles import examples

NOW = 1_800_000_000.0
DAY = 86_400.0
PLAN = {"ref": "w", "title": "w", "steps": [{"stepId": "a", "index": 0}]}

# (ref, status, age in days, a child run under it)
Runs = list[tuple[str, str, int, bool]]
RUNS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.sampled_from(["active", "blocked", "completed", "failed", "abandoned"]),
        st.integers(0, 60),
        st.booleans(),
    ),
    max_size=12,
)
RULES = st.builds(
    retention.Rule,
    before=st.integers(0, 61).map(lambda days: NOW - days * DAY),
    statuses=st.frozensets(st.sampled_from(retention.STATUSES), min_size=1),
    keep_last=st.integers(0, 3),
    ref=st.sampled_from([None, "a", "b"]),
    limit=st.sampled_from([None, 1, 3]),
)


def journal(store: Store, runs: Runs) -> None:
    """Top-level runs as `runs` describe them (a child run under some), with their ages forged."""
    for i, (ref, status, age, child) in enumerate(runs):
        run_id = f"r{i:02d}"
        store.publish_run(run_id, {**PLAN, "ref": ref}, "sha256:x", {})
        if child:
            store.publish_run(f"{run_id}-child", PLAN, "sha256:y", {}, parent_run_id=run_id, parent_unit_id="a:solo")
        failure = '{"reason": "abandoned"}' if status == "abandoned" else None
        with store.transaction():
            store._execute(
                "UPDATE runs SET status = ?, failure_json = ?, updated_at = ? WHERE id = ? OR parent_run_id = ?",
                ("failed" if status == "abandoned" else status, failure, NOW - age * DAY - i, run_id, run_id),
            )


def ids(selection: retention.Selection) -> list[str]:
    return [run.id for run, _ in selection.runs]


@settings(max_examples=examples(100))
@given(RUNS, RULES)
def test_a_dry_run_lists_exactly_what_a_real_prune_deletes(runs: Runs, rule: retention.Rule) -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = SQLiteStore(Path(directory))
        journal(store, runs)
        listed = retention.select(store, rule)
        done = retention.delete(store, Path(directory), listed)
        assert ids(done) == ids(listed) and done.busy == []
        left = {row.id for row in store.runs(children=True)}
        for run, tree in listed.runs:
            assert run.status in rule.statuses or (run.status == "abandoned" and "failed" in rule.statuses)
            assert run.updated_at < rule.before and not left & set(tree)
        assert {row.status for row in store.runs() if row.updated_at < rule.before} >= set(listed.kept)
        store.close()


def test_active_and_blocked_runs_stay_however_old_and_are_counted(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    journal(store, [("a", "blocked", 40, False), ("a", "blocked", 50, False), ("a", "active", 45, True)])
    done = retention.delete(store, tmp_path, retention.select(store, retention.Rule(before=NOW)))
    assert done.runs == [] and done.kept == {"active": 1, "blocked": 2}
    assert len(store.runs(children=True)) == 4


def test_keep_last_keeps_the_newest_of_each_ref_whatever_their_age(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    journal(store, [("a", "completed", 40, False), ("a", "failed", 35, False), ("b", "completed", 50, False)])
    rule = retention.Rule(before=NOW - 30 * DAY, keep_last=1)
    assert ids(retention.select(store, rule)) == ["r00"]


def test_a_run_held_by_a_driver_is_left_alone_and_named(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)
    journal(store, [("a", "completed", 40, False), ("a", "failed", 41, False)])
    with store.lock("r00"):
        done = retention.delete(store, tmp_path, retention.select(store, retention.Rule(before=NOW)))
    assert ids(done) == ["r01"] and [run.id for run, _ in done.busy] == ["r00"]
    assert store.run("r00") is not None and store.events("r00")


def test_a_run_goes_with_its_scratch_worktrees_and_lock_file_but_never_through_a_link(tmp_path: Path) -> None:
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    store = SQLiteStore(state)
    journal(store, [("a", "completed", 40, True)])
    (elsewhere / "keep").mkdir(parents=True)
    (state / "scratch" / "r00.4242").mkdir(parents=True)
    (state / "scratch" / "r001.1").mkdir()  # another run's, whose id starts the same
    (state / "worktrees" / "r00" / "build").mkdir(parents=True)
    (state / "worktrees" / "r00-child").symlink_to(elsewhere)
    retention.delete(store, state, retention.select(store, retention.Rule(before=NOW)))
    assert sorted(p.name for p in (state / "scratch").iterdir()) == ["r001.1"]
    assert list((state / "worktrees").iterdir()) == [] and (elsewhere / "keep").is_dir()
    assert not (state / "locks" / "r00.lock").exists()


def test_ages_take_days_first() -> None:
    assert parse_age("30d", "--older-than") == 30 * 86_400_000
    assert parse_age("1d12h", "--older-than") == 36 * 3_600_000
    assert parse_age("90m", "--older-than") == 90 * 60_000
    for bad in ("1d30", "d", "30x", "12h1d", "٣d"):
        try:
            parse_age(bad, "--older-than")
        except ValueError as error:
            assert str(error).startswith("--older-than: invalid age")
        else:
            raise AssertionError(bad)


def test_the_pool_prunes_one_worker_at_a_time(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(retention.ENV, "30d")
    store = PostgresStore(database_url)
    journal(store, [("a", "completed", 0, False)])
    with store.transaction():  # settled 40 days ago
        store._execute("UPDATE runs SET updated_at = ?", (time.time() - 40 * DAY,))
    with psycopg.connect(database_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (RETENTION_LOCK,))
        assert retention.pooled(database_url, tmp_path) is None  # another worker is pruning
        assert store.run("r00") is not None
        other.execute("SELECT pg_advisory_unlock(%s)", (RETENTION_LOCK,))
    pruned = retention.pooled(database_url, tmp_path)
    assert pruned is not None and ids(pruned) == ["r00"] and store.run("r00") is None
    store.close()
