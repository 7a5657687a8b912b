"""Parse `.akm` text into the typed AST, turning every syntax problem into E100–E102.

A parse owns all of its state (`Parsed` holds the tree and the comments), so any number of files may
be parsed at once, on any threads. The grammar (`grammar/akm.lark`) defines the language; the parse
loop in `akmc.frontend` runs its tables and calls the rule methods below at each reduction."""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from akm_run import durations
from akm_run.planformat import MAX_INT
from akmc import ast, messages, spans
from akmc.diagnostics import Report
from akmc.frontend import lalr
from akmc.frontend.lalr import end_of_file as end_of_file
from akmc.frontend.lalr import point
from akmc.frontend.tables import tables
from akmc.messages import Message

_N = TypeVar("_N")
Token = lalr.Token
MAX_NESTING = 64
_MAX_DIGITS = 40  # longer integers and durations are out of range without being converted
_INT_FULL = re.compile(r"-?[0-9](?:_?[0-9])*")


class Parsed(NamedTuple):
    """One parse: the tree (None after the file's one syntax error) and every `#` comment with its span,
    in source order (suppressions and the formatter read them)."""

    workflow: ast.Workflow | None
    comments: list[tuple[str, ast.Span]]


def prepare() -> None:
    """Build the shared parse tables now (a parent process does this once before forking workers)."""
    _reductions()


@lru_cache(maxsize=1)
def _reductions() -> tuple[lalr.Reduction, ...]:
    """The grammar's rules, each with the builder's method for it (None: inlined), made once per process."""
    rules = tables().rules
    return lalr.reductions(tables(), [None if r.name is None else getattr(_Builder, r.name) for r in rules])


def parse_source(text: str, report: Report) -> Parsed:
    """Parse one file, reporting its problems into `report`: its one syntax error, or bad literals."""
    builder = _Builder(text, report)
    comments: list[Token] = []
    try:
        workflow: ast.Workflow = lalr.parse(text, tables(), _reductions(), builder, builder.lines.span, comments)
    except (lalr.Reject, _TooDeep) as problem:
        del report.diagnostics[:]
        from akmc.frontend.errors import explain  # late: Lark, about 50 ms: only a syntax error needs it

        if not explain(text, report):  # not a syntax error: the nesting guard stopped the parse
            where = problem.span if isinstance(problem, _TooDeep) else end_of_file(text)
            report.add(messages.nesting_too_deep(limit=MAX_NESTING), where)
        return Parsed(None, [])
    return Parsed(workflow, [(value, builder.lines.span(start, end)) for _, value, start, end in comments])


def parse(text: str, report: Report, comments: list[tuple[str, ast.Span]] | None = None) -> ast.Workflow | None:
    """Parse one file. Returns None after reporting the file's one syntax error.
    `comments` receives every `#` comment (text and span) when the file parses."""
    parsed = parse_source(text, report)
    if comments is not None:
        comments.extend(parsed.comments)
    return parsed.workflow


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
    raw = token[1]
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


def _escape_error(
    text: str, token: Token, report: Report, pattern: re.Pattern[str], width: int, message: Callable[..., Message]
) -> None:
    raw = token[1]
    bad = pattern.search(raw)
    offset = token[2] + (bad.start() if bad else 0)
    shown = bad.group(0) if bad else raw
    report.add(message(escape=shown), point(text, offset, width))


def dedent_block(raw: str) -> str:
    """A text block's value: drop the newline after the opening quotes, trailing
    whitespace before the closing ones, and the lines' common leading whitespace."""
    body = raw[3:-3]
    if body.startswith("\r\n"):
        body = body[2:]
    elif body.startswith("\n"):
        body = body[1:]
    return textwrap.dedent(body.rstrip())


class _Builder:
    """Builds AST nodes bottom-up, one rule method per grammar rule, called by the parse loop at each
    reduction with the rule's span and its kept children (tokens as `(terminal, text, start, end)`).
    One builder serves one parse: it holds that file's text, report, line table and nesting depths."""

    def __init__(self, text: str, report: Report) -> None:
        self.text = text
        self.report = report
        self.lines = lalr.Lines(text)
        self.depth: dict[int, tuple[Any, int]] = {}

    def _tspan(self, token: Token) -> ast.Span:
        return self.lines.span(token[2], token[3])

    # nesting guard: values and types are recursive, so bound them
    def _nest(self, node: _N, children: list[Any], span: ast.Span) -> _N:
        # The table holds the node itself so that its id cannot be reused while it is in use.
        depths, deepest = self.depth, 0
        for child in children:
            found = depths.get(id(child))
            if found is not None and found[1] > deepest:
                deepest = found[1]
        if deepest >= MAX_NESTING:
            raise _TooDeep(span)
        depths[id(node)] = (node, deepest + 1)
        return node

    def _ident(self, token: Token) -> ast.Ident:
        return ast.Ident(token[1], self.lines.span(token[2], token[3]))

    def _strlit(self, token: Token) -> ast.StrLit:
        return ast.StrLit(_str(self.text, token, self.report), self._tspan(token))

    # -- top level
    def start(self, span: ast.Span, children: list[Any]) -> ast.Workflow:
        title = self._strlit(children[0])
        sections = [c for c in children[1:] if isinstance(c, ast.Section)]
        steps = [c for c in children[1:] if isinstance(c, ast.Step)]
        return ast.Workflow(title, sections, steps, span)

    def _section(self, kind: str, span: ast.Span, **parts: Any) -> ast.Section:
        keyword = spans.keyword(span, kind)
        return ast.Section(kind, span, keyword, **parts)

    def description(self, span: ast.Span, c: list[Any]) -> ast.Section:
        return self._section("description", span, description=c[0])

    def params(self, span: ast.Span, c: list[Any]) -> ast.Section:
        return self._section("params", span, params=c)

    def outputs(self, span: ast.Span, c: list[Any]) -> ast.Section:
        return self._section("outputs", span, outputs=c)

    def limits(self, span: ast.Span, c: list[Any]) -> ast.Section:
        return self._section("limits", span, settings=c)

    def defaults(self, span: ast.Span, c: list[Any]) -> ast.Section:
        return self._section("defaults", span, settings=c)

    def notify(self, span: ast.Span, c: list[Any]) -> ast.Section:
        targets = [x for x in c if isinstance(x, ast.Target)]
        return self._section("notify", span, settings=[x for x in c if not isinstance(x, ast.Target)], targets=targets)

    def param(self, span: ast.Span, c: list[Any]) -> ast.Param:
        name, type_, default, desc = c
        return ast.Param(self._ident(name), type_, default, self._strlit(desc) if desc is not None else None, span)

    def output_decl(self, span: ast.Span, c: list[Any]) -> ast.OutputDecl:
        return ast.OutputDecl(self._ident(c[0]), c[1], c[2], span)

    # -- steps
    def step(self, span: ast.Span, c: list[Any]) -> ast.Step:
        return ast.Step(self._ident(c[0]), c[1:], span)

    def parallel(self, span: ast.Span, c: list[Any]) -> ast.Step:
        settings: list[ast.StepItem] = [x for x in c[1:] if isinstance(x, ast.Setting)]
        return ast.Step(self._ident(c[0]), settings, span, [x for x in c[1:] if isinstance(x, ast.Step)])

    def _target(self, kind: str, span: ast.Span, **parts: Any) -> ast.Target:
        keyword = spans.keyword(span, kind)
        return ast.Target(kind, span, keyword, **parts)

    def shell(self, span: ast.Span, c: list[Any]) -> ast.Target:
        return self._target("shell", span, text=c[0])

    def agent(self, span: ast.Span, c: list[Any]) -> ast.Target:
        return self._target("agent", span, text=c[0])

    def approval(self, span: ast.Span, c: list[Any]) -> ast.Target:
        return self._target("approval", span, text=c[0])

    def script(self, span: ast.Span, c: list[Any]) -> ast.Target:
        return self._target("script", span, path=self._strlit(c[0]))

    def uses(self, span: ast.Span, c: list[Any]) -> ast.Target:
        return self._target("uses", span, path=self._strlit(c[0]), bindings=c[1])

    def bindings(self, span: ast.Span, c: list[Any]) -> list[ast.Binding]:
        return c

    def binding(self, span: ast.Span, c: list[Any]) -> ast.Binding:
        return ast.Binding(self._ident(c[0]), c[1], span)

    def map_block(self, span: ast.Span, c: list[Any]) -> ast.MapBlock:
        return ast.MapBlock(c[0], c[1:], span)

    def route_block(self, span: ast.Span, c: list[Any]) -> ast.RouteBlock:
        return ast.RouteBlock(c[0], c[1:], span)

    def route_case(self, span: ast.Span, c: list[Any]) -> ast.RouteCase:
        match = None if isinstance(c[0], tuple) and c[0][0] == "WILDCARD" else c[0]
        return ast.RouteCase(match, self._ident(c[1]), span)

    def gate(self, span: ast.Span, c: list[Any]) -> ast.Gate:
        return ast.Gate(c, span)

    def gate_check(self, span: ast.Span, c: list[Any]) -> ast.GateCheck:
        return ast.GateCheck(c[0], span)

    def env(self, span: ast.Span, c: list[Any]) -> ast.Env:
        return ast.Env(c, span)

    def env_entry(self, span: ast.Span, c: list[Any]) -> ast.EnvEntry:
        name, value = c
        if value[0] == "STRING":
            return ast.EnvEntry(
                self._ident(name), "literal", _str(self.text, value, self.report), span, self._tspan(value)
            )
        kind, secret, value_span = value
        return ast.EnvEntry(self._ident(name), kind, secret, span, value_span)

    def env_secret(self, span: ast.Span, c: list[Any]) -> tuple[str, str, ast.Span]:
        return ("secret", _str(self.text, c[0], self.report), span)

    def env_passthrough(self, span: ast.Span, c: list[Any]) -> tuple[str, None, ast.Span]:
        return ("passthrough", None, span)

    def inputs(self, span: ast.Span, c: list[Any]) -> ast.Inputs:
        return ast.Inputs([r for r in c if r is not None], span)

    def output_type(self, span: ast.Span, c: list[Any]) -> ast.OutputType:
        return ast.OutputType(c[0], span)

    # -- settings
    def setting(self, span: ast.Span, c: list[Any]) -> ast.Setting:
        return ast.Setting(self._ident(c[0]), c[1], span)

    def duration(self, span: ast.Span, c: list[Any]) -> ast.Duration:
        token = c[0]
        raw = token[1]
        ms = -1  # invalid, already reported: later stages skip it silently
        if len(raw) > _MAX_DIGITS:
            self.report.add(messages.duration_out_of_range(duration=raw[:20] + "…"), self._tspan(token))
            return ast.Duration(ms, raw, span)
        parsed = durations.parse(raw)
        if parsed is None:
            self.report.add(messages.invalid_duration(duration=raw), self._tspan(token))
        elif parsed > MAX_INT:
            self.report.add(messages.duration_out_of_range(duration=raw), self._tspan(token))
        else:
            ms = parsed
        return ast.Duration(ms, raw, span)

    def word(self, span: ast.Span, c: list[Any]) -> ast.Word:
        return ast.Word(c[0][1], span)

    def slist(self, span: ast.Span, c: list[Any]) -> ast.ListValue:
        items = [x for x in c if x is not None]
        return self._nest(ast.ListValue(items, span), items, span)

    def sobject(self, span: ast.Span, c: list[Any]) -> ast.ObjectValue:
        entries = [x for x in c if x is not None]
        return self._nest(ast.ObjectValue(entries, span), [v for _, v in entries], span)

    def sentry(self, span: ast.Span, c: list[Any]) -> tuple[ast.Ident, ast.Value]:
        return (self._ident(c[0]), c[1])

    entry = sentry

    # -- text and references
    def text_string(self, span: ast.Span, c: list[Any]) -> ast.Text:
        return ast.Text("string", _str(self.text, c[0], self.report), span)

    def text_block(self, span: ast.Span, c: list[Any]) -> ast.Text:
        return ast.Text("block", dedent_block(c[0][1]), span)

    def text_file(self, span: ast.Span, c: list[Any]) -> ast.Text:
        return ast.Text("file", _str(self.text, c[0], self.report), span)

    def param_ref(self, span: ast.Span, c: list[Any]) -> ast.Reference:
        return ast.Reference("params", self._ident(c[0]), [], span)

    def step_ref(self, span: ast.Span, c: list[Any]) -> ast.Reference:
        return ast.Reference("steps", self._ident(c[0]), c[1:], span)

    def item_ref(self, span: ast.Span, c: list[Any]) -> ast.Reference:
        name = ast.Ident("item", spans.keyword(span, "item"))
        return ast.Reference("item", name, c, span)

    def field_segment(self, span: ast.Span, c: list[Any]) -> ast.Segment:
        return ast.Segment(c[0][1], None, span)

    def index_segment(self, span: ast.Span, c: list[Any]) -> ast.Segment:
        index = self._int(c[0])
        return ast.Segment(None, 0 if index is None else index, span)  # an invalid index was reported

    # -- values
    def value(self, span: ast.Span, c: list[Any]) -> ast.Value:
        value: ast.Value = c[0]
        return value

    def list_value(self, span: ast.Span, c: list[Any]) -> ast.ListValue:
        return self.slist(span, c)

    def object_value(self, span: ast.Span, c: list[Any]) -> ast.ObjectValue:
        return self.sobject(span, c)

    def _int(self, token: Token) -> int | None:
        """The integer a token spells, or None once E102 said why it is none."""
        raw = token[1]
        if not _INT_FULL.fullmatch(raw):
            self.report.add(messages.invalid_integer(integer=raw), self._tspan(token))
            return None
        digits = raw.replace("_", "").lstrip("-")
        # int() refuses more than a few thousand digits; anything past 16 is out of range anyway
        value = int(raw.replace("_", "")) if len(digits) <= _MAX_DIGITS else MAX_INT + 1
        if abs(value) > MAX_INT:
            shown = raw if len(raw) <= 40 else raw[:20] + "…"
            self.report.add(messages.integer_out_of_range(integer=shown), self._tspan(token))
            return None
        return value

    def string_literal(self, span: ast.Span, c: list[Any]) -> ast.Literal:
        return ast.Literal(_str(self.text, c[0], self.report), span)

    def int_literal(self, span: ast.Span, c: list[Any]) -> ast.Literal:
        value = self._int(c[0])
        return ast.Literal(0, span, invalid=True) if value is None else ast.Literal(value, span)

    def number_literal(self, span: ast.Span, c: list[Any]) -> ast.Literal:
        raw = c[0][1]
        try:
            number = float(raw.replace("_", ""))
            if "__" in raw or raw.endswith("_") or number in (float("inf"), float("-inf")):
                raise ValueError(raw)
        except ValueError:
            self.report.add(messages.invalid_number(number=raw), self._tspan(c[0]))
            return ast.Literal(0.0, span, invalid=True)
        return ast.Literal(number, span)

    def true_literal(self, span: ast.Span, c: list[Any]) -> ast.Literal:
        return ast.Literal(True, span)

    def false_literal(self, span: ast.Span, c: list[Any]) -> ast.Literal:
        return ast.Literal(False, span)

    def null_literal(self, span: ast.Span, c: list[Any]) -> ast.Literal:
        return ast.Literal(None, span)

    # -- types
    def type(self, span: ast.Span, c: list[Any]) -> ast.TypeExpr:
        if len(c) == 1:
            only: ast.TypeExpr = c[0]
            return only
        return self._nest(ast.UnionType(c, span), c, span)

    def named_type(self, span: ast.Span, c: list[Any]) -> ast.NamedType:
        name, arg, refinements = c
        node = ast.NamedType(self._ident(name), arg, refinements or [], span)
        return self._nest(node, [arg] if arg is not None else [], span)

    def object_type(self, span: ast.Span, c: list[Any]) -> ast.ObjectType:
        fields = [f for f in c if f is not None]
        return self._nest(ast.ObjectType(fields, span), [f.type for f in fields], span)

    def literal_type(self, span: ast.Span, c: list[Any]) -> ast.LiteralType:
        return ast.LiteralType(c[0], span)

    def field(self, span: ast.Span, c: list[Any]) -> ast.FieldDecl:
        return ast.FieldDecl(self._ident(c[0]), c[1] is not None, c[2], span)

    def refinements(self, span: ast.Span, c: list[Any]) -> list[ast.Refinement]:
        return [r for r in c if r is not None]

    def refinement(self, span: ast.Span, c: list[Any]) -> ast.Refinement:
        return ast.Refinement(self._ident(c[0]), c[1], span)
