"""The per-file pipeline: read, parse, resolve, type-check and lower one workflow."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from akmc import ast
from akmc.diagnostics import Report
from akmc.workspace import FILE_START, MAX_SOURCE_BYTES, decode_source, find_root, read_bytes, ref_of


@dataclass(slots=True)
class FileResult:
    """Everything one file's check produced; `plan` is set only when there are no errors."""

    path: Path
    display: str
    text: str | None
    report: Report
    workflow: ast.Workflow | None = None
    data: bytes = field(default=b"", repr=False)
    plan: dict[str, Any] | None = None
    ref: str | None = None


def check_file(path: Path, display: str, root: Path | None = None) -> FileResult:
    """Check one file. Raises SourceError only when the file cannot be read at all."""
    report = Report(display)
    data = read_bytes(path, MAX_SOURCE_BYTES)
    text, problem = decode_source(data)
    if text is None:
        report.add("E103", FILE_START, message=problem or "unreadable source")
        return FileResult(path, display, None, report, data=data)
    from akmc import syntax  # the parser loads lazily: `akmc explain` never needs it

    workflow = syntax.parse(text, report)
    result = FileResult(path, display, text, report, workflow, data)
    if workflow is None:
        return result
    root = root or find_root(path.parent)
    result.ref = ref_of(path, root) or path.stem
    result.plan = _analyse(workflow, data, result.ref, root, report)
    return result


def _analyse(workflow: ast.Workflow, data: bytes, ref: str, root: Path, report: Report) -> dict[str, Any] | None:
    from akmc.files import ReadSet
    from akmc.lower import lower
    from akmc.resolve import resolve
    from akmc.typecheck import typecheck

    model = resolve(workflow, report)
    typed = typecheck(model, report)
    plan = lower(model, typed, ref=ref, source=data, root=root, report=report, reads=ReadSet())
    return None if report.has_errors else plan
