#!/usr/bin/env python3
"""Benchmark the worker pool: units per second for a map of N `sleep` units run by `akm-run run
--database` over 1, 2 and 4 `akm-run worker` processes on a private PostgreSQL server, and the same
map run by the SQLite runtime; the per-unit overhead of each against the time the units sleep
(docs/scale-out.md, docs/performance.md). Prints figures; asserts nothing.

    python bench/scaleout.py --units 200 --sleep 0.05 --workers 1,2,4 --per-worker 4 --poll 100ms
    python bench/scaleout.py --trace 40 --per-worker 4 --poll 100ms     # where a pooled unit's time goes
    python bench/scaleout.py --idle 60 --poll 100ms                     # what one idle worker costs

The map's concurrency is the pool's whole width (workers x per-worker, at most 64); the SQLite run
gets the same width as its --max-concurrency. Overhead per unit = elapsed x width / units - sleep:
what dispatching, journaling and waiting add to each unit's own time, in a unit's slot.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

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


def pooled(
    server: PostgresServer, workers: int, args: argparse.Namespace, repeat: int, database: str | None = None
) -> list[float]:
    directory = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    width = min(64, workers * args.per_worker)
    plan_file = plan(directory, width, args.sleep)
    pool = Runtime(directory, database or server.database())
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


# One line per attempt of the measured map: the journal's times (the drive journals the attempt as it
# dispatches it and its end as it records it) and DBOS's (the attempt's workflow enqueued, dequeued
# by a worker, ended; its one step started and ended), all in seconds since the epoch.
TRACE = """
SELECT a.started_at, a.finished_at,
       w.created_at / 1000.0::float8, w.started_at_epoch_ms / 1000.0::float8, w.updated_at / 1000.0::float8,
       o.started_at_epoch_ms / 1000.0::float8, o.completed_at_epoch_ms / 1000.0::float8
FROM akm_run.attempts a
JOIN dbos.workflow_status w ON w.workflow_uuid = a.dispatch_id || '/' || a.attempt
JOIN dbos.operation_outputs o ON o.workflow_uuid = w.workflow_uuid
WHERE a.run_id = (SELECT run_id FROM akm_run.attempts GROUP BY run_id ORDER BY count(*) DESC LIMIT 1)
  AND a.status = 'completed'
"""
STAGES = (
    ("attempt journaled -> workflow enqueued (drive)", 0, 2),
    ("enqueued -> dequeued by the worker (queue poll, slot)", 2, 3),
    ("dequeued -> step started (workflow start bookkeeping)", 3, 5),
    ("step: claim, process, unit's sleep, cancel watch", 5, 6),
    ("step ended -> workflow ended (checkpoint, status)", 6, 4),
    ("workflow ended -> end journaled (drive's result poll)", 4, 1),
    ("attempt journaled -> end journaled (whole)", 0, 1),
)


def trace(server: PostgresServer, args: argparse.Namespace) -> None:
    """Run one map of --trace units on one worker, then break each attempt's time down from the
    timestamps the journal and DBOS's tables hold (nothing is added to the runtime for it)."""
    database = server.database()
    args.units = args.trace
    elapsed = pooled(server, 1, args, 1, database)[0]
    with psycopg.connect(database) as db:
        rows = db.execute(TRACE).fetchall()
    print(f"{len(rows)} attempts, {elapsed:.2f} s; per attempt, ms:     mean  median     p90")
    for label, start, end in STAGES:
        spans = sorted((r[end] - r[start]) * 1000 for r in rows)
        print(
            f"  {label:<55} {statistics.mean(spans):>7.1f} {statistics.median(spans):>7.1f} "
            f"{spans[len(spans) * 9 // 10]:>7.1f}"
        )
    # The map's slots: from its first attempt journaled to its last end journaled, each of the
    # `width` slots holds an attempt or waits for the drive to journal the next one.
    width = min(64, args.per_worker)
    span = max(r[1] for r in rows) - min(r[0] for r in rows)
    held = statistics.mean(r[1] - r[0] for r in rows)
    print(f"  map: {span:.2f} s from first attempt journaled to last end journaled, {width} slots;")
    print(
        f"  a slot waits {(span * width / len(rows) - held) * 1000:.1f} ms per attempt between an end journaled "
        f"and the next attempt journaled (the engine's loop)"
    )


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time the processes have used, children waited for included."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def group(pgid: int) -> list[int]:
    """The processes of a process group (a worker and its guard)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def idle(server: PostgresServer, args: argparse.Namespace) -> None:
    """One worker serving an empty pool for --idle seconds: its CPU (its processes, and the server
    processes of its connections) and the transactions it commits, from pg_stat_database."""
    directory = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    pool = Runtime(directory, server.database())
    assert pool.database is not None
    options = ("--concurrency", str(args.per_worker), "--poll", args.poll, "--takeover-after", "30s")
    worker = pool.start_worker(name="idle", options=options)
    stats = "SELECT xact_commit + xact_rollback, tup_returned, tup_fetched FROM pg_stat_database WHERE datname = %s"
    name = pool.database.split("?")[0].rsplit("/", 1)[1]
    try:
        time.sleep(10)  # past start-up: queues declared, recovery done, connections open
        with psycopg.connect(server.url(), autocommit=True) as db:
            backends = [r[0] for r in db.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))]
            processes = group(worker.process.pid)
            db.execute("SELECT pg_stat_clear_snapshot()")
            before = db.execute(stats, (name,)).fetchone()
            cpu_before = (cpu_seconds(processes), cpu_seconds(backends))
            start = time.monotonic()
            time.sleep(args.idle)
            db.execute("SELECT pg_stat_clear_snapshot()")
            after = db.execute(stats, (name,)).fetchone()
            cpu_after = (cpu_seconds(processes), cpu_seconds(backends))
            seconds = time.monotonic() - start
        assert before is not None and after is not None
        print(
            f"one idle worker, --poll {args.poll}, over {seconds:.0f} s: {len(processes)} processes, "
            f"{len(backends)} server connections"
        )
        print(f"  worker CPU    {(cpu_after[0] - cpu_before[0]) / seconds * 100:6.2f} % of a core")
        print(f"  server CPU    {(cpu_after[1] - cpu_before[1]) / seconds * 100:6.2f} % of a core (its connections)")
        print(f"  transactions  {(after[0] - before[0]) / seconds:6.1f} /s")
        print(
            f"  rows read     {(after[1] - before[1]) / seconds:6.0f} /s returned, "
            f"{(after[2] - before[2]) / seconds:.0f} /s fetched"
        )
        statements(server, args.idle / 3)
    finally:
        if problems := pool.close():
            print("\n".join(problems), file=sys.stderr)


def counted(server: PostgresServer, act: Callable[[], object], width: int) -> collections.Counter[str]:
    """The statements the server logs while `act` runs (log_statement = all), by their text cut to
    `width` with literals as `?`."""
    with psycopg.connect(server.url(), autocommit=True) as db:
        db.execute("ALTER SYSTEM SET log_statement = 'all'")
        db.execute("SELECT pg_reload_conf()")
        time.sleep(1)
        start = server.log.stat().st_size
        act()
        end = server.log.stat().st_size
        db.execute("ALTER SYSTEM RESET log_statement")
        db.execute("SELECT pg_reload_conf()")
    with server.log.open("rb") as log:
        log.seek(start)
        text = log.read(end - start).decode(errors="replace")
    # "statement: SQL" (simple protocol) or "execute NAME: SQL" (a prepared statement); the log's
    # continuation lines (a statement over several lines) are joined to theirs.
    lines = re.split(r"\n(?=\d{4}-\d\d-\d\d )", text)
    return collections.Counter(
        re.sub(r"'[^']*'|\b\d+\b", "?", " ".join(match.group(1).split()))[:width]
        for line in lines
        if (match := re.search(r"LOG:  (?:statement|execute [^:]*): (.*)", line, re.S))
    )


def statements(server: PostgresServer, seconds: float) -> None:
    """The statements the server runs for `seconds` (the idle worker's, alone on this private
    server), from its log with log_statement on, most frequent first, per second."""
    found = counted(server, lambda: time.sleep(seconds), width=100)
    print(f"  statements    {sum(found.values()) / seconds:6.1f} /s (log_statement, {seconds:.0f} s), most frequent:")
    for statement, count in found.most_common(16):
        print(f"    {count / seconds:6.1f} /s  {statement}")


def row(label: str, width: int, times: list[float], args: argparse.Namespace) -> str:
    median = statistics.median(times)
    overhead_ms = (median * width / args.units - args.sleep) * 1000
    ideal = f"{width / args.sleep:>7.1f}" if args.sleep > 0 else f"{'-':>7}"  # units that do not sleep: no ideal
    return f"{label:<18} {width:>5}  {median:>8.2f}  {args.units / median:>7.1f}  {ideal}  {overhead_ms:>8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.05, help="seconds each unit sleeps")
    parser.add_argument("--workers", default="1,2,4", help="worker counts to compare")
    parser.add_argument("--per-worker", type=int, default=4, help="units in flight per worker (--concurrency)")
    parser.add_argument("--poll", default="100ms", help="the workers' queue polling interval (--poll)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--trace", type=int, metavar="UNITS", help="instead: break a map of UNITS on one worker down")
    parser.add_argument("--idle", type=float, metavar="SECONDS", help="instead: measure one idle worker this long")
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        if args.trace:
            return trace(server, args)
        if args.idle:
            return idle(server, args)
        print(
            f"{args.units} units of sleep {args.sleep}, {args.per_worker} in flight per worker, queues polled every "
            f"{args.poll}; median of {args.repeat}"
        )
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
