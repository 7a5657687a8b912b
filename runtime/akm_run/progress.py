"""What a drive shows while it runs, on stderr: a live line on a terminal (steps done, the current
step, the true number of units in flight, redrawn as units start and end), else one plain line per
step start and end with its duration. Nothing is coloured (NO_COLOR is honoured by printing none).

The driver calls these itself on SQLite; `run` on the worker pool, where a worker drives, makes the
same calls from the run's journal (`FromJournal`), so both draw the same."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from akm_run.console import escaped
from akm_run.rows import Event, RunRow

STEP_ENDS = {"step.completed": "completed", "step.failed": "failed", "step.blocked": "blocked"}
ATTEMPT_ENDS = ("unit.completed", "unit.failed", "unit.aborted", "unit.interrupted")


def where(run: RunRow) -> str:
    """How progress names a run's steps: bare for a top-level run, after the run for a child run."""
    return "" if run.parent_run_id is None else f"{run.ref} ({run.id}): "


class Progress:
    """The events a drive reports; this base shows nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0

    def step_started(self, where: str, step_id: str, done: int, total: int) -> None:
        """The spine reached a step (`where` names a child run, "" for the top-level one)."""

    def step_ended(self, where: str, step_id: str, status: str, seconds: float) -> None:
        """A step completed, failed or blocked in this drive."""

    def activity(self, frame: dict[str, Any]) -> None:
        """The newest progress frame a unit in flight reported (`{note?, progress?, total?}`)."""

    def members(self, where: str, running: int, total: int) -> None:
        """How many members of the `parallel` block at the run's current step are running now."""

    def unit_started(self, count: int = 1) -> None:
        with self._lock:
            self.in_flight += count
            self._units_changed()

    def unit_ended(self) -> None:
        with self._lock:
            self.in_flight -= 1
            self._units_changed()

    def _units_changed(self) -> None:
        """Called with the lock held."""

    def close(self) -> None:
        """The drive ended: leave the stream clean."""


class Plain(Progress):
    """One line per step start and end, for logs and pipes."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def step_started(self, where: str, step_id: str, done: int, total: int) -> None:
        self._line(f"{where}step {step_id} started")

    def step_ended(self, where: str, step_id: str, status: str, seconds: float) -> None:
        self._line(f"{where}step {step_id} {status} (took {seconds:.3f}s)")

    def _line(self, text: str) -> None:
        with self._lock:
            self.stream.write(escaped(text) + "\n")
            self.stream.flush()


class Live(Progress):
    """One line redrawn in place on a terminal, cut to the terminal's width (a longer line would wrap,
    and only its last row would be redrawn). It shows the run whose step started or ended last: a
    child run while its step runs, its parent again once the parent's step ends."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self.runs: dict[str, tuple[str, int, int]] = {}  # per run: (current step, steps done, total); last shown
        self.frame = ""  # the newest progress frame of a unit in flight, as shown
        self.blocks: dict[str, tuple[int, int]] = {}  # per run at a `parallel` block: (members running, members)

    def step_started(self, where: str, step_id: str, done: int, total: int) -> None:
        with self._lock:
            self.runs.pop(where, None)
            self.runs[where] = (f"{where}{step_id}", done, total)
            self._draw()

    def step_ended(self, where: str, step_id: str, status: str, seconds: float) -> None:
        with self._lock:
            current, done, total = self.runs.pop(where, (f"{where}{step_id}", 0, 0))
            self.runs[where] = (current, done + (status == "completed"), total)
            self.blocks.pop(where, None)
            self._draw()

    def members(self, where: str, running: int, total: int) -> None:
        with self._lock:
            self.blocks[where] = (running, total)
            self._draw()

    def activity(self, frame: dict[str, Any]) -> None:
        with self._lock:
            shown = [json.dumps(frame["note"], ensure_ascii=False)] if "note" in frame else []
            if "progress" in frame:
                shown.append(f"{frame['progress']:g}" + (f"/{frame['total']:g}" if "total" in frame else ""))
            self.frame = " ".join(shown)
            self._draw()

    def _units_changed(self) -> None:
        if not self.in_flight:
            self.frame = ""
        self._draw()

    def _draw(self) -> None:
        where, (current, done, total) = next(reversed(self.runs.items()), ("", ("", 0, 0)))
        units = f"{self.in_flight} unit{'s' if self.in_flight != 1 else ''} in flight"
        frame = f", {self.frame}" if self.frame else ""
        at = f"at {current}, {units}{frame}"
        if where in self.blocks:  # `steps 3/8 done, at checks (2 of 3 members running, 5 units in flight)`
            running, members = self.blocks[where]
            at = f"at {current} ({running} of {members} members running, {units}){frame}"
        line = escaped(f"steps {done}/{total} done, {at}")[: _columns(self.stream) - 1]
        self.stream.write(f"\r\033[K{line}")
        self.stream.flush()

    def close(self) -> None:
        with self._lock:
            self.stream.write("\r\033[K")
            self.stream.flush()


def _columns(stream: TextIO) -> int:
    """The width of the terminal `stream` draws on (80 when it does not say)."""
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns or 80


def for_this_process() -> Progress:
    """Live on a terminal (stdout and stderr both), plain lines otherwise."""
    if sys.stdout.isatty() and sys.stderr.isatty():
        return Live(sys.stderr)
    return Plain(sys.stderr)


# -- progress from the journal ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Run:
    where: str
    steps: dict[str, int]  # step id -> its index in the plan
    started: dict[str, Event] = field(default_factory=dict)  # the step started and not ended, by id


class FromJournal:
    """Makes the calls a driver makes on `progress`, from the journal of the run it drives (and of
    its child runs), in the order the journal holds them: a step's start and end, an attempt's start
    and end (units in flight are attempts started and not ended), a step's duration from the times
    the journal recorded: the time its attempts that ended by themselves ran (the union of their
    dispatch-to-end spans), never the wait for a dead worker's takeover, which an interrupted
    attempt's span holds (its end is when the takeover noticed it); a step without such attempts
    (a gate) from its start to its end. `catch_up` reads what was there before the follower came and draws where
    the run is; `show` draws what follows as it arrives."""

    def __init__(self, progress: Progress, run_of: Callable[[str], RunRow | None]) -> None:
        self.progress, self.run_of = progress, run_of
        self.runs: dict[str, _Run | None] = {}
        self.in_flight: set[tuple[str, str, int]] = set()
        self.began: dict[tuple[str, str, int], float] = {}  # an attempt in flight -> when it was dispatched
        self.ran: dict[tuple[str, str], list[tuple[float, float]]] = {}  # (run, step) -> its attempts' spans
        self.after = 0  # the seq of the last event read

    def catch_up(self, events: Iterable[Event]) -> None:
        """Read the journal so far without drawing, then draw its open steps and units in flight."""
        for event in events:
            self._read(event, draw=False)
        opened = sorted(
            ((e, run) for run in self.runs.values() if run for e in run.started.values()), key=lambda pair: pair[0].seq
        )
        for event, run in opened:
            assert event.step_id is not None
            self.progress.step_started(run.where, event.step_id, run.steps[event.step_id], len(run.steps))
        if self.in_flight:
            self.progress.unit_started(len(self.in_flight))

    def show(self, events: Iterable[Event]) -> None:
        for event in events:
            self._read(event, draw=True)

    def _read(self, event: Event, *, draw: bool) -> None:
        self.after = max(self.after, event.seq)
        if event.kind.startswith("unit."):
            attempt = (event.run_id, str(event.unit_id), int(event.data.get("attempt", 0)))
            if event.kind == "unit.dispatched":
                self.in_flight.add(attempt)
                self.began[attempt] = event.at
                if draw:
                    self.progress.unit_started()
            elif event.kind in ATTEMPT_ENDS and attempt in self.in_flight:  # not a unit failed undispatched
                self.in_flight.discard(attempt)
                began = self.began.pop(attempt, event.at)
                if event.kind != "unit.interrupted":
                    self.ran.setdefault((event.run_id, str(event.step_id)), []).append((began, event.at))
                if draw:
                    self.progress.unit_ended()
            return
        run = self._run(event.run_id)
        if run is None or event.step_id not in run.steps:
            return
        step_id = event.step_id
        if event.kind == "step.started" and step_id not in run.started:  # again after a crash: still the one
            run.started[step_id] = event
            if draw:
                self.progress.step_started(run.where, step_id, run.steps[step_id], len(run.steps))
        elif event.kind in STEP_ENDS and step_id in run.started:
            started = run.started.pop(step_id)
            spans = self.ran.pop((event.run_id, step_id), [])
            seconds = covered(spans) if spans else max(0.0, event.at - started.at)
            if draw:
                self.progress.step_ended(run.where, step_id, STEP_ENDS[event.kind], seconds)

    def _run(self, run_id: str) -> _Run | None:
        """What progress needs of a run, read once (None for a run that is gone)."""
        if run_id not in self.runs:
            row = self.run_of(run_id)
            steps = [] if row is None else json.loads(row.plan_json)["steps"]
            self.runs[run_id] = None if row is None else _Run(where(row), {s["stepId"]: i for i, s in enumerate(steps)})
        return self.runs[run_id]


def covered(spans: Iterable[tuple[float, float]]) -> float:
    """How long at least one of the (start, end) spans was open: their union's length."""
    total, reached = 0.0, -float("inf")
    for start, end in sorted(spans):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total
