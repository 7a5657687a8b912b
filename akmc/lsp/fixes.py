"""Quick fixes (apply a did-you-mean, add `# akmc: ignore[CODE]`) and diagnostics as the protocol
carries them."""

from __future__ import annotations

import difflib
import re

from lsprotocol import types as lsp

from akmc.diagnostics import Diagnostic
from akmc.formatter import SyntaxProblem, tokens
from akmc.lsp.positions import Lines
from akmc.spans import Span

# -- code actions ----------------------------------------------------------------------------------------

_SUGGESTION = re.compile(r"did you mean `([^`]+)`\?")
_IGNORE = re.compile(r"#\s*akmc:\s*ignore\s*\[([^\]]*)\]")


def code_actions(
    uri: str, text: str, lines: Lines, diagnostics: list[Diagnostic], start: int, end: int
) -> list[lsp.CodeAction]:
    """For each diagnostic overlapping [start, end]: apply its did-you-mean; silence it on its line;
    for a suppression that silences nothing (W704), remove what silences nothing."""
    actions: list[lsp.CodeAction] = []
    for diagnostic in diagnostics:
        span = diagnostic.span
        if span.end < start or span.start > end:
            continue
        wire = to_lsp(diagnostic, lines)

        suggestion = _SUGGESTION.search(diagnostic.help or "")
        fix = _replacement(text, span, suggestion.group(1)) if suggestion is not None else None
        if fix is not None:
            (a, b), new = fix
            actions.append(
                _action(uri, wire, f"Replace `{text[a:b]}` with `{new}`", lsp.TextEdit(lines.range(a, b), new), True)
            )
        silence = _silence(text, lines, diagnostic)
        if silence is not None:
            title = f"Silence {diagnostic.code} on this line (# akmc: ignore[{diagnostic.code}])"
            actions.append(_action(uri, wire, title, silence))
        stale = _unsilence(text, lines, diagnostic)
        if stale is not None:
            actions.append(_action(uri, wire, "Remove what silences nothing from this suppression", stale, True))
    return actions


def _action(uri: str, wire: lsp.Diagnostic, title: str, edit: lsp.TextEdit, preferred: bool = False) -> lsp.CodeAction:
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[wire],
        is_preferred=preferred or None,
        edit=lsp.WorkspaceEdit(changes={uri: [edit]}),
    )


_DIRECTIVE = re.compile(r"#\s*akmc:\s*(ignore-file|ignore)\s*\[([^\]]*)\]")


def _unsilence(text: str, lines: Lines, diagnostic: Diagnostic) -> lsp.TextEdit | None:
    """For W704: the suppression without the codes its message names; without the comment when
    none is left (and without the spaces before it, when it trails code)."""
    if diagnostic.code != "W704":
        return None
    directive = _DIRECTIVE.match(text, diagnostic.span.start)
    if directive is None:
        return None
    named = set(re.findall(r"`([^`]+)`", diagnostic.message)) | {
        c.strip() for m in re.finditer(r"\[([^\]]*)\]", diagnostic.message) for c in m.group(1).split(",")
    }
    codes = [c.strip() for c in directive.group(2).split(",") if c.strip()]
    kept = [c for c in codes if c not in named]
    if kept:
        new = f"# akmc: {directive.group(1)}[{', '.join(kept)}]"
        return lsp.TextEdit(lines.range(directive.start(), directive.end()), new)
    line_start = text.rfind("\n", 0, directive.start()) + 1
    before = text[line_start : directive.start()]
    start = line_start + len(before.rstrip()) if before.strip() else directive.start()
    end = (
        directive.end()
        if text[directive.end() : lines.line_end(directive.end())].strip()
        else lines.line_end(directive.end())
    )
    return lsp.TextEdit(lines.range(start, end), "")


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
