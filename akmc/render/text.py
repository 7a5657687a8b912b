"""The human format: `file:line:col: severity[code]: message`, the source line, a caret, help."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from akmc.diagnostics import ERROR, Diagnostic

Lines = Sequence[str] | Mapping[int, str]  # a file's lines, or some of them by 1-based number


def shown_lines(text: str, diagnostics: Iterable[Diagnostic]) -> dict[int, str]:
    """The lines of `text` that `render` shows for `diagnostics`: all a checked file's result keeps
    of its source, so that memory does not hold every file's text until the sorted output."""
    numbers = {d.span.line for d in diagnostics}
    if not numbers:
        return {}
    lines = text.split("\n")
    return {n: lines[n - 1] for n in sorted(numbers) if 1 <= n <= len(lines)}


def _line(lines: Lines, number: int) -> str | None:
    if isinstance(lines, Mapping):
        return lines.get(number)
    return lines[number - 1] if 1 <= number <= len(lines) else None


def caret_line(source_line: str, column: int, width: int) -> str:
    """Spaces up to `column` (tabs kept as tabs so the caret lines up), then `^` × width."""
    prefix = "".join("\t" if ch == "\t" else " " for ch in source_line[: column - 1])
    return prefix + "^" * max(1, width)


def render_one(diagnostic: Diagnostic, source: str | Lines | None) -> str:
    """One diagnostic; `source` is the file's text, or its lines split on "\n" (all or some)."""
    span = diagnostic.span
    head = (
        f"{diagnostic.file}:{span.line}:{span.column}: {diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}"
    )
    line = None if source is None else _line(source.split("\n") if isinstance(source, str) else source, span.line)
    if line is None:
        return head + (f"\n  = help: {diagnostic.help}" if diagnostic.help else "")
    text = line.rstrip("\r")
    width = (span.end_column - span.column) if span.end_line == span.line else len(text) - span.column + 1
    gutter = " " * len(str(span.line))
    marker = caret_line(text, span.column, width)
    if diagnostic.help:
        marker += f" help: {diagnostic.help}"
    out = [head, f"{gutter} |", f"{span.line} | {text}", f"{gutter} | {marker}"]
    for related in diagnostic.related:
        out.append(f"{gutter} = note: {related.message} ({related.file}:{related.span.line}:{related.span.column})")
    out.append(f"{gutter} |")
    return "\n".join(out)


def summary(diagnostics: Sequence[Diagnostic], checked: int) -> str:
    errors = sum(1 for d in diagnostics if d.severity == ERROR)
    return summary_line(errors, len(diagnostics) - errors, len({d.file for d in diagnostics}), checked)


def summary_line(errors: int, warnings: int, files: int, checked: int) -> str:
    """The last line: counts of errors, warnings and the files they are in, and of files checked."""
    checked_text = f"{checked} file{'s' if checked != 1 else ''} checked"
    if not errors and not warnings:
        return f"No problems found ({checked_text})."
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    return f"Found {' and '.join(parts)} in {files} file{'s' if files != 1 else ''} ({checked_text})."


def render(
    diagnostics: Sequence[Diagnostic], sources: Mapping[str, str | Lines], checked: int, *, quiet: bool = False
) -> str:
    """`sources` maps a file to its text, or to its lines (all, or those `shown_lines` kept)."""
    split: dict[str, Lines] = {}  # each file split once: rendering is linear in the diagnostics

    def lines(file: str) -> Lines | None:
        if file not in split and file in sources:
            source = sources[file]
            split[file] = source.split("\n") if isinstance(source, str) else source
        return split.get(file)

    blocks = [render_one(d, lines(d.file)) for d in diagnostics]
    if not quiet:
        blocks.append(summary(diagnostics, checked))
    return "\n".join(blocks) + ("\n" if blocks else "")
