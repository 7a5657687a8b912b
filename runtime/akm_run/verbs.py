"""`akm-run preflight`, `verify`, `delete` and `worktrees`: verbs that find their plan or run as the others do
(akm_run.commands) and hand it to their stage (akm_run.preflighting, akm_run.pruning, akm_run.kept)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from akm_run import exitcodes, kept, preflighting, pruning, wording
from akm_run.commands import _admit
from akm_run.console import fail, state_dir
from akm_run.params import ParamsError, collect
from akm_run.storedplans import stored_plan
from akm_run.stores import existing as _existing
from akm_run.stores import hints_for, open_store
from akm_run.stores import names_a_file as _names_a_file
from akm_run.stores import shared_store as _shared
from akm_run.stores import where as _where
from akm_run.trust import Admitted, allowed_signers


def preflight(args: argparse.Namespace) -> int:
    """`akm-run preflight PLAN|RUN_ID`: the checks `run` does before it publishes or drives."""
    pooled, path = _shared(args) is not None, Path(args.target)
    if path.exists():
        signers = allowed_signers(args.allowed_signers)
        admitted = _admit(path, args.expect_hash, signers, args.signature)
        if not isinstance(admitted, Admitted):
            return admitted
        try:
            collect(admitted.plan.get("params", {}), args.param, args.params_file)
        except ParamsError as error:
            return fail(wording.bad_params(error=error))
        return preflighting.report(admitted.plan, preflighting.host(args, pooled=pooled), None, args.format)
    store, row = _existing(args, args.target, reading=True)
    if store is None or row is None:
        if _names_a_file(args):
            return fail(wording.no_plan_file(path=path))
        return fail(wording.no_plan_file_or_run(target=args.target, where=_where(args)))
    checked = preflighting.host(args, row, pooled=pooled)
    return preflighting.report(stored_plan(row), checked, store.steps(row.id), args.format)


def delete(args: argparse.Namespace) -> int:
    store, row = _existing(args, args.run_id)
    if store is None or row is None:
        return fail(wording.no_run(run=args.run_id, where=_where(args)))
    return pruning.delete(store, state_dir(args), row.id, hints_for(args), args.format)


def worktrees(args: argparse.Namespace) -> int:
    """`akm-run worktrees [RUN] [--prune [--dirty]]`: the worktrees attempts kept (akm_run.kept)."""
    return kept.command(args, open_store(args, reading=not args.prune), _where(args))


def verify(args: argparse.Namespace) -> int:
    signers = allowed_signers(args.allowed_signers)
    if args.signature is not None and signers is None:
        return fail(wording.signature_needs_signers())
    admitted = _admit(args.plan, args.expect_hash, signers, args.signature)
    if not isinstance(admitted, Admitted):
        return admitted
    print(admitted.summary(args.plan))
    return exitcodes.COMPLETED


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "preflight": preflight,
    "verify": verify,
    "delete": delete,
    "worktrees": worktrees,
}
