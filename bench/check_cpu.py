#!/usr/bin/env python3
"""Benchmark the CPU cost of a cold check per file, for this checkout and another commit in the same run.

Both trees check the same generated corpus (the ~108-line workflows of check_corpus.py) in a child
process each, alternating, so that a busy machine slows both alike. Each child compiles every file
in a session of its own (nothing cached) and reports CPU time per file (`time.process_time`) for the
whole check and for the parse alone. With `--callgrind`, each tree is also run under valgrind's
callgrind, which counts instructions: a figure the machine's load does not move. Per-file
instructions are (count for 2N files − count for N files) / N, so interpreter start-up cancels out.
Prints figures; asserts nothing.

With `--edited R`, both trees also check one edited file of a warm 1,000-file workspace (the
pre-commit hook's case; bench/check_scale.py's corpus) R times each, alternating: wall and CPU time
of the whole process, start-up included.

With `--whole N`, callgrind also counts a whole cold `akmc check -q -j 1 workflows` (the command,
its result cache written, its output) of bench/check_scale.py's workspaces of N and 2N files, per
tree: (count for 2N − count for N) / N instructions per file, what `bench/compare.py`'s cold figure
measures in time, without the load's noise (and without the kernel's share: callgrind counts user
space only).

    python bench/check_cpu.py --against main --files 200 --repeat 5 --callgrind 20 --edited 10
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from check_corpus import generate  # noqa: E402 - the same ~108-line workflow generator
from check_scale import generate as generate_workspace  # noqa: E402


def child(corpus: Path, count: int) -> None:
    """Runs inside the tree under test (its akmc comes first on PYTHONPATH): print one JSON line."""
    # Imported here, in the child only: the parent measures other trees and never loads this one's.
    from akmc import syntax
    from akmc.compiler import check_file
    from akmc.diagnostics import Report

    paths = sorted(corpus.rglob("*.akm"))[:count]
    texts = [p.read_text(encoding="utf-8") for p in paths]
    check_file(paths[0], "warm-up", corpus)  # builds the parser, loads every stage
    start = time.process_time()
    for path in paths:
        check_file(path, path.name, corpus)
    check = time.process_time() - start
    start = time.process_time()
    for text in texts:
        syntax.parse(text, Report("bench"), [])
    parse = time.process_time() - start
    print(json.dumps({"check_ms": check * 1000 / len(paths), "parse_ms": parse * 1000 / len(paths)}))


def export(rev: str, into: Path) -> Path:
    """The tree of `rev` (akmc, its grammar and the bundled runtime), unpacked into `into`."""
    into.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=HERE.parent, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def environment(tree: Path, bytecode: bool = False) -> dict[str, str]:
    """Run with `tree`'s akmc; `bytecode`: let it cache bytecode (an installed akmc has it compiled)."""
    path = os.pathsep.join([str(tree), str(tree / "runtime")])
    env = {**os.environ, "PYTHONPATH": path}
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def measure(tree: Path, corpus: Path, count: int) -> dict[str, float]:
    argv = [sys.executable, str(HERE / "check_cpu.py"), "--child", str(corpus), "--files", str(count)]
    done = subprocess.run(argv, env=environment(tree), capture_output=True, text=True, check=True, cwd=tree)
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def callgrind_count(argv: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Instructions valgrind's callgrind counts for the command `argv` (user space, all its threads)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found, done.stderr[-2000:]
    return int(found.group(1))


def instructions(tree: Path, corpus: Path, count: int) -> int:
    """Instructions callgrind counts for a child process that checks `count` files."""
    argv = [sys.executable, str(HERE / "check_cpu.py"), "--child", str(corpus), "--files", str(count)]
    return callgrind_count(argv, tree, environment(tree))


def whole(tree: Path, root: Path) -> int:
    """Instructions callgrind counts for a cold `akmc check -q -j 1 workflows` in `root` (its cache
    removed first; the tree's bytecode compiled by a first run, as an installed akmc has it)."""
    argv = [sys.executable, "-m", "akmc", "check", "-q", "-j", "1", "workflows"]
    env = environment(tree, True)
    subprocess.run([*argv, "--no-cache"], cwd=root, env=env, capture_output=True)
    shutil.rmtree(root / ".akmc-cache", ignore_errors=True)
    return callgrind_count(argv, root, env)


def edited(
    trees: dict[str, Path], root: Path, repeat: int, callgrind: bool = False
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, int]]:
    """Wall and CPU seconds of `akmc check FILE` for one edited file of a warm workspace, per tree
    (each tree's own cache: the fingerprint differs), alternating between the trees; with
    `callgrind`, also the instructions of one such check per tree."""
    target = root / "workflows" / "group1" / "wf501.akm"
    original = target.read_text()
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    argv = [sys.executable, "-m", "akmc", "check", "--quiet"]
    for tree in trees.values():  # fill each tree's cache
        subprocess.run([*argv, "workflows"], cwd=root, env=environment(tree, True), capture_output=True)
    for i in range(repeat):
        for name, tree in trees.items():
            target.write_text(original.replace('"Generated', f'"Generated edit {i} {name}'))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(
                [*argv, str(target.relative_to(root))], cwd=root, env=environment(tree, True), capture_output=True
            )
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            found[name].append((wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
    counts: dict[str, int] = {}
    for name, tree in trees.items() if callgrind else ():
        target.write_text(original.replace('"Generated', f'"Generated counted {name}'))
        counts[name] = callgrind_count([*argv, str(target.relative_to(root))], root, environment(tree, True))
    target.write_text(original)
    return found, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="main", help="the commit to compare with (default: main)")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--callgrind", type=int, default=0, metavar="N", help="also count instructions over N files")
    parser.add_argument(
        "--edited",
        type=int,
        default=0,
        metavar="R",
        help="also time R checks of one edited file in a 1,000-file workspace",
    )
    parser.add_argument(
        "--whole",
        type=int,
        default=0,
        metavar="N",
        help="also count the instructions of a whole cold `akmc check` of N and 2N files",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.files)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        generate(corpus, max(args.files, 2 * args.callgrind))
        trees = {"this tree": HERE.parent, args.against: export(args.against, Path(tmp) / "against")}
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for _ in range(args.repeat):
            for name, tree in trees.items():
                runs[name].append(measure(tree, corpus, args.files))
        counts = {}
        if args.callgrind and shutil.which("valgrind"):
            for name, tree in trees.items():
                once = instructions(tree, corpus, args.callgrind)
                twice = instructions(tree, corpus, 2 * args.callgrind)
                counts[name] = (twice - once) / args.callgrind
        whole_counts: dict[str, float] = {}
        if args.whole and shutil.which("valgrind"):
            for size in (args.whole, 2 * args.whole):
                (Path(tmp) / f"whole{size}").mkdir()
                generate_workspace(Path(tmp) / f"whole{size}", size)
            for name, tree in trees.items():
                once = whole(tree, Path(tmp) / f"whole{args.whole}")
                twice = whole(tree, Path(tmp) / f"whole{2 * args.whole}")
                whole_counts[name] = (twice - once) / args.whole
        edits: dict[str, list[tuple[float, float]]] = {}
        edit_counts: dict[str, int] = {}
        if args.edited:
            workspace = Path(tmp) / "workspace"
            workspace.mkdir()
            generate_workspace(workspace, 1000)
            edits, edit_counts = edited(
                trees, workspace, args.edited, bool(args.callgrind and shutil.which("valgrind"))
            )
    print(f"{args.files} files of ~108 lines, {args.repeat} alternating runs per tree (CPU time per file)")
    for name, figures in runs.items():
        for key in ("check_ms", "parse_ms"):
            values = [f[key] for f in figures]
            print(f"  {name:>12}  {key[:-3]:>5}: best {min(values):.2f} ms, median {statistics.median(values):.2f} ms")
        if name in counts:
            print(f"  {name:>12}  check: {counts[name] / 1e6:.1f} M instructions per file (callgrind)")
    for name, timings in edits.items():
        walls, cpus = [wall * 1000 for wall, _ in timings], [cpu * 1000 for _, cpu in timings]
        print(
            f"  {name:>12}  one edited file of 1,000: wall best {min(walls):.0f} ms, median "
            f"{statistics.median(walls):.0f} ms; CPU best {min(cpus):.0f} ms, median {statistics.median(cpus):.0f} ms"
        )
        if name in edit_counts:
            print(f"  {name:>12}  one edited file of 1,000: {edit_counts[name] / 1e6:.0f} M instructions (callgrind)")
    this, other = (statistics.median(f["check_ms"] for f in runs[n]) for n in trees)
    print(f"check CPU per file, median: {this / other:.2f} of {args.against}'s")
    if len(counts) == 2:
        print(f"instructions per file: {counts['this tree'] / counts[args.against]:.2f} of {args.against}'s")
    for name, per_file in whole_counts.items():
        print(f"  {name:>12}  whole cold check: {per_file / 1e6:.2f} M instructions per file (callgrind)")
    if len(whole_counts) == 2:
        ratio = whole_counts["this tree"] / whole_counts[args.against]
        print(f"whole cold check, instructions per file: {ratio:.3f} of {args.against}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
