#!/usr/bin/env python3
"""Benchmark the worker pool's cost per unit against DBOS's own floor on the same PostgreSQL server:
CPU time (the workers, the server, the submitting client) and SQL statements per unit, for a map of
N `sleep` units run by `akm-run run --database` on one `akm-run worker`, and for N workflows of one
step each (the step runs the same `sleep` through a shell) on one plain DBOS worker, enqueued and
waited for by a DBOS client (docs/performance.md). Prints figures; asserts nothing.

    python bench/pool_floor.py --units 200 --sleep 0.05 --per-worker 4 --poll 100ms --repeat 2

Each side runs once warm, then --repeat times measured (CPU, from /proc and the server's process
tree) and once more with log_statement on (statements, from the server's log): the pool, then the
floor. CPU counts whole process trees: the worker and its guard, the `run` process or the client,
and every server process (exited connections through the postmaster's waited-for children).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))
sys.path.insert(0, str(HERE / "bench"))

from scaleout import counted as scaleout_counted  # noqa: E402
from scaleout import cpu_seconds, group, plan  # noqa: E402

from helpers import PostgresServer, Runtime  # noqa: E402

FLOOR_APP = "akm-floor"
FLOOR_VERSION = "akm-floor-1"
FLOOR_QUEUE = "floor"
FLOOR_WORKFLOW = "floor-unit"
TOP = 12  # the most frequent statements shown per side, per unit


def serve_floor(url: str, poll_s: float, concurrency: int) -> None:
    """The floor's worker: DBOS launched with one workflow of one step, one queue, until SIGTERM."""
    from dbos import DBOS

    DBOS(
        config={
            "name": FLOOR_APP,
            "system_database_url": url,
            "application_version": FLOOR_VERSION,
            "executor_id": "floor",
            "log_level": "WARNING",
        }
    )

    @DBOS.step(name="floor-step")
    def step(seconds: float) -> int:
        return subprocess.run(["sh", "-c", f"sleep {seconds}"], check=False).returncode

    @DBOS.workflow(name=FLOOR_WORKFLOW)
    def workflow(seconds: float) -> int:
        return step(seconds)

    DBOS.launch()
    DBOS.register_queue(FLOOR_QUEUE, worker_concurrency=concurrency, polling_interval_sec=poll_s)
    stop = False

    def stopped(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, stopped)
    print("ready", flush=True)
    while not stop:
        time.sleep(0.1)
    DBOS.destroy(workflow_completion_timeout_sec=5)


def floor_client(url: str, units: int, seconds: float) -> None:
    """The floor's client: enqueue the units' workflows, then wait for each one's result."""
    from dbos import DBOSClient, EnqueueOptions, WorkflowHandle

    client = DBOSClient(system_database_url=url, application_name=FLOOR_APP)
    options = EnqueueOptions(queue_name=FLOOR_QUEUE, workflow_name=FLOOR_WORKFLOW, app_version=FLOOR_VERSION)
    handles: list[WorkflowHandle[None]] = [client.enqueue(options, seconds) for _ in range(units)]
    for handle in handles:
        handle.get_result()
    client.destroy()


def server_cpu(server: PostgresServer) -> float:
    """CPU of the server's whole process tree so far: the postmaster (its exited connections
    included) and every process it started."""
    postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return cpu_seconds(pids)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(server: PostgresServer, worker_pid: int, act: Callable[[], None]) -> tuple[float, float, float]:
    """(worker, server, client) CPU seconds that `act` (one subprocess run, waited for) costs."""
    before = (cpu_seconds(group(worker_pid)), server_cpu(server), children_cpu())
    act()
    time.sleep(0.5)  # the worker settles its last unit's bookkeeping
    after = (cpu_seconds(group(worker_pid)), server_cpu(server), children_cpu())
    return after[0] - before[0], after[1] - before[1], after[2] - before[2]


def counted(server: PostgresServer, act: Callable[[], None]) -> collections.Counter[str]:
    """The statements the server logs while `act` runs and the worker settles (scaleout.counted)."""

    def acted() -> None:
        act()
        time.sleep(0.5)

    return scaleout_counted(server, acted, width=90)


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} exited {done.returncode}: {done.stderr[-2000:]}")


def pool_side(
    server: PostgresServer, args: argparse.Namespace
) -> tuple[list[tuple[float, float, float]], collections.Counter[str]]:
    directory = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    plan_file = plan(directory, args.per_worker, args.sleep)
    pool = Runtime(directory, server.database())
    assert pool.database is not None
    options = ("--concurrency", str(args.per_worker), "--poll", args.poll, "--takeover-after", "30s")
    worker = pool.start_worker(name="w1", options=options)
    argv = [sys.executable, "-m", "akm_run", "run", str(plan_file), "--database", pool.database]
    items = json.dumps(list(range(args.units)))
    try:
        run([*argv, "--param", "items=[0]"], directory, pool.env())  # warm
        act = lambda: run([*argv, "--param", f"items={items}"], directory, pool.env())  # noqa: E731
        costs = [measured(server, worker.process.pid, act) for _ in range(args.repeat)]
        return costs, counted(server, act)
    finally:
        if problems := pool.close():
            print("\n".join(problems), file=sys.stderr)


def floor_side(
    server: PostgresServer, args: argparse.Namespace
) -> tuple[list[tuple[float, float, float]], collections.Counter[str]]:
    from akm_run.durations import parse_option

    url = server.database()
    poll_s = parse_option(args.poll) / 1000
    me = [sys.executable, str(Path(__file__).resolve())]
    worker = subprocess.Popen(
        [*me, "--serve-floor", url, str(poll_s), str(args.per_worker)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        client = [*me, "--floor-client", url, str(args.units), str(args.sleep)]
        run([*me, "--floor-client", url, "1", str(args.sleep)], HERE, dict(os.environ))  # warm
        act = lambda: run(client, HERE, dict(os.environ))  # noqa: E731
        costs = [measured(server, worker.pid, act) for _ in range(args.repeat)]
        return costs, counted(server, act)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


def report(label: str, units: int, costs: list[tuple[float, float, float]], found: collections.Counter[str]) -> float:
    per = [sum(c) / units * 1000 for c in costs]
    parts = [statistics.median(c[i] for c in costs) / units * 1000 for i in range(3)]
    print(
        f"{label:<6} {statistics.median(per):8.1f}  {parts[0]:8.1f} {parts[1]:8.1f} {parts[2]:8.1f}  "
        f"{sum(found.values()) / units:10.1f}"
    )
    for statement, count in found.most_common(TOP):
        print(f"         {count / units:6.2f}  {statement}")
    return statistics.median(per)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-floor":
        return serve_floor(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
    if len(sys.argv) > 1 and sys.argv[1] == "--floor-client":
        return floor_client(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds each unit sleeps")
    parser.add_argument("--per-worker", type=int, default=4, help="units in flight (--concurrency, the map's)")
    parser.add_argument("--poll", default="100ms", help="the workers' queue polling interval")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        print(
            f"{args.units} units of sleep {args.sleep}, {args.per_worker} at a time on one worker, --poll {args.poll}; "
            f"CPU median of {args.repeat}, ms per unit"
        )
        print("side      total    worker   server   client  statements/unit")
        pool = report("pool", args.units, *pool_side(server, args))
        floor = report("floor", args.units, *floor_side(server, args))
        print(f"pool / floor: {pool / floor:.2f}x CPU per unit")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
