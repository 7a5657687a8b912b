"""The per-file pipeline: read, parse, and (as stages land) check and lower one workflow."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from akmc import ast
from akmc.diagnostics import Report
from akmc.workspace import FILE_START, MAX_SOURCE_BYTES, decode_source, read_bytes


@dataclass(slots=True)
class FileResult:
    """Everything one file's check produced."""

    path: Path
    display: str
    text: str | None
    report: Report
    workflow: ast.Workflow | None = None
    data: bytes = field(default=b"", repr=False)


def check_file(path: Path, display: str) -> FileResult:
    """Check one file. Raises SourceError only when the file cannot be read at all."""
    report = Report(display)
    data = read_bytes(path, MAX_SOURCE_BYTES)
    text, problem = decode_source(data)
    if text is None:
        report.add("E103", FILE_START, message=problem or "unreadable source")
        return FileResult(path, display, None, report, data=data)
    from akmc import syntax  # the parser loads lazily: `akmc explain` never needs it

    workflow = syntax.parse(text, report)
    return FileResult(path, display, text, report, workflow, data)
