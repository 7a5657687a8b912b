"""The checker's work grows linearly with the size of a union, a route and an object type.

Work is counted, never timed: the number of lines the type checker's modules execute (a trace hook
counts them, so a loop inside one function counts once per turn; parsing is left out). Linear work
makes 4 times the input cost about 4 times the lines; the pairwise checks
these tests replaced cost 16 times (a route over 4,000 literals took 31.8 s, a union of 4,000
object types 98 s)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from akmc import resolve, typecheck, types
from helpers import Checker, source

if TYPE_CHECKING:
    from _typeshed import TraceFunction

CHECKER = {module.__file__ for module in (types, typecheck, resolve)}

# linear is about 4 (4 times the input); n log n about 5; pairwise 16
GROWTH_BOUND = 6.0


def lines(check: Callable[[], list[str]]) -> tuple[int, list[str]]:
    """How many lines of the checker's modules `check` executes, and what it returned."""
    count = 0

    def local(_frame: FrameType, _event: str, _arg: object) -> TraceFunction:
        nonlocal count
        count += 1
        return local

    def hook(frame: FrameType, _event: str, _arg: object) -> TraceFunction | None:
        return local if frame.f_code.co_filename in CHECKER else None

    sys.settrace(hook)
    try:
        found = check()
    finally:
        sys.settrace(None)
    return count, found


def growth(codes: Checker, shape: Callable[[int], str], small: int, expected: list[str]) -> float:
    """The ratio of the lines a check of `shape(4 * small)` makes to those of `shape(small)`."""
    codes(shape(small))  # imports and caches happen outside the count
    low, found_low = lines(lambda: codes(shape(small)))
    high, found_high = lines(lambda: codes(shape(4 * small)))
    assert found_low == expected and found_high == expected
    return high / low


def routed_over(n: int, duplicated: bool = False) -> str:
    """A route over a param of N string literals with a case for each, to four later steps."""
    names = [f'"c{i // 2 if duplicated else i}"' for i in range(n)]
    cases = "\n".join(f'    "c{i}" -> t{i % 4}' for i in range(n // 2 if duplicated else n))
    steps = "\n".join(f'  step t{i} {{ shell "x" }}' for i in range(4))
    return (
        f'workflow "w" {{\n  params {{ k: {" | ".join(names)} }}\n'
        f"  step r {{ route params.k {{\n{cases}\n  }} }}\n{steps}\n}}\n"
    )


def objects(n: int) -> str:
    """A step whose output is a union of N object types, exported under that same declared type."""
    union = " | ".join(f"{{ f{i}: int, g: string }}" for i in range(n))
    return (
        f'workflow "w" {{\n  outputs {{ o: {union} = steps.a.output }}\n  step a {{ shell "x" output: {union} }}\n}}\n'
    )


def test_a_route_over_a_union_of_literals_is_checked_in_linear_work(codes: Checker) -> None:
    assert growth(codes, routed_over, 250, []) < GROWTH_BOUND


def test_a_route_with_duplicated_literals_is_checked_in_linear_work(codes: Checker) -> None:
    assert growth(codes, lambda n: routed_over(n, duplicated=True), 250, []) < GROWTH_BOUND


def test_a_union_of_object_types_is_checked_in_linear_work(codes: Checker) -> None:
    assert growth(codes, objects, 250, []) < GROWTH_BOUND


def test_a_wide_object_type_is_checked_in_linear_work(codes: Checker) -> None:
    def wide(n: int) -> str:
        fields = ", ".join(f"f{i}: int" for i in range(n))
        return (
            f'workflow "w" {{\n  outputs {{ o: {{ {fields} }} = steps.a.output }}\n'
            f'  step a {{ shell "x" output: {{ {fields} }} }}\n}}\n'
        )

    assert growth(codes, wide, 250, []) < GROWTH_BOUND


def test_a_union_that_does_not_fit_is_still_reported(codes: Checker) -> None:
    """The shortcut of identical members never accepts what the member-wise check rejects."""
    src = source("""
        workflow "w" {
          outputs {
            a: { x: int } | { y: int } = steps.s.output
            b: 1 | 2 = steps.t.output
            c: number | "x" = steps.t.output
            d: list[int] | { x: int } = steps.u.output
          }
          step s { shell "x" output: { x: int } | { y: string } }
          step t { shell "x" output: 1 | true | 2.0 }
          step u { shell "x" output: list[int] | { x: int, z?: int } | list[number] }
        }
    """)
    assert codes(src) == ["E305@3", "E305@4", "E305@5", "E305@6"]


def test_a_route_still_reports_what_it_does_not_cover(codes: Checker) -> None:
    src = source("""
        workflow "w" {
          params { k: "a" | "b" | "a" | "c" }
          step r { route params.k { "a" -> x  "b" -> x  "d" -> x } }
          step x { shell "x" }
        }
    """)
    [never, uncovered] = codes.diagnostics(src)
    assert (never.code, uncovered.code) == ("E304", "W701")
    assert '"c"' in uncovered.message and '"a"' not in uncovered.message


def test_a_route_over_literals_of_different_types_must_cover_each(codes: Checker) -> None:
    """`1` and `true` are equal in Python but two JSON values (`1.0` is the number `1`, docs/types.md):
    a route over `1 | true | 1.0` that covers only `1` does not cover `true` (they were merged, and
    W701 was missed)."""
    src = source("""
        workflow "w" {
          params { k: 1 | true | 1.0 }
          step r { route params.k { 1 -> x } }
          step x { shell "x" }
        }
    """)
    [d] = codes.diagnostics(src)
    assert d.code == "W701" and "does not cover true and" in d.message
