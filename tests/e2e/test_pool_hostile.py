"""The worker pool against a hostile world: a database set up by someone else, written by a newer
akm-run, or restarted under a run; workers that disagree on their settings; commands racing each
other; forged rows and unit output that tries to break the journal. Real `akm-run worker`
processes on a private PostgreSQL server (docs/scale-out.md). Each test failed before the fix it
came with, or pins a behaviour the pool must keep."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from akm_run.plan import plan_hash
from helpers import Keys, PostgresServer, Runtime, eventually, run_cli, source

SECRET = "s3cr3t-PW"


def akm_run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "akm_run", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def racing(runtime: Runtime, *commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """The commands started at once, each in its own process; their results, in order."""
    runtime.pool()
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "akm_run", *argv],
            cwd=runtime.root,
            env=runtime.env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for argv in commands
    ]
    results = []
    for process in started:
        out, err = process.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def drives(runtime: Runtime, run_id: str) -> list[str]:
    """The ids of a run's drive workflows in DBOS's table."""
    rows = runtime.sql(
        "SELECT workflow_uuid FROM dbos.workflow_status WHERE name = 'akm-run-drive' "
        "AND (workflow_uuid = ? OR workflow_uuid LIKE ?)",
        run_id,
        f"{run_id}/%",
    )
    return sorted(str(row[0]) for row in rows)


def completed_attempts(runtime: Runtime, run_id: str) -> Counter[str]:
    """How many completed attempts each unit of a run has in the journal."""
    rows = runtime.sql("SELECT unit_id FROM attempts WHERE run_id = ? AND status = 'completed'", run_id)
    return Counter(str(row[0]) for row in rows)


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
    admin = Runtime(tmp_path, database_url)
    admin.start_worker(name="admin")  # an administrator's first worker creates both schemas
    assert admin.close() == []
    sql(
        database_url,
        *(f"GRANT USAGE ON SCHEMA {s} TO {user}" for s in ("akm_run", "dbos")),
        *(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {user}" for s in ("akm_run", "dbos")),
        *(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {user}" for s in ("akm_run", "dbos")),
    )
    runtime = Runtime(tmp_path, weak)
    plan = runtime.compile("w.akm", 'workflow "w" {\n  step a {\n    shell "echo 1"\n  }\n}\n')
    runtime.start_worker(name="w1")
    try:
        code, document = runtime.run_json(plan)
        assert code == 0 and document["status"] == "completed", document
        assert runtime.akm("list").returncode == 0
    finally:
        assert runtime.close() == []


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


def test_workers_started_with_different_settings_say_which_value_the_pool_uses(pooled: Runtime) -> None:
    """DBOS keeps a queue's per-worker limit and polling interval in the database: the last worker to
    declare a queue sets them for every worker. Neither worker may ignore its option silently."""
    big = pooled.start_worker(name="big", options=("--concurrency", "8"))
    small = pooled.start_worker(name="small", options=("--concurrency", "2", "--poll", "50ms"))
    assert "--concurrency 2 replaces 8, another worker's, for every worker in the pool" in small.output()
    assert "--poll 50ms replaces 1000ms" in small.output()
    eventually(lambda: "the pool now uses --concurrency 2, not this worker's 8" in big.output(), "a warning")
    eventually(lambda: "the pool now uses --poll 50ms, not this worker's 1000ms" in big.output(), "a warning")
    assert big.output().count("--concurrency 2, not") == 1  # once, not on every poll
    assert "warning" not in big.output().split("serving")[0]  # the first worker changed nothing


# -- racing commands ----------------------------------------------------------------------------------

# Each unit appends its name to `ran`: a test counts how often each one ran.
GATED = source("""
    workflow "gated" {
      step first {
        shell "echo first >> ran; echo 1"
      }
      step ok {
        approval "Ship it?"
      }
      step after {
        shell "echo after >> ran; echo 2"
      }
    }
""")
FLAKY = source("""
    workflow "flaky" {
      step first {
        shell "echo first >> ran; test -f go && echo 1"
      }
      step after {
        shell "echo after >> ran; echo 2"
      }
    }
""")


@pytest.fixture
def workers(pooled: Runtime) -> Runtime:
    """Two workers on a fresh database (stopped with SIGTERM at the end: each must exit 0)."""
    pooled.start_worker(name="w1")
    pooled.start_worker(name="w2")
    return pooled


def ran(runtime: Runtime) -> list[str]:
    path = runtime.root / "ran"
    return path.read_text().splitlines() if path.exists() else []


def published(runtime: Runtime, source_text: str, *args: str) -> tuple[int, dict[str, object]]:
    return runtime.run_json(runtime.compile("wf.akm", source_text), *args)


def test_two_resumes_at_once_continue_the_run_once(workers: Runtime) -> None:
    code, document = published(workers, FLAKY)
    run_id = str(document["runId"])
    assert code == 1 and ran(workers) == ["first"]
    (workers.root / "go").write_text("")
    results = racing(workers, ("resume", run_id), ("resume", run_id))
    # The other finds the run reopened (exit 0), or its drive under way (exit 75, the lock held).
    assert all(r.returncode in (0, 75) and "Traceback" not in r.stderr for r in results), results
    assert sum("reopened run" in r.stdout for r in results) == 1, results  # one reopened it
    followed = workers.akm("run", run_id, "--format", "json")
    assert followed.returncode == 0, followed.stderr
    assert json.loads(followed.stdout)["status"] == "completed"
    assert ran(workers) == ["first", "first", "after"]  # the failed unit again, then the next: once each
    assert set(completed_attempts(workers, run_id).values()) == {1}


def test_two_detached_runs_of_one_interrupted_run_start_one_drive(workers: Runtime) -> None:
    slow = FLAKY.replace("test -f go && ", "sleep 3; ")
    code, document = published(workers, slow, "--timeout", "1s")  # the drive ends; the run stays active
    run_id = str(document["runId"])
    assert code == 130, document
    results = racing(workers, ("run", run_id, "--detach"), ("run", run_id, "--detach"))
    assert [r.returncode for r in results] == [0, 0] and {r.stdout.strip() for r in results} == {run_id}, results
    followed = workers.akm("run", run_id, "--format", "json")
    assert followed.returncode == 0 and json.loads(followed.stdout)["status"] == "completed", followed.stderr
    assert drives(workers, run_id) == [run_id, f"{run_id}/1"]  # both submitted RUN/1: one workflow
    assert set(completed_attempts(workers, run_id).values()) == {1}  # one completion per unit


def test_two_followers_of_one_run_print_the_same_document(workers: Runtime) -> None:
    plan = workers.compile("wf.akm", FLAKY.replace("test -f go && ", "sleep 1; "))
    detached = workers.akm("run", str(plan), "--detach")
    run_id = detached.stdout.strip()
    results = racing(workers, ("run", run_id, "--format", "json"), ("run", run_id, "--format", "json"))
    assert [r.returncode for r in results] == [0, 0], results
    one, two = (json.loads(r.stdout) for r in results)
    assert one == two and one["status"] == "completed"
    assert drives(workers, run_id) == [run_id] and ran(workers) == ["first", "after"]


def test_approve_racing_abandon_leaves_one_consistent_outcome(workers: Runtime) -> None:
    for _ in range(3):  # either may win: each outcome must be whole
        (workers.root / "ran").unlink(missing_ok=True)
        code, document = published(workers, GATED)
        run_id = str(document["runId"])
        assert code == 3, document
        approve, abandon = racing(workers, ("approve", run_id, "ok", "--by", "ada"), ("abandon", run_id))
        assert "Traceback" not in approve.stderr + abandon.stderr
        followed = workers.akm("run", run_id, "--format", "json")
        status = json.loads(followed.stdout)["status"] if followed.stdout.strip() else None
        if "abandoned run" in abandon.stdout:  # abandon won: nothing of the run goes on
            assert status == "failed" and ran(workers) == ["first"], (approve, abandon, followed)
            assert approve.returncode != 0 or drives(workers, run_id) == [run_id, f"{run_id}/1"]
        else:  # approve won: the run goes on, and abandon said why it did not stop it
            assert approve.returncode == 0, approve
            assert abandon.returncode == 75 or "already completed" in abandon.stdout, abandon  # the lock was held
            assert status == "completed" and ran(workers) == ["first", "after"]
        assert set(completed_attempts(workers, run_id).values()) == {1}


def test_a_drive_that_meets_an_approve_holding_the_lock_still_continues_the_detached_run(pooled: Runtime) -> None:
    """A `run --detach` whose drive starts while `approve` holds the run's lock: that drive was turned
    away ("lock held") and the approve, which found it live, submitted none: nothing drove the run.
    The approve holds the lock until told (an AKM_RUN_FAULT hold), and a drive turned away holds too."""
    worker_hold, approve_hold = pooled.root / "drive-go", pooled.root / "approve-go"
    pooled.start_worker(pooled.env(AKM_RUN_FAULT=f"hold-drive-turned-away:{worker_hold}"))
    code, document = published(pooled, GATED)
    run_id = str(document["runId"])
    assert code == 3, document
    approve = subprocess.Popen(
        [sys.executable, "-m", "akm_run", "approve", run_id, "ok", "--by", "ada"],
        cwd=pooled.root,
        env=pooled.env(AKM_RUN_FAULT=f"hold-locked:{approve_hold}"),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    eventually(lambda: held(approve_hold), "approve holding the run's lock")
    assert pooled.akm("run", run_id, "--detach").returncode == 0
    eventually(lambda: held(worker_hold) or waiting_for_a_lock(pooled), "the drive meeting the held lock")
    approve_hold.write_text("")
    out, err = approve.communicate(timeout=120)
    assert approve.returncode == 0 and "approved step ok" in out, (out, err)
    worker_hold.write_text("")
    eventually(lambda: run_status(pooled, run_id) == "completed", f"run {run_id} driven to its end")
    assert ran(pooled) == ["first", "after"]


def test_an_approve_right_after_a_drive_released_the_lock_submits_the_next_drive(pooled: Runtime) -> None:
    """A drive that blocked the run released its lock and had not ended yet: an `approve` then found it
    live and submitted none, and the drive ended on the run as it read it. The drive holds at its end
    (an AKM_RUN_FAULT hold) until the run went on without it."""
    release = pooled.root / "drive-go"
    pooled.start_worker(pooled.env(AKM_RUN_FAULT=f"hold-drive-ended:{release}"))
    detached = pooled.akm("run", str(pooled.compile("wf.akm", GATED)), "--detach")
    run_id = detached.stdout.strip()
    assert detached.returncode == 0, detached.stderr
    eventually(lambda: held(release), "the drive that blocked the run, at its end")
    run_row = pooled.store().run(run_id)
    assert run_row is not None and run_row.status == "blocked"
    approved = pooled.akm("approve", run_id, "ok", "--by", "ada")
    assert approved.returncode == 0, approved.stderr
    eventually(lambda: run_status(pooled, run_id) == "completed", f"run {run_id} driven to its end")
    release.write_text("")
    assert ran(pooled) == ["first", "after"] and drives(pooled, run_id) == [run_id, f"{run_id}/1"]


def run_status(runtime: Runtime, run_id: str) -> str:
    """The run's status in the journal (the run is there)."""
    run = runtime.store().run(run_id)
    assert run is not None, f"no run {run_id}"
    return run.status


def held(release: Path) -> bool:
    """Whether a process reached the AKM_RUN_FAULT hold that `release` ends."""
    return release.with_name(release.name + ".held").exists()


def waiting_for_a_lock(runtime: Runtime) -> bool:
    """Whether a session waits for a run's lock (a drive behind a command)."""
    assert runtime.database is not None
    with psycopg.connect(runtime.database) as connection:
        row = connection.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
    return bool(row and row[0])


def test_an_abandoned_run_is_not_revived_by_approving_its_gate(runtime: Runtime) -> None:
    """What the race above found, in sequence, on both stores: abandon leaves the gate `blocked`, and
    approve took that for a run waiting on it."""
    plan = runtime.compile("wf.akm", GATED)
    code, document = runtime.run_json(plan)
    run_id = str(document["runId"])
    assert code == 3 and runtime.akm("abandon", run_id).returncode == 0
    approved = runtime.akm("approve", run_id, "ok", "--by", "ada")
    assert approved.returncode == 2 and f"run {run_id} is failed" in approved.stderr, approved
    run_row = runtime.store().run(run_id)
    assert run_row is not None and run_row.status == "failed"
    code, document = runtime.run_json(run_id)
    assert code == 1 and document["status"] == "failed" and not (runtime.root / "ran").read_text().count("after")


# -- the server restarted under the pool --------------------------------------------------------------

SLOW = source("""
    workflow "slow" {
      step a {
        shell "echo a >> ran; sleep 4; echo 1"
      }
      step b {
        shell "echo b >> ran; echo 2"
      }
    }
""")


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of this test's own, which it may stop and start (not the session's)."""
    server = PostgresServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def restartable(own_server: PostgresServer, tmp_path: Path) -> Iterator[Runtime]:
    """Two workers on a database of `own_server`; each must stop with exit 0 and no traceback."""
    runtime = Runtime(tmp_path, own_server.database())
    runtime.start_worker(name="w1")
    runtime.start_worker(name="w2")
    yield runtime
    assert runtime.close() == []
    for worker in runtime.workers:
        assert "Traceback" not in worker.output(), worker.output()


@pytest.mark.slow
@pytest.mark.parametrize("away_s", [0, 4], ids=["restart", "away-longer-than-the-takeover-time"])
def test_a_run_finishes_by_itself_when_the_server_restarts_under_its_unit(
    restartable: Runtime, own_server: PostgresServer, away_s: float
) -> None:
    """Nobody follows the run (--detach): the pool alone must notice the database is back and finish
    it. Away longer than the takeover time (2s), every worker's beat is stale once it is back: no
    live worker may take another over (its unit would run twice)."""
    workers = restartable
    plan = workers.compile("wf.akm", SLOW)
    said = workers.root / "follower.err"
    with said.open("w") as follower_err:
        follower = subprocess.Popen(
            [sys.executable, "-m", "akm_run", "run", str(plan)],
            cwd=workers.root,
            env=workers.env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=follower_err,
        )
    eventually(lambda: ran(workers) == ["a"] and "step a started" in said.read_text(), "unit a runs, followed")
    own_server.restart(away_s)
    eventually(lambda: "b" in ran(workers), "the run goes on, followed or not")
    follower.communicate(timeout=120)
    [run_id] = {line.split()[1] for line in workers.akm("list").stdout.splitlines()}
    err = said.read_text().split("step a started\n", 1)[1]
    assert "Traceback" not in err
    if follower.returncode != 0:  # it may give up following, in one line saying how to go on
        assert follower.returncode == 2 and len(err.splitlines()) == 1, err
        assert f"run {run_id} goes on once the database is back" in err
    followed = workers.akm("run", run_id, "--format", "json")
    assert followed.returncode == 0 and json.loads(followed.stdout)["status"] == "completed", followed.stderr
    assert ran(workers) == ["a", "b"]  # each unit once
    assert set(completed_attempts(workers, run_id).values()) == {1}


@pytest.mark.slow
def test_a_follower_signalled_while_the_server_is_down_exits_130_without_waiting_for_it(
    restartable: Runtime, own_server: PostgresServer
) -> None:
    """SIGTERM to `run` while its database is unreachable: it cannot cancel the drive, so it says so
    and exits 130 (the run is the pool's to finish or abandon), rather than waiting for the server."""
    plan = restartable.compile("wf.akm", SLOW)
    follower = restartable.start("run", plan)
    eventually(lambda: ran(restartable) == ["a"], "unit a runs, followed")
    # Frozen while the server goes down, so that the signal, not its next look at the run (which
    # finds the database gone and says so), is what it meets first when it goes on.
    follower.send_signal(signal.SIGSTOP)
    own_server.down()
    try:
        follower.send_signal(signal.SIGTERM)
        follower.send_signal(signal.SIGCONT)
        _, err = follower.communicate(timeout=120)  # a hang guard, not a timing
    finally:
        own_server.up()
    assert follower.returncode == 130, err
    assert "Traceback" not in err and "the database did not answer" in err, err


def test_a_run_waiting_on_a_gate_goes_on_after_the_server_restarts(
    restartable: Runtime, own_server: PostgresServer
) -> None:
    code, document = published(restartable, GATED)
    assert code == 3, document
    own_server.restart()
    run_id = str(document["runId"])
    approved = restartable.akm("approve", run_id, "ok", "--by", "ada")
    assert approved.returncode == 0, approved.stderr
    followed = restartable.akm("run", run_id, "--format", "json")
    assert followed.returncode == 0 and json.loads(followed.stdout)["status"] == "completed", followed.stderr
    assert ran(restartable) == ["first", "after"]


# -- unit output the journal must survive -------------------------------------------------------------

HOSTILE_OUTPUT = source(r"""
    workflow "t" {
      step ten_mb {
        shell "head -c 10485760 /dev/zero | tr '\\0' a"
        on_error = continue
      }
      step bytes {
        shell "printf 'ok \\377\\376 \\000 end'; printf 'err \\377 \\000 tail' >&2"
      }
      step nul_json {
        shell "printf '{\"a\": \"\\\\u0000\"}'"
      }
      step failing_bytes {
        shell "printf 'out \\000\\377'; printf 'why \\000\\377' >&2; exit 4"
        on_error = continue
      }
    }
""")


def test_output_with_nul_and_bytes_that_are_not_utf8_is_recorded_alike_on_both_stores(runtime: Runtime) -> None:
    """PostgreSQL's text cannot hold a NUL character, where SQLite's can: a unit's stdout or stderr
    holding one broke the drive on the pool (exit 70, and again on every resume: a wedged run).
    Both stores now keep it, like bytes that are not UTF-8, as U+FFFD."""
    code, document = runtime.run_json(runtime.compile("wf.akm", HOSTILE_OUTPUT))
    assert code == 0, document
    run_id = str(document["runId"])
    store = runtime.store()
    big = store.step(run_id, "ten_mb")
    assert (
        big is not None and big.failure_reason == "output_too_large" and "10485760 bytes" in (big.failure_message or "")
    )
    bytes_step = store.step(run_id, "bytes")
    assert bytes_step is not None and bytes_step.output == "ok \ufffd\ufffd \ufffd end"
    [attempt] = store.attempts(run_id, "bytes:solo")
    assert attempt.stderr_tail == "err \ufffd \ufffd tail"
    nul_json_step = store.step(run_id, "nul_json")
    assert nul_json_step is not None and nul_json_step.output == {"a": "\x00"}
    failing = store.step(run_id, "failing_bytes")
    assert failing is not None and failing.failure_reason == "exit" and failing.status == "failed"
    logs = runtime.akm("logs", run_id, "--format", "json")
    assert logs.returncode == 0 and "Traceback" not in logs.stderr
    status = runtime.akm("status", run_id)
    assert status.returncode == 0 and "\x00" not in status.stdout


# -- a large map ----------------------------------------------------------------------------------------

WIDE = source("""
    workflow "wide" {
      params { items: list[int] = [] }
      step fan {
        map params.items {
          concurrency = 8
          shell "echo $AKM_UNIT_ID >> ran; echo $AKM_ATTEMPT"
        }
      }
    }
""")


def rss_kb(pid: int) -> int:
    """A process's resident memory now (VmRSS), in kB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))


@pytest.mark.slow
def test_a_map_of_500_units_on_two_workers_runs_each_unit_once_in_bounded_memory(pooled: Runtime) -> None:
    processes = [pooled.start_worker(name=name, options=("--concurrency", "4")).process for name in ("w1", "w2")]
    plan = pooled.compile("wide.akm", WIDE)
    code, _ = pooled.run_json(plan, "--param", f"items={list(range(20))}")
    assert code == 0
    before = [rss_kb(p.pid) for p in processes]
    (pooled.root / "ran").unlink()
    result = pooled.akm("run", plan, "--param", f"items={list(range(500))}", "--format", "json", timeout=900)
    assert result.returncode == 0, result.stderr
    run_id = json.loads(result.stdout)["runId"]
    after = [rss_kb(p.pid) for p in processes]
    lines = ran(pooled)
    assert len(lines) == 500 and len(set(lines)) == 500  # each unit ran once
    attempts = completed_attempts(pooled, run_id)
    assert len(attempts) == 500 and set(attempts.values()) == {1}
    print(f"worker RSS after a 20-unit map {before} kB, after the 500-unit map {after} kB")
    assert all(a < b + 100_000 for a, b in zip(after, before, strict=True)), (before, after)  # < 100 MB more


# -- forged rows -------------------------------------------------------------------------------------------

SIGNED_WAIT = source("""
    workflow "w" {
      step wait {
        approval "ok?"
      }
      step after {
        shell "touch after"
      }
    }
""")


def test_a_consistent_forgery_of_a_signed_runs_plan_is_refused_wherever_the_drive_runs(
    runtime: Runtime, keys: Keys
) -> None:
    """Plan text and hash changed together, so the hash matches: only the signature can tell. The
    forgery lands after `approve` checked the run and submitted its drive (on the pool, before any
    worker takes the drive): the drive itself must refuse it, on the worker as on the driver."""
    plan = runtime.compile("workflows/wf.akm", SIGNED_WAIT)
    assert run_cli("sign", plan, "--key", keys.key("ci")).returncode == 0
    code, document = runtime.run_json(plan, "--allowed-signers", keys.allowed("ci"))
    run_id = str(document["runId"])
    assert code == 3, document
    with runtime.paused():
        assert runtime.akm("approve", run_id, "wait", "--by", "ada").returncode == 0
        [[stored]] = runtime.sql("SELECT plan_json FROM runs WHERE id = ?", run_id)
        forged = json.loads(stored)
        forged["steps"][1]["target"]["command"] = "touch evil"
        runtime.sql(
            "UPDATE runs SET plan_json = ?, plan_hash = ? WHERE id = ?", json.dumps(forged), plan_hash(forged), run_id
        )
    result = runtime.akm("run", run_id)
    assert result.returncode == 4 and "was signed" in result.stderr, result.stderr
    assert not (runtime.root / "evil").exists() and not (runtime.root / "after").exists()
    run_row = runtime.store().run(run_id)
    assert run_row is not None and run_row.status == "active"  # refused, not failed: put the row back to go on


def test_an_abandoned_run_is_not_reopened_by_resume(runtime: Runtime) -> None:
    """`abandon`: the run "is never driven again" (docs/runtime.md); resume reopened it."""
    code, document = runtime.run_json(runtime.compile("wf.akm", GATED))
    run_id = str(document["runId"])
    assert code == 3 and runtime.akm("abandon", run_id).returncode == 0
    resumed = runtime.akm("resume", run_id)
    assert resumed.returncode == 2 and f"run {run_id} was abandoned" in resumed.stderr, resumed
    run_row = runtime.store().run(run_id)
    assert run_row is not None and run_row.status == "failed"
