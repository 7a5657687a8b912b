#!/usr/bin/env python3
"""Benchmark `akmc check FILE` for one edited child of a wide parent, for this checkout and another
commit in the same run.

The workspace: one parent workflow with `--children` `uses` steps, each composing a child of its
own (a ~108-line workflow of check_corpus.py with a required param and an exported output). Each
tree fills its own cache with a whole check, then, alternating between the trees, one child is
edited and `akmc check CHILD` runs; beside it, the same edited child in a workspace of its own
("alone": no parent to re-check). The figure is the CPU time (user + system, from the child
process's rusage) of the whole process, start-up included: the machine is shared, and CPU time
moves less with its load than wall time. With `--callgrind`, one check of each kind per tree is
also run under valgrind's callgrind, whose instruction count the load does not move at all.
Prints figures and the load average; asserts nothing.

    python bench/check_wide.py --against main --children 100 --repeat 9 --callgrind
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_corpus import workflow  # noqa: E402 - the same ~108-line workflow generator
from check_cpu import callgrind_count, environment, export  # noqa: E402 - the other tree, running a tree's akmc

EDITED = "workflows/wide/child050.akm"


def child_source(index: int) -> str:
    """A generated workflow that exports the output of its last step."""
    text = workflow(index)
    outputs = "  outputs {\n    files = steps.s7.output.files\n  }\n"
    return text.replace("  limits {", outputs + "  limits {", 1)


def generate(root: Path, children: int) -> None:
    """`workflows/wide.akm` composing `children` children, each binding the required `version`."""
    (root / "akm.toml").write_text("")
    (root / "scripts").mkdir()
    (root / "scripts" / "run.sh").write_text('#!/bin/sh\necho \'{"ok": true, "files": [], "count": 0}\'\n')
    (root / "workflows" / "wide").mkdir(parents=True)
    steps = []
    for index in range(children):
        (root / "workflows" / "wide" / f"child{index:03}.akm").write_text(child_source(index))
        steps.append(
            f'  step c{index} {{\n    uses "workflows/wide/child{index:03}" {{\n'
            "      version = params.version\n    }\n  }\n"
        )
    head = 'workflow "Wide" {\n  params {\n    version: string\n  }\n\n'
    (root / "workflows" / "wide.akm").write_text(head + "\n".join(steps) + "}\n")


def alone(root: Path) -> None:
    """The edited child in a workspace of its own."""
    (root / "akm.toml").write_text("")
    (root / "scripts").mkdir()
    (root / "scripts" / "run.sh").write_text('#!/bin/sh\necho \'{"ok": true, "files": [], "count": 0}\'\n')
    (root / "workflows" / "wide").mkdir(parents=True)
    (root / EDITED).write_text(child_source(50))


ARGV = [sys.executable, "-m", "akmc", "check", "--quiet"]


def cpu(tree: Path, root: Path, argv: list[str]) -> float:
    """CPU seconds (user + system) of one `akmc` process run with `tree`'s code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=root, env=environment(tree, True), capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def edit(root: Path, mark: str) -> None:
    target = root / EDITED
    target.write_text(child_source(50).replace('"Generated', f'"Generated edit {mark}'))


def measure(trees: dict[str, Path], spaces: dict[str, Path], repeat: int) -> dict[tuple[str, str], list[float]]:
    """CPU seconds per (tree, workspace kind), each check after a fresh edit, alternating."""
    found: dict[tuple[str, str], list[float]] = {(t, s): [] for t in trees for s in spaces}
    for tree in trees.values():  # fill each tree's cache (the fingerprint differs)
        for root in spaces.values():
            cpu(tree, root, [*ARGV, "workflows"])
    for i in range(repeat):
        for name, tree in trees.items():
            for kind, root in spaces.items():
                edit(root, f"{i} {name}")
                found[(name, kind)].append(cpu(tree, root, [*ARGV, EDITED]))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="main", help="the commit to compare with (default: main)")
    parser.add_argument("--children", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--callgrind", action="store_true", help="also count instructions (valgrind)")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        spaces = {"wide": Path(tmp) / "wide", "alone": Path(tmp) / "alone"}
        for root in spaces.values():
            root.mkdir()
        generate(spaces["wide"], args.children)
        alone(spaces["alone"])
        trees = {"this tree": HERE.parent}
        if args.against:
            trees[args.against] = export(args.against, Path(tmp) / "against")
        found = measure(trees, spaces, args.repeat)
        counts: dict[tuple[str, str], int] = {}
        if args.callgrind and shutil.which("valgrind"):
            for name, tree in trees.items():
                for kind, root in spaces.items():
                    edit(root, f"counted {name}")
                    counts[(name, kind)] = callgrind_count([*ARGV, EDITED], root, environment(tree, True))
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"one edited child of a parent with {args.children} children; {args.repeat} alternating runs each")
    for name in trees:
        for kind in spaces:
            values = [v * 1000 for v in found[(name, kind)]]
            line = f"  {name:>12}  {kind:>5}: CPU best {min(values):.0f} ms, median {statistics.median(values):.0f} ms"
            if (name, kind) in counts:
                line += f", {counts[(name, kind)] / 1e6:.0f} M instructions"
            print(line)
        ratio = statistics.median(found[(name, "wide")]) / statistics.median(found[(name, "alone")])
        print(f"  {name:>12}  wide / alone, median CPU: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
