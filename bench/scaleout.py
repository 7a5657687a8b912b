#!/usr/bin/env python3
"""Benchmark the shared store's dispatch: units per second for a map of N `sleep` units spread over
1, 2 and 4 worker processes by DBOS on a private PostgreSQL server (docs/scale-out.md). Prints
figures; asserts nothing.

    python bench/scaleout.py --units 200 --sleep 0.05 --workers 1,2,4 --per-worker 4 --poll 0.1

Until the PostgreSQL store is built, the workers are the DBOS probe of the tests
(tests/integration/dbosprobe.py): each unit is a workflow on the units queue whose one step runs
`sleep`, which is the shape akm-run's units will have, without akm-run's journal. The figure is the
dispatch ceiling the store will run under; once `akm-run worker` exists, the same harness times
`akm-run run` of a compiled map instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

from helpers import Pool, PostgresServer  # noqa: E402


def one_map(server: PostgresServer, workers: int, units: int, seconds: float) -> float:
    """Seconds from submitting the map to its result, with `workers` workers already running."""
    pool = Pool(server.database(), Path(tempfile.mkdtemp(prefix="akm-bench-")))
    try:
        for n in range(workers):
            pool.worker(f"w{n + 1}")
        pool.enqueue("sleep_map", 1, 0.0).get_result()  # warm: queues registered, connections open
        start = time.perf_counter()
        pool.enqueue("sleep_map", units, seconds).get_result()
        return time.perf_counter() - start
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds each unit sleeps")
    parser.add_argument("--workers", default="1,2,4", help="worker counts to compare")
    parser.add_argument("--per-worker", type=int, default=4, help="units in flight per worker")
    parser.add_argument("--poll", type=float, default=0.1, help="the units queue's polling interval, seconds")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ["PROBE_UNITS_PER_WORKER"] = str(args.per_worker)
    os.environ["PROBE_POLL_S"] = str(args.poll)
    server = PostgresServer()
    server.start()
    try:
        print(
            f"{args.units} units of sleep {args.sleep}, {args.per_worker} in flight per worker, "
            f"queue polled every {args.poll} s"
        )
        print("workers  median s  units/s  ideal units/s")
        for workers in (int(w) for w in args.workers.split(",")):
            times = [one_map(server, workers, args.units, args.sleep) for _ in range(args.repeat)]
            median = statistics.median(times)
            ideal = workers * args.per_worker / args.sleep
            print(f"{workers:>7}  {median:>8.2f}  {args.units / median:>7.1f}  {ideal:>13.1f}", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
