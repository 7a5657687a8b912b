#!/usr/bin/env python3
"""Benchmark `akmc check` on pathological sources whose checking time must stay linear or bounded:

- one reference with N path segments (`steps.a.output.f.f.f…`);
- N suppression comment lines (`# akmc: ignore[W700]`), each of which silences nothing (so each
  also produces a W704 that the text renderer prints);
- a catastrophic pattern refinement (`^(a+)+$`) with a default value built to make a backtracking
  matcher explode;
- a `route` over a param of N string literals, with a case for each;
- an output declared as a union of N object types, read from a step declaring that same union.

Each figure is `akmc check -q --no-cache FILE` as a subprocess, interpreter start-up included: the
best and the median of `--repeat` runs. Prints figures; asserts nothing.

    python bench/check_pathological.py --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def reference(segments: int) -> str:
    path = ".f" * segments
    return f'workflow "w" {{\n  step a {{ shell "x" }}\n  step b {{ shell "y" inputs = [steps.a.output{path}] }}\n}}\n'


def suppressions(lines: int) -> str:
    return 'workflow "w" {\n' + "  # akmc: ignore[W700]\n" * lines + '  step a { shell "x" }\n}\n'


def pattern(length: int) -> str:
    value = "a" * length + "b"
    return (
        f'workflow "w" {{\n  params {{ p: string(pattern: "^(a+)+$") = "{value}" }}\n'
        '  step a { shell "x" inputs = [params.p] }\n}\n'
    )


def route(cases: int) -> str:
    union = " | ".join(f'"c{i}"' for i in range(cases))
    arms = "".join(f'    "c{i}" -> t{i % 4}\n' for i in range(cases))
    targets = "".join(f'  step t{i} {{ shell "x" }}\n' for i in range(4))
    return f'workflow "w" {{\n  params {{ k: {union} }}\n  step r {{ route params.k {{\n{arms}  }} }}\n{targets}}}\n'


def objects(members: int) -> str:
    union = " | ".join(f"{{ f{i}: int, g: string }}" for i in range(members))
    return (
        f'workflow "w" {{\n  outputs {{ o: {union} = steps.a.output }}\n  step a {{ shell "x" output: {union} }}\n}}\n'
    )


def measure(root: Path, name: str, source: str, repeat: int) -> tuple[float, float]:
    (root / name).write_text(source)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "akmc", "check", "-q", "--no-cache", name],
            cwd=root,
            capture_output=True,
            check=False,
        )
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", help="run only the cases whose label contains this text")
    args = parser.parse_args()
    cases = [
        ("reference, 1,000 segments", reference(1000)),
        ("reference, 8,000 segments", reference(8000)),
        ("reference, 100,000 segments", reference(100_000)),
        ("suppressions, 1,000 lines", suppressions(1000)),
        ("suppressions, 30,000 lines", suppressions(30_000)),
        ('pattern "^(a+)+$", default of 40 a\'s and a b', pattern(40)),
        ("route over a union of 1,000 literals", route(1000)),
        ("route over a union of 4,000 literals", route(4000)),
        ("union of 1,000 object types", objects(1000)),
        ("union of 4,000 object types", objects(4000)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "akm.toml").write_text("")
        print("| case | best | median |\n| --- | --- | --- |")
        for i, (label, source) in enumerate(cases):
            if args.only and args.only not in label:
                continue
            best, median = measure(root, f"case{i}.akm", source, args.repeat)
            print(f"| {label} | {best:.2f} s | {median:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
