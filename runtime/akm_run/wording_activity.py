"""The wording of unit activity and stalls (operations.md D6: akm_run.activity, akm_run.running)
and of a root run's notifications (D4: akm_run.notify). Part of the wording registry:
akm_run.wording re-exports every template here."""

from __future__ import annotations

from akm_run.templates import words

__all__ = ["notification_failed", "progress_ignored", "silent_for", "silent_hint", "stalled_attempt"]


# -- stall: unit activity and silence (operations.md D6) ---------------------------------------------


@words("{what} showed no activity for its stall_after of {stall}; {stopped}")
def stalled_attempt(*, what: str, stall: str, stopped: str) -> None: ...
@words("(silent for {silent}; stall_after {stall})")
def silent_for(*, silent: str, stall: str) -> None: ...
@words("see `{logs}`; `{pause}` or let the timeout act")
def silent_hint(*, logs: str, pause: str) -> None: ...
@words("progress: {count} lines ignored")
def progress_ignored(*, count: int) -> None: ...


# -- notify: notifications of a root run (operations.md D4) -------------------------------------------


@words("notification failed: {event} → {how} ({command})")
def notification_failed(*, event: str, how: str, command: str) -> None: ...
