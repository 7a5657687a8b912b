"""Shared test helpers: repository paths, the real commands as subprocesses, workspaces that
check, compile, run and sign, and a private PostgreSQL server with DBOS worker processes on it.
Tests import this module; `conftest.py` only wraps these in fixtures."""

from __future__ import annotations

import base64
import binascii
import glob
import importlib.util
import json
import os
import pwd
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import forkserver
from syrupy.extensions.amber import AmberSnapshotExtension
from syrupy.location import PyTestLocation
from syrupy.types import SnapshotIndex

from akm_run.plan import render_file
from akm_run.sqlitestore import SQLiteStore
from akm_run.store import Store
from akmc.compiler import FileResult, Session, check_file
from akmc.diagnostics import Diagnostic

# Every test process imports this module (conftest.py does), so it leaves the PostgreSQL client
# libraries to the shared-store helpers that use them: importing dbos costs about 0.5 s of CPU,
# psycopg (and akm_run.pgstore with it) about 0.1 s.
if TYPE_CHECKING:
    from dbos import DBOSClient, WorkflowHandle

REPO = Path(__file__).resolve().parent.parent
LANGUAGE_EXAMPLE = REPO / "golden" / "language-example"
DATA = REPO / "tests" / "data"

Files = Mapping[str, str | bytes]  # a workspace's files by relative path: text, or bytes as they are


def repository_module(name: str) -> ModuleType:
    """A module at the repository's root (`tasks`, `docs_hooks`), which is not on the tests' import
    path, loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, REPO / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def source(text: str) -> str:
    """A file written as an indented triple-quoted block, so it reads as the file it stands for:
    drops the newline after the opening quotes and the common indentation, and the closing quotes'
    own line leaves the final newline. Use bytes or plain strings for deliberately odd input."""
    return textwrap.dedent(text.removeprefix("\n"))


def git(repo: Path, *args: str) -> str:
    """Run git in `repo`; its stdout (a failing git fails the test)."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def committed(root: Path) -> Path:
    """`root` made a git repository (branch main) with everything in it committed as `base`."""
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "ci@example.invalid")
    git(root, "config", "user.name", "ci")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def edit(path: Path, old: str, new: str) -> None:
    """Replace `old` (which must be there) with `new` in the file."""
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def doubling_leaf(log: str) -> str:
    """A child workflow (`workflows/leaf`) whose one unit runs shell command `log` (how a test
    counts where and how often it ran), then outputs `{"value": 2 * params.n}`; its output
    `doubled` is that value."""
    return source(r"""
        workflow "leaf" {
          params {
            n: int
          }
          outputs {
            doubled: int = steps.double.output.value
          }
          step double {
            shell "LOG; python3 -c 'import json,sys; c=json.load(sys.stdin); print(json.dumps({\"value\": c[\"inputs\"][\"params.n\"] * 2}))'"
            inputs = [params.n]
            output: { value: int }
          }
        }
    """).replace("LOG", log)


def many_workflows(root: Path, count: int = 40) -> None:
    """A workspace of `count` small workflows: every fifth refers to steps it lacks (E2xx), and every
    seventh composes the next one, so checks in shares and in parallel have trees to keep whole."""
    (root / "akm.toml").write_text("")
    (root / "workflows").mkdir()
    for i in range(count):
        body = (
            f'  step s {{\n    shell "true"\n    inputs = [steps.t{i % 3}.output]\n  }}\n'
            if i % 5 == 0
            else '  step s {\n    shell "true"\n  }\n'
        )
        uses = f'  step c {{\n    uses "workflows/w{i + 1}"\n  }}\n' if i % 7 == 0 and i < count - 1 else ""
        (root / "workflows" / f"w{i}.akm").write_text(f'workflow "w{i}" {{\n{body}{uses}}}\n')


def run_cli(
    *args: str | Path,
    cwd: Path | None = None,
    module: str = "akmc",
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m <module> ARGS` as a real subprocess (in `env`, else this process's environment)."""
    env = {**(os.environ if env is None else env), "PYTHONHASHSEED": "random"}
    return subprocess.run(
        [sys.executable, "-m", module, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=120,
    )


class Checker:
    """Checks sources written into one temp workspace; `codes(src)` → `["E203@7"]`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "akm.toml").write_text("")

    def write(self, files: Files) -> None:
        for rel, content in files.items():
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)

    def result(self, source: str | bytes, name: str = "wf.akm", files: Files | None = None) -> FileResult:
        self.write({name: source, **(files or {})})
        return check_file(self.root / name, name)

    def diagnostics(self, source: str | bytes, name: str = "wf.akm", files: Files | None = None) -> list[Diagnostic]:
        return self.result(source, name, files).report.diagnostics

    def __call__(self, source: str | bytes, name: str = "wf.akm", files: Files | None = None) -> list[str]:
        return [f"{d.code}@{d.span.line}" for d in self.diagnostics(source, name, files)]


# The stores the runtime's end-to-end suite runs on: SQLite in a state directory, and the shared
# PostgreSQL store with `akm-run worker` processes executing the units (docs/scale-out.md).
STORES = ("sqlite", "postgres")
# A test's worker: it takes over a worker silent for 2 s (the pool's T) and gives its units 5 s to end
# when stopped. It polls at the default, 1 s: work submitted or enqueued wakes it (akm_run.wakes), so
# a shorter poll would only cost CPU (docs/performance.md, "Woken, not polled").
WORKER_OPTIONS = ("--takeover-after", "2s", "--grace", "5s")
WORKER_READY = ": serving "  # what a worker prints once it serves the pool
# How long a stopping worker may take before the test fails for it (it is killed then).
STOP_PATIENCE_S = 15
# The store of a `before_store` test's [postgres] variant: a URL no server answers (nothing listens on
# the discard port), so a command that reaches for the store says so, naming this database.
UNREACHABLE_DATABASE = "postgresql://akm@127.0.0.1:9/never-reached"
# How long a unit process may outlive its test: a stop's SIGTERM-then-SIGKILL grace, and some slack.
LEFTOVER_GRACE_S = 5


def unit_processes(run_id: str | None = None, under: Path | None = None) -> list[int]:
    """The live processes of a run's units (of any run's when `run_id` is None), wherever they run on
    this machine: every process whose environment names the run (a unit's children inherit it) and,
    with `under`, whose working directory is there; zombies excepted."""
    wanted = f"AKM_RUN_ID={run_id}".encode() if run_id is not None else b"AKM_RUN_ID="
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:  # gone meanwhile, or not ours
            continue
        named = any(v == wanted or (run_id is None and v.startswith(wanted)) for v in environ)
        if named and state != "Z" and (under is None or cwd.is_relative_to(under)):
            found.append(int(entry.name))
    return found


def leftover_units(under: Path) -> str | None:
    """At the end of a test: unit processes still running in its workspace, which a stop must have
    ended (a unit stopped as the test ends gets the stop's grace period). They are killed; what was
    left, if anything."""
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (left := unit_processes(under=under)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not left:
        return None
    commands = []
    for pid in left:
        try:
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return f"unit processes left running: {commands}"


class Runtime:
    """A workspace whose workflows are compiled with akmc and run by a real `akm-run` process, on
    either store: SQLite in a real state directory (`database` None), or a PostgreSQL database
    whose units real `akm-run worker` processes execute (the fixture starts one). Every
    command goes to the same store, so a test reads the same on both: `runtime.akm("status", run_id)`
    runs any verb, `runtime.store()` reads the journal, `runtime.sql(...)` reads or forges its rows."""

    def __init__(self, root: Path, database: str | None = None) -> None:
        self.root = root
        self.state = root / ".state"
        self.database = database
        self.workers: list[Worker] = []
        self.problems: list[str] = []  # what went wrong with workers, reported at the end
        self._journal: Store | None = None
        (root / "akm.toml").write_text("")

    @property
    def sqlite(self) -> bool:
        return self.database is None

    def write(self, files: dict[str, str]) -> None:
        for rel, content in files.items():
            target = self.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            if rel.startswith("scripts/"):
                target.chmod(0o755)

    def compile(self, name: str, source: str | None = None, files: dict[str, str] | None = None) -> Path:
        """Write (optionally) and compile `name` to plans/<stem>.plan.json; returns the plan path."""
        if source is not None:
            self.write({name: source, **(files or {})})
        session = Session(self.root)
        result = session.check(self.root / name)
        assert result.plan is not None, [
            f"{d.file}: {d.code} {d.message}" for r in session.results for d in r.report.diagnostics
        ]
        plan_file = self.root / "plans" / (Path(name).stem + ".plan.json")
        plan_file.parent.mkdir(exist_ok=True)
        plan_file.write_text(render_file(result.plan))
        return plan_file

    def env(self, **extra: str) -> dict[str, str]:
        """A command's environment: this runtime's store and nothing else of akm-run's."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AKM_")}
        store = {"AKM_STATE_DIR": str(self.state)} if self.database is None else {"AKM_RUN_DATABASE": self.database}
        return {**env, **store, **extra}

    @property
    def reachable(self) -> bool:
        """False for a `before_store` test's [postgres] variant, whose database no server answers."""
        return self.database != UNREACHABLE_DATABASE

    def akm(
        self, *args: str | Path, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        self.pool()
        result = forkserver.run(
            [sys.executable, "-m", "akm_run", *map(str, args)], cwd=self.root, env=env or self.env(), timeout=timeout
        )
        if not self.reachable and UNREACHABLE_DATABASE.rpartition("/")[2] in result.stderr:
            raise AssertionError(f"a before_store test's command reached for the store: {result.stderr}")
        return result

    def run_json(self, *args: str | Path, env: dict[str, str] | None = None) -> tuple[int, Any]:
        """`akm-run run … --format json` → (exit code, document)."""
        result = self.akm("run", *args, "--format", "json", env=env)
        try:
            return result.returncode, json.loads(result.stdout)
        except ValueError:
            raise AssertionError(f"exit {result.returncode}: {result.stdout}\n{result.stderr}") from None

    def unit_env(self, **variables: str) -> dict[str, str]:
        """A command's environment with `variables` for units to see (passthrough, secrets): on
        SQLite the driver hands its own on; on PostgreSQL a unit sees its worker's environment, so
        the workers are replaced by one started with them."""
        env = self.env(**variables)
        if self.database is not None:
            self.stop_workers()
            self.start_worker(env=env)
        return env

    def start(self, *args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """`akm-run ARGS` started in the background (a test signals it or waits for it)."""
        self.pool()
        return forkserver.popen(
            [sys.executable, "-m", "akm_run", *map(str, args)],
            cwd=self.root,
            env=env or self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    # -- the process that executes units: the driver on SQLite, a worker on PostgreSQL ----------------

    def driver(self, *args: str | Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """`akm-run run ARGS` with the process that executes the units leading a process group of its
        own, its pid in `driver.pid` for a unit to kill: on SQLite the driver itself; on PostgreSQL a
        worker started for this with `env` (AKM_RUN_FAULT reaches the process it is meant for)."""
        if self.sqlite:
            process = forkserver.popen(
                [sys.executable, "-m", "akm_run", "run", *map(str, args)],
                cwd=self.root,
                env=env or self.env(),
                start_new_session=True,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            (self.root / "driver.pid").write_text(str(process.pid))
            return process
        self.stop_workers()
        worker = self.start_worker(env=env)
        worker.driver = True
        (self.root / "driver.pid").write_text(str(worker.process.pid))
        return self.start("run", *args)

    def killed(self, driver: subprocess.Popen[str]) -> None:
        """Wait for the process that executes `driver`'s units to die of SIGKILL (a unit or a fault
        killed it). On PostgreSQL `driver` only follows the run and goes on waiting for its end."""
        if self.sqlite:
            driver.communicate(timeout=PATIENCE_S)
            assert driver.returncode == -signal.SIGKILL, "the driver should have been killed"
            return
        worker = next(w for w in reversed(self.workers) if w.driver)
        assert worker.process.wait(timeout=PATIENCE_S) == -signal.SIGKILL, "the worker should have been killed"
        assert driver.poll() is None, driver.communicate()

    def replace_driver(self) -> None:
        """After the process that executed the units died: on SQLite nothing is needed (the next
        `akm-run run RUN` drives the run); on PostgreSQL a new worker takes the dead one's work over."""
        if not self.sqlite:
            self.start_worker()

    # -- workers (PostgreSQL) ---------------------------------------------------------------------------

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing drives the run inside the block: on PostgreSQL, where `approve` and `resume` submit
        the next drive themselves, no worker serves until the block ends (what is submitted waits);
        on SQLite only `run` drives, so there is nothing to pause."""
        if self.database is not None:
            self.stop_workers()
        yield
        if self.database is not None:
            self.start_worker()

    def pool(self) -> None:
        """On PostgreSQL, a serving worker for the commands that need one: the newest one, once it
        serves (the fixture starts one with the test, so it boots while the test compiles)."""
        if self.database is None or not self.reachable:
            return
        if not self.workers:
            self.start_worker()
        self.workers[-1].serving()

    def start_worker(
        self,
        env: dict[str, str] | None = None,
        wait: bool = True,
        *,
        name: str | None = None,
        options: tuple[str, ...] = (),
    ) -> Worker:
        """One more `akm-run worker` on this runtime's database, in the workspace, with `options`
        after WORKER_OPTIONS (the last of an option given twice wins); once it serves, unless `wait`
        is False. Its executor id is `name`, else `worker-N`."""
        assert self.database is not None, "workers serve the PostgreSQL store"
        assert self.reachable, "a before_store test never reaches the store, so no worker serves it"
        worker = Worker(self, name or f"worker-{len(self.workers) + 1}", env or self.env(), options)
        self.workers.append(worker)
        if wait:
            worker.serving()
        return worker

    def worker(self, name: str) -> Worker:
        """The newest worker started under executor id `name`."""
        return next(w for w in reversed(self.workers) if w.executor_id == name)

    def kill_driver(self) -> None:
        """SIGKILL the process group of the process that executes the units, as a host dies (not
        the units: each leads a session of its own): the driver of `driver.pid` on SQLite, the
        workers on PostgreSQL."""
        if self.database is None:
            os.killpg(int((self.root / "driver.pid").read_text()), signal.SIGKILL)
        for worker in self.workers:
            worker.kill()

    def stop_workers(self) -> None:
        """Stop every live worker with SIGTERM, as an operator does, noting in `problems` a worker
        that died or exited with an error by itself, or did not stop in time and was killed."""
        self.problems += [problem for worker in self.workers if (problem := worker.stop())]

    def close(self) -> list[str]:
        """End of the test: the workers stopped and the journal closed; what went wrong with workers."""
        self.stop_workers()
        if self._journal is not None:
            self._journal.close()
        return self.problems

    # -- the journal, whichever store holds it ------------------------------------------------------------

    def store(self) -> Store:
        """The run journal: a fresh SQLiteStore on the state directory, or one PostgresStore kept open."""
        if self.database is None:
            return SQLiteStore(self.state)
        assert self.reachable, "a before_store test never reaches the store"
        if self._journal is None:
            from akm_run.pgstore import PostgresStore  # here, not at the top: its import time (see the note there)

            self._journal = PostgresStore(self.database)
        return self._journal

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        """One SQL statement on the journal's tables (`?` parameters, both stores' common SQL), in a
        transaction of its own; the rows it returns. Tests read and forge rows with it."""
        store = self.store()
        with store.transaction():
            rows = store._execute(query, args)
            described = getattr(rows, "description", None) is not None
            return [tuple(row) for row in rows.fetchall()] if described else []

    def dump(self, everything: bool = False) -> str:
        """Every row of every journal table, as text, rows sorted. `everything`: on PostgreSQL also
        DBOS's tables (whatever the database holds), a base64 value (DBOS's serialised arguments and
        results) followed by what it decodes to."""
        if self.database is None:
            with closing(sqlite3.connect(self.state / "state.db")) as db:
                return "\n".join(db.iterdump())
        import psycopg  # here, not at the top: its import time (see the note there)

        lines = []
        # The journal's tables, not the pool's heartbeats (akm_run.executors), which change as workers beat.
        schemas = (
            "NOT IN ('pg_catalog', 'information_schema')" if everything else "= 'akm_run' AND table_name <> 'executors'"
        )
        with psycopg.connect(self.database) as db:
            tables = db.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                f"WHERE table_schema {schemas} ORDER BY 1, 2"
            ).fetchall()
            for schema, table in tables:
                rows = db.execute(f'SELECT * FROM "{schema}"."{table}"').fetchall()
                lines += sorted(f"{schema}.{table}: {_decoded(row)!r}" for row in rows)
        return "\n".join(lines)

    def untouched(self) -> bool:
        """Nothing was published: on SQLite no state directory at all, on PostgreSQL no run (and none
        can be where no server answers: each command was checked not to have reached for it)."""
        if self.database is None:
            return not self.state.exists()
        if not self.reachable:
            return True
        import psycopg  # here, not at the top: its import time (see the note there)

        with psycopg.connect(self.database) as db:
            [[exists]] = db.execute("SELECT to_regclass('akm_run.runs') IS NOT NULL").fetchall()
            return not exists or not db.execute("SELECT 1 FROM akm_run.runs LIMIT 1").fetchall()


def _decoded(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row with each base64 text value followed by what it decodes to (as text, lossily)."""
    out: list[Any] = []
    for value in row:
        out.append(value)
        if isinstance(value, str) and len(value) >= 8 and len(value) % 4 == 0:
            try:
                out.append(base64.b64decode(value, validate=True).decode(errors="replace"))
            except (binascii.Error, ValueError):
                pass
    return tuple(out)


class Worker:
    """One `akm-run worker` process of a Runtime: its own executor id, cwd and --workdir the
    workspace, the options of WORKER_OPTIONS, leading a process group of its own (a unit or a test may
    SIGKILL it as a host dies), its output in `.workers/<id>.log` in the workspace."""

    def __init__(self, runtime: Runtime, executor_id: str, env: dict[str, str], options: tuple[str, ...] = ()) -> None:
        assert runtime.database is not None
        self.executor_id = executor_id
        self.log = runtime.root / ".workers" / f"{executor_id}.log"
        self.log.parent.mkdir(exist_ok=True)
        argv = [
            "worker",
            "--database",
            runtime.database,
            "--executor-id",
            executor_id,
            *WORKER_OPTIONS,
            "--workdir",
            str(runtime.root),
            *options,
        ]
        with self.log.open("w") as out:
            self.process = forkserver.popen(
                [sys.executable, "-m", "akm_run", *argv],
                cwd=runtime.root,
                env={**env, "PYTHONUNBUFFERED": "1"},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.killed = self.stopped = self.ready = False
        self.driver = False  # a unit kills it (driver.pid), or a fault: its SIGKILL is no problem

    def serving(self) -> None:
        """Wait until the worker serves the pool (fails if it exits first)."""
        if self.ready or self.killed or self.stopped:
            return
        eventually(lambda: WORKER_READY in self.output() or self.process.poll() is not None, self.executor_id)
        if self.process.poll() is not None:
            self.stopped = True  # reported here, not again at the end
            raise AssertionError(f"{self.executor_id} did not start:\n{self.output()}")
        self.ready = True

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.killed = True

    def stop(self) -> str | None:
        """SIGTERM and wait; what went wrong, if anything (a graceful stop exits 0)."""
        if self.stopped:
            return None
        if not self.ready and self.process.poll() is None:  # its SIGTERM handler is not installed yet
            eventually(lambda: WORKER_READY in self.output() or self.process.poll() is not None, self.executor_id)
        self.stopped = True
        code = self.process.poll()
        if code is not None:
            if code == -signal.SIGKILL and (self.killed or self.driver):
                return None
            return f"{self.executor_id} exited by itself with {code}"
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=STOP_PATIENCE_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            return f"{self.executor_id} did not stop within {STOP_PATIENCE_S} s of SIGTERM and was killed"
        return None if code == 0 else f"{self.executor_id} exited with {code} after SIGTERM"

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class OneForEveryStore(AmberSnapshotExtension):
    """Syrupy's snapshots, one per test whichever store variant asserts it: `test_x[sqlite]` and
    `test_x[postgres]` both compare with `test_x` (the `one_snapshot` fixture)."""

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        name = super().get_snapshot_name(test_location=test_location, index=index)
        return re.sub(r"\[(?:sqlite|postgres)\]", "", name)


class Keys:
    """Real ed25519 keys made by ssh-keygen in a temp directory, an allowed signers file listing
    the ones asked for, and signatures made the way `akmc sign` makes them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def key(self, name: str) -> Path:
        private = self.directory / name
        if not private.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", private], check=True)
        return private

    def allowed(self, *principals: str, options: str = "", name: str = "allowed_signers") -> Path:
        """An allowed signers file: `<name>@example.com [options] <public key>` for each key named."""
        lines = [f"{p}@example.com {options} {Path(f'{self.key(p)}.pub').read_text().strip()}" for p in principals]
        path = self.directory / name
        path.write_text("".join(line.replace("  ", " ") + "\n" for line in lines))
        return path

    def sign(self, plan: Path, name: str, namespace: str = "akm-plan") -> Path:
        """Sign with ssh-keygen directly (any namespace); returns PLAN.sig."""
        made = subprocess.run(
            ["ssh-keygen", "-Y", "sign", "-f", self.key(name), "-n", namespace],
            input=plan.read_bytes(),
            capture_output=True,
            check=True,
        )
        signature = plan.with_name(plan.name + ".sig")
        signature.write_bytes(made.stdout)
        return signature

    def fingerprint(self, name: str) -> str:
        listed = subprocess.run(["ssh-keygen", "-l", "-f", self.key(name)], capture_output=True, text=True, check=True)
        return listed.stdout.split()[1]


# Debian keeps the server's programs off PATH, one directory per major version.
DEBIAN_BIN = "/usr/lib/postgresql/*/bin"
MISSING = (
    "PostgreSQL's initdb and pg_ctl were not found (on PATH or in {where}); `python3 tasks.py test` installs "
    "Debian's `postgresql` when it runs as root, elsewhere: apt-get install postgresql"
)


def server_bin() -> Path:
    """The directory holding initdb and pg_ctl: PATH first, else Debian's newest installed version."""
    on_path = [shutil.which("initdb"), shutil.which("pg_ctl")]
    if all(on_path) and Path(str(on_path[0])).parent == Path(str(on_path[1])).parent:
        return Path(str(on_path[0])).parent
    versions = sorted(
        (Path(d) for d in glob.glob(DEBIAN_BIN) if (Path(d) / "initdb").is_file() and (Path(d) / "pg_ctl").is_file()),
        key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0,
    )
    if not versions:
        raise FileNotFoundError(MISSING.format(where=DEBIAN_BIN))
    return versions[-1]


class PostgresServer:
    """One server for the test session; `database()` makes a fresh, empty database on it and
    returns its URL (a Unix socket, trust authentication, superuser `postgres`)."""

    def __init__(self) -> None:
        self.bin = server_bin()
        # Not under pytest's tmp_path: its parent is private to the current user, and the server
        # runs as another one when the suite runs as root (initdb refuses to run as root).
        self.root = Path(tempfile.mkdtemp(prefix="akm-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.user: dict[str, Any] = {}
        self._template: str | None = None  # the database `served()` copies, once made
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root, nobody.pw_uid, nobody.pw_gid)
            self.user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}

    def _run(self, program: str, *argv: str) -> None:
        result = subprocess.run(
            [str(self.bin / program), *argv],
            capture_output=True,
            text=True,
            cwd=self.root,
            env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
            timeout=120,
            **self.user,
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(f"{program} failed ({result.returncode}): {result.stdout}{result.stderr}{log}")

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
        self._start()

    def _start(self) -> None:
        options = f"-k {self.root} -c listen_addresses= -c fsync=off -c max_connections=200"
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", options)

    def restart(self, away_s: float = 0) -> None:
        """Stop the server as an administrator does (every connection ends), keep it down for
        `away_s`, and start it again with its databases."""
        self.down()
        time.sleep(away_s)
        self._start()

    def down(self) -> None:
        """Stop the server as an administrator does, keeping its databases for `up`."""
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w")

    def up(self) -> None:
        """Start a server that is `down` again, with its databases."""
        self._start()

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.root}"

    def database(self, template: str = "template1") -> str:
        """A new database, a copy of `template` (by default an empty one); its URL."""
        import psycopg  # here, not at the top: its import time (see the note there)

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return self.url(name)

    def served(self) -> str:
        """A new database holding the pool's schemas as a worker's first start leaves them (the run
        journal's, the heartbeats' and DBOS's system schema, every migration applied) and no row of
        any run, queue or worker; its URL. A copy of a template that one worker-side `prepare` made
        on this server: a worker then starts on it as on a database served before, creating nothing
        (DBOS's launch skips its migrations when they are all applied), which saves each test the
        schemas' creation. The creation itself is tested on empty databases (`database()`)."""
        if self._template is None:
            self._template = self._make_template()
        return self.database(template=self._template)

    def _make_template(self) -> str:
        import psycopg  # here, not at the top: its import time (see the note there)

        name = "akm_served"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        # In a process of its own, as a worker does it: this process need not import DBOS.
        prepare = f"from akm_run import pool_schemas; pool_schemas.prepare({self.url(name)!r}, print).close()"
        subprocess.run([sys.executable, "-c", prepare], check=True, capture_output=True, timeout=120)
        with psycopg.connect(self.url(), autocommit=True) as connection:
            # No session may connect to it: a template in use cannot be copied.
            connection.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')
            eventually(
                lambda: not connection.execute("SELECT 1 FROM pg_stat_activity WHERE datname = %s", (name,)).fetchall(),
                "the template's last session to end",
            )
        return name


# The DBOS application of the shared store's experiments (tests/integration/test_dbos_properties.py).
DBOS_PROBE = REPO / "tests" / "integration" / "dbosprobe.py"
PATIENCE_S = 90  # a bound on waiting for a condition, never a measure of speed


def eventually(condition: Callable[[], Any], what: str) -> Any:
    """The first truthy value of `condition()`, polled; fails after PATIENCE_S."""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


class Pool:
    """DBOS worker processes of DBOS_PROBE, each with its own executor id, and a DBOS client on one
    database; the workers' steps append to `log` in `directory`, which `lines()` reads."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url = url
        self.directory = directory
        self.processes: list[subprocess.Popen[str]] = []
        self._client: DBOSClient | None = None

    def spawn(self, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        process = subprocess.Popen(
            [sys.executable, str(DBOS_PROBE), *argv], env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.processes.append(process)
        return process

    def worker(
        self, executor_id: str, takeover_after_s: float = 30.0, env: dict[str, str] | None = None
    ) -> subprocess.Popen[str]:
        """A worker process, once it is ready (launched, queues registered, beating)."""
        argv = ("worker", executor_id, self.url, str(self.directory), str(takeover_after_s))
        process = self.spawn(*argv, env=env)
        eventually(lambda: self.lines(f"ready {executor_id} ") or process.poll() is not None, f"worker {executor_id}")
        assert process.poll() is None, process.communicate()
        return process

    @property
    def client(self) -> DBOSClient:
        if self._client is None:
            from dbos import DBOSClient  # here, not at the top: its import time (see the note there)

            self._client = DBOSClient(system_database_url=self.url)
        return self._client

    def enqueue(
        self, workflow: str, *args: Any, workflow_id: str | None = None, queue: str = "runs"
    ) -> WorkflowHandle[Any]:
        """Enqueue a probe workflow by name (its first argument, the directory, is added)."""
        from dbos import EnqueueOptions  # here, not at the top: its import time (see the note there)

        options = EnqueueOptions(queue_name=queue, workflow_name=workflow)
        if workflow_id is not None:
            options["workflow_id"] = workflow_id
        return self.client.enqueue(options, str(self.directory), *args)

    def lines(self, prefix: str = "") -> list[str]:
        log = self.directory / "log"
        text = log.read_text() if log.exists() else ""
        return [line for line in text.splitlines() if line.startswith(prefix)]

    def close(self) -> None:
        if self._client is not None:
            self._client.destroy()
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
