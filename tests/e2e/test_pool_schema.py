"""The first deployment of a pool: a fresh PostgreSQL database whose schemas (the journal's, the
heartbeats', DBOS's system schema) the first akm-run processes create while others already use them.
Whoever comes second waits for the schemas and goes on; a process killed while creating them leaves
them for the next one to finish. Real `akm-run worker` and `akm-run run --database` processes
racing on fresh databases of a private server (docs/scale-out.md)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from dbos._migration import ensure_dbos_schema, get_dbos_migrations
from sqlalchemy import create_engine, text

from helpers import PostgresServer, Runtime, Worker, eventually
from profiles import examples

pytestmark = pytest.mark.slow

ROUNDS = examples(4, at_least=1)  # fresh databases per race, each a first deployment (4 in CI)
PLAN = 'workflow "w" {\n  step a {\n    shell "echo 1"\n  }\n}\n'


def fresh(postgres_server: PostgresServer, root: Path) -> Runtime:
    """A Runtime on a new, empty database, in a workspace of its own under `root`."""
    directory = root / uuid.uuid4().hex[:8]
    directory.mkdir()
    return Runtime(directory, postgres_server.database())


def run(runtime: Runtime, *args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`akm-run run ARGS --format json` started now, with no worker waited for (unlike Runtime.start)."""
    return subprocess.Popen(
        [sys.executable, "-m", "akm_run", "run", *map(str, args), "--format", "json"],
        cwd=runtime.root,
        env=env or runtime.env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    out, err = process.communicate(timeout=120)
    return process.returncode, out + err


def lock_held(runtime: Runtime, plan: Path, release: Path) -> tuple[Worker, subprocess.Popen[str], Path]:
    """A worker holding the schemas' lock until `release` exists, and a run of `plan` that found the
    lock taken and holds there until the returned file exists: (the worker, the run, that file)."""
    worker = runtime.start_worker(runtime.env(AKM_RUN_FAULT=f"hold-schema-locked:{release}"), wait=False)
    eventually(lambda: Path(f"{release}.held").exists(), "the worker to hold the schemas' lock")
    busy = release.with_name("busy")
    follower = run(runtime, plan, env=runtime.env(AKM_RUN_FAULT=f"hold-schema-busy:{busy}"))
    eventually(lambda: Path(f"{busy}.held").exists() or follower.poll() is not None, "the run to find the lock taken")
    return worker, follower, busy


def completes(runtime: Runtime, follower: subprocess.Popen[str]) -> None:
    """The run `follower` follows completes, met by no half-made schema. A run that came before any
    worker found no schema at all: it is published and waits, so driving it again completes it."""
    code, output = finished(follower)
    if code == 2 and "no `akm-run worker` has served this database yet" in output:
        [row] = runtime.sql("SELECT id FROM runs")
        code, output = finished(run(runtime, str(row[0])))
    told = output + "".join(f"\n-- output of {w.executor_id} --\n{w.output()}" for w in runtime.workers)
    assert code == 0 and '"status": "completed"' in output, told
    assert "cannot be used" not in output and "Traceback" not in output, told


def dbos_versions(url: str) -> tuple[int, int]:
    """(version DBOS's system schema is at, the version this DBOS needs)."""
    with psycopg.connect(url, autocommit=True) as connection:
        row = connection.execute("SELECT version FROM dbos.dbos_migrations").fetchone()
    return (int(row[0]) if row else 0), len(get_dbos_migrations("dbos", True))


@pytest.mark.parametrize("run_first", [False, True], ids=["worker-first", "run-first"])
def test_a_run_submitted_while_the_first_worker_starts_completes(
    postgres_server: PostgresServer, tmp_path: Path, run_first: bool
) -> None:
    """A first deployment: the first worker and the first `run --database` start together on a fresh
    database. The run never meets a half-made schema: it waits for it and completes."""
    for _ in range(ROUNDS):
        runtime = fresh(postgres_server, tmp_path)
        plan = runtime.compile("w.akm", PLAN)
        try:
            if run_first:
                follower = run(runtime, plan)
                runtime.start_worker(wait=False)
            else:
                runtime.start_worker(wait=False)
                follower = run(runtime, plan)
            completes(runtime, follower)
        finally:
            assert runtime.close() == []


def test_a_drive_queued_before_a_worker_starts_runs_on_it_at_once(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Deterministic: a run waits in the queue while no worker serves; the next worker's DBOS hands it
    the drive as it launches, before the worker says it serves, and the drive runs there."""
    runtime = fresh(postgres_server, tmp_path)
    plan = runtime.compile("w.akm", PLAN)
    release = tmp_path / "release"
    try:
        assert runtime.start_worker().stop() is None
        follower = run(runtime, plan)
        eventually(lambda: runtime.sql("SELECT id FROM runs") != [], "the run to wait in the queue")
        runtime.start_worker(runtime.env(AKM_RUN_FAULT=f"hold-worker-launched:{release}"), wait=False)
        eventually(lambda: Path(f"{release}.held").exists(), "the worker to launch")
        completes(runtime, follower)
    finally:
        release.touch()
        assert runtime.close() == []


def test_two_workers_starting_at_once_on_a_fresh_database_both_serve(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    for _ in range(ROUNDS):
        runtime = fresh(postgres_server, tmp_path)
        try:
            workers = [runtime.start_worker(wait=False) for _ in range(2)]
            for worker in workers:
                worker.serving()
            code, document = runtime.run_json(runtime.compile("w.akm", PLAN))
            assert code == 0 and document["status"] == "completed", document
        finally:
            assert runtime.close() == []


def test_a_run_waits_while_a_worker_creates_the_schemas_then_completes(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Deterministic: the worker stops while it holds the schemas' lock; the run started then finds
    the lock taken and waits instead of failing, and completes once the worker goes on."""
    runtime = fresh(postgres_server, tmp_path)
    plan = runtime.compile("w.akm", PLAN)
    release = tmp_path / "release"
    try:
        _, follower, busy = lock_held(runtime, plan, release)
        assert follower.poll() is None, finished(follower)
        release.touch()
        busy.touch()
        code, output = finished(follower)
        assert code == 0 and '"status": "completed"' in output, output
    finally:
        release.touch()
        assert runtime.close() == []


def test_a_worker_killed_while_it_creates_the_schemas_leaves_them_to_the_next(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """SIGKILLed while it holds the schemas' lock: the server releases the lock with its connection,
    a run in the meantime says plainly that no worker has served the database, and the next worker
    creates what is missing; the run then completes."""
    runtime = fresh(postgres_server, tmp_path)
    plan = runtime.compile("w.akm", PLAN)
    release = tmp_path / "release"
    try:
        first, follower, busy = lock_held(runtime, plan, release)
        first.kill()
        busy.touch()
        code, output = finished(follower)
        assert code == 2 and "no `akm-run worker` has served this database yet" in output, output
        assert "cannot be used" not in output and "Traceback" not in output, output
        runtime.start_worker()
        [row] = runtime.sql("SELECT id FROM runs")
        code, output = finished(run(runtime, str(row[0])))
        assert code == 0 and '"status": "completed"' in output, output
    finally:
        release.touch()
        assert runtime.close() == []


def test_a_half_made_dbos_schema_is_a_clear_error_and_the_next_worker_finishes_it(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """DBOS applies its migrations one transaction each: a process killed between two leaves a
    system schema that has some of its tables and columns. A run meets it with a plain message, not
    a missing column; the next worker applies the rest."""
    runtime = fresh(postgres_server, tmp_path)
    plan = runtime.compile("w.akm", PLAN)
    assert runtime.database is not None
    engine = create_engine(runtime.database.replace("postgresql://", "postgresql+psycopg://"))
    try:
        ensure_dbos_schema(engine, "dbos")
        with engine.begin() as connection:  # the first three of DBOS's migrations, as a killed worker left them
            for migration in get_dbos_migrations("dbos", True)[:3]:
                connection.execute(text(migration))
            connection.execute(text("INSERT INTO dbos.dbos_migrations VALUES (3)"))
    finally:
        engine.dispose()
    named = {k: v for k, v in runtime.env().items() if k != "AKM_RUN_DATABASE"}
    try:
        code, output = finished(run(runtime, plan, "--database", runtime.database, env=named))
        assert code == 2 and "no `akm-run worker` has served this database yet" in output, output
        assert "cannot be used" not in output and "Traceback" not in output, output
        start = output.split("start one (`")[1].split("`")[0]  # as printed, to paste into a shell
        assert shlex.split(start) == ["akm-run", "worker", "--database", runtime.database], output
        runtime.start_worker()
        current, latest = dbos_versions(runtime.database)
        assert current >= latest
        [row] = runtime.sql("SELECT id FROM runs")
        code, output = finished(run(runtime, str(row[0])))
        assert code == 0 and '"status": "completed"' in output, output
    finally:
        assert runtime.close() == []


def test_a_user_without_create_rights_on_a_fresh_database_gets_one_clear_error(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    runtime = fresh(postgres_server, tmp_path)
    user = f"u_{uuid.uuid4().hex[:12]}"
    assert runtime.database is not None
    with psycopg.connect(runtime.database, autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {user} LOGIN")
        connection.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    weak = Runtime(runtime.root, runtime.database.replace("postgresql://postgres@", f"postgresql://{user}@"))
    plan = weak.compile("w.akm", PLAN)
    for argv in (["worker"], ["run", str(plan)]):
        result = subprocess.run(
            [sys.executable, "-m", "akm_run", *argv],
            cwd=weak.root,
            env=weak.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 2, result.stderr
        assert "permission denied" in result.stderr and "needs CREATE on the database" in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize("version", [1, 30, 110])
def test_a_worker_sigkilled_midway_through_dbos_migrations_leaves_them_to_the_next(
    postgres_server: PostgresServer, tmp_path: Path, version: int
) -> None:
    """SIGKILLed once DBOS's system schema reached `version` (between two migrations, or inside an
    online one that builds an index concurrently): the next worker applies the rest, and a run
    submitted meanwhile meets no half-made table."""
    runtime = fresh(postgres_server, tmp_path)
    plan = runtime.compile("w.akm", PLAN)
    assert runtime.database is not None
    url = runtime.database
    try:
        first = runtime.start_worker(wait=False)

        def reached() -> bool:
            try:
                return dbos_versions(url)[0] >= version or first.process.poll() is not None
            except psycopg.Error:  # not created yet
                return False

        eventually(reached, f"DBOS's system schema at version {version}")
        first.kill()
        follower = run(runtime, plan)
        runtime.start_worker()
        current, latest = dbos_versions(url)
        assert current >= latest
        completes(runtime, follower)
    finally:
        assert runtime.close() == []


def test_a_run_abandoned_before_any_worker_served_the_database_is_reported_not_waited_for(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    runtime = fresh(postgres_server, tmp_path)
    plan = runtime.compile("w.akm", PLAN)
    code, output = finished(run(runtime, plan))
    assert code == 2 and "no `akm-run worker` has served this database yet" in output, output
    [row] = runtime.sql("SELECT id FROM runs")
    abandoned = subprocess.run(
        [sys.executable, "-m", "akm_run", "abandon", str(row[0])],
        cwd=runtime.root,
        env=runtime.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert abandoned.returncode == 0, abandoned.stderr
    code, output = finished(run(runtime, str(row[0])))  # nothing to drive: no worker needed
    assert code == 1 and '"status": "failed"' in output and "abandoned" in output, output
