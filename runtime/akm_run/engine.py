"""The drive loop: one engine entry point (`Engine.drive`) for top-level and child runs.

A drive takes the run's lock, re-verifies the stored plan, reclaims attempts a crashed driver
left running, then walks the spine. Every unit is journaled before its process starts and
after it ends; a completed unit is reused and never dispatched again.

What to do next is decided by akm_run.decisions (what the plan means, by akm_run.core) and
returned as values; this module journals the spine's and the steps' decisions through the named
transitions of akm_run.journal, and akm_run.attempts journals and dispatches the units'."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akm_run import children, core, decisions, isolation, notify, numbers, progress, units
from akm_run import planformat as pf
from akm_run.activity import Beat, Board
from akm_run.attempts import Attempts, StepStart
from akm_run.core import Aborted, DriveResult, End, Paused
from akm_run.decisions import (
    BlockStep,
    CompleteStep,
    FailStep,
    FailUnit,
    Finish,
    Rows,
    RunWork,
    Settle,
    StartStep,
    Wait,
)
from akm_run.dispatch import ChildDispatcher, Dispatcher, ProcessDispatcher, Routing, Settings
from akm_run.hints import Hints
from akm_run.journal import Journal
from akm_run.progress import Progress
from akm_run.rows import RunRow
from akm_run.store import Store
from akm_run.storedplans import VerifiedPlans

DEFAULT_MAX_CONCURRENCY = 16
PAUSE_POLL_S = 0.5  # how often a drive looks for a `pause --now`; a plain pause is read before each start


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
    plans: VerifiedPlans = field(default_factory=VerifiedPlans)  # the stored plan texts verified so far
    scratch: units.Scratch = field(default_factory=units.Scratch)  # the units' files of its drives

    def __post_init__(self) -> None:
        options = self.options
        settings = Settings(options.workdir, options.agent_cmd, options.environ, options.hints, options.state_dir)
        board = Board(self._activity)
        process = self.process or ProcessDispatcher(self.store, settings, self.abort, board=board)
        self.dispatcher: Dispatcher = Routing(process, ChildDispatcher(self.store, settings, self.drive, self.abort))

    def _activity(self, beats: list[Beat]) -> None:
        """Journal a sample of the units' activity, and show the newest progress frame."""
        self.store.record_activity(beats)
        if isinstance(self.store, Store):
            notify.stalled_soon(self.store, beats, self.options.hints, self.options.environ)
        frames = [b.progress for b in beats if b.progress is not None]
        if frames:
            self.options.progress.activity(frames[-1])

    def drive(self, run_id: str) -> DriveResult:
        """Drive a run until it completes, fails, blocks or is aborted. Raises LockHeld when another
        driver holds the run, PlanError when the stored plan no longer verifies."""
        with self.store.lock(run_id):
            run = self.store.run(run_id)
            if run is None:
                raise KeyError(run_id)
            plan = self.plans.plan(run)
            if self.options.admit is not None:
                self.options.admit(run)
            if run.status != "active":
                result = settled(run, self.store, self.options.hints)
            else:
                self._reclaim(run_id)
                isolation.say_if_moved(run, self.options.workdir)
                result = _Drive(self, run, plan).run()
            if run.parent_run_id is None and isinstance(self.store, Store):  # notifications go to the root
                notify.deliver(self.store, run_id, self.options.hints, self.options.environ)
            return result

    def _reclaim(self, run_id: str) -> None:
        """Attempts left `running` by a crashed driver: stop their leftover processes, mark them.
        A pooled drive leaves them to their workflows: `Attempts.unit` re-attaches to each (drives.py)."""
        if self.pooled:
            return
        interrupted = self.store.interrupted_attempts(run_id)
        units.stop_leftovers((attempt.pid, attempt.host) for _, _, attempt in interrupted)
        for unit_id, step_id, attempt in interrupted:
            self.store.interrupt_attempt(run_id, unit_id, step_id, attempt.attempt)
            isolation.reclaim(self.store, self.options.state_dir, run_id, unit_id, step_id, attempt.attempt)


def settled(run: RunRow, store: Journal, hints: Hints) -> DriveResult:
    """The result of a run that is not active: nothing is dispatched."""
    result = DriveResult(run.id, run.status, failure=run.failure, exported=run.exported)
    if run.status == "blocked":
        step = next((s for s in store.steps(run.id) if s.status == "blocked"), None)
        notes = children.step_notes(store, hints, run.id, step) if step is not None else run.notes
        result.blocked = {"stepId": step.step_id if step else None, "notes": notes or ""}
    return result


class _Drive:
    """One drive of one run: the spine's and the steps' decisions, journaled. Nothing passes from
    one transaction to the next but arguments: the step rows as values, a step's start as the
    StepStart each of its transactions is handed."""

    def __init__(self, engine: Engine, run: RunRow, plan: pf.Plan) -> None:
        self.engine, self.store, self.options = engine, engine.store, engine.options
        self.plan, self.run_id, self.params = plan, run.id, numbers.normal(run.params)  # 1.0 as 1, as outputs
        self.where = progress.where(run)
        self.in_flight: str | None = None  # the step the spine runs now (what a `pause --now` may stop)
        self.in_flight_members: list[str] = []  # the members of the block it runs, if it runs one
        self.terminated_by: dict[str, Any] | None = None  # the `pause --now` the watcher acted on

    def run(self) -> DriveResult:
        rows = {row.step_id: row for row in self.store.steps(self.run_id)}
        timer = self._deadline()
        scratch = self.engine.scratch.enter(self.options.state_dir, self.run_id)
        engine = self.engine
        attempts = Attempts(
            self.store,
            self.run_id,
            self.plan,
            self.params,
            engine.dispatcher,
            engine.abort,
            self.options.progress,
            scratch,
            engine.pooled,
            threading.BoundedSemaphore(min(self.plan["limits"]["concurrency"], self.options.max_concurrency)),
        )
        watch = threading.Event()
        threading.Thread(target=self._watch_pauses, args=(watch,), name="akm-pauses", daemon=True).start()
        try:
            return self._spine(attempts, rows)
        except Paused as paused:
            return self._paused(paused.held)
        except Aborted:
            if (held := self.terminated_by or self._terminating()) is not None:
                return self._paused(held)
            return core.aborted(self.run_id, engine.why_aborted, self.options.hints("run", self.run_id))
        finally:
            watch.set()
            if timer is not None:
                timer.cancel()
            self.engine.scratch.leave()
            self._stand_down()

    def _stand_down(self) -> None:
        """Nothing runs once a drive ends: a step it left running (an abort, an invalid output, an
        internal error) is pending again until the next drive."""
        try:
            self.store.release_running_steps(self.run_id)
        except Exception:  # noqa: BLE001 - a state store that is gone is reported by the drive's own error
            pass

    def _watch_pauses(self, done: threading.Event) -> None:
        """A `pause --now` (written by any process, on any host) terminates the units in flight as an
        abort does: their attempts end `aborted` and the run stays resumable."""
        while not done.wait(PAUSE_POLL_S):
            try:
                held = self._terminating()
            except Exception:  # noqa: BLE001 - a journal that cannot be read is the drive's own error to report
                continue
            if held is not None and self.in_flight is not None:
                self.terminated_by = held
                self.engine.why_aborted = f"paused by {held.get('by')}"
                self.engine.abort.set()
                return

    def _terminating(self) -> dict[str, Any] | None:
        """The `pause --now` that ends the units in flight: of the step the spine runs, or of a running
        member of the block it runs. The drive's abort is one for all its units, so the block's other
        members' units in flight end `aborted` too, and run again on the next drive."""
        pauses = self.store.pauses(self.run_id)
        if (held := decisions.terminates(pauses, self.in_flight)) is not None:
            return held
        for member in self.in_flight_members:
            if (held := decisions.terminates(pauses, member)) is not None:
                row = self.store.step(self.run_id, member)
                if row is not None and row.status == "running":
                    return held
        return None

    def _paused(self, held: dict[str, Any]) -> DriveResult:
        """Nothing more could start: the drive ends (exit 3), the run stays active."""
        return DriveResult(self.run_id, "paused", paused=held)

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

    # -- the spine: its decisions journaled ------------------------------------------------------------

    def _spine(self, attempts: Attempts, rows: Rows) -> DriveResult:
        reached = decisions.next_step(self.plan, rows)
        while isinstance(reached, StartStep):
            if self.engine.abort.is_set():
                raise Aborted
            if (held := decisions.holding(self.store.pauses(self.run_id), reached.step["stepId"])) is not None:
                raise Paused(held)
            self.in_flight = reached.step["stepId"]
            step = reached.step
            self.in_flight_members = [m["stepId"] for m in step["members"]] if step["kind"] == "parallel" else []
            start = StepStart(reached.step["stepId"], reached.index)
            end = self._timed(attempts, reached, rows, start)
            if reached.step["kind"] == "parallel":
                rows = self._rows()  # its members' journaled ends
            ended = decisions.step_ended(reached, end, rows)
            if isinstance(ended, Finish):
                return self._finish(ended, rows, start)
            if isinstance(ended, BlockStep):
                return self._block(ended, start)
            if isinstance(ended, FailStep):
                rows = self._fail(ended, rows, start)
                if not ended.continued:
                    self.store.fail_run(self.run_id, ended.failure)
                    return DriveResult(self.run_id, "failed", failure=ended.failure)
            else:
                rows = self._complete_step(ended, rows, start)
            reached = decisions.next_step(self.plan, rows, reached.index + 1)
        if isinstance(reached, Wait):
            return self._blocked(reached.step_id, reached.notes)
        return self._finish(reached, rows, None)

    def _timed(self, attempts: Attempts, reached: StartStep, rows: Rows, start: StepStart) -> End:
        began, step_id, steps = time.monotonic(), reached.step["stepId"], len(self.plan["steps"])
        self.options.progress.step_started(self.where, step_id, reached.index, steps)
        ended = self._step(attempts, reached, rows, start)
        self.options.progress.step_ended(self.where, step_id, ended.status, time.monotonic() - began)
        return ended

    def _block(self, blocking: BlockStep, start: StepStart) -> DriveResult:
        step_id, end = blocking.step["stepId"], blocking.end
        with self.store.transaction(durable=False):
            start.journal(self.store, self.run_id)
            self.store.block_step(self.run_id, step_id, end.notes, end.reason)
        return self._blocked(step_id, end.notes or "")

    def _fail(self, failing: FailStep, rows: Rows, start: StepStart) -> Rows:
        """Journal a failed step (its output null when the run goes on without it)."""
        end = failing.end
        with self.store.transaction(durable=False):
            start.journal(self.store, self.run_id)
            step_id, continued = failing.step["stepId"], failing.continued
            self.store.fail_step(self.run_id, step_id, end.reason, end.message, null=continued, output=end.partial)
        return decisions.failed_step(rows, failing)

    def _complete_step(self, completion: CompleteStep, rows: Rows, start: StepStart | None) -> Rows:
        """Journal a step's completion and the skips of a route (unless its unit's completion did):
        a skipped `parallel` block's members are skipped with it."""
        if not completion.journaled:
            step_id = completion.step["stepId"]
            with self.store.transaction(durable=False):
                if start is not None:
                    start.journal(self.store, self.run_id)
                self.store.complete_step(self.run_id, step_id, completion.output)
                for name in self._with_members(completion.skipped, rows):
                    self.store.skip_step(self.run_id, name, f"route {step_id} selected {completion.output}")
        after = decisions.completed(rows, completion)
        return (
            self._rows()
            if any(rows[name].group is None and self._is_block(name) for name in completion.skipped)
            else after
        )

    def _is_block(self, step_id: str) -> bool:
        return any(s["stepId"] == step_id and s["kind"] == "parallel" for s in self.plan["steps"])

    def _with_members(self, skipped: tuple[str, ...], rows: Rows) -> list[str]:
        """The skipped steps, each skipped block followed by its members that are still pending."""
        members = {
            s["stepId"]: [m["stepId"] for m in s["members"]] for s in self.plan["steps"] if s["kind"] == "parallel"
        }
        return [
            x for name in skipped for x in (name, *members.get(name, [])) if x == name or rows[x].status == "pending"
        ]

    def _rows(self) -> Rows:
        return {row.step_id: row for row in self.store.steps(self.run_id)}

    def _blocked(self, step_id: str, notes: str) -> DriveResult:
        self.store.block_run(self.run_id, notes)
        return DriveResult(self.run_id, "blocked", blocked={"stepId": step_id, "notes": notes})

    def _finish(self, finish: Finish, rows: Rows, start: StepStart | None) -> DriveResult:
        """Complete the run: the last step's completion, the outputs and the run's status in one
        transaction; an invalid output rolls all of it back."""
        try:
            with self.store.transaction():
                if finish.last is not None:
                    rows = self._complete_step(finish.last, rows, start)
                exported, problems = core.outputs(self.plan, self.run_id, self.params, rows)
                if problems:
                    raise OutputsInvalid(problems)
                self.store.complete_run(self.run_id, exported)
        except OutputsInvalid as invalid:
            message = "; ".join(invalid.problems)
            return DriveResult(self.run_id, "active", error={"code": "WORKFLOW_OUTPUT_INVALID", "message": message})
        return DriveResult(self.run_id, "completed", exported=exported)

    # -- steps: their decisions journaled ----------------------------------------------------------------

    def _step(
        self, attempts: Attempts, reached: StartStep, rows: Rows, start: StepStart, halt: threading.Event | None = None
    ) -> End:
        step, row = reached.step, rows[reached.step["stepId"]]
        if step["kind"] == "parallel":
            return self._parallel(attempts, reached, rows, start)
        work = decisions.step_work(step, row, self.params, rows, self.options.hints, self.run_id)
        while isinstance(work, RunWork):
            done = self._work(attempts, work, rows, start, last=reached.last, halt=halt)
            if done.status != "completed" or "gate" not in work.step:
                return done
            check = attempts.unit(decisions.gate_check(work, done.output), rows, start)
            verdict = decisions.gate_verdict(work, done, check, self.options.hints, self.run_id)
            if isinstance(verdict, Settle):
                return verdict.end
            self.store.reject_gate(self.run_id, step["stepId"], verdict.iteration, verdict.feedback)
            if isinstance(verdict.then, End):
                return verdict.then
            work = verdict.then
            self.store.loop_gate(self.run_id, step["stepId"], work.iteration, work.loops, verdict.feedback)
        return work.end

    def _work(
        self,
        attempts: Attempts,
        work: RunWork,
        rows: Rows,
        start: StepStart,
        *,
        last: bool,
        halt: threading.Event | None,
    ) -> End:
        """One iteration of a work step: its units to their ends, and the step's end from theirs."""
        limit = self.options.max_concurrency
        planned = decisions.work_units(work, self.params, rows, last=last, plan=self.plan, max_concurrency=limit)
        if isinstance(planned, Settle):
            return planned.end
        if isinstance(planned, FailUnit):
            return attempts.fail(planned)
        hint, run_id = self.options.hints, self.run_id
        if work.step["kind"] == "map":
            return decisions.work_end(work.step, attempts.all(planned, rows, start, halt), hint, run_id)
        return decisions.work_end(work.step, [attempts.unit(planned.units[0], rows, start)], hint, run_id)

    # -- parallel blocks: their members run at once, each journaled as a step ------------------------------

    def _parallel(self, attempts: Attempts, reached: StartStep, rows: Rows, start: StepStart) -> End:
        """A `parallel` block: its members that must run, in source order and at most `concurrency` at
        a time, each to its end journaled as a step's; then the block's end from theirs, worst first.
        Under fail-fast, after a member fails or blocks no other starts (those running finish); the
        ones never started stay pending for `resume`."""
        block = reached.step
        assert block["kind"] == "parallel"
        members = block["members"]
        with self.store.transaction(durable=False):
            start.journal(self.store, self.run_id)
        halt, running, lock = threading.Event(), [0], threading.Lock()

        def counted(change: int) -> None:
            with lock:
                running[0] += change
                self.options.progress.members(self.where, running[0], len(members))

        def one(i: int) -> End:
            member = members[i]
            if halt.is_set() or core.spine_action(member, rows[member["stepId"]]) != "run":
                return End("not_dispatched")
            counted(1)
            try:
                end = self._member(attempts, StartStep(member, reached.index, False), rows, halt, block)
            finally:
                counted(-1)
            if decisions.stops_block(block, member, end):
                halt.set()
            return end

        attempts.fan_out(one, len(members), block.get("concurrency", len(members)), halt)
        return decisions.block_end(block, self._rows(), self.options.hints, self.run_id)

    def _member(
        self, attempts: Attempts, reached: StartStep, rows: Rows, halt: threading.Event, block: pf.ParallelStep
    ) -> End:
        """One member to its end, journaled as its own step's (a block that fails and continues
        leaves its failed members' outputs null)."""
        start = StepStart(reached.step["stepId"], reached.index)
        end = self._step(attempts, reached, rows, start, halt)
        ended = decisions.step_ended(reached, end, rows)
        if isinstance(ended, BlockStep):
            with self.store.transaction(durable=False):
                start.journal(self.store, self.run_id)
                self.store.block_step(self.run_id, reached.step["stepId"], end.notes, end.reason)
        elif isinstance(ended, FailStep):
            continued = ended.continued or block["onError"] == "continue"
            self._fail(dataclasses.replace(ended, continued=continued), rows, start)
        elif isinstance(ended, CompleteStep):
            self._complete_step(ended, rows, start)
        return end
