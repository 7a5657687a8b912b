#!/usr/bin/env python3
"""Benchmark unit activity sampling (akm_run.activity): the cost of one board sample per attempt in
flight, with N attempts each appending a progress frame between samples, for several N. A cost per
attempt that stays flat as N grows is the O(1) the drive's once-a-second sample needs. The journal
is a list (what the store writes is measured by bench/run_units.py). Prints figures; asserts nothing.

    python bench/activity_cost.py --units 10,100,1000 --samples 50
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "runtime"))

from akm_run.activity import Beat, Board, Channel, Watch  # noqa: E402


def sample_cost(units: int, samples: int) -> float:
    """Median µs per attempt of one board sample, each attempt having written one frame since the last."""
    with tempfile.TemporaryDirectory() as directory:
        beats: list[Beat] = []
        board = Board(beats.extend, period_s=0)
        outs = []
        for i in range(units):
            path = Path(directory) / f"{i}.progress"
            context = {"runId": "r", "unitId": f"u{i}", "stepId": "s", "attempt": 1}
            board.add(Watch(context, Channel(path), 300_000))
            outs.append(path.open("ab", buffering=0))
        times = []
        for n in range(samples):
            for out in outs:
                out.write(b'{"note": "Indexing", "progress": %d, "total": 1000}\n' % n)
            start = time.perf_counter()
            board.tick(force=True)
            times.append((time.perf_counter() - start) / units * 1e6)
            beats.clear()
        for out in outs:
            out.close()
        for watch in board.watches.values():
            watch.channel.close()
        return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", default="10,100,1000")
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    print("| attempts in flight | µs per attempt per sample (median) |")
    print("| --- | --- |")
    for units in (int(n) for n in args.units.split(",")):
        print(f"| {units} | {sample_cost(units, args.samples):.1f} |")


if __name__ == "__main__":
    main()
