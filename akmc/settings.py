"""Settings (`timeout`, `retry`, `on_error`, `stall_after`, `on_stall`, `isolation`, `concurrency`, `fail_fast`,
`max_loops`, `max_units`, `max_tokens`): where each may stand, which step kinds honour it, and its value checked and normalised
(E207, E601, W703)."""

from __future__ import annotations

from typing import Any

from akm_run.planformat import (
    MAX_CONCURRENCY,
    MAX_LOOPS,
    MAX_RETRY,
    MAX_TIMEOUT_MS,
    MIN_STALL_MS,
    NOTIFY_EVENTS,
    RETRY_DEFAULT_ON,
    RETRY_REASONS,
)
from akmc import ast, messages
from akmc.diagnostics import Report, did_you_mean, position
from akmc.messages import Message
from akmc.records import build, record

DEFAULT_CONCURRENCY = 4

# Where each setting may stand.
STEP_SETTINGS = {"timeout", "retry", "on_error", "stall_after", "on_stall", "isolation", "max_tokens"}
ON_STALL = ("warn", "terminate")
PLACES = {
    "step": STEP_SETTINGS | {"fail_fast"},  # `fail_fast` only on a map step (E207 elsewhere)
    "defaults": STEP_SETTINGS,
    "map": {"concurrency", "timeout", "retry", "stall_after", "on_stall", "fail_fast", "isolation", "max_tokens"},
    "gate": {"max_loops"},
    "parallel": {"concurrency", "fail_fast", "on_error"},
    "limits": {"concurrency", "max_units", "timeout", "exclusive", "max_tokens"},
    "notify": {"on", "timeout", "retry"},
}
HOME = {
    "timeout": "a step, a `map` block, `defaults` or `limits`",
    "retry": "a step, a `map` block or `defaults`",
    # Worded as the second edition worded them (their golden messages are pinned): a `parallel`
    # block takes `on_error` and `concurrency` too, as the language reference says.
    "on_error": "a step or `defaults`",
    "stall_after": "a step, a `map` block or `defaults`",
    "on_stall": "a step, a `map` block or `defaults`",
    "isolation": "a step, a `map` block or `defaults`",
    "concurrency": "a `map` block or `limits`",
    "fail_fast": "a `map` block or its step, or a `parallel` block",
    "max_loops": "a `gate` block",
    "max_units": "`limits`",
    "max_tokens": "an `agent` step, a `map` block over `agent`, `defaults` or `limits`",
    "exclusive": "`limits`",
}

# Which step kinds honour which setting (the table in the language reference). A step's kind here is
# its target's kind (shell, script and agent are "unit"), or "route"; a `map` step honours what its
# target's kind honours, plus `concurrency`.
HONOURED = {
    "unit": {"timeout", "retry", "on_error", "stall_after", "on_stall", "isolation", "env", "gate"},
    "uses": {"on_error", "gate"},
    "approval": {"on_error"},
    "route": {"on_error"},
    "parallel": {"on_error", "concurrency", "fail_fast"},
}
WHY_NOT = {
    ("uses", "timeout"): "bound the child with its own `limits { timeout }`",
    ("uses", "retry"): "a failed child is never retried automatically; `akm-run resume` drives it again",
    ("uses", "env"): "set `env` on the child's own steps",
    ("approval", "timeout"): "an approval waits for a person, not a process",
    ("approval", "retry"): "an approval runs no process that could be retried",
    ("approval", "gate"): "an approval runs no process that a check could re-run",
    ("uses", "stall_after"): "set `stall_after` on the child's own steps",
    ("uses", "on_stall"): "set `on_stall` on the child's own steps",
    ("approval", "stall_after"): "an approval waits for a person, not a process",
    ("approval", "on_stall"): "an approval waits for a person, not a process",
    ("uses", "isolation"): "set `isolation` on the child's own steps: they run in worktrees of this run's base commit",
    ("approval", "isolation"): "an approval runs no process that could run in a worktree",
    ("route", "isolation"): "a route runs no process that could run in a worktree",
    ("uses", "max_tokens"): "bound the child's agents with its steps' `max_tokens`, or this workflow's `limits`",
    ("unit", "max_tokens"): "only an agent reports token usage; bound the whole run with `limits { max_tokens }`",
}
ISOLATION = ("worktree", "none")  # `none` switches a default off


@record
class Retry:
    max: int
    on: list[str]
    backoff_ms: int | None


build()


def check_settings(settings: list[ast.Setting], place: str, report: Report) -> dict[str, Any]:
    """Validate the settings of one place; returns name → normalised value."""
    out: dict[str, Any] = {}
    firsts: dict[str, ast.Setting] = {}
    for setting in settings:
        name = setting.name.text
        if name not in PLACES[place]:
            _misplaced(setting, place, report)
            continue
        if name in firsts:
            first = position(firsts[name].span)
            report.add(messages.duplicate_name(what="setting", name=name, first=first), setting.name.span)
            continue
        firsts[name] = setting
        value = _setting_value(setting, place, report)
        if value is not None:
            out[name] = value
    return out


def _misplaced(setting: ast.Setting, place: str, report: Report) -> None:
    name = setting.name.text
    where = {
        "step": "a step",
        "defaults": "`defaults`",
        "map": "a `map` block",
        "gate": "a `gate` block",
        "notify": "`notify`",
        "parallel": "a `parallel` block",
    }.get(place, f"`{place}`")
    if name in HOME:
        report.add(messages.misplaced_setting(name=name, where=where, home=HOME[name]), setting.name.span)
        return
    help_text = did_you_mean(name, PLACES[place]) or "settings here: " + ", ".join(
        f"`{s}`" for s in sorted(PLACES[place])
    )
    report.add(messages.unknown_setting(name=name, where=where), setting.name.span, help=help_text)


def _setting_value(setting: ast.Setting, place: str, report: Report) -> Any:
    name, value = setting.name.text, setting.value
    if name == "exclusive":
        return _exclusive(value, report)
    if isinstance(value, ast.Reference):  # only `exclusive` takes one; the others say what they take
        value = ast.Word(value.text, value.span)
    if isinstance(value, ast.Literal) and value.invalid:  # E102 already said why
        return None
    if name == "timeout":
        return _duration(value, name, report)
    if name == "stall_after":
        return _stall_after(value, report)
    if name == "on":
        return _notify_on(value, report)
    if name == "on_stall":
        return _one_of(value, ON_STALL, messages.on_stall_value(), report, hinted=True)
    if name == "on_error":
        return _one_of(value, ("fail", "continue"), messages.on_error_value(), report, hinted=False)
    if name == "retry":
        return _retry(value, report)
    if name == "isolation":
        return _one_of(value, ISOLATION, messages.isolation_value(), report, hinted=True)
    if name == "fail_fast":
        if isinstance(value, ast.Literal) and isinstance(value.value, bool):
            return value.value
        report.add(messages.boolean_setting(name=name), value.span)
        return None
    # integers: concurrency, max_units, max_loops, max_tokens (E102 bounds a literal to 2^53 - 1)
    if not isinstance(value, ast.Literal) or isinstance(value.value, bool) or not isinstance(value.value, int):
        report.add(messages.integer_setting(name=name), value.span)
        return None
    number = value.value
    if number < 1:
        report.add(messages.setting_below_one(name=name, value=number), value.span)
        return None
    if name == "concurrency" and number > MAX_CONCURRENCY:
        report.add(messages.concurrency_clamped(value=number, limit=MAX_CONCURRENCY), value.span)
        return MAX_CONCURRENCY
    if name == "max_loops" and number > MAX_LOOPS:
        report.add(messages.too_many_loops(limit=MAX_LOOPS, value=number), value.span)
        return None
    return number


def _one_of(
    value: ast.Value, choices: tuple[str, ...], message: Message, report: Report, *, hinted: bool
) -> str | None:
    """A setting that is one of these words; else `message` (with a did-you-mean when `hinted`)."""
    if isinstance(value, ast.Word) and value.text in choices:
        return value.text
    report.add(message, value.span, help=_word_hint(value, choices) if hinted else None)
    return None


def _word_hint(value: ast.Value, choices: tuple[str, ...]) -> str | None:
    return did_you_mean(value.text, set(choices)) if isinstance(value, ast.Word) else None


def _exclusive(value: ast.Value | ast.Reference, report: Report) -> bool | ast.Reference | None:
    """`true` (one unsettled run of the workflow), a param (one per value of it), or `false` (the
    default: concurrent runs allowed, so no key)."""
    if isinstance(value, ast.Literal) and isinstance(value.value, bool):
        return True if value.value else None
    if isinstance(value, ast.Reference) and value.root == "params":
        return value
    report.add(messages.exclusive_value(), value.span)
    return None


def _duration(value: ast.Value, name: str, report: Report) -> int | None:
    if not isinstance(value, ast.Duration):
        report.add(messages.duration_setting(name=name), value.span)
        return None
    if value.ms < 0:  # E102 already said why
        return None
    if value.ms == 0:
        report.add(messages.zero_duration(name=name), value.span)
        return None
    if value.ms > MAX_TIMEOUT_MS:
        report.add(messages.duration_over_bound(name=name, duration=value.text), value.span)
        return None
    return value.ms


def _notify_on(value: ast.Value, report: Report) -> list[str] | None:
    """`notify { on = [...] }`: a non-empty list of event names, sorted and unique."""
    names = ", ".join(NOTIFY_EVENTS)
    items = value.items if isinstance(value, ast.ListValue) else None
    if not items or not all(isinstance(i, ast.Word) for i in items):
        report.add(messages.notify_on_list(events=names), value.span)
        return None
    events: set[str] = set()
    for item in items:
        assert isinstance(item, ast.Word)
        if item.text in NOTIFY_EVENTS:
            events.add(item.text)
        else:
            help_text = did_you_mean(item.text, set(NOTIFY_EVENTS))
            report.add(messages.unknown_notify_event(event=item.text, events=names), item.span, help=help_text)
    return sorted(events) or None


def _stall_after(value: ast.Value, report: Report) -> int | None:
    ms = _duration(value, "stall_after", report)
    if ms is not None and ms < MIN_STALL_MS:
        assert isinstance(value, ast.Duration)
        report.add(messages.stall_after_too_short(duration=value.text), value.span)
        return None
    return ms


def _retry(value: ast.Value, report: Report) -> Retry | None:
    if isinstance(value, ast.Literal) and isinstance(value.value, int) and not isinstance(value.value, bool):
        return _retry_max(value.value, value.span, report, list(RETRY_DEFAULT_ON), None)
    if not isinstance(value, ast.ObjectValue):
        report.add(messages.retry_value(), value.span)
        return None
    entries = {k.text: (k, v) for k, v in value.entries}
    unknown = [k for k in entries if k not in ("max", "on", "backoff")]
    for key in unknown:
        report.add(messages.unknown_retry_field(field=key), entries[key][0].span)
    if "max" not in entries:
        report.add(messages.retry_needs_max(), value.span)
        return None
    maximum = entries["max"][1]
    if isinstance(maximum, ast.Literal) and maximum.invalid:  # E102 already said why
        return None
    if not isinstance(maximum, ast.Literal) or not isinstance(maximum.value, int) or isinstance(maximum.value, bool):
        report.add(messages.retry_max_integer(), maximum.span)
        return None
    reasons: list[str] = list(RETRY_DEFAULT_ON)
    if "on" in entries:
        on = entries["on"][1]
        items = on.items if isinstance(on, ast.ListValue) else None
        if not items or not all(isinstance(i, ast.Word) for i in items):
            report.add(messages.retry_on_list(reasons=", ".join(RETRY_REASONS)), on.span)
            return None
        reasons = []
        for item in items:
            assert isinstance(item, ast.Word)
            if item.text not in RETRY_REASONS:
                report.add(
                    messages.unknown_retry_reason(reason=item.text, reasons=", ".join(RETRY_REASONS)),
                    item.span,
                    help=did_you_mean(item.text, set(RETRY_REASONS)),
                )
            elif item.text not in reasons:
                reasons.append(item.text)
    backoff = _duration(entries["backoff"][1], "backoff", report) if "backoff" in entries else None
    return _retry_max(maximum.value, maximum.span, report, reasons, backoff)


def _retry_max(count: int, span: ast.Span, report: Report, on: list[str], backoff: int | None) -> Retry | None:
    """A retry policy; `max = 0` is a policy that never retries (it switches a default off)."""
    if not 0 <= count <= MAX_RETRY:
        report.add(messages.retry_out_of_range(limit=MAX_RETRY, value=count), span)
        return None
    if not on:
        return None
    return Retry(count, sorted(on, key=RETRY_REASONS.index), backoff)
