#!/usr/bin/env python3
"""What following a run on the worker pool costs the database at each poll: `run --database` reads
its drive's status (DBOS) and the run's new events (`progress_events`) every 0.1 s. Runs a map of N
units on one worker on a private PostgreSQL server, as a map of shell units and as a map of child
runs (a tree of N + 1 runs), then times each read on the finished journal (after --history events of
other runs written before, as a database that served for a while holds): a poll at the tail (what
every poll of a steady run costs), a catch-up from the start (once per follower), and shows the
plan PostgreSQL chose for the tail poll. Prints figures; asserts nothing.

    python bench/follow_cost.py --units 200 --repeat 200 --history 200000
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dbos import WorkflowHandle

from akm_run.drives import client
from akm_run.pgstore import PROGRESS_EVENTS, PostgresStore

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

from helpers import PostgresServer, Runtime, source  # noqa: E402

SHELL = """
    workflow "bench" {
      params { items: list[int] }
      step fan {
        map params.items {
          shell "true"
        }
      }
    }
"""
CHILD = """
    workflow "bench" {
      params { items: list[int] }
      step fan {
        map params.items {
          uses "workflows/leaf" {}
        }
      }
    }
"""
LEAF = """
    workflow "leaf" {
      step one {
        shell "true"
      }
    }
"""


def median_ms(call: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def measure(server: PostgresServer, body: str, args: argparse.Namespace) -> None:
    directory = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    url = server.database()
    runtime = Runtime(directory, url)
    runtime.write({"workflows/leaf.akm": source(LEAF)})
    plan_file = runtime.compile("bench.akm", source(body))
    try:
        runtime.start_worker(name="w1", options=("--concurrency", "8"))
        if args.history:  # other runs' events before this one's, as a database that served for a while holds
            history = PostgresStore(url)
            history._pg.execute(
                "INSERT INTO events (run_id, kind, data_json, at) SELECT 'r' || (n %% 1000), "
                "'unit.completed', NULL, 0 FROM generate_series(1, %s) n",
                (args.history,),
            )
            history._pg.execute("ANALYZE events")
            history.close()
        items = json.dumps(list(range(args.units)))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "akm_run",
                "run",
                str(plan_file),
                "--database",
                url,
                "--param",
                f"items={items}",
                "--format",
                "json",
            ],
            cwd=directory,
            env=runtime.env(),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the run exited {done.returncode}: {done.stderr}")
        run_id = json.loads(done.stdout)["runId"]
        store = PostgresStore(url)
        dbos = client(url)
        try:
            events = store.progress_events(run_id, 0)
            tail = events[-1].seq
            runs = len({e.run_id for e in events})
            status: WorkflowHandle[Any] = dbos.retrieve_workflow(run_id)
            print(f"{args.units} units, {runs} run(s), {len(events)} events")
            print(
                f"  poll at the tail, progress_events: {median_ms(lambda: store.progress_events(run_id, tail), args.repeat):.2f} ms"
            )
            print(f"  poll, the drive's status (DBOS):   {median_ms(status.get_status, args.repeat):.2f} ms")
            print(
                f"  catch-up from the start:           {median_ms(lambda: store.progress_events(run_id, 0), 20):.2f} ms"
            )
            sql = "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF) " + PROGRESS_EVENTS
            for what, after in (("the poll at the tail", tail), ("the catch-up", 0)):
                plan = store._pg.execute(sql, (run_id, after)).fetchall()
                print(f"  plan of {what}:\n" + "\n".join(f"    {line}" for (line,) in plan))
        finally:
            dbos.destroy()
            store.close()
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--history", type=int, default=0, help="events of other runs written after the run's own")
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        print("a map of shell units:")
        measure(server, SHELL, args)
        print("a map of child runs:")
        measure(server, CHILD, args)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
