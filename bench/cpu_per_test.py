"""A pytest plugin that measures the CPU time of each test: the pytest process's own, its children's
(the `akm-run` commands and workers it waited for, or the tests' fork server reaped) and the private PostgreSQL server's (every
server process: the server is a daemon, so no rusage of pytest's counts it). Prints a table at the
end, and the medians per store variant; asserts nothing (docs/performance.md, "The suite").

    .venv/bin/python -m pytest -p no:xdist -p no:cacheprovider -q -p bench.cpu_per_test \\
        "tests/e2e/test_runtime_run.py" -k "expect_hash or tampered"

Run serially (`-p no:xdist`): with workers, each would measure its own tests. The first test on
PostgreSQL also pays the server's start (initdb): the medians show what a variant costs. Under
pytest-xdist each worker measures its own tests against its own server; with `$CPU_PER_TEST_OUT`
set, each writes its rows to `$CPU_PER_TEST_OUT.<worker>` as JSON lines `[test id, wall, pytest,
children, server]`, which is how the whole suite's CPU is counted:

    CPU_PER_TEST_OUT=/tmp/cpu .venv/bin/python -m pytest -n 4 --dist loadgroup -q -p bench.cpu_per_test
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

TICK = 100.0  # clock ticks per second of /proc/PID/stat (USER_HZ)
FIGURES: list[tuple[str, float, float, float, float]] = []  # (test id, wall, pytest, children, server)


def _server_cpu() -> float:
    """The CPU seconds of every process of the session's PostgreSQL server so far (0 without one):
    the postmaster's own and its reaped children's, and the live children's."""
    data = _SERVER.get("data")
    if data is None:
        return 0.0
    pidfile = data / "postmaster.pid"
    try:
        postmaster = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime
        elif ppid == postmaster:
            total += sum(int(f) for f in fields[11:13]) / TICK
    return total


_SERVER: dict[str, Path] = {}  # the data directory of the session's server, once a test used it


_SERVER_LAST: dict[str, float] = {}


def pytest_fixture_post_finalizer(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> None:
    if fixturedef.scope == "function" and (cpu := _server_cpu()):
        _SERVER_LAST["cpu"] = cpu


def pytest_runtest_call(item: pytest.Item) -> None:
    """Find the server from the test's fixtures: a database URL names its socket directory."""
    for value in (getattr(item, "funcargs", None) or {}).values():
        url = getattr(value, "database", None) if not isinstance(value, str) else value
        if isinstance(url, str) and (found := re.search(r"[?&]host=([^&]+)", url)):
            _SERVER["data"] = Path(found.group(1)) / "data"


def _rusage(who: int) -> float:
    usage = resource.getrusage(who)
    cpu = usage.ru_utime + usage.ru_stime
    if who == resource.RUSAGE_CHILDREN and (forkserver := sys.modules.get("forkserver")) is not None:
        cpu += forkserver.children_cpu()  # the commands the tests' fork server forked and reaped
    return cpu


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    import time

    wall, own, children = time.monotonic(), _rusage(resource.RUSAGE_SELF), _rusage(resource.RUSAGE_CHILDREN)
    server = _server_cpu()
    yield
    # The last test's teardown stops the server: its reading after the test's own fixtures ended.
    server_after = _server_cpu() or _SERVER_LAST.get("cpu", 0.0)
    FIGURES.append(
        (
            item.nodeid,
            time.monotonic() - wall,
            _rusage(resource.RUSAGE_SELF) - own,
            _rusage(resource.RUSAGE_CHILDREN) - children,
            max(server_after - server, 0.0) if server_after else 0.0,
        )
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    write = terminalreporter.write_line
    write("")
    write(f"{'wall s':>7} {'pytest':>7} {'children':>8} {'server':>7} {'cpu s':>7}  test")
    for nodeid, wall, own, children, server in FIGURES:
        write(f"{wall:7.2f} {own:7.2f} {children:8.2f} {server:7.2f} {own + children + server:7.2f}  {nodeid}")
    for store in ("sqlite", "postgres"):
        rows = [f for f in FIGURES if f[0].endswith(f"[{store}]")]
        if rows:
            cpu = [own + children + server for _, _, own, children, server in rows]
            write(
                f"[{store}] {len(rows)} tests: CPU median {statistics.median(cpu):.2f} s, "
                f"total {sum(cpu):.2f} s (pytest {sum(r[2] for r in rows):.2f}, "
                f"children {sum(r[3] for r in rows):.2f}, server {sum(r[4] for r in rows):.2f})"
            )


def pytest_sessionfinish(session: pytest.Session) -> None:
    if out := os.environ.get("CPU_PER_TEST_OUT"):
        with open(f"{out}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w") as rows:
            rows.writelines(json.dumps(row) + "\n" for row in FIGURES)
