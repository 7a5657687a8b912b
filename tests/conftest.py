"""Fixtures only: each wraps a helper from `helpers.py` around a fresh temp directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import Checker, Keys, Pool, PostgresServer, Runtime


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace root (it holds akm.toml)."""
    (tmp_path / "akm.toml").write_text("")
    return tmp_path


@pytest.fixture
def codes(tmp_path: Path) -> Checker:
    return Checker(tmp_path)


@pytest.fixture
def runtime(tmp_path: Path) -> Runtime:
    return Runtime(tmp_path)


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
