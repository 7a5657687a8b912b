"""What the cursor is on, for hover, go to definition and the outline: pure functions of an analysis
and an offset (the protocol plumbing is in `server.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from akmc import ast, resources
from akmc import types as t
from akmc.diagnostics import CATALOG, Report
from akmc.lsp.analysis import Analysis
from akmc.lsp.positions import Lines
from akmc.resolve import StepModel
from akmc.spans import Span
from akmc.typecheck import type_of

# -- what stands where ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Found:
    """One name, reference or path in the source, and what it means."""

    span: Span
    kind: str  # "step", "param", "output", "reference", "uses", "script", "file", "case"
    node: Any
    step: StepModel | None = None  # the step it stands in


def _texts(item: ast.Target | None) -> Iterator[tuple[str, Any]]:
    if item is None:
        return
    if item.kind == "uses" and item.path is not None:
        yield "uses", item
    if item.kind == "script" and item.path is not None:
        yield "script", item
    if item.text is not None and item.text.kind == "file":
        yield "file", item.text


def occurrences(analysis: Analysis) -> list[Found]:
    """Every step id, param, output, reference, child ref and file path of the workflow."""
    workflow, model = analysis.workflow, analysis.model
    if workflow is None or model is None:
        return []
    found: list[Found] = []
    for section in workflow.sections:
        found += [Found(p.name.span, "param", p) for p in section.params]
        for output in section.outputs:
            found.append(Found(output.name.span, "output", output))
        if section.description is not None and section.description.kind == "file":
            found.append(Found(section.description.span, "file", section.description))
    by_step = {id(sm.step): sm for sm in model.steps}
    for step in workflow.every_step():
        sm = by_step.get(id(step))
        found.append(Found(step.id.span, "step", step, sm))
        for item in step.items:
            targets: list[ast.Target] = []
            if isinstance(item, ast.Target):
                targets.append(item)
            elif isinstance(item, ast.MapBlock):
                targets += [i for i in item.items if isinstance(i, ast.Target)]
            elif isinstance(item, ast.Gate):
                targets += [i.target for i in item.items if isinstance(i, ast.GateCheck)]
            elif isinstance(item, ast.RouteBlock):
                found += [Found(c.target.span, "case", c, sm) for c in item.cases]
            for target in targets:
                for kind, node in _texts(target):
                    span = node.path.span if isinstance(node, ast.Target) and node.path is not None else node.span
                    found.append(Found(span, kind, node, sm))
    for reference, reader, _ in model.references:
        reading = model.steps[reader] if 0 <= reader < len(model.steps) else None
        found.append(Found(reference.span, "reference", reference, reading))
    return found


def at(analysis: Analysis, offset: int) -> Found | None:
    """The innermost occurrence at `offset` (a reference wins over the step it stands in)."""
    hits = [f for f in occurrences(analysis) if f.span.start <= offset <= f.span.end]
    return min(hits, key=lambda f: f.span.end - f.span.start) if hits else None


# -- hover ------------------------------------------------------------------------------------------------


def _step_kind(sm: StepModel | None) -> str:
    if sm is None or sm.kind is None:
        return "step"
    if sm.kind == "map" and sm.target is not None:
        return f"map over `{sm.map.over.text}` of `{sm.target.kind}`" if sm.map is not None else "map"
    if sm.kind == "route":
        return "route"
    return sm.target.kind if sm.target is not None else sm.kind


def _item_type(analysis: Analysis, sm: StepModel | None) -> t.Type | None:
    """The element type of the `map` a step runs, for `item` references inside it."""
    if sm is None or sm.map is None or analysis.model is None or analysis.typed is None:
        return None
    over = type_of(sm.map.over, analysis.model, analysis.typed, Report(""))
    return t.element(over) if over is not None else None


def _reference_type(analysis: Analysis, reference: ast.Reference, upto: int, sm: StepModel | None) -> t.Type | None:
    assert analysis.model is not None and analysis.typed is not None
    partial = ast.Reference(reference.root, reference.name, reference.segments[:upto], reference.span)
    return type_of(partial, analysis.model, analysis.typed, Report(""), item=_item_type(analysis, sm))


def _param_text(param: ast.Param, analysis: Analysis) -> str:
    typed = analysis.typed.params.get(param.name.text) if analysis.typed is not None else None
    shown = t.describe(typed) if typed is not None else "?"
    lines = [f"param `{param.name.text}`: `{shown}`"]
    if param.default is not None:
        lines.append(f"default: `{analysis.text[param.default.span.start : param.default.span.end]}`")
    else:
        lines.append("required (no default)")
    if param.description is not None:
        lines.append(param.description.value)
    return "\n\n".join(lines)


def _step_text(name: str, analysis: Analysis) -> str | None:
    if analysis.model is None or analysis.typed is None or name not in analysis.model.index:
        return None
    sm = analysis.model.steps[analysis.model.index[name]]
    output = analysis.typed.steps.get(name)
    text = f"step `{name}`: {_step_kind(sm)}"
    if sm.kind == "parallel":
        text += ", members " + ", ".join(f"`{member}`" for member in sm.members)
    if output is not None:
        text += f"\n\noutput: `{t.describe(output)}`"
    child = analysis.children.get(name)
    if child is not None:
        text += f"\n\nchild workflow `{child[0].ref}` ({child[0].file}), exports: " + ", ".join(
            f"`{e}`" for e in child[0].exports
        )
    return text


def explanation(code: str) -> str:
    """The `akmc explain` page of a code, without its title, down to its example."""
    try:
        text = resources.explanation(code)  # the one reader of the pages, as `akmc explain` uses
    except OSError:
        return CATALOG[code].summary if code in CATALOG else ""
    body = text.split("\n", 1)[1] if "\n" in text else text
    return body.split("## Example", 1)[0].strip()


def hover(analysis: Analysis, offset: int) -> str | None:
    """Markdown for the thing at `offset`, and the explanation of any diagnostic there."""
    parts: list[str] = []
    found = at(analysis, offset) if analysis.typed is not None else None
    if found is not None:
        parts.append(_hover_found(analysis, found, offset) or "")
    for diagnostic in analysis.diagnostics:
        if diagnostic.span.start <= offset <= max(diagnostic.span.end, diagnostic.span.start + 1):
            head = f"**{diagnostic.code}** ({CATALOG[diagnostic.code].severity}): {diagnostic.message}"
            if diagnostic.help:
                head += f"\n\nhelp: {diagnostic.help}"
            parts.append(head + "\n\n" + explanation(diagnostic.code))
    text = "\n\n---\n\n".join(p for p in parts if p)
    return text or None


def _hover_found(analysis: Analysis, found: Found, offset: int) -> str | None:
    if found.kind == "step":
        return _step_text(found.node.id.text, analysis)
    if found.kind == "param":
        return _param_text(found.node, analysis)
    if found.kind == "output":
        declared = analysis.typed.outputs.get(found.node.name.text) if analysis.typed is not None else None
        return f"output `{found.node.name.text}`: `{t.describe(declared)}`" if declared is not None else None
    if found.kind == "reference":
        reference: ast.Reference = found.node
        if reference.root == "params" and analysis.model is not None:
            param = analysis.model.params.get(reference.name.text)
            return _param_text(param, analysis) if param is not None else None
        if reference.root == "steps" and reference.name.span.start <= offset <= reference.name.span.end:
            return _step_text(reference.name.text, analysis)
        upto = sum(1 for s in reference.segments if s.span.start < offset)
        shown = reference.root if reference.root == "item" else f"steps.{reference.name.text}.output"
        shown += "".join(s.render() for s in reference.segments[:upto])
        type_ = _reference_type(analysis, reference, upto, found.step)
        return f"`{shown}`: `{t.describe(type_)}`" if type_ is not None else None
    if found.kind == "uses":
        child = analysis.children.get(found.step.id) if found.step is not None else None
        if child is None:
            return None
        params = ", ".join(f"`{n}: {t.describe(p)}`" + ("" if req else "?") for n, (p, req) in child[0].params.items())
        return f"child workflow `{child[0].ref}`\n\nparams: {params or 'none'}\n\nexports: " + ", ".join(
            f"`{e}`" for e in child[0].exports
        )
    if found.kind == "case" and analysis.model is not None:
        return _step_text(found.node.target.text, analysis)
    return None


# -- definition ------------------------------------------------------------------------------------------


def definition(analysis: Analysis, offset: int) -> tuple[Path, Span | None] | None:
    """Where the thing at `offset` is declared: a span in this file, or a file (span None)."""
    found = at(analysis, offset)
    if found is None or analysis.model is None or analysis.workflow is None:
        return None
    steps = {s.id.text: s for s in analysis.workflow.every_step()}
    if found.kind == "reference":
        reference: ast.Reference = found.node
        if reference.root == "params" and reference.name.text in analysis.model.params:
            return analysis.path, analysis.model.params[reference.name.text].name.span
        if reference.root == "steps" and reference.name.text in steps:
            return analysis.path, steps[reference.name.text].id.span
        return None
    if found.kind == "case" and found.node.target.text in steps:
        return analysis.path, steps[found.node.target.text].id.span
    if found.kind == "uses" and found.step is not None and found.step.id in analysis.children:
        return analysis.children[found.step.id][1], None
    if found.kind in ("script", "file"):
        relative = found.node.path.value if found.kind == "script" else found.node.value
        target = analysis.root / relative
        try:
            target.resolve().relative_to(analysis.root.resolve())  # as the compiler: never outside the root
        except (OSError, ValueError):
            return None
        return (target, None) if target.is_file() else None
    return None


# -- the outline -----------------------------------------------------------------------------------------


def symbols(analysis: Analysis, lines: Lines) -> list[lsp.DocumentSymbol]:
    workflow = analysis.workflow
    if workflow is None:
        return []

    def symbol(
        name: str,
        kind: lsp.SymbolKind,
        span: Span,
        selection: Span,
        detail: str | None = None,
        children: list[lsp.DocumentSymbol] | None = None,
    ) -> lsp.DocumentSymbol:
        return lsp.DocumentSymbol(
            name=name,
            kind=kind,
            range=lines.range(span.start, span.end),
            selection_range=lines.range(selection.start, selection.end),
            detail=detail,
            children=children or None,
        )

    inner: list[lsp.DocumentSymbol] = []
    typed = analysis.typed
    for section in workflow.sections:
        children = []
        for param in section.params:
            name = param.name.text
            detail = t.describe(typed.params[name]) if typed is not None and name in typed.params else None
            children.append(symbol(name, lsp.SymbolKind.Variable, param.span, param.name.span, detail))
        children += [
            symbol(o.name.text, lsp.SymbolKind.Property, o.span, o.name.span, o.source.text) for o in section.outputs
        ]
        inner.append(symbol(section.kind, lsp.SymbolKind.Namespace, section.span, section.keyword_span, None, children))
    by_step = {sm.id: sm for sm in analysis.model.steps} if analysis.model is not None else {}
    for step in workflow.every_step():
        inner.append(
            symbol(
                step.id.text, lsp.SymbolKind.Function, step.span, step.id.span, _step_kind(by_step.get(step.id.text))
            )
        )
    return [symbol(workflow.title.value, lsp.SymbolKind.Module, workflow.span, workflow.title.span, "workflow", inner)]
