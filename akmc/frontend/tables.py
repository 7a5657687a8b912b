"""The grammar's LALR tables and per-state lexer patterns, derived once per process from Lark's
analysis of `grammar/akm.lark` into the plain shapes the parse loop reads.

The grammar stays the one definition of the language: every pattern, keyword and action here is
Lark's own (its contextual lexer's per-state scanners and its LALR(1) table), only read into
tuples and dicts. The tables are immutable once built and shared by every parse, on any thread."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from lark import Lark
from lark.lexer import PatternStr, UnlessCallback
from lark.parsers.lalr_analysis import Shift

from akmc.resources import data_path


class Rule(NamedTuple):
    """One grammar rule as a reduction: pop `size` values, keep some, hand them to `name`."""

    size: int
    origin: str  # the nonterminal it reduces to (the goto's key)
    name: str | None  # the builder's method; None for an inlined rule (`_x`), spliced into its parent
    # (index, splice, placeholders before it) per kept child; None when every child is kept as is
    keep: tuple[tuple[int, bool, int], ...] | None
    trailing: int  # placeholders after the last kept child


class Scanner(NamedTuple):
    """What one parser state lets the lexer read: one alternation of the allowed terminals, and for a
    pattern terminal (NAME) the keywords it must become when it spells one (Lark's `UnlessCallback`)."""

    pattern: re.Pattern[str]
    keywords: Mapping[str, Mapping[str, str]]


class Tables(NamedTuple):
    actions: tuple[Mapping[str, tuple[bool, int]], ...]  # state → terminal/nonterminal → (shift?, state or rule)
    rules: tuple[Rule, ...]
    scanners: tuple[Scanner, ...]  # by state
    ignore: frozenset[str]
    start: int
    end: int


@lru_cache(maxsize=1)
def lark_parser() -> Lark:
    """Lark's parser for the grammar (its analysis is cached on disk by Lark). It defines the tables,
    and explains a syntax error when the fast parse loop meets one."""
    return Lark(
        data_path("grammar", "akm.lark").read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        cache=True,
    )


@lru_cache(maxsize=1)
def tables() -> Tables:
    """The shared tables, built once per process."""
    lark = lark_parser()
    frontend: Any = lark.parser
    table = frontend.parser.parser.parse_table
    rules = tuple(lark.rules)
    index = {rule: i for i, rule in enumerate(rules)}
    count = max(table.states) + 1
    actions: list[dict[str, tuple[bool, int]]] = [{} for _ in range(count)]
    for state, row in table.states.items():
        for symbol, (action, arg) in row.items():
            actions[state][symbol] = (True, arg) if action is Shift else (False, index[arg])
    by_lexer: dict[int, Scanner] = {}
    scanners = []
    for state in range(count):
        lexer = frontend.lexer.lexers[state]
        if id(lexer) not in by_lexer:
            by_lexer[id(lexer)] = _scanner(lexer)
        scanners.append(by_lexer[id(lexer)])
    return Tables(
        tuple(actions),
        tuple(_rule(rule) for rule in rules),
        tuple(scanners),
        frozenset(lark.lexer_conf.ignore),
        table.start_states["start"],
        table.end_states["start"],
    )


def _scanner(lexer: Any) -> Scanner:
    scanner = lexer.scanner  # built lazily by Lark
    if len(scanner._mres) != 1:  # Python's `re` limits groups; this grammar stays far below
        raise RuntimeError("the grammar's terminals no longer fit one regular expression per lexer state")
    keywords: dict[str, dict[str, str]] = {}
    for name, callback in lexer.callback.items():
        if isinstance(callback, UnlessCallback):
            strings = callback.scanner.terminals
            assert all(isinstance(t.pattern, PatternStr) and not t.pattern.flags for t in strings)
            keywords[name] = {t.pattern.value: t.name for t in strings}
    return Scanner(scanner._mres[0], keywords)


def _rule(rule: Any) -> Rule:
    """Lark's child filter for one rule (`maybe_create_child_filter` with placeholders, for LALR)."""
    expansion = rule.expansion
    empty = rule.options.empty_indices
    if empty:
        nones = [len(ones) for ones in "".join(str(int(b)) for b in empty).split("0")]
    else:
        nones = [0] * (len(expansion) + 1)
    keep: list[tuple[int, bool, int]] = []
    pending = 0
    for i, symbol in enumerate(expansion):
        pending += nones[i]
        if rule.options.keep_all_tokens or not (symbol.is_term and symbol.filter_out):
            keep.append((i, not symbol.is_term and symbol.name.startswith("_"), pending))
            pending = 0
    pending += nones[len(expansion)]
    as_is = not pending and len(keep) == len(expansion) and not any(splice or n for _, splice, n in keep)
    origin = rule.origin.name
    name = None if origin.startswith("_") else (rule.alias or rule.options.template_source or origin)
    return Rule(len(expansion), origin, name, None if as_is else tuple(keep), pending)
