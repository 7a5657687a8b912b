#!/usr/bin/env python3
"""What an idle `akm-run events --follow` costs the database: one follower of an active run that
journals nothing (a driver holds its lock, as during a long unit, or nothing drives it yet) on a
private PostgreSQL server, its statements counted from the server's log (log_statement = all) after
a few seconds of start-up (docs/performance.md). Prints figures; asserts nothing.

    python bench/follow_idle.py --seconds 30
    python bench/follow_idle.py --seconds 30 --undriven
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))
sys.path.insert(0, str(HERE / "bench"))

from scaleout import counted  # noqa: E402

from akm_run.pgstore import PostgresStore  # noqa: E402
from helpers import PostgresServer  # noqa: E402

PLAN = {"irVersion": 1, "ref": "workflows/w", "title": "w", "limits": {}, "steps": [{"stepId": "a", "index": 0}]}
RUN_ID = "20261202T000000-0000beef"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30, help="how long to count statements")
    parser.add_argument("--undriven", action="store_true", help="no driver holds the run's lock")
    args = parser.parse_args()
    server = PostgresServer()
    server.start()
    try:
        url = server.database()
        store = PostgresStore(url)
        store.publish_run(RUN_ID, PLAN, "sha256:x", {})
        with nullcontext() if args.undriven else store.lock(RUN_ID):
            argv = [sys.executable, "-m", "akm_run", "events", RUN_ID, "--follow", "--database", url]
            follower = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
            time.sleep(5)  # its start-up and first reads
            found = counted(server, lambda: time.sleep(args.seconds), width=100)
            follower.terminate()
            follower.wait(timeout=30)
        store.close()
    finally:
        server.stop()
    driven = "nothing drives it" if args.undriven else "a driver holds its lock"
    print(
        f"an idle follower ({driven}): {sum(found.values()) / args.seconds:.2f} statements/s over {args.seconds:.0f} s"
    )
    for statement, count in found.most_common(8):
        print(f"  {count / args.seconds:6.2f} /s  {statement}")


if __name__ == "__main__":
    main()
