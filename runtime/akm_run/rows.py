"""The journal's rows and the statuses they move through (the CHECK constraints of the migrations)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

RunStatus = Literal["active", "completed", "failed", "blocked"]
StepStatus = Literal["pending", "running", "completed", "failed", "blocked", "skipped"]
UnitStatus = Literal["running", "completed", "failed"]
AttemptStatus = Literal["running", "completed", "failed", "aborted", "interrupted"]


@dataclass(slots=True)
class RunRow:
    id: str
    ref: str
    title: str
    plan_hash: str
    plan_json: str
    params_json: str
    status: RunStatus
    current_step: int
    parent_run_id: str | None
    parent_unit_id: str | None
    invocation_key: str | None
    exported_json: str | None
    failure_json: str | None
    notes: str | None
    units_dispatched: int
    created_at: float
    updated_at: float
    workdir: str | None  # absolute; None for runs published before it was stored
    agent_cmd: str | None
    notify_cmd: str | None = None  # the host's notifier (--notify-cmd, $AKM_RUN_NOTIFY_CMD)
    base_commit: str | None = None  # the commit its worktrees check out (worktree isolation), else None
    base_repo: str | None = None  # the root of the repository that commit was read from
    paused_json: str | None = None  # `akm-run pause RUN`: {"by", "now"} (a flag, not a status)
    tokens_spent: int = 0  # reported by the agent units of the run and of every run it composes
    tokens_raised: int = 0  # added to `limits.maxTokens` by `resume --extra-tokens`

    @property
    def params(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.params_json)
        return value

    @property
    def exported(self) -> Any:
        return None if self.exported_json is None else json.loads(self.exported_json)

    @property
    def failure(self) -> dict[str, Any] | None:
        return None if self.failure_json is None else json.loads(self.failure_json)

    @property
    def paused(self) -> dict[str, Any] | None:
        return None if self.paused_json is None else json.loads(self.paused_json)


@dataclass(slots=True)
class StepRow:
    step_id: str
    idx: int
    status: StepStatus
    output_json: str | None
    notes: str | None
    failure_reason: str | None
    failure_message: str | None
    gate_iteration: int
    gate_loops: int
    gate_feedback: str | None
    group: str | None = None  # the `parallel` block a member stands in
    paused_json: str | None = None  # `akm-run pause RUN STEP`: {"by", "now"}

    @property
    def output(self) -> Any:
        return None if self.output_json is None else json.loads(self.output_json)

    @property
    def paused(self) -> dict[str, Any] | None:
        return None if self.paused_json is None else json.loads(self.paused_json)


@dataclass(slots=True)
class UnitRow:
    unit_id: str
    step_id: str
    item_index: int | None
    input_hash: str
    status: UnitStatus
    output_json: str | None
    failure_reason: str | None
    failure_message: str | None
    child_run_id: str | None
    superseded: int = 0  # `akm-run retry`: the unit runs again as `<journal id>~r<n>`

    @property
    def output(self) -> Any:
        return None if self.output_json is None else json.loads(self.output_json)


@dataclass(slots=True)
class AttemptRow:
    unit_id: str
    attempt: int
    dispatch_id: str
    status: AttemptStatus
    reason: str | None
    exit_code: int | None
    pid: int | None
    host: str | None
    stderr_tail: str | None
    started_at: float = 0.0
    finished_at: float | None = None
    output_json: str | None = None
    message: str | None = None
    last_activity_at: float | None = None  # None: no activity since it started
    progress_json: str | None = None  # the latest progress frame
    progress_ignored: int = 0  # invalid progress lines
    worktree: str | None = None  # the kept worktree of this attempt (absolute), until it is removed
    usage_json: str | None = None  # the attempt's last usage report (operations.md D8)

    @property
    def output(self) -> Any:
        return None if self.output_json is None else json.loads(self.output_json)

    @property
    def usage(self) -> dict[str, Any] | None:
        return None if self.usage_json is None else dict(json.loads(self.usage_json))

    @property
    def progress(self) -> dict[str, Any] | None:
        frame: dict[str, Any] | None = None if self.progress_json is None else json.loads(self.progress_json)
        return frame


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """How a failed attempt ended; `final` when no retry follows (the unit fails with it)."""

    reason: str | None
    message: str | None
    exit_code: int | None = None
    output: Any = None
    stderr_tail: str | None = None
    final: bool = True


NotificationStatus = Literal["pending", "sending", "sent", "failed"]


@dataclass(frozen=True, slots=True)
class NotificationRow:
    """One notification of a root run: the event it tells of (by the event's seq) and its delivery."""

    seq: int
    event: str
    dispatch_id: str
    status: NotificationStatus
    attempts: int
    exit_code: int | None
    reason: str | None
    stderr_tail: str | None
    created_at: float
    sent_at: float | None
    claimed_by: str | None = None  # `host:pid` of the process sending it (status `sending`)
    claimed_at: float | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the append-only events table (migrations.EVENT_KINDS)."""

    seq: int
    run_id: str
    kind: str
    step_id: str | None
    unit_id: str | None
    data: dict[str, Any]
    at: float
