"""The grammar's LALR tables and per-state lexer patterns, in the plain shapes the parse loop reads.

The grammar stays the one definition of the language: every pattern, keyword and action here is
Lark's own (its contextual lexer's per-state scanners and its LALR(1) table), read into tuples and
dicts. Deriving them needs Lark and about 50 ms, so they are stored beside the grammar in
`grammar/akm.tables.json`, stamped with the grammar's hash; when the stamp does not match the
grammar they are derived again, so an edited grammar is never parsed with stale tables
(`python -m akmc.frontend.tables` rewrites the file; a test keeps it current). The tables are
built once per process and shared, read-only, by every parse on any thread."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from akmc.resources import data_path

# LARK_IMPORT: Lark (about 50 ms of start-up) is imported only to derive the tables again or to build
# its own parser (the formatter, a syntax error's explanation): a check of sources that parse never loads it.
if TYPE_CHECKING:
    from lark import Lark

STORED = "akm.tables.json"


class Rule(NamedTuple):
    """One grammar rule as a reduction: pop `size` values, keep some, hand them to `name`."""

    size: int
    origin: str  # the nonterminal it reduces to (the goto's key)
    name: str | None  # the builder's method; None for an inlined rule (`_x`), spliced into its parent
    # (index, splice, placeholders before it) per kept child; None when every child is kept as is
    keep: tuple[tuple[int, bool, int], ...] | None
    trailing: int  # placeholders after the last kept child


class Scanner:
    """What one parser state lets the lexer read: one alternation of the allowed terminals, and for a
    pattern terminal (NAME) the keywords it must become when it spells one (Lark's `UnlessCallback`).

    The pattern is compiled when a parse first needs it (a file visits about two thirds of the
    states' patterns, and compiling all of them costs a one-file check several milliseconds). Two
    threads that compile it at once store equal patterns, so the race is harmless."""

    __slots__ = ("compiled", "keywords", "source")

    def __init__(self, source: str, keywords: Mapping[str, Mapping[str, str]]) -> None:
        self.source = source
        self.keywords = keywords
        self.compiled: re.Pattern[str] | None = None

    def compile(self) -> re.Pattern[str]:
        self.compiled = re.compile(self.source)
        return self.compiled


class Tables(NamedTuple):
    # state → terminal or nonterminal → the state to shift to (or go to), or ~rule to reduce by
    actions: tuple[Mapping[str, int], ...]
    rules: tuple[Rule, ...]
    scanners: tuple[Scanner, ...]  # by state
    start: int
    end: int


def grammar_parser(**options: Any) -> Lark:
    """Lark's LALR parser with the contextual lexer for the grammar file, with `options` (its
    analysis is cached on disk by Lark)."""
    from lark import Lark  # LARK_IMPORT

    text = data_path("grammar", "akm.lark").read_text(encoding="utf-8")
    return Lark(
        text, parser="lalr", lexer="contextual", **options, cache=True
    )  # in this order: Lark keys its cache by it


@lru_cache(maxsize=1)
def lark_parser() -> Lark:
    """Lark's parser for the grammar. It defines the tables, and explains a syntax error when the fast
    parse loop meets one."""
    return grammar_parser(propagate_positions=True, maybe_placeholders=True)


@lru_cache(maxsize=1)
def tables() -> Tables:
    """The shared tables, built once per process: from the stored file when it matches the grammar."""
    try:
        stored = json.loads(data_path("grammar", STORED).read_bytes())
    except (OSError, ValueError):
        stored = None
    if not isinstance(stored, dict) or stored.get("grammar") != grammar_hash():
        stored = derive()
    scanners = [Scanner(source, words) for source, words in zip(stored["patterns"], stored["keywords"], strict=True)]
    return Tables(
        tuple(stored["actions"]),
        tuple(Rule(s, o, n, None if k is None else tuple(map(tuple, k)), t) for s, o, n, k, t in stored["rules"]),
        tuple(scanners[i] for i in stored["scanners"]),
        stored["start"],
        stored["end"],
    )


def grammar_hash() -> str:
    return hashlib.sha256(data_path("grammar", "akm.lark").read_bytes()).hexdigest()


def derive() -> dict[str, Any]:
    """The tables from Lark's analysis of the grammar, as JSON data."""
    from lark.parsers.lalr_analysis import Shift  # LARK_IMPORT

    lark = lark_parser()
    frontend: Any = lark.parser
    table = frontend.parser.parser.parse_table
    index = {rule: i for i, rule in enumerate(lark.rules)}
    count = max(table.states) + 1
    actions: list[dict[str, int]] = [{} for _ in range(count)]
    for state, row in table.states.items():
        for symbol, (action, arg) in row.items():
            actions[state][symbol] = arg if action is Shift else ~index[arg]
    order = _canonical_order(actions, table.start_states["start"])
    number = {old: new for new, old in enumerate(order)}
    by_lexer: dict[int, int] = {}
    patterns: list[str] = []
    keywords: list[dict[str, dict[str, str]]] = []
    for state in order:
        lexer = frontend.lexer.lexers[state]
        if id(lexer) not in by_lexer:
            by_lexer[id(lexer)] = len(patterns)
            pattern, words = _scanner(lexer)
            patterns.append(pattern)
            keywords.append(words)
    return {
        "grammar": grammar_hash(),
        "start": number[table.start_states["start"]],
        "end": number[table.end_states["start"]],
        "actions": [{s: number[a] if a >= 0 else a for s, a in actions[state].items()} for state in order],
        "rules": [list(_rule(rule)) for rule in lark.rules],
        "patterns": patterns,
        "keywords": keywords,
        "scanners": [by_lexer[id(frontend.lexer.lexers[state])] for state in order],
    }


def _canonical_order(actions: list[dict[str, int]], start: int) -> list[int]:
    """Lark numbers its LALR states in an order that changes from process to process (it walks
    sets of items), so the states are renumbered breadth-first from the start state, following
    shifts and gotos by symbol name: the same grammar always gives the same stored tables."""
    order = [start]
    seen = {start}
    for state in order:  # grows while it is walked
        for symbol in sorted(actions[state]):
            target = actions[state][symbol]
            if target >= 0 and target not in seen:
                seen.add(target)
                order.append(target)
    if len(order) != len(actions):
        raise RuntimeError("the grammar has LALR states that no parse can reach")
    return order


def _scanner(lexer: Any) -> tuple[str, dict[str, dict[str, str]]]:
    from lark.lexer import PatternStr, UnlessCallback  # LARK_IMPORT

    scanner = lexer.scanner  # built lazily by Lark
    if len(scanner._mres) != 1:  # Python's `re` limits groups; this grammar stays far below
        raise RuntimeError("the grammar's terminals no longer fit one regular expression per lexer state")
    if lexer.ignore_types != {"WS", "COMMENT"}:
        raise RuntimeError("the parse loop skips exactly the grammar's WS and COMMENT terminals")
    keywords: dict[str, dict[str, str]] = {}
    for name, callback in lexer.callback.items():
        if isinstance(callback, UnlessCallback):
            strings = callback.scanner.terminals
            assert all(isinstance(t.pattern, PatternStr) and not t.pattern.flags for t in strings)
            keywords[name] = {t.pattern.value: t.name for t in strings}
    # Whitespace can only lex as WS (no other terminal starts with it), so each match skips the
    # whitespace before a token itself: one match per token instead of two.
    skip = "(?:" + lexer.terminals_by_name["WS"].pattern.to_regexp() + ")?"
    return skip + "(?:" + scanner._mres[0].pattern + ")", keywords


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


def write() -> None:
    """Store the tables derived from the grammar beside it (run after editing the grammar)."""
    path = data_path("grammar", "akm.lark").with_name(STORED)
    path.write_text(json.dumps(derive(), sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    write()
