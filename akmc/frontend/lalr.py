"""The parse loop: the grammar's contextual lexer and LALR(1) automaton over the shared tables,
building AST nodes at each reduction, with no parse tree and no per-token objects beyond a tuple.

Each call owns its stacks and results, so parses may run on any number of threads at once. The loop
only accepts: on the first character or token it cannot take it raises `Reject`, and Lark's own
parser then explains the error (see `akmc.syntax`)."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from akmc.frontend.tables import Tables
from akmc.spans import Span

Token = tuple[str, str, int, int]  # terminal, text, start and end offsets
Callback = Callable[[Any, Span, list[Any]], Any]  # (the builder, the rule's span, its kept children)
# What the loop needs of one rule to reduce by it: its size, its nonterminal, the children it keeps
# (`Rule.keep`, `Rule.trailing`) and its callback, None for an inlined rule.
Reduction = tuple[int, str, tuple[tuple[int, bool, int], ...] | None, int, Callback | None]
_NEWLINE = re.compile("\n")
# `Span(...)` without the Python-level `__new__` a NamedTuple calls: a parse makes a span per reduction.
_span: Callable[[tuple[int, int, int, int, int, int]], Span] = partial(tuple.__new__, Span)


class Reject(Exception):
    """The source is not in the language (or its first error is here); Lark's parser says why."""


class Lines:
    """Offsets to 1-based lines and columns, the way Lark counts them (a line ends at `\\n`)."""

    def __init__(self, text: str) -> None:
        self.breaks = [m.start() for m in _NEWLINE.finditer(text)]

    def span(self, start: int, end: int) -> Span:
        breaks = self.breaks
        line = bisect_left(breaks, start)
        end_line = bisect_left(breaks, end, line)
        column = start - breaks[line - 1] if line else start + 1
        end_column = end - breaks[end_line - 1] if end_line else end + 1
        return _span((line + 1, column, end_line + 1, end_column, start, end))


def point(text: str, offset: int, width: int = 1) -> Span:
    """The span of `width` characters at `offset` (clipped to the text; at least one column wide)."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    width = max(0, min(width, len(text) - offset))
    return Span(line, column, line, column + max(width, 1), offset, offset + width)


def end_of_file(text: str) -> Span:
    """The position just after the last non-blank character (1:1 for a blank file)."""
    return point(text, len(text.rstrip()), 0)


def reductions(tables: Tables, callbacks: Sequence[Callback | None]) -> tuple[Reduction, ...]:
    """Each rule of `tables` with its callback (by rule index), as `parse` reduces by it: made once
    and shared by every parse."""
    return tuple((r.size, r.origin, r.keep, r.trailing, c) for r, c in zip(tables.rules, callbacks, strict=True))


def parse(
    text: str,
    tables: Tables,
    reductions: Sequence[Reduction],
    builder: Any,
    span: Callable[[int, int], Span],
    comments: list[Token],  # every `#` comment is appended to it
) -> Any:
    """The `start` rule's value; a callback gets `builder`, the rule's span and its kept children."""
    actions, scanners = tables.actions, tables.scanners
    states = [tables.start]
    values: list[Any] = []
    bounds: list[tuple[int, int]] = []  # each value's source range; (-1, -1) for an empty inlined rule
    pos, size = 0, len(text)
    while True:
        if pos < size:
            scanner = scanners[states[-1]]
            match = (scanner.compiled or scanner.compile()).match(text, pos)
            if match is None:
                raise Reject
            kind = match.lastgroup or ""
            start, pos = match.span(kind)  # the pattern skips leading whitespace (see tables.Scanner)
            if kind == "COMMENT" or kind == "WS":
                if kind == "COMMENT":
                    comments.append((kind, match.group(kind), start, pos))
                continue
            value = match.group(kind)
            keywords = scanner.keywords.get(kind)
            if keywords is not None:
                kind = keywords.get(value, kind)
            token: Token = (kind, value, start, pos)
        else:
            token = kind, value, start, _ = ("$END", "", pos, pos)
        while True:  # reduce until the token shifts (or, at the end, until the start rule is complete)
            action = actions[states[-1]].get(kind)
            if action is None:
                raise Reject
            if action >= 0:  # shift
                if kind == "$END":
                    raise Reject
                states.append(action)
                values.append(token)
                bounds.append((start, pos))
                break
            count, origin, keep, trailing, callback = reductions[~action]
            if count:
                children = values[-count:]
                first, last = bounds[-count][0], bounds[-1][1]
                if first < 0 or last < 0:
                    first, last = _extent(bounds[-count:])
                del states[-count:], values[-count:], bounds[-count:]
            else:
                children, first, last = [], -1, -1
            if keep is not None:
                children = _kept(children, keep, trailing)
            values.append(children if callback is None else callback(builder, span(first, last), children))
            bounds.append((first, last))
            states.append(actions[states[-1]][origin])
            if kind == "$END" and states[-1] == tables.end:
                return values[-1]


def _extent(within: list[tuple[int, int]]) -> tuple[int, int]:
    """From the start of the first non-empty child to the end of the last (Lark's position propagation)."""
    first = last = -1
    for start, _ in within:
        if start >= 0:
            first = start
            break
    for _, end in reversed(within):
        if end >= 0:
            last = end
            break
    return first, last


def _kept(children: list[Any], keep: tuple[tuple[int, bool, int], ...], trailing: int) -> list[Any]:
    """The children a rule's callback sees: no anonymous tokens, inlined rules spliced in, and a
    None for each optional part that is absent (Lark's `maybe_placeholders`)."""
    kept: list[Any] = []
    for index, splice, nones in keep:
        if nones:
            kept += [None] * nones
        if splice:
            if kept:
                kept += children[index]
            else:  # left recursion (`a*`): extend the child's own list rather than copy it each time
                kept = children[index]
        else:
            kept.append(children[index])
    if trailing:
        kept += [None] * trailing
    return kept
