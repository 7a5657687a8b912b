"""The diagnostics of the settings that say how a unit's run is watched and isolated (`stall_after`,
`on_stall`: E207, E601, W707; `isolation`: E207) and of the `notify` section (E207), in a module of
their own for length. Part of the catalog: akmc.messages
re-exports every template here."""

from __future__ import annotations

from akmc.message_templates import message

__all__ = [
    "isolation_value",
    "notify_on_list",
    "notify_target_kind",
    "notify_two_targets",
    "notify_without_on",
    "notify_without_target",
    "on_stall_alone",
    "on_stall_value",
    "retry_on_stalled_never",
    "stall_after_timeout",
    "stall_after_too_short",
    "unknown_notify_event",
]


@message("E207", "`on_stall` takes `warn` or `terminate`")
def on_stall_value() -> None: ...
@message("E207", "`on_stall` has no effect without `stall_after`", "add `stall_after = D`, or remove `on_stall`")
def on_stall_alone() -> None: ...
@message(
    "E207",
    "`retry` on `stalled` has no effect: an attempt of this step never ends `stalled`",
    "set `on_stall = terminate` (with `stall_after`), or remove `stalled` from `on`",
)
def retry_on_stalled_never() -> None: ...
@message("E207", "`notify` runs `shell` or `script`, not `{kind}`", "a notifier is a command the run starts")
def notify_target_kind(*, kind: str) -> None: ...
@message("E207", '`notify` needs a target: `shell "…"` or `script "…"`')
def notify_without_target() -> None: ...
@message("E207", "`notify` runs one target")
def notify_two_targets() -> None: ...
@message("E207", "`notify` needs `on = [...]`, a list of events: {events}")
def notify_without_on(*, events: str) -> None: ...
@message("E207", "`on` takes a non-empty list of events: {events}")
def notify_on_list(*, events: str) -> None: ...
@message("E207", "`{event}` is not a notification event; events: {events}")
def unknown_notify_event(*, event: str, events: str) -> None: ...
@message("E601", "`stall_after = {duration}` is shorter than the 1s bound")
def stall_after_too_short(*, duration: str) -> None: ...
@message(
    "W707",
    "`stall_after = {stall}` is not shorter than the step's timeout of {timeout}: the stall hint can never fire",
    "lower `stall_after` below the timeout, or raise the timeout",
)
def stall_after_timeout(*, stall: str, timeout: str) -> None: ...
@message("E207", "`isolation` takes `worktree` or `none`")
def isolation_value() -> None: ...
