"""The state store's contract, against every store: SQLite in a temp directory and PostgreSQL in a fresh database
(the private test server); and the run lock."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from syrupy.assertion import SnapshotAssertion

from akm_run.locks import LockHeld, RunLock
from akm_run.migrations import EVENT_KINDS, SQLITE_MIGRATIONS
from akm_run.outcomes import redact
from akm_run.pgstore import SCHEMA, PostgresStore
from akm_run.rows import AttemptFailure
from akm_run.signing import Signer
from akm_run.sqlitestore import SQLiteStore
from akm_run.store import Store
from akm_run.trust import Signature

PLAN = {"irVersion": 1, "ref": "workflows/w", "title": "w", "steps": [{"stepId": "a", "index": 0}], "limits": {}}


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Store]]:
    """Opens the store under test, once more on each call (a connection of its own, as another
    process would have): SQLite in a temp directory, or PostgreSQL in a fresh database."""
    opened: list[Store] = []

    def open_one() -> Store:
        if request.param == "sqlite":
            opened.append(SQLiteStore(tmp_path / "state"))
        else:
            opened.append(PostgresStore(request.getfixturevalue("database_url")))
        return opened[-1]

    yield open_one
    for each in opened:
        each.close()


@pytest.fixture
def store(open_store: Callable[[], Store]) -> Store:
    return open_store()


def outside(store: Store, sql: str) -> None:
    """Run a statement on a connection of its own, past the store's methods."""
    if isinstance(store, PostgresStore):
        with psycopg.connect(store.url) as connection:
            connection.execute(f"SET search_path TO {SCHEMA}")
            connection.execute(sql)
    else:
        assert isinstance(store, SQLiteStore)
        with sqlite3.connect(store.path) as db:
            db.execute(sql)


def test_migrations_are_append_only(snapshot: SnapshotAssertion) -> None:
    """A released migration never changes: editing one fails here; a new one is appended and
    this snapshot updated in the same commit."""
    assert [hashlib.sha256(m.encode()).hexdigest() for m in SQLITE_MIGRATIONS] == snapshot


def test_reopening_applies_nothing_twice(tmp_path: Path) -> None:
    first = SQLiteStore(tmp_path)
    first.close()
    second = SQLiteStore(tmp_path)
    assert second.schema_version() == len(SQLITE_MIGRATIONS)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    SQLiteStore(tmp_path).close()
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("INSERT INTO migrations VALUES (?, 0)", (len(SQLITE_MIGRATIONS) + 1,))
    with pytest.raises(RuntimeError, match="newer akm-run"):
        SQLiteStore(tmp_path)


def test_publish_creates_the_run_and_its_steps(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {"p": 1})
    run = store.run("r1")
    assert run is not None and run.status == "active" and run.params == {"p": 1}
    assert [(s.step_id, s.status) for s in store.steps("r1")] == [("a", "pending")]
    assert store.events("r1")[0][0] == "run.published"


def test_publish_under_an_invocation_key_is_idempotent(store: Store) -> None:
    store.publish_run("parent", PLAN, "sha256:x", {})
    first = store.publish_run("c1", PLAN, "sha256:x", {}, parent_run_id="parent", invocation_key="k")
    second = store.publish_run("c2", PLAN, "sha256:x", {}, parent_run_id="parent", invocation_key="k")
    assert first == second == "c1" and [r.id for r in store.child_runs("parent")] == ["c1"]


def test_racing_publishers_converge_on_one_row(open_store: Callable[[], Store]) -> None:
    first = open_store()
    first.publish_run("parent", PLAN, "sha256:x", {})
    results: list[str] = []
    owners = [open_store() for _ in range(8)]  # separate connections, as separate processes would have
    barrier = threading.Barrier(8)

    def publish(n: int) -> None:
        own = owners[n]
        barrier.wait()
        results.append(own.publish_run(f"c{n}", PLAN, "sha256:x", {}, parent_run_id="parent", invocation_key="k"))

    threads = [threading.Thread(target=publish, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1 and len(first.child_runs("parent")) == 1


def test_a_signed_run_keeps_its_signature_exactly(store: Store) -> None:
    signature = Signature(b"{\xff plan bytes}\n", b"-----BEGIN SSH SIGNATURE-----\n", Signer("ci@x", "SHA256:k"), "/a")
    signed = store.publish_run("r1", PLAN, "sha256:x", {}, signature=signature)
    assert store.signature(signed) == signature and store.signature(store.publish_run("r2", PLAN, "h", {})) is None
    [(kind, _, _, data)] = store.events(signed)
    assert kind == "run.published" and data["signedBy"] == {"principal": "ci@x", "fingerprint": "SHA256:k"}


def test_a_failed_transaction_leaves_nothing(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {})
    with pytest.raises(RuntimeError), store.transaction():
        store.complete_step("r1", "a", 1)
        raise RuntimeError("boom")
    a_step = store.step("r1", "a")
    assert a_step is not None and a_step.status == "pending"
    assert [e[0] for e in store.events("r1")] == ["run.published"]


def test_events_are_append_only(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {})
    with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="append-only"):
        outside(store, "UPDATE events SET kind = 'x'")
    with pytest.raises((sqlite3.DatabaseError, psycopg.Error), match="append-only"):
        outside(store, "DELETE FROM events")


def test_attempts_journal_and_units_settle(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {})
    assert store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=True) == 1
    store.fail_attempt("r1", "a:solo", "a", 1, AttemptFailure("exit", None, final=False))
    unit_row = store.unit("r1", "a:solo")
    assert unit_row is not None and unit_row.status == "running"
    assert store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-2", new_unit=False) == 2
    assert [u for u, _, _ in store.interrupted_attempts("r1")] == ["a:solo"]
    store.complete_attempt("r1", "a:solo", "a", 2, {"ok": True}, None)
    unit = store.unit("r1", "a:solo")
    assert unit is not None and unit.status == "completed" and unit.output == {"ok": True}
    assert [a.dispatch_id for a in store.attempts("r1", "a:solo")] == ["d-1", "d-2"]
    kinds = {e[0] for e in store.events("r1")}
    assert kinds <= set(EVENT_KINDS) and {"unit.dispatched", "unit.failed", "unit.completed"} <= kinds


def test_an_attempt_that_printed_null_keeps_no_attempt_output_as_before(store: Store) -> None:
    """A unit whose stdout is JSON `null` completes with that value, but its attempt row keeps no
    output, as every earlier release wrote it (`logs` shows no stdout line for it)."""
    store.publish_run("r1", PLAN, "sha256:x", {})
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=True)
    store.complete_attempt("r1", "a:solo", "a", 1, None, None)
    unit_row = store.unit("r1", "a:solo")
    assert unit_row is not None and unit_row.output_json == "null"
    assert [a.output_json for a in store.attempts("r1", "a:solo")] == [None]


def test_the_dispatch_budget_counts_new_units_only(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {})
    assert store.begin_attempt("r1", "a:1", "a", 0, "h", "d-1", new_unit=True, max_units=2) == 1
    assert store.begin_attempt("r1", "a:1", "a", 0, "h", "d-2", new_unit=False, max_units=2) == 2  # a retry
    assert store.begin_attempt("r1", "a:2", "a", 1, "h", "d-3", new_unit=True, max_units=2) == 1
    assert store.begin_attempt("r1", "a:3", "a", 2, "h", "d-4", new_unit=True, max_units=2) == 0
    assert store.unit("r1", "a:3") is None


def test_listing_hides_children_unless_asked(store: Store) -> None:
    store.publish_run("p", PLAN, "sha256:x", {})
    store.publish_run("c", PLAN, "sha256:x", {}, parent_run_id="p", invocation_key="k")
    assert [r.id for r in store.runs()] == ["p"]
    assert [r.id for r in store.runs(children=True)] == ["p", "c"]
    assert [r.id for r in store.runs(children=True, status="completed")] == []


# -- the run lock ----------------------------------------------------------------------------------


def test_lock_is_exclusive_and_names_a_live_holder(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock_file = tmp_path / "locks" / "r1.lock"
        lock_file.parent.mkdir()
        lock_file.write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "started": 0}))
        with pytest.raises(LockHeld) as raised:
            RunLock(tmp_path, "r1").acquire()
        assert raised.value.pid == holder.pid
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path, "r1") as lock:  # the holder is dead now: reclaimed
        assert json.loads(lock.path.read_text())["pid"] == os.getpid()
    assert not lock.path.exists()


def test_a_lock_of_another_host_is_never_reclaimed(tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "r1.lock").write_text(json.dumps({"pid": 1, "host": "elsewhere.invalid", "started": 0}))
    with pytest.raises(LockHeld):
        RunLock(tmp_path, "r1").acquire()


def test_release_removes_only_its_own_lock(tmp_path: Path) -> None:
    lock = RunLock(tmp_path, "r1")
    lock.acquire()
    lock.path.write_text(json.dumps({"pid": 1, "host": "other", "started": 0}))
    lock.release()
    assert lock.path.exists()


def test_redaction_masks_secret_values_everywhere() -> None:
    value = {"out": "token=abcd1234", "list": ["abcd1234"], "abcd1234": 1, "n": 2}
    assert redact(value, ["abcd1234", "x"]) == {"out": "token=***", "list": ["***"], "***": 1, "n": 2}


# -- named transitions: each changes what it names and records the event it names ------------------------

PLAN2 = {
    "irVersion": 1,
    "ref": "workflows/w",
    "title": "w",
    "limits": {},
    "steps": [{"stepId": "a", "index": 0}, {"stepId": "b", "index": 1}],
}


def _kinds(store: Store, run_id: str) -> list[str]:
    return [kind for kind, _, _, _ in store.events(run_id)][1:]  # after run.published


def test_abandoning_releases_running_steps_then_fails_the_run(store: Store) -> None:
    store.publish_run("r1", PLAN2, "sha256:x", {})
    store.start_step("r1", "a", 0)
    store.abandon_run("r1", {"stepId": None, "reason": "abandoned", "message": "m"})
    a_step = store.step("r1", "a")
    assert a_step is not None and a_step.status == "pending"
    run_row = store.run("r1")
    assert run_row is not None and run_row.failure is not None and run_row.failure["reason"] == "abandoned"
    assert _kinds(store, "r1") == ["step.started", "run.failed", "run.abandoned"]


def test_a_gate_loop_keeps_the_step_running_and_records_only_the_rejection(store: Store) -> None:
    store.publish_run("r1", PLAN2, "sha256:x", {})
    store.reject_gate("r1", "a", 0, "too short")
    store.loop_gate("r1", "a", 1, 1, "too short")
    step = store.step("r1", "a")
    assert step is not None and (step.status, step.gate_iteration, step.gate_loops) == ("running", 1, 1)
    assert _kinds(store, "r1") == ["gate.rejected"]


def test_reopening_a_blocked_step_clears_it_silently_and_the_run_records_the_reopening(store: Store) -> None:
    store.publish_run("r1", PLAN2, "sha256:x", {})
    store.block_step("r1", "a", "why", "gate_rejected")
    store.block_run("r1", "why")
    store.reopen_step("r1", "a", gate_iteration=2)
    store.reopen_run("r1")
    step, run = store.step("r1", "a"), store.run("r1")
    assert step is not None and (step.status, step.notes, step.failure_reason, step.gate_iteration) == (
        "pending",
        None,
        None,
        2,
    )
    assert run is not None and (run.status, run.notes) == ("active", None)
    assert _kinds(store, "r1") == ["step.blocked", "run.blocked", "run.reopened"]


def test_decisions_complete_or_fail_the_approval_and_name_who_decided(store: Store) -> None:
    store.publish_run("r1", PLAN2, "sha256:x", {})
    store.decide_step("r1", "a", {"approved": True, "by": "al"}, "al", approved=True)
    store.reject_step("r1", "b", {"approved": False, "by": "bo"}, "rejected by bo", "bo")
    a, b = store.step("r1", "a"), store.step("r1", "b")
    assert a is not None and (a.status, a.output) == ("completed", {"approved": True, "by": "al"})
    assert b is not None and (b.status, b.failure_reason, b.failure_message) == (
        "failed",
        "approval_rejected",
        "rejected by bo",
    )
    events = store.events("r1")[1:]
    assert [(k, d.get("by")) for k, _, _, d in events] == [
        ("step.completed", None),
        ("step.approved", "al"),
        ("step.failed", None),
        ("step.rejected", "bo"),
    ]


def test_an_aborted_or_interrupted_attempt_leaves_its_unit_to_run_again(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {})
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=True)
    store.abort_attempt("r1", "a:solo", "a", 1, "the drive was aborted", "tail")
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=False)
    store.interrupt_attempt("r1", "a:solo", "a", 2)
    attempts = store.attempts("r1", "a:solo")
    assert [(a.status, a.reason, a.stderr_tail) for a in attempts] == [
        ("aborted", "aborted", "tail"),
        ("interrupted", None, None),
    ]
    unit_row = store.unit("r1", "a:solo")
    assert unit_row is not None and unit_row.status == "running"


def test_a_running_attempt_is_claimed_once_and_an_ended_one_never(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {})
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=True)
    assert store.claim_attempt("r1", "a:solo", 1, "host-1")
    assert not store.claim_attempt("r1", "a:solo", 1, "host-2")  # a second taker finds it taken
    [attempt] = store.attempts("r1", "a:solo")
    assert (attempt.status, attempt.host, attempt.pid) == ("running", "host-1", None)
    store.interrupt_attempt("r1", "a:solo", "a", 1)
    store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", "d-1", new_unit=False)
    store.complete_attempt("r1", "a:solo", "a", 2, None, None)
    assert not store.claim_attempt("r1", "a:solo", 2, "host-1")  # an ended attempt is not running
    assert not store.claim_attempt("r1", "a:solo", 3, "host-1")  # nor is one never begun


def test_a_run_keeps_its_base_and_an_attempt_its_kept_worktree_until_removed(store: Store) -> None:
    store.publish_run("r1", PLAN, "sha256:x", {}, base=("3fa9c2d", "/repo"))
    store.publish_run("r2", PLAN, "sha256:x", {})
    assert [(r.base_commit, r.base_repo) for r in store.runs()] == [("3fa9c2d", "/repo"), (None, None)]
    for attempt in (1, 2):
        store.begin_attempt("r1", "a:solo", "a", None, "sha256:h", f"d-{attempt}", new_unit=attempt == 1)
    store.keep_worktree("r1", "a:solo", "a", 1, "/state/worktrees/r1/a:solo~a1", 3)
    store.remove_worktree("r1", "a:solo", "a", 2, "/state/worktrees/r1/a:solo~a2", by="attempt")
    [(run_id, step_id, unit_id, kept)] = store.kept_worktrees()
    assert (run_id, step_id, unit_id, kept.attempt, kept.worktree) == ("r1", "a", "a:solo", 1, kept.worktree)
    assert store.kept_worktrees("r2") == [] and [a.worktree for a in store.attempts("r1", "a:solo")][1] is None
    store.remove_worktree("r1", "a:solo", "a", 1, "/state/worktrees/r1/a:solo~a1", by="prune")
    assert store.kept_worktrees("r1") == []
    events = [(k, d) for k, _, _, d in store.events("r1") if k.startswith("worktree.")]
    assert events == [
        ("worktree.retained", {"attempt": 1, "path": "/state/worktrees/r1/a:solo~a1", "changed": 3}),
        ("worktree.removed", {"attempt": 2, "path": "/state/worktrees/r1/a:solo~a2", "by": "attempt"}),
        ("worktree.removed", {"attempt": 1, "path": "/state/worktrees/r1/a:solo~a1", "by": "prune"}),
    ]


def test_a_timeline_reads_a_run_or_its_tree_after_a_seq_a_page_at_a_time(store: Store) -> None:
    store.publish_run("r1", PLAN2, "sha256:x", {})
    store.publish_run("other", PLAN2, "sha256:x", {})
    store.start_step("r1", "a", 0)
    store.publish_run("c1", PLAN2, "sha256:x", {}, parent_run_id="r1", parent_unit_id="a:solo", invocation_key="k1")
    store.publish_run("g1", PLAN2, "sha256:x", {}, parent_run_id="c1", parent_unit_id="a:solo", invocation_key="k2")
    store.start_step("g1", "a", 0)
    store.start_step("other", "a", 0)
    store.complete_step("r1", "a", 1)
    tree = store.timeline("r1", 0, children=True, limit=100)
    assert [(e.run_id, e.kind) for e in tree] == [
        ("r1", "run.published"),
        ("r1", "step.started"),
        ("c1", "run.published"),
        ("g1", "run.published"),
        ("g1", "step.started"),
        ("r1", "step.completed"),
    ]
    assert [e.seq for e in tree] == sorted(e.seq for e in tree)
    assert store.timeline("r1", tree[1].seq, children=True, limit=2) == tree[2:4]
    assert [e.kind for e in store.timeline("r1", 0, children=False, limit=100)] == [
        "run.published",
        "step.started",
        "step.completed",
    ]
    assert tree[0].data["ref"] == "workflows/w" and store.published_at("r1") == tree[0].at
    assert store.published_at("nothing") is None
