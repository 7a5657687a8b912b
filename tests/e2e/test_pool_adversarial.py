"""The worker pool under attack: what a hostile command line, database URL or unit does to real
`akm-run worker` processes on a private PostgreSQL server (docs/scale-out.md). Each test failed
before the fix it came with."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from akm_run import pool
from helpers import PostgresServer, Runtime, eventually, source, unit_processes

SECRET = "s3cr3t-PW"


def akm_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "akm_run", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("spelling", ["&password=PW", "&pass%77ord=PW", "&PASSWORD=PW&sslmode=disable"])
def test_a_password_given_as_a_query_parameter_is_never_printed(
    database_url: str, tmp_path: Path, spelling: str
) -> None:
    # The database does not exist: every verb reports the unusable database, naming its URL.
    url = database_url.replace("/t_", "/missing_") + spelling.replace("PW", SECRET)
    plan = Runtime(tmp_path).compile("w.akm", 'workflow "w" {\n  step a {\n    shell "echo 1"\n  }\n}\n')
    for argv in (["status", "r1"], ["list"], ["worker"], ["run", str(plan), "--detach"], ["abandon", "r1"]):
        result = akm_run(*argv, "--database", url, cwd=tmp_path)
        assert result.returncode == 2, (argv, result.stderr)
        assert "***" in result.stderr, result.stderr
        assert SECRET not in result.stdout + result.stderr, argv


def test_a_malformed_url_with_a_query_password_is_refused_without_it(tmp_path: Path) -> None:
    result = akm_run("status", "r1", "--database", f"postgresql://ada@/akm?password={SECRET}&bogus=1", cwd=tmp_path)
    assert result.returncode == 2 and "malformed database URL" in result.stderr
    assert SECRET not in result.stderr


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--takeover-after", "999999999999h"], "at most 24h"),  # overflowed the heartbeat's timer
        (["--poll", "2m"], "at most 1m"),  # DBOS shares it: a long one starved every worker in the pool
        (["--grace", "100000h"], "at most 24h"),
        (["--takeover-after", "\u0663"], "invalid duration"),  # an Arabic-Indic three: not a number here
        (["--takeover-after", "\u00b2"], "invalid duration"),  # a superscript two
        (["--takeover-after", "0"], "at least 300ms"),
        (["--takeover-after", "-1"], "invalid duration"),
        (["--concurrency", "0"], "at least 1"),
        (["--executor-id", "a\nb"], "without spaces"),  # would split the worker's log lines
        (["--executor-id", "w 1"], "without spaces"),
        (["--executor-id", "w\udcff"], "is not UTF-8 text"),  # bytes that are not UTF-8: refused as any argument is
        (["--executor-id", "x" * 129], "at most 128"),
    ],
)
def test_a_worker_refuses_out_of_range_options_before_it_serves(
    database_url: str, tmp_path: Path, options: list[str], says: str
) -> None:
    result = akm_run("worker", "--database", database_url, *options, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr
    assert "serving" not in result.stderr


def test_a_worker_with_a_long_takeover_time_still_beats_often_enough_to_count_as_serving() -> None:
    worker = pool.Worker("postgresql://h/db", "w1", takeover_after_s=24 * 3600)
    assert worker.beat_s * 2 <= pool.SERVING_WITHIN_S  # else `run` warns that no worker serves
    assert pool.Worker("postgresql://h/db", "w1", takeover_after_s=3).beat_s == 1.0


# -- stopping a worker: its units' processes stop with it ------------------------------------------------

# Each unit notes when it starts and when it ends, by unit; it sleeps 30 s until the test creates `fast`.
SLOW_MAP = source("""
    workflow "slow" {
      params { items: list[int] = [1, 2, 3, 4, 5, 6] }
      step fan {
        map params.items {
          concurrency = 3
          shell "echo \\"start $AKM_UNIT_ID\\" >> ran; [ -e fast ] || sleep 30; echo \\"end $AKM_UNIT_ID\\" >> ran; echo 1"
        }
      }
    }
""")


def _submit(pooled: Runtime) -> str:
    plan = pooled.compile("slow.akm", SLOW_MAP)
    detached = pooled.akm("run", plan, "--detach")
    assert detached.returncode == 0, detached.stderr
    return detached.stdout.strip()


def _ran(pooled: Runtime, what: str) -> Counter[str]:
    path = pooled.root / "ran"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(line.split()[1] for line in lines if line.startswith(what + " "))


def test_a_worker_stopped_with_sigterm_stops_its_units_at_the_end_of_its_grace(pooled: Runtime) -> None:
    t1 = pooled.start_worker(name="t1", options=("--grace", "1s"))
    run_id = _submit(pooled)
    eventually(lambda: sum(_ran(pooled, "start").values()) == 3, "three units running on t1")
    assert t1.stop() is None  # SIGTERM: exits 0
    assert unit_processes(run_id) == []  # stopped at the end of the grace, before t1 exited
    assert "stopped 3 unit(s) still running after the grace period" in t1.output()
    (pooled.root / "fast").touch()
    pooled.start_worker(name="t2")
    code, document = pooled.run_json(run_id)  # follows the taken-over drive
    assert code == 0, document
    ends = _ran(pooled, "end")
    assert len(ends) == 6 and set(ends.values()) == {1}, ends  # never two copies of one unit
    assert max(_ran(pooled, "start").values()) == 2  # t1's three ran again on t2
    tried = sorted([a.status for a in attempts] for _, attempts in pooled.store().run_attempts(run_id))
    assert tried == [["completed"]] * 3 + [["interrupted", "completed"]] * 3  # as after a dead worker


ONE_WAITING = source("""
    workflow "waiting" {
      step wait {
        shell "echo start >> ran; while [ ! -e go ]; do sleep 0.02; done; sleep 0.3; echo end >> ran; echo 1"
      }
    }
""")


def test_a_grace_under_a_second_lets_the_unit_in_flight_finish(pooled: Runtime) -> None:
    # It was whole seconds (int(grace)): 900ms gave no grace, and the unit was stopped at once.
    g1 = pooled.start_worker(name="g1", options=("--grace", "900ms"))
    detached = pooled.akm("run", pooled.compile("waiting.akm", ONE_WAITING), "--detach")
    assert detached.returncode == 0, detached.stderr
    ran = pooled.root / "ran"
    eventually(lambda: ran.exists() and "start" in ran.read_text(), "the unit running on g1")
    g1.process.send_signal(signal.SIGTERM)
    (pooled.root / "go").touch()  # the unit ends 0.3 s later, within its grace
    assert g1.process.wait(timeout=60) == 0
    g1.stopped = True
    assert ran.read_text().split() == ["start", "end"]
    assert "still running after the grace period" not in g1.output()


def test_an_idle_worker_runs_none_of_dboss_background_jobs(postgres_server: PostgresServer, pooled: Runtime) -> None:
    # DBOS's background jobs take an advisory lock every second to sweep for delayed workflows and
    # timeouts, which akm-run never makes: the worker ends them (about 9 of an idle worker's 24
    # statements a second at --poll 1s).
    assert pooled.database is not None
    name = pooled.database.split("?")[0].rpartition("/")[2]
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE \"{name}\" SET log_statement = 'all'")  # the worker's connections
    worker = pooled.start_worker(name="idle", options=("--poll", "100ms"))
    worker.serving()
    time.sleep(0.5)  # past the jobs' first round, which may run before the worker ends them
    start = postgres_server.log.stat().st_size
    time.sleep(2.5)  # two rounds and a half of DBOS's background jobs
    with postgres_server.log.open("rb") as log:
        log.seek(start)
        logged = log.read().decode(errors="replace")
    assert "dbos.workflow_status" in logged  # the worker's polls are logged: the log is read right
    assert "pg_try_advisory_xact_lock" not in logged


def test_a_worker_killed_with_sigkill_takes_its_units_processes_along(pooled: Runtime) -> None:
    k1 = pooled.start_worker(name="k1")
    run_id = _submit(pooled)
    eventually(lambda: sum(_ran(pooled, "start").values()) == 3, "three units running on k1")
    k1.kill()  # its process group: its units lead sessions of their own
    eventually(lambda: unit_processes(run_id) == [], "the units of the killed worker stopped")
    assert _ran(pooled, "end") == Counter()  # stopped, not finished


def test_abandon_stops_a_unit_running_on_another_worker_than_the_dead_drive(pooled: Runtime) -> None:
    # One unit each: the drive runs on one of them. No takeover within the test: a recovered drive
    # would hold the run's lock again.
    for name in ("a", "b"):
        pooled.start_worker(name=name, options=("--concurrency", "1", "--takeover-after", "1h"))
    run_id = _submit(pooled)
    eventually(lambda: sum(_ran(pooled, "start").values()) == 2, "a unit running on each worker")
    assert pooled.database is not None
    with psycopg.connect(pooled.database) as connection:
        query = "SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s"
        [(driver,)] = connection.execute(query, (run_id,)).fetchall()
    pooled.worker(driver).kill()  # the drive dies (and its worker's unit): the other unit runs on
    result = eventually(lambda: (r := pooled.akm("abandon", run_id)).returncode != 75 and r, "the run's lock")
    assert result.returncode == 0 and f"abandoned run {run_id}" in result.stdout, result.stderr
    eventually(lambda: unit_processes(run_id) == [], "the abandoned run's unit stopped")
    assert _ran(pooled, "end") == Counter()
    store = pooled.store()

    def aborted() -> list[str | None]:
        return [a.message for _, tried in store.run_attempts(run_id) for a in tried if a.status == "aborted"]

    assert eventually(aborted, "the stop journaled") == ["the run was abandoned; stopped by SIGTERM"]
