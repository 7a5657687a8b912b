#!/usr/bin/env python3
"""Benchmark `akmc check` at repository scale: generate N workflows of about 100 lines, a fifth of
which compose children two or three levels deep, then measure (interpreter start-up included):

- cold: the whole corpus with an empty result cache (files/s);
- warm: the whole corpus again, every result cached;
- one file, as the pre-commit hook runs it: one edited workflow in a warm workspace, and the same
  file with nothing changed;
- peak memory (maximum resident set size) of the cold and warm runs.

Prints figures; asserts nothing.

    python bench/check_scale.py --files 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_corpus import workflow  # the same 100-line workflow generator


def generate(root: Path, count: int) -> list[Path]:
    """`count` workflows. Every fifth composes the next, which composes the one after (two levels
    below it); every tenth goes one level deeper. Children bind the required `version` param."""
    (root / "akm.toml").write_text("")
    (root / "scripts").mkdir()
    (root / "scripts" / "run.sh").write_text('#!/bin/sh\necho \'{"ok": true, "files": [], "count": 0}\'\n')

    def ref(index: int) -> str:
        return f"workflows/group{index % 20}/wf{index}"

    composes: dict[int, int] = {}
    for top in range(0, count - 3, 5):
        levels = 3 if top % 10 == 0 else 2
        for level in range(levels):
            composes[top + level] = top + level + 1
    paths = []
    for index in range(count):
        text = workflow(index)
        if index in composes:
            text = text[: text.rindex("}")] + (
                f'  step compose {{\n    uses "{ref(composes[index])}" {{\n      version = params.version\n    }}\n  }}\n}}\n'
            )
        path = root / f"{ref(index)}.akm"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


# An installed akmc has its bytecode compiled at install time; let the measured processes cache theirs.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(argv: list[str], cwd: Path) -> tuple[float, int]:
    """Wall seconds and peak resident memory (KiB) of one command."""
    start = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], cwd=cwd, capture_output=True, text=True, env=ENV)
    elapsed = time.perf_counter() - start
    return elapsed, int(result.stderr.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=None, help="passed to akmc check --jobs")
    args = parser.parse_args()
    akmc = [sys.executable, "-m", "akmc", "check", "--quiet"] + (["--jobs", str(args.jobs)] if args.jobs else [])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = generate(root, args.files)
        lines = sum(p.read_text().count("\n") for p in paths) / len(paths)
        composing = sum("uses " in p.read_text() for p in paths)
        cold, warm, edited, unchanged = [], [], [], []
        for _ in range(args.repeat):
            shutil.rmtree(root / ".akmc-cache", ignore_errors=True)
            cold.append(run([*akmc, "workflows"], root))
            warm.append(run([*akmc, "workflows"], root))
        target = paths[len(paths) // 2 + 1]
        relative = str(target.relative_to(root))
        original = target.read_text()
        for i in range(args.repeat * 3):
            target.write_text(original.replace('"Generated', f'"Generated edit {i}'))
            edited.append(run([*akmc, relative], root))
            unchanged.append(run([*akmc, relative], root))
        target.write_text(original)
        nothing = [run([sys.executable, "-c", "pass"], root)[0] for _ in range(5)]

    def seconds(values: list[tuple[float, int]]) -> tuple[float, float]:
        times = [v[0] for v in values]
        return min(times), statistics.median(times)

    print(f"corpus: {args.files} files, {lines:.0f} lines each, {composing} compose a child")
    best, median = seconds(cold)
    print(
        f"cold, whole corpus: best {best:.2f} s ({args.files / best:.0f} files/s), median {median:.2f} s, "
        f"peak {max(v[1] for v in cold) / 1024:.0f} MiB"
    )
    best, median = seconds(warm)
    print(
        f"warm, whole corpus: best {best:.2f} s, median {median:.2f} s, peak {max(v[1] for v in warm) / 1024:.0f} MiB"
    )
    best, median = seconds(edited)
    print(f"one edited file (hook): best {best * 1000:.0f} ms, median {median * 1000:.0f} ms")
    best, median = seconds(unchanged)
    print(f"one unchanged file: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms")
    print(f"python -c pass: best {min(nothing) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
