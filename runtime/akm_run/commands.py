"""The `akm-run` verbs: each takes the parsed arguments and returns an exit code."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from akm_run import children, exitcodes, operations, progress, report
from akm_run import planformat as pf
from akm_run.console import emit, on_signals, state_dir
from akm_run.durations import parse_option as parse_duration
from akm_run.engine import Engine, Options, stored_plan
from akm_run.hints import Hints
from akm_run.identity import new_run_id
from akm_run.locks import LockHeld, RunLock
from akm_run.params import ParamsError, collect
from akm_run.plan import PlanError, plan_hash
from akm_run.signing import SignatureRefused, SigningUnavailable
from akm_run.store import RunRow, StepRow, Store, writable
from akm_run.trust import Admitted, admit, allowed_signers, recheck

EXIT_OF = {"completed": exitcodes.COMPLETED, "failed": exitcodes.FAILED, "blocked": exitcodes.BLOCKED,
           "aborted": exitcodes.INTERRUPTED}  # fmt: skip


def _fail(message: str, code: int) -> int:
    print(f"akm-run: {message}", file=sys.stderr)
    return code


def _existing(store_dir: Path, run_id: str, *, reading: bool = False) -> tuple[Store | None, RunRow | None]:
    """The store and a run in it (None, None when there is no state database); `reading` opens a
    read-only state directory too."""
    if not (store_dir / "state.db").exists():
        return None, None
    store = Store.for_reading(store_dir) if reading else Store(store_dir)
    return store, store.run(run_id)


def _unwritable(directory: Path) -> int | None:
    """Exit 2, before anything is published, when the state directory cannot be written."""
    if writable(directory):
        return None
    return _fail(f"state directory {directory} cannot be written (read-only or not permitted): nothing was "
                 f"published; pass --state-dir or set AKM_STATE_DIR to a writable directory", exitcodes.USAGE)  # fmt: skip


# -- run ----------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    directory = state_dir(args)
    try:
        timeout_ms = parse_duration(args.timeout) if args.timeout else None
    except ValueError as error:
        return _fail(str(error), exitcodes.USAGE)
    if args.max_concurrency < 1:
        return _fail("--max-concurrency must be at least 1", exitcodes.USAGE)
    if args.workdir is not None and not args.workdir.is_dir():
        return _fail(f"--workdir {args.workdir} is not a directory", exitcodes.USAGE)
    path = Path(args.target)
    signers = allowed_signers(args.allowed_signers)
    if args.signature is not None and signers is None:
        return _fail("--signature needs --allowed-signers (or $AKM_RUN_ALLOWED_SIGNERS)", exitcodes.USAGE)
    publishing = path.exists()
    if publishing:
        admitted = _admit(path, args.expect_hash, signers, args.signature)
        if not isinstance(admitted, Admitted):  # refused before anything is written or started
            return admitted
        plan = admitted.plan
        try:
            params = collect(plan.get("params", {}), args.param, args.params_file)
        except ParamsError as error:
            return _fail(f"bad params: {error}", exitcodes.USAGE)
        if (refused := _unwritable(directory)) is not None:
            return refused
        workdir = (args.workdir or Path(".")).absolute()
        agent_cmd = args.agent_cmd or os.environ.get("AKM_AGENT_CMD") or None
        store = Store(directory)
        run_id = store.publish_run(new_run_id(), plan, plan_hash(plan), params, signature=admitted.signature,
                                   workdir=str(workdir), agent_cmd=agent_cmd)  # fmt: skip
    else:
        if (directory / "state.db").exists() and (refused := _unwritable(directory)) is not None:
            return refused
        store_or_none, row = _existing(directory, args.target)
        if store_or_none is None or row is None:
            if _names_a_file(args):
                return _fail(f"plan file {path} does not exist", exitcodes.USAGE)
            return _fail(f"no plan file and no run named {args.target!r} (state dir {directory})", exitcodes.USAGE)
        if args.param or args.params_file or args.signature:
            return _fail("params and the signature are fixed when a run is published; "
                         "drive an existing run without them", exitcodes.USAGE)  # fmt: skip
        store, run_id = store_or_none, row.id
        if args.expect_hash and row.plan_hash != args.expect_hash:
            return _fail(f"refused run {run_id}: its plan hash is {row.plan_hash}, not {args.expect_hash}",
                         exitcodes.REFUSED)  # fmt: skip
        workdir, agent_cmd = remembered(row, args.workdir, args.agent_cmd)
        if not workdir.is_dir():
            return _fail(f"the run's workdir {workdir} is not a directory; pass --workdir", exitcodes.USAGE)
    options = Options(directory, workdir, agent_cmd, args.max_concurrency, timeout_ms,
                      progress=progress.for_this_process(), hints=Hints.of(directory))  # fmt: skip
    if not publishing:  # checked under the run's lock, on the row the drive then reads

        def admit_stored(row: RunRow) -> None:
            if row.id == run_id:  # the child runs it drives are covered by this run's check
                recheck(store, row, signers)

        options.admit = admit_stored
    return drive(store, run_id, options, args.format)


def _admit(path: Path, expect_hash: str | None, signers: Path | None, signature: Path | None) -> Admitted | int:
    """The admitted plan file, or the exit code after saying why it was refused."""
    try:
        return admit(path, expect_hash, signers, signature)
    except (PlanError, SignatureRefused) as error:
        return _fail(f"refused {path}: {error}", exitcodes.REFUSED)
    except SigningUnavailable as error:
        return _fail(f"cannot check the signature of {path}: {error}", exitcodes.USAGE)


def _recheck(store: Store, row: RunRow, signers: Path | None) -> int | None:
    """None when the stored run may be driven again, else the exit code after saying why not."""
    try:
        recheck(store, row, signers)
    except (PlanError, SignatureRefused) as error:
        return _fail(f"refused run {row.id}: {error}", exitcodes.REFUSED)
    except SigningUnavailable as error:
        return _fail(f"cannot check the signature of run {row.id}: {error}", exitcodes.USAGE)
    return None


def _names_a_file(args: argparse.Namespace) -> bool:
    """Whether a target that is neither a file nor a run was meant as a plan file."""
    target: str = args.target
    return bool(args.param or args.params_file) or target.endswith(".json") or os.sep in target


def remembered(row: RunRow, workdir: Path | None, agent_cmd: str | None) -> tuple[Path, str | None]:
    """The workdir and agent command a run was started with, unless the command line overrides them."""
    chosen = workdir if workdir is not None else Path(row.workdir) if row.workdir else Path(".")
    return chosen.absolute(), agent_cmd or row.agent_cmd


def drive(store: Store, run_id: str, options: Options, fmt: str) -> int:
    """Drive a run with signal handling, print its result and return its exit code."""
    engine = Engine(store, options)

    def stop(signum: int, frame: Any) -> None:
        engine.why_aborted = "interrupted by a signal"
        engine.abort.set()

    on_signals(stop)
    try:
        result = engine.drive(run_id)
    except LockHeld as held:
        return _fail(f"{held}; wait for it to finish, or stop pid {held.pid}", exitcodes.LOCKED)
    except PlanError as error:
        return _fail(f"refused run {run_id}: its stored plan does not verify: {error}", exitcodes.REFUSED)
    except SignatureRefused as error:
        return _fail(f"refused run {run_id}: {error}", exitcodes.REFUSED)
    except SigningUnavailable as error:
        return _fail(f"cannot check the signature of run {run_id}: {error}", exitcodes.USAGE)
    except Exception as error:  # noqa: BLE001 - the attempt is finished; the run stays active and resumable
        return _internal(error, run_id, options)
    finally:
        options.progress.close()
    row = store.run(run_id)
    assert row is not None
    emit(report.result_document(result, row), report.result_text(result, row, options.hints), fmt)
    if result.error is not None and result.error["code"] == "WORKFLOW_OUTPUT_INVALID":
        return exitcodes.FAILED
    return EXIT_OF.get(result.status, exitcodes.FAILED)


def _internal(error: Exception, run_id: str, options: Options) -> int:
    """A drive that hit an internal error: say what happened (a state directory removed under the
    driver is named as such) and exit 70; the attempt was finished and the run stays resumable."""
    database = options.state_dir / "state.db"
    if not database.exists():
        print(f"akm-run: error: the state database {database} was removed while run {run_id} was being driven "
              f"({type(error).__name__}: {error}); nothing more can be recorded", file=sys.stderr)  # fmt: skip
        return exitcodes.INTERNAL
    return _fail(f"internal error while driving run {run_id}: {type(error).__name__}: {error}; the run stays "
                 f"active and resumable: `{options.hints('run', run_id)}`", exitcodes.INTERNAL)  # fmt: skip


# -- status, list --------------------------------------------------------------------------------------


def _reading(args: argparse.Namespace) -> tuple[Store, RunRow] | int:
    """The run a reading command names, or the most recent top-level run when it names none."""
    directory = state_dir(args)
    if args.run_id is None:
        if not (directory / "state.db").exists():
            return _fail(f"no runs yet in {directory}", exitcodes.USAGE)
        store = Store.for_reading(directory)
        latest = store.latest_run()
        if latest is None:
            return _fail(f"no runs yet in {directory}", exitcodes.USAGE)
        return store, latest
    found, row = _existing(directory, args.run_id, reading=True)
    if found is None or row is None:
        return _fail(f"no run named {args.run_id!r} (state dir {directory})", exitcodes.USAGE)
    return found, row


def status(args: argparse.Namespace) -> int:
    found = _reading(args)
    if isinstance(found, int):
        return found
    store, row = found
    document = report.status_document(store, row, Hints.of(state_dir(args)))
    emit(document, report.status_text(document), args.format)
    return exitcodes.COMPLETED


def list_runs(args: argparse.Namespace) -> int:
    directory = state_dir(args)
    runs = (
        Store.for_reading(directory).runs(children=args.children, status=args.status)
        if (directory / "state.db").exists()
        else []
    )
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
        return _fail(f"run {row.id} has no step {args.step!r} (its steps: {', '.join(steps)})", exitcodes.USAGE)
    document = report.logs_document(store, row, args.step, args.unit, args.attempt)
    emit(document, report.logs_text(document), args.format)
    return exitcodes.COMPLETED


# -- resume, approve, abandon --------------------------------------------------------------------------


def _locked(args: argparse.Namespace, action: Callable[[Store, RunRow], int], *, trusted: bool = True) -> int:
    """Run a state change on an existing run while holding its lock (never beside a live driver);
    a `trusted` change (one that lets the run go on) first re-checks the run's plan and signature."""
    directory = state_dir(args)
    store, row = _existing(directory, args.run_id)
    if store is None or row is None:
        return _fail(f"no run named {args.run_id!r}", exitcodes.USAGE)
    try:
        with RunLock(directory, row.id):
            refused = _recheck(store, row, allowed_signers(args.allowed_signers)) if trusted else None
            return refused if refused is not None else action(store, row)
    except LockHeld as held:
        return _fail(f"{held}; it cannot be changed while it is being driven", exitcodes.LOCKED)
    except PlanError as error:
        return _fail(f"refused run {row.id}: its stored plan does not verify: {error}", exitcodes.REFUSED)


def resume(args: argparse.Namespace) -> int:
    hint = Hints.of(state_dir(args))

    def reopen(store: Store, row: RunRow) -> int:
        if row.status in ("active", "completed"):
            more = f"; drive it with `{hint('run', row.id)}`" if row.status == "active" else ""
            print(f"run {row.id} is {row.status}: nothing to reopen{more}")
            return exitcodes.COMPLETED
        reopened = operations.reopen(store, row)
        print(f"reopened run {row.id}: {', '.join(reopened) or 'no steps'} pending again; "
              f"continue with `{hint('run', row.id)}`")  # fmt: skip
        return exitcodes.COMPLETED

    return _locked(args, reopen)


def approve(args: argparse.Namespace) -> int:
    decision = operations.Decision(args.step_id, args.by or getpass.getuser(), not args.reject, args.note)
    hint = Hints.of(state_dir(args))

    def decide(store: Store, row: RunRow) -> int:
        plan = stored_plan(row)
        current = store.step(row.id, args.step_id)
        if (waiting := _child_waits(store, hint, plan, row, current)) is not None:
            return _fail(waiting, exitcodes.USAGE)
        if (refused := operations.approval_refusal(plan, row, current, decision)) is not None:
            return _fail(refused, exitcodes.USAGE)
        if operations.decide(store, plan, row, decision):
            print(f"rejected step {args.step_id} of run {row.id}: the run failed (approval_rejected); "
                  f"see `{hint('status', row.id)}`")  # fmt: skip
        else:
            verb = "rejected" if args.reject else "approved"
            print(f"{verb} step {args.step_id} of run {row.id}; continue with `{hint('run', row.id)}`")
        return exitcodes.COMPLETED

    return _locked(args, decide)


def _child_waits(store: Store, hint: Hints, plan: pf.Plan, row: RunRow, current: StepRow | None) -> str | None:
    """For `approve` on a step that waits on its child run: the child's own command to run instead."""
    step = next((s for s in plan["steps"] if current is not None and s["stepId"] == current.step_id), None)
    if step is None or step["kind"] == "route" or step["target"]["kind"] != "child-workflow" or current is None:
        return None
    clear = children.clearing(store, hint, row)[1] if current.status == "blocked" else []
    if len(clear) <= 1:
        return None
    return (f"step {current.step_id} of run {row.id} composes a child run; clear the child with `{clear[0]}`, "
            f"then {', then '.join(f'`{c}`' for c in clear[1:])} and `{hint('run', row.id)}`")  # fmt: skip


def abandon(args: argparse.Namespace) -> int:
    def give_up(store: Store, row: RunRow) -> int:
        if operations.abandon(store, row):
            print(f"abandoned run {row.id}")
        else:
            print(f"run {row.id} is already {row.status}")
        return exitcodes.COMPLETED

    return _locked(args, give_up, trusted=False)  # stopping a run needs no trust in its plan


def verify(args: argparse.Namespace) -> int:
    signers = allowed_signers(args.allowed_signers)
    if args.signature is not None and signers is None:
        return _fail("--signature needs --allowed-signers (or $AKM_RUN_ALLOWED_SIGNERS)", exitcodes.USAGE)
    admitted = _admit(args.plan, args.expect_hash, signers, args.signature)
    if not isinstance(admitted, Admitted):
        return admitted
    print(admitted.summary(args.plan))
    return exitcodes.COMPLETED


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": run,
    "status": status,
    "list": list_runs,
    "logs": logs,
    "resume": resume,
    "approve": approve,
    "abandon": abandon,
    "verify": verify,
}
