#!/usr/bin/env python3
"""Benchmark `akmc check` at repository scale: generate N workflows of about 100 lines, a fifth of
which compose children two or three levels deep, then measure (interpreter start-up included):

- cold: the whole corpus with an empty result cache (files/s);
- warm: the whole corpus again, every result cached;
- one file, as the pre-commit hook runs it: one edited workflow in a warm workspace, and the same
  file with nothing changed;
- peak memory of the cold and warm runs: the largest process's maximum resident set size, and the
  whole process tree's (the command and its worker processes), sampled from /proc every 10 ms as
  the sum of the live processes' resident sets (an upper bound: pages a forked worker shares with
  its parent count twice) and of their proportional set sizes (shared pages split between the
  processes that map them: what the tree takes from the machine).

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
from typing import NamedTuple

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


class Figures(NamedTuple):
    seconds: float
    largest_kib: int  # the largest single process's maximum resident set (GNU time's %M)
    tree_rss_kib: int  # the peak of the process tree's summed resident sets
    tree_pss_kib: int  # the peak of the process tree's summed proportional set sizes


def _tree(root: int) -> list[int]:
    """The live descendants of `root`, itself included."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            parents[int(entry.name)] = int(status[1])
    tree, grown = {root}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    return sorted(tree)


def _memory(pid: int) -> tuple[int, int]:
    """(Rss, Pss) of one process in KiB, from smaps_rollup; zeros once it is gone."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return rss, pss


def run(argv: list[str], cwd: Path) -> Figures:
    """Wall seconds and peak memory of one command and its process tree."""
    start = time.perf_counter()
    timing = subprocess.Popen(
        ["/usr/bin/time", "-f", "%M", *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    tree_rss = tree_pss = 0
    while timing.poll() is None:
        sums = [_memory(pid) for pid in _tree(timing.pid) if pid != timing.pid]  # not /usr/bin/time itself
        tree_rss = max(tree_rss, sum(r for r, _ in sums))
        tree_pss = max(tree_pss, sum(p for _, p in sums))
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    assert timing.stderr is not None
    largest = int(timing.stderr.read().strip().splitlines()[-1])
    return Figures(elapsed, largest, max(tree_rss, largest), tree_pss)


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
        nothing = [run([sys.executable, "-c", "pass"], root).seconds for _ in range(5)]

    def seconds(values: list[Figures]) -> tuple[float, float]:
        times = [v.seconds for v in values]
        return min(times), statistics.median(times)

    def peaks(values: list[Figures]) -> str:
        return (
            f"peak: largest process {max(v.largest_kib for v in values) / 1024:.0f} MiB, whole tree "
            f"{max(v.tree_pss_kib for v in values) / 1024:.0f} MiB proportional "
            f"({max(v.tree_rss_kib for v in values) / 1024:.0f} MiB resident)"
        )

    print(f"corpus: {args.files} files, {lines:.0f} lines each, {composing} compose a child")
    best, median = seconds(cold)
    print(
        f"cold, whole corpus: best {best:.2f} s ({args.files / best:.0f} files/s), median {median:.2f} s; {peaks(cold)}"
    )
    best, median = seconds(warm)
    print(f"warm, whole corpus: best {best:.2f} s, median {median:.2f} s; {peaks(warm)}")
    best, median = seconds(edited)
    print(f"one edited file (hook): best {best * 1000:.0f} ms, median {median * 1000:.0f} ms")
    best, median = seconds(unchanged)
    print(f"one unchanged file: best {best * 1000:.0f} ms, median {median * 1000:.0f} ms")
    print(f"python -c pass: best {min(nothing) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
