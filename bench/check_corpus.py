#!/usr/bin/env python3
"""Benchmark `akmc check`: generate N workflows, time a cold check of all of them
and of one file (interpreter start-up included). Prints figures; asserts nothing.

    python bench/check_corpus.py --files 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP = """
  step {name} {{
    shell "scripts/run.sh --stage {i}"
    inputs = [params.version{prev}]
    output: {{ ok: bool, files: list[string], count: int(min: 0) }}
    timeout = 5m
    retry = {{ max = 2, on = [exit, timeout], backoff = 10s }}
    env {{
      STAGE = "{i}"
      TOKEN = secret("TOKEN")
    }}
  }}
"""


def workflow(index: int, steps: int = 8) -> str:
    parts = [
        f'# generated workflow {index}\nworkflow "Generated {index}" {{\n',
        '  description = "A generated workflow for benchmarking."\n',
        '  params {\n    version: string(pattern: "^[0-9]+$") "Version"\n    dry_run: bool = false\n  }\n',
        "  limits {\n    concurrency = 4\n    timeout = 1h\n  }\n",
    ]
    for i in range(steps):
        prev = f", steps.s{i - 1}.output.files" if i else ""
        parts.append(STEP.format(name=f"s{i}", i=i, prev=prev))
    parts.append("}\n")
    return "".join(parts)


def generate(root: Path, count: int) -> list[Path]:
    (root / "akm.toml").write_text("")
    paths = []
    for index in range(count):
        path = root / "workflows" / f"group{index % 20}" / f"wf{index}.akm"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(workflow(index))
        paths.append(path)
    return paths


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    akmc = [sys.executable, "-m", "akmc", "check", "--quiet"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = generate(root, args.files)
        lines = sum(p.read_text().count("\n") for p in paths) / len(paths)
        whole = [timed([*akmc, "workflows"], root) for _ in range(args.repeat)]
        one = [timed([*akmc, str(paths[0].relative_to(root))], root) for _ in range(args.repeat * 4)]
        nothing = [timed([sys.executable, "-c", "pass"], root) for _ in range(args.repeat * 4)]
    best = min(whole)
    print(f"corpus: {args.files} files, {lines:.0f} lines each")
    print(f"check all: best {best:.2f} s, median {statistics.median(whole):.2f} s -> {args.files / best:.0f} files/s")
    print(f"check one file: best {min(one) * 1000:.0f} ms, median {statistics.median(one) * 1000:.0f} ms")
    print(f"python -c pass: best {min(nothing) * 1000:.0f} ms, median {statistics.median(nothing) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
