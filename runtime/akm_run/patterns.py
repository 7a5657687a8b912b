"""Which `pattern` refinements are safe to match: a static test for catastrophic backtracking.

Python's `re` (and so `jsonschema`) backtracks, and a match cannot be interrupted, so a pattern such
as `^(a+)+$` can spend minutes on a 30-character value. Rather than time-box each match, plans admit
only patterns whose matching time is bounded by their structure: the compiler reports any other
pattern as E306 and plan verification refuses it, so neither `akmc check` (which matches defaults
and literal bindings) nor `akm-run` (which matches params and outputs) can be wedged by one.

A pattern is refused when it has
- a backreference or a conditional group (matching them is NP-hard in general);
- a quantifier that can repeat more than once inside another such quantifier, one of them unbounded
  (`(a+)+`, `(a*)*`, `(a{1,3})+`, `(\\w+\\s?)*`): exponentially many ways to split the text;
- alternatives that can start with the same character inside an unbounded quantifier
  (`(a|ab)*`, `(\\w|\\d)+`): again exponentially many ways;
- two unbounded quantifiers in a row whose characters overlap (`\\d+\\d*`, `.*.*`): polynomially
  many ways, with a degree that grows with each one.
Atomic groups and possessive quantifiers never backtrack into themselves and are allowed.
"""

from __future__ import annotations

import re
from re import _constants as c  # the parser `re` itself uses (Python 3.11+)
from re import _parser as parser
from typing import Any

# A set of characters is a frozenset of code points, or None for "any character".
_REPEATS = {c.MAX_REPEAT, c.MIN_REPEAT}
_CATEGORIES = {
    c.CATEGORY_DIGIT: frozenset(range(ord("0"), ord("9") + 1)),
    c.CATEGORY_SPACE: frozenset(map(ord, " \t\n\r\f\v")),
    c.CATEGORY_WORD: frozenset(
        [*range(ord("0"), ord("9") + 1), *range(ord("A"), ord("Z") + 1), *range(ord("a"), ord("z") + 1), ord("_")]
    ),
}
_WIDE_RANGE = 4096  # a range wider than this counts as "any character" (conservative)


class _Unsafe(Exception):
    pass


def unsafe(pattern: str) -> str | None:
    """Why matching `pattern` may take time exponential (or of growing polynomial degree) in the
    length of the value, or None when it is safe. The pattern must compile (`re.compile`)."""
    try:
        tree = parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None  # not ours to judge: the caller reports the compile error
    try:
        _walk(list(tree))
    except _Unsafe as why:
        return str(why)
    except RecursionError:
        return "it nests too deeply to analyse"
    return None


def _unbounded(maximum: int) -> bool:
    return bool(maximum == c.MAXREPEAT)


def _walk(items: list[Any], again: frozenset[int] | bool | None = False, tail_nullable: bool = False) -> None:
    """Walk one sequence. `again` is the set of characters that can start the next iteration of the
    nearest enclosing quantifier that repeats (False when there is none); `tail_nullable` says whether
    what follows this sequence inside that quantifier can match empty text."""
    previous: frozenset[int] | None = frozenset()  # characters of unbounded repeats since the last solid item
    for position, (op, av) in enumerate(items):
        rest_nullable = tail_nullable and _first(items[position + 1 :])[1]
        if op in (c.GROUPREF, c.GROUPREF_EXISTS):
            raise _Unsafe("it uses a backreference or a conditional group")
        if op in _REPEATS:
            low, high, body = av
            chars, nullable = _first(list(body))
            if high > 1 and again is not False and rest_nullable and _overlap(chars, again):  # type: ignore[arg-type]
                raise _Unsafe("it nests a repeated group inside another, such as `(a+)+`")
            if _unbounded(high):
                if _overlap(previous, chars):
                    raise _Unsafe("two unbounded quantifiers in a row can match the same characters, such as `a*a*`")
                previous = None if chars is None or previous is None else previous | chars
                _branches(list(body), chars)
            elif low > 0 and not nullable:
                previous = frozenset()
            if high > 1:
                _walk(list(body), chars, True)
            else:
                _walk(list(body), again, rest_nullable)
            continue
        if op == c.POSSESSIVE_REPEAT or op == c.ATOMIC_GROUP:
            _walk(list(av[2] if op == c.POSSESSIVE_REPEAT else av))  # never backtracks into itself
            previous = frozenset()
            continue
        if op == c.SUBPATTERN:
            _walk(list(av[3]), again, rest_nullable)
        elif op == c.BRANCH:
            for branch in av[1]:
                _walk(list(branch), again, rest_nullable)
        elif op in (c.ASSERT, c.ASSERT_NOT):
            _walk(list(av[1]))
        if not _first_of(op, av)[1]:  # a solid item separates two quantifiers
            previous = frozenset()


def _branches(items: list[Any], again: frozenset[int] | None, tail_nullable: bool = True) -> None:
    """Inside an unbounded quantifier whose iterations start with `again`: alternatives must not be
    able to match the same text. Two alternatives that can start with the same character are
    ambiguous; so is an alternative that can match nothing at the end of an iteration when another
    one can start the next iteration (`(a|aa)*`, which the parser keeps as `a(?:|a)*`)."""
    for position, (op, av) in enumerate(items):
        rest_nullable = tail_nullable and _first(items[position + 1 :])[1]
        if op == c.SUBPATTERN:
            _branches(list(av[3]), again, rest_nullable)
        elif op == c.BRANCH:
            seen: list[frozenset[int] | None] = []
            for branch in av[1]:
                chars, _ = _first(list(branch))
                if any(_overlap(chars, other) for other in seen):
                    raise _Unsafe("alternatives inside a repeated group can match the same text, such as `(a|a)*`")
                seen.append(chars)
            empty = any(_first(list(branch))[1] for branch in av[1])
            if empty and rest_nullable and any(_overlap(chars, again) for chars in seen if chars):
                raise _Unsafe("alternatives inside a repeated group can match the same text, such as `(a|aa)*`")


def _overlap(a: frozenset[int] | None, b: frozenset[int] | None) -> bool:
    if (a is not None and not a) or (b is not None and not b):
        return False  # nothing on one side
    return a is None or b is None or bool(a & b)


def _first(items: list[Any]) -> tuple[frozenset[int] | None, bool]:
    """The characters a sequence can start with (None: any) and whether it can match empty text."""
    found: set[int] = set()
    for op, av in items:
        chars, nullable = _first_of(op, av)
        if chars is None:
            return None, False
        found |= chars
        if not nullable:
            return frozenset(found), False
    return frozenset(found), True


def _first_of(op: Any, av: Any) -> tuple[frozenset[int] | None, bool]:
    if op == c.LITERAL:
        return frozenset((av,)), False
    if op == c.IN:
        return _set(av), False
    if op in (c.ANY, c.NOT_LITERAL):
        return None, False
    if op == c.AT:
        return frozenset(), True
    if op in _REPEATS or op == c.POSSESSIVE_REPEAT:
        chars, nullable = _first(list(av[2]))
        return chars, nullable or av[0] == 0
    if op == c.SUBPATTERN:
        return _first(list(av[3]))
    if op == c.ATOMIC_GROUP:
        return _first(list(av))
    if op == c.BRANCH:
        found: set[int] = set()
        empty = False
        for branch in av[1]:
            chars, nullable = _first(list(branch))
            if chars is None:
                return None, False
            found |= chars
            empty = empty or nullable
        return frozenset(found), empty
    if op in (c.ASSERT, c.ASSERT_NOT):
        return frozenset(), True
    return None, False


def _set(members: list[Any]) -> frozenset[int] | None:
    found: set[int] = set()
    for op, av in members:
        if op == c.NEGATE:
            return None
        if op == c.LITERAL:
            found.add(av)
        elif op == c.RANGE:
            low, high = av
            if high - low > _WIDE_RANGE:
                return None
            found.update(range(low, high + 1))
        elif op == c.CATEGORY and av in _CATEGORIES:
            found |= _CATEGORIES[av]
        else:
            return None
    return frozenset(found)
