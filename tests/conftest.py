"""Fixtures only: each wraps a helper from `helpers.py` around a fresh temp directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

import profiles  # noqa: F401  (registers the hypothesis profiles before any test module is collected)
from helpers import (
    STORES,
    UNREACHABLE_DATABASE,
    Checker,
    Keys,
    OneForEveryStore,
    Pool,
    PostgresServer,
    Runtime,
    leftover_units,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace root (it holds akm.toml)."""
    (tmp_path / "akm.toml").write_text("")
    return tmp_path


@pytest.fixture
def codes(tmp_path: Path) -> Checker:
    return Checker(tmp_path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked `slow` first, the others in their order (a stable sort): pytest-xdist hands
    tests out in collection order, so a long test handed out last would end the run alone while the
    other workers had nothing left (docs/performance.md, "The test suite")."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test of the `runtime` fixture runs once per store (`[sqlite]`, `[postgres]`), except one
    marked `sqlite_only` (about SQLite itself; docs/development.md lists them). A test marked
    `pool_differs(reason)` found the stores behaving differently: its `[postgres]` variant is an
    expected failure (strict: it fails the suite once the difference is gone)."""
    if "runtime_store" not in metafunc.fixturenames:  # not this `runtime` (a module may define its own)
        return
    if metafunc.definition.get_closest_marker("sqlite_only"):
        metafunc.parametrize("runtime_store", ["sqlite"], indirect=True)
        return
    differs = metafunc.definition.get_closest_marker("pool_differs")
    marks = [pytest.mark.xfail(strict=True, reason=f"the pool differs: {differs.args[0]}")] if differs else []
    stores = [pytest.param(store, marks=marks if store == "postgres" else []) for store in STORES]
    metafunc.parametrize("runtime_store", stores, indirect=True)


@pytest.fixture
def runtime_store(request: pytest.FixtureRequest) -> str:
    """The store a `runtime` test runs on (parametrised by pytest_generate_tests)."""
    return str(request.param)


@pytest.fixture
def runtime(runtime_store: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """helpers.Runtime on the store of this variant: on PostgreSQL a fresh database on the session's
    server, holding the pool's schemas as a first worker leaves them (PostgresServer.served), and a
    worker (started with the test, waited for by the first command), stopped at the end with
    SIGTERM; a worker that dies by itself or does not stop fails the test, and so does a unit
    process left running in the workspace; the workers' output is shown on failure. A test marked
    `before_store` (decided before any store is reached) gets, on PostgreSQL, a database no server
    answers and no worker: a command of it that reaches for the store fails it."""
    database = None
    if runtime_store == "postgres":
        before_store = request.node.get_closest_marker("before_store") is not None
        database = UNREACHABLE_DATABASE if before_store else request.getfixturevalue("postgres_server").served()
    runtime = Runtime(tmp_path, database)
    if database is not None and runtime.reachable:
        runtime.start_worker(wait=False)  # it boots while the test compiles
    yield runtime
    _close(runtime)


@pytest.fixture
def pooled(database_url: str, tmp_path: Path) -> Iterator[Runtime]:
    """helpers.Runtime on a fresh PostgreSQL database with no worker yet: the test starts the
    ones it needs (`start_worker(name=…, options=…)`); ended as the `runtime` fixture ends."""
    runtime = Runtime(tmp_path, database_url)
    yield runtime
    _close(runtime)


def _close(runtime: Runtime) -> None:
    """The end of a Runtime's test: its workers stopped (their output shown on failure), and the
    test failed for a worker that died by itself or did not stop, or for a unit process left
    running in its workspace."""
    problems = runtime.close()
    if left := leftover_units(runtime.root):
        problems.append(left)
    for worker in runtime.workers:
        print(f"-- output of {worker.executor_id} --\n{worker.output()}")
    if problems:
        pytest.fail("; ".join(problems), pytrace=False)


@pytest.fixture
def one_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    """A snapshot that every store variant of a `runtime` test compares with (helpers.OneForEveryStore)."""
    return snapshot.use_extension(OneForEveryStore)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One private PostgreSQL server for the session (helpers.PostgresServer). Fails, never skips,
    when it cannot start: `python3 tasks.py test` installs the server where it may."""
    try:
        server = PostgresServer()
        server.start()
    except (OSError, RuntimeError) as error:
        pytest.fail(f"no PostgreSQL server for the tests: {error}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def database_url(postgres_server: PostgresServer) -> str:
    """The URL of a fresh, empty database on the session's server."""
    return postgres_server.database()


@pytest.fixture
def pool(database_url: str, tmp_path: Path) -> Iterator[Pool]:
    """DBOS worker processes on a fresh database, stopped at the end."""
    pool = Pool(database_url, tmp_path)
    yield pool
    pool.close()
