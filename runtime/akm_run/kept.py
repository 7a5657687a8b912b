"""Kept worktrees (`akm-run worktrees`): the worktrees that attempts left behind with changes, listed
with what changed, and removed on request (`--prune` the clean ones, `--dirty` the rest), each removal
journaled as `worktree.removed`; `status` and `logs` show the same entries. Retention (`prune`,
`delete`) removes a run's kept worktrees before its rows go."""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from akm_run import exitcodes, wording, worktrees
from akm_run.console import emit, fail
from akm_run.store import Store


@dataclass(frozen=True, slots=True)
class Kept:
    """One kept worktree: its attempt, path, and the changed files journaled when it was kept."""

    run_id: str
    step_id: str
    unit_id: str
    attempt: int
    path: str
    changed: int

    def document(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "stepId": self.step_id,
            "unitId": self.unit_id,
            "attempt": self.attempt,
            "path": self.path,
            "changedFiles": self.changed,
        }


def kept(store: Store, run_ids: list[str] | None = None) -> list[Kept]:
    """The kept worktrees of these runs (all runs: None), oldest first."""
    found = []
    for run_id in run_ids if run_ids is not None else [None]:
        found += store.kept_worktrees(run_id)
    counts: dict[tuple[str, str | None, int], int] = {}
    for run_id in {r for r, _, _, _ in found}:
        for kind, _step, unit, data in store.events(run_id):
            if kind == "worktree.retained":
                counts[(run_id, unit, data["attempt"])] = data.get("changed", 0)
    return [
        Kept(run_id, step_id, unit_id, row.attempt, row.worktree or "", counts.get((run_id, unit_id, row.attempt), 0))
        for run_id, step_id, unit_id, row in found
    ]


def tree(store: Store, run_id: str) -> list[str]:
    """A run and its descendants, parents first."""
    ids = [run_id]
    for child in store.child_runs(run_id):
        ids += tree(store, child.id)
    return ids


def line(entry: dict[str, Any]) -> str:
    """`kept worktree …/review:9f3a~a1 (3 changed files)`, as status, logs and worktrees print it."""
    count = entry["changedFiles"]
    changed = f"{count} changed file{'' if count == 1 else 's'}"
    return wording.kept_worktree(path=short(entry["path"]), changed=changed)


def short(path: str) -> str:
    """A path by its last component: the state directory's location is the same for every entry."""
    return "…/" + Path(path).name


def listing(store: Store, run_ids: list[str] | None) -> dict[str, Any]:
    """`worktrees` without `--prune`: each kept worktree with the files that are changed in it now."""
    entries = []
    for each in kept(store, run_ids):
        entry = each.document()
        path = Path(each.path)
        entry["exists"] = worktrees.present(path)
        if entry["exists"]:
            try:
                entry["files"] = worktrees.changes(path)
                entry["changedFiles"] = len(entry["files"])
            except worktrees.GitError as error:
                entry["error"] = str(error)
        entries.append(entry)
    return {"worktrees": entries}


def prune(store: Store, run_ids: list[str] | None, *, dirty: bool) -> dict[str, Any]:
    """Remove the kept worktrees that are clean now (with `dirty`, all of them) and those already
    gone, journal each removal, then let git forget worktrees whose directories are gone."""
    removed, left, repos = [], [], set()
    for each in kept(store, run_ids):
        path = Path(each.path)
        run = store.run(each.run_id)
        if run is not None and run.base_repo:
            repos.add(run.base_repo)
        entry = each.document()
        try:
            changed = worktrees.changes(path) if worktrees.present(path) else []
            if changed and not dirty:
                entry["changedFiles"] = len(changed)
                left.append(entry)
                continue
            worktrees.drop_link(path)
            if worktrees.present(path):
                repos.add(worktrees.git(["rev-parse", "--path-format=absolute", "--git-common-dir"], path).strip())
                worktrees.remove(path)
        except worktrees.GitError as error:
            entry["error"] = str(error)
            left.append(entry)
            continue
        store.remove_worktree(each.run_id, each.unit_id, each.step_id, each.attempt, each.path, by="prune")
        removed.append(entry)
    for repo in sorted(repos):
        if Path(repo).is_dir():
            try:
                worktrees.prune(Path(repo))
            except worktrees.GitError:
                pass  # a repository that moved: its records are pruned by git's own gc
    return {"removed": removed, "worktrees": left}


def before_deletion(store: Store, tree: list[str]) -> set[str]:
    """Before a run tree's rows are deleted: remove its kept worktrees, with changes or not, as
    `worktrees --prune --dirty` does (journaled, so a deletion that then does not happen leaves a
    journal that says so). Returns the repositories of the tree's base commits, for after_deletion."""
    prune(store, tree, dirty=True)
    return {row.base_repo for run_id in tree if (row := store.run(run_id)) is not None and row.base_repo}


def after_deletion(repos: set[str]) -> None:
    """Once a deleted tree's files are gone (a crashed attempt's worktree, never journaled, among
    them): let each repository forget the worktrees whose directories are gone."""
    for repo in sorted(repos):
        if Path(repo).is_dir():
            with contextlib.suppress(worktrees.GitError):  # a repository that moved: git's own gc prunes it
                worktrees.prune(Path(repo))


def text(document: dict[str, Any]) -> str:
    """The text of a listing or of a prune."""
    lines = [wording.removed_worktree(path=e["path"]) for e in document.get("removed", [])]
    for entry in document["worktrees"]:
        lines.append(f"{line(entry)}  {entry['path']}" + (f"  ({entry['error']})" if "error" in entry else ""))
        lines += [f"    {name}" for name in entry.get("files", [])]
    if not lines:
        lines.append(wording.no_kept_worktrees())
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace, store: Store | None, where: str) -> int:
    """`akm-run worktrees [RUN] [--prune [--dirty]]` on the store the command opened (None: no
    state database yet); `where` names the store in messages."""
    if args.dirty and not args.prune:
        return fail(wording.dirty_needs_prune())
    run_ids = None
    if args.run_id is not None:
        row = None if store is None else store.run(args.run_id)
        if store is None or row is None:
            return fail(wording.no_run(run=args.run_id, where=where))
        run_ids = tree(store, row.id)
    if store is None:
        document: dict[str, Any] = {"worktrees": []}
    elif args.prune:
        document = prune(store, run_ids, dirty=args.dirty)
    else:
        document = listing(store, run_ids)
    emit(document, text(document), args.format)
    failed = any("error" in entry for entry in document["worktrees"])  # a removal git refused: said above
    return exitcodes.FAILED if failed else exitcodes.COMPLETED
