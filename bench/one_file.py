"""CPU time of one cold `akmc check` of one small file, the whole process (interpreter start-up
included; `--no-cache`: nothing of an earlier check is read), against `python -c pass` on the same
machine, alternately (docs/performance.md, "One file, cold"). Bytecode is written as Python does
by default, whatever PYTHONDONTWRITEBYTECODE says: a user's installed akmc has it. Prints figures;
asserts nothing.

    .venv/bin/python bench/one_file.py --repeat 20
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKFLOW = 'workflow "w" {\n  step a {\n    shell "echo hi"\n  }\n}\n'


def cpu_ms(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="akm-bench-"))
    (root / "akm.toml").write_text("")
    (root / "w.akm").write_text(WORKFLOW)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    check = [sys.executable, "-m", "akmc", "check", "--no-cache", "w.akm"]
    bare = [sys.executable, "-c", "pass"]
    cpu_ms(check, root, env)  # bytecode written, if it was not
    figures: dict[str, list[float]] = {"akmc check --no-cache w.akm": [], "python -c pass": []}
    for _ in range(args.repeat):
        figures["akmc check --no-cache w.akm"].append(cpu_ms(check, root, env))
        figures["python -c pass"].append(cpu_ms(bare, root, env))
    for name, times in figures.items():
        print(f"{name:<30} CPU best {min(times):5.1f} ms, median {statistics.median(times):5.1f} ms")


if __name__ == "__main__":
    main()
