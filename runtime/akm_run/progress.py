"""What a drive shows while it runs, on stderr: a live line on a terminal (steps done, the current
step, the true number of units in flight, redrawn as units start and end), else one plain line per
step start and end with its duration. Nothing is coloured (NO_COLOR is honoured by printing none)."""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class Progress:
    """The events a drive reports; this base shows nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0

    def step_started(self, where: str, step_id: str, done: int, total: int) -> None:
        """The spine reached a step (`where` names a child run, "" for the top-level one)."""

    def step_ended(self, where: str, step_id: str, status: str, seconds: float) -> None:
        """A step completed, failed or blocked in this drive."""

    def unit_started(self) -> None:
        with self._lock:
            self.in_flight += 1
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
            self.stream.write(text + "\n")
            self.stream.flush()


class Live(Progress):
    """One line redrawn in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream
        self.state = ("", 0, 0)  # (current step, steps done, steps total)

    def step_started(self, where: str, step_id: str, done: int, total: int) -> None:
        with self._lock:
            self.state = (f"{where}{step_id}", done, total)
            self._draw()

    def step_ended(self, where: str, step_id: str, status: str, seconds: float) -> None:
        with self._lock:
            current, done, total = self.state
            self.state = (current, done + (status == "completed"), total)
            self._draw()

    def _units_changed(self) -> None:
        self._draw()

    def _draw(self) -> None:
        current, done, total = self.state
        units = f"{self.in_flight} unit{'s' if self.in_flight != 1 else ''} in flight"
        self.stream.write(f"\r\033[Ksteps {done}/{total} done, at {current}, {units}")
        self.stream.flush()

    def close(self) -> None:
        with self._lock:
            self.stream.write("\r\033[K")
            self.stream.flush()


def for_this_process() -> Progress:
    """Live on a terminal (stdout and stderr both), plain lines otherwise."""
    if sys.stdout.isatty() and sys.stderr.isatty():
        return Live(sys.stderr)
    return Plain(sys.stderr)
