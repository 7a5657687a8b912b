"""Units to their ends: how a drive journals and dispatches the units akm_run.decisions names.

A unit whose completion the journal holds is reused and never dispatched again. Otherwise each
attempt is journaled before it is dispatched and after it ends, and retried as
`decisions.attempt_verdict` says; a map's units run on threads, `width` at a time."""

from __future__ import annotations

import dataclasses
import functools
import json
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akm_run import budgets, core, decisions, identity, wording
from akm_run import planformat as pf
from akm_run.core import Aborted, End, Paused
from akm_run.decisions import Dispatch, FailUnit, Redo, Rows, Unit
from akm_run.dispatch import Dispatcher, Request
from akm_run.journal import Journal
from akm_run.progress import Progress
from akm_run.rows import AttemptFailure


class StepStart:
    """A step the spine started (a `decisions.StartStep`), journaled by the first transaction that
    writes for the step, whichever unit's thread that is: one commit fewer than a transaction of
    its own. Each transaction is handed it and journals it at most once."""

    def __init__(self, step_id: str, index: int) -> None:
        self.step_id, self.index = step_id, index
        self._lock = threading.Lock()
        self._journaled = False

    def journal(self, store: Journal, run_id: str) -> None:
        """Inside the caller's transaction: journal the start unless a transaction did already."""
        with self._lock:
            if self._journaled:
                return
            self._journaled = True
        store.start_step(run_id, self.step_id, self.index)


@dataclass(frozen=True, slots=True)
class Attempts:
    """What every unit of one drive shares: its journal, run, dispatcher and private directory."""

    store: Journal
    run_id: str
    plan: pf.Plan
    params: dict[str, Any]
    dispatcher: Dispatcher
    abort: threading.Event
    progress: Progress
    scratch: Path
    pooled: bool  # attempts run as workflows DBOS recovers: a dead driver's are re-attached to
    # The run's units in flight at once, whichever step they are of (a `parallel` block's members
    # run at once): min(limits.concurrency, --max-concurrency) slots.
    slots: threading.BoundedSemaphore
    unmetered: set[str] = field(default_factory=set)  # steps whose `budget.unmetered` is journaled

    def fail(self, failing: FailUnit) -> End:
        """Journal a unit that fails before any attempt; it is never dispatched."""
        place = failing.place
        self.store.fail_unit(
            self.run_id, place.journal, failing.step["stepId"], place.index, failing.reason, failing.message
        )
        return failing.end

    def all(
        self, dispatch: Dispatch, rows: Rows, start: StepStart, halt: threading.Event | None = None
    ) -> list[End | None]:
        """A map's units to their ends on `width` threads; the first failure or block stops
        dispatching the rest (None: not dispatched) unless the map keeps going, an abort or an
        internal error stops all, and so does `halt` (a fail-fast `parallel` block's)."""
        stop = threading.Event()

        def one(index: int) -> End:
            if stop.is_set() or self.abort.is_set() or (halt is not None and halt.is_set()):
                return End("not_dispatched")
            end = self.unit(dispatch.units[index], rows, start)
            if end.status in ("failed", "blocked") and not dispatch.keep_going:
                stop.set()
            return end

        return self.fan_out(one, len(dispatch.units), dispatch.width, stop)

    def fan_out(self, one: Callable[[int], End], count: int, width: int, stop: threading.Event) -> list[End | None]:
        """Run `one` for every index on `width` threads; an abort or an internal error stops the rest."""
        ends: list[End | None] = [None] * count
        aborted, broken, paused = False, None, None
        # Completions arrive on a queue: each wake-up handles one finished unit, never a scan of all
        # pending ones, so dispatch costs the same per unit at 2,000 items as at 200.
        finished: queue.SimpleQueue[tuple[int, Future[End]]] = queue.SimpleQueue()
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="akm-unit") as pool:
            for i in range(count):
                pool.submit(one, i).add_done_callback(functools.partial(_report, finished, i))
            for _ in range(count):
                index, future = finished.get()
                try:
                    ends[index] = future.result()
                except Aborted:
                    aborted = True
                    stop.set()
                except Paused as held:  # the units in flight finish; none starts
                    paused = paused or held
                    stop.set()
                except Exception as error:  # noqa: BLE001 - an internal error: stop dispatching, then raise it
                    broken = broken or error
                    stop.set()
        if broken is not None:
            raise broken
        if aborted or self.abort.is_set():
            raise Aborted
        if paused is not None:
            raise paused
        return ends

    def unit(self, unit: Unit, rows: Rows, start: StepStart) -> End:
        """One unit to its end: reuse a completed journal row, else dispatch, retrying as the step says.
        Raises Paused, before an attempt would start, while the run or the unit's step is paused."""
        unit, known = self._current(unit)
        journal = unit.place.journal
        if known is not None and known.status == "completed":
            return End("completed", known.output)
        bound = self._bound(unit, rows)
        if isinstance(bound, FailUnit):
            return self.fail(bound)
        digest = identity.input_hash(dict(unit.target), self.params, unit.inputs, unit.place.item, bound, unit.feedback)
        failed_before = 0 if known is None else self._failed_attempts(journal)
        retries, new_unit = 0, known is None
        left_running = self._left_running(journal) if known is not None else None
        while True:
            self._check_abort()
            if left_running is None:
                self._check_pause(unit)
            left = self._left(unit)
            if left is not None and left.tokens <= 0 and not left_running:
                return self._refused(unit, left)
            dispatch = identity.dispatch_id(self.run_id, journal, failed_before)
            attempt = left_running or self._begin(unit, digest, dispatch, new_unit, start)
            new_unit, left_running = False, None
            if not attempt:
                return self.fail(decisions.budget_spent(unit, self.plan["limits"]))
            outcome = self._dispatch(unit, attempt, dispatch, digest, bound, left)
            self._metered(unit, outcome, left)
            verdict = decisions.attempt_verdict(unit, outcome, retries)
            if isinstance(verdict, Redo):  # as a crash reclaim: same dispatch id, not a retry
                self.store.interrupt_attempt(self.run_id, journal, unit.step["stepId"], attempt)
                continue
            ended = self._record(unit, attempt, outcome, final=verdict.retry_after_ms is None)
            if verdict.retry_after_ms is None:
                return ended
            retries, failed_before = retries + 1, failed_before + 1
            self._backoff(verdict.retry_after_ms)

    def _check_abort(self) -> None:
        if self.abort.is_set():
            raise Aborted

    def _check_pause(self, unit: Unit) -> None:
        if (held := decisions.holding(self.store.pauses(self.run_id), unit.step["stepId"])) is not None:
            raise Paused(held)

    def _current(self, unit: Unit) -> tuple[Unit, Any]:
        """The unit under its current journal id, past the ones `akm-run retry` superseded, and its row."""
        base, retry = unit.place.journal, 0
        known = self.store.unit(self.run_id, base)
        while known is not None and known.superseded:
            retry += 1
            known = self.store.unit(self.run_id, identity.retried_id(base, retry))
        if retry == 0:
            return unit, known
        place = dataclasses.replace(unit.place, journal=identity.retried_id(base, retry))
        return dataclasses.replace(unit, place=place), known

    def _left_running(self, journal: str) -> int | None:
        """A pooled drive's attempt of this unit that a dead driver left running (None on SQLite,
        whose reclaim has finished every such attempt before the spine starts)."""
        attempts = self.store.attempts(self.run_id, journal) if self.pooled else []
        return next((a.attempt for a in attempts if a.status == "running"), None)

    def _failed_attempts(self, journal: str) -> int:
        return sum(1 for a in self.store.attempts(self.run_id, journal) if a.status == "failed")

    def _bound(self, unit: Unit, rows: Rows) -> dict[str, Any] | FailUnit | None:
        """A child-workflow target's bindings, resolved (None for other targets); one unresolved fails the unit."""
        if unit.target["kind"] != "child-workflow":
            return None
        bound, missing = core.bindings(unit.target, unit.place.item, self.params, rows)
        return decisions.unresolved_bindings(unit, missing) if missing else bound

    def _begin(self, unit: Unit, digest: str, dispatch: str, new_unit: bool, start: StepStart) -> int:
        """Journal the start of an attempt (with the step's start); 0 when the unit budget is spent."""
        with self.store.transaction(durable=False):
            start.journal(self.store, self.run_id)
            return self.store.begin_attempt(
                self.run_id,
                unit.place.journal,
                unit.step["stepId"],
                unit.place.index,
                digest,
                dispatch,
                new_unit=new_unit,
                max_units=self.plan["limits"].get("maxUnits"),
            )

    def _left(self, unit: Unit) -> budgets.Left | None:
        """The smallest token budget left over an agent unit (None for other units, or no budget)."""
        if unit.target["kind"] != "agent":
            return None
        spent = sum(budgets.tokens_of(a.usage) for a in self.store.attempts(self.run_id, unit.place.journal))
        return budgets.remaining(self.store, self.run_id, unit.step.get("maxTokens"), spent)

    def _refused(self, unit: Unit, left: budgets.Left) -> End:
        """Before dispatch: no token budget is left, so the unit fails without starting."""
        spent, limit = f"{left.limit - left.tokens:,}", f"{left.limit:,}"
        if left.which == "unit":
            message = wording.unit_budget_spent(spent=spent, limit=limit)
        else:
            message = wording.run_budget_spent(run=left.which, spent=spent, limit=limit)
        with self.store.transaction(durable=False):
            self.store.exceed_budget(self.run_id, unit.step["stepId"], unit.place.journal, budget=left.which)
            return self.fail(FailUnit(unit.step, unit.place, "budget_exceeded", message))

    def _metered(self, unit: Unit, outcome: End, left: budgets.Left | None) -> None:
        """`budget.unmetered`, once per step, for an agent unit under a budget that reported no usage."""
        step_id = unit.step["stepId"]
        if left is None or outcome.usage is not None or outcome.status == "aborted" or step_id in self.unmetered:
            return
        self.unmetered.add(step_id)
        self.store.unmetered(self.run_id, step_id, unit.place.journal)

    def _dispatch(
        self,
        unit: Unit,
        attempt: int,
        dispatch: str,
        digest: str,
        bound: dict[str, Any] | None,
        left: budgets.Left | None = None,
    ) -> End:
        """Run one attempt through the dispatcher (the one place a unit runs: child runs too)."""
        context = core.unit_context(
            self.run_id, unit.place, dispatch, attempt, unit.inputs, unit.feedback, unit.gate_output
        )
        request = Request(
            self.run_id,
            unit.place,
            attempt,
            digest,
            unit.target,
            context,
            unit.step.get("env", []),
            unit.schema,
            unit.step.get("timeoutMs"),
            bound,
            self.scratch,
            dispatch,
            unit.width,
            max_tokens=None if left is None else left.tokens,
            stall_after_ms=unit.step.get("stallAfterMs"),
            on_stall=unit.step.get("onStall"),
            isolated="isolation" in unit.step and not unit.gate_check,  # a gate's check runs in the workdir
        )
        while not self.slots.acquire(timeout=0.05):
            if self.abort.is_set():
                return End("aborted", reason="aborted", message="the drive was aborted before the unit started")
        self.progress.unit_started()
        try:
            return self.dispatcher.dispatch(request)
        except Exception:
            self._interrupted(unit, attempt)
            raise
        finally:
            self.progress.unit_ended()
            self.slots.release()

    def _record(self, unit: Unit, attempt: int, outcome: End, *, final: bool) -> End:
        """Journal how an attempt ended; an aborted one ends the drive."""
        run_id, journal, step_id = self.run_id, unit.place.journal, unit.step["stepId"]
        if outcome.status == "aborted":
            if not outcome.recorded:  # a pool's worker journals an abort it carried out
                self.store.abort_attempt(run_id, journal, step_id, attempt, outcome.message, outcome.stderr_tail)
            if outcome.reason == "paused":  # a child run it drove was paused
                raise Paused(json.loads(outcome.notes or "{}"))
            raise Aborted
        if outcome.status == "completed":
            with self.store.transaction(durable=False):
                self.store.complete_attempt(
                    run_id, journal, step_id, attempt, outcome.output, outcome.stderr_tail, outcome.usage
                )
                if unit.completes:
                    self.store.complete_step(run_id, step_id, outcome.output)
            return End("completed", outcome.output, recorded=unit.completes)
        failure = AttemptFailure(
            outcome.reason, outcome.message, outcome.exit_code, outcome.output, outcome.stderr_tail, final
        )
        with self.store.transaction(durable=False):
            self.store.fail_attempt(run_id, journal, step_id, attempt, failure, outcome.usage)
            if outcome.reason == "budget_exceeded":  # the hook for the `budget` notification (D4)
                self.store.exceed_budget(run_id, step_id, journal, attempt=attempt)
        return core.unit_end(outcome)

    def _interrupted(self, unit: Unit, attempt: int) -> None:
        """An internal error ends an attempt: finish it as interrupted (the unit runs again on resume)
        if the journal can still be written."""
        try:
            self.store.interrupt_attempt(self.run_id, unit.place.journal, unit.step["stepId"], attempt)
        except Exception:  # noqa: BLE001 - the error being raised says what went wrong
            pass

    def _backoff(self, ms: int) -> None:
        if ms and self.abort.wait(ms / 1000):
            raise Aborted


def _report(finished: queue.SimpleQueue[tuple[int, Future[End]]], index: int, future: Future[End]) -> None:
    finished.put((index, future))
