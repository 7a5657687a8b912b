"""`akm-run prune` and `akm-run delete`: the retention verbs' arguments checked, akm_run.retention
asked, and what it did said (text or JSON)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from akm_run import exitcodes, kept, retention, wording
from akm_run.console import emit, fail
from akm_run.durations import parse_age
from akm_run.hints import Hints
from akm_run.locks import LockHeld
from akm_run.store import Store


def after(code: int, store: Store, state_dir: Path) -> int:
    """`run`'s exit code, after $AKM_RUN_RETENTION pruned (`automatic`)."""
    automatic(store, state_dir)
    return code


def automatic(store: Store, state_dir: Path) -> None:
    """`$AKM_RUN_RETENTION` after a drive: say on stderr what it deleted; a failure to prune never
    changes how the command ends (the next drive tries again)."""
    try:
        done = retention.automatic(store, state_dir)
    except Exception as error:  # noqa: BLE001 - the drive's own result stands
        print(f"akm-run: {wording.retention_said(outcome=error)}", file=sys.stderr)
        return
    if done is not None and done.runs:
        deleted = wording.pruned_count(count=len(done.runs), verb="deleted")
        print(f"akm-run: {wording.retention_said(outcome=deleted)}", file=sys.stderr)


def retention_refusal() -> int | None:
    """Exit 2, before anything is published, when `$AKM_RUN_RETENTION` is set but not an age."""
    value = os.environ.get(retention.ENV, "")
    if not value:
        return None
    try:
        parse_age(value, f"${retention.ENV}")
    except ValueError as error:
        return fail(wording.bad_duration(error=error))
    return None


def rule_of(args: argparse.Namespace, now: float) -> retention.Rule | int:
    """The rule `prune`'s options state, or the exit code after saying why they are unusable."""
    try:
        age_ms = parse_age(args.older_than, "--older-than")
    except ValueError as error:
        return fail(wording.bad_duration(error=error))
    given = ",".join(retention.STATUSES) if args.status is None else args.status
    statuses = frozenset(s.strip() for s in given.split(","))
    if not statuses <= set(retention.STATUSES):
        return fail(wording.bad_prune_status(choices=", ".join(retention.STATUSES), given=given))
    return retention.Rule(now - age_ms / 1000, statuses, args.keep_last, args.ref)


def prune(store: Store | None, state_dir: Path, args: argparse.Namespace) -> int:
    """`prune`: delete (or, with --dry-run, list) the settled top-level runs the options reach."""
    rule = rule_of(args, time.time())
    if isinstance(rule, int):
        return rule
    if store is None:  # no state database: nothing to prune
        done = retention.Selection([], {})
    else:
        chosen = retention.select(store, rule)
        done = chosen if args.dry_run else retention.delete(store, state_dir, chosen)
        if args.vacuum and not args.dry_run:
            store.vacuum()
    document = _document(done, rule, args.dry_run)
    emit(document, _text(done, args.dry_run), args.format)
    return exitcodes.COMPLETED


def _document(done: retention.Selection, rule: retention.Rule, dry_run: bool) -> dict[str, Any]:
    runs = [
        {"id": run.id, "ref": run.ref, "status": run.status, "updatedAt": run.updated_at, "runs": tree}
        for run, tree in done.runs
    ]
    return {
        "dryRun": dry_run,
        "before": rule.before,
        "deleted" if not dry_run else "wouldDelete": runs,
        "kept": dict(sorted(done.kept.items())),
        "busy": [run.id for run, _ in done.busy],
    }


def _text(done: retention.Selection, dry_run: bool) -> str:
    verb = "would delete" if dry_run else "deleted"
    said = [(verb, each) for each in done.runs] + [("kept (being driven):", each) for each in done.busy]
    lines = [
        wording.pruned_run(
            verb=verb, run=run.id, ref=run.ref, status=run.status, when=_when(run.updated_at), runs=len(tree)
        )
        for verb, (run, tree) in said
    ]
    lines.append(wording.pruned_count(count=len(done.runs), verb="would be deleted" if dry_run else "deleted"))
    lines += [
        wording.paused_kept(count=n) if status == "paused" else wording.unsettled_kept(count=n, status=status)
        for status, n in sorted(done.kept.items())
    ]
    return "\n".join(lines) + "\n"


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def delete(store: Store, state_dir: Path, run_id: str, hints: Hints, fmt: str) -> int:
    """`delete RUN`: one settled top-level run and everything it left. The store holds the run."""
    row = store.run(run_id)
    assert row is not None
    if row.parent_run_id is not None:
        root = store.root_of(row.id)
        return fail(wording.delete_a_child(run=row.id, root=root, command=hints("delete", root)))
    if row.status not in ("completed", "failed"):
        return fail(wording.delete_unsettled(run=row.id, status=row.status, command=hints("abandon", row.id)))
    if row.paused is not None:
        return fail(wording.delete_paused(run=row.id, command=hints("unpause", row.id)))
    try:
        with store.lock(row.id):
            current = store.run(row.id)
            if current is None or current.status not in ("completed", "failed"):  # resumed meanwhile
                status = current.status if current else "gone"
                return fail(wording.delete_unsettled(run=row.id, status=status, command=hints("abandon", row.id)))
            if current.paused is not None:  # paused meanwhile: a pause takes no lock
                return fail(wording.delete_paused(run=row.id, command=hints("unpause", row.id)))
            repos = kept.before_deletion(store, store.run_tree(row.id))  # git's work, outside the transaction
            with store.transaction():
                tree = store.run_tree(row.id)
                store.delete_tree(tree)
    except LockHeld as held:
        return fail(wording.being_driven(held=held))
    for each in tree:
        retention.remove_files(state_dir, each)
    kept.after_deletion(repos)
    emit({"deleted": row.id, "runs": tree}, wording.deleted_run(run=row.id, runs=len(tree)) + "\n", fmt)
    return exitcodes.COMPLETED
