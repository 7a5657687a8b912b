"""A worker starts work when it is submitted or enqueued, not at its next poll (akm_run.wakes,
docs/scale-out.md, "How a worker finds work"). Each worker here polls once a minute, the longest
`--poll` there is, so a run that ends within half of it was woken at every step: its drive on the
runs queue, then each unit on a units queue; a run that waited for a poll would time out."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg

from akm_run import wakes
from helpers import PostgresServer, Runtime, eventually

SLOW_POLL = ("--poll", "1m")
WITHIN_S = 30  # half the poll: no step of the run may wait for one
MAP = """workflow "m" {
  params { items: list[int] = [1, 2, 3, 4, 5, 6] }
  step one {
    shell "echo one"
  }
  step many {
    map params.items {
      concurrency = 2
      shell "true"
    }
  }
}
"""


def _runs_at_once(pooled: Runtime, name: str) -> None:
    plan = pooled.compile(f"{name}.akm", MAP.replace('"m"', f'"{name}"'))
    result = pooled.akm("run", plan, timeout=WITHIN_S)
    assert result.returncode == 0, result.stderr


def _listeners(server: PostgresServer, database: str) -> list[int]:
    with psycopg.connect(server.url(), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'akm-run-wakes' AND datname = %s", (database,)
        ).fetchall()
    return [row[0] for row in rows]


def test_a_run_and_its_units_start_when_submitted_not_at_the_next_poll(pooled: Runtime) -> None:
    pooled.start_worker(name="slow", options=SLOW_POLL)
    _runs_at_once(pooled, "first")
    _runs_at_once(pooled, "second")  # after the worker's first polls, which a new queue makes at once


def test_a_listener_whose_connection_was_killed_listens_again(postgres_server: PostgresServer, pooled: Runtime) -> None:
    assert pooled.database is not None
    database = pooled.database.split("?")[0].rpartition("/")[2]
    pooled.start_worker(name="slow", options=SLOW_POLL)
    first = eventually(lambda: _listeners(postgres_server, database), "the worker listening")
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first[0],))
    eventually(lambda: (found := _listeners(postgres_server, database)) and found != first, "listening again")
    _runs_at_once(pooled, "after")


def test_hostile_notifications_on_the_channel_change_nothing(postgres_server: PostgresServer, pooled: Runtime) -> None:
    """Anyone who can connect can notify: a payload naming no queue, a huge one or an empty one wakes
    nothing that matters and stops nothing."""
    assert pooled.database is not None
    worker = pooled.start_worker(name="slow", options=SLOW_POLL)
    with psycopg.connect(pooled.database, autocommit=True) as anyone:
        for payload in ("", "no-such-queue", "akm-units-c99999", "x" * 7999, "akm-runs\x01", "'; DROP TABLE x; --"):
            for channel in (wakes.CHANNEL, wakes.ENDS_CHANNEL):
                anyone.execute("SELECT pg_notify(%s, %s)", (channel, payload))
        for _ in range(500):
            anyone.execute("SELECT pg_notify(%s, 'akm-runs')", (wakes.CHANNEL,))
    _runs_at_once(pooled, "after")
    assert "Traceback" not in worker.output()


def test_an_attempt_its_drives_worker_has_no_slot_for_wakes_the_other_workers(pooled: Runtime) -> None:
    """A drive wakes only its own worker for an attempt, unless that worker is full: then every
    worker hears of it, and one with a free slot takes it at once. The end of an attempt wakes its
    drive in the worker that ran it; a worker that ran an attempt whose drive is elsewhere announces
    its end, and only then (docs/scale-out.md)."""
    assert pooled.database is not None
    for name in ("w1", "w2"):
        pooled.start_worker(name=name, options=(*SLOW_POLL, "--concurrency", "1"))
    wide = pooled.compile("wide.akm", MAP.replace('shell "true"', 'shell "sleep 0.5"').replace('"m"', '"wide"'))
    assert pooled.akm("run", wide, timeout=WITHIN_S).returncode == 0  # its units queue declared
    time.sleep(1.5)  # past each worker's next look for new queues (once a second): both serve it
    with psycopg.connect(pooled.database, autocommit=True) as db:
        db.execute(f"LISTEN {wakes.ENDS_CHANNEL}")
        result = pooled.akm("run", wide, timeout=WITHIN_S)
        assert result.returncode == 0, result.stderr
        run_id = result.stdout.split('"runId": "')[1].split('"')[0]
        announced = {note.payload for note in db.notifies(timeout=2)}
        rows = db.execute(
            "SELECT u.workflow_uuid, u.executor_id, u.executor_id = d.executor_id FROM dbos.workflow_status u "
            "JOIN dbos.workflow_status d ON d.workflow_uuid = %s WHERE u.queue_partition_key LIKE %s",
            (run_id, f"{run_id}/%"),
        ).fetchall()
    assert sorted({executor for _, executor, _ in rows}) == ["w1", "w2"]  # both workers ran units of the map
    assert announced == {workflow for workflow, _, with_its_drive in rows if not with_its_drive}


def test_a_database_not_encoded_in_utf8_is_refused_by_a_worker_and_a_submitter(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """In a SQL_ASCII database text comes back as bytes, which DBOS cannot read (and a notification's
    payload need not decode): akm-run refuses such a database by name, before it creates anything."""
    name = f"ascii_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE \"{name}\" ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
    url = postgres_server.url(name)
    plan = Runtime(tmp_path).compile("w.akm", MAP)
    for argv in (["worker"], ["run", str(plan)], ["list"]):
        result = subprocess.run(
            [sys.executable, "-m", "akm_run", *argv, "--database", url],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2, (argv, result.stderr)
        assert "its encoding is SQL_ASCII, and akm-run needs UTF8" in result.stderr, result.stderr
        assert "internal error" not in result.stderr
    with psycopg.connect(url) as db:
        assert db.execute("SELECT count(*) FROM pg_namespace WHERE nspname IN ('dbos', 'akm_run')").fetchone() == (0,)
