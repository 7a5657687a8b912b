"""The catalog of diagnostic codes and the Diagnostic value that checkers produce."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from akmc.spans import Span

if TYPE_CHECKING:  # the wording loads with the checkers: reporting cached results never needs it
    from akmc.messages import Message

ERROR = "error"
WARNING = "warning"


class Code(NamedTuple):
    """One catalog entry. The code never changes meaning once released; its wording is in `messages`."""

    code: str
    severity: str
    summary: str


def _entries(*rows: tuple[str, str]) -> dict[str, Code]:
    return {code: Code(code, WARNING if code.startswith("W") else ERROR, summary) for code, summary in rows}


CATALOG: dict[str, Code] = _entries(
    ("E100", "syntax error"),
    ("E101", "unterminated string or text block, or invalid escape"),
    ("E102", "invalid number, integer out of range, or invalid duration"),
    ("E103", "file is not UTF-8 or exceeds the source size limit"),
    ("E200", "duplicate step id"),
    ("E201", "duplicate name"),
    ("E202", "duplicate or conflicting item"),
    ("E203", "reference to an unknown step"),
    ("E204", "reference to the current or a later step"),
    ("E205", "reference to an unknown param"),
    ("E206", "step has no target, map or route"),
    ("E207", "unknown, misplaced or ignored setting, or invalid secret name"),
    ("E208", "invalid route target"),
    ("E209", "`item` outside a `map` block"),
    ("E210", "a step inside a `parallel` block reads another step of the same block, or the block"),
    ("E211", "invalid `parallel` block: empty, nested, or with a `route` step"),
    ("E300", "literal does not match its declared type"),
    ("E301", "no such field"),
    ("E302", "path step on a type without fields or elements"),
    ("E303", "map over a value that is not a list"),
    ("E304", "route case cannot match"),
    ("E305", "declared output type is not satisfied"),
    ("E306", "invalid type"),
    ("E307", "binding type does not fit the child param"),
    ("E400", "child workflow not found"),
    ("E401", "composition cycle"),
    ("E402", "composition too deep"),
    ("E403", "embedded child plans too large"),
    ("E404", "plan too large"),
    ("E405", "binding names an unknown child param"),
    ("E406", "required child param not bound"),
    ("E407", "reference to an output the child does not export"),
    ("E408", "child workflow has errors"),
    ("E500", "referenced file not found"),
    ("E501", "path escapes the workspace root or is not portable"),
    ("E502", "invalid script file"),
    ("E600", "literal looks like a credential"),
    ("E601", "limit exceeded or setting out of bounds"),
    ("W700", "param never referenced"),
    ("W701", "route does not cover every case"),
    ("W702", "step reads the output of a step a route may skip"),
    ("W703", "limit clamped"),
    ("W704", "unused suppression"),
    ("W705", "step reads the output of a step that may fail and continue"),
    ("W706", "`max_tokens` is set but no agent unit can run in this workflow or its children"),
    ("W707", "`stall_after` is not shorter than the step's timeout"),
    ("W708", "shell command runs a workspace file the plan does not freeze"),
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

    def add(self, message: Message, span: Span, *, help: str | None = None, related: tuple[Related, ...] = ()) -> None:
        """Report `message` at `span`; `help` (a did-you-mean, say) stands in for the template's own help line."""
        shown = help if help is not None else message.help
        self.diagnostics.append(Diagnostic(message.code, message.text, self.file, span, shown, related))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == ERROR for d in self.diagnostics)


def position(span: Span) -> str:
    """`line:col` of a span, as messages quote it."""
    return f"{span.line}:{span.column}"


def did_you_mean(word: str, candidates: list[str] | set[str]) -> str | None:
    """A help line suggesting the closest candidate, or None when nothing is close."""
    import difflib  # late: about 1 ms (heapq with it) that a check without a misspelled name never needs

    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None
