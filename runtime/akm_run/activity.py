"""A unit's activity (docs/runtime.md, "Progress and stalls"): the `AKM_PROGRESS` channel's lines,
its file read without trusting it, and the silence of an attempt measured against `stall_after`.

`parse_line` is the one reader of a channel line: it returns a `Frame` (the unit's current
activity, replacing the one before), a `Pulse` (liveness only) or an `Invalid` line. A kind of line
added later (token usage) is one more branch there. `Channel` reads the file a unit appends to, a
bounded amount per sample however much the unit wrote (akm_run.progressfile), and never follows a
link or blocks on a pipe planted at its path. `Watch` is one attempt's activity: its channel, the bytes its stderr
produced, and whether it is silent. `Board` samples the watches of the attempts in flight at most
once per period, and hands what changed to the journal in one call."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akm_run import strictjson
from akm_run.progressfile import Follower
from akm_run.usagelines import MAX_LINE_BYTES as MAX_LINE_BYTES
from akm_run.usagelines import usage_of

MAX_NOTE_CHARS = 200
FRAME_KEYS = ("note", "progress", "total")
DRIVE_PERIOD_S = 1.0  # a drive journals activity at most once a second
POOL_PERIOD_S = 5.0  # a pool's worker, which writes to the shared database, at most every 5 s


# -- one line --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """What the unit says it is doing now: any of a note and a progress count out of a total."""

    note: str | None = None
    progress: int | float | None = None
    total: int | float | None = None

    def document(self) -> dict[str, Any]:
        return {
            k: v for k, v in (("note", self.note), ("progress", self.progress), ("total", self.total)) if v is not None
        }


@dataclass(frozen=True, slots=True)
class Pulse:
    """`{}`: the unit is alive, its frame unchanged."""


@dataclass(frozen=True, slots=True)
class Invalid:
    """A line that is not one of the above; counted, never shown."""

    why: str


Line = Frame | Pulse | Invalid


def parse_line(raw: bytes) -> Line:
    """One line of a progress channel (without its newline)."""
    if len(raw) > MAX_LINE_BYTES:
        return Invalid("longer than 4 KiB")
    try:
        value = strictjson.loads(raw.decode("utf-8"), max_depth=8)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return Invalid("not strict JSON in UTF-8")
    if not isinstance(value, dict):
        return Invalid("not a JSON object")
    if not value or (list(value) == ["usage"] and usage_of(raw) is not None):
        return Pulse()  # a usage report (D8, read by akm_run.budgets) is a sign of life too
    unknown = set(value) - set(FRAME_KEYS)
    if unknown:
        return Invalid(f"unknown key {sorted(unknown)[0]!r}")
    note = value.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE_CHARS or not note.isprintable()):
        return Invalid("note is not a short line of text")
    counts = [value.get(k) for k in ("progress", "total")]
    for count in counts:
        if count is not None and not _count(count):
            return Invalid("progress and total are numbers of at least 0")
    return Frame(note, counts[0], counts[1])


def _count(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


# -- the file ---------------------------------------------------------------------------------------------


class Channel:
    """The progress file of one attempt, created private (0600, never through a link) in the drive's
    private directory, and followed as akm_run.progressfile follows it: a regular file that takes
    its place is read from its start; a link, a pipe or a directory there is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[Line] = []  # read since the last `take`
        self._file = Follower.created(path)

    def read(self) -> None:
        """Read what the unit appended since the last read (at most WINDOW_BYTES) into `lines`."""
        self.lines += [parse_line(line) for line, _ in self._file.read()]

    def close(self) -> None:
        self._file.close()


# -- one attempt ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Beat:
    """What changed about one attempt since the board's last sample, for the journal."""

    run_id: str
    unit_id: str
    step_id: str
    attempt: int
    last_activity_at: float
    progress: dict[str, Any] | None
    ignored: int
    event: str | None = None  # "unit.silent" or "unit.active"
    data: dict[str, Any] = field(default_factory=dict)


class Watch:
    """One attempt's activity: its channel's frames and pulses and its stderr, and its silence."""

    def __init__(self, context: dict[str, Any], channel: Channel, stall_after_ms: int | None) -> None:
        self.run_id, self.unit_id = context["runId"], context["unitId"]
        self.step_id, self.attempt = context["stepId"], context["attempt"]
        self.channel, self.stall_after_ms = channel, stall_after_ms
        self.last_at = time.time()  # wall clock, as journaled
        self.last = time.monotonic()  # what silence is measured with
        self.frame: Frame | None = None
        self.ignored = 0
        self.silent_since: float | None = None  # monotonic: a silent stretch that was journaled
        self.stretches = 0  # silent stretches journaled (the first one is notified as `stalled`)
        self._lock = threading.Lock()
        self._dirty = False

    def active(self) -> None:
        """Something the unit did counts as activity (a byte on stderr, a valid channel line)."""
        self.last, self.last_at, self._dirty = time.monotonic(), time.time(), True

    def sample(self) -> None:
        """Read the channel: the newest frame replaces the one before; each valid line is activity."""
        with self._lock:
            self.channel.read()
            lines, self.channel.lines = self.channel.lines, []
            for line in lines:
                if isinstance(line, Invalid):
                    self.ignored += 1
                    self._dirty = True
                    continue
                if isinstance(line, Frame):
                    self.frame = line
                self.active()

    def last_beat(self) -> Beat | None:
        """At the attempt's end: its frame and ignored lines, if it has any to keep (else None)."""
        self.sample()
        if self.frame is None and not self.ignored:
            return None
        return self.beat(time.monotonic())

    def close(self) -> None:
        """The attempt ended: its channel is closed (under the lock a board's sample reads it with)."""
        with self._lock:
            self.channel.close()

    def silent(self, now: float) -> bool:
        return self.stall_after_ms is not None and (now - self.last) * 1000 >= self.stall_after_ms

    def beat(self, now: float) -> Beat | None:
        """What to journal after a sample (None: nothing changed)."""
        event, data = None, {}
        if self.silent(now) and self.silent_since is None:
            self.silent_since, self.stretches = self.last, self.stretches + 1
            event = "unit.silent"
            data = {
                "stretch": self.stretches,
                "attempt": self.attempt,
                "silentMs": round((now - self.last) * 1000),
                "stallAfterMs": self.stall_after_ms,
            }
        elif self.silent_since is not None and self.last > self.silent_since:
            event = "unit.active"
            data = {"attempt": self.attempt, "silentMs": round((self.last - self.silent_since) * 1000)}
            self.silent_since = None
        if event is None and not self._dirty:
            return None
        self._dirty = False
        frame = None if self.frame is None else self.frame.document()
        return Beat(
            self.run_id, self.unit_id, self.step_id, self.attempt, self.last_at, frame, self.ignored, event, data
        )


# -- the attempts in flight -----------------------------------------------------------------------------------


class Board:
    """The watches of the attempts in flight on one drive (or one pool worker), sampled at most once
    per `period_s`; `journal` receives each sample's beats in one call. The unit threads' own loops
    call `tick` as they wait on their processes: whichever comes first after the period samples all,
    the others return at once. A journal that fails is tried again at the next period."""

    def __init__(self, journal: Callable[[list[Beat]], None], period_s: float = DRIVE_PERIOD_S) -> None:
        self.journal, self.period_s = journal, period_s
        self.watches: dict[int, Watch] = {}
        self._lock = threading.Lock()
        self._next = 0.0

    def add(self, watch: Watch) -> None:
        with self._lock:
            self.watches[id(watch)] = watch

    def remove(self, watch: Watch) -> None:
        with self._lock:
            self.watches.pop(id(watch), None)

    def tick(self, *, now: float | None = None, force: bool = False) -> None:
        """Sample every watch and journal what changed, unless the period has not passed."""
        now = time.monotonic() if now is None else now
        if (not force and now < self._next) or not self._lock.acquire(blocking=force):
            return
        try:
            self._next = now + self.period_s
            beats = []
            for watch in list(self.watches.values()):
                watch.sample()
                if (beat := watch.beat(now)) is not None:
                    beats.append(beat)
            if beats:
                with contextlib.suppress(Exception):  # a journal that is away: the next period writes
                    self.journal(beats)
        finally:
            self._lock.release()


def stalled(watch: Watch, board: Board | None) -> bool:
    """Whether an attempt under `on_stall = terminate` must end now: silent even after a fresh look
    at its channel (whose lines the board may not have read yet), its silence journaled first."""
    now = time.monotonic()
    if not watch.silent(now):
        return False
    watch.sample()
    if not watch.silent(time.monotonic()):
        return False
    if board is not None:
        board.tick(force=True)
    return True
