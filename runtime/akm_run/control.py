"""The operator verbs `skip`, `retry`, `pause` and `unpause`: each parses nothing more than its
arguments and calls akm_run.operator, over the store and lock handling akm_run.commands shares."""

from __future__ import annotations

import argparse
import getpass
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from akm_run import core, exitcodes, operator, preflighting, wording
from akm_run import planformat as pf
from akm_run.commands import _continued, _locked, hints_for
from akm_run.console import as_given, emit, fail, utf8
from akm_run.hints import Hints
from akm_run.outcomes import MAX_OUTPUT_BYTES
from akm_run.rows import RunRow, StepRow, StepStatus
from akm_run.signing import read_limited
from akm_run.store import Store
from akm_run.storedplans import stored_plan
from akm_run.stores import existing as _existing
from akm_run.stores import shared_store as _shared
from akm_run.strictjson import NotStrict, loads
from akm_run.wording import Failure


def _by(args: argparse.Namespace) -> str | Failure:
    """Who makes the change: --by, else the OS user name (as `approve` records it)."""
    by: str = args.by or getpass.getuser()
    return by if utf8(by) else wording.user_not_text(name=as_given(by))


def _step_of(plan: pf.Plan, store: Store, row: RunRow, step_id: str) -> StepRow | Failure:
    current = store.step(row.id, step_id)
    if current is None or not any(s["stepId"] == step_id for s in core.every_step(plan)):
        return wording.no_step(run=row.id, step=step_id, steps=", ".join(s.step_id for s in store.steps(row.id)))
    return current


def _stated_output(args: argparse.Namespace) -> tuple[bool, Any] | Failure:
    """The output `skip` was given (strict JSON, from --output or --output-file), or why it is unusable."""
    text: str | None = args.output
    if args.output_file is not None:
        try:  # as a unit's stdout is bounded, and as a params file is read: a regular file, no FIFO or device
            text = read_limited(args.output_file, MAX_OUTPUT_BYTES).decode("utf-8")
        except (OSError, ValueError) as error:  # ValueError: not regular, too large, or not UTF-8
            return wording.skip_output_unreadable(path=args.output_file, error=error)
    if text is None:
        return False, None
    try:
        return True, loads(text)
    except (ValueError, NotStrict) as error:
        return wording.skip_output_invalid(step=args.step_id, error=f"not strict JSON: {error}")


def _said(
    args: argparse.Namespace, document: dict[str, Any], done: list[tuple[str, str]], hint: Hints
) -> Callable[[bool], None]:
    """What a change says once made: its document with --format json, else its lines and what comes next."""

    def say(submitted: bool) -> None:
        if args.format == "json":
            emit({**document, "submitted": submitted}, "", "json")
        else:
            _continued(done, submitted, hint)

    return say


@dataclass
class _Change:
    """What `skip` and `retry` decide on, under the run's lock: the run, its plan and the named step,
    who makes the change, and what is said once it is made (`done` lines, the JSON `document`)."""

    store: Store
    plan: pf.Plan
    row: RunRow
    step: StepRow
    by: str
    hint: Hints
    done: list[tuple[str, str]] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)


def _on_step(args: argparse.Namespace, change: Callable[[_Change], int], refused: Failure | None = None) -> int:
    """`skip` and `retry`: who makes the change (then what else the verb `refused` in its arguments),
    then, holding the run's lock, the named step found and `change` decided and made; what it did is
    said once the lock is released."""
    by, hint = _by(args), hints_for(args)
    if isinstance(by, Failure):
        return fail(by)
    if refused is not None:
        return fail(refused)
    done: list[tuple[str, str]] = []
    document: dict[str, Any] = {}

    def locked(store: Store, row: RunRow) -> int:
        plan = stored_plan(row)
        current = _step_of(plan, store, row, args.step_id)
        if isinstance(current, Failure):
            return fail(current)
        return change(_Change(store, plan, row, current, by, hint, done, document))

    return _locked(args, locked, then=_said(args, document, done, hint))


def skip(args: argparse.Namespace) -> int:
    stated = _stated_output(args)

    def change(c: _Change) -> int:
        assert not isinstance(stated, Failure)  # refused before the lock was taken
        decision = operator.Skip(args.step_id, c.by, args.note, *stated)
        approve = c.hint("approve", c.row.id, args.step_id, "--reject")
        if (refused := operator.skip_refusal(c.plan, c.row, c.step, decision, approve)) is not None:
            return fail(refused)
        if (checked := _preflighted(args, c.store, c.row, {args.step_id: "skipped"})) is not None:
            return checked  # the drive it submits would fail its preflight: the run is not changed
        operator.skip(c.store, c.plan, c.row, decision)
        c.done.append((wording.skipped(step=args.step_id, run=c.row.id), c.row.id))
        c.document.update(runId=c.row.id, stepId=args.step_id, output=decision.output, by=c.by)
        return exitcodes.COMPLETED

    return _on_step(args, change, refused=stated if isinstance(stated, Failure) else None)


def retry(args: argparse.Namespace) -> int:
    def change(c: _Change) -> int:
        asked = operator.Retry(args.step_id, c.by, args.unit)
        reopened = operator.retry_refusal(c.plan, c.row, c.step, asked) or operator.reopening(
            c.store, c.plan, c.row, asked
        )
        if isinstance(reopened, Failure):
            return fail(reopened)
        if (checked := _preflighted(args, c.store, c.row, dict.fromkeys(reopened.steps, "pending"))) is not None:
            return checked
        if args.format != "json":  # the set, before anything changes
            print(wording.retry_reopens(step=args.step_id, run=c.row.id, steps=", ".join(reopened.steps)), flush=True)
        operator.retry(c.store, c.row, asked, reopened)
        steps, units = ", ".join(reopened.steps), len(reopened.units)
        c.done.append((wording.retried(steps=steps, run=c.row.id, units=units), c.row.id))
        c.document.update(runId=c.row.id, stepId=args.step_id, steps=reopened.steps, units=reopened.units, by=c.by)
        return exitcodes.COMPLETED

    return _on_step(args, change)


def _preflighted(args: argparse.Namespace, store: Store, row: RunRow, becoming: dict[str, StepStatus]) -> int | None:
    """`skip` and `retry` on the pool, which submit the run's next drive: exit 5, before the run is
    changed, when the steps that can still run once `becoming` is done would fail their preflight."""
    if _shared(args) is None or preflighting.skipped(args):
        return None
    return preflighting.before_drive(args, store, row, becoming=becoming)


def pause(args: argparse.Namespace) -> int:
    return _flag(args, pausing=True)


def unpause(args: argparse.Namespace) -> int:
    return _flag(args, pausing=False)


def _flag(args: argparse.Namespace, *, pausing: bool) -> int:
    """`pause` and `unpause`: one short transaction, never the run lock (a live driver reads it)."""
    by, hint = _by(args), hints_for(args)
    if isinstance(by, Failure):
        return fail(by)
    store, row = _existing(args, args.run_id)
    if store is None or row is None:
        return fail(wording.no_run_to_change(run=args.run_id))
    steps: list[str] = list(dict.fromkeys(args.steps))
    known = [s.step_id for s in store.steps(row.id)]
    if missing := [s for s in steps if s not in known]:
        return fail(wording.no_step(run=row.id, step=missing[0], steps=", ".join(known)))
    what = wording.steps_of_run(steps=", ".join(steps), run=row.id) if steps else wording.the_run(run=row.id)
    document: dict[str, Any] = {"runId": row.id, "steps": steps, "by": by}
    if pausing:
        operator.pause(store, row, steps, by, now=args.now)
        text = wording.paused(what=what, by=by, command=hint("unpause", row.id, *steps))
        document["now"] = args.now
    elif lifted := operator.unpause(store, row, steps, by):
        root = row
        while root.parent_run_id is not None and (parent := store.run(root.parent_run_id)) is not None:
            root = parent  # a child run goes on with the drive of its top-level run
        text = wording.unpaused(what=what, by=by, command=hint("run", root.id))
        document["lifted"] = lifted
    else:
        text = wording.not_paused(what=what)
        document["lifted"] = []
    emit(document, text + "\n", args.format)
    return exitcodes.COMPLETED


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "skip": skip,
    "retry": retry,
    "pause": pause,
    "unpause": unpause,
}
