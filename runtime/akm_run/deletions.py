"""The journal's deletions (`akm-run prune`, `delete`): which top-level runs a retention rule reaches,
a run's tree, and the removal of a tree's rows, in the SQL both dialects share.

The only statements that delete journal rows. A run's rows go first and its events after, in the
caller's transaction: the events table refuses a deletion while the event's run row exists
(migrations, "Retention")."""

from __future__ import annotations

import json
from abc import abstractmethod
from contextlib import ExitStack
from typing import NamedTuple

from akm_run.database import Database

# The tables whose rows belong to one run (`run_id`), children before the rows they refer to.
RUN_TABLES = ("attempts", "units", "steps", "signatures", "notifications")

# A run and its descendants, parents before children (runs_by_parent).
TREE = (
    "WITH RECURSIVE tree(id, depth) AS (SELECT id, 0 FROM runs WHERE id = ? UNION ALL "
    "SELECT r.id, tree.depth + 1 FROM runs r JOIN tree ON r.parent_run_id = tree.id) "
    "SELECT id FROM tree ORDER BY depth, id"
)


class Settled(NamedTuple):
    """A top-level run as retention sees it."""

    id: str
    ref: str
    status: str  # completed, failed, abandoned (by `akm-run abandon`) or paused (by `akm-run pause`)
    updated_at: float


class Deletions(Database):
    """What retention reads and deletes."""

    def top_level_runs(self, statuses: tuple[str, ...], ref: str | None) -> list[Settled]:
        """The top-level runs in `statuses` (journal statuses: active, completed, failed, blocked),
        of `ref` when given, oldest first (by last update, then id)."""
        marks = ", ".join("?" for _ in statuses)
        rows = self._execute(
            f"SELECT id, ref, status, failure_json, paused, updated_at FROM runs WHERE parent_run_id IS NULL "
            f"AND status IN ({marks}) AND (CAST(? AS TEXT) IS NULL OR ref = ?) ORDER BY updated_at, id",
            (*statuses, ref, ref),
        ).fetchall()
        return [Settled(i, r, _status(s, f, p), float(u)) for i, r, s, f, p, u in rows]

    def run_tree(self, run_id: str) -> list[str]:
        """A run's id and its descendants' ids, parents before children."""
        return [str(row[0]) for row in self._execute(TREE, (run_id,)).fetchall()]

    def root_of(self, run_id: str) -> str:
        """The top-level run a run belongs to (itself for a top-level run)."""
        current = run_id
        while (row := self._execute("SELECT parent_run_id FROM runs WHERE id = ?", (current,)).fetchone()) and row[0]:
            current = str(row[0])
        return current

    def delete_tree(self, tree: list[str]) -> None:
        """Delete every row of these runs (a run and its descendants, parents first, as run_tree
        gives them): their own rows, then the runs, then their events. In the caller's transaction."""
        for run_id in reversed(tree):
            for table in RUN_TABLES:
                self._execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            self._execute("DELETE FROM runs WHERE id = ?", (run_id,))
        for run_id in tree:
            self._execute("DELETE FROM events WHERE run_id = ?", (run_id,))

    @abstractmethod
    def hold_for_deletion(self, run_id: str, held: ExitStack) -> bool:
        """Inside a transaction: take the run's driver lock until `held` closes (after the commit);
        False when a driver holds it (the run is left alone)."""

    @abstractmethod
    def vacuum(self) -> None:
        """Give the space of deleted rows back (outside any transaction)."""


def _status(status: str, failure_json: str | None, paused: str | None) -> str:
    """`abandoned` for a failed run that `akm-run abandon` ended (operations.ABANDONED); `paused`
    for a completed or failed run that `akm-run pause` holds: not settled, so never deleted."""
    if paused is not None and status in ("completed", "failed"):
        return "paused"
    failure = json.loads(failure_json) if status == "failed" and failure_json else None
    return "abandoned" if isinstance(failure, dict) and failure.get("reason") == "abandoned" else status
