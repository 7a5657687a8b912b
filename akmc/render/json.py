"""The machine format: one JSON array of diagnostics (shape in the CLI docs)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from akmc.diagnostics import Diagnostic


def as_dict(diagnostic: Diagnostic) -> dict[str, Any]:
    span = diagnostic.span
    out: dict[str, Any] = {
        "file": diagnostic.file,
        "line": span.line,
        "column": span.column,
        "endLine": span.end_line,
        "endColumn": span.end_column,
        "code": diagnostic.code,
        "severity": diagnostic.severity,
        "message": diagnostic.message,
    }
    if diagnostic.help:
        out["help"] = diagnostic.help
    if diagnostic.related:
        out["related"] = [
            {
                "file": r.file,
                "line": r.span.line,
                "column": r.span.column,
                "endLine": r.span.end_line,
                "endColumn": r.span.end_column,
                "message": r.message,
            }
            for r in diagnostic.related
        ]
    return out


def render(diagnostics: Sequence[Diagnostic]) -> str:
    return json.dumps([as_dict(d) for d in diagnostics], indent=2, ensure_ascii=False) + "\n"
