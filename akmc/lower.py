"""AST → plan: the canonical plan object of one checked workflow (format in docs/plan-format.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from akmc import ast, compose
from akmc import types as t
from akmc.compose import Child
from akmc.diagnostics import Report
from akmc.files import Frozen, ReadSet, freeze
from akmc.resolve import Model, Retry, StepModel
from akmc.secrets import looks_like_credential
from akmc.typecheck import Typed


class Lowering:
    """Freezes files and builds the plan; file problems and credentials are reported here."""

    def __init__(self, root: Path, report: Report, reads: ReadSet) -> None:
        self.root = root
        self.report = report
        self.reads = reads

    def text(self, text: ast.Text, what: str) -> tuple[str, Frozen | None]:
        if text.kind != "file":
            return text.value, None
        frozen = freeze(self.root, text.value, text.span, "file", self.report, self.reads)
        return (frozen.text if frozen else ""), frozen

    def target(self, target: ast.Target, child: Child | None = None) -> dict[str, Any]:
        kind = target.kind
        if kind == "script":
            assert target.path is not None
            frozen = freeze(self.root, target.path.value, target.path.span, "script", self.report, self.reads)
            if frozen is None:
                return {"kind": "script", "path": target.path.value, "sha256": "", "text": ""}
            return {"kind": "script", "path": frozen.path, "sha256": frozen.sha256, "text": frozen.text}
        if kind == "uses":
            if child is not None:
                self.reads.files.update(child.reads)  # the read set covers every child's reads
            return compose.target(target, child)
        assert target.text is not None
        value, frozen = self.text(target.text, kind)
        if kind == "shell":
            return {"kind": "shell", "command": value}
        if kind == "approval":
            return {"kind": "approval", "message": value}
        out = {"kind": "agent", "instructions": value}
        if frozen is not None:
            out["path"] = frozen.path
        return out

    def env(self, entries: dict[str, ast.EnvEntry]) -> list[dict[str, Any]]:
        out = []
        for name in sorted(entries):
            entry = entries[name]
            if entry.kind == "literal":
                assert entry.value is not None
                found = looks_like_credential(entry.value)
                if found:
                    self.report.add(
                        "E600", entry.value_span,
                        message=f"env `{name}` holds what looks like {found}; a plan must never contain a secret",
                        help=f'read it at dispatch instead: `{name} = secret("{name}")`, and rotate the credential',
                    )  # fmt: skip
                out.append({"name": name, "kind": "literal", "value": entry.value})
            elif entry.kind == "secret":
                out.append({"name": name, "kind": "secret", "secret": entry.value or ""})
            else:
                out.append({"name": name, "kind": "passthrough"})
        return out


def _retry(retry: Retry) -> dict[str, Any]:
    out: dict[str, Any] = {"max": retry.max, "on": retry.on}
    if retry.backoff_ms is not None:
        out["backoffMs"] = retry.backoff_ms
    return out


def lower(
    model: Model,
    typed: Typed,
    *,
    ref: str,
    root: Path,
    report: Report,
    reads: ReadSet,
    children: Mapping[str, Child] | None = None,
) -> dict[str, Any]:
    """The plan object. `children` maps the id of each `uses` step to its compiled child."""
    lowering = Lowering(root, report, reads)
    plan: dict[str, Any] = {"irVersion": 1, "ref": ref, "title": model.workflow.title.value}
    if model.description is not None:
        description, _ = lowering.text(model.description, "description")
        if description:
            plan["description"] = description
    reads.add_source(ref + ".akm")
    params = {}
    for name, param in model.params.items():
        entry: dict[str, Any] = {"schema": t.schema(typed.params[name])}
        if param.default is not None:
            entry["default"] = t.value_of(param.default)
        if param.description is not None and param.description.value:
            entry["description"] = param.description.value
        params[name] = entry
    if params:
        plan["params"] = params
    outputs = {}
    for name, output in model.outputs.items():
        entry = {"from": output.source.text}
        if name in typed.output_declared and (schema := t.schema(typed.output_declared[name])):
            entry["schema"] = schema  # `any` lowers to {}, which a plan leaves out
        outputs[name] = entry
    if outputs:
        plan["outputs"] = outputs
    limits: dict[str, Any] = {"concurrency": model.concurrency}
    if model.max_units is not None:
        limits["maxUnits"] = model.max_units
    if model.timeout_ms is not None:
        limits["timeoutMs"] = model.timeout_ms
    plan["limits"] = limits
    plan["steps"] = [_step(sm, model, typed, lowering, children or {}) for sm in model.steps]
    plan["sourceReadSet"] = reads.entries()
    return plan


def _step(
    sm: StepModel, model: Model, typed: Typed, lowering: Lowering, children: Mapping[str, Child]
) -> dict[str, Any]:
    step: dict[str, Any] = {"stepId": sm.id, "index": sm.index, "kind": sm.kind or "unit"}
    if sm.kind == "route":
        assert sm.route is not None
        step["input"] = sm.route.subject.text
        step["cases"] = [{"match": c.match.value, "next": c.target.text} for c in sm.route.cases if c.match is not None]
        wildcard = [c for c in sm.route.cases if c.match is None]
        if wildcard:
            step["default"] = wildcard[0].target.text
    else:
        if sm.target is not None:
            step["target"] = lowering.target(sm.target, children.get(sm.id))
        if sm.map is not None:
            step["over"] = sm.map.over.text
            step["concurrency"] = sm.concurrency
        if sm.gate_check is not None:
            step["gate"] = {"check": lowering.target(sm.gate_check), "maxLoops": sm.max_loops}
        if sm.retry is not None:
            step["retry"] = _retry(sm.retry)
        if sm.timeout_ms is not None:
            step["timeoutMs"] = sm.timeout_ms
        env = lowering.env(sm.env)
        if env:
            step["env"] = env
    if sm.inputs:
        step["inputs"] = [r.text for r in sm.inputs]
    if sm.id in typed.declared and sm.kind != "route" and (schema := t.schema(typed.declared[sm.id])):
        step["outputSchema"] = schema  # `output: any` lowers to {}, which a plan leaves out
    step["onError"] = sm.on_error or "fail"
    return step
