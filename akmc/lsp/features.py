"""What the language server answers, as pure functions of an analysis and an offset: hover,
definition, completion, the outline and code actions. The protocol plumbing is in `server.py`."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from akmc import ast
from akmc import types as t
from akmc.diagnostics import CATALOG, Diagnostic, Report
from akmc.lsp.analysis import Analysis
from akmc.lsp.positions import Lines
from akmc.resolve import StepModel
from akmc.spans import Span
from akmc.typecheck import type_of
from akmc.workspace import discover, ref_of

SECTIONS = ["description", "params", "outputs", "limits", "defaults", "step"]
TARGETS = ["shell", "script", "agent", "uses", "approval"]
KEYWORDS = {
    "workflow": SECTIONS,
    "step": [*TARGETS, "map", "route", "gate", "env", "inputs", "output", "timeout", "retry", "on_error"],
    "map": [*TARGETS, "concurrency", "timeout", "retry", "env"],
    "gate": ["check", "max_loops"],
    "limits": ["concurrency", "max_units", "timeout"],
    "defaults": ["timeout", "retry", "on_error", "env"],
}
VALUES = {
    "on_error": ["fail", "continue"],
    "on": ["exit", "timeout", "spawn_error", "output_invalid"],
}
TYPE_NAMES = ["string", "int", "number", "bool", "null", "any", "list", "map"]


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
    for step in workflow.steps:
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
    from akmc.commands.explain import page

    try:
        text = page(code)
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
    steps = {s.id.text: s for s in analysis.workflow.steps}
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


# -- completion ------------------------------------------------------------------------------------------

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_STEP = r"[A-Za-z_][A-Za-z0-9_-]*"
_PATH = rf"(?:\.{_NAME}|\[[0-9]+\])*"


def _scan(text: str) -> list[int]:
    """The offsets of the `{` still open at the end of `text`, outside strings, text blocks and comments."""
    stack: list[int] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith('"""', i):
            end = text.find('"""', i + 3)
            i = n if end < 0 else end + 3
            continue
        elif c == '"':
            i += 1
            while i < n and text[i] not in '"\n':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            stack.append(i)
        elif c == "}" and stack:
            stack.pop()
        i += 1
    return stack


def block_at(text: str, offset: int) -> tuple[str, str]:
    """The innermost block open at `offset`: (kind, its name or ref), e.g. ("step", "build"),
    ("uses", "workflows/child"), ("value", "") inside an inline object; ("", "") outside any."""
    stack = _scan(text[:offset])
    if not stack:
        return "", ""
    head = text[max(0, stack[-1] - 200) : stack[-1]]
    patterns = [
        ("step", rf"\bstep\s+({_STEP})\s*$"),
        ("workflow", r'\bworkflow\s+"(?:[^"\\\n]|\\.)*"\s*$'),
        ("uses", r'\buses\s+"([^"\n]*)"\s*$'),
        ("map", r"\bmap\s+[^{}=]*$"),
        ("route", r"\broute\s+[^{}=]*$"),
        ("section", r"\b(params|outputs|limits|defaults|gate|env)\s*$"),
    ]
    for kind, pattern in patterns:
        match = re.search(pattern, head)
        if match:
            if kind == "section":
                return match.group(1), ""
            return kind, match.group(1) if match.groups() else ""
    return "value", ""


def _fields(type_: t.Type | None) -> list[tuple[str, t.Type]]:
    if isinstance(type_, t.ObjT):
        return [(f.name, f.type) for f in type_.fields]
    if isinstance(type_, t.UnionT):
        return [f for member in type_.members for f in _fields(member)]
    return []


def _item(label: str, kind: lsp.CompletionItemKind, detail: str | None = None) -> lsp.CompletionItem:
    return lsp.CompletionItem(label=label, kind=kind, detail=detail)


def completions(text: str, offset: int, analysis: Analysis | None) -> list[lsp.CompletionItem]:
    """What may be typed at `offset`. `analysis` may be of an earlier version of the text (the
    current one often does not parse while it is being typed)."""
    line = text[text.rfind("\n", 0, offset) + 1 : offset]
    model = analysis.model if analysis is not None else None
    typed = analysis.typed if analysis is not None else None
    block, name = block_at(text, offset)
    if match := re.search(rf"\bsteps\.({_STEP})\.output({_PATH})\.({_NAME})?$", line):
        if model is None or typed is None or match.group(1) not in typed.steps:
            return []
        segments = [ast.Segment(f, None, _NOWHERE) for f in re.findall(_NAME, match.group(2))]
        reference = ast.Reference("steps", ast.Ident(match.group(1), _NOWHERE), segments, _NOWHERE)
        type_ = type_of(reference, model, typed, Report(""))
        return [_item(n, lsp.CompletionItemKind.Field, t.describe(ft)) for n, ft in _fields(type_)]
    if re.search(rf"\bsteps\.({_STEP})\.({_NAME})?$", line):
        return [_item("output", lsp.CompletionItemKind.Keyword)]
    if re.search(rf"\bsteps\.({_STEP})?$", line):
        if model is None:
            return []
        names = [sm.id for sm in model.steps]
        if block == "step" and name in names:
            names = names[: names.index(name)]  # a reference may only name an earlier step
        elif block in ("map", "route", "uses", "gate", "env"):
            current = _enclosing_step(text, offset)
            if current in names:
                names = names[: names.index(current)]
        types_ = typed.steps if typed is not None else {}
        return [
            _item(n, lsp.CompletionItemKind.Function, t.describe(types_[n]) if n in types_ else None) for n in names
        ]
    if re.search(rf"\bparams\.({_NAME})?$", line):
        if model is None:
            return []
        params = typed.params if typed is not None else {}
        return [
            _item(n, lsp.CompletionItemKind.Variable, t.describe(params[n]) if n in params else None)
            for n in model.params
        ]
    if match := re.search(r'\buses\s+"([^"]*)$', line):
        if analysis is None:
            return []
        refs = sorted(r for p in discover([analysis.root]) if (r := ref_of(p, analysis.root)) is not None)
        return [_item(r, lsp.CompletionItemKind.File) for r in refs if r != ref_of(analysis.path, analysis.root)]
    if match := re.search(rf"\b({_NAME})\s*=\s*\[?(?:{_NAME}\s*,\s*)*({_NAME})?$", line):
        values = VALUES.get(match.group(1))
        return [_item(v, lsp.CompletionItemKind.EnumMember) for v in values] if values else []
    if re.search(rf"^\s*{_NAME}\s*\??\s*:\s*({_NAME})?$", line) and block in ("params", "outputs", "step", "value"):
        return [_item(n, lsp.CompletionItemKind.TypeParameter) for n in TYPE_NAMES]
    if not re.fullmatch(rf"(?:.*\s)?({_NAME})?", line) or re.search(r"[=:.\[(,]\s*$", line):
        return []
    if block == "uses" and analysis is not None:
        child = _child_by_ref(analysis, name)
        if child is None:
            return []
        bound = set(re.findall(rf"\b({_NAME})\s*=", text[_scan(text[:offset])[-1] : offset]))
        return [
            _item(n, lsp.CompletionItemKind.Property, t.describe(p) + ("" if not required else " (required)"))
            for n, (p, required) in child.params.items()
            if n not in bound
        ]
    words = KEYWORDS.get(block, [])
    return [_item(w, lsp.CompletionItemKind.Keyword) for w in words]


_NOWHERE = Span(1, 1, 1, 1, 0, 0)


def _enclosing_step(text: str, offset: int) -> str | None:
    for start in reversed(_scan(text[:offset])):
        match = re.search(rf"\bstep\s+({_STEP})\s*$", text[max(0, start - 200) : start])
        if match:
            return match.group(1)
    return None


def _child_by_ref(analysis: Analysis, ref: str) -> Any:
    for child, _ in analysis.children.values():
        if child.ref == ref:
            return child
    return None


# -- the outline -----------------------------------------------------------------------------------------


def symbols(analysis: Analysis, lines: Lines) -> list[lsp.DocumentSymbol]:
    workflow = analysis.workflow
    if workflow is None:
        return []

    def symbol(name: str, kind: lsp.SymbolKind, span: Span, selection: Span, detail: str | None = None,
               children: list[lsp.DocumentSymbol] | None = None) -> lsp.DocumentSymbol:  # fmt: skip
        return lsp.DocumentSymbol(
            name=name, kind=kind, range=lines.range(span.start, span.end),
            selection_range=lines.range(selection.start, selection.end), detail=detail, children=children or None,
        )  # fmt: skip

    inner: list[lsp.DocumentSymbol] = []
    typed = analysis.typed
    for section in workflow.sections:
        children = [
            symbol(p.name.text, lsp.SymbolKind.Variable, p.span, p.name.span,
                   t.describe(typed.params[p.name.text]) if typed and p.name.text in typed.params else None)
            for p in section.params
        ] + [symbol(o.name.text, lsp.SymbolKind.Property, o.span, o.name.span, o.source.text) for o in section.outputs]  # fmt: skip
        inner.append(symbol(section.kind, lsp.SymbolKind.Namespace, section.span, section.keyword_span, None, children))
    by_step = {sm.id: sm for sm in analysis.model.steps} if analysis.model is not None else {}
    for step in workflow.steps:
        inner.append(
            symbol(
                step.id.text, lsp.SymbolKind.Function, step.span, step.id.span, _step_kind(by_step.get(step.id.text))
            )
        )
    return [symbol(workflow.title.value, lsp.SymbolKind.Module, workflow.span, workflow.title.span, "workflow", inner)]


# -- code actions ----------------------------------------------------------------------------------------

_SUGGESTION = re.compile(r"did you mean `([^`]+)`\?")
_IGNORE = re.compile(r"#\s*akmc:\s*ignore\s*\[([^\]]*)\]")


def code_actions(uri: str, text: str, lines: Lines, diagnostics: list[Diagnostic], start: int,
                 end: int) -> list[lsp.CodeAction]:  # fmt: skip
    """For each diagnostic overlapping [start, end]: apply its did-you-mean; silence it on its line."""
    actions: list[lsp.CodeAction] = []
    for diagnostic in diagnostics:
        span = diagnostic.span
        if span.end < start or span.start > end:
            continue
        wire = to_lsp(diagnostic, lines)
        suggestion = _SUGGESTION.search(diagnostic.help or "")
        if suggestion is not None:
            fix = _replacement(text, span, suggestion.group(1))
            if fix is not None:
                (a, b), new = fix
                actions.append(lsp.CodeAction(
                    title=f"Replace `{text[a:b]}` with `{new}`", kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[wire], is_preferred=True,
                    edit=lsp.WorkspaceEdit(changes={uri: [lsp.TextEdit(lines.range(a, b), new)]}),
                ))  # fmt: skip
        edit = _silence(text, lines, diagnostic)
        if edit is not None:
            actions.append(lsp.CodeAction(
                title=f"Silence {diagnostic.code} on this line (# akmc: ignore[{diagnostic.code}])",
                kind=lsp.CodeActionKind.QuickFix, diagnostics=[wire],
                edit=lsp.WorkspaceEdit(changes={uri: [edit]}),
            ))  # fmt: skip
    return actions


def _replacement(text: str, span: Span, suggestion: str) -> tuple[tuple[int, int], str] | None:
    """The word in the diagnostic's span that the suggestion replaces (the most similar one)."""
    best: tuple[float, int, int] | None = None
    for match in re.finditer(r"[A-Za-z_][A-Za-z0-9_/-]*", text[span.start : span.end]):
        if match.group() == suggestion:
            continue
        ratio = difflib.SequenceMatcher(None, match.group(), suggestion).ratio()
        if best is None or ratio > best[0]:
            best = (ratio, span.start + match.start(), span.start + match.end())
    return ((best[1], best[2]), suggestion) if best is not None else None


def _silence(text: str, lines: Lines, diagnostic: Diagnostic) -> lsp.TextEdit | None:
    """An edit adding the code to the suppression at the end of the diagnostic's line."""
    if diagnostic.code in ("E100", "E101", "E102", "E103", "W704"):
        return None  # a file that does not parse has no comments; a stale suppression is removed, not silenced
    from akmc.formatter import SyntaxProblem, tokens

    line_end = lines.line_end(diagnostic.span.start)
    try:
        if any((tok.start_pos or 0) < line_end < (tok.end_pos or 0) for tok in tokens(text)):
            return None  # the line ends inside a text block: a comment there would be prose
    except (SyntaxProblem, Exception):  # noqa: BLE001 - no parse, no offer
        return None
    line_start = text.rfind("\n", 0, diagnostic.span.start) + 1
    existing = _IGNORE.search(text, line_start, line_end)
    if existing is not None:
        codes = [c.strip() for c in existing.group(1).split(",") if c.strip()]
        if diagnostic.code in codes:
            return None
        new = f"# akmc: ignore[{', '.join([*codes, diagnostic.code])}]"
        return lsp.TextEdit(lines.range(existing.start(), existing.end()), new)
    stripped = len(text[line_start:line_end].rstrip())
    return lsp.TextEdit(lines.range(line_start + stripped, line_end), f" # akmc: ignore[{diagnostic.code}]")


# -- diagnostics on the wire -----------------------------------------------------------------------------

_UNNECESSARY = {"W700", "W704"}


def to_lsp(
    diagnostic: Diagnostic, lines: Lines, related: list[lsp.DiagnosticRelatedInformation] | None = None
) -> lsp.Diagnostic:
    severity = lsp.DiagnosticSeverity.Error if diagnostic.severity == "error" else lsp.DiagnosticSeverity.Warning
    message = diagnostic.message + (f"\nhelp: {diagnostic.help}" if diagnostic.help else "")
    return lsp.Diagnostic(
        range=lines.range(diagnostic.span.start, diagnostic.span.end),
        message=message,
        severity=severity,
        code=diagnostic.code,
        source="akmc",
        tags=[lsp.DiagnosticTag.Unnecessary] if diagnostic.code in _UNNECESSARY else None,
        related_information=related or None,
    )
