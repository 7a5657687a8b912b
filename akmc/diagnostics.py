"""The catalog of diagnostic codes and the Diagnostic value that checkers produce."""

from __future__ import annotations

from typing import Any, NamedTuple

from akmc.spans import Span

ERROR = "error"
WARNING = "warning"


class Code(NamedTuple):
    """One catalog entry. The code never changes meaning once released."""

    code: str
    severity: str
    summary: str
    template: str


def _entries(*rows: tuple[str, str, str]) -> dict[str, Code]:
    return {
        code: Code(code, WARNING if code.startswith("W") else ERROR, summary, template)
        for code, summary, template in rows
    }


# The message templates use str.format fields; "{message}" marks codes whose
# wording is composed by the checker because the situations differ in shape.
CATALOG: dict[str, Code] = _entries(
    ("E100", "syntax error", "{message}"),
    ("E101", "unterminated string or text block, or invalid escape", "{message}"),
    ("E102", "invalid number, integer out of range, or invalid duration", "{message}"),
    ("E103", "file is not UTF-8 or exceeds the source size limit", "{message}"),
    ("E200", "duplicate step id", "duplicate step id `{step}`; it is first declared at {first}"),
    ("E201", "duplicate name", "duplicate {what} `{name}`; it is first declared at {first}"),
    ("E202", "duplicate or conflicting item", "{message}"),
    ("E203", "reference to an unknown step", "unknown step `{step}` in reference `{ref}`"),
    ("E204", "reference to the current or a later step", "{message}"),
    ("E205", "reference to an unknown param", "unknown param `{param}` in reference `{ref}`"),
    ("E206", "step has no target, map or route", "{message}"),
    ("E207", "unknown, misplaced or ignored setting, or invalid secret name", "{message}"),
    ("E208", "invalid route target", "{message}"),
    ("E209", "`item` outside a `map` block", "`item` is only defined inside a `map` block"),
    ("E300", "literal does not match its declared type", "{message}"),
    ("E301", "no such field", "no field `{field}` on {type} in `{ref}`"),
    ("E302", "path step on a type without fields or elements", "{message}"),
    ("E303", "map over a value that is not a list", "`map` over `{ref}`, whose type is {type}, not a list"),
    ("E304", "route case cannot match", "route case {case} can never match `{ref}` of type {type}"),
    ("E305", "declared output type is not satisfied", "{message}"),
    ("E306", "invalid type", "{message}"),
    ("E307", "binding type does not fit the child param", "{message}"),
    ("E400", "child workflow not found", "{message}"),
    ("E401", "composition cycle", "composition cycle: {path}"),
    ("E402", "composition too deep", "{message}"),
    ("E403", "embedded child plans too large", "{message}"),
    ("E404", "plan too large", "{message}"),
    ("E405", "binding names an unknown child param", "{message}"),
    ("E406", "required child param not bound", "{message}"),
    ("E407", "reference to an output the child does not export", "{message}"),
    ("E408", "child workflow has errors", "{message}"),
    ("E500", "referenced file not found", "{what} `{path}` not found in the workspace"),
    ("E501", "path escapes the workspace root", "{message}"),
    ("E502", "invalid script file", "{message}"),
    ("E600", "env literal looks like a credential", "{message}"),
    ("E601", "limit exceeded or setting out of bounds", "{message}"),
    ("W700", "param never referenced", "param `{param}` is declared but never referenced"),
    ("W701", "route does not cover every case", "{message}"),
    ("W702", "step reads the output of a step a route may skip", "{message}"),
    ("W703", "limit clamped", "{message}"),
    ("W704", "unused suppression", "{message}"),
)


class Related(NamedTuple):
    file: str
    span: Span
    message: str


class Diagnostic(NamedTuple):
    code: str
    message: str
    file: str
    span: Span
    help: str | None = None
    related: tuple[Related, ...] = ()

    @property
    def severity(self) -> str:
        return CATALOG[self.code].severity

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.file, self.span.line, self.span.column, self.code)


class Report:
    """The diagnostics of one file, in the order checkers found them."""

    __slots__ = ("diagnostics", "file")

    def __init__(self, file: str, diagnostics: list[Diagnostic] | None = None) -> None:
        self.file = file
        self.diagnostics: list[Diagnostic] = diagnostics if diagnostics is not None else []

    def add(
        self,
        code: str,
        span: Span,
        *,
        help: str | None = None,
        related: tuple[Related, ...] = (),
        **fields: Any,
    ) -> None:
        message = CATALOG[code].template.format(**fields)
        self.diagnostics.append(Diagnostic(code, message, self.file, span, help, related))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == ERROR for d in self.diagnostics)


def position(span: Span) -> str:
    """`line:col` of a span, as messages quote it."""
    return f"{span.line}:{span.column}"


def did_you_mean(word: str, candidates: list[str] | set[str]) -> str | None:
    """A help line suggesting the closest candidate, or None when nothing is close."""
    import difflib

    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None
