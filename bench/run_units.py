#!/usr/bin/env python3
"""Benchmark `akm-run`: per-unit cost of a map of N trivial units (`shell "true"`), of a spine of N
steps and of a map of N/2 child runs of one such unit each, against a plain loop of
`subprocess.run(["true"])` and against `xargs -P`. Journaling is the product's own (SQLite, WAL).
Prints wall time per unit, or with --cpu the CPU time of every process; asserts nothing.

The akm-run figures are marginal: (time for 2N units - time for N units) / N, so interpreter
start-up and plan verification, paid once per run, are not spread over the units.

    python bench/run_units.py --units 200 --repeat 3
    python bench/run_units.py --scaling 200,2000 --repeat 5   # dispatch cost per unit vs map size

With --scaling, each map size N is run beside a map of 2N items, and the per-unit figure at N is
(median time for 2N - median time for N) / N: a dispatch loop whose cost per unit grows with N
shows up as a larger figure at the larger N.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))  # this tree's akmc, installed or not

from akm_run.plan import render_file  # noqa: E402
from akmc.compiler import Session  # noqa: E402

CPU = False  # set by --cpu


def _plan(root: Path, name: str, source: str) -> Path:
    (root / f"{name}.akm").write_text(source)
    plan = Session(root).check(root / f"{name}.akm").plan
    assert plan is not None, name
    path = root / f"{name}.plan.json"
    path.write_text(render_file(plan))
    return path


def _best_and_median(run: Callable[[], float], repeat: int) -> tuple[float, float]:
    times = [run() for _ in range(repeat)]
    return min(times), statistics.median(times)


def _cpu() -> float:
    """CPU time (user + system) of this process and of every child it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _clock() -> float:
    """What a figure counts: CPU time with --cpu (load barely moves it), else wall time."""
    return _cpu() if CPU else time.perf_counter()


def _timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    start = _clock()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return _clock() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=4, help="map concurrency and xargs -P")
    parser.add_argument("--scaling", metavar="N,N", help="per-unit cost of maps of these sizes (e.g. 200,2000)")
    parser.add_argument("--cpu", action="store_true", help="CPU time of every process instead of wall time")
    args = parser.parse_args()
    global CPU  # one flag, read by every timing helper
    CPU = args.cpu
    n = args.units
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "akm.toml").write_text("")

        def map_plan(count: int, width: int) -> Path:
            # the items come from a step, as they usually do, so that no unit carries the whole list
            make = f"python3 -c 'import json; print(json.dumps(list(range({count}))))'"
            return _plan(
                root,
                f"map-{count}-{width}",
                f'workflow "map" {{\n  limits {{ concurrency = {width} }}\n'
                f'  step items {{\n    shell "{make}"\n  }}\n'
                f"  step fan {{\n    map steps.items.output {{\n"
                f'      concurrency = {width}\n      shell "true"\n    }}\n  }}\n}}\n',
            )

        def children_plan(count: int) -> Path:
            # each item a child run of one `shell "true"` step: its cost beyond the map of shell units
            # above is what a child run adds (its publication, drive and settlement)
            (root / "workflows").mkdir(exist_ok=True)
            (root / "workflows" / "leaf.akm").write_text(
                'workflow "leaf" {\n  params { n: int }\n  step one {\n    shell "true"\n  }\n}\n'
            )
            make = f"python3 -c 'import json; print(json.dumps(list(range({count}))))'"
            return _plan(
                root,
                f"children-{count}",
                f'workflow "children" {{\n  step items {{\n    shell "{make}"\n  }}\n'
                f"  step fan {{\n    map steps.items.output {{\n      concurrency = 1\n"
                f'      uses "workflows/leaf" {{ n = item }}\n    }}\n  }}\n}}\n',
            )

        def spine_plan(count: int) -> Path:
            steps = "".join(f'  step s{i} {{\n    shell "true"\n  }}\n' for i in range(count))
            return _plan(root, f"spine-{count}", f'workflow "spine" {{\n{steps}}}\n')

        counter = [0]

        def akm_run(plan: Path) -> Callable[[], float]:
            def once() -> float:
                counter[0] += 1
                env = {**os.environ, "AKM_STATE_DIR": str(root / f"state-{counter[0]}")}
                return _timed([sys.executable, "-m", "akm_run", "run", str(plan)], root, env)

            return once

        def marginal(small: Path, large: Path, count: int) -> tuple[float, float]:
            a = [akm_run(small)() for _ in range(args.repeat)]
            b = [akm_run(large)() for _ in range(args.repeat)]
            return (min(b) - min(a)) / count, (statistics.median(b) - statistics.median(a)) / count

        def plain_loop(argv: list[str]) -> Callable[[], float]:
            def once() -> float:
                start = _clock()
                for _ in range(n):
                    subprocess.run(argv, check=True)
                return _clock() - start

            return once

        def xargs(p: int) -> Callable[[], float]:
            def once() -> float:
                start = _clock()
                subprocess.run(
                    ["xargs", "-P", str(p), "-n", "1", "sh", "-c", "true"],
                    input=" ".join(["x"] * n).encode(),
                    check=True,
                )
                return _clock() - start

            return once

        def per_unit(run: Callable[[], float]) -> tuple[float, float]:
            best, median = _best_and_median(run, args.repeat)
            return best / n, median / n

        if args.scaling:
            sizes = [int(size) for size in args.scaling.split(",")]
            runs = {}
            for size in sorted({*sizes, *(2 * size for size in sizes)}):
                runs[size] = [akm_run(map_plan(size, args.parallel))() for _ in range(args.repeat)]
            print(
                f"map of N items, concurrency {args.parallel}, {args.repeat} repeats; per unit at N = "
                f"(median(2N) - median(N)) / N"
            )
            print(f"{'N':>6} {'median N s':>10} {'median 2N s':>11} {'ms/unit':>8}")
            for size in sizes:
                small, large = statistics.median(runs[size]), statistics.median(runs[2 * size])
                print(f"{size:>6} {small:10.2f} {large:11.2f} {(large - small) / size * 1000:8.2f}")
            return
        spine = min(n, 128)
        figures = {
            "plain loop of subprocess.run(['true'])": per_unit(plain_loop(["true"])),
            "plain loop of subprocess.run(['sh', '-c', 'true'])": per_unit(plain_loop(["/bin/sh", "-c", "true"])),
            "xargs -P 1 sh -c true": per_unit(xargs(1)),
            f"xargs -P {args.parallel} sh -c true": per_unit(xargs(args.parallel)),
            "akm-run map, concurrency 1": marginal(map_plan(n, 1), map_plan(2 * n, 1), n),
            f"akm-run map, concurrency {args.parallel}": marginal(
                map_plan(n, args.parallel), map_plan(2 * n, args.parallel), n
            ),
            "akm-run spine": marginal(spine_plan(spine), spine_plan(2 * spine), spine),
            "akm-run map of child runs (one shell unit each)": marginal(
                children_plan(n // 2), children_plan(n), n // 2
            ),
        }
        print(f"{'what':45} {'best ms/unit':>13} {'median ms/unit':>15}")
        for what, (best, median) in figures.items():
            print(f"{what:45} {best * 1000:13.2f} {median * 1000:15.2f}")


if __name__ == "__main__":
    main()
