"""A unit's or a notifier's process, watched to its exit and stopped as a group (docs/runtime.md,
"Units"): its pipes read while it runs, its exit waited for (never its pipes' end), and its whole
process group ended with SIGTERM, then SIGKILL after a grace period."""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import socket
import time
from collections.abc import Callable, Iterable
from typing import Any

from akm_run import outcomes
from akm_run.activity import Watch

KILL_GRACE_SECONDS = 1.0  # SIGTERM, then SIGKILL after this long (docs/runtime.md)
DRAIN_GRACE_SECONDS = 0.5  # after a process exited, its pipes are read for at most this long


class Streams:
    """Reads a process's stdout (up to the output limit, counting the rest; none when it has no
    stdout pipe) and the tail of its stderr while waiting for it to exit; wakes on output, on exit (a
    pidfd where there is one) or after a slice. It stops at the process's exit, not at its pipes'
    end: a background process that keeps the pipes open, or keeps writing to them, cannot hold it."""

    def __init__(self, process: Any, stderr_keep: int, watch: Watch | None = None) -> None:
        self.process, self.watch = process, watch
        self.stdout = bytearray()
        self.stdout_size = 0
        self.stderr = bytearray()
        self.stderr_keep = stderr_keep  # the tail, and room for a secret that straddles its cut
        pipes = ((process.stdout, "stdout"), (process.stderr, "stderr"))
        self.open = {pipe.fileno(): name for pipe, name in pipes if pipe is not None}
        try:
            self.exit_fd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):
            self.exit_fd = None

    def collect(self, seconds: float) -> bool:
        """Read what arrives within `seconds`; True once the process has exited (output drained)."""
        watch = list(self.open) + ([self.exit_fd] if self.exit_fd is not None else [])
        if self.exit_fd is None:
            seconds = min(seconds, 0.005)  # no exit notification: poll
        if watch:
            ready, _, _ = select.select(watch, [], [], seconds)
        else:
            ready = []
            time.sleep(seconds)
        for fd in ready:
            if fd != self.exit_fd:
                self._read(fd)
        if self.process.poll() is None:
            return False
        self.drain()
        return True

    def drain(self) -> None:
        """Read what is already written, without waiting for an end of file, for at most
        DRAIN_GRACE_SECONDS (what a background process goes on writing is left unread)."""
        end = time.monotonic() + DRAIN_GRACE_SECONDS
        while self.open and time.monotonic() < end:
            ready, _, _ = select.select(list(self.open), [], [], 0)
            if not ready:
                return
            for fd in ready:
                self._read(fd)

    def _read(self, fd: int) -> None:
        chunk = os.read(fd, 65536)
        if not chunk:
            del self.open[fd]
        elif self.open[fd] == "stdout":
            self.stdout_size += len(chunk)
            room = outcomes.MAX_OUTPUT_BYTES + 1 - len(self.stdout)
            if room > 0:
                self.stdout += chunk[:room]
        else:
            self.stderr += chunk
            del self.stderr[: -self.stderr_keep]
            if self.watch is not None:  # any byte on stderr counts as activity
                self.watch.active()

    def close(self) -> None:
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        if self.exit_fd is not None:
            os.close(self.exit_fd)


def wait_until(process: Any, streams: Streams, deadline: float) -> str | None:
    """Read a process's streams until it exits (None) or `deadline` passes: then its group is
    stopped (`halt`) and how it ended is returned. Only the process's exit is waited for."""
    while not streams.collect(slice_until(deadline)):
        if time.monotonic() >= deadline:
            return halt(process, streams)
    return None


def halt(process: Any, streams: Streams) -> str:
    """Stop a process's group (`stop_group`), reap it and drain what it wrote; how it ended."""
    stopped = stop_group(process.pid, functools.partial(reap_group, process))
    process.wait()
    streams.drain()
    return stopped


def slice_until(deadline: float | None) -> float:
    if deadline is None:
        return 0.1
    return max(0.0, min(0.1, deadline - time.monotonic()))


@functools.cache
def adopt_orphans() -> None:
    """Make this driver the reaper of its units' orphans (Linux PR_SET_CHILD_SUBREAPER): a unit's
    process that outlives its shell becomes this process's child, so a stopped group is reaped
    here at once instead of lingering as zombies until an init process gets to them."""
    try:
        import ctypes  # late: about 2 ms, which only a process that drives units needs (not `list`, `status`)

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap_group(process: Any) -> None:
    """Collect the exited members of a unit's process group: the leader through its Popen (which
    keeps its status), then any adopted orphan of the group."""
    process.poll()
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-process.pid, os.WNOHANG)[0]:
            pass


def stop_group(pid: int, reap: Callable[[], object] = lambda: None) -> str:
    """Terminate a unit's whole process group: SIGTERM, then SIGKILL to whatever is left after
    KILL_GRACE_SECONDS. `reap` collects the group leader when it is this process's child: a leader
    that exited but was not reaped (a zombie) would keep the group alive for the whole grace period.
    Returns how the group ended, in words."""
    return stop_groups([pid], reap)[pid]


def stop_groups(pids: Iterable[int], reap: Callable[[], object] = lambda: None) -> dict[int, str]:
    """`stop_group` for several groups at once (one grace period for all): how each one ended."""
    ended, left = {}, set()
    for pid in pids:
        try:
            os.killpg(pid, signal.SIGTERM)
            left.add(pid)
        except (ProcessLookupError, PermissionError):
            ended[pid] = "it had already exited"
    end = time.monotonic() + KILL_GRACE_SECONDS
    while left and time.monotonic() < end:
        reap()
        for pid in list(left):
            try:
                os.killpg(pid, 0)
            except (ProcessLookupError, PermissionError):
                ended[pid] = "stopped by SIGTERM"
                left.discard(pid)
        if left:
            time.sleep(0.01)
    for pid in left:
        try:
            os.killpg(pid, signal.SIGKILL)
            ended[pid] = f"killed by SIGKILL after the {KILL_GRACE_SECONDS:g} s grace period"
        except (ProcessLookupError, PermissionError):
            ended[pid] = "stopped by SIGTERM"
    return ended


def stop_leftover(pid: int | None, host: str | None) -> None:
    """After a crash, stop an interrupted attempt's process group if it is still running here."""
    stop_leftovers([(pid, host)])


def stop_leftovers(attempts: Iterable[tuple[int | None, str | None]]) -> None:
    """After a crash, stop the interrupted attempts' process groups (pid, host) still running here,
    all in one grace period: a wide map's reclaim waits once, not once per unit. Only a session
    leader we could have started is signalled (a guard against a reused pid)."""
    here, leaders = socket.gethostname(), []
    for pid, host in attempts:
        if not pid or host != here:
            continue
        try:
            if os.getsid(pid) == pid:
                leaders.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    if leaders:
        stop_groups(leaders)
