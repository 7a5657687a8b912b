"""How long an idle `akm-run worker` takes to stop: SIGTERM to exit, on a private PostgreSQL server,
one worker after another on the same database (docs/performance.md, "The pool against DBOS's own
floor, and an idle worker since").

    .venv/bin/python bench/worker_stop.py --stops 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))

from helpers import PostgresServer, Runtime  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stops", type=int, default=8)
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        runtime = Runtime(Path(tempfile.mkdtemp(prefix="akm-bench-")), server.served())
        times = []
        for n in range(args.stops):
            worker = runtime.start_worker(name=f"stop{n}")
            worker.serving()
            started = time.monotonic()
            if problem := worker.stop():
                sys.exit(problem)
            times.append(time.monotonic() - started)
        runtime.close()
    finally:
        server.stop()
    print(
        f"{args.stops} idle workers, SIGTERM to exit: median {statistics.median(times):.2f} s, "
        f"min {min(times):.2f} s, max {max(times):.2f} s"
    )


if __name__ == "__main__":
    main()
