#!/usr/bin/env python3
"""Benchmark the worker pool: units per second for a map of N `sleep` units run by `akm-run run
--database` over 1, 2 and 4 `akm-run worker` processes on a private PostgreSQL server, and the same
map run by the SQLite runtime; the per-unit overhead of each against the time the units sleep
(docs/scale-out.md, docs/performance.md). Prints figures; asserts nothing.

    python bench/scaleout.py --units 200 --sleep 0.05 --workers 1,2,4 --per-worker 4 --poll 100ms

The map's concurrency is the pool's whole width (workers x per-worker, at most 64); the SQLite run
gets the same width as its --max-concurrency. Overhead per unit = elapsed x width / units - sleep:
what dispatching, journaling and waiting add to each unit's own time, in a unit's slot.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

from helpers import PostgresServer, Runtime, source  # noqa: E402

MAP = """
    workflow "bench" {
      params { items: list[int] }
      limits { concurrency = WIDTH }
      step fan {
        map params.items {
          concurrency = WIDTH
          shell "sleep SLEEP"
        }
      }
    }
"""


def plan(directory: Path, width: int, seconds: float) -> Path:
    runtime = Runtime(directory)
    return runtime.compile("bench.akm", source(MAP.replace("WIDTH", str(width)).replace("SLEEP", str(seconds))))


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "akm_run", *argv], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"akm-run {' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return elapsed


def pooled(server: PostgresServer, workers: int, args: argparse.Namespace, repeat: int) -> list[float]:
    directory = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    width = min(64, workers * args.per_worker)
    plan_file = plan(directory, width, args.sleep)
    pool = Runtime(directory, server.database())
    assert pool.database is not None
    # A worker's defaults but its width and polling; the tests' short takeover (2 s) would let a
    # worker starved of CPU on this machine be taken over while it runs units.
    options = ("--concurrency", str(args.per_worker), "--poll", args.poll, "--takeover-after", "30s")
    try:
        for n in range(workers):
            pool.start_worker(name=f"w{n + 1}", options=options)
        items = json.dumps(list(range(args.units)))
        argv = ["run", str(plan_file), "--database", pool.database, "--max-concurrency", str(width)]
        timed([*argv, "--param", "items=[0]"], directory, pool.env())  # warm: queues declared, connections open
        return [timed([*argv, "--param", f"items={items}"], directory, pool.env()) for _ in range(repeat)]
    finally:
        if problems := pool.close():
            print("\n".join(problems), file=sys.stderr)


def local(width: int, args: argparse.Namespace, repeat: int) -> list[float]:
    directory = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    plan_file = plan(directory, width, args.sleep)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AKM_")}
    items = json.dumps(list(range(args.units)))
    argv = ["run", str(plan_file), "--state-dir", str(directory / ".state"), "--max-concurrency", str(width)]
    return [timed([*argv, "--param", f"items={items}"], directory, env) for _ in range(repeat)]


def row(label: str, width: int, times: list[float], args: argparse.Namespace) -> str:
    median = statistics.median(times)
    overhead_ms = (median * width / args.units - args.sleep) * 1000
    return f"{label:<18} {width:>5}  {median:>8.2f}  {args.units / median:>7.1f}  {width / args.sleep:>7.1f}  {overhead_ms:>8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds each unit sleeps")
    parser.add_argument("--workers", default="1,2,4", help="worker counts to compare")
    parser.add_argument("--per-worker", type=int, default=4, help="units in flight per worker (--concurrency)")
    parser.add_argument("--poll", default="100ms", help="the workers' queue polling interval (--poll)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        print(f"{args.units} units of sleep {args.sleep}, {args.per_worker} in flight per worker, queues polled every "
              f"{args.poll}; median of {args.repeat}")  # fmt: skip
        print("store              width  seconds  units/s    ideal  overhead ms/unit")
        for workers in (int(w) for w in args.workers.split(",")):
            width = min(64, workers * args.per_worker)
            print(row("SQLite", width, local(width, args, args.repeat), args), flush=True)
            label = f"pool, {workers} worker{'s' if workers > 1 else ''}"
            print(row(label, width, pooled(server, workers, args, args.repeat), args), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
