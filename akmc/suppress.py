"""Inline suppressions: `# akmc: ignore[CODE,…]` on a line, `# akmc: ignore-file[CODE,…]` for a file.

Precise by construction: a suppression names codes, never message text, and a line suppression
covers only diagnostics whose primary span starts on its own line. A suppression (or one code in
it) that silences nothing is reported as W704, so stale ignores do not pile up."""

from __future__ import annotations

import re

from akmc import ast, messages
from akmc.diagnostics import CATALOG, Diagnostic, Report
from akmc.records import build, field, record

_DIRECTIVE = re.compile(r"#\s*akmc:\s*(ignore-file|ignore)\s*\[([^\]]*)\]")


@record
class Suppression:
    whole_file: bool
    line: int
    span: ast.Span
    codes: list[str]
    used: set[str] = field(default_factory=set)


build()


def directives(comments: list[tuple[str, ast.Span]]) -> list[Suppression]:
    """The suppressions among a file's comments (text and span of each `#` comment)."""
    found = []
    for text, span in comments:
        match = _DIRECTIVE.search(text)
        if match is None:
            continue
        codes = [c.strip() for c in match.group(2).split(",") if c.strip()]
        start = span.start + match.start()
        where = ast.Span(
            span.line,
            span.column + match.start(),
            span.line,
            span.column + match.end(),
            start,
            start + match.end() - match.start(),
        )
        found.append(Suppression(match.group(1) == "ignore-file", span.line, where, codes))
    return found


def apply(report: Report, suppressions: list[Suppression]) -> None:
    """Remove the diagnostics the suppressions silence from `report`, then add W704 for each
    suppression code that silenced nothing (or is not a code at all)."""
    kept: list[Diagnostic] = []
    by_line: dict[int, list[Suppression]] = {}  # so that applying is linear in suppressions + diagnostics
    for suppression in suppressions:
        by_line.setdefault(0 if suppression.whole_file else suppression.line, []).append(suppression)
    for diagnostic in report.diagnostics:
        near = [*by_line.get(diagnostic.span.line, ()), *by_line.get(0, ())]
        silencer = _silencer(diagnostic, sorted(near, key=lambda s: s.span.start))  # first in the file wins
        if silencer is None:
            kept.append(diagnostic)
        else:
            silencer.used.add(diagnostic.code)
    report.diagnostics[:] = kept
    quiet = any(s.whole_file and "W704" in s.codes for s in suppressions)
    for suppression in suppressions:
        unused = [c for c in suppression.codes if c not in suppression.used]
        unknown = [c for c in unused if c not in CATALOG]
        idle = [c for c in unused if c in CATALOG]
        kind = "ignore-file" if suppression.whole_file else "ignore"
        found = []
        if unknown:
            found.append(messages.unknown_suppressed_code(kind=kind, codes=", ".join(f"`{c}`" for c in unknown)))
        if idle and suppression.whole_file:
            found.append(messages.idle_file_suppression(codes=", ".join(idle)))
        elif idle:
            found.append(messages.idle_suppression(codes=", ".join(idle), line=suppression.line))
        if not quiet:
            for message in found:
                report.add(message, suppression.span)


def _silencer(diagnostic: Diagnostic, suppressions: list[Suppression]) -> Suppression | None:
    for suppression in suppressions:
        if diagnostic.code not in suppression.codes:
            continue
        if suppression.whole_file or suppression.line == diagnostic.span.line:
            return suppression
    return None
