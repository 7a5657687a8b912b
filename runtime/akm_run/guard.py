"""A worker's units do not outlive it (docs/scale-out.md, "Stopping a worker"): the process groups
of the units a worker runs are registered with a small guard process, which stops whatever is still
registered once the worker is gone, however it went (SIGKILL included).

Each unit leads a session of its own (so that stopping it reaches its children), which also puts it
out of reach of a signal to the worker's process group, and Linux's PR_SET_PDEATHSIG would reach
only a unit's first process, not its children. The guard reads the worker's registrations from a
pipe; the end of that pipe is the worker's death. It runs in a session of its own too, so a signal
that kills the worker's process group leaves it to do its work."""

from __future__ import annotations

import subprocess
import sys
import threading

from akm_run import units


class Guard:
    """The worker's side: a guard process started now, told of each unit group as it starts and ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-m", "akm_run.guard"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )

    def started(self, pid: int) -> None:
        self._tell(f"+{pid}\n")

    def ended(self, pid: int) -> None:
        self._tell(f"-{pid}\n")

    def _tell(self, line: str) -> None:
        assert self._process.stdin is not None
        with self._lock:
            try:
                self._process.stdin.write(line.encode())
                self._process.stdin.flush()
            except OSError:  # the guard is gone (killed by hand): the units run on, unguarded
                pass


def main() -> None:
    """The guard process: keep the registered groups until the pipe ends, then stop those left
    (SIGTERM, then SIGKILL after units.KILL_GRACE_SECONDS)."""
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        pid = int(line[1:])
        if line.startswith(b"+"):
            groups.add(pid)
        else:
            groups.discard(pid)
    units.stop_groups(groups)


if __name__ == "__main__":
    main()
