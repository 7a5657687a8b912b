#!/usr/bin/env python3
"""Benchmark the language server's re-check of an edited buffer, in process, for this checkout and
another commit in the same run.

Each tree checks the same generated workspace (bench/check_scale.py's ~108-line workflows, a fifth
of them composing children two or three levels deep) in a child process of its own: it opens the
workflow `wf2`, which `wf1` composes and `wf0` composes in turn, and re-checks it after each of N
edits exactly as the server does after a `didChange` (`akmc.lsp.analysis.check` with the buffer
laid over the disk: the file, its children, the workflows composing it, and the analysis hover,
definition and completion read). The debounce and the protocol are left out (bench/lsp_latency.py
measures those). The trees alternate, so that a busy machine slows both alike. Prints the median
wall and CPU time of one re-check; asserts nothing. With `--callgrind N`, each tree's child also
runs under valgrind's callgrind for N and for 2N edits: (count for 2N − count for N) / N is the
instructions of one re-check, a figure the machine's load does not move.

    python bench/lsp_recheck.py --against main --files 300 --edits 40 --repeat 5 --callgrind 10
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_cpu import environment, export  # noqa: E402 - the same tree export and environment
from check_scale import generate  # noqa: E402 - the same composing workspace

EDITED = "workflows/group2/wf2.akm"  # composed by wf1, which wf0 composes


def child(root: Path, edits: int) -> None:
    """Runs inside the tree under test (its akmc comes first on PYTHONPATH): print one JSON line."""
    from akmc.lsp.analysis import check  # the tree under test's, found on PYTHONPATH only now

    path = (root / EDITED).resolve()
    original = path.read_text(encoding="utf-8")
    indexes: dict[Path, Any] = {}  # the server's `uses` index per root, kept between checks
    check(path, {path: original}, indexes)  # warm-up: the parser, every stage
    walls, cpus = [], []
    for i in range(edits):
        buffers = {path: original.replace('"Generated', f'"Generated edit {i}')}
        wall, cpu = time.perf_counter(), time.process_time()
        check(path, buffers, indexes)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(json.dumps({"wall_ms": statistics.median(walls) * 1000, "cpu_ms": statistics.median(cpus) * 1000}))


def measure(tree: Path, root: Path, edits: int) -> dict[str, float]:
    argv = [sys.executable, str(HERE / "lsp_recheck.py"), "--child", str(root), "--edits", str(edits)]
    done = subprocess.run(argv, env=environment(tree), capture_output=True, text=True, check=True, cwd=tree)
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def instructions(tree: Path, root: Path, edits: int) -> int:
    """Instructions callgrind counts for a child process that re-checks `edits` times."""
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]
    argv += [str(HERE / "lsp_recheck.py"), "--child", str(root), "--edits", str(edits)]
    done = subprocess.run(argv, env=environment(tree), capture_output=True, text=True, check=True, cwd=tree)
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found, done.stderr[-2000:]
    return int(found.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="main", help="the commit to compare with (default: main)")
    parser.add_argument("--files", type=int, default=300, help="workflows in the workspace")
    parser.add_argument("--edits", type=int, default=40, help="re-checks per child process")
    parser.add_argument("--repeat", type=int, default=5, help="child processes per tree, alternating")
    parser.add_argument("--callgrind", type=int, default=0, metavar="N", help="also count instructions over N edits")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.edits)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        generate(root, args.files)
        trees = {"this tree": HERE.parent, args.against: export(args.against, Path(tmp) / "against")}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, tree in trees.items():
                runs[name].append(measure(tree, root, args.edits))
        counts = {}
        if args.callgrind and shutil.which("valgrind"):
            for name, tree in trees.items():
                once = instructions(tree, root, args.callgrind)
                counts[name] = (instructions(tree, root, 2 * args.callgrind) - once) / args.callgrind
    shape = f"{args.files} workflows, {args.edits} edits x {args.repeat} runs per tree (median of each run)"
    print(f"re-check of one edited workflow and its two composers, {shape}")
    for name, figures in runs.items():
        for key in ("wall_ms", "cpu_ms"):
            values = [f[key] for f in figures]
            print(f"  {name:>12}  {key[:-3]:>4}: best {min(values):.2f} ms, median {statistics.median(values):.2f} ms")
        if name in counts:
            print(f"  {name:>12}  {counts[name] / 1e6:.1f} M instructions per re-check (callgrind)")
    this, other = (statistics.median(f["cpu_ms"] for f in runs[n]) for n in trees)
    print(f"re-check CPU, median: {this / other:.2f} of {args.against}'s")
    if len(counts) == 2:
        print(f"instructions per re-check: {counts['this tree'] / counts[args.against]:.2f} of {args.against}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
