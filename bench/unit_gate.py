#!/usr/bin/env python3
"""What the gate in front of each unit costs (docs/runtime.md, "Recovery"): N shell units of `true`
run through `akm_run.units.execute`, with the gate and with it bypassed (the command line as it was
before the gate), alternately --repeat times. Prints wall time and CPU per unit, of the unit's own
processes and of the runtime's; asserts nothing.

    python bench/unit_gate.py --units 300 --repeat 2
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import threading
import time
from pathlib import Path

from akm_run import units


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def measure(count: int, label: str) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    context = {"dispatchId": "d", "attempt": 0, "runId": "r", "stepId": "a", "unitId": "a"}
    children, runtime, start = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF), time.perf_counter()
    for attempt in range(count):
        unit = units.Unit({"kind": "shell", "command": "true"}, {**context, "attempt": attempt}, workdir=scratch)
        units.execute(unit, threading.Event(), lambda pid: None, {}, scratch)
    wall = time.perf_counter() - start
    children, runtime = _cpu(resource.RUSAGE_CHILDREN) - children, _cpu(resource.RUSAGE_SELF) - runtime
    per = 1000 / count
    print(
        f"{label}: wall {wall * per:.2f} ms/unit, unit processes CPU {children * per:.2f} ms, "
        f"runtime CPU {runtime * per:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--units", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    gated = units._gated
    for _ in range(args.repeat):
        units._gated = gated
        measure(args.units, "gated   ")
        units._gated = lambda argv, stdin_path: argv
        measure(args.units, "bypassed")


if __name__ == "__main__":
    main()
