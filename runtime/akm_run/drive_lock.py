"""A pooled drive's hold on its run's lock (docs/scale-out.md, "A drive and a command at once"). Needs
the `postgres` extra; only the pool (akm_run.drives, akm_run.submitting) imports it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dbos import DBOS, DBOSClient

from akm_run.pgstore import PostgresStore

LOCK_WAIT_S = 60.0  # how long a drive waits for its run's lock (a command holds it for a moment)
TOOK_LOCK = "took-lock"  # the event a drive workflow sets once it holds its run's lock


class DriveStore(PostgresStore):
    """The journal as a drive of `run_id` uses it. The run's lock, when a command (`approve`, `resume`,
    `abandon`) holds it for a moment, is waited for rather than given up: that command may have found
    this drive live and submitted none, so a drive turned away would leave the run undriven. Once
    taken, the drive says so (its TOOK_LOCK event): from then on it reads no change a command makes
    after it, and `submit` after a change does not count on it (docs/scale-out.md)."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(url)
        self.run_id = run_id

    @contextmanager
    def lock(self, run_id: str, wait_s: float = 0.0) -> Iterator[None]:
        if run_id != self.run_id:  # a child run's: as any driver takes it
            with super().lock(run_id, wait_s):
                yield
            return
        with super().lock(run_id, max(wait_s, LOCK_WAIT_S)):
            DBOS.set_event(TOOK_LOCK, True)
            yield


def took_lock(client: DBOSClient, workflow_id: str) -> bool:
    """Whether a drive workflow took its run's lock already (and so reads no change made after)."""
    return bool(client.get_event(workflow_id, TOOK_LOCK, timeout_seconds=0))
