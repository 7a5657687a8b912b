"""Where an `akm-run worker`'s CPU goes while it runs a map of N `sleep 0` units, four at a time:
the worker runs with a sampler thread that looks, every 5 ms, at which of its threads used CPU
since its last look (`/proc/self/task/TID/stat`) and counts those threads' Python stacks, by
thread, by innermost function and by every function on the stack (docs/performance.md, "On a
quiet machine"). Prints the counts; asserts nothing. The counts are samples of threads that ran
during an interval of 5 ms, in CPU ticks of 10 ms, so they rank rather than measure.

    .venv/bin/python bench/worker_profile.py --units 300
"""

from __future__ import annotations

import argparse
import collections
import json
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))
sys.path.insert(0, str(HERE / "bench"))

from scaleout import plan  # noqa: E402

from helpers import PostgresServer, Runtime  # noqa: E402

Counts = collections.Counter[str]


def _ticks(tid: int) -> int | None:
    try:
        fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def _sample(out: Path) -> None:
    """The sampler thread: writes its counts to `out` every 2 s (the worker ends with os._exit)."""
    last: dict[int, int] = {}
    threads, leaf, stack = Counts(), Counts(), Counts()
    written = time.monotonic()
    while True:
        time.sleep(0.005)
        frames = sys._current_frames()
        for thread in threading.enumerate():
            if thread is threading.current_thread() or thread.native_id is None or thread.ident is None:
                continue
            ticks = _ticks(thread.native_id)
            before, last[thread.native_id] = last.get(thread.native_id), ticks or 0
            if ticks is None or before is None or ticks == before:
                continue
            threads[thread.name] += ticks - before
            frame, seen = frames.get(thread.ident), set()
            if frame is not None:
                leaf[f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"] += 1
            while frame is not None:
                seen.add(f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}")
                frame = frame.f_back
            stack.update(seen)
        if time.monotonic() - written > 2:
            written = time.monotonic()
            out.write_text(json.dumps({"threads": threads, "leaf": leaf, "stack": stack}))


def serve(url: str, out: Path) -> None:
    """The worker, sampled: `akm-run worker` in this process, the sampler beside it."""
    threading.Thread(target=_sample, args=(out,), daemon=True, name="sampler").start()
    sys.argv = ["akm-run", "worker", "--database", url, "--poll", "100ms", "--concurrency", "4"]
    runpy.run_module("akm_run", run_name="__main__", alter_sys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--units", type=int, default=300)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--serve", nargs=2, metavar=("URL", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve[0], Path(args.serve[1]))
    server = PostgresServer()
    server.start()
    out = Path(tempfile.mkdtemp(prefix="akm-bench-")) / "samples.json"
    try:
        runtime = Runtime(out.parent, server.served())
        assert runtime.database is not None
        worker = subprocess.Popen([sys.executable, __file__, "--serve", runtime.database, str(out)], cwd=out.parent)
        compiled = plan(out.parent, 4, 0)  # four at a time, each `sleep 0`
        items = json.dumps(list(range(args.units)))
        argv = [sys.executable, "-m", "akm_run", "run", str(compiled), "--database", runtime.database]
        started = time.monotonic()
        done = subprocess.run([*argv, "--param", f"items={items}"], cwd=out.parent, capture_output=True, text=True)
        print(f"run: exit {done.returncode} in {time.monotonic() - started:.1f} s")
        time.sleep(2.5)  # the sampler's last counts
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    finally:
        server.stop()
    counts = json.loads(out.read_text())
    for title, key in (("CPU ticks (10 ms) by thread", "threads"), ("innermost", "leaf"), ("on the stack", "stack")):
        print(title)
        for name, count in collections.Counter(counts[key]).most_common(args.top):
            print(f"  {count:6d}  {name}")


if __name__ == "__main__":
    main()
