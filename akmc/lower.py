"""AST → plan: the canonical plan object of one checked workflow, built as the typed dicts of
akm_run.planformat (the one definition of the format; prose in docs/plan-format.md).

A pure function of the checked model, its types, the files the load stage froze and the compiled
children: it reads no file and reports nothing (a plan with errors is built, then never written)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from akm_run import features
from akm_run import planformat as pf
from akmc import ast, compose
from akmc import types as t
from akmc.compose import Child
from akmc.load import Frozen, Loaded
from akmc.notifying import NotifyModel
from akmc.resolve import Model, Retry, StepModel
from akmc.typecheck import Typed


class Lowering:
    """Builds the plan's targets from the frozen files, and its read set as it goes."""

    def __init__(self, loaded: Loaded) -> None:
        self.loaded = loaded
        self.reads: dict[str, str | None] = {}  # root-relative path → `sha256:…`; None for an `.akm` source

    def text(self, text: ast.Text) -> tuple[str, Frozen | None]:
        """The text a plan carries: a `file(...)`'s frozen contents ("" when it could not be frozen)."""
        if text.kind != "file":
            return text.value, None
        frozen = self.frozen("file", text.value)
        return (frozen.text if frozen is not None else ""), frozen

    def frozen(self, what: str, raw: str) -> Frozen | None:
        frozen = self.loaded.files.get((what, raw))
        if frozen is not None:
            self.reads[frozen.path] = frozen.sha256
        return frozen

    def source(self, ref: str) -> None:
        """A workflow source, recorded by path only: its meaning is in the plan, so formatting and
        comments never change a plan."""
        self.reads[ref + ".akm"] = None

    def read_set(self) -> list[pf.ReadEntry]:
        """Every file the plan was compiled from, by path: its own and every child's."""
        return [
            pf.ReadEntry(path=p) if (h := self.reads[p]) is None else pf.ReadEntry(path=p, sha256=h)
            for p in sorted(self.reads)
        ]

    def target(self, target: ast.Target, child: Child | None = None) -> pf.Target:
        kind = target.kind
        if kind == "script":
            return self.script(target)
        if kind == "uses":
            if child is not None:
                self.reads.update(child.reads)  # the read set covers every child's reads
            return cast(pf.ChildTarget, compose.target(target, child))
        assert target.text is not None
        value, frozen = self.text(target.text)
        if kind == "shell":
            return pf.ShellTarget(kind="shell", command=value)
        if kind == "approval":
            return pf.ApprovalTarget(kind="approval", message=value)
        out = pf.AgentTarget(kind="agent", instructions=value)
        if frozen is not None:
            out["path"] = frozen.path
        return out

    def script(self, target: ast.Target) -> pf.ScriptTarget:
        assert target.path is not None
        frozen = self.frozen("script", target.path.value)
        if frozen is None:
            return pf.ScriptTarget(kind="script", path=target.path.value, sha256="", text="")
        return pf.ScriptTarget(kind="script", path=frozen.path, sha256=frozen.sha256, text=frozen.text)

    def check(self, target: ast.Target) -> pf.CheckTarget:
        """A gate's check: a shell command or a script (the checker allows nothing else)."""
        checked = self.target(target)
        assert checked["kind"] in ("shell", "script")
        return checked


def _env(entries: dict[str, ast.EnvEntry]) -> list[pf.EnvEntry]:
    out: list[pf.EnvEntry] = []
    for name in sorted(entries):
        entry = entries[name]
        if entry.kind == "literal":
            assert entry.value is not None
            out.append(pf.EnvLiteral(name=name, kind="literal", value=entry.value))
        elif entry.kind == "secret":
            out.append(pf.EnvSecret(name=name, kind="secret", secret=entry.value or ""))
        else:
            out.append(pf.EnvPassthrough(name=name, kind="passthrough"))
    return out


def _retry(retry: Retry) -> pf.Retry:
    out = pf.Retry(max=retry.max, on=cast(list[pf.RetryReason], retry.on))
    if retry.backoff_ms is not None:
        out["backoffMs"] = retry.backoff_ms
    return out


def lower(
    model: Model, typed: Typed, loaded: Loaded, *, ref: str, children: Mapping[str, Child] | None = None
) -> pf.Plan:
    """The plan object. `children` maps the id of each `uses` step to its compiled child."""
    lowering = Lowering(loaded)
    plan = pf.Plan(
        irVersion=pf.IR_VERSION,
        ref=ref,
        title=model.workflow.title.value,
        sourceReadSet=[],
        limits=_limits(model),
        steps=[],
    )
    if model.description is not None:
        description, _ = lowering.text(model.description)
        if description:
            plan["description"] = description
    lowering.source(ref)
    params = _params(model, typed)
    if params:
        plan["params"] = params
    outputs = _outputs(model, typed)
    if outputs:
        plan["outputs"] = outputs
    by_id = {sm.id: sm for sm in model.steps}
    plan["steps"] = [_spine_step(sm, by_id, typed, lowering, children or {}) for sm in model.steps if sm.group is None]
    if model.notify is not None and model.notify.target is not None:
        plan["notify"] = _notify(model.notify, lowering)
    plan["sourceReadSet"] = lowering.read_set()
    used = features.used(plan)
    if used:
        plan["features"] = used
    return plan


def _notify(notify: NotifyModel, lowering: Lowering) -> pf.Notify:
    assert notify.target is not None
    lowered = pf.Notify(on=cast(list[pf.NotifyEvent], notify.on), target=lowering.check(notify.target))
    env = _env(notify.env)
    if env:
        lowered["env"] = env
    if notify.timeout_ms is not None:
        lowered["timeoutMs"] = notify.timeout_ms
    if notify.retry is not None:
        lowered["retry"] = _retry(notify.retry)
    return lowered


def _params(model: Model, typed: Typed) -> dict[str, pf.Param]:
    params = {}
    for name, param in model.params.items():
        entry = pf.Param(schema=t.schema(typed.params[name]))
        if param.default is not None:
            entry["default"] = t.value_of(param.default)
        if param.description is not None and param.description.value:
            entry["description"] = param.description.value
        params[name] = entry
    return params


def _outputs(model: Model, typed: Typed) -> dict[str, pf.Output]:
    outputs = {}
    for name, output in model.outputs.items():
        entry = pf.Output({"from": output.source.text})
        if name in typed.output_declared and (schema := t.schema(typed.output_declared[name])):
            entry["schema"] = schema  # `any` lowers to {}, which a plan leaves out
        outputs[name] = entry
    return outputs


def _limits(model: Model) -> pf.Limits:
    limits = pf.Limits(concurrency=model.concurrency)
    if model.max_units is not None:
        limits["maxUnits"] = model.max_units
    if model.max_tokens is not None:
        limits["maxTokens"] = model.max_tokens
    if model.timeout_ms is not None:
        limits["timeoutMs"] = model.timeout_ms
    if model.exclusive is True:
        limits["exclusive"] = True
    elif isinstance(model.exclusive, ast.Reference):
        limits["exclusive"] = pf.ExclusiveParam(param=model.exclusive.name.text)
    return limits


def _spine_step(
    sm: StepModel, by_id: Mapping[str, StepModel], typed: Typed, lowering: Lowering, children: Mapping[str, Child]
) -> pf.Step:
    """A step of the spine; a `parallel` block with its members, which have no `index`."""
    if sm.kind != "parallel":
        return _step(sm, typed, lowering, children)
    members = []
    for name in sm.members:
        member = cast(dict[str, Any], _step(by_id[name], typed, lowering, children))
        member.pop("index")
        members.append(cast(pf.Member, member))
    block = pf.ParallelStep(stepId=sm.id, index=sm.spine, kind="parallel", onError=_on_error(sm), members=members)
    if sm.block_concurrency is not None:
        block["concurrency"] = sm.block_concurrency
    if not sm.fail_fast:
        block["failFast"] = False
    return block


def _step(
    sm: StepModel, typed: Typed, lowering: Lowering, children: Mapping[str, Child]
) -> pf.UnitStep | pf.MapStep | pf.RouteStep:
    step = _route(sm) if sm.kind == "route" else _work(sm, lowering, children)
    if sm.inputs:
        step["inputs"] = [r.text for r in sm.inputs]
    if sm.id in typed.declared and sm.kind != "route" and (schema := t.schema(typed.declared[sm.id])):
        step["outputSchema"] = schema  # `output: any` lowers to {}, which a plan leaves out
    return step


def _on_error(sm: StepModel) -> pf.OnError:
    return "continue" if sm.on_error == "continue" else "fail"


def _route(sm: StepModel) -> pf.RouteStep:
    assert sm.route is not None
    cases = [pf.Case(match=c.match.value, next=c.target.text) for c in sm.route.cases if c.match is not None]
    step = pf.RouteStep(
        stepId=sm.id, index=sm.spine, kind="route", onError=_on_error(sm), input=sm.route.subject.text, cases=cases
    )
    wildcard = [c for c in sm.route.cases if c.match is None]
    if wildcard:
        step["default"] = wildcard[0].target.text
    return step


def _work(sm: StepModel, lowering: Lowering, children: Mapping[str, Child]) -> pf.UnitStep | pf.MapStep:
    """A unit or map step. A step whose target did not check has none (its plan is never written)."""
    target = lowering.target(sm.target, children.get(sm.id)) if sm.target is not None else cast(pf.Target, {})
    step: pf.UnitStep | pf.MapStep
    if sm.map is not None:
        step = pf.MapStep(
            stepId=sm.id,
            index=sm.spine,
            kind="map",
            onError=_on_error(sm),
            target=target,
            over=sm.map.over.text,
            concurrency=sm.concurrency,
        )
        if not sm.fail_fast:
            step["failFast"] = False
    else:
        step = pf.UnitStep(stepId=sm.id, index=sm.spine, kind="unit", onError=_on_error(sm), target=target)
    if sm.gate_check is not None:
        step["gate"] = pf.Gate(check=lowering.check(sm.gate_check), maxLoops=sm.max_loops)
    if sm.retry is not None:
        step["retry"] = _retry(sm.retry)
    if sm.timeout_ms is not None:
        step["timeoutMs"] = sm.timeout_ms
    if sm.max_tokens is not None:
        step["maxTokens"] = sm.max_tokens
    if sm.stall_after_ms is not None:
        step["stallAfterMs"] = sm.stall_after_ms
        if sm.on_stall == "terminate":
            step["onStall"] = "terminate"
    env = _env(sm.env)
    if env:
        step["env"] = env
    if sm.isolation == "worktree":
        step["isolation"] = "worktree"
    if sm.target is None:
        cast(dict[str, Any], step).pop("target")
    return step
