"""Parse `.akm` text into the typed AST, turning every syntax problem into E100–E102."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.visitors import Transformer_NonRecursive

from akmc import ast, messages
from akmc.diagnostics import Report, did_you_mean
from akmc.messages import Message
from akmc.resources import data_path

_N = TypeVar("_N")
MAX_INT = 2**53 - 1
MAX_NESTING = 64
_MAX_DIGITS = 40  # longer integers and durations are out of range without being converted
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h)")
_DURATION_FULL = re.compile(r"(?:[0-9]+(?:ms|s|m|h))+")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_INT_FULL = re.compile(r"-?[0-9](?:_?[0-9])*")

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
    "shell", "script", "agent", "uses", "approval", "map", "route", "gate", "env",
    "inputs", "output",
]  # fmt: skip
# Sets of expected terminals that read better as one phrase.
_GROUPS = [
    ("a step item (a target, `map`, `route`, `gate`, `env`, `inputs`, `output` or a setting)",
     {"SHELL", "SCRIPT", "AGENT", "USES", "APPROVAL", "MAP", "ROUTE", "GATE", "ENV", "INPUTS", "OUTPUT", "NAME"}),
    ("a workflow section (`description`, `params`, `outputs`, `limits`, `defaults`) or `step`",
     {"DESCRIPTION", "PARAMS", "OUTPUTS", "LIMITS", "DEFAULTS", "STEP"}),
    ("a target (`shell`, `script`, `agent`, `uses`, `approval`)", {"SHELL", "SCRIPT", "AGENT", "USES", "APPROVAL"}),
    ("a value", {"STRING", "INT", "DECIMAL", "TRUE", "FALSE", "NULL", "LSQB", "LBRACE"}),
]  # fmt: skip
_BLOCK_KEYWORDS = {"PARAMS", "OUTPUTS", "LIMITS", "DEFAULTS", "ENV", "GATE", "MAP", "ROUTE"}


_COMMENTS: list[Token] = []  # filled by the lexer while one file parses (see parse)


@lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser, built once per process (its analysis is cached on disk by Lark).

    The tree builder is non-recursive, so deep nesting cannot exhaust the stack
    before the nesting guard reports it.
    """
    return Lark(
        data_path("grammar", "akm.lark").read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,
        lexer_callbacks={"COMMENT": _COMMENTS.append},
    )


def parse(text: str, report: Report, comments: list[tuple[str, ast.Span]] | None = None) -> ast.Workflow | None:
    """Parse one file. Returns None after reporting the file's one syntax error.
    `comments` receives every `#` comment (text and span) when the file parses."""
    _BUILDER.reset(text, report)
    _COMMENTS.clear()
    try:
        workflow: ast.Workflow = _BUILDER.transform(parser().parse(text))
    except UnexpectedInput as error:
        del report.diagnostics[:]
        _report_syntax_error(text, error, report)
        return None
    except _TooDeep as too_deep:
        del report.diagnostics[:]
        report.add(messages.nesting_too_deep(limit=MAX_NESTING), too_deep.span)
        return None
    finally:
        _BUILDER.reset("", Report(""))
    if comments is not None:
        comments.extend((token.value, _tspan(token)) for token in _COMMENTS)
    _COMMENTS.clear()
    return workflow


# -- spans ------------------------------------------------------------------------


def _span(meta: Any) -> ast.Span:
    return ast.Span(meta.line, meta.column, meta.end_line, meta.end_column, meta.start_pos, meta.end_pos)


def _tspan(token: Token) -> ast.Span:
    return ast.Span(
        token.line or 1,
        token.column or 1,
        token.end_line or 1,
        token.end_column or 1,
        token.start_pos or 0,
        token.end_pos or 0,
    )


def _point(text: str, offset: int, width: int = 1) -> ast.Span:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    width = max(0, min(width, len(text) - offset))
    return ast.Span(line, column, line, column + max(width, 1), offset, offset + width)


def end_of_file(text: str) -> ast.Span:
    """The position just after the last non-blank character (1:1 for a blank file)."""
    return _point(text, len(text.rstrip()), 0)


# -- syntax errors ------------------------------------------------------------------


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
            report.add(messages.unexpected_character_expected(char=shown, expected=expected), _point(text, offset))
        else:
            report.add(messages.unexpected_character(char=shown), _point(text, offset))
        return
    if isinstance(error, UnexpectedToken):
        token = error.token
        stack = _value_stack(error)
        at_end = token.type == "$END"
        span = end_of_file(text) if at_end else _tspan(token)
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
        report.add(messages.unterminated_text_block(), _point(text, start, 3))
        return
    line_end = text.find("\n", offset)
    width = (len(text) if line_end < 0 else line_end) - offset
    report.add(messages.unterminated_string(), _point(text, offset, width))


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
    for terminal in parser().terminals:
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


# -- the tree builder ------------------------------------------------------------------


class _TooDeep(Exception):
    def __init__(self, span: ast.Span) -> None:
        self.span = span


_STRING = json.JSONDecoder(strict=False)  # one decoder: json.loads(strict=False) builds one per call


_BAD_ESCAPE = re.compile(r'\\(?:u(?![0-9a-fA-F]{4})|[^"\\/bfnrtu])')
_LONE_SURROGATE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _str(text: str, token: Token, report: Report) -> str:
    """Decode a STRING token's JSON escapes, reporting a bad escape or a lone surrogate as E101."""
    raw = str(token)
    if "\\" not in raw:
        return raw[1:-1]  # nothing to decode (the lexer guarantees the quotes)
    try:
        value: str = _STRING.decode(raw)
        value.encode("utf-8")  # a lone surrogate escape decodes, but is not text
        return value
    except UnicodeEncodeError:
        _escape_error(text, token, report, _LONE_SURROGATE, 6, messages.lone_surrogate)
    except ValueError:
        _escape_error(text, token, report, _BAD_ESCAPE, 2, messages.invalid_escape)
    return raw[1:-1]


def _escape_error(text: str, token: Token, report: Report, pattern: re.Pattern[str], width: int,
                  message: Callable[..., Message]) -> None:  # fmt: skip
    raw = str(token)
    bad = pattern.search(raw)
    offset = (token.start_pos or 0) + (bad.start() if bad else 0)
    shown = bad.group(0) if bad else raw
    report.add(message(escape=shown), _point(text, offset, width))


def dedent_block(raw: str) -> str:
    """A text block's value: drop the newline after the opening quotes, trailing
    whitespace before the closing ones, and the lines' common leading whitespace."""
    body = raw[3:-3]
    if body.startswith("\r\n"):
        body = body[2:]
    elif body.startswith("\n"):
        body = body[1:]
    return textwrap.dedent(body.rstrip())


class _Builder(Transformer_NonRecursive[Token, Any]):
    """Builds AST nodes bottom-up from the parse tree; `reset` points it at the next file.

    Each rule method takes `(meta, children)`. They are called directly (see `_call_userfunc`)
    rather than through `v_args(meta=True)`, whose wrapper is rebuilt on every call and cost
    about 2.8 ms of a 108-line file; an error raised by a rule method propagates unwrapped."""

    __visit_tokens__ = False  # no terminal callbacks: tokens pass through untouched

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self._rules: dict[str, Any] = {}
        self.reset("", Report(""))

    def _call_userfunc(self, tree: Any, new_children: list[Any] | None = None) -> Any:
        children = new_children if new_children is not None else tree.children
        rule = self._rules.get(tree.data)
        if rule is None:  # every grammar rule that survives into the tree has a method here
            rule = self._rules[tree.data] = getattr(self, tree.data)
        return rule(tree.meta, children)

    def reset(self, text: str, report: Report) -> None:
        self.text = text
        self.report = report
        self.depth: dict[int, tuple[Any, int]] = {}

    # nesting guard: values and types are recursive, so bound them
    def _nest(self, node: _N, children: list[Any], span: ast.Span) -> _N:
        # The table holds the node itself so that its id cannot be reused while it is in use.
        depth = 1 + max((self.depth[id(c)][1] for c in children if id(c) in self.depth), default=0)
        if depth > MAX_NESTING:
            raise _TooDeep(span)
        self.depth[id(node)] = (node, depth)
        return node

    def _ident(self, token: Token) -> ast.Ident:
        return ast.Ident(str(token), _tspan(token))

    def _strlit(self, token: Token) -> ast.StrLit:
        return ast.StrLit(_str(self.text, token, self.report), _tspan(token))

    # -- top level
    def start(self, meta: Any, children: list[Any]) -> ast.Workflow:
        title = self._strlit(children[0])
        sections = [c for c in children[1:] if isinstance(c, ast.Section)]
        steps = [c for c in children[1:] if isinstance(c, ast.Step)]
        return ast.Workflow(title, sections, steps, _span(meta))

    def _section(self, kind: str, meta: Any, **parts: Any) -> ast.Section:
        span = _span(meta)
        keyword = ast.Span(
            span.line, span.column, span.line, span.column + len(kind), span.start, span.start + len(kind)
        )
        return ast.Section(kind, span, keyword, **parts)

    def description(self, meta: Any, c: list[Any]) -> ast.Section:
        return self._section("description", meta, description=c[0])

    def params(self, meta: Any, c: list[Any]) -> ast.Section:
        return self._section("params", meta, params=c)

    def outputs(self, meta: Any, c: list[Any]) -> ast.Section:
        return self._section("outputs", meta, outputs=c)

    def limits(self, meta: Any, c: list[Any]) -> ast.Section:
        return self._section("limits", meta, settings=c)

    def defaults(self, meta: Any, c: list[Any]) -> ast.Section:
        return self._section("defaults", meta, settings=c)

    def param(self, meta: Any, c: list[Any]) -> ast.Param:
        name, type_, default, desc = c
        return ast.Param(
            self._ident(name), type_, default, self._strlit(desc) if desc is not None else None, _span(meta)
        )

    def output_decl(self, meta: Any, c: list[Any]) -> ast.OutputDecl:
        return ast.OutputDecl(self._ident(c[0]), c[1], c[2], _span(meta))

    # -- steps
    def step(self, meta: Any, c: list[Any]) -> ast.Step:
        return ast.Step(self._ident(c[0]), c[1:], _span(meta))

    def _target(self, kind: str, meta: Any, **parts: Any) -> ast.Target:
        span = _span(meta)
        keyword = ast.Span(
            span.line, span.column, span.line, span.column + len(kind), span.start, span.start + len(kind)
        )
        return ast.Target(kind, span, keyword, **parts)

    def shell(self, meta: Any, c: list[Any]) -> ast.Target:
        return self._target("shell", meta, text=c[0])

    def agent(self, meta: Any, c: list[Any]) -> ast.Target:
        return self._target("agent", meta, text=c[0])

    def approval(self, meta: Any, c: list[Any]) -> ast.Target:
        return self._target("approval", meta, text=c[0])

    def script(self, meta: Any, c: list[Any]) -> ast.Target:
        return self._target("script", meta, path=self._strlit(c[0]))

    def uses(self, meta: Any, c: list[Any]) -> ast.Target:
        return self._target("uses", meta, path=self._strlit(c[0]), bindings=c[1])

    def bindings(self, meta: Any, c: list[Any]) -> list[ast.Binding]:
        return c

    def binding(self, meta: Any, c: list[Any]) -> ast.Binding:
        return ast.Binding(self._ident(c[0]), c[1], _span(meta))

    def map_block(self, meta: Any, c: list[Any]) -> ast.MapBlock:
        return ast.MapBlock(c[0], c[1:], _span(meta))

    def route_block(self, meta: Any, c: list[Any]) -> ast.RouteBlock:
        return ast.RouteBlock(c[0], c[1:], _span(meta))

    def route_case(self, meta: Any, c: list[Any]) -> ast.RouteCase:
        match = None if isinstance(c[0], Token) and c[0].type == "WILDCARD" else c[0]
        return ast.RouteCase(match, self._ident(c[1]), _span(meta))

    def gate(self, meta: Any, c: list[Any]) -> ast.Gate:
        return ast.Gate(c, _span(meta))

    def gate_check(self, meta: Any, c: list[Any]) -> ast.GateCheck:
        return ast.GateCheck(c[0], _span(meta))

    def env(self, meta: Any, c: list[Any]) -> ast.Env:
        return ast.Env(c, _span(meta))

    def env_entry(self, meta: Any, c: list[Any]) -> ast.EnvEntry:
        name, value = c
        if isinstance(value, Token):
            return ast.EnvEntry(
                self._ident(name), "literal", _str(self.text, value, self.report), _span(meta), _tspan(value)
            )
        kind, secret, span = value
        return ast.EnvEntry(self._ident(name), kind, secret, _span(meta), span)

    def env_secret(self, meta: Any, c: list[Any]) -> tuple[str, str, ast.Span]:
        return ("secret", _str(self.text, c[0], self.report), _span(meta))

    def env_passthrough(self, meta: Any, c: list[Any]) -> tuple[str, None, ast.Span]:
        return ("passthrough", None, _span(meta))

    def inputs(self, meta: Any, c: list[Any]) -> ast.Inputs:
        return ast.Inputs([r for r in c if r is not None], _span(meta))

    def output_type(self, meta: Any, c: list[Any]) -> ast.OutputType:
        return ast.OutputType(c[0], _span(meta))

    # -- settings
    def setting(self, meta: Any, c: list[Any]) -> ast.Setting:
        return ast.Setting(self._ident(c[0]), c[1], _span(meta))

    def duration(self, meta: Any, c: list[Any]) -> ast.Duration:
        token = c[0]
        raw = str(token)
        ms = -1  # invalid, already reported: later stages skip it silently
        if len(raw) > _MAX_DIGITS:
            self.report.add(messages.duration_out_of_range(duration=raw[:20] + "…"), _tspan(token))
            return ast.Duration(ms, raw, _span(meta))
        if _DURATION_FULL.fullmatch(raw):
            ms = sum(int(n) * _UNIT_MS[u] for n, u in _DURATION_PART.findall(raw))
        else:
            self.report.add(messages.invalid_duration(duration=raw), _tspan(token))
        if ms > MAX_INT:
            self.report.add(messages.duration_out_of_range(duration=raw), _tspan(token))
            ms = -1
        return ast.Duration(ms, raw, _span(meta))

    def word(self, meta: Any, c: list[Any]) -> ast.Word:
        return ast.Word(str(c[0]), _span(meta))

    def slist(self, meta: Any, c: list[Any]) -> ast.ListValue:
        items = [x for x in c if x is not None]
        return self._nest(ast.ListValue(items, _span(meta)), items, _span(meta))

    def sobject(self, meta: Any, c: list[Any]) -> ast.ObjectValue:
        entries = [x for x in c if x is not None]
        return self._nest(ast.ObjectValue(entries, _span(meta)), [v for _, v in entries], _span(meta))

    def sentry(self, meta: Any, c: list[Any]) -> tuple[ast.Ident, ast.Value]:
        return (self._ident(c[0]), c[1])

    entry = sentry

    # -- text and references
    def text_string(self, meta: Any, c: list[Any]) -> ast.Text:
        return ast.Text("string", _str(self.text, c[0], self.report), _span(meta))

    def text_block(self, meta: Any, c: list[Any]) -> ast.Text:
        return ast.Text("block", dedent_block(str(c[0])), _span(meta))

    def text_file(self, meta: Any, c: list[Any]) -> ast.Text:
        return ast.Text("file", _str(self.text, c[0], self.report), _span(meta))

    def param_ref(self, meta: Any, c: list[Any]) -> ast.Reference:
        return ast.Reference("params", self._ident(c[0]), [], _span(meta))

    def step_ref(self, meta: Any, c: list[Any]) -> ast.Reference:
        return ast.Reference("steps", self._ident(c[0]), c[1:], _span(meta))

    def item_ref(self, meta: Any, c: list[Any]) -> ast.Reference:
        span = _span(meta)
        name = ast.Ident(
            "item", ast.Span(span.line, span.column, span.line, span.column + 4, span.start, span.start + 4)
        )
        return ast.Reference("item", name, c, span)

    def field_segment(self, meta: Any, c: list[Any]) -> ast.Segment:
        return ast.Segment(str(c[0]), None, _span(meta))

    def index_segment(self, meta: Any, c: list[Any]) -> ast.Segment:
        return ast.Segment(None, self._int(c[0]), _span(meta))

    # -- values
    def value(self, meta: Any, c: list[Any]) -> ast.Value:
        value: ast.Value = c[0]
        return value

    def list_value(self, meta: Any, c: list[Any]) -> ast.ListValue:
        return self.slist(meta, c)

    def object_value(self, meta: Any, c: list[Any]) -> ast.ObjectValue:
        return self.sobject(meta, c)

    def _int(self, token: Token) -> int:
        raw = str(token)
        if not _INT_FULL.fullmatch(raw):
            self.report.add(messages.invalid_integer(integer=raw), _tspan(token))
            return 0
        digits = raw.replace("_", "").lstrip("-")
        # int() refuses more than a few thousand digits; anything past 16 is out of range anyway
        value = int(raw.replace("_", "")) if len(digits) <= _MAX_DIGITS else MAX_INT + 1
        if abs(value) > MAX_INT:
            shown = raw if len(raw) <= 40 else raw[:20] + "…"
            self.report.add(messages.integer_out_of_range(integer=shown), _tspan(token))
            return 0
        return value

    def string_literal(self, meta: Any, c: list[Any]) -> ast.Literal:
        return ast.Literal(_str(self.text, c[0], self.report), _span(meta))

    def int_literal(self, meta: Any, c: list[Any]) -> ast.Literal:
        return ast.Literal(self._int(c[0]), _span(meta))

    def number_literal(self, meta: Any, c: list[Any]) -> ast.Literal:
        raw = str(c[0])
        try:
            number = float(raw.replace("_", ""))
            if "__" in raw or raw.endswith("_") or number in (float("inf"), float("-inf")):
                raise ValueError(raw)
        except ValueError:
            self.report.add(messages.invalid_number(number=raw), _tspan(c[0]))
            number = 0.0
        return ast.Literal(number, _span(meta))

    def true_literal(self, meta: Any, c: list[Any]) -> ast.Literal:
        return ast.Literal(True, _span(meta))

    def false_literal(self, meta: Any, c: list[Any]) -> ast.Literal:
        return ast.Literal(False, _span(meta))

    def null_literal(self, meta: Any, c: list[Any]) -> ast.Literal:
        return ast.Literal(None, _span(meta))

    # -- types
    def type(self, meta: Any, c: list[Any]) -> ast.TypeExpr:
        if len(c) == 1:
            only: ast.TypeExpr = c[0]
            return only
        return self._nest(ast.UnionType(c, _span(meta)), c, _span(meta))

    def named_type(self, meta: Any, c: list[Any]) -> ast.NamedType:
        name, arg, refinements = c
        node = ast.NamedType(self._ident(name), arg, refinements or [], _span(meta))
        return self._nest(node, [arg] if arg is not None else [], _span(meta))

    def object_type(self, meta: Any, c: list[Any]) -> ast.ObjectType:
        fields = [f for f in c if f is not None]
        return self._nest(ast.ObjectType(fields, _span(meta)), [f.type for f in fields], _span(meta))

    def literal_type(self, meta: Any, c: list[Any]) -> ast.LiteralType:
        return ast.LiteralType(c[0], _span(meta))

    def field(self, meta: Any, c: list[Any]) -> ast.FieldDecl:
        return ast.FieldDecl(self._ident(c[0]), c[1] is not None, c[2], _span(meta))

    def refinements(self, meta: Any, c: list[Any]) -> list[ast.Refinement]:
        return [r for r in c if r is not None]

    def refinement(self, meta: Any, c: list[Any]) -> ast.Refinement:
        return ast.Refinement(self._ident(c[0]), c[1], _span(meta))


_BUILDER = _Builder()
