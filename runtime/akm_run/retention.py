"""Retention: which settled top-level runs a rule reaches (`akm-run prune`, `$AKM_RUN_RETENTION`), and
the deletion of a run with everything it left: its descendants' and its own rows, events, scratch
files and kept worktrees. Active and blocked runs are never deleted.

Selection is by status and last update, oldest first, and a function of the journal and the cutoff
alone: `prune --dry-run` lists exactly the runs a real prune deletes (unless a run changes between
the two, or a driver holds one: it is then left alone and said so)."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import time
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from akm_run import kept
from akm_run.deletions import Settled
from akm_run.store import Store

STATUSES = ("completed", "failed", "abandoned")  # `failed` includes abandoned runs (their status is failed)
UNSETTLED = ("active", "blocked")
AUTOMATIC_LIMIT = 100  # runs one automatic prune deletes at most ($AKM_RUN_RETENTION)
BATCH = 100  # runs deleted in one transaction
ENV = "AKM_RUN_RETENTION"


@dataclass(frozen=True, slots=True)
class Rule:
    """What a prune reaches: settled top-level runs last updated before `before` (seconds since the
    epoch) in `statuses`, of `ref` when given, keeping the newest `keep_last` of each ref, at most
    `limit` of them (oldest first)."""

    before: float
    statuses: frozenset[str] = frozenset(STATUSES)
    keep_last: int = 0
    ref: str | None = None
    limit: int | None = None


@dataclass(slots=True)
class Selection:
    """The runs a rule reaches, oldest first, each with its tree (itself, then its descendants), and
    the unsettled runs older than the cutoff that it leaves, by status."""

    runs: list[tuple[Settled, list[str]]]
    kept: dict[str, int]
    busy: list[tuple[Settled, list[str]]] = field(default_factory=list)  # filled by delete: runs a driver held


def select(store: Store, rule: Rule) -> Selection:
    """The runs `rule` reaches; nothing is changed."""
    settled = store.top_level_runs(("completed", "failed"), rule.ref)
    newest: set[str] = set()
    if rule.keep_last:
        by_ref: dict[str, list[Settled]] = {}
        for run in settled:
            if _matches(run, rule.statuses):
                by_ref.setdefault(run.ref, []).append(run)
        newest = {run.id for runs in by_ref.values() for run in runs[-rule.keep_last :]}
    chosen = [r for r in settled if r.updated_at < rule.before and _matches(r, rule.statuses) and r.id not in newest]
    chosen = chosen[: rule.limit] if rule.limit is not None else chosen
    kept: dict[str, int] = {}
    for run in store.top_level_runs(UNSETTLED, rule.ref):
        if run.updated_at < rule.before:
            kept[run.status] = kept.get(run.status, 0) + 1
    return Selection([(run, store.run_tree(run.id)) for run in chosen], kept)


def _matches(run: Settled, statuses: frozenset[str]) -> bool:
    return run.status in statuses or (run.status == "abandoned" and "failed" in statuses)


def delete(store: Store, state_dir: Path, selection: Selection) -> Selection:
    """Delete the selected runs, BATCH at a time, each batch one transaction under the runs' locks (a
    run a driver holds is left alone, in `busy`); then their files. Returns what was deleted. A
    batch's kept worktrees are removed first, outside the transaction (git takes its time)."""
    deleted: list[tuple[Settled, list[str]]] = []
    busy: list[tuple[Settled, list[str]]] = []
    for start in range(0, len(selection.runs), BATCH):
        batch, gone = selection.runs[start : start + BATCH], len(deleted)
        repos = _worktrees_removed(store, batch)
        with ExitStack() as held:
            with store.transaction():
                for run, tree in batch:
                    current = store.run(run.id)
                    if current is None or current.status not in ("completed", "failed"):
                        continue  # changed since it was selected (resumed meanwhile)
                    if not store.hold_for_deletion(run.id, held):
                        busy.append((run, tree))
                        continue
                    tree = store.run_tree(run.id)  # read again under the lock
                    store.delete_tree(tree)
                    deleted.append((run, tree))
        for _, tree in deleted[gone:]:
            for run_id in tree:
                remove_files(state_dir, run_id)
        kept.after_deletion(repos)
    return Selection(deleted, selection.kept, busy)


def _worktrees_removed(store: Store, batch: list[tuple[Settled, list[str]]]) -> set[str]:
    """The kept worktrees of the batch's runs that are still settled, removed (kept.before_deletion).
    A run resumed meanwhile loses only worktrees of attempts that ended, which no drive reuses."""
    repos: set[str] = set()
    for run, _ in batch:
        current = store.run(run.id)
        if current is not None and current.status in ("completed", "failed"):
            repos |= kept.before_deletion(store, store.run_tree(run.id))
    return repos


def remove_files(state_dir: Path, run_id: str) -> None:
    """Remove what a run left under the state directory: its drives' scratch directories
    (`scratch/<run>.<pid>`), its kept worktrees (`worktrees/<run>/`) and a stale lock file. Never
    through a link: a link in their place is removed itself."""
    scratch = [Path(found) for found in glob.glob(str(state_dir / "scratch" / f"{glob.escape(run_id)}.*"))]
    for path in (*scratch, state_dir / "worktrees" / run_id, state_dir / "locks" / f"{run_id}.lock"):
        _remove(path)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_symlink() or not path.is_dir():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)


def automatic(store: Store, state_dir: Path, now: float | None = None) -> Selection | None:
    """`$AKM_RUN_RETENTION`: prune at most AUTOMATIC_LIMIT settled runs older than it; None when it
    is unset. Raises ValueError when it is not a duration."""
    from akm_run.durations import parse_age

    value = os.environ.get(ENV, "")
    if not value:
        return None
    age_ms = parse_age(value, f"${ENV}")
    rule = Rule(before=(time.time() if now is None else now) - age_ms / 1000, limit=AUTOMATIC_LIMIT)
    return delete(store, state_dir, select(store, rule))


POOL_EVERY_S = 3600.0  # how often a worker of the pool prunes


def pooled(url: str, state_dir: Path) -> Selection | None:
    """A worker's hourly prune: `automatic`, on a connection of its own, by one worker of the pool at
    a time (None when $AKM_RUN_RETENTION is unset or another worker is pruning)."""
    if not os.environ.get(ENV):
        return None
    from akm_run.pgstore import PostgresStore  # psycopg: the pool's store only

    store = PostgresStore(url)
    try:
        with store.retention_turn() as taken:
            return automatic(store, state_dir) if taken else None
    finally:
        store.close()


def count(runs: Iterable[tuple[Settled, list[str]]]) -> int:
    """How many run rows (top-level and child runs) these trees hold."""
    return sum(len(tree) for _, tree in runs)
