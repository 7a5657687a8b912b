"""`--format github`: GitHub Actions workflow commands, one annotation per diagnostic."""

from __future__ import annotations

from collections.abc import Sequence

from akmc.diagnostics import ERROR, Diagnostic


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics: Sequence[Diagnostic]) -> str:
    lines = []
    for d in diagnostics:
        command = "error" if d.severity == ERROR else "warning"
        span = d.span
        properties = (
            f"file={_property(d.file)},line={span.line},col={span.column},"
            f"endLine={span.end_line},endColumn={span.end_column},title={_property(d.code)}"
        )
        message = f"{d.code}: {d.message}" + (f"\nhelp: {d.help}" if d.help else "")
        lines.append(f"::{command} {properties}::{_data(message)}")
    return "".join(line + "\n" for line in lines)
