"""Syntax errors (E100, E101) in the user's terms, from Lark's own parser: the fast parse loop only
accepts, and a file it rejects is parsed again here to find and word its first error."""

from __future__ import annotations

from typing import Any

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from akmc import messages
from akmc.diagnostics import Report, did_you_mean
from akmc.frontend.lalr import end_of_file, point
from akmc.frontend.tables import lark_parser
from akmc.spans import Span

# Words for the grammar's pattern terminals; string terminals speak for themselves.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "STEP_ID": "a step id",
    "STRING": "a string",
    "TEXT_BLOCK": "a text block",
    "INT": "an integer",
    "DECIMAL": "a number",
    "DURATION": "a duration",
    "$END": "end of file",
}
_STEP_ITEM_KEYWORDS = [
    "shell",
    "script",
    "agent",
    "uses",
    "approval",
    "map",
    "route",
    "gate",
    "env",
    "inputs",
    "output",
]
# Sets of expected terminals that read better as one phrase.
_GROUPS = [
    (
        "a step item (a target, `map`, `route`, `gate`, `env`, `inputs`, `output` or a setting)",
        {"SHELL", "SCRIPT", "AGENT", "USES", "APPROVAL", "MAP", "ROUTE", "GATE", "ENV", "INPUTS", "OUTPUT", "NAME"},
    ),
    (
        "a workflow section (`description`, `params`, `outputs`, `limits`, `defaults`) or `step`",
        {"DESCRIPTION", "PARAMS", "OUTPUTS", "LIMITS", "DEFAULTS", "STEP"},
    ),
    ("a target (`shell`, `script`, `agent`, `uses`, `approval`)", {"SHELL", "SCRIPT", "AGENT", "USES", "APPROVAL"}),
    ("a value", {"STRING", "INT", "DECIMAL", "TRUE", "FALSE", "NULL", "LSQB", "LBRACE"}),
]
_BLOCK_KEYWORDS = {"PARAMS", "OUTPUTS", "LIMITS", "DEFAULTS", "ENV", "GATE", "MAP", "ROUTE"}


def explain(text: str, report: Report) -> bool:
    """Report the first syntax error of `text`, if it has one (False when Lark's parser accepts it)."""
    try:
        lark_parser().parse(text)
    except UnexpectedInput as error:
        _report_syntax_error(text, error, report)
        return True
    return False


def token_span(token: Token) -> Span:
    return Span(
        token.line or 1,
        token.column or 1,
        token.end_line or 1,
        token.end_column or 1,
        token.start_pos or 0,
        token.end_pos or 0,
    )


def _report_syntax_error(text: str, error: UnexpectedInput, report: Report) -> None:
    if isinstance(error, UnexpectedCharacters):
        offset = error.pos_in_stream or 0
        char = text[offset] if offset < len(text) else ""
        if char == '"':
            _report_unterminated(text, offset, report)
            return
        expected = _expected_words(set(error.allowed or ()), None)
        shown = repr(char)[1:-1] if not char.isprintable() else char
        if expected:
            report.add(messages.unexpected_character_expected(char=shown, expected=expected), point(text, offset))
        else:
            report.add(messages.unexpected_character(char=shown), point(text, offset))
        return
    if isinstance(error, UnexpectedToken):
        token = error.token
        stack = _value_stack(error)
        at_end = token.type == "$END"
        span = end_of_file(text) if at_end else token_span(token)
        found = "end of file" if at_end else _describe_token(token)
        expected = _expected_words(_acceptable(error), stack)
        help_text = None
        if stack and isinstance(stack[-1], Token) and stack[-1].type == "NAME" and error.expected == {"EQUAL"}:
            help_text = did_you_mean(str(stack[-1]), _STEP_ITEM_KEYWORDS)
        report.add(messages.unexpected_token(found=found, expected=expected), span, help=help_text)
        return
    report.add(messages.unexpected_end(), end_of_file(text))


def _report_unterminated(text: str, offset: int, report: Report) -> None:
    if text.startswith('"""', max(0, offset - 2)) and offset >= 2:
        start = offset - 2
        report.add(messages.unterminated_text_block(), point(text, start, 3))
        return
    line_end = text.find("\n", offset)
    width = (len(text) if line_end < 0 else line_end) - offset
    report.add(messages.unterminated_string(), point(text, offset, width))


def _acceptable(error: UnexpectedToken) -> set[str]:
    """What the parser would really accept here (LALR's lookahead sets over-approximate)."""
    interactive = getattr(error, "interactive_parser", None)
    if interactive is None:
        return set(error.expected)
    try:
        accepts: set[str] = interactive.accepts()
    except Exception:  # noqa: BLE001 - fall back to Lark's own set on any parser quirk
        return set(error.expected)
    return accepts or set(error.expected)


def _value_stack(error: UnexpectedToken) -> list[Any]:
    interactive = getattr(error, "interactive_parser", None)
    if interactive is None:
        return []
    return list(interactive.parser_state.value_stack)


def _describe_token(token: Token) -> str:
    if token.type in ("STRING", "TEXT_BLOCK"):
        value = str(token)
        shown = value if len(value) <= 30 else value[:27] + '..."'
        return f"string {shown}"
    if token.type in ("INT", "DECIMAL", "DURATION"):
        return f"number `{token}`"
    return f"`{token}`"


def _terminal_word(name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    for terminal in lark_parser().terminals:
        if terminal.name == name:
            pattern = terminal.pattern
            if pattern.type == "str":
                return f"`{pattern.value}`"
    return name.lower()


def _expected_words(expected: set[str], stack: list[Any] | None) -> str:
    closer = {"RBRACE": "}", "RSQB": "]", "RPAR": ")"}
    groups: list[str] = []
    for group, names in _GROUPS:
        if names <= expected:
            groups.append(group)
            expected = expected - names
    words = sorted({_terminal_word(n) for n in expected if n not in closer}) + groups
    closing = [c for n, c in closer.items() if n in expected]
    tail: list[str] = []
    for char in closing:
        opened = _open_block(stack or [], char)
        tail.append(f"`{char}`" + (f" to close {opened}" if opened else ""))
    words += tail
    if not words:
        return "nothing more"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _open_block(stack: list[Any], closer: str) -> str | None:
    """Describe the innermost unclosed bracket on the parser stack, e.g. `step \\`build\\` opened at 3:3`."""
    opener = {"}": "LBRACE", "]": "LSQB", ")": "LPAR"}[closer]
    for i in range(len(stack) - 1, -1, -1):
        item = stack[i]
        if isinstance(item, Token) and item.type == opener:
            before = [t for t in stack[max(0, i - 3) : i] if isinstance(t, Token)]
            return _name_block(before, item)
    return None


def _name_block(before: list[Token], bracket: Token) -> str:
    kinds = [t.type for t in before]
    where = f"opened at {bracket.line}:{bracket.column}"
    if len(before) >= 2 and kinds[-2:] == ["STEP", "STEP_ID"]:
        return f"step `{before[-1]}` opened at {before[-2].line}:{before[-2].column}"
    if len(before) >= 2 and kinds[-2:] == ["WORKFLOW", "STRING"]:
        return f"workflow {before[-1]} opened at {before[-2].line}:{before[-2].column}"
    if len(before) >= 2 and kinds[-2:] == ["USES", "STRING"]:
        return f"the bindings of `uses {before[-1]}` {where}"
    for token in reversed(before):
        if token.type in _BLOCK_KEYWORDS:
            return f"the `{token}` block opened at {token.line}:{token.column}"
    return f"the `{bracket}` {where}"
