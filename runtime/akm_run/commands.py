"""The `akm-run` verbs: each takes the parsed arguments and returns an exit code."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from akm_run import children, core, exitcodes, operations, preflighting, progress, pruning, report, serving, wording
from akm_run import planformat as pf
from akm_run.budgets import raised as raise_allowance
from akm_run.console import as_given, emit, fail, on_signals, say_where, state_dir, utf8
from akm_run.core import SIGNALLED, DriveResult
from akm_run.database_url import SharedStore, redacted, unusable
from akm_run.drive_errors import drive_failure
from akm_run.durations import parse_option as parse_duration
from akm_run.engine import Engine, Options
from akm_run.exclusive import RunInTheWay, in_the_way
from akm_run.hints import Hints
from akm_run.identity import new_run_id
from akm_run.isolation import publishing_base
from akm_run.locks import LockHeld
from akm_run.notify import deliver, remember, show
from akm_run.params import ParamsError, collect
from akm_run.plan import PlanError, plan_hash
from akm_run.rows import RunRow, StepRow
from akm_run.signing import SignatureRefused, SigningUnavailable
from akm_run.sqlitestore import SQLiteStore, writable
from akm_run.store import Store
from akm_run.storedplans import stored_plan
from akm_run.stores import existing as _existing
from akm_run.stores import hints_for as hints_for
from akm_run.stores import names_a_file as _names_a_file
from akm_run.stores import open_store as _open
from akm_run.stores import shared_store as _shared
from akm_run.stores import where as _where
from akm_run.trust import Admitted, admission, admit, allowed_signers, recheck
from akm_run.wording import Failure

# PG_IMPORT: the shared store's modules (pgstore: psycopg; drives, submitting: DBOS, about 0.6 s of
# start-up) are imported inside the functions that use that store, so the SQLite commands and a
# plain install (without the `postgres` extra) never load them.

EXIT_OF = {
    "completed": exitcodes.COMPLETED,
    "failed": exitcodes.FAILED,
    "blocked": exitcodes.BLOCKED,
    "aborted": exitcodes.INTERRUPTED,
    "paused": exitcodes.BLOCKED,  # nothing more could start (akm-run pause); the run stays active
}


def _unwritable(directory: Path) -> int | None:
    """Exit 2, before anything is published, when the state directory cannot be written."""
    if writable(directory):
        return None
    return fail(wording.state_dir_unwritable(directory=directory))


# -- run ----------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    directory = state_dir(args)
    shared = _shared(args)
    try:
        timeout_ms = parse_duration(args.timeout) if args.timeout else None
    except ValueError as error:
        return fail(wording.bad_duration(error=error))
    if args.max_concurrency < 1:
        return fail(wording.max_concurrency_below_one())
    if (refused := pruning.retention_refusal()) is not None:
        return refused
    checking = not preflighting.skipped(args)
    if not checking and args.workdir is not None and not args.workdir.is_dir():
        return fail(wording.workdir_not_a_directory(workdir=args.workdir))
    path = Path(args.target)
    signers = allowed_signers(args.allowed_signers)
    if args.signature is not None and signers is None:
        return fail(wording.signature_needs_signers())
    publishing = path.exists()
    if publishing:
        published = _publish(args, path, signers, checking)
        if isinstance(published, int):
            return published
        store, run_id, workdir, agent_cmd = published
        remember(store, run_id, args.notify_cmd)
    else:
        if shared is None and (directory / "state.db").exists():
            refused = preflighting.state_refusal(args, args.target) if checking else _unwritable(directory)
            if refused is not None:
                return refused
        store_or_none, row = _existing(args, args.target)
        if store_or_none is None or row is None:
            if _names_a_file(args):
                return fail(wording.no_plan_file(path=path))
            return fail(wording.no_plan_file_or_run(target=args.target, where=_where(args)))
        if args.param or args.params_file or args.signature:
            return fail(wording.fixed_when_published())
        store, run_id = store_or_none, row.id
        remember(store, run_id, args.notify_cmd, row.notify_cmd)
        if args.expect_hash and row.plan_hash != args.expect_hash:
            return fail(wording.run_hash_differs(run=run_id, plan_hash=row.plan_hash, expected=args.expect_hash))
        if (
            checking
            and row.status == "active"
            and (refused := preflighting.before_drive(args, store, row, args.format)) is not None
        ):
            return refused
        if shared is not None:  # checked here, and by the worker at the start of the drive
            return _recheck(store, row, signers) or pooled_run(args, shared, store, run_id, timeout_ms)
        workdir, agent_cmd = remembered(row, args.workdir, args.agent_cmd)
        if not workdir.is_dir():
            return fail(wording.run_workdir_gone(workdir=workdir))
    if shared is not None:
        return pruning.after(pooled_run(args, shared, store, run_id, timeout_ms), store, directory)
    shows, hints = progress.for_this_process(), Hints.of(directory)
    options = Options(directory, workdir, agent_cmd, args.max_concurrency, timeout_ms, progress=shows, hints=hints)
    if not publishing:  # checked under the run's lock, on the row the drive then reads
        options.admit = admission(store, run_id, signers)
    return pruning.after(drive(store, run_id, options, args.format), store, directory)


def _publish(
    args: argparse.Namespace, path: Path, signers: Path | None, checking: bool
) -> tuple[Store, str, Path, str | None] | int:
    """Publish a plan file as a new run (its store, id, workdir, agent command), or say why not: exit code."""
    admitted = _admit(path, args.expect_hash, signers, args.signature)
    if not isinstance(admitted, Admitted):  # refused before anything is written or started
        return admitted
    plan = admitted.plan
    try:
        params = collect(plan.get("params", {}), args.param, args.params_file)
    except ParamsError as error:
        return fail(wording.bad_params(error=error))
    if checking and (refused := preflighting.before_publish(args, plan, args.format)) is not None:
        return refused
    directory = state_dir(args)
    if _shared(args) is None and (refused := _unwritable(directory)) is not None:
        return refused
    workdir = (args.workdir or Path(".")).absolute()
    if isinstance(base := publishing_base(plan, workdir, path), Failure):  # before anything is published
        return fail(base)
    agent_cmd = args.agent_cmd or os.environ.get("AKM_AGENT_CMD") or None
    store = _open(args) or SQLiteStore(directory)
    try:
        run_id = store.publish_run(
            new_run_id(),
            plan,
            plan_hash(plan),
            params,
            signature=admitted.signature,
            workdir=str(workdir),
            agent_cmd=agent_cmd,
            preflight_skipped=not checking,
            base=base,
        )
    except RunInTheWay as way:
        return fail(in_the_way(way, plan["ref"], hints_for(args)))
    return store, run_id, workdir, agent_cmd


def _admit(path: Path, expect_hash: str | None, signers: Path | None, signature: Path | None) -> Admitted | int:
    """The admitted plan file, or the exit code after saying why it was refused."""
    try:
        return admit(path, expect_hash, signers, signature)
    except (PlanError, SignatureRefused) as error:
        return fail(wording.refused_plan_file(path=path, error=error))
    except SigningUnavailable as error:
        return fail(wording.cannot_check_plan_file(path=path, error=error))


def _recheck(store: Store, row: RunRow, signers: Path | None) -> int | None:
    """None when the stored run may be driven again, else the exit code after saying why not."""
    try:
        recheck(store, row, signers)
    except (PlanError, SignatureRefused) as error:
        return fail(wording.refused_run(run=row.id, error=error))
    except SigningUnavailable as error:
        return fail(wording.cannot_check_run(run=row.id, error=error))
    return None


def remembered(row: RunRow, workdir: Path | None, agent_cmd: str | None) -> tuple[Path, str | None]:
    """The workdir and agent command a run was started with, unless the command line overrides them."""
    chosen = workdir if workdir is not None else Path(row.workdir) if row.workdir else Path(".")
    return chosen.absolute(), agent_cmd or row.agent_cmd


def drive(store: Store, run_id: str, options: Options, fmt: str) -> int:
    """Drive a run with signal handling, print its result and return its exit code."""
    engine = Engine(store, options)

    def stop(signum: int, frame: Any) -> None:
        engine.why_aborted = SIGNALLED
        engine.abort.set()

    on_signals(stop)
    try:
        result = engine.drive(run_id)
    except Exception as error:  # noqa: BLE001 - the attempt is finished; the run stays active and resumable
        code, message = drive_failure(error, run_id, options.hints, options.state_dir / "state.db")
        return fail(Failure(message, code))
    finally:
        options.progress.close()
    return show_result(store, result, options.hints, fmt)


def show_result(store: Store, result: DriveResult, hints: Hints, fmt: str) -> int:
    """Print how a drive ended and return the run's exit code."""
    row = store.run(result.run_id)
    assert row is not None
    emit(report.result_document(result, row), report.result_text(result, row, hints), fmt)
    if result.error is not None and result.error["code"] == "WORKFLOW_OUTPUT_INVALID":
        return exitcodes.FAILED
    return EXIT_OF.get(result.status, exitcodes.FAILED)


def pooled_run(args: argparse.Namespace, shared: SharedStore, store: Store, run_id: str, timeout_ms: int | None) -> int:
    """`run` on the shared store: submit the run's next drive to the worker pool and follow it to its
    end (or, with --detach, print the run id); the same documents and exit codes as a local drive."""
    from akm_run import drives, stopping, submitting  # DBOS and psycopg (PG_IMPORT)
    from akm_run.pgstore import PostgresStore  # psycopg (PG_IMPORT)

    assert isinstance(store, PostgresStore)
    hints = hints_for(args)
    workdir = str(args.workdir.absolute()) if args.workdir is not None else None
    submitted = drives.DriveArgs(
        run_id, workdir, args.agent_cmd, args.max_concurrency, timeout_ms, hints, preflight=not args.no_preflight
    )
    shows = progress.for_this_process()
    stop = threading.Event()
    stopping.on_stop_signals(stop, run_id, hints)
    try:
        if args.detach:
            submitting.submit_once(shared.url, submitted)
            print(run_id)
            return exitcodes.COMPLETED
        outcome = submitting.follow(shared.url, store, submitted, shows, stop)
    except submitting.NoPool as error:
        return fail(wording.published_and_waits(run=run_id, error=error))
    except Exception as error:
        if (unreachable := unusable(shared, error)) is None:
            raise
        command = hints("run", run_id)
        return fail(wording.database_gone_while_following(reason=unreachable, run=run_id, command=command))
    finally:
        shows.close()
    if outcome.result is None:
        return fail(Failure(outcome.message or wording.no_result(), outcome.code or exitcodes.INTERNAL))
    if store.broken:  # the server restarted while this followed: the journal is there again
        store = PostgresStore(shared.url)
    return show_result(store, outcome.result, hints, args.format)


# -- status, list --------------------------------------------------------------------------------------


def _reading(args: argparse.Namespace) -> tuple[Store, RunRow] | int:
    """The run a reading command names, or the most recent top-level run when it names none."""
    if args.run_id is None:
        store = _open(args, reading=True)
        latest = None if store is None else store.latest_run()
        if store is None or latest is None:
            shared = _shared(args)
            where = state_dir(args) if shared is None else wording.in_database(url=redacted(shared.url))
            return fail(wording.no_runs_yet(where=where))
        return store, latest
    found, row = _existing(args, args.run_id, reading=True)
    if found is None or row is None:
        return fail(wording.no_run(run=args.run_id, where=_where(args)))
    return found, row


def status(args: argparse.Namespace) -> int:
    found = _reading(args)
    if isinstance(found, int):
        return found
    store, row = found
    say_where(args)
    document = report.status_document(store, row, hints_for(args))
    emit(document, report.status_text(document), args.format)
    return exitcodes.COMPLETED


def list_runs(args: argparse.Namespace) -> int:
    store = _open(args, reading=True)
    runs = [] if store is None else store.runs(children=args.children, status=args.status)
    say_where(args)
    document = report.list_document(runs)
    emit(document, report.list_text(document), args.format)
    return exitcodes.COMPLETED


def logs(args: argparse.Namespace) -> int:
    found = _reading(args)
    if isinstance(found, int):
        return found
    store, row = found
    steps = [s.step_id for s in store.steps(row.id)]
    if args.step is not None and args.step not in steps:
        return fail(wording.no_step(run=row.id, step=args.step, steps=", ".join(steps)))
    if args.notifications:  # the deliveries, not the attempts
        return show(store, row, args.format)
    document = report.logs_document(store, row, args.step, args.unit, args.attempt)
    emit(document, report.logs_text(document), args.format)
    return exitcodes.COMPLETED


def events(args: argparse.Namespace) -> int:
    """`akm-run events`: the run's timeline (akm_run.events); with --follow, `run`'s exit code."""
    from akm_run import events as timeline  # the verb's own module, for this verb only

    request = timeline.asked(args.children, args.since, args.kind, args.follow, args.format)
    if isinstance(request, Failure):
        return fail(request)
    found = _reading(args)
    return found if isinstance(found, int) else timeline.watch(*found, request, _shared(args))


# -- resume, approve, abandon --------------------------------------------------------------------------


def _locked(
    args: argparse.Namespace,
    action: Callable[[Store, RunRow], int],
    *,
    trusted: bool = True,
    then: Callable[[bool], None] | None = None,
) -> int:
    """Run a state change on an existing run while holding its lock (never beside a live driver);
    a `trusted` change (one that lets the run go on) first re-checks the run's plan and signature.
    On the shared store, a trusted change that leaves the run active submits its next drive. `then`
    is told, after a change that succeeded, whether the pool took the run's next drive."""
    store, row = _existing(args, args.run_id)
    if store is None or row is None:
        return fail(wording.no_run_to_change(run=args.run_id))
    # The re-check reads only what never changes in a run (its plan, its signature, its parents) and
    # the allowed signers file: a refused run is refused whoever drives it now, not "try again".
    if trusted and (refused := _recheck(store, row, allowed_signers(args.allowed_signers))) is not None:
        return refused
    try:
        with store.lock(row.id):
            # Read again under the lock: a change that held it meanwhile (an abandon racing an approve,
            # a drive that ended) must not be decided on from the row read before.
            row = store.run(row.id) or row
            code = action(store, row)
            children.hold("locked")
    except LockHeld as held:
        return fail(wording.being_driven(held=held))
    except PlanError as error:
        return fail(wording.stored_plan_refused(run=row.id, error=error))
    continued, submitted, shared = store.run(row.id), False, _shared(args)
    try:
        if shared is not None and trusted and code == 0 and continued and continued.status == "active":
            from akm_run import drives, submitting  # DBOS and psycopg (PG_IMPORT)

            try:
                submitted_drive = drives.DriveArgs(
                    row.id, hints=hints_for(args), preflight=not getattr(args, "no_preflight", False)
                )
                submitting.submit_once(shared.url, submitted_drive, changed=continued != row)
                submitted = True
            except submitting.NoPool as error:
                print(f"akm-run: {error}", file=sys.stderr)
    finally:  # the change is made: it is said even when the database failed the submission
        if then is not None and code == 0:
            then(submitted)
    return code


def resume(args: argparse.Namespace) -> int:
    hint = hints_for(args)

    def reopen(store: Store, row: RunRow) -> int:
        if row.failure is not None and row.failure.get("reason") == operations.ABANDONED["reason"]:
            return fail(wording.abandoned_for_good(run=row.id))
        if args.extra_tokens is not None and (refused := raise_allowance(store, row, args.extra_tokens, args.by)):
            return fail(refused)
        if row.status in ("active", "completed"):
            if row.status == "active":
                print(wording.active_nothing_to_reopen(run=row.id, command=hint("run", row.id)))
            else:
                print(wording.nothing_to_reopen(run=row.id, status=row.status))
            return exitcodes.COMPLETED
        if (stopped := _pool_preflight(args, store, row)) is not None:
            return stopped
        reopened = operations.reopen(store, row)
        done.append((wording.reopened(run=row.id, steps=", ".join(reopened) or "no steps"), row.id))
        return exitcodes.COMPLETED

    done: list[tuple[str, str]] = []  # (what, run id): said once the pool took the next drive, or did not
    return _locked(args, reopen, then=lambda submitted: _continued(done, submitted, hint))


def approve(args: argparse.Namespace) -> int:
    by = args.by or getpass.getuser()
    if not utf8(by):
        return fail(wording.user_not_text(name=as_given(by)))
    decision = operations.Decision(args.step_id, by, not args.reject, args.note)
    hint = hints_for(args)
    decided: list[tuple[str, str]] = []  # (what, run id): said once the pool took the next drive, or did not

    def decide(store: Store, row: RunRow) -> int:
        plan = stored_plan(row)
        current = store.step(row.id, args.step_id)
        if (waiting := _child_waits(store, hint, plan, row, current)) is not None:
            return fail(waiting)
        if (refused := operations.approval_refusal(plan, row, current, decision)) is not None:
            return fail(refused)
        if not args.reject and (checked := _pool_preflight(args, store, row)) is not None:
            return checked  # a rejection is always possible: the worker checks a drive that follows it
        if operations.decide(store, plan, row, decision):
            print(wording.rejected_and_failed(step=args.step_id, run=row.id, command=hint("status", row.id)))
        else:
            verdict = "rejected" if args.reject else "approved"
            decided.append((wording.decided(decision=verdict, step=args.step_id, run=row.id), row.id))
        return exitcodes.COMPLETED

    return _locked(args, decide, then=lambda submitted: _continued(decided, submitted, hint))


def _pool_preflight(args: argparse.Namespace, store: Store, row: RunRow) -> int | None:
    """`resume` and `approve` on the pool, which submit the run's next drive: exit 5, before the run
    is changed, when the steps that can still run would fail their preflight."""
    if _shared(args) is None or preflighting.skipped(args):
        return None
    return preflighting.before_drive(args, store, row)


def _continued(done: list[tuple[str, str]], submitted: bool, hint: Hints) -> None:
    """What `approve` or `resume` did, and what comes next: on the pool, which took the run's next
    drive, there is nothing to do but follow it; elsewhere the run is continued with `run`."""
    for what, run_id in done:
        if submitted:
            print(wording.pool_continues(done=what, command=hint("run", run_id)))
        else:
            print(wording.continue_with(done=what, command=hint("run", run_id)))


def _child_waits(store: Store, hint: Hints, plan: pf.Plan, row: RunRow, current: StepRow | None) -> Failure | None:
    """For `approve` on a step that waits on its child run: the child's own command to run instead."""
    step = next((s for s in core.every_step(plan) if current is not None and s["stepId"] == current.step_id), None)
    if step is None or step["kind"] == "route" or step["kind"] == "parallel":
        return None
    if step["target"]["kind"] != "child-workflow":
        return None
    if current is None:
        return None
    clear = children.clearing(store, hint, row)[1] if current.status == "blocked" else []
    if len(clear) <= 1:
        return None
    then = ", then ".join(f"`{c}`" for c in clear[1:])
    return wording.clear_the_child_first(
        step=current.step_id, run=row.id, first=clear[0], then=then, command=hint("run", row.id)
    )


def abandon(args: argparse.Namespace) -> int:
    def give_up(store: Store, row: RunRow) -> int:
        running = store.interrupted_attempts(row.id)  # no driver: on the pool, they may run on a worker
        if operations.abandon(store, row):
            deliver(store, row.id, hints_for(args))
            if (shared := _shared(args)) is not None and running:
                from akm_run import drives  # DBOS (PG_IMPORT)

                dbos = drives.client(shared.url)  # their workers stop the processes; a queued one never starts
                try:
                    dbos.cancel_workflows([drives.attempt_workflow_id(a.dispatch_id, a.attempt) for _, _, a in running])
                finally:
                    dbos.destroy()
            print(wording.abandoned(run=row.id))
        else:
            print(wording.already_settled(run=row.id, status=row.status))
        return exitcodes.COMPLETED

    return _locked(args, give_up, trusted=False)  # stopping a run needs no trust in its plan


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": run,
    "status": status,
    "list": list_runs,
    "logs": logs,
    "resume": resume,
    "approve": approve,
    "abandon": abandon,
    "events": events,
    "worker": serving.worker,
    "prune": lambda args: pruning.prune(_open(args), state_dir(args), args),
}
