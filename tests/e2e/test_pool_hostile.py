"""The worker pool against a hostile world: a database set up by someone else, written by a newer
akm-run, or restarted under a run; workers that disagree on their settings; commands racing each
other; forged rows and unit output that tries to break the journal. Real `akm-run worker`
processes on a private PostgreSQL server (docs/scale-out.md). Each test failed before the fix it
came with, or pins a behaviour the pool must keep."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from helpers import Runtime, Workers, eventually

SECRET = "s3cr3t-PW"


def akm_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "akm_run", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def as_user(url: str, user: str) -> str:
    """The same database as another user, with a password libpq sends (and trust ignores)."""
    return url.replace("postgresql://postgres@", f"postgresql://{user}:{SECRET}@")


def sql(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        for statement in statements:
            connection.execute(statement)


# -- the database: rights, versions ----------------------------------------------------------------


def test_a_user_without_create_rights_uses_a_database_an_administrator_set_up(
    database_url: str, tmp_path: Path
) -> None:
    """Least privilege: the schemas are created once by a user who may; every host then runs as a
    user with only the rights to read and write their tables."""
    user = f"u_{uuid.uuid4().hex[:12]}"
    sql(database_url, f"CREATE ROLE {user} LOGIN")
    weak = as_user(database_url, user)
    refused = akm_run("worker", "--database", weak, cwd=tmp_path)  # nothing set up yet: it cannot create it
    assert refused.returncode == 2 and "permission denied" in refused.stderr, refused.stderr
    assert "CREATE" in refused.stderr and SECRET not in refused.stderr and "Traceback" not in refused.stderr
    workers = Workers(database_url, tmp_path)
    workers.start("admin")  # an administrator's first worker creates both schemas
    workers.stop()
    sql(database_url, *(f"GRANT USAGE ON SCHEMA {s} TO {user}" for s in ("akm_run", "dbos")),
        *(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {user}" for s in ("akm_run", "dbos")),
        *(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {user}" for s in ("akm_run", "dbos")))  # fmt: skip
    plan = Runtime(tmp_path).compile("w.akm", 'workflow "w" {\n  step a {\n    shell "echo 1"\n  }\n}\n')
    workers.url = weak
    workers.start("w1")
    try:
        result = akm_run("run", str(plan), "--database", weak, "--format", "json", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["status"] == "completed"
        assert akm_run("list", "--database", weak, cwd=tmp_path).returncode == 0
    finally:
        workers.stop()


@pytest.mark.parametrize("verb", [["list"], ["status", "r1"], ["worker"]])
def test_a_database_written_by_a_newer_akm_run_is_a_clear_error(
    database_url: str, tmp_path: Path, verb: list[str]
) -> None:
    assert akm_run("list", "--database", database_url, cwd=tmp_path).returncode == 0  # creates the journal
    sql(database_url, "INSERT INTO akm_run.migrations VALUES (9999, 0)")
    url = as_user(database_url, "postgres")
    result = akm_run(*verb, "--database", url, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "newer akm-run (schema version 9999); upgrade akm-run" in result.stderr
    assert "internal error" not in result.stderr and SECRET not in result.stderr


# -- workers that disagree ---------------------------------------------------------------------------


def test_workers_started_with_different_settings_say_which_value_the_pool_uses(
    database_url: str, tmp_path: Path
) -> None:
    """DBOS keeps a queue's per-worker limit and polling interval in the database: the last worker to
    declare a queue sets them for every worker. Neither worker may ignore its option silently."""
    workers = Workers(database_url, tmp_path)
    try:
        workers.start("big", "--concurrency", "8")
        workers.start("small", "--concurrency", "2", "--poll", "50ms")
        small = workers.log("small")
        assert "--concurrency 2 replaces 8, another worker's, for every worker in the pool" in small
        assert "--poll 50ms replaces 100ms" in small
        eventually(lambda: "the pool now uses --concurrency 2, not this worker's 8" in workers.log("big"), "warning")
        eventually(lambda: "the pool now uses --poll 50ms, not this worker's 100ms" in workers.log("big"), "warning")
        assert workers.log("big").count("--concurrency 2, not") == 1  # once, not on every poll
    finally:
        workers.stop()
    assert "warning" not in workers.log("big").split("serving")[0]  # the first worker changed nothing
