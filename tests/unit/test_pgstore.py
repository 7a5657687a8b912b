"""The PostgreSQL journal's own parts, against the private test server: its schema is the SQLite
store's, the shared SQL's parameters become psycopg's, migrating is safe from several hosts at once,
and the run lock excludes across connections and dies with its holder. The journal's transitions are test_store.py's contract, run on both stores."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from akm_run.locks import LockHeld
from akm_run.migrations import POSTGRES_MIGRATIONS
from akm_run.pgstore import SCHEMA, PostgresStore, placeholders
from akm_run.sqlitestore import SQLiteStore
from helpers import eventually
from profiles import examples


def sqlite_columns(tmp_path: Path) -> dict[str, list[tuple[str, bool]]]:
    SQLiteStore(tmp_path).close()
    with sqlite3.connect(tmp_path / "state.db") as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            table: [(row[1], bool(row[3]) or bool(row[5])) for row in db.execute(f"PRAGMA table_info({table})")]
            for table in tables
            if table != "sqlite_sequence"
        }


def postgres_columns(url: str) -> dict[str, list[tuple[str, bool]]]:
    PostgresStore(url).close()
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT table_name, column_name, is_nullable = 'NO' FROM information_schema.columns "
            "WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (SCHEMA,),
        ).fetchall()
    columns: dict[str, list[tuple[str, bool]]] = {}
    for table, column, required in rows:
        columns.setdefault(table, []).append((column, required))
    return columns


def test_the_schema_is_the_sqlite_stores_table_by_table_and_column_by_column(tmp_path: Path, database_url: str) -> None:
    assert postgres_columns(database_url) == sqlite_columns(tmp_path)


def test_the_shared_sqls_parameters_become_psycopgs_and_literals_keep_their_question_marks_and_percents() -> None:
    assert placeholders("UPDATE t SET a = ? WHERE b = ? AND c LIKE 'x%'") == (
        "UPDATE t SET a = %s WHERE b = %s AND c LIKE 'x%%'"
    )
    assert placeholders("SELECT 'why?', 'it''s ?', ?") == "SELECT 'why?', 'it''s ?', %s"


@settings(max_examples=examples(50), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"])), min_size=1, max_size=4)
)
def test_any_literal_beside_parameters_reads_back_as_written(database_url: str, texts: list[str]) -> None:
    store = PostgresStore(database_url)
    literals = ["'" + text.replace("'", "''") + "'" for text in texts]
    sql = "SELECT " + ", ".join(f"{literal}, ?" for literal in literals)
    try:
        row = store._execute(sql, tuple(f"p{n}" for n in range(len(texts)))).fetchone()
    finally:
        store.close()
    assert list(row) == [value for n, text in enumerate(texts) for value in (text, f"p{n}")]


def test_hosts_migrating_at_once_apply_each_migration_once(database_url: str) -> None:
    barrier, stores, errors = threading.Barrier(4), [], []

    def open_one() -> None:
        barrier.wait()
        try:
            stores.append(PostgresStore(database_url))
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and {s.schema_version() for s in stores} == {len(POSTGRES_MIGRATIONS)}


def test_a_newer_schema_is_refused(database_url: str) -> None:
    PostgresStore(database_url).close()
    with psycopg.connect(database_url) as connection:
        connection.execute(f"INSERT INTO {SCHEMA}.migrations VALUES (%s, 0)", (len(POSTGRES_MIGRATIONS) + 1,))
    with pytest.raises(RuntimeError, match="newer akm-run"):
        PostgresStore(database_url)


def test_the_run_lock_excludes_other_connections_and_names_its_holder(database_url: str) -> None:
    one, two = PostgresStore(database_url), PostgresStore(database_url)
    with one.lock("r1"):
        with pytest.raises(LockHeld) as held:
            two.lock("r1").__enter__()
        assert held.value.holder["pid"] is not None and held.value.holder["host"]
        with two.lock("r2"):  # another run's lock is another lock
            pass
    with two.lock("r1"):  # released on exit
        pass


HOLD = """
import sys, time
from akm_run.pgstore import PostgresStore
with PostgresStore(sys.argv[1]).lock("r1"):
    print("held", flush=True)
    time.sleep(3600)
"""


def test_the_server_releases_the_lock_of_a_killed_holder(database_url: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, database_url], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    store = PostgresStore(database_url)
    with pytest.raises(LockHeld):
        store.lock("r1").__enter__()
    holder.send_signal(signal.SIGKILL)
    holder.wait()

    def free() -> bool:
        try:
            with store.lock("r1"):
                return True
        except LockHeld:
            return False

    assert eventually(free, "the server to release the killed holder's lock")


PLAN = {"irVersion": 1, "ref": "workflows/w", "title": "w", "steps": [{"stepId": "a", "index": 0}], "limits": {}}


def test_progress_events_are_a_runs_and_its_child_runs_at_any_depth_after_a_seq(database_url: str) -> None:
    store = PostgresStore(database_url)
    store.publish_run("top", PLAN, "sha256:x", {})
    store.publish_run("other", PLAN, "sha256:x", {})
    store.start_step("top", "a", 0)
    store.publish_run("c1", PLAN, "sha256:x", {}, parent_run_id="top", invocation_key="k1")
    store.publish_run("c2", PLAN, "sha256:x", {}, parent_run_id="c1", invocation_key="k2")
    store.start_step("other", "a", 0)
    store.begin_attempt("c2", "u", "a", None, "h", "d-1", new_unit=True)
    store.complete_attempt("c2", "u", "a", 1, None, None)
    events = store.progress_events("top", 0)
    assert [(e.run_id, e.kind, e.step_id) for e in events] == [
        ("top", "run.published", None),
        ("top", "step.started", "a"),
        ("c1", "run.published", None),
        ("c2", "run.published", None),
        ("c2", "unit.dispatched", "a"),
        ("c2", "unit.completed", "a"),
    ]
    assert events[-1].unit_id == "u" and events[-1].data == {"attempt": 1}
    assert [e.seq for e in events] == sorted(e.seq for e in events) and events[0].at > 0
    assert store.progress_events("top", events[3].seq) == events[4:]
    assert store.progress_events("top", events[-1].seq) == [] and store.progress_events("nobody", 0) == []
    store.close()
