"""Completion: what may be typed at an offset, read from the text before it (which often does not
parse while it is being typed) and from the last analysis that did."""

from __future__ import annotations

import re
from typing import Any

from lsprotocol import types as lsp

from akm_run.planformat import NOTIFY_EVENTS, RETRY_REASONS
from akmc import ast
from akmc import types as t
from akmc.diagnostics import Report
from akmc.lsp.analysis import Analysis
from akmc.spans import Span
from akmc.typecheck import type_of
from akmc.workspace import discover, ref_of

SECTIONS = ["description", "params", "outputs", "limits", "defaults", "notify", "step", "parallel"]
TARGETS = ["shell", "script", "agent", "uses", "approval"]
KEYWORDS = {
    "workflow": SECTIONS,
    "step": [
        *TARGETS,
        "map",
        "route",
        "gate",
        "env",
        "inputs",
        "output",
        "timeout",
        "retry",
        "on_error",
        "stall_after",
        "on_stall",
        "fail_fast",
        "isolation",
        "max_tokens",
    ],
    "map": [
        *TARGETS,
        "concurrency",
        "fail_fast",
        "timeout",
        "retry",
        "stall_after",
        "on_stall",
        "isolation",
        "max_tokens",
        "env",
    ],
    "gate": ["check", "max_loops"],
    "parallel": ["step", "concurrency", "fail_fast", "on_error"],
    "limits": ["concurrency", "max_units", "timeout", "exclusive", "max_tokens"],
    "defaults": ["timeout", "retry", "on_error", "stall_after", "on_stall", "isolation", "max_tokens", "env"],
    "notify": ["on", "shell", "script", "env", "timeout", "retry"],
}
VALUES: dict[str, list[str]] = {
    "on_error": ["fail", "continue"],
    "on_stall": ["warn", "terminate"],
    "fail_fast": ["true", "false"],
    "isolation": ["worktree", "none"],
    "on": list(RETRY_REASONS),  # retry's
    "notify.on": list(NOTIFY_EVENTS),
}
TYPE_NAMES = ["string", "int", "number", "bool", "null", "any", "list", "map"]

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
        ("parallel", rf"\bparallel\s+({_STEP})\s*$"),
        ("workflow", r'\bworkflow\s+"(?:[^"\\\n]|\\.)*"\s*$'),
        ("uses", r'\buses\s+"([^"\n]*)"\s*$'),
        ("map", r"\bmap\s+[^{}=]*$"),
        ("route", r"\broute\s+[^{}=]*$"),
        ("section", r"\b(params|outputs|limits|defaults|notify|gate|env)\s*$"),
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
    block, name = block_at(text, offset)
    if match := re.search(rf"\bsteps\.({_STEP})\.output({_PATH})\.({_NAME})?$", line):
        return _output_fields(analysis, match.group(1), match.group(2))
    if re.search(rf"\bsteps\.({_STEP})\.({_NAME})?$", line):
        return [_item("output", lsp.CompletionItemKind.Keyword)]
    if re.search(rf"\bsteps\.({_STEP})?$", line):
        return _steps(analysis, text, offset, block, name)
    if re.search(rf"\bparams\.({_NAME})?$", line):
        return _params(analysis)
    if re.search(r'\buses\s+"([^"]*)$', line):
        return _refs(analysis)
    if match := re.search(rf"\b({_NAME})\s*=\s*\[?(?:{_NAME}\s*,\s*)*({_NAME})?$", line):
        setting = "notify.on" if (block, match.group(1)) == ("notify", "on") else match.group(1)
        return [_item(v, lsp.CompletionItemKind.EnumMember) for v in VALUES.get(setting, [])]
    if re.search(rf"^\s*{_NAME}\s*\??\s*:\s*({_NAME})?$", line) and block in ("params", "outputs", "step", "value"):
        return [_item(n, lsp.CompletionItemKind.TypeParameter) for n in TYPE_NAMES]
    if not re.fullmatch(rf"(?:.*\s)?({_NAME})?", line) or re.search(r"[=:.\[(,]\s*$", line):
        return []  # in the middle of a value: no keyword fits
    if block == "uses":
        return _unbound(analysis, name, text, offset)
    return [_item(w, lsp.CompletionItemKind.Keyword) for w in KEYWORDS.get(block, [])]


def _output_fields(analysis: Analysis | None, step: str, path: str) -> list[lsp.CompletionItem]:
    """The fields at `path` of a step's output: a `uses` step's are the child's exports."""
    if analysis is None or analysis.model is None or analysis.typed is None or step not in analysis.typed.steps:
        return []
    segments = [ast.Segment(f, None, _NOWHERE) for f in re.findall(_NAME, path)]
    reference = ast.Reference("steps", ast.Ident(step, _NOWHERE), segments, _NOWHERE)
    type_ = type_of(reference, analysis.model, analysis.typed, Report(""))
    return [_item(n, lsp.CompletionItemKind.Field, t.describe(ft)) for n, ft in _fields(type_)]


def _steps(analysis: Analysis | None, text: str, offset: int, block: str, name: str) -> list[lsp.CompletionItem]:
    """The steps a reference here may name: those before the step being written (for a step of a
    `parallel` block, those before its block)."""
    if analysis is None or analysis.model is None:
        return []
    names = [sm.id for sm in analysis.model.steps]
    current = name if block == "step" else _enclosing_step(text, offset)
    group = next((sm.group for sm in analysis.model.steps if sm.id == current), None)
    if group is not None:
        current = group
    if current in names:
        names = names[: names.index(current)]
    types_ = analysis.typed.steps if analysis.typed is not None else {}
    return [_item(n, lsp.CompletionItemKind.Function, t.describe(types_[n]) if n in types_ else None) for n in names]


def _params(analysis: Analysis | None) -> list[lsp.CompletionItem]:
    if analysis is None or analysis.model is None:
        return []
    params = analysis.typed.params if analysis.typed is not None else {}
    return [
        _item(n, lsp.CompletionItemKind.Variable, t.describe(params[n]) if n in params else None)
        for n in analysis.model.params
    ]


def _refs(analysis: Analysis | None) -> list[lsp.CompletionItem]:
    """The workspace's workflows, by ref, except the file itself."""
    if analysis is None:
        return []
    refs = sorted(r for p in discover([analysis.root]) if (r := ref_of(p, analysis.root)) is not None)
    return [_item(r, lsp.CompletionItemKind.File) for r in refs if r != ref_of(analysis.path, analysis.root)]


def _unbound(analysis: Analysis | None, ref: str, text: str, offset: int) -> list[lsp.CompletionItem]:
    """The params of the child a `uses` block names that the block does not bind yet."""
    child = _child_by_ref(analysis, ref) if analysis is not None else None
    if child is None:
        return []
    bound = set(re.findall(rf"\b({_NAME})\s*=", text[_scan(text[:offset])[-1] : offset]))
    return [
        _item(n, lsp.CompletionItemKind.Property, t.describe(p) + (" (required)" if required else ""))
        for n, (p, required) in child.params.items()
        if n not in bound
    ]


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
