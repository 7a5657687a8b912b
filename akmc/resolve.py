"""Names, scopes and references: one workflow's structure checked and settled into a Model."""

from __future__ import annotations

import json
from typing import Any

from akm_run.durations import format_ms
from akm_run.numbers import normal
from akm_run.planformat import MAX_MEMBERS, MAX_OUTPUTS, MAX_PARAMS, MAX_STEPS, NAME
from akmc import ast, messages
from akmc.diagnostics import Report, did_you_mean, position
from akmc.model import Model as Model
from akmc.model import StepModel as StepModel
from akmc.notifying import check_notify
from akmc.records import build, field, record
from akmc.settings import DEFAULT_CONCURRENCY, HOME, WHY_NOT, check_settings
from akmc.settings import Retry as Retry  # lowering reads a step's policy from the model
from akmc.spans import keyword

SECRET_NAME = NAME


def resolve(workflow: ast.Workflow, report: Report) -> Model:
    """Check names, structure, settings and reference targets; never raises for user mistakes."""
    model = Model(workflow)
    _sections(model, report)
    every = workflow.every_step()
    for i, step in enumerate(every):  # ids are unique across blocks too (E200)
        if step.id.text in model.index:
            first = every[model.index[step.id.text]].id.span
            report.add(messages.duplicate_step(step=step.id.text, first=position(first)), step.id.span)
            continue
        model.index[step.id.text] = i
    if len(workflow.steps) > MAX_STEPS:
        report.add(messages.too_many_steps(limit=MAX_STEPS), workflow.steps[MAX_STEPS].id.span)
    for spine, step in enumerate(workflow.steps):
        _place(model, step, spine, None, report)
    for reference, reader, in_map in model.references:
        _check_reference(model, reference, reader, in_map, report)
    route_targets(model, report)
    _default_on_stall(model, report)
    return model


# -- sections --------------------------------------------------------------------------------


def _sections(model: Model, report: Report) -> None:
    seen: dict[str, ast.Section] = {}
    for section in model.workflow.sections:
        if section.kind in seen:
            first = position(seen[section.kind].span)
            report.add(messages.duplicate_section(section=section.kind, first=first), section.keyword_span)
            continue
        seen[section.kind] = section
        if section.kind == "description":
            model.description = section.description
        elif section.kind == "params":
            _unique(section.params, "param", report, model.params)
            if len(section.params) > MAX_PARAMS:
                report.add(messages.too_many_params(limit=MAX_PARAMS), section.params[MAX_PARAMS].span)
        elif section.kind == "outputs":
            _unique(section.outputs, "output", report, model.outputs)
            if len(section.outputs) > MAX_OUTPUTS:
                report.add(messages.too_many_outputs(limit=MAX_OUTPUTS), section.outputs[MAX_OUTPUTS].span)
            for output in section.outputs:
                model.references.append((output.source, len(model.workflow.every_step()), False))
        elif section.kind == "limits":
            _limits(model, section, report)
        elif section.kind == "notify":
            env: dict[str, ast.EnvEntry] = {}
            for entry in section.settings:
                if isinstance(entry, ast.Env):
                    _env(entry, env, report)
            model.notify = check_notify(section, env, report)
        else:
            _defaults(model, section, report)


def _unique(items: list[Any], what: str, report: Report, into: dict[str, Any]) -> None:
    for item in items:
        name = item.name.text
        if name in into:
            report.add(
                messages.duplicate_name(what=what, name=name, first=position(into[name].name.span)), item.name.span
            )
            continue
        into[name] = item


def _limits(model: Model, section: ast.Section, report: Report) -> None:
    values = check_settings([s for s in section.settings if isinstance(s, ast.Setting)], "limits", report)
    if "concurrency" in values:
        model.concurrency = values["concurrency"]
    model.max_units = values.get("max_units")
    model.max_tokens = values.get("max_tokens")
    model.timeout_ms = values.get("timeout")
    model.exclusive = values.get("exclusive")
    if isinstance(model.exclusive, ast.Reference):  # a param reference like any other: E205 when unknown
        model.references.append((model.exclusive, len(model.workflow.steps), False))


def _defaults(model: Model, section: ast.Section, report: Report) -> None:
    values = check_settings([s for s in section.settings if isinstance(s, ast.Setting)], "defaults", report)
    model.default_timeout_ms = values.get("timeout")
    model.default_max_tokens = values.get("max_tokens")
    model.default_retry = values.get("retry")
    model.default_on_error = values.get("on_error")
    model.default_stall_after_ms = values.get("stall_after")
    model.default_on_stall = values.get("on_stall")
    model.default_stall_written = {
        s.name.text: s
        for s in section.settings
        if isinstance(s, ast.Setting) and s.name.text in ("stall_after", "on_stall")
    }
    model.default_isolation = values.get("isolation")
    for env in section.settings:
        if isinstance(env, ast.Env):
            _env(env, model.default_env, report)


def _env(env: ast.Env, into: dict[str, ast.EnvEntry], report: Report) -> None:
    for entry in env.entries:
        if entry.name.text in into:
            first = position(into[entry.name.text].name.span)
            report.add(messages.duplicate_name(what="env variable", name=entry.name.text, first=first), entry.name.span)
            continue
        into[entry.name.text] = entry
        if entry.kind == "secret" and not SECRET_NAME.fullmatch(entry.value or ""):
            report.add(messages.invalid_secret_name(name=json.dumps(entry.value or "")), entry.value_span)


# -- steps -----------------------------------------------------------------------------------------


@record
class _Items:
    """A step's items sorted by kind, before they are checked against each other."""

    work: list[tuple[str, Any, ast.Span]] = field(default_factory=list)  # (how messages name it, item, span)
    settings: list[ast.Setting] = field(default_factory=list)
    outputs: list[ast.OutputType] = field(default_factory=list)
    env: ast.Env | None = None
    gate: ast.Gate | None = None


build()


def _place(model: Model, step: ast.Step, spine: int, group: str | None, report: Report) -> None:
    """The step (a block, then its members) into the model, in source order."""
    index = len(model.steps)
    if step.members is None:
        model.steps.append(_step(model, step, index, report, spine, group))
        return
    block = StepModel(step, index, "parallel", spine=spine, group=group)
    model.steps.append(block)
    if group is not None:
        report.add(messages.nested_block(block=block.id, outer=group), step.id.span)
    if not step.members:
        report.add(messages.empty_block(block=block.id), step.id.span)
    if len(step.members) > MAX_MEMBERS:
        too_many = messages.too_many_members(block=block.id, count=len(step.members), limit=MAX_MEMBERS)
        report.add(too_many, step.members[MAX_MEMBERS].id.span)
    values = check_settings([s for s in step.items if isinstance(s, ast.Setting)], "parallel", report)
    block.block_concurrency = values.get("concurrency")
    block.fail_fast = values.get("fail_fast", True)
    block.on_error = values.get("on_error", model.default_on_error) or "fail"
    for member in step.members:
        block.members.append(member.id.text)
        placed = len(model.steps)
        _place(model, member, spine, block.id, report)
        if model.steps[placed].kind == "route":
            report.add(messages.route_in_block(step=member.id.text, block=block.id), member.id.span)


def _step(model: Model, step: ast.Step, index: int, report: Report, spine: int, group: str | None) -> StepModel:
    sm = StepModel(step, index, spine=spine, group=group)
    items = _items(sm, report)
    if not items.work:
        report.add(messages.no_target(step=sm.id), step.id.span)
    else:
        first_what, first, _ = items.work[0]
        for _what, _item, span in items.work[1:]:
            report.add(messages.second_work(step=sm.id, first=first_what), span)
        _work(sm, first, report)
    map_settings = [s for s in sm.map.items if isinstance(s, ast.Setting)] if sm.map is not None else []
    map_values = {k: v for k, v in _map_settings(sm, map_settings, report).items() if k != "concurrency"}
    if sm.map is not None:
        items.env = items.env or next((e for e in sm.map.items if isinstance(e, ast.Env)), None)
    for extra in items.outputs[1:]:
        report.add(messages.two_outputs(step=sm.id), keyword(extra.span, "output"))
    if items.outputs:
        sm.output = items.outputs[0].type
        if sm.target is not None and sm.target.kind == "uses":
            report.add(messages.output_on_uses(step=sm.id), keyword(items.outputs[0].span, "output"))
    values = check_settings(items.settings, "step", report)
    for name, value in map_values.items():
        if name in values:
            one = next(s for s in items.settings if s.name.text == name)
            other = next(s for s in map_settings if s.name.text == name)
            first, again = sorted((one, other), key=lambda s: s.span.start)
            report.add(messages.duplicate_name(what="setting", name=name, first=position(first.span)), again.name.span)
        else:
            values[name] = value
    _honoured(sm, [*items.settings, *map_settings], items.env, items.gate, report)
    _settle(model, sm, values)
    _stall(model, sm, values, [*items.settings, *map_settings], report)
    _step_references(model, sm)
    return sm


def _items(sm: StepModel, report: Report) -> _Items:
    """Sort a step's items; E202 for a second `inputs` or `gate`, and the checks of `env` and `gate`."""
    found = _Items()
    inputs_seen = False
    for item in sm.step.items:
        if isinstance(item, ast.Target):
            found.work.append((f"`{item.kind}` target", item, item.keyword_span))
        elif isinstance(item, ast.MapBlock):
            found.work.append(("`map`", item, keyword(item.span, "map")))
        elif isinstance(item, ast.RouteBlock):
            found.work.append(("`route`", item, keyword(item.span, "route")))
        elif isinstance(item, ast.Setting):
            found.settings.append(item)
        elif isinstance(item, ast.Env):
            found.env = found.env or item
            _env(item, sm.env, report)
        elif isinstance(item, ast.Inputs):
            if inputs_seen:
                report.add(messages.two_inputs(step=sm.id), keyword(item.span, "inputs"))
                continue
            inputs_seen = True
            sm.inputs = item.refs
        elif isinstance(item, ast.OutputType):
            found.outputs.append(item)
        elif isinstance(item, ast.Gate):
            if found.gate is not None:
                report.add(messages.two_gates(step=sm.id), keyword(item.span, "gate"))
                continue
            found.gate = item
            _gate(sm, item, report)
    return found


def _settle(model: Model, sm: StepModel, values: dict[str, Any]) -> None:
    """The step's effective settings: its own, else the workflow's defaults, for what its kind honours."""
    defaults = {
        "timeout": model.default_timeout_ms,
        "retry": model.default_retry,
        "max_tokens": model.default_max_tokens,
    }
    for name in ("timeout", "retry", "max_tokens"):
        if name not in values and sm.honours(name) and defaults[name] is not None:
            values[name] = defaults[name]
    sm.timeout_ms = values.get("timeout") if sm.honours("timeout") else None
    sm.max_tokens = values.get("max_tokens") if sm.honours("max_tokens") else None
    retry = values.get("retry") if sm.honours("retry") else None
    sm.retry = retry if retry is not None and retry.max > 0 else None
    sm.on_error = values.get("on_error", model.default_on_error) or "fail"
    isolation = values.get("isolation", model.default_isolation) if sm.honours("isolation") else None
    sm.isolation = isolation if isolation == "worktree" else None  # `none` switches a default off
    sm.fail_fast = values.get("fail_fast", True) if sm.kind == "map" else True
    if sm.honours("env"):
        sm.env = {**model.default_env, **sm.env}


def _stall(model: Model, sm: StepModel, values: dict[str, Any], own: list[ast.Setting], report: Report) -> None:
    """The step's `stall_after` and `on_stall` (its own, else the defaults'): E207 for its own `on_stall`
    without a `stall_after`, W707 when the hint could never fire before the (step's, else run's) timeout.
    A value already reported (E601, E102, E207) is not judged again."""
    if not sm.honours("stall_after"):
        return
    sm.stall_after_ms = values.get("stall_after", model.default_stall_after_ms)
    on_stall = values.get("on_stall", model.default_on_stall)
    spans = {s.name.text: s for s in own}
    if sm.stall_after_ms is None:
        written = "stall_after" in spans or "stall_after" in model.default_stall_written
        if "on_stall" in values and not written:
            report.add(messages.on_stall_alone(), spans["on_stall"].name.span)
        _retry_on_stalled(sm, spans.get("retry"), report)
        return
    if "on_stall" not in spans:
        model.default_on_stall_reaches = True
    sm.on_stall = "terminate" if on_stall == "terminate" else None
    _retry_on_stalled(sm, spans.get("retry"), report)
    timeout = sm.timeout_ms if sm.timeout_ms is not None else model.timeout_ms
    if timeout is None or sm.stall_after_ms < timeout:
        return
    stall, limit = format_ms(sm.stall_after_ms), format_ms(timeout)
    if "stall_after" in spans:
        report.add(messages.stall_after_timeout(stall=stall, timeout=limit), spans["stall_after"].value.span)
    elif (default := model.default_stall_written.get("stall_after")) is not None and not model.default_stall_outlasted:
        model.default_stall_outlasted = True  # said once, at the default, for the first step it cannot reach
        report.add(messages.stall_after_timeout(stall=stall, timeout=limit), default.value.span)


def _retry_on_stalled(sm: StepModel, own: ast.Setting | None, report: Report) -> None:
    """E207 for the step's own `retry { on = [stalled, …] }` when no attempt of it can end `stalled`
    (its `on_stall` is not `terminate`): that reason could never start a retry. A default `retry`
    reaches steps of either kind, so it is not judged here."""
    if own is None or sm.retry is None or "stalled" not in sm.retry.on or sm.on_stall == "terminate":
        return
    report.add(messages.retry_on_stalled_never(), _stalled_word(own.value))


def _stalled_word(value: ast.Value | ast.Reference) -> ast.Span:
    """Where a `retry` value names `stalled` (the value itself when it cannot be found)."""
    entries = value.entries if isinstance(value, ast.ObjectValue) else []
    for key, listed in entries:
        if key.text == "on" and isinstance(listed, ast.ListValue):
            for item in listed.items:
                if isinstance(item, ast.Word) and item.text == "stalled":
                    return item.span
    return value.span


def _default_on_stall(model: Model, report: Report) -> None:
    """E207 for `defaults { on_stall }` that no step takes: without a `stall_after` in `defaults`, it
    reaches only the steps with their own `stall_after` and no `on_stall`, and there are none."""
    written = model.default_stall_written
    if model.default_on_stall is None or "stall_after" in written or model.default_on_stall_reaches:
        return
    report.add(messages.on_stall_alone(), written["on_stall"].name.span)


def _step_references(model: Model, sm: StepModel) -> None:
    """Queue every reference the step makes, for checking once all steps are known."""
    for reference in sm.inputs:
        model.references.append((reference, sm.index, False))
    if sm.map is not None:
        model.references.append((sm.map.over, sm.index, False))
    if sm.route is not None:
        model.references.append((sm.route.subject, sm.index, False))
    if sm.target is not None:
        for binding in sm.target.bindings or []:
            if isinstance(binding.value, ast.Reference):
                model.references.append((binding.value, sm.index, sm.map is not None))


def _honoured(
    sm: StepModel, settings: list[ast.Setting], env: ast.Env | None, gate: ast.Gate | None, report: Report
) -> None:
    """E207 for each setting, `env` or `gate` that the step's kind would ignore."""
    kind = sm.target_kind
    if kind is None:
        return
    what = {
        "unit": "a step without a `map` block",
        "uses": "a `uses` target",
        "approval": "an approval",
        "route": "a `route` step",
    }[kind]
    found: list[tuple[str, ast.Span]] = [(s.name.text, s.name.span) for s in settings if s.name.text in HOME]
    if env is not None:
        found.append(("env", keyword(env.span, "env")))
    if gate is not None:
        found.append(("gate", keyword(gate.span, "gate")))
    for name, span in found:
        if name in ("concurrency", "max_loops", "max_units", "exclusive") or sm.honours(name):
            continue  # misplaced ones are reported where they stand
        shown = _unit_what(sm) if kind == "unit" and name == "max_tokens" else what
        report.add(messages.setting_no_effect(name=name, what=shown), span, help=WHY_NOT.get((kind, name)))


def _unit_what(sm: StepModel) -> str:
    """A shell or script step, named for E207 on a setting only an agent honours (`max_tokens`)."""
    kind = sm.target.kind if sm.target is not None else "unit"
    return f"a `map` over `{kind}`" if sm.kind == "map" else f"a `{kind}` step"


def _work(sm: StepModel, item: Any, report: Report) -> None:
    if isinstance(item, ast.Target):
        sm.kind, sm.target = "unit", item
        _unique(item.bindings or [], "binding", report, {})
    elif isinstance(item, ast.MapBlock):
        sm.kind, sm.map = "map", item
        targets = [t for t in item.items if isinstance(t, ast.Target)]
        if len(targets) != 1:
            span = targets[1].keyword_span if targets else keyword(item.span, "map")
            report.add(messages.map_targets(count=len(targets)), span)
        sm.target = targets[0] if targets else None
        if sm.target is not None:
            _unique(sm.target.bindings or [], "binding", report, {})
        for env in item.items:
            if isinstance(env, ast.Env):
                _env(env, sm.env, report)
    else:
        sm.kind, sm.route = "route", item


def _map_settings(sm: StepModel, settings: list[ast.Setting], report: Report) -> dict[str, Any]:
    values = check_settings(settings, "map", report)
    sm.concurrency = values.get("concurrency", DEFAULT_CONCURRENCY)
    return values


def _gate(sm: StepModel, gate: ast.Gate, report: Report) -> None:
    sm.has_gate = True
    checks = [c for c in gate.items if isinstance(c, ast.GateCheck)]
    if not checks:
        report.add(messages.gate_without_check(), keyword(gate.span, "gate"))
    for extra in checks[1:]:
        report.add(messages.two_gate_checks(), extra.span)
    if checks:
        check = checks[0].target
        if check.kind not in ("shell", "script"):
            report.add(messages.gate_check_kind(kind=check.kind), check.keyword_span)
        else:
            sm.gate_check = check
    values = check_settings([s for s in gate.items if isinstance(s, ast.Setting)], "gate", report)
    sm.max_loops = values.get("max_loops", 1)


# -- references ---------------------------------------------------------------------------------------


def _sibling(model: Model, reader: int, target: int) -> str | None:
    """What of its own `parallel` block a member reads ("a sibling", "the block"), or None."""
    if reader >= len(model.steps) or model.steps[reader].group is None:
        return None
    block, read = model.steps[reader].group, model.steps[target]
    if read.id == block:
        return "its own block"
    return "a step of the same block" if read.group == block else None


def _check_reference(model: Model, reference: ast.Reference, reader: int, in_map: bool, report: Report) -> None:
    name = reference.name.text
    if reference.root == "item":
        if not in_map:
            report.add(messages.item_outside_map(), reference.name.span)
        return
    if reference.root == "params":
        if name not in model.params:
            message = messages.unknown_param(param=name, ref=reference.text)
            report.add(message, reference.name.span, help=did_you_mean(name, set(model.params)))
        return
    if name not in model.index:
        message = messages.unknown_step(step=name, ref=reference.text)
        report.add(message, reference.name.span, help=did_you_mean(name, set(model.index)))
        return
    target = model.index[name]
    if target != reader and (what := _sibling(model, reader, target)) is not None:
        reading = model.steps[reader]
        assert reading.group is not None
        sibling = messages.reads_sibling(ref=reference.text, what=what, block=reading.group, reader=reading.id)
        report.add(sibling, reference.name.span)
        return
    if target >= reader:
        if target == reader:
            message = messages.reads_itself(ref=reference.text)
        else:
            message = messages.reads_later(ref=reference.text, at=position(model.steps[target].step.span))
        report.add(message, reference.name.span)


def route_targets(model: Model, report: Report) -> None:
    """E208 for route cases that do not name a later step; E201 for duplicate cases."""
    for sm in model.steps:
        if sm.route is None:
            continue
        seen: dict[str, ast.RouteCase] = {}
        for case in sm.route.cases:
            value = None if case.match is None else normal(case.match.value)  # 1.0 is 1 (akm_run.numbers)
            key = "_" if case.match is None else repr((type(value).__name__, value))
            if key in seen:
                what = "`_` case" if case.match is None else "route case"
                first = position(seen[key].span)
                report.add(messages.duplicate_name(what=what, name=_case_text(case), first=first), case.span)
                continue
            seen[key] = case
            target = case.target.text
            if target == sm.id:
                report.add(messages.route_to_itself(step=sm.id), case.target.span)
            elif target not in model.index:
                help_text = did_you_mean(target, set(model.index))
                report.add(messages.route_to_unknown(target=target), case.target.span, help=help_text)
            elif model.index[target] < sm.index:
                report.add(messages.route_backwards(target=target, step=sm.id), case.target.span)
            elif (block := model.steps[model.index[target]].group) is not None and block != sm.group:
                report.add(messages.route_to_member(target=target, block=block), case.target.span)


def _case_text(case: ast.RouteCase) -> str:
    return "_" if case.match is None else json.dumps(case.match.value)
