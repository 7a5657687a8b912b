"""`akm-run events`: a run's timeline from the append-only events table, as text, JSON or JSON lines,
and followed as it commits until the run settles or its drive ends (docs/runtime.md, "Events")."""

from __future__ import annotations

import fnmatch
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from akm_run import exitcodes, wording
from akm_run.console import C1, emit, escaped, on_signals
from akm_run.database_url import SharedStore
from akm_run.migrations import EVENT_KINDS
from akm_run.progress import where
from akm_run.rows import Event, RunRow
from akm_run.store import Store
from akm_run.wording import Failure

SETTLED = {"run.completed": exitcodes.COMPLETED, "run.failed": exitcodes.FAILED, "run.blocked": exitcodes.BLOCKED}
STATUS_EXIT = {"completed": exitcodes.COMPLETED, "failed": exitcodes.FAILED, "blocked": exitcodes.BLOCKED}
PREFLIGHT_FAILED = "preflight.failed"  # a worker's preflight ended the drive before any dispatch
PREFLIGHT_EXIT = 5
PAGE = 1000  # events read per query: a long history is printed as it is read, never held whole
GLOB = re.compile(r"[a-z.*?\[\]!-]+")


class BadGlob(ValueError):
    """A --kind that is not a glob of event kinds, or matches none."""


def kind_filter(globs: Sequence[str]) -> Callable[[str], bool]:
    """Whether an event kind matches one of the `--kind` globs (every kind, without any). Raises
    BadGlob for a glob of other characters than kinds and glob syntax, an unclosed `[`, or one that
    matches no event kind (a typo would otherwise print nothing, silently)."""
    for glob in globs:
        if not GLOB.fullmatch(glob) or glob.count("[") != glob.count("]"):
            raise BadGlob(f"--kind {glob!r} is not a glob of event kinds (such as step.* or unit.failed)")
        if not fnmatch.filter(EVENT_KINDS, glob):
            raise BadGlob(f"--kind {glob!r} matches no event kind (the kinds: {', '.join(EVENT_KINDS)})")
    if not globs:
        return lambda kind: True
    patterns = [re.compile(fnmatch.translate(glob)) for glob in globs]
    return lambda kind: any(p.match(kind) for p in patterns)


def stamp(seconds: float) -> str:
    """UTC, ISO 8601, to the millisecond: `2026-12-02T22:06:36.120Z`."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1000):03d}Z"


@dataclass(slots=True)
class Lanes:
    """The runs events belong to, read once each: an event's `path` (the top-level run down to its
    own) and how text names a child run (its ref and id)."""

    store: Store
    runs: dict[str, RunRow | None] = field(default_factory=dict)

    def row(self, run_id: str) -> RunRow | None:
        if run_id not in self.runs:
            self.runs[run_id] = self.store.run(run_id)
        return self.runs[run_id]

    def path(self, run_id: str) -> list[str]:
        path, current = [run_id], self.row(run_id)
        while current is not None and current.parent_run_id is not None and len(path) < 64:
            path.insert(0, current.parent_run_id)
            current = self.row(current.parent_run_id)
        return path

    def label(self, run_id: str, followed: str) -> str:
        row = self.row(run_id)
        return "" if run_id == followed or row is None else where(row)


def document(event: Event, lanes: Lanes) -> dict[str, Any]:
    """One event as JSON: `{seq, at, runId, path, kind, stepId?, unitId?, attempt?, data}`."""
    out: dict[str, Any] = {"seq": event.seq, "at": stamp(event.at), "runId": event.run_id}
    out |= {"path": lanes.path(event.run_id), "kind": event.kind}
    if event.step_id is not None:
        out["stepId"] = event.step_id
    if event.unit_id is not None:
        out["unitId"] = event.unit_id
    if isinstance(attempt := event.data.get("attempt"), int):
        out["attempt"] = attempt
    out["data"] = event.data
    return out


def json_line(value: Any) -> str:
    """Compact JSON on one line, its C1 controls escaped as console.emit escapes them."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def text_line(event: Event, lanes: Lanes, followed: str, origin: float | None) -> str:
    """`22:06:36.120  +0.004s  step.started  collect`: UTC time, offset from the followed run's
    publication, a child run's ref and id, the kind, the step, unit and attempt, a silence, the event a
    notification told of and its notifier's exit code, and a failure's reason."""
    whole = int(event.at)
    clock = time.strftime("%H:%M:%S", time.gmtime(whole)) + f".{int((event.at - whole) * 1000):03d}"
    offset = f"{event.at - origin:+.3f}s" if origin is not None else "?"
    subject = [s for s in (event.step_id, event.unit_id) if s is not None]
    if isinstance(attempt := event.data.get("attempt"), int):
        subject.append(f"attempt {attempt}")
    if isinstance(silent := event.data.get("silentMs"), int):  # unit.silent, unit.active
        subject.append(f"silent {silent / 1000:.1f}s")
    if isinstance(told := event.data.get("seq"), int):  # notify.*: the event it told of
        subject.append(f"of event {told}")
    if isinstance(code := event.data.get("exitCode"), int):
        subject.append(f"exit {code}")
    for key in ("reason", "by"):
        if isinstance(value := event.data.get(key), str):
            subject.append(f"({value})" if key == "reason" else f"by {value}")
    words = [clock, offset, lanes.label(event.run_id, followed) + event.kind, " ".join(subject)]
    return escaped("  ".join(w for w in words if w))


def pages(store: Store, run_id: str, after: int, children: bool) -> Iterator[Event]:
    """The run's events (and its descendants' with `children`) after seq `after`, in commit order."""
    while True:
        found = store.timeline(run_id, after, children=children, limit=PAGE)
        yield from found
        if len(found) < PAGE:
            return
        after = found[-1].seq


@dataclass(slots=True)
class Printer:
    """Writes selected events to stdout as they come, in the chosen format (`json` collects them)."""

    lanes: Lanes
    followed: str
    fmt: str
    wanted: Callable[[str], bool]
    origin: float | None
    collected: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        if not self.wanted(event.kind):
            return
        if self.fmt == "json":
            self.collected.append(document(event, self.lanes))
            return
        line = json_line(document(event, self.lanes)) if self.fmt == "jsonl" else self.text(event)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def text(self, event: Event) -> str:
        return text_line(event, self.lanes, self.followed, self.origin)


@dataclass(frozen=True, slots=True)
class Polling:
    """How a follower polls its store: every `interval_s` after an event, idle polls stretching to
    `idle_s`; whether a driver holds the run at most every `lock_s`; and `pending(run_id)`, asked
    when the driver let go of a run still active, whether another drive of it is on its way (the
    worker pool recovers a dead worker's drive on another)."""

    interval_s: float = 0.2
    idle_s: float = 0.2
    lock_s: float = 0.0
    pending: Callable[[str], bool] = lambda run_id: False


@dataclass(slots=True)
class Follow:
    """What a follower has seen of its run since it began: the last seq read, whether a drive was
    under way, and the exit code once the run settled (None while it goes on)."""

    run_id: str
    after: int
    active: bool = False  # a driver held the run, or its events moved, since following began
    exit: int | None = None

    def read(self, event: Event) -> None:
        self.after = max(self.after, event.seq)
        self.active = True
        if event.run_id != self.run_id:
            return
        if event.kind in SETTLED:
            self.exit = SETTLED[event.kind]
        elif event.kind == "run.reopened":
            self.exit = None
        elif event.kind == PREFLIGHT_FAILED:
            self.exit = PREFLIGHT_EXIT


def follow(
    store: Store,
    run_id: str,
    children: bool,
    show: Callable[[Event], None],
    stop: threading.Event,
    after: int,
    polling: Polling,
) -> int:
    """Print the run's events from seq `after` on, then as they commit until it settles, or the drive
    under way ends and leaves it active, or `stop` is set (a signal): `run`'s exit code for that end
    (0 completed, 1 failed, 3 blocked or a drive a pause ended, 5 a worker's preflight failed, 130 a
    drive that ended otherwise without settling the run, or a follower stopped). A run that nothing drives is waited on until a drive starts."""
    seen = Follow(run_id, after)
    settled = _drain(store, seen, children, show, history=True)
    if settled is not None:
        return settled
    interval, checked = polling.interval_s, time.monotonic()
    while not stop.wait(interval):
        before = seen.after
        for event in pages(store, run_id, seen.after, children):
            show(event)
            seen.read(event)
        if seen.exit is not None:
            return seen.exit
        moved = seen.after != before
        if moved or time.monotonic() - checked >= polling.lock_s:
            checked = time.monotonic()
            if store.driven(run_id):
                seen.active = True
            elif seen.active and not polling.pending(run_id):
                ended = _drain(store, seen, children, show, history=False)
                return _unsettled(store, run_id) if ended is None else ended
        interval = polling.interval_s if moved else min(interval * 2, polling.idle_s)
    return exitcodes.INTERRUPTED


def _unsettled(store: Store, run_id: str) -> int:
    """A drive ended and left the run active: 3 when a pause holds it (the run's own, an ancestor's
    or one of its steps': `run` ends a paused drive with 3), else 130."""
    return exitcodes.BLOCKED if store.pauses(run_id) != (None, {}) else exitcodes.INTERRUPTED


def _drain(store: Store, seen: Follow, children: bool, show: Callable[[Event], None], *, history: bool) -> int | None:
    """Print what the journal holds past `seen.after`, then read the run's status: its exit code when
    it settled (None while it is active). The history a follower finds is only printed: what the
    run is now is its status (a preflight that failed on an earlier drive ends nothing)."""
    for event in pages(store, seen.run_id, seen.after, children):
        show(event)
        if history:
            seen.after = max(seen.after, event.seq)
        else:
            seen.read(event)
    row = store.run(seen.run_id)
    if row is None or row.status not in STATUS_EXIT:
        return None if history else seen.exit
    for event in pages(store, seen.run_id, seen.after, children):  # what settled it, if it settled meanwhile
        show(event)
        seen.after = max(seen.after, event.seq)
    return STATUS_EXIT[row.status]


@dataclass(frozen=True, slots=True)
class Request:
    """What `akm-run events` was asked for (validated: `since` ≥ 0, `wanted` from kind_filter)."""

    children: bool
    since: int
    wanted: Callable[[str], bool]
    follow: bool
    fmt: str


def asked(children: bool, since: int, kinds: Sequence[str], following: bool, fmt: str) -> Request | Failure:
    """The request the command line makes, or why it cannot be answered (before any store is read)."""
    if since < 0:
        return wording.since_negative(since=since)
    try:
        wanted = kind_filter(kinds)
    except BadGlob as error:
        return wording.bad_kind_glob(error=error)
    return Request(children, since, wanted, following, fmt)


def watch(store: Store, row: RunRow, request: Request, shared: SharedStore | None) -> int:
    """`timeline`, polling as the store wants, until a signal stops a follower."""
    polling = Polling()
    if shared is not None:
        from akm_run import submitting  # DBOS: for the shared store only (commands.PG_IMPORT)

        polling = Polling(idle_s=1.0, lock_s=2.0, pending=submitting.drive_pending(shared.url))
    stop = threading.Event()
    on_signals(lambda signum, frame: stop.set())
    return timeline(store, row, request, polling, stop)


def timeline(store: Store, row: RunRow, request: Request, polling: Polling, stop: threading.Event) -> int:
    """Print the run's events as asked; the exit code: 0, or with `follow` the one `run` would give."""
    lanes = Lanes(store, {row.id: row})
    printer = Printer(lanes, row.id, request.fmt, request.wanted, store.published_at(row.id))
    code = exitcodes.COMPLETED
    if request.follow:
        code = follow(store, row.id, request.children, printer, stop, request.since, polling)
    else:
        for event in pages(store, row.id, request.since, request.children):
            printer(event)
    if request.fmt == "json":
        emit({"runId": row.id, "events": printer.collected}, "", "json")
    return code
