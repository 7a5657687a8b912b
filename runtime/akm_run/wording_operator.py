"""The wording of the operator verbs (`akm-run skip`, `retry`, `pause`, `unpause`; akm_run.operator).
Part of the wording registry: akm_run.wording re-exports every template here."""

from __future__ import annotations

from pathlib import Path

from akm_run.exitcodes import USAGE
from akm_run.templates import error, words

__all__ = [
    "delete_paused",
    "drive_paused",
    "not_paused",
    "paused",
    "paused_kept",
    "retried",
    "retry_no_such_unit",
    "retry_reopens",
    "retry_running",
    "retry_unit_not_a_map",
    "retry_unselected",
    "run_settled_for_operator",
    "skip_a_block",
    "skip_a_gate",
    "skip_a_route",
    "skip_an_approval",
    "skip_needs_output",
    "skip_output_invalid",
    "skip_output_unreadable",
    "skipped",
    "skipped_by",
    "skipped_by_with_note",
    "skipped_child_left",
    "step_not_skippable",
    "steps_of_run",
    "the_run",
    "unpaused",
]


# -- operator control of one step (akm-run skip, retry, pause, unpause; akm_run.operator) ----------


@error(USAGE, "step {step} of run {run} is an approval: decide it with `{command}`, not skip")
def skip_an_approval(*, step: str, run: str, command: str) -> None: ...
@error(USAGE, "step {step} of run {run} has a gate: skipping it would bypass its review (retry it instead)")
def skip_a_gate(*, step: str, run: str) -> None: ...
@error(USAGE, "step {step} of run {run} is a route: it chooses the next step (skip the steps it chooses between)")
def skip_a_route(*, step: str, run: str) -> None: ...
@error(USAGE, "step {step} of run {run} is {state}: only a pending, failed or blocked step can be skipped")
def step_not_skippable(*, step: str, run: str, state: str) -> None: ...
@error(USAGE, "run {run} is {status}: there is nothing left to skip or retry in it")
def run_settled_for_operator(*, run: str, status: str) -> None: ...
@error(USAGE, "step {step} declares an output that cannot be null: give its value with --output JSON")
def skip_needs_output(*, step: str) -> None: ...
@error(USAGE, "--output for step {step}: {error}")
def skip_output_invalid(*, step: str, error: str) -> None: ...
@error(USAGE, "--output-file {path}: {error}")
def skip_output_unreadable(*, path: Path, error: Exception) -> None: ...
@error(USAGE, "step {step} of run {run} is running: wait for its drive to end, or pause it first")
def retry_running(*, step: str, run: str) -> None: ...
@error(USAGE, "step {step} of run {run} was not selected by its route: retry the route instead")
def retry_unselected(*, step: str, run: str) -> None: ...
@error(USAGE, "--unit applies to a map step; step {step} runs a single unit")
def retry_unit_not_a_map(*, step: str) -> None: ...
@error(USAGE, "step {step} of run {run} has no unit for item {unit}")
def retry_no_such_unit(*, step: str, run: str, unit: int) -> None: ...
@words("skipped step {step} of run {run}")
def skipped(*, step: str, run: str) -> None: ...
@words("skipped by {by}")
def skipped_by(*, by: str) -> None: ...
@words("skipped by {by}: {note}")
def skipped_by_with_note(*, by: str, note: str) -> None: ...
@words("; its child run {child} is left as it is")
def skipped_child_left(*, child: str) -> None: ...
@words("retry of step {step} of run {run} reopens: {steps}")
def retry_reopens(*, step: str, run: str, steps: str) -> None: ...
@words("reopened {steps} of run {run} ({units} units superseded)")
def retried(*, steps: str, run: str, units: int) -> None: ...
@words("paused {what} (by {by}): nothing new starts there; lift it with `{command}`")
def paused(*, what: str, by: str, command: str) -> None: ...
@words("unpaused {what} (by {by}); continue with `{command}`")
def unpaused(*, what: str, by: str, command: str) -> None: ...
@words("{what} is not paused")
def not_paused(*, what: str) -> None: ...
@words("run {run}")
def the_run(*, run: str) -> None: ...
@words("step {steps} of run {run}")
def steps_of_run(*, steps: str, run: str) -> None: ...
@words("stopped: nothing more can start ‖ paused by {by} ({what}); lift it with `{command}`")
def drive_paused(*, by: str, what: str, command: str) -> None: ...
@error(USAGE, "run {run} is paused: lift the pause with `{command}`, then delete it")
def delete_paused(*, run: str, command: str) -> None: ...
@words("{count} paused run(s) kept; unpause them first")
def paused_kept(*, count: int) -> None: ...
@error(USAGE, "step {step} of run {run} is a parallel block: skip the members that should not run")
def skip_a_block(*, step: str, run: str) -> None: ...
