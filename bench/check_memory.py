#!/usr/bin/env python3
"""What `akmc check` keeps per file until output, per output format: the peak of Python's traced
allocations (tracemalloc) for a warm check of N and of 3N generated workflows (one process,
`--jobs 1`), and the growth per file between the two. Interpreter and imports are not counted;
the check is warm so that a share's syntax trees (the same for any N) do not hide the records.

    python bench/check_memory.py --files 500

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path

from akmc.commands import check

sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_scale import generate

FORMATS = ("text", "json", "github", "sarif")


def peak(root: Path, output_format: str, cold: bool) -> int:
    here = Path.cwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if not cold:
                check.run([Path("workflows")], jobs=1, quiet=True)  # fills the cache
            tracemalloc.start()
            check.run([Path("workflows")], output_format=output_format, jobs=1, cache=not cold)
            found = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    finally:
        os.chdir(here)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--cold", action="store_true", help="also measure a cold check (--no-cache), text only")
    args = parser.parse_args()
    sizes = (args.files, 3 * args.files)
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for size in sizes:
            roots[size] = Path(tmp) / str(size)
            roots[size].mkdir()
            generate(roots[size], size)
        runs = [(f, False) for f in FORMATS] + ([("text", True)] if args.cold else [])
        for output_format, cold in runs:
            small, large = (peak(roots[size], output_format, cold) for size in sizes)
            label = f"{output_format}{' (cold)' if cold else ''}"
            print(
                f"{label:>12}: peak {small / 2**20:.1f} MiB at {sizes[0]} files, {large / 2**20:.1f} MiB at "
                f"{sizes[1]}: {(large - small) / (sizes[1] - sizes[0]) / 1024:.2f} KiB per file"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
