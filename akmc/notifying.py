"""The `notify` section (operations.md D4): its checks (E207; E202 for a second section is the
sections' own) and the model lowering writes to `plan.notify`."""

from __future__ import annotations

from akm_run.planformat import NOTIFY_EVENTS
from akmc import ast, messages
from akmc.diagnostics import Report
from akmc.records import build, field, record
from akmc.settings import Retry, check_settings
from akmc.spans import keyword


@record
class NotifyModel:
    """A checked `notify` section; `target` is None when it has none that can run."""

    on: list[str]
    target: ast.Target | None
    env: dict[str, ast.EnvEntry] = field(default_factory=dict)
    timeout_ms: int | None = None
    retry: Retry | None = None


build()


def check_notify(section: ast.Section, env: dict[str, ast.EnvEntry], report: Report) -> NotifyModel:
    """The section's settings, target and `env` (already read into `env` by the caller)."""
    settings = [s for s in section.settings if isinstance(s, ast.Setting)]
    values = check_settings(settings, "notify", report)
    if "on" not in values and not any(s.name.text == "on" for s in settings):
        report.add(messages.notify_without_on(events=", ".join(NOTIFY_EVENTS)), section.keyword_span)
    target = None
    if not section.targets:
        report.add(messages.notify_without_target(), keyword(section.span, "notify"))
    for extra in section.targets[1:]:
        report.add(messages.notify_two_targets(), extra.keyword_span)
    if section.targets:
        first = section.targets[0]
        if first.kind in ("shell", "script"):
            target = first
        else:
            report.add(messages.notify_target_kind(kind=first.kind), first.keyword_span)
    retry = values.get("retry")
    return NotifyModel(values.get("on", []), target, env, values.get("timeout"), retry if retry and retry.max else None)
