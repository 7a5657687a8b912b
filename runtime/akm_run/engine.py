"""The drive loop: one engine entry point (`Engine.drive`) for top-level and child runs.

A drive takes the run's lock, re-verifies the stored plan, reclaims attempts a crashed driver
left running, then walks the spine. Every unit is journaled before its process starts and
after it ends; a completed unit is reused and never dispatched again."""

from __future__ import annotations

import functools
import queue
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akm_run import children, identity, units
from akm_run.hints import Hints
from akm_run.locks import RunLock
from akm_run.plan import PlanError, canonical_bytes, plan_hash, verify_plan
from akm_run.progress import Progress
from akm_run.store import RunRow, StepRow, Store
from akm_run.strictjson import dumps

DEFAULT_MAX_CONCURRENCY = 16
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]")


class Aborted(Exception):
    """The drive was interrupted (signal or run timeout); the run stays active and resumable."""


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


@dataclass(slots=True)
class Result:
    """How one drive ended. `status` is the run's status, or "aborted" (run still active)."""

    run_id: str
    status: str
    failure: dict[str, Any] | None = None
    blocked: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    exported: Any = None


@dataclass(slots=True)
class Step:
    """How a step ended in this drive."""

    status: str  # completed | failed | blocked
    output: Any = None
    reason: str | None = None
    message: str | None = None
    notes: str | None = None
    recorded: bool = False  # its completion is already journaled (with its one unit's)


@dataclass(slots=True)
class UnitEnd:
    status: str  # completed | failed | blocked | not_dispatched
    output: Any = None
    reason: str | None = None
    message: str | None = None
    recorded: bool = False  # the step's completion was journaled with the unit's


@dataclass
class Engine:
    store: Store
    options: Options
    abort: threading.Event = field(default_factory=threading.Event)
    why_aborted: str = "interrupted"

    def drive(self, run_id: str) -> Result:
        """Drive a run until it completes, fails, blocks or is aborted. Raises LockHeld when another
        driver holds the run, PlanError when the stored plan no longer verifies."""
        with RunLock(self.options.state_dir, run_id):
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
        """Attempts left `running` by a crashed driver: stop their leftover processes, mark them."""
        for unit_id, step_id, attempt in self.store.interrupted_attempts(run_id):
            units.stop_leftover(attempt.pid, attempt.host)
            self.store.finish_attempt(run_id, unit_id, step_id, attempt.attempt, "interrupted", final=False)


def stored_plan(run: RunRow) -> dict[str, Any]:
    """The run's plan, re-verified: a tampered row is refused (PlanError)."""
    import json

    from akm_run.plan import loads_strict

    plan = loads_strict(run.plan_json.encode())
    verify_plan(plan)
    if plan_hash(plan) != run.plan_hash:
        raise PlanError("plan", f"stored plan hash {plan_hash(plan)} does not match the run's {run.plan_hash}")
    verified: dict[str, Any] = json.loads(run.plan_json)
    return verified


def settled(run: RunRow, store: Store, hints: Hints) -> Result:
    """The result of a run that is not active: nothing is dispatched."""
    result = Result(run.id, run.status, failure=run.failure, exported=run.exported)
    if run.status == "blocked":
        step = next((s for s in store.steps(run.id) if s.status == "blocked"), None)
        notes = children.step_notes(store, hints, run.id, step) if step is not None else run.notes
        result.blocked = {"stepId": step.step_id if step else None, "notes": notes or ""}
    return result


def resolve(reference: str, params: Mapping[str, Any], steps: Mapping[str, StepRow]) -> tuple[bool, Any]:
    """(True, value) for a reference that resolves against the run's params and stored outputs."""
    if reference.startswith("params."):
        name = reference[len("params.") :]
        return (name in params), params.get(name)
    head, _, rest = reference[len("steps.") :].partition(".output")
    row = steps.get(head)
    if row is None or row.status != "completed":
        return False, None
    return walk(row.output, rest)


def walk(value: Any, path: str) -> tuple[bool, Any]:
    """(True, the value at `path`, a run of `.name` and `[n]` segments) when every segment exists."""
    for match in _SEGMENT.finditer(path):
        key, index = match.group(1), match.group(2)
        if key is not None and isinstance(value, dict) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return False, None
    return True, value


class _Drive:
    """One drive of one run (the state of the loop)."""

    def __init__(self, engine: Engine, run: RunRow, plan: dict[str, Any]) -> None:
        self.engine, self.store, self.options = engine, engine.store, engine.options
        self.plan = plan
        self.run_id = run.id
        self.params = run.params
        self.rows = {row.step_id: row for row in self.store.steps(run.id)}
        self.where = "" if run.parent_run_id is None else f"{run.ref} ({run.id}): "
        self.starting: tuple[str, int] | None = None  # the step the spine reached, not yet journaled
        self.last = False  # whether it is the last step (completed together with the outputs)

    # -- the spine ---------------------------------------------------------------------------------

    def run(self) -> Result:
        timer = self._deadline()
        self.scratch = units.scratch_directory(self.options.state_dir, self.run_id)
        try:
            return self._spine()
        except Aborted:
            return Result(self.run_id, "aborted", error={"code": "ABORTED", "message": self._abort_message()})
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

    def _abort_message(self) -> str:
        return f"{self.engine.why_aborted}; the run is resumable: {self.options.hints('run', self.run_id)}"

    def _spine(self) -> Result:
        steps = self.plan["steps"]
        last_completion: tuple[str, Any] | None = None
        for index, step in enumerate(steps):
            row = self.rows[step["stepId"]]
            if row.status in ("completed", "skipped") or (row.status == "failed" and step["onError"] == "continue"):
                continue
            if row.status == "blocked":
                return self._blocked(step["stepId"], row.notes or "")
            self._check_abort()
            # Recorded with the step's first write (usually its first unit's dispatch): one commit fewer.
            self.starting = (step["stepId"], index)
            self.last = index == len(steps) - 1
            started = time.monotonic()
            self.options.progress.step_started(self.where, step["stepId"], index, len(steps))
            ended = self._step(step, row)
            self.options.progress.step_ended(self.where, step["stepId"], ended.status, time.monotonic() - started)
            if ended.status == "completed":
                if self.last:
                    last_completion = (step["stepId"], ended.output)  # completed with the outputs, below
                    break
                if not ended.recorded:
                    self._complete_step(step, ended.output)
            elif ended.status == "blocked":
                blocked: dict[str, Any] = {"reason": ended.reason} if ended.reason else {}
                with self.store.transaction(durable=False):
                    self._record_start()
                    self.store.set_step(self.run_id, step["stepId"], "blocked", notes=ended.notes, **blocked)
                return self._blocked(step["stepId"], ended.notes or "")
            else:
                with self.store.transaction(durable=False):
                    self._record_start()
                    self.store.set_step(self.run_id, step["stepId"], "failed", reason=ended.reason,
                                        message=ended.message)  # fmt: skip
                self.rows[step["stepId"]].status = "failed"
                if step["onError"] != "continue":
                    failure = {"stepId": step["stepId"], "reason": ended.reason, "message": ended.message}
                    self.store.set_run_status(self.run_id, "failed", failure=failure)
                    return Result(self.run_id, "failed", failure=failure)
        return self._finish(last_completion)

    def _check_abort(self) -> None:
        if self.engine.abort.is_set():
            raise Aborted

    def _record_start(self) -> None:
        """Journal that the spine reached the current step (inside the caller's transaction)."""
        starting, self.starting = self.starting, None
        if starting is not None:
            self.store.start_step(self.run_id, *starting)

    def _complete_step(self, step: dict[str, Any], output: Any) -> None:
        with self.store.transaction(durable=False):
            self._record_start()
            self.store.set_step(self.run_id, step["stepId"], "completed", output=output)
            if step["kind"] == "route":
                self._skip_unselected(step, output)
        row = self.rows[step["stepId"]]
        row.status, row.output_json = "completed", dumps(output)

    def _skip_unselected(self, step: dict[str, Any], selected: str) -> None:
        targets = [c["next"] for c in step["cases"]] + ([step["default"]] if "default" in step else [])
        for name in dict.fromkeys(targets):
            if name != selected and self.rows[name].status == "pending":
                self.store.set_step(self.run_id, name, "skipped", notes=f"route {step['stepId']} selected {selected}")
                self.rows[name].status = "skipped"

    def _refresh(self) -> None:
        self.rows = {row.step_id: row for row in self.store.steps(self.run_id)}

    def _blocked(self, step_id: str, notes: str) -> Result:
        self.store.set_run_status(self.run_id, "blocked", notes=notes)
        return Result(self.run_id, "blocked", blocked={"stepId": step_id, "notes": notes})

    def _finish(self, last: tuple[str, Any] | None) -> Result:
        """Complete the run: the last step's completion, the outputs and the run's status in one
        transaction; an invalid output rolls all of it back."""
        try:
            with self.store.transaction():
                if last is not None:
                    step = self.plan["steps"][-1]
                    self._complete_step(step, last[1])
                exported = self._outputs()
                self.store.set_run_status(self.run_id, "completed", exported=exported)
        except OutputsInvalid as invalid:
            self._refresh()
            message = "; ".join(invalid.problems)
            return Result(self.run_id, "active", error={"code": "WORKFLOW_OUTPUT_INVALID", "message": message})
        return Result(self.run_id, "completed", exported=exported)

    def _outputs(self) -> Any:
        declared = self.plan.get("outputs")
        if not declared:
            return {"runId": self.run_id, "status": "completed"}
        exported, problems = {}, []
        for name, output in declared.items():
            ok, value = resolve(output["from"], self.params, self.rows)
            if not ok:
                problems.append(f"output {name}: {output['from']} did not resolve")
                continue
            errors = units.schema_errors(value, output["schema"]) if "schema" in output else []
            if errors:
                problems.append(f"output {name}: {errors[0]}")
                continue
            exported[name] = value
        if problems:
            raise OutputsInvalid(problems)
        return exported

    # -- steps -------------------------------------------------------------------------------------

    def _step(self, step: dict[str, Any], row: StepRow) -> Step:
        if step["kind"] == "route":
            return self._route(step)
        if step["target"]["kind"] == "approval":
            message, hint = step["target"]["message"], self.options.hints
            notes = (
                f'Waiting for approval: "{message}"\n'
                f"Approve with `{hint('approve', self.run_id, step['stepId'])}` "
                f"(or reject with `{hint('approve', self.run_id, step['stepId'], '--reject')}`), "
                f"then `{hint('run', self.run_id)}`."
            )
            return Step("blocked", notes=notes)
        if "gate" not in step:
            return self._work(step, 0, None)
        return self._gated(step, row)

    def _route(self, step: dict[str, Any]) -> Step:
        ok, value = resolve(step["input"], self.params, self.rows)
        if not ok:
            return Step("failed", reason="input_unresolved", message=f"{step['input']} did not resolve")
        for case in step["cases"]:
            if canonical_bytes(case["match"]) == canonical_bytes(value):
                return Step("completed", output=case["next"])
        if "default" in step:
            return Step("completed", output=step["default"])
        return Step("failed", reason="route_no_match", message=f"no case of the route matches {dumps(value)}")

    def _gated(self, step: dict[str, Any], row: StepRow) -> Step:
        gate = step["gate"]
        iteration, loops, feedback = row.gate_iteration, row.gate_loops, row.gate_feedback
        while True:
            work = self._work(step, iteration, feedback if iteration else None)
            if work.status != "completed":
                return work
            check = self._unit(step, gate["check"], f"{step['stepId']}:gate", iteration, None, None, {},
                               feedback if iteration else None, gate_output=work.output, schema=None)  # fmt: skip
            if check.status == "completed":
                return work
            if check.reason != "exit":
                return Step("failed", reason=check.reason, message=f"gate check: {check.message}")
            feedback = check.output if isinstance(check.output, str) else dumps(check.output)
            self.store.event(self.run_id, "gate.rejected", step["stepId"], iteration=iteration, feedback=feedback)
            if loops >= gate["maxLoops"]:
                quoted = (
                    "\n".join(f"  > {line}" for line in (feedback or "(no output)").splitlines()) or "  > (no output)"
                )
                notes = (
                    f"The gate check rejected the output {loops + 1} time(s); max_loops is {gate['maxLoops']}. "
                    f"Last feedback:\n{quoted}\n"
                    f"Resume with `{self.options.hints('resume', self.run_id)}`, "
                    f"then `{self.options.hints('run', self.run_id)}`."
                )
                return Step("blocked", reason="gate_rejected", notes=notes)
            iteration, loops = iteration + 1, loops + 1
            self.store.set_step(self.run_id, step["stepId"], "running", event=False, gate_iteration=iteration,
                                gate_loops=loops, gate_feedback=feedback)  # fmt: skip

    def _work(self, step: dict[str, Any], loop: int, feedback: str | None) -> Step:
        inputs, missing = self._inputs(step)
        if step["kind"] == "unit":
            if missing:
                return self._unresolved(
                    step, identity.journal_id(identity.unit_id(step["stepId"]), loop), None, missing
                )
            solo = "gate" not in step and not self.last  # its output is its one unit's: complete both at once
            end = self._unit(step, step["target"], identity.unit_id(step["stepId"]), loop, None, None, inputs,
                             feedback, schema=step.get("outputSchema"), completes=solo)  # fmt: skip
            if end.status == "blocked":
                return Step("blocked", reason=end.reason, notes=end.message)
            return Step(end.status, end.output, end.reason, end.message, recorded=end.recorded)
        ok, items = resolve(step["over"], self.params, self.rows)
        if missing or not ok or not isinstance(items, list):
            problem = missing or [f"{step['over']} is not a list" if ok else f"{step['over']} did not resolve"]
            return Step("failed", reason="input_unresolved", message="; ".join(problem))
        return self._map(step, items, inputs, loop, feedback)

    def _inputs(self, step: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        inputs, missing = {}, []
        for reference in step.get("inputs", []):
            ok, value = resolve(reference, self.params, self.rows)
            if ok:
                inputs[reference] = value
            else:
                missing.append(f"{reference} did not resolve")
        return inputs, missing

    def _unresolved(self, step: dict[str, Any], journal: str, index: int | None, missing: list[str]) -> Step:
        message = "; ".join(missing)
        self.store.fail_unit(self.run_id, journal, step["stepId"], index, "input_unresolved", message)
        return Step("failed", reason="input_unresolved", message=message)

    def _map(
        self, step: dict[str, Any], items: list[Any], inputs: dict[str, Any], loop: int, feedback: str | None
    ) -> Step:
        width = max(1, min(step["concurrency"], self.plan["limits"]["concurrency"], self.options.max_concurrency))
        stop = threading.Event()
        ends: list[UnitEnd | None] = [None] * len(items)

        def one(index: int) -> UnitEnd:
            if stop.is_set() or self.engine.abort.is_set():
                return UnitEnd("not_dispatched")
            unit = identity.unit_id(step["stepId"], items[index], mapped=True)
            end = self._unit(step, step["target"], unit, loop, items[index], index, inputs, feedback,
                             schema=step.get("outputSchema", {}).get("items") if "outputSchema" in step else None)  # fmt: skip
            if end.status in ("failed", "blocked"):
                stop.set()
            return end

        aborted, broken = False, None
        # Completions arrive on a queue: each wake-up handles one finished unit, never a scan of all
        # pending ones, so dispatch costs the same per unit at 2,000 items as at 200.
        finished: queue.SimpleQueue[tuple[int, Future[UnitEnd]]] = queue.SimpleQueue()
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="akm-unit") as pool:
            for i in range(len(items)):
                pool.submit(one, i).add_done_callback(functools.partial(_report, finished, i))
            for _ in range(len(items)):
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
        for index, end in enumerate(ends):
            if end is not None and end.status == "failed":
                return Step("failed", reason=end.reason, message=f"item {index}: {end.message}")
        blocked = [end for end in ends if end is not None and end.status == "blocked"]
        if blocked:
            return Step("blocked", reason=blocked[0].reason, notes="\n".join(end.message or "" for end in blocked))
        outputs = [end.output for end in ends if end is not None]
        if "outputSchema" in step:
            problems = units.schema_errors(outputs, step["outputSchema"])
            if problems:
                return Step("failed", reason="output_invalid", message=problems[0])
        return Step("completed", output=outputs)

    # -- units -------------------------------------------------------------------------------------

    def _unit(
        self,
        step: dict[str, Any],
        target: dict[str, Any],
        unit: str,
        loop: int,
        item: Any,
        index: int | None,
        inputs: dict[str, Any],
        feedback: str | None,
        *,
        schema: dict[str, Any] | None,
        gate_output: Any = None,
        completes: bool = False,
    ) -> UnitEnd:
        """One unit to its end: reuse a completed journal row, else dispatch, retrying as the step says."""
        journal = identity.journal_id(unit, loop)
        known = self.store.unit(self.run_id, journal)
        if known is not None and known.status == "completed":
            return UnitEnd("completed", known.output)
        bindings = None
        if target["kind"] == "child-workflow":
            bindings, missing = self._bindings(target, item)
            if missing:
                message = "; ".join(missing)
                self.store.fail_unit(self.run_id, journal, step["stepId"], index, "input_unresolved", message)
                return UnitEnd("failed", reason="input_unresolved", message=message)
        digest = identity.input_hash(target, self.params, inputs, item, bindings, feedback)
        failed_before = (
            0 if known is None else sum(1 for a in self.store.attempts(self.run_id, journal) if a.status == "failed")
        )
        retry = step.get("retry") if not journal.startswith(f"{step['stepId']}:gate") else None
        retries, new_unit = 0, known is None
        while True:
            self._check_abort()
            dispatch = identity.dispatch_id(self.run_id, journal, failed_before)
            with self.store.transaction(durable=False):
                self._record_start()
                attempt = self.store.begin_attempt(self.run_id, journal, step["stepId"], index, digest, dispatch,
                                                   new_unit=new_unit, max_units=self.plan["limits"].get("maxUnits"))  # fmt: skip
            new_unit = False
            if not attempt:
                message = f"the run has dispatched its limit of {self.plan['limits']['maxUnits']} units (max_units)"
                self.store.fail_unit(self.run_id, journal, step["stepId"], index, "budget_exceeded", message)
                return UnitEnd("failed", reason="budget_exceeded", message=message)
            # Only what the step declares reaches a unit (language-v2.md): its inputs, its item, and
            # a gate's feedback; never the run's other params.
            context: dict[str, Any] = {
                "runId": self.run_id, "stepId": step["stepId"], "unitId": journal, "dispatchId": dispatch,
                "attempt": attempt, "inputs": inputs,
            }  # fmt: skip
            if index is not None:
                context["item"], context["itemIndex"] = item, index
            if feedback is not None:
                context["gateFeedback"] = feedback
            if gate_output is not None:
                context["output"] = gate_output
            spec = units.Unit(target, context, step.get("env", []), schema, step.get("timeoutMs"),
                              self.options.workdir, self.options.agent_cmd)  # fmt: skip
            self.options.progress.unit_started()
            try:
                if bindings is not None:  # the one place a unit is dispatched: child runs too
                    outcome, _ = children.drive_child(
                        self.engine, self.run_id, step["stepId"], journal, digest, target, bindings
                    )
                else:
                    outcome = units.execute(
                        spec,
                        self.engine.abort,
                        functools.partial(self.store.attempt_process, self.run_id, journal, attempt, host=_host()),
                        self.options.environ,
                        self.scratch,
                    )
            except Exception:
                self._interrupted(journal, step["stepId"], attempt)
                raise
            finally:
                self.options.progress.unit_ended()
            if outcome.status == "aborted":
                self.store.finish_attempt(self.run_id, journal, step["stepId"], attempt, "aborted", reason="aborted",
                                          message=outcome.message, stderr_tail=outcome.stderr_tail)  # fmt: skip
                raise Aborted
            if outcome.status == "completed":
                with self.store.transaction(durable=False):
                    self.store.finish_attempt(self.run_id, journal, step["stepId"], attempt, "completed",
                                              stderr_tail=outcome.stderr_tail, output=outcome.output)  # fmt: skip
                    if completes:
                        self.store.set_step(self.run_id, step["stepId"], "completed", output=outcome.output)
                if completes:
                    row = self.rows[step["stepId"]]
                    row.status, row.output_json = "completed", dumps(outcome.output)
                return UnitEnd("completed", outcome.output, recorded=completes)
            again = retry is not None and outcome.reason in retry["on"] and retries < retry["max"]
            self.store.finish_attempt(self.run_id, journal, step["stepId"], attempt, "failed", reason=outcome.reason,
                                      message=outcome.message, exit_code=outcome.exit_code, output=outcome.output,
                                      stderr_tail=outcome.stderr_tail, final=not again)  # fmt: skip
            if not again:
                status = "blocked" if outcome.reason == "child_workflow_blocked" else "failed"
                return UnitEnd(status, outcome.output, outcome.reason, outcome.message)
            retries += 1
            failed_before += 1
            assert retry is not None
            self._backoff(retry.get("backoffMs", 0) * (2 ** (retries - 1)))

    def _interrupted(self, journal: str, step_id: str, attempt: int) -> None:
        """An internal error ends an attempt: finish it as interrupted (the unit runs again on resume)
        if the journal can still be written."""
        try:
            self.store.finish_attempt(self.run_id, journal, step_id, attempt, "interrupted", final=False)
        except Exception:  # noqa: BLE001 - the error being raised says what went wrong
            pass

    def _bindings(self, target: dict[str, Any], item: Any) -> tuple[dict[str, Any], list[str]]:
        """A child-workflow target's bindings, resolved: literals as they are, references from the run,
        `item` from the element this unit of a map step handles."""
        bound, missing = {}, []
        for binding in target.get("bindings", []):
            if binding["kind"] == "literal":
                bound[binding["name"]] = binding["value"]
                continue
            if binding["kind"] == "item":
                ok, value = walk(item, binding["from"][len("item") :])
            else:
                ok, value = resolve(binding["from"], self.params, self.rows)
            if ok:
                bound[binding["name"]] = value
            else:
                missing.append(f"binding {binding['name']}: {binding['from']} did not resolve")
        return bound, missing

    def _backoff(self, ms: int) -> None:
        if ms and self.engine.abort.wait(ms / 1000):
            raise Aborted


def _report(finished: queue.SimpleQueue[tuple[int, Future[UnitEnd]]], index: int, future: Future[UnitEnd]) -> None:
    finished.put((index, future))


def _host() -> str:
    import socket

    return socket.gethostname()
