"""The drive loop: one engine entry point (`Engine.drive`) for top-level and child runs.

A drive takes the run's lock, re-verifies the stored plan, reclaims attempts a crashed driver
left running, then walks the spine. Every unit is journaled before its process starts and
after it ends; a completed unit is reused and never dispatched again.

What the plan means is decided by akm_run.core; state changes go through the named transitions
of akm_run.journal; attempts run through a akm_run.dispatch dispatcher."""

from __future__ import annotations

import functools
import queue
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from akm_run import children, core, identity, numbers, progress, units
from akm_run import planformat as pf
from akm_run.core import Aborted, DriveResult, End, Placement
from akm_run.dispatch import ChildDispatcher, Dispatcher, ProcessDispatcher, Request, Routing, Settings
from akm_run.hints import Hints
from akm_run.journal import Journal
from akm_run.plan import PlanError, loads_strict, plan_hash, verify_plan
from akm_run.progress import Progress
from akm_run.rows import AttemptFailure, RunRow, StepRow
from akm_run.strictjson import dumps

DEFAULT_MAX_CONCURRENCY = 16


class OutputsInvalid(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(slots=True)
class Options:
    state_dir: Path
    workdir: Path = Path(".")
    agent_cmd: str | None = None
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    timeout_ms: int | None = None
    environ: Mapping[str, str] | None = None
    progress: Progress = field(default_factory=Progress)
    hints: Hints = field(default_factory=Hints)  # builds the commands printed for a person
    admit: Callable[[RunRow], None] | None = None  # re-checks a run under its lock (trust.recheck); raises


@dataclass
class Engine:
    """Drives runs of one journal. `process` runs shell, script and agent units (default: real
    processes); child-workflow units are driven as child runs by this same engine."""

    store: Journal
    options: Options
    abort: threading.Event = field(default_factory=threading.Event)
    why_aborted: str = "interrupted"
    process: Dispatcher | None = None
    # Attempts run on other hosts as workflows DBOS recovers: re-attach to those a dead driver left.
    pooled: bool = False

    def __post_init__(self) -> None:
        settings = Settings(self.options.workdir, self.options.agent_cmd, self.options.environ, self.options.hints)
        process = self.process or ProcessDispatcher(self.store, settings, self.abort)
        self.dispatcher: Dispatcher = Routing(process, ChildDispatcher(self.store, settings, self.drive))

    def drive(self, run_id: str) -> DriveResult:
        """Drive a run until it completes, fails, blocks or is aborted. Raises LockHeld when another
        driver holds the run, PlanError when the stored plan no longer verifies."""
        with self.store.lock(run_id):
            run = self.store.run(run_id)
            if run is None:
                raise KeyError(run_id)
            plan = stored_plan(run)
            if self.options.admit is not None:
                self.options.admit(run)
            if run.status != "active":
                return settled(run, self.store, self.options.hints)
            self._reclaim(run_id)
            return _Drive(self, run, plan).run()

    def _reclaim(self, run_id: str) -> None:
        """Attempts left `running` by a crashed driver: stop their leftover processes, mark them.
        A pooled drive leaves them to their workflows: `_unit` re-attaches to each (drives.py)."""
        if self.pooled:
            return
        for unit_id, step_id, attempt in self.store.interrupted_attempts(run_id):
            units.stop_leftover(attempt.pid, attempt.host)
            self.store.interrupt_attempt(run_id, unit_id, step_id, attempt.attempt)


def stored_plan(run: RunRow) -> pf.Plan:
    """The run's plan, re-verified: a tampered row is refused (PlanError)."""
    import json

    plan = loads_strict(run.plan_json.encode())
    verify_plan(plan)
    if plan_hash(plan) != run.plan_hash:
        raise PlanError("plan", f"stored plan hash {plan_hash(plan)} does not match the run's {run.plan_hash}")
    verified: pf.Plan = json.loads(run.plan_json)
    return verified


def settled(run: RunRow, store: Journal, hints: Hints) -> DriveResult:
    """The result of a run that is not active: nothing is dispatched."""
    result = DriveResult(run.id, run.status, failure=run.failure, exported=run.exported)
    if run.status == "blocked":
        step = next((s for s in store.steps(run.id) if s.status == "blocked"), None)
        notes = children.step_notes(store, hints, run.id, step) if step is not None else run.notes
        result.blocked = {"stepId": step.step_id if step else None, "notes": notes or ""}
    return result


@dataclass(frozen=True, slots=True)
class _Work:
    """One unit to run: its step, target and placement, what it reads, and how its end is recorded."""

    step: pf.WorkStep
    target: pf.Target
    place: Placement
    loop: int
    inputs: dict[str, Any]
    feedback: str | None
    schema: pf.Schema | None
    gate_output: Any = None
    gate_check: bool = False  # the unit is a gate's check (never retried)
    completes: bool = False  # the step completes with this unit (journaled together)
    width: int = 1  # how many units of the step run at once


class _Drive:
    """One drive of one run (the state of the loop)."""

    def __init__(self, engine: Engine, run: RunRow, plan: pf.Plan) -> None:
        self.engine, self.store, self.options = engine, engine.store, engine.options
        self.plan, self.run_id, self.params = plan, run.id, numbers.normal(run.params)  # 1.0 as 1, as outputs
        self.rows = {row.step_id: row for row in self.store.steps(run.id)}
        self.where = progress.where(run)
        self.starting: tuple[str, int] | None = None  # the step the spine reached, not yet journaled
        self.last = False  # whether it is the last step (completed together with the outputs)
        self.scratch: Path | None = None

    # -- the spine ---------------------------------------------------------------------------------

    def run(self) -> DriveResult:
        timer = self._deadline()
        self.scratch = units.scratch_directory(self.options.state_dir, self.run_id)
        try:
            return self._spine()
        except Aborted:
            return core.aborted(self.run_id, self.engine.why_aborted, self.options.hints("run", self.run_id))
        finally:
            if timer is not None:
                timer.cancel()
            shutil.rmtree(self.scratch, ignore_errors=True)
            self._stand_down()

    def _stand_down(self) -> None:
        """Nothing runs once a drive ends: a step it left running (an abort, an invalid output, an
        internal error) is pending again until the next drive."""
        try:
            self.store.release_running_steps(self.run_id)
        except Exception:  # noqa: BLE001 - a state store that is gone is reported by the drive's own error
            pass

    def _deadline(self) -> threading.Timer | None:
        limits = [t for t in (self.plan["limits"].get("timeoutMs"), self.options.timeout_ms) if t is not None]
        if not limits:
            return None

        def expire() -> None:
            self.engine.why_aborted = f"the run timeout of {min(limits)} ms expired"
            self.engine.abort.set()

        timer = threading.Timer(min(limits) / 1000, expire)
        timer.daemon = True
        timer.start()
        return timer

    def _spine(self) -> DriveResult:
        steps = self.plan["steps"]
        last_completion: tuple[str, Any] | None = None
        for index, step in enumerate(steps):
            row = self.rows[step["stepId"]]
            action = core.spine_action(step, row)
            if action == "pass":
                continue
            if action == "blocked":
                return self._blocked(step["stepId"], row.notes or "")
            self._check_abort()
            # Recorded with the step's first write (usually its first unit's dispatch): one commit fewer.
            self.starting = (step["stepId"], index)
            self.last = index == len(steps) - 1
            ended = self._timed(step, row, index)
            if ended.status == "completed":
                if self.last:
                    last_completion = (step["stepId"], ended.output)  # completed with the outputs, below
                    break
                if not ended.recorded:
                    self._complete_step(step, ended.output)
            elif ended.status == "blocked":
                return self._block(step, ended)
            elif (stopped := self._fail(step, ended)) is not None:
                return stopped
        return self._finish(last_completion)

    def _timed(self, step: pf.Step, row: StepRow, index: int) -> End:
        started = time.monotonic()
        self.options.progress.step_started(self.where, step["stepId"], index, len(self.plan["steps"]))
        ended = self._step(step, row)
        self.options.progress.step_ended(self.where, step["stepId"], ended.status, time.monotonic() - started)
        return ended

    def _block(self, step: pf.Step, ended: End) -> DriveResult:
        with self.store.transaction(durable=False):
            self._record_start()
            self.store.block_step(self.run_id, step["stepId"], ended.notes, ended.reason)
        return self._blocked(step["stepId"], ended.notes or "")

    def _fail(self, step: pf.Step, ended: End) -> DriveResult | None:
        """Journal a failed step; the run fails with it unless the step says `continue` (its output is null)."""
        continued = step["onError"] == "continue"
        with self.store.transaction(durable=False):
            self._record_start()
            self.store.fail_step(self.run_id, step["stepId"], ended.reason, ended.message, null=continued)
        row = self.rows[step["stepId"]]
        row.status, row.output_json = "failed", "null" if continued else row.output_json
        if continued:
            return None
        failure = core.failure(step, ended)
        self.store.fail_run(self.run_id, failure)
        return DriveResult(self.run_id, "failed", failure=failure)

    def _check_abort(self) -> None:
        if self.engine.abort.is_set():
            raise Aborted

    def _record_start(self) -> None:
        """Journal that the spine reached the current step (inside the caller's transaction)."""
        starting, self.starting = self.starting, None
        if starting is not None:
            self.store.start_step(self.run_id, *starting)

    def _complete_step(self, step: pf.Step, output: Any) -> None:
        with self.store.transaction(durable=False):
            self._record_start()
            self.store.complete_step(self.run_id, step["stepId"], output)
            if step["kind"] == "route":
                for name in core.not_selected(step, output, self.rows):
                    self.store.skip_step(self.run_id, name, f"route {step['stepId']} selected {output}")
                    self.rows[name].status = "skipped"
        self._completed_row(step["stepId"], output)

    def _completed_row(self, step_id: str, output: Any) -> None:
        row = self.rows[step_id]
        row.status, row.output_json = "completed", dumps(output)

    def _refresh(self) -> None:
        self.rows = {row.step_id: row for row in self.store.steps(self.run_id)}

    def _blocked(self, step_id: str, notes: str) -> DriveResult:
        self.store.block_run(self.run_id, notes)
        return DriveResult(self.run_id, "blocked", blocked={"stepId": step_id, "notes": notes})

    def _finish(self, last: tuple[str, Any] | None) -> DriveResult:
        """Complete the run: the last step's completion, the outputs and the run's status in one
        transaction; an invalid output rolls all of it back."""
        try:
            with self.store.transaction():
                if last is not None:
                    self._complete_step(self.plan["steps"][-1], last[1])
                exported, problems = core.outputs(self.plan, self.run_id, self.params, self.rows)
                if problems:
                    raise OutputsInvalid(problems)
                self.store.complete_run(self.run_id, exported)
        except OutputsInvalid as invalid:
            self._refresh()
            message = "; ".join(invalid.problems)
            return DriveResult(self.run_id, "active", error={"code": "WORKFLOW_OUTPUT_INVALID", "message": message})
        return DriveResult(self.run_id, "completed", exported=exported)

    # -- steps -------------------------------------------------------------------------------------

    def _step(self, step: pf.Step, row: StepRow) -> End:
        if step["kind"] == "route":
            return core.route(step, self.params, self.rows)
        if step["target"]["kind"] == "approval":
            notes = core.approval_notes(self.options.hints, self.run_id, step["stepId"], step["target"]["message"])
            return End("blocked", notes=notes)
        if "gate" not in step:
            return self._work(step, 0, None)
        return self._gated(step, row)

    def _gated(self, step: pf.WorkStep, row: StepRow) -> End:
        gate = step["gate"]
        iteration, loops, feedback = row.gate_iteration, row.gate_loops, row.gate_feedback
        while True:
            given = feedback if iteration else None
            work = self._work(step, iteration, given)
            if work.status != "completed":
                return work
            place = Placement(step["stepId"], identity.journal_id(f"{step['stepId']}:gate", iteration))
            check = self._unit(_Work(step, gate["check"], place, iteration, {}, given, None, work.output, True))
            if check.status == "completed":
                return work
            if check.reason != "exit":
                return End("failed", reason=check.reason, message=f"gate check: {check.message}")
            feedback = core.gate_feedback(check)
            self.store.reject_gate(self.run_id, step["stepId"], iteration, feedback)
            if loops >= gate["maxLoops"]:
                return core.gate_exhausted(self.options.hints, self.run_id, loops, gate["maxLoops"], feedback)
            iteration, loops = iteration + 1, loops + 1
            self.store.loop_gate(self.run_id, step["stepId"], iteration, loops, feedback)

    def _work(self, step: pf.WorkStep, loop: int, feedback: str | None) -> End:
        inputs, missing = core.step_inputs(step, self.params, self.rows)
        if step["kind"] == "map":
            items = core.map_items(step, self.params, self.rows)
            if missing or isinstance(items, str):
                return core.failed("input_unresolved", "; ".join(missing or [str(items)]))
            return self._map(step, items, inputs, loop, feedback)
        place = Placement(step["stepId"], identity.journal_id(identity.unit_id(step["stepId"]), loop))
        if missing:
            return self._unit_failed(step, place, "input_unresolved", "; ".join(missing))
        solo = "gate" not in step and not self.last  # its output is its one unit's: complete both at once
        end = self._unit(_Work(step, step["target"], place, loop, inputs, feedback, core.item_schema(step),
                               completes=solo))  # fmt: skip
        if end.status == "blocked":
            return End("blocked", reason=end.reason, notes=end.message)
        return end

    def _unit_failed(self, step: pf.Step, place: Placement, reason: str, message: str) -> End:
        """A unit that fails before any attempt: journaled as failed, never dispatched."""
        self.store.fail_unit(self.run_id, place.journal, step["stepId"], place.index, reason, message)
        return core.failed(reason, message)

    def _map(self, step: pf.MapStep, items: list[Any], inputs: dict[str, Any], loop: int, feedback: str | None) -> End:
        stop = threading.Event()
        schema = core.item_schema(step)
        width = core.map_width(step, self.plan, self.options.max_concurrency)
        units = identity.map_unit_ids(step["stepId"], items)

        def one(index: int) -> End:
            if stop.is_set() or self.engine.abort.is_set():
                return End("not_dispatched")
            place = Placement(step["stepId"], identity.journal_id(units[index], loop), items[index], index)
            end = self._unit(_Work(step, step["target"], place, loop, inputs, feedback, schema, width=width))
            if end.status in ("failed", "blocked"):
                stop.set()
            return end

        ends = self._fan_out(one, len(items), width, stop)
        return core.map_end(step, ends)

    def _fan_out(self, one: Callable[[int], End], count: int, width: int, stop: threading.Event) -> list[End | None]:
        """Run `one` for every index on `width` threads; an abort or an internal error stops the rest."""
        ends: list[End | None] = [None] * count
        aborted, broken = False, None
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
                except Exception as error:  # noqa: BLE001 - an internal error: stop dispatching, then raise it
                    broken = broken or error
                    stop.set()
        if broken is not None:
            raise broken
        if aborted or self.engine.abort.is_set():
            raise Aborted
        return ends

    # -- units -------------------------------------------------------------------------------------

    def _unit(self, work: _Work) -> End:
        """One unit to its end: reuse a completed journal row, else dispatch, retrying as the step says."""
        known = self.store.unit(self.run_id, work.place.journal)
        if known is not None and known.status == "completed":
            return End("completed", known.output)
        bound = self._bound(work)
        if isinstance(bound, End):
            return bound
        digest = identity.input_hash(dict(work.target), self.params, work.inputs, work.place.item, bound,
                                     work.feedback)  # fmt: skip
        failed_before = 0 if known is None else self._failed_attempts(work.place.journal)
        retry = core.retry_policy(work.step, work.gate_check)
        retries, new_unit = 0, known is None
        left_running = self._left_running(work.place.journal) if known is not None else None
        while True:
            self._check_abort()
            dispatch = identity.dispatch_id(self.run_id, work.place.journal, failed_before)
            attempt = left_running or self._begin(work, digest, dispatch, new_unit)
            new_unit, left_running = False, None
            if not attempt:
                limit = self.plan["limits"].get("maxUnits")
                message = f"the run has dispatched its limit of {limit} units (max_units)"
                return self._unit_failed(work.step, work.place, "budget_exceeded", message)
            outcome = self._dispatch(work, attempt, dispatch, digest, bound)
            if outcome.status == "interrupted":  # as a crash reclaim: same dispatch id, not a retry
                self.store.interrupt_attempt(self.run_id, work.place.journal, work.step["stepId"], attempt)
                continue
            again = outcome.status == "failed" and core.retries_again(retry, outcome.reason, retries)
            ended = self._record(work, attempt, outcome, final=not again)
            if not again:
                return ended
            retries, failed_before = retries + 1, failed_before + 1
            self._backoff(core.backoff_ms(cast(pf.Retry, retry), retries))

    def _left_running(self, journal: str) -> int | None:
        """A pooled drive's attempt of this unit that a dead driver left running (None on SQLite,
        whose reclaim has finished every such attempt before the spine starts)."""
        attempts = self.store.attempts(self.run_id, journal) if self.engine.pooled else []
        return next((a.attempt for a in attempts if a.status == "running"), None)

    def _failed_attempts(self, journal: str) -> int:
        return sum(1 for a in self.store.attempts(self.run_id, journal) if a.status == "failed")

    def _bound(self, work: _Work) -> dict[str, Any] | End | None:
        """A child-workflow target's bindings, resolved (None for other targets); one unresolved fails the unit."""
        if work.target["kind"] != "child-workflow":
            return None
        bound, missing = core.bindings(work.target, work.place.item, self.params, self.rows)
        if missing:
            return self._unit_failed(work.step, work.place, "input_unresolved", "; ".join(missing))
        return bound

    def _begin(self, work: _Work, digest: str, dispatch: str, new_unit: bool) -> int:
        """Journal the start of an attempt (with the step's start); 0 when the unit budget is spent."""
        with self.store.transaction(durable=False):
            self._record_start()
            return self.store.begin_attempt(self.run_id, work.place.journal, work.step["stepId"], work.place.index,
                                            digest, dispatch, new_unit=new_unit,
                                            max_units=self.plan["limits"].get("maxUnits"))  # fmt: skip

    def _dispatch(self, work: _Work, attempt: int, dispatch: str, digest: str, bound: dict[str, Any] | None) -> End:
        """Run one attempt through the dispatcher (the one place a unit runs: child runs too)."""
        context = core.unit_context(self.run_id, work.place, dispatch, attempt, work.inputs, work.feedback,
                                    work.gate_output)  # fmt: skip
        request = Request(self.run_id, work.place, attempt, digest, work.target, context, work.step.get("env", []),
                          work.schema, work.step.get("timeoutMs"), bound, self.scratch, dispatch, work.width)  # fmt: skip
        self.options.progress.unit_started()
        try:
            return self.engine.dispatcher.dispatch(request)
        except Exception:
            self._interrupted(work, attempt)
            raise
        finally:
            self.options.progress.unit_ended()

    def _record(self, work: _Work, attempt: int, outcome: End, *, final: bool) -> End:
        """Journal how an attempt ended; an aborted one ends the drive."""
        run_id, journal, step_id = self.run_id, work.place.journal, work.step["stepId"]
        if outcome.status == "aborted":
            if not outcome.recorded:  # a pool's worker journals an abort it carried out
                self.store.abort_attempt(run_id, journal, step_id, attempt, outcome.message, outcome.stderr_tail)
            raise Aborted
        if outcome.status == "completed":
            with self.store.transaction(durable=False):
                self.store.complete_attempt(run_id, journal, step_id, attempt, outcome.output, outcome.stderr_tail)
                if work.completes:
                    self.store.complete_step(run_id, step_id, outcome.output)
            if work.completes:
                self._completed_row(step_id, outcome.output)
            return End("completed", outcome.output, recorded=work.completes)
        failure = AttemptFailure(outcome.reason, outcome.message, outcome.exit_code, outcome.output,
                                 outcome.stderr_tail, final)  # fmt: skip
        self.store.fail_attempt(run_id, journal, step_id, attempt, failure)
        return core.unit_end(outcome)

    def _interrupted(self, work: _Work, attempt: int) -> None:
        """An internal error ends an attempt: finish it as interrupted (the unit runs again on resume)
        if the journal can still be written."""
        try:
            self.store.interrupt_attempt(self.run_id, work.place.journal, work.step["stepId"], attempt)
        except Exception:  # noqa: BLE001 - the error being raised says what went wrong
            pass

    def _backoff(self, ms: int) -> None:
        if ms and self.engine.abort.wait(ms / 1000):
            raise Aborted


def _report(finished: queue.SimpleQueue[tuple[int, Future[End]]], index: int, future: Future[End]) -> None:
    finished.put((index, future))
