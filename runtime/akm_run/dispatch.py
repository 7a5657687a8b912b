"""Dispatch: how one attempt of a unit runs. The engine hands a `Request` to a `Dispatcher`; a
process dispatcher runs shell, script and agent targets (akm_run.units), a child dispatcher drives a
`child-workflow` target's child run (akm_run.children). Tests put a fake in the process's place."""

from __future__ import annotations

import functools
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from akm_run import children, isolation, units
from akm_run import planformat as pf
from akm_run.activity import Board
from akm_run.core import DriveResult, End, Placement
from akm_run.hints import Hints
from akm_run.journal import Journal


@dataclass(frozen=True, slots=True)
class Request:
    """One attempt, resolved: everything a dispatcher needs and nothing it must look up."""

    run_id: str
    place: Placement
    attempt: int
    input_hash: str
    target: pf.Target
    context: dict[str, Any]
    env: list[pf.EnvEntry] = field(default_factory=list)
    output_schema: pf.Schema | None = None
    timeout_ms: int | None = None
    bindings: dict[str, Any] | None = None  # a child-workflow target's, resolved
    scratch: Path | None = None  # the drive's private directory for unit files (None: a temporary one)
    dispatch_id: str = ""  # the attempt's dispatch id (identity.dispatch_id; also in the context)
    width: int = 1  # how many units of its step may run at once (a map's concurrency; 1 for a single unit)
    max_tokens: int | None = None  # the smallest token budget left over the unit (budgets.remaining)
    stall_after_ms: int | None = None
    on_stall: str | None = None  # "terminate", else a stall only warns
    isolated: bool = False  # the step says `isolation = worktree`: the attempt runs in its own worktree


class Dispatcher(Protocol):
    def dispatch(self, request: Request) -> End:
        """Run one attempt to its end; never raises for anything the unit does. An abort is an
        End with status "aborted"; an attempt whose process died with its host, "interrupted"."""
        ...


@dataclass(slots=True)
class Settings:
    """What every attempt of a drive shares: where units run and with which agent and environment."""

    workdir: Path
    agent_cmd: str | None
    environ: Mapping[str, str] | None
    hints: Hints
    state_dir: Path | None = None  # under it, isolated attempts' worktrees (None: isolation.worker_state())


class ProcessDispatcher:
    """Shell, script and agent targets: one process group per attempt, its pid journaled."""

    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        abort: threading.Event,
        on_spawn: Callable[[int], None] = lambda pid: None,
        board: Board | None = None,
    ) -> None:
        """`on_spawn` learns each attempt's process group as it starts, before its pid is journaled
        and before it runs anything (a worker's guard: docs/scale-out.md, "Stopping a worker"); `board` journals
        the attempts' activity (default: a board of its own, at most once a second)."""
        self.journal, self.settings, self.abort, self.on_spawn = journal, settings, abort, on_spawn
        self.board = board or Board(journal.record_activity)

    def dispatch(self, request: Request) -> End:
        if request.isolated:
            return isolation.isolated(self.journal, self.settings, request, self._execute)
        return self._execute(request, self.settings.workdir, {})

    def _execute(self, request: Request, workdir: Path, isolated: dict[str, str]) -> End:
        spec = units.Unit(
            dict(request.target),
            request.context,
            [dict(e) for e in request.env],
            request.output_schema,
            request.timeout_ms,
            workdir,
            self.settings.agent_cmd,
            max_tokens=request.max_tokens,
            stall_after_ms=getattr(request, "stall_after_ms", None),  # a request an older worker queued has neither
            on_stall=getattr(request, "on_stall", None),
            isolated=isolated,
        )

        def spawned(pid: int) -> None:  # the unit waits at its gate until both are done (akm_run.units)
            self.on_spawn(pid)
            self.journal.attempt_process(request.run_id, request.place.journal, request.attempt, pid, host=_host())

        return units.execute(spec, self.abort, spawned, self.settings.environ, request.scratch, self.board)


class ChildDispatcher:
    """A child-workflow target: publish (or find) its child run and drive it inline, with `drive`."""

    def __init__(
        self, journal: Journal, settings: Settings, drive: Callable[[str], DriveResult], abort: threading.Event
    ) -> None:
        self.journal, self.settings, self.drive, self.abort = journal, settings, drive, abort

    def dispatch(self, request: Request) -> End:
        assert request.target["kind"] == "child-workflow" and request.bindings is not None
        parent = children.Parent(request.run_id, request.place.step_id, request.place.journal, request.input_hash)
        outcome, _ = children.drive_child(
            self.journal, self.settings, self.drive, parent, request.target, request.bindings, self.abort
        )
        return outcome


class Routing:
    """Each request to the dispatcher of its target's kind."""

    def __init__(self, process: Dispatcher, child: Dispatcher) -> None:
        self.process, self.child = process, child

    def dispatch(self, request: Request) -> End:
        chosen = self.child if request.target["kind"] == "child-workflow" else self.process
        return chosen.dispatch(request)


@functools.cache
def _host() -> str:
    return socket.gethostname()
